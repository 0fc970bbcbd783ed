"""What makes the store a drop-in for LangGraph code: namespaces that name no level of memory,
LangGraph's exception types (issue 33)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langgraph.store.base import InvalidNamespaceError as LangGraphNamespaceError

from agent_memory import Identity
from agent_memory.errors import InvalidInputError, MissingIdentityError, PermissionDeniedError
from agent_memory.store import AgentMemoryStore, InvalidNamespaceError
from agent_memory.store.namespaces import as_given, own_namespace


def test_the_mapping_of_own_namespaces_is_pure_and_reversible() -> None:
    alice = Identity(user_id="alice")
    for ns in [("docs",), ("docs", "v1"), ("~", "x"), ("a", "memories", "b")]:
        stored = own_namespace(ns, alice)
        assert stored == ("memories", "alice", "~", *ns) and as_given(stored, alice) == ns
    for ns in [(), ("memories", "alice"), ("projects", "p", "x"), ("*", "x")]:
        assert own_namespace(ns, alice) == ns
    assert as_given(("memories", "alice", "~", "docs"), Identity(user_id="bob")) == ("memories", "alice", "~", "docs")
    with pytest.raises(MissingIdentityError):
        own_namespace(("docs",), None)


def test_namespaces_that_name_no_level_are_the_callers_own(memory: Any) -> None:
    alice, bob = (f"{n}-{uuid.uuid4().hex[:8]}" for n in ("alice", "bob"))
    store_a = AgentMemoryStore(memory, caller=Identity(user_id=alice))
    store_b = AgentMemoryStore(memory, caller=Identity(user_id=bob))
    store_a.put(("test", "foo"), "k1", {"data": "alice's value one"})
    store_a.put(("test", "bar"), "k2", {"data": "alice's value two"})
    store_a.put(("test",), "k3", {"data": "alice's value three"})
    store_b.put(("test", "foo"), "k1", {"data": "bob's value"})

    item = store_a.get(("test", "foo"), "k1")
    assert item is not None and item.namespace == ("test", "foo") and item.value == {"data": "alice's value one"}
    assert store_b.get(("test", "foo"), "k1").value == {"data": "bob's value"}  # each their own
    assert {(i.namespace, i.key) for i in store_a.search(("test",))} == {
        (("test", "foo"), "k1"), (("test", "bar"), "k2"), (("test",), "k3")}
    assert [i.key for i in store_b.search(("test",))] == ["k1"]
    assert sorted(store_a.list_namespaces(prefix=("test",))) == [("test",), ("test", "bar"), ("test", "foo")]
    assert store_a.list_namespaces(prefix=("test",), max_depth=1) == [("test",)]
    assert ("test", "foo") in store_a.list_namespaces()  # listed as written
    # where they live: the caller's memories, behind "~" (reachable that way too)
    stored = store_a.get(("memories", alice, "~", "test", "foo"), "k1")
    assert stored is not None and stored.namespace == ("test", "foo")
    with pytest.raises(PermissionDeniedError):  # bob reaches none of it, by either spelling
        store_b.search(("memories", alice))
    store_a.delete(("test", "foo"), "k1")
    assert store_a.get(("test", "foo"), "k1") is None
    assert store_b.get(("test", "foo"), "k1") is not None

    nobody = AgentMemoryStore(memory, trusted=True)  # no caller: refused, as every namespace is
    with pytest.raises(MissingIdentityError):
        nobody.put(("test",), "k", {"data": "whose?"})


def test_bad_namespaces_raise_langgraphs_exception(memory: Any) -> None:
    store = AgentMemoryStore(memory, caller=Identity(user_id=f"lg-{uuid.uuid4().hex[:8]}"))
    for bad in [("a", ""), ("a", 3), "a.b", ("memories",)]:
        with pytest.raises(LangGraphNamespaceError) as caught:
            store.put(bad, "k", {"data": "x"})  # type: ignore[arg-type]
        assert isinstance(caught.value, InvalidNamespaceError) and isinstance(caught.value, InvalidInputError)
        assert isinstance(caught.value, ValueError) and caught.value.field == "namespace"


@pytest.mark.parametrize("distance", ["cosine", "l2", "inner_product"])
def test_distance_types_score_as_langgraph_defines_them(memory: Any, embeddings: Any, distance: str) -> None:
    """cosine: 1 - cosine distance; l2: minus the Euclidean distance; inner_product: the dot
    product (LangGraph's PostgresStore scores); higher is closer, and results come in that order."""
    import numpy as np

    user = f"dist-{uuid.uuid4().hex[:8]}"
    store = AgentMemoryStore(memory, caller=Identity(user_id=user),
                             index={"fields": ["text"], "distance_type": distance})  # type: ignore[typeddict-item]
    texts = ["The cat sleeps on the warm windowsill", "Quarterly revenue grew by twelve percent",
             "Our kitten naps in the sun by the window"]
    for i, text in enumerate(texts):
        store.put(("notes",), f"k{i}", {"text": text})
    query = "where does the cat like to nap?"
    hits = store.search(("notes",), query=query)
    q = np.asarray(embeddings.embed_query(query))
    vectors = {f"k{i}": np.asarray(v) for i, v in enumerate(embeddings.embed_documents(texts))}

    def expected(key: str) -> float:
        v = vectors[key]
        if distance == "cosine":
            return float(v @ q / (np.linalg.norm(v) * np.linalg.norm(q)))
        if distance == "l2":
            return -float(np.linalg.norm(v - q))
        return float(v @ q)

    assert [h.score for h in hits] == pytest.approx([expected(h.key) for h in hits], abs=1e-4)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[-1].key == "k1"  # revenue is the farthest under every distance
    with pytest.raises(Exception, match="'cosine', 'l2' or 'inner_product'"):
        AgentMemoryStore(memory, index={"distance_type": "manhattan"})  # type: ignore[typeddict-item]


def test_a_match_condition_path_may_be_one_string(memory: Any) -> None:
    from langgraph.store.base import ListNamespacesOp, MatchCondition

    store = AgentMemoryStore(memory, caller=Identity(user_id=f"mc-{uuid.uuid4().hex[:8]}"))
    store.put(("users", "public"), "k", {"data": "a public note"})
    store.put(("users", "private"), "k", {"data": "a private note"})
    [listed] = store.batch([ListNamespacesOp(match_conditions=(MatchCondition("suffix", "public"),))])  # type: ignore[arg-type]
    assert listed == [("users", "public")]


def test_put_refuses_what_langgraphs_put_refuses_in_namespaces_that_name_no_level(memory: Any) -> None:
    """A period in a label, or ``"langgraph"`` first, as LangGraph's ``put``/``aput``; a level's
    id may hold a period, and ``batch`` does not check (as LangGraph's)."""
    from langgraph.store.base import PutOp

    user = f"dots-{uuid.uuid4().hex[:8]}"
    store = AgentMemoryStore(memory, caller=Identity(user_id=user))
    for bad in [("the", "thing.about"), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"data": "x"})
    store.put(("memories", user, "v1.2"), "k", {"data": "a note under a dotted folder of a level"})
    store.put(("foo", "langgraph", "foo"), "k", {"data": "langgraph as a later label"})
    store.batch([PutOp(("langgraph", "foo"), "k", {"data": "past the public put"})])
    assert store.get(("langgraph", "foo"), "k") is not None
    assert store.get(("foo", "langgraph", "foo"), "k") is not None


