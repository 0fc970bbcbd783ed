"""Operations driven with scripted answers: no database, no embedder, no model.

Every operation is a generator of I/O requests (:mod:`agent_memory.db.requests`), so a
test can play the database: :func:`drive` answers each request from a script and keeps
what the operation asked for. The tests look at what an operation returns and at the
requests it made and their parameters, never at the text of its SQL (which moves between
modules); at most a keyword of it.

Nothing here may start the database: the module uses none of conftest's database fixtures
(:func:`test_this_module_needs_no_database` keeps it so).
"""

from __future__ import annotations

import inspect
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent_memory import access, ops
from agent_memory.config import MemoryConfig
from agent_memory.db.migrations import MIGRATIONS, migrate
from agent_memory.db.requests import Commit, Copy, Embed, Llm, Op, Sql
from agent_memory.errors import PermissionDeniedError
from agent_memory.extraction.pipeline import extract_memories
from agent_memory.models import MemoryItem, Rejection, RejectionReason, Scope, SearchResult
from agent_memory.validation import check_identity

Request = Sql | Copy | Embed | Commit | Llm
Answers = Sequence[Any] | Callable[[Request], Any]

#: without copies of big scopes' vectors (their requests need a real cache; tests/test_vector_cache.py)
CONFIG = MemoryConfig.defaults(vector_cache_rows=0)
VECTOR = [0.6, 0.8, 0.0]
NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def drive(op: Op[Any], answers: Answers, requests: list[Request] | None = None) -> Any:
    """Run ``op`` to its end, answering each request it yields from ``answers`` (a list, in
    order, or a function of the request); answers the operation's result.

    Every request is appended to ``requests`` as it is made, so a test can look at them after
    the operation raised too. An exception as an answer is thrown into the operation at its
    ``yield``, as :func:`agent_memory.db.requests.run` does with a failed request. Like
    ``run``, the driver refuses a model call inside an open transaction. A list must be
    used up exactly: an operation that asks for more, or less, than the script is a failure.
    """
    seen = [] if requests is None else requests
    script: Iterator[Any] | None = None if callable(answers) else iter(answers)
    in_transaction = False
    answer: Any = None
    while True:
        try:
            request = op.throw(answer) if isinstance(answer, BaseException) else op.send(answer)
        except StopIteration as stop:
            if script is not None:
                left = list(script)
                assert not left, f"the operation ended with {len(left)} scripted answers unused: {left!r}"
            return stop.value
        seen.append(request)
        if isinstance(request, Llm):
            assert not in_transaction, "a model call inside a transaction (yield Commit() first)"
        in_transaction = isinstance(request, (Sql, Copy)) or (in_transaction and not isinstance(request, Commit))
        if script is None:
            answer = answers(request)  # type: ignore[operator]
        else:
            answer = next(script, _UNSCRIPTED)
            assert answer is not _UNSCRIPTED, f"the operation asked for more than was scripted: {request!r}"


_UNSCRIPTED = object()


def quiet(request: Request) -> Any:
    """The answer of a database that has nothing: no row, no rows, nothing changed."""
    if isinstance(request, Sql):
        return {"all": [], "one": None, "rowcount": 0, "none": None}[request.fetch]
    if isinstance(request, Embed):
        return [list(VECTOR) for _ in request.texts]
    if isinstance(request, Copy):
        return len(request.rows)
    return None


def item_row(**fields: Any) -> dict[str, Any]:
    """A ``memory_items`` row as the database returns it (the columns ``ops.row_to_item`` reads)."""
    row: dict[str, Any] = {
        "id": uuid.uuid4(), "content": "Prefers dark roast coffee.", "memory_type": "preference",
        "scope": "user", "scope_id": "alice", "user_id": "alice", "project_id": None, "session_id": None,
        "source": "user", "source_id": None, "confidence": 1.0, "visibility": "members", "status": "active",
        "created_at": NOW, "updated_at": NOW, "last_used_at": None, "access_count": 0, "metadata": {},
        "valid_from": NOW, "valid_to": None, "superseded_by": None, "version": 1,
    }
    return row | fields


def stored(params: dict[str, Any]) -> dict[str, Any]:
    """The row an INSERT of ``params`` returns (what the caller sent, as stored)."""
    sent = {k: v for k, v in params.items() if k in item_row()}
    return item_row(**(sent | {"metadata": params["metadata"].obj}))


def sql(requests: Sequence[Request]) -> list[Sql]:
    return [r for r in requests if isinstance(r, Sql)]


