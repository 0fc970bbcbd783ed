"""AgentMemoryStore: LangGraph's BaseStore over the memory items, sync and async.

The first part ports the cases of LangGraph's own PostgresStore tests
(``libs/checkpoint-postgres/tests/test_store.py`` in langchain-ai/langgraph: batches, get, put,
search with query and filters, list_namespaces, delete, TTL) with every namespace under the
caller's ``("memories", user_id)``; the rest is ours: tenancy (other users, prefix tricks,
escaped characters, forged metadata), numbers compared as numbers, the namespace mapping, and
langmem's tools inside ``create_agent`` next to ``MemoryMiddleware``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import pytest
from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from agent_memory import Identity
from agent_memory.errors import (
    ConfigurationError,
    EmbeddingDimensionMismatchError,
    InvalidInputError,
    MissingIdentityError,
    PermissionDeniedError,
)
from agent_memory.store import AgentMemoryStore
from agent_memory.sync_bridge import home_loop
from agent_memory.store.namespaces import encode_key, key_prefix, resolve
from agent_memory.filters import AllOf, Condition
from agent_memory.store.values import check_filter, indexed_text

MODES = ["sync", "async"]


class Door:
    """One store, called through its blocking methods (in a worker thread) or its async ones,
    so every test body runs over both."""

    def __init__(self, store: AgentMemoryStore, mode: str) -> None:
        self.store, self.mode = store, mode

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.mode == "sync":
            return await asyncio.to_thread(getattr(self.store, name), *args, **kwargs)
        return await getattr(self.store, "a" + name)(*args, **kwargs)

    async def put(self, *args: Any, **kwargs: Any) -> None:
        await self._call("put", *args, **kwargs)

    async def get(self, *args: Any, **kwargs: Any) -> Item | None:
        return await self._call("get", *args, **kwargs)

    async def search(self, *args: Any, **kwargs: Any) -> list[Any]:
        return await self._call("search", *args, **kwargs)

    async def delete(self, *args: Any, **kwargs: Any) -> None:
        await self._call("delete", *args, **kwargs)

    async def list_namespaces(self, **kwargs: Any) -> list[tuple[str, ...]]:
        return await self._call("list_namespaces", **kwargs)

    async def batch(self, ops: list[Any]) -> list[Any]:
        return await self._call("batch", ops)


def make_store(request: Any, memory: Any, amemory: Any, mode: str, **kwargs: Any) -> Door:
    service = memory if mode == "sync" else amemory
    return Door(AgentMemoryStore(service, **kwargs), mode)


@pytest.fixture(params=MODES)
def mode(request: Any) -> str:
    return str(request.param)


@pytest.fixture
def store(request: Any, memory: Any, amemory: Any, tenant: Any, mode: str) -> Door:
    return make_store(request, memory, amemory, mode, caller=Identity(user_id=tenant.user, project_id=tenant.project))


@pytest.fixture
def N(tenant: Any):
    """A namespace under the test user's memories: ``N("test", "foo")``."""
    return lambda *segments: ("memories", tenant.user, *segments)


# --- ported from LangGraph's PostgresStore tests -------------------------------------------------


async def test_batch_order(store: Door, N: Any) -> None:
    await store.put(N("test", "foo"), "key1", {"data": "value1"})
    await store.put(N("test", "bar"), "key2", {"data": "value2"})
    results = await store.batch([
        GetOp(namespace=N("test", "foo"), key="key1"),
        PutOp(namespace=N("test", "bar"), key="key2", value={"data": "value2"}),
        SearchOp(namespace_prefix=N("test"), filter={"data": "value1"}, limit=10, offset=0),
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
        GetOp(namespace=N("test"), key="key3"),
    ])
    assert len(results) == 5
    assert isinstance(results[0], Item) and results[0].value == {"data": "value1"} and results[0].key == "key1"
    assert results[1] is None
    assert [item.key for item in results[2]] == ["key1"]
    assert set(results[3]) == {N("test", "foo"), N("test", "bar")}
    assert results[4] is None

    reordered = await store.batch([
        SearchOp(namespace_prefix=N("test"), filter=None, limit=5, offset=0),
        GetOp(namespace=N("test", "bar"), key="key2"),
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
        PutOp(namespace=N("test"), key="key3", value={"data": "value3"}),
        GetOp(namespace=N("test", "foo"), key="key1"),
    ])
    assert len(reordered[0]) == 2
    assert reordered[1].value == {"data": "value2"} and reordered[1].key == "key2"
    assert len(reordered[2]) == 2
    assert reordered[3] is None
    assert reordered[4].value == {"data": "value1"}
    assert (await store.get(N("test"), "key3")).value == {"data": "value3"}


async def test_batch_get_ops(store: Door, N: Any) -> None:
    await store.put(N("test"), "key1", {"data": "value1"})
    await store.put(N("test"), "key2", {"data": "value2"})
    results = await store.batch([GetOp(N("test"), "key1"), GetOp(N("test"), "key2"), GetOp(N("test"), "key3")])
    assert [r.key if r else None for r in results] == ["key1", "key2", None]


async def test_batch_put_ops(store: Door, N: Any) -> None:
    results = await store.batch([
        PutOp(N("test"), "key1", {"data": "value1"}),
        PutOp(N("test"), "key2", {"data": "value2"}),
        PutOp(N("test"), "key3", None),  # a delete of nothing
    ])
    assert results == [None, None, None]
    assert (await store.get(N("test"), "key1")).value == {"data": "value1"}
    assert (await store.get(N("test"), "key2")).value == {"data": "value2"}
    assert await store.get(N("test"), "key3") is None


async def test_batch_search_ops(store: Door, N: Any) -> None:
    for namespace, key, value in [(N("test", "foo"), "key1", {"data": "value1", "tag": "a"}),
                                  (N("test", "bar"), "key2", {"data": "value2", "tag": "a"}),
                                  (N("test", "baz"), "key3", {"data": "value3", "tag": "b"})]:
        await store.put(namespace, key, value)
    results = await store.batch([
        SearchOp(namespace_prefix=N("test"), filter={"tag": "a"}, limit=10, offset=0),
        SearchOp(namespace_prefix=N("test"), filter=None, limit=2, offset=0),
        SearchOp(namespace_prefix=N("test", "foo"), filter=None, limit=10, offset=0),
    ])
    assert len(results[0]) == 2 and all(item.value["tag"] == "a" for item in results[0])
    assert len(results[1]) == 2
    assert [item.namespace for item in results[2]] == [N("test", "foo")]