async def test_aput_refuses_the_same_namespaces(amemory: Any) -> None:
    store = AgentMemoryStore(amemory, caller=Identity(user_id=f"adots-{uuid.uuid4().hex[:8]}"))
    with pytest.raises(InvalidNamespaceError):
        await store.aput(("the", "thing.about"), "k", {"data": "x"})


def test_listing_every_namespace_cuts_and_pages_them_as_written(memory: Any) -> None:
    user = f"depth-{uuid.uuid4().hex[:8]}"
    store = AgentMemoryStore(memory, caller=Identity(user_id=user))
    for i, ns in enumerate([("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "b", "f"), ("a", "g"),
                            ("h", "i", "j", "k")]):
        store.put(ns, f"id{i}", {"data": f"value {i}"})
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "g"), ("h", "i")]
    assert store.list_namespaces(max_depth=1) == [("a",), ("h",)]
    assert store.list_namespaces(max_depth=3, limit=2, offset=1) == [("a", "b", "f"), ("a", "g")]
    assert store.list_namespaces(suffix=("k",)) == [("h", "i", "j", "k")]
    other = AgentMemoryStore(memory, caller=Identity(user_id=f"other-{uuid.uuid4().hex[:8]}"))
    assert other.list_namespaces(max_depth=2) == []