def inserts(requests: Sequence[Request]) -> list[Sql]:
    return [r for r in sql(requests) if "INSERT" in str(r.query).upper()]


def param_values(request: Sql) -> list[Any]:
    params = request.params
    if params is None:
        return []
    return list(params.values()) if isinstance(params, dict) else list(params)


# --- saving a memory ------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "reason"), [
    ("my password is hunter2!", RejectionReason.SENSITIVE),
    ("hi", RejectionReason.TOO_SHORT),
    ("   ", RejectionReason.EMPTY),
])
def test_the_gate_refuses_before_any_io(content, reason):
    """A refused memory is answered with a Rejection before anything is asked of anyone: a
    secret is not even sent to the embedding provider."""
    requests: list[Request] = []
    result = drive(ops.add_memory(CONFIG, check_identity("alice"), ops.make_new_memory(content)), [], requests)
    assert isinstance(result, Rejection) and result.reason is reason
    assert "hunter2" not in result.message
    assert requests == []


def test_a_duplicate_answers_the_stored_memory_and_writes_nothing():
    existing = item_row(content="Prefers dark roast coffee.", access_count=4)

    def db(request: Request) -> Any:
        if isinstance(request, Sql) and request.fetch == "one":
            if request.params == {"id": existing["id"]}:  # the duplicate, marked as used again
                return existing | {"last_used_at": NOW}
            return {"id": existing["id"], "similarity": 0.97}  # the duplicate check finds it
        return quiet(request)

    requests: list[Request] = []
    identity = check_identity("alice")
    result = drive(ops.add_memory(CONFIG, identity, ops.make_new_memory("Prefers  dark roast coffee.")), db, requests)

    assert isinstance(result, MemoryItem)
    assert result.id == existing["id"] and result.deduplicated and result.last_used_at == NOW
    assert inserts(requests) == []
    [embed] = [r for r in requests if isinstance(r, Embed)]
    assert embed.texts == ("Prefers dark roast coffee.",)  # normalized before it is embedded or compared


def test_a_new_memory_is_embedded_then_written_in_one_transaction_as_the_caller():
    def db(request: Request) -> Any:
        if isinstance(request, Sql) and "INSERT" in str(request.query).upper():
            return stored(request.params)  # type: ignore[arg-type]
        return quiet(request)

    requests: list[Request] = []
    identity = check_identity("alice")
    new = ops.make_new_memory("Prefers dark roast coffee.", memory_type="preference", confidence=0.9)
    result = drive(ops.add_memory(CONFIG, identity, new), db, requests)

    # embedded first (outside any transaction), then statements only, the INSERT last; no Commit
    # in between: the lock, the duplicate check and the write are one transaction
    assert isinstance(requests[0], Embed) and requests[0].texts == ("Prefers dark roast coffee.",)
    assert all(isinstance(r, Sql) for r in requests[1:]) and len(requests) >= 3
    [insert] = inserts(requests)
    assert insert is requests[-1]
    row = insert.params
    assert isinstance(row, dict)
    assert (row["user_id"], row["scope"], row["scope_id"]) == ("alice", "user", "alice")
    assert row["project_id"] is None and row["session_id"] is None
    assert row["content"] == "Prefers dark roast coffee." and row["confidence"] == 0.9
    assert row["embedding"] == "[0.6,0.8,0.0]"
    # the lock and the duplicate check name the caller's scope; no statement names anyone else
    assert any("alice" in str(v) for v in param_values(requests[1]))
    named = {str(v) for r in sql(requests) for k, v in (r.params.items() if isinstance(r.params, dict) else ())
             if k in ("user_id", "u", "scope_id")}
    assert named == {"alice"}
    assert isinstance(result, MemoryItem) and result.id == row["id"] and not result.deduplicated
    assert result.user_id == "alice"


