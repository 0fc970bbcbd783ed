"""No secret is stored on any path: every write, then every table of the database searched.

Each test sends a sample of secrets (``tests/secrets_corpus.py``) through one way in
(a saved memory, an import, the memory_save tool, extraction by rules and by a model, an
edit, an export import, a document, a profile, metadata, a session snapshot) and then reads
EVERY table of the database as text (``SELECT t::text FROM <table> t``). A secret found in
any of them fails the test, naming the table and the path. A benign sample must still be
stored. The module has its own empty database, so what other test files store on purpose
can't confuse the scan, and nothing here can leak into theirs.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import uuid
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import psycopg
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from psycopg import sql

from agent_memory import AsyncMemoryService, InvalidInputError, MemoryService, Rejection
from agent_memory.db.requests import run
from agent_memory.episodic.snapshots import save_snapshot
from agent_memory.extraction.pipeline import MAX_PROPOSALS
from agent_memory.middleware import MemoryMiddleware
from agent_memory.models import RejectionReason
from agent_memory.testing import ScriptedChatModel, tool_call
from agent_memory.withheld import find_secret, redact, secret_in_json

try:
    from secrets_corpus import BENIGN, SECRETS
except ImportError:  # the shared corpus is written by another part of the suite; a few meanwhile
    class _Secret(NamedTuple):
        kind: str
        text: str
        secret: str

    SECRETS = [
        _Secret("aws", "My AWS key is AKIAIOSFODNN7EXAMPLE for the build.", "AKIAIOSFODNN7EXAMPLE"),
        _Secret("password", "My password is Tr0ub4dor&3xQ9 for the VPN.", "Tr0ub4dor&3xQ9"),
        _Secret("github", "Use ghp_abcdefghijklmnopqrstuvwxyz0123456789 for the repo.",
                "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        _Secret("card", "My card number is 4111 1111 1111 1111.", "4111 1111 1111 1111"),
        _Secret("openai", "The OpenAI key is sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z for testing.",
                "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
    ]
    BENIGN = ["Prefers dark mode in every editor.", "Lives in Lisbon and works remotely.",
              "The team deploys on Fridays only after review."]

#: secrets sent per path: spread over the kinds, and the same sample on every run
SAMPLE = 40


def sample(n: int = SAMPLE, *, seed: int = 11) -> list[Any]:
    """Up to ``n`` corpus entries, round-robin over the kinds so every kind is tried."""
    by_kind: dict[str, list[Any]] = {}
    for entry in SECRETS:
        by_kind.setdefault(entry.kind, []).append(entry)
    rng = random.Random(seed)
    for entries in by_kind.values():
        rng.shuffle(entries)
    picked: list[Any] = []
    while len(picked) < min(n, len(SECRETS)):
        for entries in by_kind.values():
            if entries and len(picked) < n:
                picked.append(entries.pop())
    return picked


def forms(secret: str) -> set[str]:
    """The ways ``secret`` can appear in a row's text: as is, inside a quoted record field
    (``"`` and ``\\`` doubled) and inside JSON (escaped), and the JSON form in a record."""
    as_json = json.dumps(secret, ensure_ascii=False)[1:-1]
    quoted = {s.replace("\\", "\\\\").replace('"', '""') for s in (secret, as_json)}
    return {secret, as_json, *quoted}


def tables(conn: psycopg.Connection) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        " AND table_type = 'BASE TABLE' ORDER BY table_name").fetchall()]


