"""AgentMemoryStore with an index config: one vector per indexed field path (migration 0025).

LangGraph's stores embed each field path of ``index['fields']`` (or of a put's ``index=[...]``)
on its own, with the index config's ``embed`` of ``dims`` dimensions, and score an item by its
best field under the config's ``distance_type``. These tests use a small embedder of our own
(letter counts: a text and its query of the same letters score exactly 1 under cosine), so the
expected scores can be computed by hand.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from typing import Any

import psycopg
import pytest
from langchain_core.embeddings import Embeddings

from agent_memory import Identity
from agent_memory.errors import ConfigurationError, EmbeddingDimensionMismatchError
from agent_memory.store import AgentMemoryStore
from agent_memory.store.values import field_texts

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def letters(text: str) -> list[float]:
    """26 letter counts, normalised (a text without letters: a small constant vector)."""
    counts = [float(text.lower().count(c)) for c in LETTERS]
    norm = math.sqrt(sum(x * x for x in counts))
    return [x / norm for x in counts] if norm else [1 / math.sqrt(26)] * 26


class LetterEmbeddings(Embeddings):
    def __init__(self) -> None:
        self.documents: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents.extend(texts)
        return [letters(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return letters(text)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b)) / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def score(distance: str, a: list[float], b: list[float]) -> float:
    if distance == "cosine":
        return cosine(a, b)
    if distance == "inner_product":
        return sum(x * y for x, y in zip(a, b))
    return -math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))


def user() -> Identity:
    return Identity(user_id=f"sv-{uuid.uuid4().hex[:10]}")


def make(service: Any, distance: str = "cosine", fields: list[str] | None = None, **kwargs: Any) -> AgentMemoryStore:
    embed = kwargs.pop("embed", None) or LetterEmbeddings()
    return AgentMemoryStore(service, caller=kwargs.pop("caller", None) or user(),
                            index={"dims": 26, "embed": embed, "distance_type": distance,  # type: ignore[typeddict-item]
                                   "fields": fields}, **kwargs)


def test_field_texts_name_each_path_as_langgraph_does() -> None:
    value = {"title": "Tea notes", "tags": ["green", "oolong"], "meta": {"by": "alice"}, "n": 3, "empty": " "}
    assert field_texts(value, ["title", "tags[*]", "meta.by", "missing", "n", "empty"]) == [
        ("title", "Tea notes"), ("tags[*].0", "green"), ("tags[*].1", "oolong"), ("meta.by", "alice"), ("n", "3")]
    [(path, whole)] = field_texts(value, ["$"])
    assert path == "$" and '"title": "Tea notes"' in whole


def test_the_index_configs_embed_and_dims_are_used(memory: Any) -> None:
    embed = LetterEmbeddings()
    store = make(memory, embed=embed, fields=["title", "body"])
    assert store.index_config is not None and store.index_config["embed"] is embed and store.index_config["dims"] == 26
    store.put(("notes",), "n1", {"title": "zebra crossing", "body": "a quiet walk home after work"})
    assert sorted(embed.documents) == ["a quiet walk home after work", "zebra crossing"]
    [hit] = store.search(("notes",), query="zebra crossing")
    assert hit.key == "n1" and hit.score == pytest.approx(1.0, abs=1e-6)  # its best field: the title


@pytest.mark.parametrize("distance", ["cosine", "l2", "inner_product"])
def test_an_item_scores_by_its_best_field(memory: Any, distance: str) -> None:
    store = make(memory, distance, fields=["a", "b", "c"])
    store.put(("docs",), "one", {"a": "xylophone", "b": "mellow", "c": "quartz"})
    store.put(("docs",), "two", {"a": "umbrella", "b": "kiwi", "d": "xylophone"})  # d is not indexed
    for query in ("xylophone", "kiwi", "quartz jam"):
        hits = store.search(("docs",), query=query)
        expected = {
            "one": max(score(distance, letters(query), letters(t)) for t in ("xylophone", "mellow", "quartz")),
            "two": max(score(distance, letters(query), letters(t)) for t in ("umbrella", "kiwi")),
        }
        assert {h.key: h.score for h in hits} == pytest.approx(expected, abs=1e-5)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_a_puts_index_overrides_the_fields_and_false_leaves_it_unscored(amemory: Any) -> None:
    store = make(amemory, fields=["nothing_here"])
    await store.aput(("docs",), "d3", {"k0": "apple", "k1": "banana", "k2": "cherry"}, index=["k0", "k1"])
    await store.aput(("docs",), "d4", {"k0": "grape", "k1": "banana", "k2": "melon"}, index=["k1", "k2"])
    await store.aput(("docs",), "d5", {"k0": "apple", "k1": "apple"}, index=False)
    hits = await store.asearch(("docs",), query="apple")
    assert [h.key for h in hits][:2] == ["d3", "d4"] and hits[0].score == pytest.approx(1.0, abs=1e-6)
    assert hits[2].key == "d5" and hits[2].score is None  # not indexed: after the scored ones, unscored
    both = await store.asearch(("docs",), query="banana")
    assert both[0].score == pytest.approx(both[1].score, abs=1e-9) == pytest.approx(1.0, abs=1e-6)
    assert {h.key for h in await store.asearch(("docs",), query="melon", limit=1)} == {"d4"}
    assert len(await store.asearch(("docs",))) == 3  # no query: every item, newest first, no score


def test_list_wildcards_embed_each_element(memory: Any) -> None:
    store = make(memory, fields=["items[*].name"])
    store.put(("orders",), "o1", {"items": [{"name": "walnut"}, {"name": "zucchini"}]})
    store.put(("orders",), "o2", {"items": [{"name": "lemon"}]})
    [first, second] = store.search(("orders",), query="zucchini")
    assert first.key == "o1" and first.score == pytest.approx(1.0, abs=1e-6) and second.score < 0.9


def test_a_put_again_replaces_the_field_vectors_and_a_delete_drops_them(memory: Any, dsn: str) -> None:
    store = make(memory, fields=["text"])
    store.put(("docs",), "k", {"text": "zany zebra"})
    before = store.search(("docs",), query="zany zebra")[0].score
    store.put(("docs",), "k", {"text": "dogs bark"})
    after = store.search(("docs",), query="zany zebra")[0].score
    assert before == pytest.approx(1.0, abs=1e-6) and after < before
    assert store.search(("docs",), query="dogs bark")[0].score == pytest.approx(1.0, abs=1e-6)
    owner = store.caller.user_id  # type: ignore[union-attr]
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM store_vectors WHERE user_id = %s", (owner,)).fetchone()[0] == 1
        store.delete(("docs",), "k")
        assert conn.execute("SELECT count(*) FROM store_vectors WHERE user_id = %s", (owner,)).fetchone()[0] == 0


def test_store_items_stay_found_by_memory_search(memory: Any) -> None:
    """The memory keeps its own vector from the service's embedder, whatever the store's embed."""
    store = make(memory, fields=["text"])
    store.put(("notes",), "tea", {"text": "Prefers green tea over coffee in the morning"})
    [hit] = memory.for_user(store.caller.user_id).search("what does the user drink in the morning?", k=1)  # type: ignore[union-attr]
    assert hit.content == "Prefers green tea over coffee in the morning"


def test_other_users_field_vectors_never_score(memory: Any) -> None:
    embed = LetterEmbeddings()
    alice, bob = make(memory, embed=embed, fields=["text"]), make(memory, embed=embed, fields=["text"])
    alice.put(("notes",), "secret", {"text": "quixotic jellyfish"})
    assert bob.search(("notes",), query="quixotic jellyfish") == []
    assert bob.search((), query="quixotic jellyfish") == []
    assert [h.key for h in alice.search((), query="quixotic jellyfish")] == ["secret"]


def test_forgetting_a_user_deletes_their_field_vectors(memory: Any, dsn: str) -> None:
    store = make(memory, fields=["a", "b"])
    store.put(("notes",), "k", {"a": "first field text", "b": "second field text"})
    owner = store.caller.user_id  # type: ignore[union-attr]
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM store_vectors WHERE user_id = %s", (owner,)).fetchone()[0] == 2
        report = memory.forget_user(user_id=owner)
        assert conn.execute("SELECT count(*) FROM store_vectors WHERE user_id = %s", (owner,)).fetchone()[0] == 0
    assert "store_vectors" in str(report)


def test_an_embedder_of_other_size_never_meets_these_vectors(memory: Any) -> None:
    """Vectors are compared only within one space (embedder and size): a store with another
    embedder over the same memories scores them by its own, or leaves them unscored."""
    caller = user()
    make(memory, fields=["text"], caller=caller).put(("notes",), "k", {"text": "plain words"})

    class Wider(LetterEmbeddings):
        def embed_query(self, text: str) -> list[float]:
            return letters(text) + [0.0] * 6

    other = AgentMemoryStore(memory, caller=caller, index={"dims": 32, "embed": Wider(), "fields": ["text"]})
    [hit] = other.search(("notes",), query="plain words")
    assert hit.key == "k" and hit.score is None


def test_an_embed_function_works_and_bad_settings_say_what_to_do(memory: Any) -> None:
    def embed(texts: list[str]) -> list[list[float]]:
        return [letters(t) for t in texts]

    store = AgentMemoryStore(memory, caller=user(), index={"dims": 26, "embed": embed, "fields": ["text"]})
    store.put(("notes",), "k", {"text": "lemon tart"})
    assert store.search(("notes",), query="lemon tart")[0].score == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ConfigurationError, match="index\\['dims'\\]"):
        AgentMemoryStore(memory, index={"embed": embed})  # type: ignore[typeddict-item]
    wrong = AgentMemoryStore(memory, caller=user(), index={"dims": 12, "embed": embed, "fields": ["text"]})
    with pytest.raises(EmbeddingDimensionMismatchError, match="index\\['dims'\\] is 12"):
        wrong.put(("notes",), "k", {"text": "lemon tart"})


def test_the_services_embedder_makes_field_vectors_without_embed(memory: Any, embeddings: Any) -> None:
    store = AgentMemoryStore(memory, caller=user(), index={"fields": ["title", "body"]})
    store.put(("docs",), "k", {"title": "Volcanic rock formations", "body": "An accounting ledger for March"})
    q = embeddings.embed_query("accounting ledger")
    best = max(cosine(q, v) for v in embeddings.embed_documents(["Volcanic rock formations",
                                                                  "An accounting ledger for March"]))
    assert store.search(("docs",), query="accounting ledger")[0].score == pytest.approx(best, abs=1e-4)


async def test_concurrent_async_puts_embed_in_one_call(amemory: Any) -> None:
    embed = LetterEmbeddings()
    store = make(amemory, embed=embed, fields=["text"])
    await asyncio.gather(*(store.aput(("docs",), f"k{i}", {"text": f"note number {w}"})
                           for i, w in enumerate(["one", "two", "three"])))
    hits = await store.asearch(("docs",), query="note number two")
    assert hits[0].key == "k1" and hits[0].score == pytest.approx(1.0, abs=1e-6)