@pytest.mark.parametrize(("scope", "scope_id"), [("user", "alice"), ("project", "apollo"), ("session", "s-1")])
def test_a_memory_is_filed_under_the_callers_ids_for_its_scope(scope, scope_id):
    """Whatever the scope, the row's owner is the caller; the scope's id comes from the caller's
    identity (never from the content); a session memory's source is the session's conversation."""
    conversation = uuid.uuid4()

    def db(request: Request) -> Any:
        if isinstance(request, Sql) and "INSERT" in str(request.query).upper():
            return stored(request.params) if isinstance(request.params, dict) else None
        if isinstance(request, Sql) and request.params == {"u": "alice", "k": "project", "s": "apollo"}:
            return {"settings": {}, "role": "editor"}  # alice may write the project
        if isinstance(request, Sql) and request.params == ("alice", "s-1", "s-1"):  # the session's conversation
            return {"id": conversation, "kind": "conversation", "user_id": "alice", "scope": "session",
                    "scope_id": "s-1", "project_id": "apollo", "session_id": "s-1", "external_id": "s-1",
                    "title": "session s-1", "content": "", "metadata": {}, "cursor": None,
                    "created_at": NOW, "updated_at": NOW}
        return quiet(request)

    requests: list[Request] = []
    identity = check_identity("alice", project_id="apollo", session_id="s-1")
    result = drive(ops.add_memory(CONFIG, identity, ops.make_new_memory("Deploys go out on Tuesdays.", scope=scope)),
                   db, requests)
    row = inserts(requests)[-1].params
    assert isinstance(row, dict)
    assert (row["user_id"], row["scope"], row["scope_id"]) == ("alice", scope, scope_id)
    assert row["project_id"] == (None if scope == "user" else "apollo")
    assert row["session_id"] == ("s-1" if scope == "session" else None)
    assert row["source_id"] == str(conversation)  # said in a session, whatever the memory's scope
    assert isinstance(result, MemoryItem) and result.scope is Scope(scope)


# --- access ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("membership", "you_are"), [
    ({"settings": {}, "role": "viewer"}, "you are a viewer"),
    ({"settings": {}, "role": None}, "you are not a member"),
])
def test_a_project_write_is_refused_by_the_membership_row(membership, you_are):
    asked: list[Any] = []

    def db(request: Request) -> Any:
        if isinstance(request, Sql) and isinstance(request.params, dict) and request.params.get("k") == "project":
            asked.append(request.params)
            return membership
        return quiet(request)

    requests: list[Request] = []
    identity = check_identity("alice", project_id="apollo")
    new = ops.make_new_memory("The API is versioned by date.", scope="project")
    with pytest.raises(PermissionDeniedError, match=f"needs the role owner, admin or editor; {you_are}"):
        drive(ops.add_memory(CONFIG, identity, new), db, requests)
    assert asked and all(p["u"] == "alice" and p["s"] == "apollo" for p in asked)
    assert inserts(requests) == []


def test_a_viewer_cannot_add_members_and_nothing_is_written():
    requests: list[Request] = []
    with pytest.raises(PermissionDeniedError, match="managing members in project 'apollo' needs the role owner or "
                                                    "admin; you are a viewer"):
        drive(access.add_member(check_identity("alice"), "project", "apollo", "bob", "editor"),
              [{"settings": {}, "role": "viewer"}], requests)
    [asked] = requests  # the caller's role, and nothing after it
    assert isinstance(asked, Sql) and asked.params == {"u": "alice", "k": "project", "s": "apollo"}


# --- search ---------------------------------------------------------------------------------


def candidate(similarity: float, *, tsv: str = "", age: int = 0) -> dict[str, Any]:
    """A candidate row as the search statement returns it (what ``ranking.rank`` reads)."""
    return {"id": uuid.uuid4(), "similarity": similarity, "confidence": 1.0, "scope_priority": 1.0, "tsv": tsv,
            "created_at": NOW - timedelta(days=age), "kw_df": {"coffe": 1}, "kw_n": 50}


def test_search_ranks_the_scripted_candidates_and_reads_back_the_best():
    """The rows the database offers are ranked by similarity and keyword evidence together,
    cut to k, recorded as used, and answered as SearchResults best first; a hit deleted
    between the two statements is left out rather than failing the search."""
    plain = candidate(0.80)  # closest by vector, but no query word
    worded = candidate(0.60, tsv="'coffe':1,3 'roast':2")  # "coffee" twice: strong keyword evidence
    weaker = candidate(0.70)
    gone = candidate(0.95)  # the closest of all, but deleted before it is read back
    rows = [plain, worded, weaker, gone]
    touched: list[Any] = []

    def db(request: Request) -> Any:
        if isinstance(request, Sql) and request.fetch == "all":
            if isinstance(request.params, dict) and set(request.params) == {"ids"}:
                touched.append(request.params["ids"])
                found = [item_row(id=i, access_count=1, last_used_at=NOW) for i in request.params["ids"]
                         if i != gone["id"]]
                return found[::-1]  # in no particular order: results are matched by id
            return rows
        return quiet(request)

    requests: list[Request] = []
    results = drive(ops.search_memories(CONFIG, check_identity("alice"), "  coffee  ", k=3), db, requests)

    [embed] = [r for r in requests if isinstance(r, Embed)]
    assert embed.texts == ("coffee",) and embed.query
    # the top 3, best first: the keyword evidence puts "coffee coffee" above even the closest vector
    assert touched == [[worded["id"], gone["id"], plain["id"]]]
    assert all(isinstance(r, SearchResult) for r in results)
    assert [r.id for r in results] == [worded["id"], plain["id"]]
    assert [r.similarity for r in results] == [0.60, 0.80]
    assert results[0].keyword > 0 and results[1].keyword == 0
    assert results[0].score > results[1].score
    assert results[0].item.access_count == 1