def leaks(dsn: str, secrets: Iterable[str], *, only: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """``(table, secret)`` for every secret found in any row of any table (or of ``only``)."""
    wanted = [(s, forms(s)) for s in dict.fromkeys(secrets)]
    found: list[tuple[str, str]] = []
    with psycopg.connect(dsn) as conn:
        names = tables(conn)
        assert {"memory_items", "memory_resources", "memory_profiles", "memory_decisions"} <= set(names)
        for table in names if only is None else list(only):
            text = "\n".join(r[0] for r in conn.execute(
                sql.SQL("SELECT t::text FROM {} t").format(sql.Identifier(table))).fetchall())
            found += [(table, s) for s, variants in wanted if any(_present(v, text) for v in variants)]
    return found


def _present(value: str, text: str) -> bool:
    """A short secret (a PIN, a CVV) counts only as a whole token: "1474" sits in a timestamp by chance."""
    if len(value) >= 6:
        return value in text
    return re.search(rf"(?<![0-9A-Za-z]){re.escape(value)}(?![0-9A-Za-z])", text) is not None


def assert_no_leak(dsn: str, path: str, secrets: Iterable[str], **kwargs: Any) -> None:
    found = leaks(dsn, secrets, **kwargs)
    assert not found, f"{path}: secrets stored in " + ", ".join(
        f"{table} ({next(e.kind for e in SECRETS if e.secret == s)})" for table, s in found)


@pytest.fixture(scope="module")
def db(fresh_dsn, config, embeddings) -> Iterator[tuple[MemoryService, str]]:
    dsn = fresh_dsn()
    with MemoryService(dsn, config=config, embeddings=embeddings) as service:
        yield service, dsn


def ids() -> dict[str, str]:
    tag = uuid.uuid4().hex[:10]
    return {"user_id": f"u-{tag}", "session_id": f"s-{tag}"}


def stored_contents(dsn: str, user: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT content FROM memory_items WHERE user_id = %s", (user,))]


def test_the_scan_finds_a_secret_where_it_is(db) -> None:
    """The scan itself: a row planted by hand, in plain text and inside JSON, is found."""
    service, dsn = db
    secret = sample(1)[0].secret
    user = ids()["user_id"]
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO memory_profiles (kind, subject_id, manual) VALUES ('user', %s, %s)",
                     (user, json.dumps({"background": f'quoted "{secret}"'})))
    assert {t for t, _ in leaks(dsn, [secret])} == {"memory_profiles"}
    with psycopg.connect(dsn) as conn:
        conn.execute("DELETE FROM memory_profiles WHERE subject_id = %s", (user,))
    assert leaks(dsn, [secret]) == []


def test_add_explicit_memory(db) -> None:
    service, dsn = db
    who = ids()
    picked = sample()
    for entry in picked:
        result = service.for_user(**who).add(entry.text)
        assert isinstance(result, Rejection) and result.reason is RejectionReason.SENSITIVE, (entry.kind, result)
        assert entry.secret not in result.message
    kept = [service.for_user(**who).add(text) for text in BENIGN[:5]]
    assert not any(isinstance(k, Rejection) for k in kept), kept
    assert {k.content for k in kept} <= set(stored_contents(dsn, who["user_id"]))
    assert_no_leak(dsn, "add_explicit_memory", [e.secret for e in picked])


def test_import_memories(db) -> None:
    service, dsn = db
    who = ids()
    picked = sample(seed=2)
    result = service.for_user(**who).add_many([e.text for e in picked] + BENIGN[:3])
    assert sorted(i for i, _ in result.rejected) == list(range(len(picked)))
    assert all(r.reason is RejectionReason.SENSITIVE for _, r in result.rejected)
    assert len(result.inserted) == len(BENIGN[:3])
    assert_no_leak(dsn, "import_memories", [e.secret for e in picked])


def _run_tools(service: MemoryService, calls: list[dict[str, Any]], user: str) -> list[ToolMessage]:
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=calls), "done"])
    agent = create_agent(model, [], middleware=[MemoryMiddleware(service)])
    result = agent.invoke({"messages": [("user", "please save these")]},
                          {"configurable": {"user_id": user, "thread_id": f"t-{user}"}})
    by_id = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    return [by_id[c["id"]] for c in calls]


def test_memory_save_tool(db) -> None:
    service, dsn = db
    user = ids()["user_id"]
    picked = sample(seed=3)
    calls = [tool_call("memory_save", content=e.text, memory_type="fact") for e in picked]
    calls.append(tool_call("memory_save", content=BENIGN[0], memory_type="fact"))
    answers = _run_tools(service, calls, user)
    assert all(a.status == "error" and a.text.startswith("Not saved:") for a in answers[:-1])
    assert answers[-1].status == "success"
    assert all(e.secret not in a.text for e, a in zip(picked, answers))
    assert len(stored_contents(dsn, user)) == 1
    assert_no_leak(dsn, "memory_save tool", [e.secret for e in picked])