async def test_batch_list_namespaces_ops(store: Door, N: Any) -> None:
    data = [(N("test", "documents", "public"), "doc1", {"content": "public doc"}),
            (N("test", "documents", "private"), "doc2", {"content": "private doc"}),
            (N("test", "images", "public"), "img1", {"content": "public image"}),
            (N("prod", "documents", "public"), "doc3", {"content": "prod doc"})]
    for namespace, key, value in data:
        await store.put(namespace, key, value)
    results = await store.batch([
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
        ListNamespacesOp(match_conditions=None, max_depth=4, limit=10, offset=0),
        ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("public",)),), max_depth=None, limit=10,
                         offset=0),
    ])
    assert sorted(results[0]) == sorted(ns for ns, _, _ in data)
    assert sorted(results[1]) == sorted({N("test", "documents"), N("test", "images"), N("prod", "documents")})
    assert sorted(results[2]) == sorted(ns for ns, _, _ in data if ns[-1] == "public")


async def test_basic_store_ops(store: Door, N: Any) -> None:
    namespace = N("test", "documents")
    value = {"title": "Test Document", "content": "Hello, World!"}
    await store.put(namespace, "doc1", value)
    item = await store.get(namespace, "doc1")
    assert item and item.namespace == namespace and item.key == "doc1" and item.value == value

    updated = {"title": "Updated Document", "content": "Hello, Updated!"}
    await store.put(namespace, "doc1", updated)
    again = await store.get(namespace, "doc1")
    assert again.value == updated
    assert again.updated_at > item.updated_at
    assert again.created_at == item.created_at

    assert await store.get(N("test", "other_documents"), "doc1") is None
    await store.delete(namespace, "doc1")
    assert await store.get(namespace, "doc1") is None


async def test_list_namespaces(store: Door, N: Any) -> None:
    namespaces = [N("test", "documents", "public"), N("test", "documents", "private"), N("test", "images", "public"),
                  N("test", "images", "private"), N("prod", "documents", "public"), N("prod", "documents", "private")]
    for namespace in namespaces:
        await store.put(namespace, "dummy", {"content": "dummy content"})
    assert sorted(await store.list_namespaces()) == sorted(namespaces)  # and in tuple order:
    assert await store.list_namespaces() == sorted(namespaces)
    under_test = await store.list_namespaces(prefix=N("test"))
    assert len(under_test) == 4 and all(ns[2] == "test" for ns in under_test)
    public = await store.list_namespaces(suffix=("public",))
    assert len(public) == 3 and all(ns[-1] == "public" for ns in public)
    assert all(len(ns) <= 3 for ns in await store.list_namespaces(max_depth=3))
    assert await store.list_namespaces(max_depth=3) == [N("prod"), N("test")]
    assert len(await store.list_namespaces(limit=3)) == 3
    assert await store.list_namespaces(limit=3, offset=3) == sorted(namespaces)[3:]
    wild = await store.list_namespaces(prefix=(*N(), "*", "documents"), suffix=("private",))
    assert wild == [N("prod", "documents", "private"), N("test", "documents", "private")]
    for namespace in namespaces:
        await store.delete(namespace, "dummy")
    assert await store.list_namespaces() == []


async def test_search(store: Door, N: Any) -> None:
    data = [(N("test", "docs"), "doc1", {"title": "First Doc", "author": "Alice", "tags": ["important"]}),
            (N("test", "docs"), "doc2", {"title": "Second Doc", "author": "Bob", "tags": ["draft"]}),
            (N("test", "images"), "img1", {"title": "Image 1", "author": "Alice", "tags": ["final"]})]
    for namespace, key, value in data:
        await store.put(namespace, key, value)
    assert len(await store.search(N("test"))) == 3
    docs = await store.search(N("test", "docs"))
    assert len(docs) == 2 and all(item.namespace == N("test", "docs") for item in docs)
    alice = await store.search(N("test"), filter={"author": "Alice"})
    assert len(alice) == 2 and all(item.value["author"] == "Alice" for item in alice)
    assert len(await store.search(N("test"), limit=2)) == 2
    assert len(await store.search(N("test"), offset=2)) == 1
    assert [i.key for i in await store.search(N("test"), filter={"tags": ["draft"]})] == ["doc2"]
    for namespace, key, _ in data:
        await store.delete(namespace, key)
    assert await store.search(N("test")) == []


async def test_numeric_comparison_filters(store: Door, N: Any) -> None:
    """LangGraph's regression test for "9" >= "10": numbers compare as numbers."""
    namespace = N("test", "scores")
    for key, score in [("a", 2), ("b", 9), ("c", 10), ("d", 11)]:
        await store.put(namespace, key, {"score": score, "label": f"score {score}"})

    async def scores(filter: dict[str, Any]) -> list[Any]:
        return sorted(item.value["score"] for item in await store.search(namespace, filter=filter))

    assert await scores({"score": {"$gte": 10}}) == [10, 11]
    assert await scores({"score": {"$gt": 9}}) == [10, 11]
    assert await scores({"score": {"$lt": 10}}) == [2, 9]
    assert await scores({"score": {"$lte": 9}}) == [2, 9]
    await store.put(namespace, "e", {"score": 9.5, "label": "score 9.5"})
    assert await scores({"score": {"$gt": 9}}) == [9.5, 10, 11]
    assert await scores({"score": {"$gt": 9, "$lt": 11}}) == [9.5, 10]
    assert await scores({"score": 10.0}) == [10]  # 10.0 and 10 are one JSON number
    assert await scores({"score": {"$ne": 10}}) == [2, 9, 9.5, 11]
    assert await scores({"score": {"$in": [2, 11, 99]}}) == [2, 11]
    assert await scores({"score": {"$nin": [2, 11]}}) == [9, 9.5, 10]
    assert await scores({"score": {"$gt": "10"}}) == []  # a string never compares with numbers

    names = N("test", "names")
    for key, name in [("a", "apple"), ("b", "banana"), ("c", "10 apples"), ("d", "9 apples")]:
        await store.put(names, key, {"name": name})
    found = await store.search(names, filter={"name": {"$gt": "apple"}})
    assert sorted(item.value["name"] for item in found) == ["banana"]
    found = await store.search(names, filter={"name": {"$lt": "9"}})  # strings compare as text
    assert sorted(item.value["name"] for item in found) == ["10 apples"]