def test_a_search_with_no_candidates_reads_nothing_back():
    requests: list[Request] = []
    assert drive(ops.search_memories(CONFIG, check_identity("alice"), "coffee"), quiet, requests) == []
    assert [r.params for r in sql(requests) if isinstance(r.params, dict) and set(r.params) == {"ids"}] == []


# --- extraction -----------------------------------------------------------------------------


def conversation_row(conversation: uuid.UUID) -> dict[str, Any]:
    """The row of alice's session s-1 conversation, as the database answers its lookup."""
    return {"id": conversation, "kind": "conversation", "user_id": "alice", "scope": "session", "scope_id": "s-1",
            "project_id": None, "session_id": "s-1", "external_id": "s-1", "title": "session s-1", "content": "",
            "metadata": {}, "cursor": None, "created_at": NOW, "updated_at": NOW}


def test_an_extraction_run_over_its_budget_waits_without_calling_the_model():
    """With the session's runs used up, the run is refused before the model is asked: no run is
    recorded; the messages are kept on the conversation (waiting, the cursor past them) for a
    later run, and the wait is counted."""
    conversation = uuid.uuid4()
    window = CONFIG.extraction_window_hours * 3600.0
    budget_asked: list[Any] = []

    def db(request: Request) -> Any:
        if isinstance(request, Sql) and request.params == ("alice", "s-1", "s-1"):
            return conversation_row(conversation)
        if isinstance(request, Sql) and request.params == ("alice", "s-1", window):
            budget_asked.append(request)
            return {"n": CONFIG.max_extractions}  # every run of the window used
        if isinstance(request, Sql) and request.params == ("user", "alice") and request.fetch == "one":
            return {"dirty": False}  # the user's profile is up to date
        return quiet(request)

    requests: list[Request] = []
    model = object()  # would fail if it were ever called
    report = drive(extract_memories(CONFIG, check_identity("alice", session_id="s-1"),
                                    ["I prefer dark roast coffee in the morning."], model=model), db, requests)

    assert report.status == "rate_limited" and report.runs_left == 0
    assert report.extractor == "llm:object" and report.resource_id == conversation
    assert str(CONFIG.max_extractions) in (report.error or "")
    assert budget_asked
    assert not any(isinstance(r, (Llm, Embed)) for r in requests)
    # after the lookup, the conversation is named once: the messages kept, the wait counted; no run row
    lookup = next(i for i, r in enumerate(requests) if isinstance(r, Sql) and r.params == ("alice", "s-1", "s-1"))
    [kept] = [r for r in sql(requests[lookup + 1:]) if conversation in param_values(r)]
    assert kept.params["wait"] is True and kept.params["cursor"] is not None
    assert [t["text"] for t in kept.params["turns"].obj] == ["I prefer dark roast coffee in the morning."]
    assert not any("memory_extraction_runs" in str(r.query) and "INSERT" in str(r.query) for r in sql(requests))
    # the lock taken to count the runs is let go before the profiles are looked at
    assert any(isinstance(r, Commit) for r in requests[requests.index(budget_asked[0]):])


def test_an_extraction_run_with_budget_left_is_recorded_before_the_model_is_called():
    """The other side of the limit: with a run left, the run is recorded and committed, and
    only then is the model asked (outside any transaction; the driver checks that)."""
    conversation = uuid.uuid4()
    window = CONFIG.extraction_window_hours * 3600.0

    class ModelFailed(RuntimeError):
        pass

    def db(request: Request) -> Any:
        if isinstance(request, Sql) and request.params == ("alice", "s-1", "s-1"):
            return conversation_row(conversation)
        if isinstance(request, Sql) and request.params == ("alice", "s-1", window):
            return {"n": CONFIG.max_extractions - 1}
        if isinstance(request, Sql) and conversation in param_values(request) and request.fetch == "one":
            return {"id": 41}  # the run, recorded
        if isinstance(request, Llm):
            return ModelFailed("the provider is down")  # thrown into the run
        return quiet(request)

    requests: list[Request] = []
    report = drive(extract_memories(CONFIG, check_identity("alice", session_id="s-1"),
                                    ["I prefer dark roast coffee in the morning."], model=object()), db, requests)

    assert report.status == "failed" and report.run_id == 41 and report.runs_left == 0
    assert "the provider is down" in (report.error or "")
    [llm] = [i for i, r in enumerate(requests) if isinstance(r, Llm)]
    [recorded, *_] = [i for i, r in enumerate(requests) if isinstance(r, Sql) and conversation in param_values(r)]
    assert recorded < llm and any(isinstance(r, Commit) for r in requests[recorded:llm])
    assert requests[recorded].params == ("alice", "s-1", None, conversation, "llm:object")
    # the failure is recorded on run 41, and the messages are kept on the conversation for the next run
    assert any(41 in param_values(r) for r in sql(requests[llm:]))
    [kept] = [r for r in sql(requests[llm:]) if conversation in param_values(r)]
    assert kept.params["wait"] is False and [t["text"] for t in kept.params["turns"].obj] == [
        "I prefer dark roast coffee in the morning."]