def test_extraction_by_rules_keeps_the_conversation_with_secrets_withheld(db) -> None:
    service, dsn = db
    who = ids()
    picked = sample(seed=4)
    per_run = MAX_PROPOSALS - 1  # a run reads at most MAX_PROPOSALS proposals: one is benign
    for start in range(0, len(picked), per_run):
        messages = [{"role": "user", "content": "Remember that I prefer dark mode in every editor.", "id": "ok"}]
        messages += [{"role": "user", "content": f"Remember that {e.text}", "id": f"m{i}"}
                     for i, e in enumerate(picked[start:start + per_run])]
        session = f"{who['session_id']}-{start}"
        report = service.for_user(**dict(who, session_id=session)).extract(messages, llm=None)
        assert report.status == "done", report.summary()
        assert report.added or report.unchanged, report.summary()
        [conversation] = [r for r in service.for_user(who["user_id"]).list_resources(kind="conversation")
                          if r.session_id == session]
        assert "dark mode" in conversation.content and "[withheld: " in conversation.content
    assert_no_leak(dsn, "extraction by rules", [e.secret for e in picked])


def _structured_model(extracted: list[dict], *, reason: str, profile: dict) -> ScriptedChatModel:
    return ScriptedChatModel(structured={
        "ExtractedMemories": [{"memories": extracted}],
        "ConsolidationDecisions": [{"decisions": [
            {"proposal": i + 1, "decision": "ADD", "target": None, "content": None, "reason": reason}
            for i in range(len(extracted))]}],
        "UserProfileUpdate": [profile],
        "ProjectProfileUpdate": [{}],
    })


def test_extraction_by_a_model_that_proposes_the_secrets(db) -> None:
    service, dsn = db
    who = ids()
    picked = sample(seed=5)
    # a benign memory first, so the model is asked to decide (its reason quotes a secret)
    service.for_user(who["user_id"]).add("Prefers dark mode in every editor.")
    per_run = MAX_PROPOSALS - 1  # a run reads at most MAX_PROPOSALS proposals: one is benign
    for start in range(0, len(picked), per_run):
        chunk = picked[start:start + per_run]
        extracted = [{"content": e.text, "memory_type": "fact", "scope": "user", "confidence": 0.95}
                     for e in chunk]
        extracted.append({"content": "Prefers dark mode in all editors and terminals.",
                          "memory_type": "preference", "scope": "user", "confidence": 0.95})
        profile = {"background": chunk[0].text, "custom_instructions": [e.text for e in chunk[1:6]],
                   "username": "Sam"}
        llm = _structured_model(extracted, reason=f"the user said {chunk[0].text}", profile=profile)
        report = service.for_user(**dict(who, session_id=f"{who['session_id']}-{start}")).extract([e.text for e in chunk] + ["I prefer dark mode in editors and terminals."], llm=llm)
        assert report.status == "done", report.summary()
        assert len(report.rejected) == len(chunk), report.summary()
        assert all(o.rejection.reason is RejectionReason.SENSITIVE for o in report.rejected)
    service.for_user(who["user_id"]).refresh_profiles(llm=llm, force=True)
    assert service.for_user(who["user_id"]).profile().fields["username"] == "Sam"  # the clean part is kept
    assert_no_leak(dsn, "extraction by a model", [e.secret for e in picked])


def test_a_failing_model_does_not_store_what_its_error_quotes(db) -> None:
    service, dsn = db
    who = ids()
    picked = sample(5, seed=6)

    def boom(messages: list[Any]) -> Any:
        raise ValueError("could not parse: " + " ".join(m.text for m in messages))

    report = service.for_user(**who).extract([e.text for e in picked], llm=ScriptedChatModel(
        structured={"ExtractedMemories": boom}))
    assert report.status == "failed"
    assert_no_leak(dsn, "failed extraction", [e.secret for e in picked])