async def test_vector_insert_with_auto_embedding(store: Door, N: Any) -> None:
    docs = [("doc1", {"text": "short text"}), ("doc2", {"text": "longer text document"}),
            ("doc3", {"text": "longest text document here"}), ("doc4", {"description": "text in description field"}),
            ("doc5", {"content": "text in content field"}), ("doc6", {"body": "text in body field"})]
    for key, value in docs:
        await store.put(N("test"), key, value)
    results = await store.search(N("test"), query="long text")
    keys = [r.key for r in results]
    assert "doc2" in keys and "doc3" in keys
    assert all(isinstance(r.score, float) for r in results)
    assert results == sorted(results, key=lambda r: -r.score)


async def test_vector_update_with_embedding(store: Door, N: Any) -> None:
    await store.put(N("test"), "doc1", {"text": "zany zebra Xerxes"})
    await store.put(N("test"), "doc2", {"text": "something about dogs"})
    await store.put(N("test"), "doc3", {"text": "text about birds"})
    initial = await store.search(N("test"), query="Zany Xerxes")
    assert initial[0].key == "doc1"
    initial_score = initial[0].score

    await store.put(N("test"), "doc1", {"text": "new text about dogs"})
    after = await store.search(N("test"), query="Zany Xerxes")
    after_score = next(r.score for r in after if r.key == "doc1")
    assert after_score < initial_score
    for r in await store.search(N("test"), query="new text about dogs"):
        if r.key == "doc1":
            assert r.score > after_score

    await store.put(N("test"), "doc4", {"text": "new text about dogs"}, index=False)
    assert not any(r.key == "doc4" for r in await store.search(N("test"), query="new text about dogs", limit=3))
    assert any(r.key == "doc4" for r in await store.search(N("test")))  # listed, just not searched