# --- migrations -----------------------------------------------------------------------------


def test_a_caller_without_an_embedder_sizes_only_a_new_database():
    """The checkpointer's migrations: every pending one, in list order; the size of a database
    that recorded one is that size, and the configured one is never asked for."""
    names = [m.name for m in MIGRATIONS]
    pending = {"0009_reembed_staging", "0010_search_at_scale"}
    asked_for_size: list[int] = []

    def configured_size() -> int:
        asked_for_size.append(384)
        return 384

    def db(request: Request) -> Any:
        if isinstance(request, Sql) and request.fetch == "one":
            if "pg_try_advisory" in request.query:  # the migrations' lock: free
                return {"got": True}
            if isinstance(request.params, tuple) and request.params[0] in names:  # is this migration recorded?
                return None if request.params[0] in pending else {"done": 1}
            if request.params is None:  # where we are, the size the database recorded (and that it has one)
                return {"schema": "public", "made": True, "value": "1536"}
        return quiet(request)

    requests: list[Request] = []
    applied = drive(migrate(configured_size, None), db, requests)
    assert applied == ["0009_reembed_staging", "0010_search_at_scale"] and asked_for_size == []
    sent = [r.query for r in sql(requests)]
    by_name = {m.name: m for m in MIGRATIONS}
    sized, before = by_name["0010_search_at_scale"], by_name["0009_reembed_staging"]
    assert sized.statement(1536) in sent and sized.statement(384) not in sent
    assert sent.index(before.sql) < sent.index(sized.statement(1536))
    assert not any(isinstance(r, Embed) for r in requests)


def test_a_caller_without_an_embedder_sizes_a_new_database_by_its_configuration():
    names = [m.name for m in MIGRATIONS]

    def db(request: Request) -> Any:
        if isinstance(request, Sql) and request.fetch == "one":
            if "pg_try_advisory" in request.query:  # the migrations' lock: free
                return {"got": True}
            if isinstance(request.params, tuple) and request.params[0] in names:
                return None  # nothing recorded: a new database
            if request.params is None:
                return {"schema": "public", "made": False}  # no record, no size recorded before 0002
        return quiet(request)

    requests: list[Request] = []
    assert drive(migrate(lambda: 384, None), db, requests) == names
    sent = [r.query for r in sql(requests)]
    statements = [m.statement(384) for m in MIGRATIONS]
    assert [q for q in sent if q in statements] == statements  # each once, in list order


def test_an_up_to_date_database_is_two_reads_and_no_lock():
    """Where we are and the applied names, in the caller's transaction: nothing is locked,
    committed or applied, and the size is never asked for."""
    def db(request: Request) -> Any:
        if isinstance(request, Sql) and request.fetch == "one":
            return {"schema": "public", "made": True}
        if isinstance(request, Sql) and request.fetch == "all":
            return [{"name": m.name} for m in MIGRATIONS]
        return quiet(request)

    requests: list[Request] = []
    assert drive(migrate(lambda: 1 / 0, None), db, requests) == []
    assert len(requests) == 2 and all(isinstance(r, Sql) for r in requests)
    assert not any("lock" in r.query for r in sql(requests))


# --- this module ----------------------------------------------------------------------------


def test_this_module_needs_no_database():
    database_fixtures = {"pg_server_dsn", "fresh_dsn", "dsn", "memory", "amemory", "tenant", "embeddings"}
    module = sys.modules[__name__]
    for name, test in inspect.getmembers(module, inspect.isfunction):
        if name.startswith("test_"):
            assert not database_fixtures & set(inspect.signature(test).parameters), name