def test_edit_memory_runs_the_whole_gate(db) -> None:
    service, dsn = db
    who = ids()
    picked = sample(seed=7)
    item = service.for_user(**who).add("Plays chess on Sundays.")
    for entry in picked:
        result = service.for_user(**who).edit(item.id, content=entry.text)
        assert isinstance(result, Rejection) and result.reason is RejectionReason.SENSITIVE, entry.kind
    with pytest.raises(InvalidInputError) as caught:
        service.for_user(**who).edit(item.id, content="Plays chess on Saturdays.", reason=picked[0].text)
    assert caught.value.field == "reason"
    low = service.for_user(**who).edit(item.id, confidence=0.1)
    assert isinstance(low, Rejection) and low.reason is RejectionReason.LOW_CONFIDENCE
    long = service.for_user(**who).edit(item.id, content="x" * (service.config.max_length + 1))
    assert isinstance(long, Rejection) and long.reason is RejectionReason.TOO_LONG
    assert service.for_user(**who).get(item.id).version == 1  # nothing was written
    edited = service.for_user(**who).edit(item.id, content="Plays chess on Saturdays.", confidence=0.9)
    assert edited.content == "Plays chess on Saturdays." and edited.version == 2
    assert_no_leak(dsn, "edit_memory", [e.secret for e in picked])


def test_import_data_passes_every_row_through_the_gate(db, fresh_dsn, config, embeddings) -> None:
    service, dsn = db
    who = ids()
    picked = sample(seed=8)
    item = service.for_user(**who).add("Plays chess on Sundays.")
    service.for_user(**who).edit(item.id, content="Plays chess on Saturdays.")
    service.for_user(**who).add_resource("Notes on the chess club.", title="chess")
    service.for_user(**{"user_id": who["user_id"]}).update_profile({"username": "Sam"})
    data = json.loads(json.dumps(service.export_data(user_id=who["user_id"])))
    good = data["memories"][0]
    bad_memories = []
    for entry in picked:
        bad_memories.append({**good, "id": str(uuid.uuid4()), "content": entry.text})
    for entry in picked:
        bad_memories.append({**good, "id": str(uuid.uuid4()), "metadata": {"nested": [{"note": entry.text}]}})
    bad_memories.append({**good, "id": str(uuid.uuid4()), "content": "A" * 1_000_000})  # 1 MB
    bad_memories.append({**good, "id": str(uuid.uuid4()), "content": "Ok, low.", "confidence": 0.1})
    data["memories"] += bad_memories
    data["history"] = [{**h, "memory_id": bad_memories[0]["id"]} for h in data["history"]] + data["history"]
    doc = next(r for r in data["resources"] if r["kind"] == "document")
    data["resources"].append({**doc, "id": str(uuid.uuid4()), "external_id": None,
                              "content": "Intro. " + " and ".join(e.text for e in picked) + " The end.",
                              "title": f"keys {picked[-1].text}"})
    data["resources"].append({**doc, "id": str(uuid.uuid4()), "external_id": None,
                              "metadata": {picked[1 % len(picked)].text: "as a key"}})
    data["profiles"][0]["manual"] = {"username": "Sam", "background": picked[2 % len(picked)].text}

    target_dsn = fresh_dsn()
    with MemoryService(target_dsn, config=config, embeddings=embeddings) as target:
        report = target.import_data(data, user_id=who["user_id"])
        assert report.inserted["memories"] == len(data["memories"]) - len(bad_memories)
        rejected = {i for i, _ in report.rejected["memories"]}
        first_bad = len(data["memories"]) - len(bad_memories)
        assert rejected == set(range(first_bad, len(data["memories"])))
        reasons = [r.reason for _, r in report.rejected["memories"]]
        assert reasons.count(RejectionReason.SENSITIVE) == 2 * len(picked)
        assert RejectionReason.TOO_LONG in reasons and RejectionReason.LOW_CONFIDENCE in reasons
        assert len(report.rejected["history"]) == len(data["history"]) // 2  # the refused memory's history
        assert [i for i, _ in report.rejected["resources"]] == [len(data["resources"]) - 1]
        assert [i for i, _ in report.rejected["profiles"]] == [0]
        assert all(picked[2 % len(picked)].secret not in r.message for _, r in report.rejected["profiles"])
        [withheld] = [r for r in target.for_user(who["user_id"]).list_resources() if r.content.startswith("Intro.")]
        assert withheld.content.endswith("The end.") and "[withheld: " in withheld.content
        assert [m.content for m in target.for_user(who["user_id"]).list()] == ["Plays chess on Saturdays."]
    assert_no_leak(target_dsn, "import_data", [e.secret for e in picked])


