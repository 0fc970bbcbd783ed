"""Narrowing a search or a list: metadata filters (numbers as numbers, dates as times, ``$exists``,
``$contains``, ``$or``/``$not``), creation and update ranges, the origin; exact under every filter
(the top k equals the scan of every row that passes), on both doors, the tools and the store."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any
from unittest import mock

import psycopg
import pytest

from agent_memory import Identity, InvalidInputError, MemoryService, queries
from agent_memory.filters import (
    MAX_FILTER_CONDITIONS,
    MAX_FILTER_DEPTH,
    MAX_FILTER_VALUES,
    AllOf,
    AnyOf,
    Condition,
    Not,
    parse_filter,
)
from agent_memory.middleware.tools import memory_tools
from agent_memory.models import NewMemory
from agent_memory.store import AgentMemoryStore
from agent_memory.validation import MAX_METADATA_BYTES
from search_reference import texts

# --- the language, without a database -----------------------------------------------------------


def test_a_filter_parses_into_a_tree() -> None:
    assert parse_filter(None) is None and parse_filter({}) is None
    assert parse_filter({"tag": "billing"}) == Condition("tag", "$eq", "billing")
    assert parse_filter({"p": {"$gte": 2, "$lt": 5}, "x": None}) == AllOf((
        Condition("p", "$gte", 2), Condition("p", "$lt", 5), Condition("x", "$eq", None)))
    assert parse_filter({"$or": [{"a": 1}, {"$not": {"b": {"$exists": True}}}]}) == AnyOf((
        Condition("a", "$eq", 1), Not(Condition("b", "$exists", True))))
    due = parse_filter({"due": {"$lt": "2026-12-01"}})
    assert due == Condition("due", "$lt", datetime(2026, 12, 1, tzinfo=UTC), temporal=True)
    assert parse_filter({"d": {"$gte": date(2026, 1, 2)}}) == Condition(
        "d", "$gte", datetime(2026, 1, 2, tzinfo=UTC), temporal=True)
    # equality with a date-like string stays string equality; a string that is no date compares as a string
    assert parse_filter({"d": "2026-12-01"}) == Condition("d", "$eq", "2026-12-01")
    assert parse_filter({"v": {"$gt": "b"}}) == Condition("v", "$gt", "b")
    assert parse_filter({"v": {"$gt": "2026-13-45"}}) == Condition("v", "$gt", "2026-13-45")
    assert parse_filter({"meta": {"$eq": {"a": 1}}}) == Condition("meta", "$eq", {"a": 1})


@pytest.mark.parametrize(("bad", "says"), [
    ("tag=billing", "must be a dict"),
    ({"p": {"$gte": 2, "plain": 1}}, "mixes operators"),
    ({"p": {"$regex": "x"}}, "is not an operator"),
    ({"p": {"$gt": [1]}}, "compares with a number, a string or a date"),
    ({"p": {"$gt": float("nan")}}, "compares with a number"),
    ({"p": {"$in": "abc"}}, "takes a list of values"),
    ({"p": {"$exists": "yes"}}, "takes true or false"),
    ({"$or": []}, "non-empty list"),
    ({"$or": {"a": 1}}, "non-empty list"),
    ({"$gte": 3}, "not a logical operator"),
    ({"": 1}, "non-empty strings"),
    ({"p": "\x00"}, "NUL"),
    ({f"k{i}": i for i in range(70)}, "more than 64 conditions"),
])
def test_malformed_filters_say_what_to_write(bad: Any, says: str) -> None:
    with pytest.raises(InvalidInputError, match=says) as caught:
        parse_filter(bad)
    assert caught.value.field.startswith("filter")


def test_deep_nesting_is_refused() -> None:
    deep: dict[str, Any] = {"a": 1}
    for _ in range(12):
        deep = {"$not": deep}
    with pytest.raises(InvalidInputError, match="deeper than"):
        parse_filter(deep)


def test_keys_are_checked_as_stored_keys_are() -> None:
    """A key with NUL reached PostgreSQL (its error, not ours), a lone surrogate raised a raw
    UnicodeEncodeError: keys get the checks metadata keys get, with a message saying what to fix."""
    for key, says in (("a\x00b", "contains a NUL character"), ("a\ud800", "lone surrogate"),
                      ("k" * (MAX_METADATA_BYTES + 1), f"more than {MAX_METADATA_BYTES} bytes")):
        for filt in ({key: 1}, {"$or": [{"x": 1}, {key: {"$in": [1]}}]}, {"$not": {key: {"$exists": True}}}):
            with pytest.raises(InvalidInputError, match=says) as caught:
                parse_filter(filt)
            assert caught.value.field.startswith("filter") and len(str(caught.value)) < 300
    longest = "k" * MAX_METADATA_BYTES  # as long as a stored key can be: accepted
    assert parse_filter({longest: 1}) == Condition(longest, "$eq", 1)


def test_every_limit_takes_its_boundary_and_refuses_one_more() -> None:
    """``{"$or": [64 conditions]}`` was refused (the $or itself counted as a 65th): each limit
    accepts exactly its number and refuses one more, naming the limit."""
    def ors(n: int) -> dict[str, Any]:
        return {"$or": [{"n": i} for i in range(n)]}

    assert len(parse_filter(ors(MAX_FILTER_CONDITIONS)).parts) == 64  # type: ignore[union-attr]
    nested = {"$and": [{"$or": [{"a": i}, {"b": i}]} for i in range(32)]}  # 64 tests under 33 operators
    assert isinstance(parse_filter(nested), AllOf)
    ranges = {f"k{i}": {"$gte": 0, "$lt": 9} for i in range(32)}  # two tests a key
    assert isinstance(parse_filter(ranges), AllOf)
    for over in (ors(65), {**ranges, "one": 1}, {"$and": [nested, {"one": 1}]}):
        with pytest.raises(InvalidInputError, match="more than 64 conditions") as caught:
            parse_filter(over)
        assert caught.value.field == "filter"  # the whole filter is over, not the part that tipped it

    deep: dict[str, Any] = {"a": 1}
    for _ in range(MAX_FILTER_DEPTH):
        deep = {"$not": deep}
    assert parse_filter(deep) is not None  # eight operators inside one another
    with pytest.raises(InvalidInputError, match="deeper than 8 levels"):
        parse_filter({"$or": [deep]})

    values = list(range(MAX_FILTER_VALUES))
    assert len(parse_filter({"p": {"$in": values}}).operand) == 1000  # type: ignore[union-attr]
    assert isinstance(parse_filter({"p": {"$in": values[:600]}, "q": {"$nin": values[:400]}}), AllOf)
    for over in ({"p": {"$in": [*values, 1000]}}, {"p": {"$in": values[:600]}, "q": {"$nin": values[:401]}},
                 {"p": {"$nin": list(range(200_000))}}):
        with pytest.raises(InvalidInputError, match="the limit is 1000") as caught:
            parse_filter(over)
        assert caught.value.field in ("filter['p']", "filter['q']")


def test_an_empty_filter_inside_an_operator_is_refused_not_sent() -> None:
    """``{"$or": [{}]}`` made SQL PostgreSQL could not parse; ``{}`` alone still means no filter."""
    assert parse_filter({}) is None
    for filt in ({"$or": [{}]}, {"$and": [{"a": 1}, {}]}, {"$not": {}}):
        with pytest.raises(InvalidInputError, match="is an empty filter"):
            parse_filter(filt)


def test_what_callers_type_travels_as_parameters() -> None:
    typed = "x'; DROP TABLE memory_items; --"
    q, p = queries.filter_sql(parse_filter({typed: {"$gt": typed}, "$or": [{typed: {"$exists": True}}]}), "m.metadata")
    assert typed not in q.as_string(None) and typed in p.values()


# --- against the database ------------------------------------------------------------------------

ROWS = [
    ("The ACME invoice is due at the end of the month.", {"tag": "billing", "priority": 10, "due": "2026-12-01",
                                                           "tags": ["finance", "urgent"]}),
    ("Prefers tea over coffee in the morning.", {"tag": "prefs", "priority": 9, "due": "2026-11-01T10:00:00Z"}),
    ("The kubernetes upgrade is planned for the weekend.", {"priority": "10", "due": "next week"}),
    ("Pays the office rent by bank transfer.", {"tag": "billing", "priority": 2.5, "due": "2026-11-20T23:30:00-02:00",
                                                 "tags": ["finance"]}),
    ("Keeps a paper notebook for meeting notes.", {}),
]


@pytest.fixture
def five(memory: MemoryService, tenant: Any) -> dict[str, Any]:
    h = memory.for_user(tenant.user)
    return {content: h.add(content, metadata=metadata) for content, metadata in ROWS}


@pytest.mark.parametrize(("filt", "want"), [
    ({"tag": "billing"}, [0, 3]),
    ({"priority": 10}, [0]),                               # the number, not the string "10"
    ({"priority": 10.0}, [0]),                             # numbers as numbers
    ({"priority": "10"}, [2]),
    ({"priority": {"$gt": 9}}, [0]),                       # a number compares with numbers only
    ({"priority": {"$gte": 2.5, "$lt": 10}}, [1, 3]),
    ({"priority": {"$in": [9, 2.5]}}, [1, 3]),
    ({"priority": {"$nin": [9, 2.5]}}, [0, 2, 4]),         # a missing key passes $nin
    ({"tag": {"$ne": "billing"}}, [1, 2, 4]),              # and $ne
    ({"due": {"$lt": "2026-11-15"}}, [1]),                 # dates as times; "next week" is no time
    ({"due": {"$gte": datetime(2026, 11, 21, 1, 0, tzinfo=UTC)}}, [0, 3]),  # 23:30 at -02:00 is 01:30 UTC
    ({"due": {"$gt": date(2026, 11, 1)}}, [0, 1, 3]),
    ({"tags": {"$contains": "urgent"}}, [0]),
    ({"tags": {"$contains": ["finance"]}}, [0, 3]),
    ({"tag": {"$exists": False}}, [2, 4]),
    ({"tags": {"$exists": True}}, [0, 3]),
    ({"$or": [{"tag": "prefs"}, {"priority": "10"}]}, [1, 2]),
    ({"$not": {"tag": "billing"}}, [1, 2, 4]),
    ({"$and": [{"tag": "billing"}, {"priority": {"$lt": 5}}]}, [3]),
])
def test_list_and_search_keep_exactly_what_the_filter_says(memory: MemoryService, tenant: Any, five: Any,
                                                            filt: dict[str, Any], want: list[int]) -> None:
    h = memory.for_user(tenant.user)
    expected = {five[ROWS[i][0]].id for i in want}
    assert {m.id for m in h.list(filter=filt)} == expected
    assert {r.item.id for r in h.search("money, notes and plans", k=10, min_relevance=0, filter=filt)} == expected


def test_time_ranges_and_origin(memory: MemoryService, tenant: Any, five: Any) -> None:
    h = memory.for_user(tenant.user)
    items = sorted(five.values(), key=lambda m: m.created_at)
    middle = items[2].created_at
    assert {m.id for m in h.list(created_after=middle)} == {m.id for m in items[2:]}
    assert {m.id for m in h.list(created_before=middle)} == {m.id for m in items[:2]}
    assert h.list(created_after=datetime.now(UTC) + timedelta(days=1)) == []
    edited = h.edit(items[0].id, content="The ACME invoice is due at the start of next month.")
    assert [m.id for m in h.list(updated_after=edited.updated_at)] == [items[0].id]
    ai = h.add("Works from the Lisbon office on Tuesdays.", source="ai")
    assert [m.id for m in h.list(source="ai")] == [ai.id]
    assert {m.id for m in h.list(source=["user", "ai"])} == {m.id for m in items} | {ai.id}
    assert [r.item.id for r in h.search("office", source="ai", min_relevance=0)] == [ai.id]
    cited = h.add("Reads the quarterly report carefully.", source_id="doc-7")
    assert [m.id for m in h.list(source_id="doc-7")] == [cited.id]
    assert [r.item.id for r in h.search("report", source_id=["doc-7", "doc-8"])] == [cited.id]
    with pytest.raises(InvalidInputError, match="must be later than created_after"):
        h.list(created_after="2026-02-01", created_before="2026-01-01")
    with pytest.raises(InvalidInputError, match="source"):
        h.list(source="gossip")
    with pytest.raises(InvalidInputError, match="empty list"):
        h.search("x", source_id=[])
    with pytest.raises(InvalidInputError, match="ISO-8601"):
        h.search("x", updated_before="last tuesday")


def test_a_filter_never_reaches_another_tenant(memory: MemoryService, tenant: Any, five: Any) -> None:
    other = f"other-{uuid.uuid4().hex[:8]}"
    memory.for_user(other).add("The ACME invoice is due at the end of the month.", metadata={"tag": "billing"})
    mine = {five[ROWS[0][0]].id, five[ROWS[3][0]].id}
    for filt in ({"tag": "billing"}, {"tag": {"$exists": True}}, {"$or": [{"tag": "billing"}, {"x": {"$ne": 1}}]}):
        assert {m.id for m in memory.for_user(tenant.user).list(filter=filt)} <= set(five_ids(five))
        hits = memory.for_user(tenant.user).search("invoice", k=20, min_relevance=0, filter=filt)
        assert {r.item.id for r in hits} <= set(five_ids(five)) and mine <= {r.item.id for r in hits}
    assert [m.content for m in memory.for_user(other).list(filter={"tag": "billing"})] == [ROWS[0][0]]


def five_ids(five: dict[str, Any]) -> list[Any]:
    return [m.id for m in five.values()]


async def test_the_async_door_filters_the_same(amemory: Any, memory: MemoryService, tenant: Any, five: Any) -> None:
    h = amemory.for_user(tenant.user)
    got = await h.search("invoice", min_relevance=0, filter={"priority": {"$gte": 2.5, "$lt": 10}})
    assert {r.item.id for r in got} == {five[ROWS[1][0]].id, five[ROWS[3][0]].id}
    assert [m.id for m in await h.list(filter={"tags": {"$contains": "urgent"}})] == [five[ROWS[0][0]].id]


def test_the_filtered_top_k_is_the_exhaustive_one(memory: MemoryService, tenant: Any) -> None:
    """300 memories with random metadata: for every filter, the top k equals the ranking of every
    row that passes (every row a candidate), and the set that passes equals a Python reference."""
    rng = random.Random(7)
    h = memory.for_user(tenant.user)
    news = [NewMemory(content=t, metadata={"n": rng.randint(0, 20), "kind": rng.choice(["a", "b", "c"]),
                                           "when": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"}
                      | ({"flag": True} if rng.random() < 0.3 else {}))
            for t in texts(rng, "filtered", 300)]
    h.add_many(news)
    rows = {m.id: m.metadata for m in h.list(limit=1000)}
    cases = [
        ({"n": {"$gte": 15}}, lambda md: md["n"] >= 15),
        ({"kind": {"$in": ["a", "c"]}, "n": {"$lt": 10}}, lambda md: md["kind"] in ("a", "c") and md["n"] < 10),
        ({"when": {"$lt": "2026-04-01"}}, lambda md: md["when"] < "2026-04-01"),
        ({"flag": {"$exists": False}, "kind": {"$ne": "b"}}, lambda md: "flag" not in md and md["kind"] != "b"),
        ({"$or": [{"kind": "a"}, {"n": 0}]}, lambda md: md["kind"] == "a" or md["n"] == 0),
    ]
    scan = queries.search_candidates

    def everything(where: Any, *, k: int, min_relevance: float, keyword_share: Any = None, at: Any = None,
                   **terms: Any) -> Any:
        assert at is None  # the generic scan reads the present
        return scan(where, **dict(terms, pool=10 ** 6))  # the generic scan, every passing row a candidate

    for filt, passes in cases:
        expected = {i for i, md in rows.items() if passes(md)}
        assert {m.id for m in h.list(filter=filt, limit=1000)} == expected, filt
        for query in ("coffee deadline", "we decided to stop the release", "guitar"):
            got = h.search(query, k=7, filter=filt, min_relevance=0)
            with mock.patch.object(queries, "narrowed_search", everything):
                want = h.search(query, k=7, filter=filt, min_relevance=0)
            assert [(r.item.id, round(r.score, 9)) for r in got] == [(r.item.id, round(r.score, 9)) for r in want]
            assert {r.item.id for r in got} <= expected and len(got) == min(7, len(expected))
        everyone = h.search("coffee", k=50, filter=filt, min_relevance=0)
        assert len(everyone) == min(50, len(expected))
    # the same one-pass statement answers every other read the indexes do not hold
    some = list(rows)[:40]
    for i in some[:20]:
        h.edit(i, content=f"Revised note {i} about the coffee deadline and the release budget.")
    for args in ({"status": ["active", "superseded", "archived"]}, {"created_after": "2020-01-01"},
                 {"min_relevance": 0.3, "filter": {"n": {"$lte": 10}}}):
        for query in ("coffee deadline", "release budget"):
            got = h.search(query, k=9, **{"min_relevance": 0, **args})
            with mock.patch.object(queries, "narrowed_search", everything):
                want = h.search(query, k=9, **{"min_relevance": 0, **args})
            assert [(r.item.id, round(r.score, 9)) for r in got] == [(r.item.id, round(r.score, 9)) for r in want]
            assert got, args


def test_a_bad_stored_date_never_breaks_a_search(memory: MemoryService, tenant: Any, dsn: str) -> None:
    h = memory.for_user(tenant.user)
    good = h.add("Renews the passport in spring.", metadata={"due": "2026-03-01"})
    for odd in ("2026-02-31", "2026-99-99T99:99", "tomorrow", 20260301):
        h.add(f"An odd due date written as {odd}.", metadata={"due": odd})
    assert [m.id for m in h.list(filter={"due": {"$lt": "2027-01-01"}})] == [good.id]
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT agent_memory_timestamp('2026-11-01'), agent_memory_timestamp('2026-02-31'),"
                            " agent_memory_timestamp('2026-11-01T10:00:00+02:00')").fetchone() == (
            datetime(2026, 11, 1, tzinfo=UTC), None, datetime(2026, 11, 1, 8, tzinfo=UTC))


# --- the tools and the store ---------------------------------------------------------------------


def _tool(tools: list[Any], name: str) -> Any:
    return next(t for t in tools if t.name == name)


def test_the_model_can_tag_and_narrow_by_tag(memory: MemoryService, tenant: Any) -> None:
    tools = memory_tools(memory, user_id=tenant.user)
    save, search = _tool(tools, "memory_save"), _tool(tools, "memory_search")
    assert "Saved" in save.invoke({"content": "The staging database is rebuilt every Monday.", "tags": ["infra"]})
    save.invoke({"content": "The staging budget is reviewed every Monday.", "tags": ["finance", "infra"]})
    save.invoke({"content": "The staging party is on Monday.", "memory_type": "event"})
    infra = search.invoke({"query": "staging on Monday", "tags": ["infra"]})
    assert "rebuilt" in infra and "budget" in infra and "party" not in infra and "[tags: infra]" in infra
    finance = search.invoke({"query": "staging", "tags": "finance"})
    assert "budget" in finance and "rebuilt" not in finance
    assert "party" in search.invoke({"query": "staging", "memory_type": "event"})
    refused = save.invoke({"content": "Something to remember for later on.", "tags": ["x" * 65]})
    assert "tags" in refused and "each tag" in refused
    assert "at most 10" in search.invoke({"query": "staging", "tags": [str(i) for i in range(11)]})


def test_the_store_filters_with_the_same_language(memory: MemoryService, tenant: Any) -> None:
    store = AgentMemoryStore(memory, caller=Identity(user_id=tenant.user))
    ns = ("memories", tenant.user, "notes")
    store.put(ns, "a", {"text": "alpha", "due": "2026-01-10", "labels": ["x", "y"]})
    store.put(ns, "b", {"text": "beta", "due": "2026-03-10"})
    store.put(ns, "c", {"text": "gamma", "score": 3})

    def keys(filt: dict[str, Any]) -> set[str]:
        return {item.key for item in store.search(ns, filter=filt)}

    assert keys({"due": {"$lt": "2026-02-01"}}) == {"a"}
    assert keys({"due": {"$exists": False}}) == {"c"}
    assert keys({"labels": {"$contains": "y"}}) == {"a"}
    assert keys({"$or": [{"text": "beta"}, {"score": {"$gt": 2}}]}) == {"b", "c"}
    with pytest.raises(InvalidInputError, match="not an operator"):
        store.search(ns, filter={"score": {"$like": 1}})


BAD_KEYS = [{"a\x00b": 1}, {"a\ud800": 1}, {"$or": [{"x": 1}, {"y\x00": 2}]}, {"p": {"$in": list(range(1001))}},
            {"$or": [{}]}]


@pytest.mark.parametrize("filt", BAD_KEYS, ids=["nul-key", "surrogate-key", "nul-key-in-or", "long-in", "empty-or"])
async def test_every_door_refuses_a_bad_filter_before_the_database(memory: MemoryService, amemory: Any, tenant: Any,
                                                                   filt: dict[str, Any]) -> None:
    """A NUL key came back as PostgreSQL's error (``DatabaseError``), a lone surrogate as a raw
    ``UnicodeEncodeError``, ``{"$or": [{}]}`` as a syntax error: every door that takes a filter
    (list and search on both handles, the store, the agent's tools) now says what to fix."""
    h, ah = memory.for_user(tenant.user), amemory.for_user(tenant.user)
    h.add("The ACME invoice is due at the end of the month.", metadata={"tag": "billing"})
    store = AgentMemoryStore(memory, caller=Identity(user_id=tenant.user))
    calls = [lambda: h.list(filter=filt), lambda: h.search("invoice", filter=filt),
             lambda: store.search(("memories", tenant.user), filter=filt)]
    for call in calls:
        with pytest.raises(InvalidInputError) as caught:
            call()
        assert caught.value.field.startswith("filter")
    for acall in (lambda: ah.list(filter=filt), lambda: ah.search("invoice", filter=filt)):
        with pytest.raises(InvalidInputError):
            await acall()
    # the agent's tag filter builds its filter from the model's tags: a NUL tag is refused as text
    search = _tool(memory_tools(memory, user_id=tenant.user), "memory_search")
    assert "NUL" in search.invoke({"query": "invoice", "tags": ["bill\x00ing"]})