async def test_vector_search_with_filters(store: Door, N: Any) -> None:
    docs = [("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
            ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
            ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
            ("doc4", {"text": "blue car", "color": "blue", "score": 3.5})]
    for key, value in docs:
        await store.put(N("test"), key, value)
    results = await store.search(N("test"), query="apple", filter={"color": "red"})
    assert [r.key for r in results] == ["doc1", "doc2"]
    results = await store.search(N("test"), query="car", filter={"color": "red"})
    assert [r.key for r in results] == ["doc2", "doc1"]
    results = await store.search(N("test"), query="blue", filter={"score": {"$gt": 3.2}})
    assert len(results) == 3 and results[0].key == "doc4"
    results = await store.search(N("test"), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"})
    assert [r.key for r in results] == ["doc3"]


async def test_vector_search_pagination_and_edge_cases(store: Door, N: Any) -> None:
    for i in range(5):
        await store.put(N("test"), f"doc{i}", {"text": f"test document number {i}"})
    page1 = await store.search(N("test"), query="test", limit=2)
    page2 = await store.search(N("test"), query="test", limit=2, offset=2)
    assert len(page1) == 2 and len(page2) == 2 and {r.key for r in page1}.isdisjoint(r.key for r in page2)
    assert len(await store.search(N("test"), query="test", limit=10)) == 5
    for query in ("", None, "test " * 100, "test!@#$%^&*()"):
        assert len(await store.search(N("test"), query=query)) == 5


async def test_embed_with_path(request: Any, memory: Any, amemory: Any, tenant: Any, mode: str, N: Any) -> None:
    """The index config's fields choose the embedded text; a put's ``index`` overrides them."""
    store = make_store(request, memory, amemory, mode, caller=Identity(user_id=tenant.user),
                       index={"dims": 384, "fields": ["key0", "key1", "key3"]})
    await store.put(N("test"), "doc1", {"key1": "purple giraffes dancing", "key2": "accounting ledger",
                                        "key3": "purple giraffes dancing"})
    await store.put(N("test"), "doc2", {"key0": "volcanic rock formations", "key1": "volcanic rock formations",
                                        "key2": "purple giraffes dancing", "key3": "volcanic rock formations"})
    assert (await store.search(N("test"), query="purple giraffes"))[0].key == "doc1"  # doc2's key2 not indexed
    assert (await store.search(N("test"), query="volcanic rocks"))[0].key == "doc2"

    await store.put(N("test"), "doc3", {"key0": "x", "other": "medieval castle architecture"}, index=["other"])
    assert (await store.search(N("test"), query="castle architecture"))[0].key == "doc3"


async def test_stored_content_is_the_indexed_text(memory: Any, tenant: Any, N: Any) -> None:
    store = AgentMemoryStore(memory, caller=Identity(user_id=tenant.user), index={"fields": ["note.text"]})
    store.put(N("notes"), "n1", {"note": {"text": "Prefers tea over coffee in the morning"}, "rank": 1})
    [hit] = memory.for_user(tenant.user).search("tea or coffee?", k=1)
    assert hit.content == "Prefers tea over coffee in the morning"
    assert hit.item.key == encode_key(N("notes"), "n1")
    store.put(N("notes"), "n1", {"note": {"text": "Prefers coffee over tea in the morning now"}, "rank": 2})
    [version0, version1] = memory.for_user(tenant.user).history(hit.item.id)  # the earlier value is in its history
    assert version0.content == "Prefers tea over coffee in the morning"
    assert version1.content == "Prefers coffee over tea in the morning now"
    assert store.get(N("notes"), "n1").value == {"note": {"text": "Prefers coffee over tea in the morning now"},
                                                 "rank": 2}


async def test_values_round_trip_exactly(store: Door, N: Any) -> None:
    value = {"text": "A value with every JSON type", "int": 10, "float": 2.5, "big": 12345678901234567,
             "neg": -0.001, "bool": True, "null": None, "list": [1, "two", {"three": [3.0]}],
             "nested": {"a": {"b": {"c": "déjà vu 你好 \U0001f600"}}}, "quote": "she said \"hi\" \\ o/"}
    await store.put(N("round"), "k", value)
    assert (await store.get(N("round"), "k")).value == value
    [hit] = await store.search(N("round"), query="every JSON type")
    assert hit.value == value


async def test_non_ascii(store: Door, N: Any) -> None:
    texts = {"1": "这是中文", "2": "これは日本語です", "3": "이건 한국어야", "4": "Это русский", "5": "यह रूसी है"}
    for key, text in texts.items():
        await store.put(N("i18n"), key, {"text": text})
    for key, text in texts.items():
        assert (await store.search(N("i18n"), query=text))[0].key == key


TTL_SECONDS = 2.0


async def test_store_ttl(request: Any, memory: Any, amemory: Any, tenant: Any, mode: str, N: Any) -> None:
    """LangGraph's TTL test with a 2 s TTL: reads with refresh_ttl renew it, others do not."""
    store = make_store(request, memory, amemory, mode, caller=Identity(user_id=tenant.user),
                       ttl={"default_ttl": TTL_SECONDS / 60, "refresh_on_read": True})
    ns = N("ttl")
    await store.put(ns, "item1", {"foo": "bar baz qux"})
    await asyncio.sleep(TTL_SECONDS * 0.6)
    assert await store.get(ns, "item1", refresh_ttl=True) is not None
    await asyncio.sleep(TTL_SECONDS * 0.6)  # 1.2 TTLs after the put, 0.6 after the refresh
    assert len(await store.search(ns, query="foo", refresh_ttl=True)) == 1
    await asyncio.sleep(TTL_SECONDS * 0.6)
    assert await store.get(ns, "item1", refresh_ttl=False) is not None
    await asyncio.sleep(TTL_SECONDS * 0.6)  # 1.2 TTLs after the last refresh
    assert await store.search(ns, query="bar", refresh_ttl=False) == []
    assert await store.get(ns, "item1") is None
    assert await store.list_namespaces() == []
    assert memory.for_user(tenant.user).search("foo bar") == []  # expired for every door

    await store.put(ns, "forever", {"foo": "no expiry for this one"}, ttl=None)
    await asyncio.sleep(TTL_SECONDS * 1.2)
    assert await store.get(ns, "forever") is not None


def test_ttl_sweeper_deletes_expired_items(memory: Any, tenant: Any, N: Any) -> None:
    store = AgentMemoryStore(memory, caller=Identity(user_id=tenant.user),
                             ttl={"default_ttl": 1 / 60, "sweep_interval_minutes": 0.5 / 60})
    store.put(N("sweep"), "k", {"text": "a short-lived note"})
    [hit] = memory.for_user(tenant.user).search("short-lived note", k=1)
    future = store.start_ttl_sweeper()
    assert store.start_ttl_sweeper() is future  # one sweeper per store
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and memory.export_data(user_id=tenant.user, what="owned")["memories"]:
        time.sleep(0.2)
    assert memory.export_data(user_id=tenant.user, what="owned")["memories"] == []  # deleted, not just hidden
    assert not future.done()
    assert store.stop_ttl_sweeper(timeout=5) is True
    assert future.done() and future.exception() is None
    assert hit.item.expires_at is not None


async def test_async_ttl_sweeper(amemory: Any, tenant: Any, N: Any) -> None:
    store = AgentMemoryStore(amemory, caller=Identity(user_id=tenant.user), ttl={"default_ttl": 1 / 60})
    await store.aput(N("sweep"), "k", {"text": "another short-lived note"})
    task = await store.start_ttl_sweeper(sweep_interval_minutes=0.5 / 60)  # LangGraph's async names
    assert await store.astart_ttl_sweeper() is task  # one sweeper per store, under either name
    await asyncio.sleep(2.5)
    assert (await amemory.export_data(user_id=tenant.user, what="owned"))["memories"] == []
    assert not task.done()
    assert await store.stop_ttl_sweeper(timeout=5) is True
    assert task.done() and await store.astop_ttl_sweeper() is False
    assert await store.sweep_ttl() == 0


# --- tenancy ----------------------------------------------------------------------------------


async def test_another_users_namespace_is_refused(request: Any, memory: Any, amemory: Any, tenant: Any,
                                                  mode: str) -> None:
    alice = make_store(request, memory, amemory, mode, caller=Identity(user_id=tenant.user))
    bob = make_store(request, memory, amemory, mode, caller=Identity(user_id=tenant.other_user))
    await alice.put(("memories", tenant.user, "notes"), "k", {"text": "alice's private diary entry"})
    for call in (bob.get(("memories", tenant.user, "notes"), "k"),
                 bob.search(("memories", tenant.user)),
                 bob.put(("memories", tenant.user, "notes"), "k", {"text": "bob overwrites alice"}),
                 bob.delete(("memories", tenant.user, "notes"), "k"),
                 bob.list_namespaces(prefix=("memories", tenant.user))):
        with pytest.raises(PermissionDeniedError, match="another user's memory"):
            await call
    assert await bob.search(()) == [] and await bob.search(("memories",)) == []
    assert await bob.list_namespaces() == []
    assert (await alice.get(("memories", tenant.user, "notes"), "k")).value == {"text": "alice's private diary entry"}


async def test_prefix_tricks_and_escaped_characters(request: Any, memory: Any, amemory: Any, mode: str) -> None:
    """Whole segments only, and no segment spelled with quotes, commas, brackets, LIKE wildcards
    or backslashes can reach another namespace."""
    tag = uuid.uuid4().hex[:8]
    al, alice = f"al-{tag}", f"al-{tag}ice"
    store = make_store(request, memory, amemory, mode, trusted=True)  # the namespace names the user
    await store.put(("memories", al), "k", {"text": "al's memory, short id"})
    await store.put(("memories", alice), "k", {"text": "alice's memory, longer id"})
    assert [i.value["text"] for i in await store.search(("memories", al))] == ["al's memory, short id"]
    assert await store.list_namespaces(prefix=("memories", al)) == [("memories", al)]

    tricky = ["a", "ab", "%", "_", "a%", "\\", "\\%", '"', '", "', 'x", "y', "x", "[", "]", "a/b", "a:b", "'", "*"]
    for segment in tricky:
        await store.put(("memories", al, segment), "k", {"text": f"segment {segment!r} here"})
    await store.put(("memories", al, "x", "y"), "k", {"text": "two segments x and y"})
    for segment in tricky:
        found = await store.search(("memories", al, segment))
        assert sorted(i.namespace for i in found) == [("memories", al, segment)] + (
            [("memories", al, "x", "y")] if segment == "x" else []), segment
        assert (await store.get(("memories", al, segment), "k")).value == {"text": f"segment {segment!r} here"}
        if segment == "*":
            continue  # in list_namespaces' conditions "*" stands for any one segment (LangGraph's rule)
        listed = await store.list_namespaces(prefix=("memories", al, segment))
        assert listed == sorted({("memories", al, segment)} | ({("memories", al, "x", "y")} if segment == "x" else
                                                                set()))
    assert await store.get(("memories", al, "x"), 'y", "k') is None


async def test_a_user_whose_id_is_a_prefix_of_anothers_sees_only_their_own(memory: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    al, alice = f"al-{tag}", f"al-{tag}ice"
    for user in (al, alice):
        AgentMemoryStore(memory, caller=Identity(user_id=user)).put(("memories", user, "n"), "k",
                                                                    {"text": f"the memory of {user}"})
    store = AgentMemoryStore(memory, caller=Identity(user_id=al))
    for prefix in ((), ("memories",), ("memories", al)):
        assert [i.value["text"] for i in store.search(prefix)] == [f"the memory of {al}"]
    assert store.list_namespaces() == [("memories", al, "n")]
    assert store.list_namespaces(prefix=("memories", "*", "n")) == [("memories", al, "n")]
    assert [i.value["text"] for i in store.search((), query=f"the memory of {alice}")] == [f"the memory of {al}"]


async def test_sessions_and_teams(memory: Any, tenant: Any) -> None:
    team = f"team-{uuid.uuid4().hex[:8]}"
    memory.create_team(team, user_id=tenant.user)
    memory.add_member("team", team, tenant.other_user, "member", user_id=tenant.user)
    alice = AgentMemoryStore(memory, caller=Identity(user_id=tenant.user, session_id=tenant.session))
    bob = AgentMemoryStore(memory, caller=Identity(user_id=tenant.other_user, session_id=tenant.session))
    alice.put(("sessions", tenant.session, "scratch"), "k", {"text": "alice's note for this session only"})
    alice.put(("teams", team), "style", {"text": "The team writes Python with type hints"})
    assert alice.get(("sessions", tenant.session, "scratch"), "k") is not None
    assert bob.get(("sessions", tenant.session, "scratch"), "k") is None  # one session id, two users
    assert bob.search(("sessions",)) == []
    assert [i.key for i in bob.search(("teams",), query="coding style")] == ["style"]
    assert bob.list_namespaces(prefix=("teams",)) == [("teams", team)]
    [hit] = memory.for_user(tenant.user, session_id=tenant.session).search("note for this session", k=1,
                                                                           scope="session")
    assert hit.item.scope.value == "session"
    outsider = AgentMemoryStore(memory, caller=Identity(user_id=f"out-{uuid.uuid4().hex[:8]}"))
    assert outsider.search(("teams", team)) == [] and outsider.list_namespaces() == []


async def test_forged_metadata_never_claims_another_namespace(memory: Any, tenant: Any) -> None:
    """A memory saved with `add` and a hand-made `_store` entry stays a plain memory of its writer."""
    forged = {"_store": {"ns": ["memories", tenant.other_user, "x"], "value": {"text": "forged"}}}
    memory.for_user(tenant.user).add("A memory with forged store metadata", metadata=forged)
    memory.for_user(tenant.user).add("A memory with a malformed store entry", metadata={"_store": {"ns": ["x"]}})
    bob = AgentMemoryStore(memory, caller=Identity(user_id=tenant.other_user))
    alice = AgentMemoryStore(memory, caller=Identity(user_id=tenant.user))
    assert bob.list_namespaces() == [] and bob.search(()) == []
    assert alice.list_namespaces() == [("memories", tenant.user)]
    hits = alice.search(("memories", tenant.user))
    assert [(h.namespace, h.value) for h in hits] == [
        (("memories", tenant.user), {"content": "A memory with a malformed store entry"}),
        (("memories", tenant.user), {"content": "A memory with forged store metadata"})]


async def test_shared_levels_follow_the_access_rules(request: Any, memory: Any, amemory: Any, tenant: Any,
                                                     mode: str) -> None:
    owner = make_store(request, memory, amemory, mode, caller=Identity(user_id=tenant.user))
    member = make_store(request, memory, amemory, mode, caller=Identity(user_id=tenant.other_user))
    outsider = make_store(request, memory, amemory, mode, caller=Identity(user_id=f"out-{uuid.uuid4().hex[:8]}"))
    ns = ("projects", tenant.project, "decisions")
    await owner.put(ns, "db", {"text": "We use PostgreSQL 16 for the webshop"})
    assert (await member.get(ns, "db")).value == {"text": "We use PostgreSQL 16 for the webshop"}
    assert [i.key for i in await member.search(("projects", tenant.project), query="database")] == ["db"]
    assert await outsider.get(ns, "db") is None
    assert await outsider.search(("projects", tenant.project)) == []
    assert await outsider.list_namespaces(prefix=("projects",)) == []
    with pytest.raises(PermissionDeniedError):
        await outsider.put(ns, "db", {"text": "an outsider's overwrite attempt"})
    # the project's memory, seen by the member through the service too
    hits = memory.for_user(tenant.other_user, project_id=tenant.project).search("which database?", scope="project")
    assert [h.content for h in hits] == ["We use PostgreSQL 16 for the webshop"]


async def test_wildcard_project_listing_shows_every_project_the_caller_reads(
        request: Any, memory: Any, amemory: Any, tenant: Any, mode: str) -> None:
    """``list_namespaces(prefix=("projects", "*"))`` for a caller with no ``project_id`` lists every
    project they can get and search (member of, or shared with them), never another user's
    (it listed nothing: the listing read projects only through the identity's ``project_id``)."""
    tag = uuid.uuid4().hex[:8]
    second, theirs, shared = f"second-{tag}", f"theirs-{tag}", f"shared-{tag}"
    memory.create_project(second, user_id=tenant.user)
    memory.create_project(theirs, user_id=tenant.other_user)
    memory.create_project(shared, user_id=tenant.other_user)
    memory.share_project(shared, user_id=tenant.other_user, with_user=tenant.user)
    me = make_store(request, memory, amemory, mode, caller=Identity(user_id=tenant.user))
    them = make_store(request, memory, amemory, mode, caller=Identity(user_id=tenant.other_user))
    await me.put(("projects", tenant.project, "notes"), "a", {"text": "The first project ships in March"})
    await me.put(("projects", second, "notes", "deep"), "b", {"text": "The second project needs a designer"})
    await them.put(("projects", theirs, "notes"), "c", {"text": "Their own project is about billing"})
    memory.for_user(tenant.other_user, project_id=shared).add(
        "The shared project publishes its roadmap openly", scope="project", visibility="public")
    await them.put(("projects", shared, "private"), "d", {"text": "Members only: the launch budget is tight"})

    mine = [("projects", shared), ("projects", tenant.project, "notes"), ("projects", second, "notes", "deep")]
    assert await me.list_namespaces(prefix=("projects", "*")) == sorted(mine)
    assert await me.list_namespaces(prefix=("projects",)) == sorted(mine)
    assert await me.list_namespaces(prefix=("projects", "*"), max_depth=2) == sorted(
        {("projects", p) for p in (shared, tenant.project, second)})
    assert await me.list_namespaces(prefix=("projects", "*"), limit=1, offset=1) == sorted(mine)[1:2]
    assert set(mine) <= set(await me.list_namespaces())  # no prefix: every level, every project
    for ns in mine:  # each one listed can be searched by the same caller
        assert await me.search(ns) != []
    # another user's projects never appear; theirs lists their own (editor of the tenant's project too)
    listed = await them.list_namespaces(prefix=("projects", "*"))
    assert ("projects", second, "notes", "deep") not in listed
    assert {("projects", theirs, "notes"), ("projects", shared, "private"), ("projects", tenant.project, "notes")
            } <= set(listed)
    outsider = make_store(request, memory, amemory, mode, caller=Identity(user_id=f"out-{tag}"))
    assert await outsider.list_namespaces(prefix=("projects", "*")) == []
    assert await outsider.list_namespaces() == []


async def test_run_identity_and_trusted_mode(memory: Any, tenant: Any) -> None:
    store = AgentMemoryStore(memory)
    with pytest.raises(MissingIdentityError, match="who is calling"):
        store.get(("memories", tenant.user), "k")
    trusted = AgentMemoryStore(memory, trusted=True)
    trusted.put(("memories", tenant.user, "t"), "k", {"text": "put by trusted server code"})
    assert trusted.get(("memories", tenant.user, "t"), "k") is not None
    with pytest.raises(MissingIdentityError):
        trusted.search(("memories",))  # which user? the namespace must say
    with pytest.raises(MissingIdentityError):
        trusted.put(("projects", tenant.project), "k", {"text": "a project write needs a user"})


# --- validation -------------------------------------------------------------------------------


def test_validation_names_the_field(memory: Any, tenant: Any) -> None:
    store = AgentMemoryStore(memory, caller=Identity(user_id=tenant.user))
    cases: list[tuple[Any, str]] = [
        (lambda: store.put(("memories",), "k", {"text": "hello there"}), "namespace"),
        (lambda: store.put(("projects", "bad id!"), "k", {"text": "hello there"}), "namespace[1]"),
        (lambda: store.batch([PutOp(("memories", tenant.user), "k", ["not", "a", "dict"])]), "value"),
        (lambda: store.put(("memories", tenant.user), "k", {"text": "my password is hunter2-XYZ!"}), "value"),
        (lambda: store.search(("memories", tenant.user), filter={"n": {"$regex": "x"}}), "filter['n']"),
        (lambda: store.search(("memories", tenant.user), filter={"n": {"$gt": [1]}}), "filter['n']"),
        (lambda: store.search(("memories", tenant.user), limit=0), "limit"),
        (lambda: store.search(("memories", tenant.user), filter={"n": {"$gt": 1, "x": 2}}), "filter['n']"),
        (lambda: store.put(("memories", tenant.user), "k", {"text": "hello there"}, index=["a..b"]), "index"),
        (lambda: store.batch([GetOp(("memories", tenant.user), "")]), "key"),
    ]
    for call, field in cases:
        with pytest.raises(InvalidInputError) as caught:
            call()
        assert caught.value.field == field, (field, caught.value)
    with pytest.raises(EmbeddingDimensionMismatchError, match="dims=384"):
        AgentMemoryStore(memory, index={"dims": 1536, "fields": ["text"]})
    with pytest.raises(ConfigurationError, match="unknown keys"):
        AgentMemoryStore(memory, ttl={"default_tll": 5})  # type: ignore[typeddict-unknown-key]


def test_what_callers_type_travels_as_parameters() -> None:
    from agent_memory import queries
    from agent_memory.models import Scope
    from agent_memory.store.namespaces import NAMESPACE_ROOTS

    typed = ["x'; DROP TABLE memory_items; --", "50%_off\\"]
    where = queries.item_filter(Identity(user_id="alice"), scopes=(Scope.USER,))
    for query, params in [
        queries.store_filter(check_filter({typed[0]: {"$gt": typed[1]}, typed[1]: {"$in": [typed[0]]}})),
        queries.search_store(where, roots=NAMESPACE_ROOTS, key_prefix=key_prefix(("memories", "alice", *typed)),
                             plain_rows=False, filters=queries.store_filter(check_filter({typed[0]: 1})), vector=[0.1],
                             limit=5, offset=0),
        queries.list_store_namespaces(where, roots=NAMESPACE_ROOTS, prefix=("memories", *typed), suffix=typed,
                                      max_depth=3, limit=5, offset=0),
    ]:
        text = query.as_string(None)
        assert not any(t in text for t in typed) and "DROP" not in text
        assert any(typed[0] in str(v) for v in params.values())
    assert queries.like_prefix('["a_%\\", ') == '["a\\_\\%\\\\", %'


def test_pure_parts() -> None:
    assert encode_key(("memories", "al"), "k") == '["memories", "al", "k"]'
    assert not encode_key(("memories", "alice"), "k").startswith(key_prefix(("memories", "al")))
    assert encode_key(("memories", "al", "x"), "k").startswith(key_prefix(("memories", "al")))
    assert encode_key(("memories", 'a", "b'), "k") != encode_key(("memories", "a", "b"), "k")
    assert indexed_text({"a": [{"t": "x"}, {"t": "y"}], "n": 2}, ["a[*].t", "n", "missing"]) == "x\ny\n2"
    assert indexed_text({"a": [1, 2, 3]}, ["a[-1]"]) == "3"
    assert json.loads(indexed_text({"b": 1, "a": 2}, ["$"])) == {"a": 2, "b": 1}
    assert check_filter({"s": {"$gte": 3, "$lt": 9}, "c": "red"}) == AllOf((
        Condition("s", "$gte", 3), Condition("s", "$lt", 9), Condition("c", "$eq", "red")))
    alice = Identity(user_id="alice", project_id="web")
    assert resolve(("projects", "acme", "x"), alice, trusted=False, exact=True).identity.project_id == "acme"
    assert resolve(("memories", "bob"), None, trusted=True, exact=True).identity == Identity(user_id="bob")
    with pytest.raises(PermissionDeniedError):
        resolve(("memories", "bob"), alice, trusted=False, exact=False)


# --- the same memories through every door -----------------------------------------------------


def test_sync_service_async_api_and_async_service_from_a_thread(memory: Any, tenant: Any) -> None:
    store = AgentMemoryStore(memory, caller=Identity(user_id=tenant.user))
    asyncio.run(store.aput(("memories", tenant.user), "k", {"text": "saved through abatch in a thread"}))
    assert store.get(("memories", tenant.user), "k").value == {"text": "saved through abatch in a thread"}


async def test_async_service_store_refuses_sync_calls_on_its_loop(amemory: Any, tenant: Any) -> None:
    store = AgentMemoryStore(amemory, caller=Identity(user_id=tenant.user))
    with pytest.raises(ConfigurationError, match="aget"):
        store.get(("memories", tenant.user), "k")
    with pytest.raises(asyncio.InvalidStateError):  # what LangGraph's async stores raise here
        store.put(("memories", tenant.user), "k", {"text": "refused on the loop's own thread"})
    await store.aput(("memories", tenant.user), "k", {"text": "saved on the loop, read from a thread"})
    item = await asyncio.to_thread(store.get, ("memories", tenant.user), "k")  # the loop serves the thread
    assert item is not None and item.value == {"text": "saved on the loop, read from a thread"}


async def test_async_service_store_serves_worker_threads_before_any_async_call(
        dsn: str, config: Any, embeddings: Any, amemory: Any, tenant: Any) -> None:
    """Blocking calls from worker threads on a store over an AsyncMemoryService work as its first
    calls (they needed an earlier ``abatch`` to learn the loop): on a service already set up, even
    with the store built outside the loop, and on one not set up yet with the store built here."""
    ns = ("memories", tenant.user, "threads")
    built_in_a_thread = await asyncio.to_thread(AgentMemoryStore, amemory, caller=Identity(user_id=tenant.user))
    await asyncio.to_thread(built_in_a_thread.put, ns, "a", {"text": "written from a worker thread first"})
    item = await asyncio.to_thread(built_in_a_thread.get, ns, "a")
    assert item is not None and item.value == {"text": "written from a worker thread first"}

    from agent_memory import AsyncMemoryService

    fresh = AsyncMemoryService(dsn, config=config, embeddings=embeddings)  # not set up: no loop yet
    try:
        store = AgentMemoryStore(fresh, caller=Identity(user_id=tenant.user))  # built on this loop
        hits = await asyncio.to_thread(store.search, ns, query="worker thread")
        assert [h.key for h in hits] == ["a"]
        assert home_loop(fresh) is asyncio.get_running_loop()  # set up on the loop the store was built on
        with pytest.raises(ConfigurationError, match="thread that runs an event loop.*aget"):
            store.get(ns, "a")  # on the loop's own thread: refused, it would block the loop it waits for
    finally:
        await fresh.close()


def test_async_service_store_from_a_plain_thread_with_no_loop_just_works(dsn: str, config: Any,
                                                                         embeddings: Any) -> None:
    """No event loop anywhere yet: the blocking call sets the service up on the shared bridge
    loop (:mod:`agent_memory.sync_bridge`, the one mechanism the middleware and the retriever use)."""
    from agent_memory import AsyncMemoryService

    service = AsyncMemoryService(dsn, config=config, embeddings=embeddings)
    store = AgentMemoryStore(service, caller=Identity(user_id="nobody-yet"))
    assert store.get(("memories", "nobody-yet"), "k") is None
    store.put(("memories", "nobody-yet"), "k", {"text": "written with no event loop of ours"})
    assert store.get(("memories", "nobody-yet"), "k").value == {"text": "written with no event loop of ours"}
    store.delete(("memories", "nobody-yet"), "k")
    home = home_loop(service)
    assert home is not None and home.is_running()
    asyncio.run_coroutine_threadsafe(service.close(), home).result()


async def test_memories_saved_elsewhere_show_in_the_store(store: Door, memory: Any, tenant: Any) -> None:
    saved = memory.for_user(tenant.user).add("Prefers window seats on long flights", memory_type="preference")
    [hit] = await store.search(("memories", tenant.user), query="seat preference on planes")
    assert (hit.namespace, hit.key, hit.value) == (("memories", tenant.user), str(saved.id),
                                                    {"content": "Prefers window seats on long flights"})
    assert (await store.get(("memories", tenant.user), str(saved.id))).value == hit.value
    assert await store.list_namespaces() == [("memories", tenant.user)]
    await store.put(("memories", tenant.user), str(saved.id), {"content": "Prefers aisle seats on long flights"})
    [hit] = await store.search(("memories", tenant.user), query="seat preference on planes")
    assert hit.value == {"content": "Prefers aisle seats on long flights"} and hit.key == str(saved.id)
    await store.delete(("memories", tenant.user), str(saved.id))
    assert await store.search(("memories", tenant.user)) == []


# --- langmem's tools inside create_agent, next to MemoryMiddleware --------------------------------


def _langmem_agent(memory: Any, script: list[Any]) -> tuple[Any, Any]:
    from langchain.agents import create_agent
    from langmem import create_manage_memory_tool, create_search_memory_tool

    from agent_memory.middleware import MemoryMiddleware
    from agent_memory.testing import ScriptedChatModel

    namespace = ("memories", "{user_id}")  # filled from the run's config, as our identity is
    model = ScriptedChatModel(script=script)
    agent = create_agent(model, [create_manage_memory_tool(namespace), create_search_memory_tool(namespace)],
                         store=AgentMemoryStore(memory), middleware=[MemoryMiddleware(memory)])
    return agent, model


@pytest.mark.parametrize("mode", MODES)
async def test_langmem_tools_share_memory_with_the_middleware(memory: Any, amemory: Any, tenant: Any,
                                                              mode: str) -> None:
    from langchain_core.messages import AIMessage, ToolMessage

    from agent_memory.testing import tool_call

    service = memory if mode == "sync" else amemory
    config = {"configurable": {"user_id": tenant.user, "thread_id": f"t-{uuid.uuid4().hex[:8]}"}}

    async def run(script: list[Any], text: str) -> tuple[list[Any], Any]:
        agent, model = _langmem_agent(service, script)
        inputs = {"messages": [{"role": "user", "content": text}]}
        if mode == "sync":
            result = await asyncio.to_thread(agent.invoke, inputs, config)
        else:
            result = await agent.ainvoke(inputs, config)
        return result["messages"], model

    # 1. langmem's manage tool saves a memory through the store ...
    save = AIMessage("", tool_calls=[tool_call("manage_memory", content="Alice is allergic to peanuts",
                                               action="create")])
    messages, _ = await run([save, "Noted."], "Remember that I am allergic to peanuts")
    [saved] = [m for m in messages if isinstance(m, ToolMessage)]
    assert saved.status != "error", saved.content
    # ... which the service finds ...
    [hit] = memory.for_user(tenant.user).search("food allergies", k=1)
    assert hit.content == "Alice is allergic to peanuts"
    assert hit.item.metadata["_store"]["value"] == {"content": "Alice is allergic to peanuts"}
    # ... and the middleware injects in a later run, and its memory_search tool finds
    _, model = await run(["You are allergic to peanuts."], "Which foods should I avoid for my allergies?")
    assert "Alice is allergic to peanuts" in model.system_prompts[0]
    ask = AIMessage("", tool_calls=[tool_call("memory_search", query="food allergies")])
    messages, _ = await run([ask, "Peanuts."], "What am I allergic to?")
    [answer] = [m for m in messages if isinstance(m, ToolMessage)]
    assert "Alice is allergic to peanuts" in str(answer.content)

    # 2. a memory saved with the service is found by langmem's search tool
    memory.for_user(tenant.user).add("Prefers window seats on long flights", memory_type="preference")
    search = AIMessage("", tool_calls=[tool_call("search_memory", query="seat on a plane")])
    messages, _ = await run([search, "A window seat."], "Which seat do I like?")
    [found] = [m for m in messages if isinstance(m, ToolMessage)]
    assert "Prefers window seats on long flights" in str(found.content)

    # 3. langmem's update and delete, by the id its search returned, reach the same memory
    [item] = [i for i in json.loads(str(found.content)) if "window" in i["value"]["content"]]
    update = AIMessage("", tool_calls=[tool_call("manage_memory", id=item["key"], action="update",
                                                 content="Prefers aisle seats on long flights")])
    await run([update, "Updated."], "Actually I prefer the aisle now")
    assert [h.content for h in memory.for_user(tenant.user).search("seat on a plane", k=5)
            if "seats" in h.content] == ["Prefers aisle seats on long flights"]


async def test_ids_with_dots_are_namespace_labels_like_any_other(store: Door, memory: Any) -> None:
    """LangGraph's own methods refuse "." in a label (its PostgresStore joins labels with "."); ours
    keep keys as JSON, so an email is a user id and "acme.io" a project."""
    user = f"jane.doe+{uuid.uuid4().hex[:6]}@example.com"
    door = Door(AgentMemoryStore(store.store.memory, caller=Identity(user_id=user)), store.mode)
    await door.put(("memories", user, "v1.2"), "file.txt", {"text": "notes about version 1.2"})
    assert (await door.get(("memories", user, "v1.2"), "file.txt")).value == {"text": "notes about version 1.2"}
    assert await door.list_namespaces() == [("memories", user, "v1.2")]


def test_the_ops_run_on_scripted_answers_without_a_database() -> None:
    """The store's ops are generators like every other operation: driven here with no server."""
    from datetime import UTC, datetime

    from test_ops_scripted import drive

    from agent_memory.config import MemoryConfig
    from agent_memory.db.requests import Embed, Sql
    from agent_memory.principal import PrincipalOps
    from agent_memory.store.ops import StoreSettings, get_item, search_items

    config = MemoryConfig.defaults()
    settings = StoreSettings(config=config, principal=lambda who: PrincipalOps(config, who, lambda llm: None))
    alice = Identity(user_id="alice")
    now = datetime.now(UTC)
    row = {"id": uuid.uuid4(), "key": '["memories", "alice", "n", "k"]', "namespace": ["memories", "alice", "n"],
           "value": {"text": "dark roast"}, "created_at": now, "updated_at": now, "score": 0.9, "renewable": True}
    requests: list[Any] = []
    target = resolve(("memories", "alice"), alice, trusted=False, exact=False)
    [hit] = drive(search_items(settings, target, ("memories", "alice"), query="coffee", refresh=True),
                  [[[0.6, 0.8]], [row, dict(row, id=uuid.uuid4(), renewable=False)][:1], None, None, None],
                  requests)
    assert (hit.namespace, hit.key, hit.value, hit.score) == (("memories", "alice", "n"), "k", {"text": "dark roast"},
                                                              0.9)
    assert [type(r) for r in requests] == [Embed, Sql, Sql, Sql, Sql]
    assert requests[1].params["ss_prefix"] == '["memories", "alice", %'
    assert requests[3].params == {"ids": [row["id"]]}  # the read renews the TTL of what it read (savepoint around)

    requests.clear()
    exact = resolve(("memories", "alice", "n"), alice, trusted=False, exact=True)
    assert drive(get_item(settings, exact, ("memories", "alice", "n"), "k", refresh=True), [None], requests) is None
    assert requests[0].params["k_key"] == '["memories", "alice", "n", "k"]'