def test_import_data_writes_nothing_from_an_invalid_file(db, fresh_dsn, config, embeddings) -> None:
    service, _ = db
    who = ids()
    service.for_user(**who).add("Plays chess on Sundays.")
    data = json.loads(json.dumps(service.export_data(user_id=who["user_id"])))
    data["memories"].append({**data["memories"][0], "id": str(uuid.uuid4()), "content": sample(1)[0].text})
    data["memories"].append({**data["memories"][0], "id": "not-a-uuid"})
    target_dsn = fresh_dsn()
    with MemoryService(target_dsn, config=config, embeddings=embeddings) as target:
        with pytest.raises(InvalidInputError) as caught:
            target.import_data(data, user_id=who["user_id"])
        assert caught.value.field == f"memories[{len(data['memories']) - 1}].id"
        with psycopg.connect(target_dsn) as conn:
            assert conn.execute("SELECT count(*) FROM memory_items").fetchone()[0] == 0


def test_add_resource_withholds_each_secret_and_keeps_the_rest(db) -> None:
    service, dsn = db
    who = ids()
    picked = sample(seed=9)
    body = "\n".join(f"Line {i}: {e.text}" for i, e in enumerate(picked))
    short = sorted((e for e in picked if len(e.text) <= 200), key=lambda e: len(e.text))  # fit a title or an id
    doc = service.for_user(**who).add_resource(f"Runbook.\n{body}\nEnd of runbook.", title=f"runbook {short[0].text}", external_id="runbook.md")
    assert doc.content.startswith("Runbook.\nLine 0: ") and doc.content.endswith("End of runbook.")
    assert doc.content.count("[withheld: ") >= len(picked)
    assert "Line 39: " in doc.content or len(picked) < 40
    for field, kwargs, entry in (("metadata", {"metadata": {"auth": {"token": picked[1].text}}}, picked[1]),
                                 ("metadata", {"metadata": {short[-1].text: "the key is the secret"}}, short[-1]),
                                 ("external_id", {"external_id": short[1 % len(short)].text}, short[1 % len(short)])):
        with pytest.raises(InvalidInputError) as caught:
            service.for_user(**who).add_resource("Another document.", **kwargs)
        assert caught.value.field == field and "secret" in str(caught.value), entry.kind
        assert entry.secret not in str(caught.value)
    assert len(service.for_user(who["user_id"]).list_resources(kind="document")) == 1
    assert_no_leak(dsn, "add_resource", [e.secret for e in picked])


def test_update_profile_refuses_a_secret_naming_the_field(db) -> None:
    service, dsn = db
    who = {"user_id": ids()["user_id"]}
    picked = sample(seed=10)
    service.for_user(**who).update_profile({"username": "Sam"})
    for i, entry in enumerate(picked):
        field, value = [("background", entry.text), ("custom_instructions", ["Be brief.", entry.text]),
                        ("username", entry.text)][i % 3]
        with pytest.raises(InvalidInputError) as caught:
            service.for_user(**who).update_profile({field: value, "profession": "pilot"})
        assert caught.value.field.startswith(field), (entry.kind, caught.value.field)
    assert service.for_user(**who).profile().manual == {"username": "Sam"}  # nothing of the refused edits
    assert_no_leak(dsn, "update_profile", [e.secret for e in picked])


def test_profiles_are_never_built_from_a_secret(db) -> None:
    """Memories stored before the detector knew a kind (planted here by hand) must not reach
    the profile, built by rules or by a model that copies them."""
    service, dsn = db
    who = {"user_id": ids()["user_id"]}
    picked = sample(seed=12)
    item = service.for_user(**who).add("Works as a pilot.")
    with psycopg.connect(dsn) as conn:
        for entry in picked:
            for kind in ("preference", "fact", "habit"):
                conn.execute(
                    "INSERT INTO memory_items (id, content, memory_type, scope, scope_id, user_id, source, confidence,"
                    " visibility, metadata, embedding) SELECT %s, %s, %s, scope, scope_id, user_id, source,"
                    " confidence, visibility, metadata, embedding FROM memory_items WHERE id = %s",
                    (uuid.uuid4(), f"Says: {entry.text}", kind, item.id))
    assert service.for_user(**who).refresh_profiles(force=True, llm=None) == ["user"]
    assert_no_leak(dsn, "refresh_profiles by rules", [e.secret for e in picked], only=["memory_profiles"])
    llm = ScriptedChatModel(structured={"UserProfileUpdate": [{
        "background": picked[0].text, "characteristics": [f"Says: {e.text}" for e in picked],
        "profession": "pilot"}]})
    assert service.for_user(**who).refresh_profiles(force=True, llm=llm) == ["user"]
    assert service.for_user(**who).profile().fields["profession"] == "pilot"
    assert_no_leak(dsn, "refresh_profiles by a model", [e.secret for e in picked], only=["memory_profiles"])
    with psycopg.connect(dsn) as conn:
        conn.execute("DELETE FROM memory_items WHERE user_id = %s", (who["user_id"],))


def test_metadata_with_a_secret_is_refused_on_every_path(db) -> None:
    service, dsn = db
    who = ids()
    picked = sample(seed=13)
    shapes = [lambda s: {"note": s}, lambda s: {"a": {"b": [1, {"c": s}]}}, lambda s: {s: "value"}]
    for i, entry in enumerate(picked):
        metadata = shapes[i % 3](entry.text)
        result = service.for_user(**who).add("Plays chess on Sundays.", metadata=metadata)
        assert isinstance(result, Rejection) and result.reason is RejectionReason.SENSITIVE, entry.kind
        assert result.message.startswith("metadata: ") and entry.secret not in result.message
    result = service.for_user(**who).add_many([{"content": "Plays chess on Sundays.", "metadata": {"k": e.text}}
                                      for e in picked] + [{"content": "Plays go on Mondays.", "metadata": {"k": 1}}])
    assert len(result.rejected) == len(picked) and len(result.inserted) == 1
    for entry in picked:
        if len(entry.text) <= 256 and "\n" not in entry.text:  # an id's limit; ids are one line
            result = service.for_user(**who).add("Plays chess on Sundays.", source_id=entry.text)
            assert isinstance(result, Rejection) and result.reason is RejectionReason.SENSITIVE, entry.kind
    assert_no_leak(dsn, "metadata and source_id", [e.secret for e in picked])


def test_session_snapshots_withhold_secrets(db) -> None:
    service, dsn = db
    user = ids()["user_id"]
    picked = sample(10, seed=14)
    state = {"messages": [HumanMessage(e.text) for e in picked], "todos": [e.text for e in picked]}
    with psycopg.connect(dsn) as conn:
        snapshot = run(save_snapshot(state, user_id=user, thread_id=f"t-{user}"), conn, None)
    assert snapshot.title is not None and snapshot.message_count == len(picked)
    assert_no_leak(dsn, "session snapshot", [e.secret for e in picked])


def test_async_paths(db, config, embeddings) -> None:
    service, dsn = db
    who = ids()
    picked = sample(20, seed=15)

    async def go() -> None:
        async with AsyncMemoryService(dsn, config=config, embeddings=embeddings) as amemory:
            for entry in picked:
                result = await amemory.for_user(**who).add(entry.text)
                assert isinstance(result, Rejection) and result.reason is RejectionReason.SENSITIVE
            doc = await amemory.for_user(**who).add_resource("Doc: " + " / ".join(e.text for e in picked))
            assert doc.content.startswith("Doc: ") and "[withheld: " in doc.content
            report = await amemory.for_user(**who).extract([e.text for e in picked], llm=None)
            assert report.status in ("done", "nothing_new")
            assert not isinstance(await amemory.for_user(**who).add(BENIGN[0]), Rejection)

    asyncio.run(go())
    assert len(stored_contents(dsn, who["user_id"])) == 1
    assert_no_leak(dsn, "async service", [e.secret for e in picked])


# --- the pure helpers every path uses ------------------------------------------------------------


def test_redact_removes_every_corpus_secret_and_keeps_benign_text() -> None:
    for entry in SECRETS:
        out = redact(f"Intro. {entry.text} Outro.")
        assert entry.secret not in out and out.startswith("Intro.") and out.endswith("Outro."), entry.kind
        assert find_secret(entry.text) is not None, entry.kind
    for text in BENIGN:
        assert redact(text) == text and find_secret(text) is None, text


def test_secret_in_json_names_where_it_is() -> None:
    entry = sample(1)[0]
    assert secret_in_json({"a": [0, {"b": entry.text}]}) == ("['a'][1]['b']", find_secret(entry.text))
    where, _ = secret_in_json({"ok": 1, entry.text: 2})
    assert where.startswith("the key (withheld)") and entry.secret not in where
    assert secret_in_json({"a": ["plain", 1, None, {"b": "text"}]}) is None


# --- issue 28: secrets pasted in other encodings, and the account beside a routing number ----------


def test_redact_keeps_the_rest_of_a_document_byte_for_byte_around_a_split_secret() -> None:
    """A key split by a zero-width character is withheld where it stands; the document keeps its
    indentation, blank lines, tabs, trailing blanks and line endings (they used to be normalised away)."""
    password = "Sun\u200bflower!12"
    key = "gh" + "p_aB3dE\u200b6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
    document = (f"# Setup\r\n\r\n    def main():\r\n        gh = Github('{key}')\r\n\r\n\r\n\t\treturn gh  \n"
                f"\n  - my password is {password}\n\u00a0\u00a0indented with no-break spaces\n")
    assert redact(document) == document.replace(key, "[withheld: an access token]").replace(
        password, "[withheld: a password]")


def _copying_model() -> ScriptedChatModel:
    """A model that proposes every line it is shown as a memory and the whole text as the profile."""
    def lines(messages: list[Any]) -> dict[str, Any]:
        text = messages[-1].content
        return {"memories": [{"content": line.strip()[:300], "memory_type": "fact", "scope": "user",
                              "confidence": 0.95} for line in text.splitlines() if len(line.strip()) > 12][:8]}

    def profile(messages: list[Any]) -> dict[str, Any]:
        return {"background": " ".join(m.content for m in messages)[-1500:]}

    return ScriptedChatModel(structured={"ExtractedMemories": lines,
                                         "ConsolidationDecisions": lambda messages: {"decisions": []},
                                         "UserProfileUpdate": profile, "ProjectProfileUpdate": lambda m: {}})


def test_add_document_withholds_keys_in_json_accounts_beside_routing_numbers_and_inflected_passwords(db) -> None:
    """Three documents, each once a way a secret got through (or took the whole text with it); a
    model that copies every line it reads into memories and the profile finds nothing to copy."""
    service, dsn = db
    who = ids()
    rng = random.Random(2028)
    body = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") for _ in range(640))
    key_lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    key_file = json.dumps({"type": "service_account", "project_id": "payroll-7",
                           "private_key": "-----BEGIN " + "PRIVATE KEY-----\n" + "\n".join(key_lines)
                           + "\n-----END PRIVATE KEY-----\n", "client_email": "bot@payroll-7.example.com"}, indent=2)
    bank = ("# Payroll\n\nSalaries go by wire: routing number 021000021, account number 483920175563.\n"
            "The UK office is paid into 40-47-84 55779911 every month.\n"
            "Die Passwörter sind Sommer2024! und Winter!2023 für den Lohnserver.\n"
            "login: payroll@example.com Tr0ub4dor&3x for the bank portal.\n")
    code = ("# Deploy\n\n```python\ndef deploy():\n    client = Github('gh" + "p_aB3dE\u200b6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6')\n"
            "\n\n    return client.run(  'payroll'  )\n```\n")
    secrets = [*key_lines, "483920175563", "55779911", "Sommer2024!", "Winter!2023", "Tr0ub4dor&3x",
               "6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"]  # the part of the split key after the zero-width space
    me = service.for_user(**who)
    reports = [me.add_document(text, title=title, llm=_copying_model())
               for title, text in (("service account", key_file), ("payroll", bank), ("deploy", code))]
    assert [r.status for r in reports] == ["done"] * 3, [r.summary() for r in reports]
    key_doc, bank_doc, code_doc = (r.resource.content for r in reports)
    assert key_doc.startswith('{\n  "type": "service_account"') and '"private_key": "[withheld: a private key]' in key_doc
    assert "routing number 021000021" in bank_doc  # the public half is kept
    assert bank_doc.count("[withheld: ") == 5
    assert code_doc == code.replace("gh" + "p_aB3dE\u200b6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6", "[withheld: an access token]")
    assert_no_leak(dsn, "add_document", secrets)
    hits = me.search_documents("routing number account payroll", k=5)
    assert hits and not any(s in hit.content for hit in hits for s in secrets)
