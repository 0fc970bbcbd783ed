"""``agent_memory.store.platform``: the store ``langgraph.json`` names, honouring its ``index``.

The platform calls ``make_store()`` with no arguments; it reads the ``store`` section of the
running platform's configuration (here a stand-in module in ``sys.modules``, as the platform's
server has imported it) and opens an ``AgentMemoryStore`` over an ``AsyncMemoryService`` with
the embedder ``index.embed`` names. ``tests/test_platform.py`` runs it under ``langgraph dev``.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langgraph.graph import START, StateGraph
from langgraph.store.base import BaseStore

from agent_memory import ConfigurationError, EmbeddingDimensionMismatchError, Identity, MissingIdentityError
from agent_memory.store import AgentMemoryStore
from agent_memory.store.platform import PlatformStore, make_store, open_store, platform_store_config, resolve_embed


def vectors(texts: list[str]) -> list[list[float]]:
    """An embedding function (texts to vectors), the other form ``index.embed`` may name."""
    return [[float(len(t)), 1.0, 0.0] for t in texts]


@pytest.fixture
def in_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory of a platform app, with an embeddings file, as langgraph.json sees it."""
    (tmp_path / "embed.py").write_text(
        "from langchain_core.embeddings import DeterministicFakeEmbedding\n"
        "embeddings = DeterministicFakeEmbedding(size=8)\n"
        "def vectors(texts):\n    return [[1.0, 0.0] for _ in texts]\n"
        "answer = 42\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_embed_is_read_in_every_form_the_platform_accepts(in_app: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # "./file.py:name": an Embeddings object, or a function from texts to vectors
    loaded = resolve_embed("./embed.py:embeddings")
    assert isinstance(loaded, DeterministicFakeEmbedding) and len(loaded.embed_query("hi")) == 8
    wrapped = resolve_embed("./embed.py:vectors")
    assert isinstance(wrapped, Embeddings) and wrapped.embed_documents(["a", "b"]) == [[1.0, 0.0], [1.0, 0.0]]
    # "file.py:name" in the working directory, and "module.py:name" for an importable module
    assert isinstance(resolve_embed("embed.py:embeddings"), DeterministicFakeEmbedding)
    assert resolve_embed("test_platform_store.py:vectors").embed_query("abc") == [3.0, 1.0, 0.0]
    # "provider:model": LangChain's init_embeddings (built here, nothing is sent)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    openai = resolve_embed("openai:text-embedding-3-small")
    assert type(openai).__name__ == "OpenAIEmbeddings"
    assert getattr(openai, "model") == "text-embedding-3-small"
    # an object or a function given in code
    fake = DeterministicFakeEmbedding(size=4)
    assert resolve_embed(fake) is fake
    assert resolve_embed(vectors).embed_query("ab") == [2.0, 1.0, 0.0]


@pytest.mark.parametrize(("embed", "says"), [
    ("./missing.py:embeddings", "'./missing.py', which is not a file"),
    ("./embed.py:nothing", "'nothing', which './embed.py' does not define"),
    ("no_such_module.py:embeddings", "module 'no_such_module', which cannot be imported"),
    ("nosuchprovider:some-model", "'nosuchprovider:some-model' could not be loaded"),
    ("  ", "index\\['embed'\\] is empty"),
    (42, "must be a name, an Embeddings object or a function, got int"),
])
def test_an_embed_that_cannot_be_loaded_says_which_forms_work(in_app: Path, embed: Any, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        resolve_embed(embed)


async def test_open_store_uses_the_embedder_and_index_given(dsn: str, memory, embeddings, tenant) -> None:
    index = {"embed": embeddings, "dims": 384, "fields": ["text"]}
    async with open_store(index, conn=dsn, ttl={"default_ttl": 60}) as store:
        assert isinstance(store, AgentMemoryStore)
        assert store.memory.embeddings is embeddings and store.index_config == index
        assert store.ttl_config is not None and store.ttl_config["default_ttl"] == 60
        mine = AgentMemoryStore(store.memory, caller=Identity(tenant.user))
        await mine.aput(("memories", tenant.user), "k", {"text": "Plays the cello", "other": "not embedded"})
        hits = await mine.asearch(("memories", tenant.user), query="music instrument")
        assert [h.value["text"] for h in hits] == ["Plays the cello"]
        service = store.memory
    with pytest.raises(ConfigurationError, match="closed"):  # the service is closed on exit
        await service.for_user(tenant.user).list()


async def test_open_store_refuses_dims_the_embedder_does_not_have(dsn: str, memory, embeddings) -> None:
    with pytest.raises(EmbeddingDimensionMismatchError, match="index\\['dims'\\] is 1536 .* pass dims=384"):
        async with open_store({"embed": embeddings, "dims": 1536}, conn=dsn):
            pass
    with pytest.raises(ConfigurationError, match="index must be a dict"):
        async with open_store(["embed"], conn=dsn):  # type: ignore[arg-type]
            pass


def test_outside_a_platform_there_is_no_store_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "langgraph_api.config", raising=False)
    assert platform_store_config() == {}
    assert "langgraph_api.config" not in sys.modules  # nothing of the platform was imported to find out


async def test_make_store_reads_the_platforms_store_section(dsn: str, memory, embeddings, tenant,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    section = {"path": "agent_memory.store.platform.make_store",
               "index": {"embed": embeddings, "dims": 384, "fields": ["text"]},
               "ttl": {"default_ttl": 5, "refresh_on_read": False}}
    monkeypatch.setitem(sys.modules, "langgraph_api.config", types.SimpleNamespace(STORE_CONFIG=section))
    monkeypatch.setenv("DATABASE_URL", dsn)
    assert platform_store_config() == section
    async with make_store() as store:  # what the platform enters, on its event loop
        assert store.memory.embeddings is embeddings and store.index_config == section["index"]
        assert store.ttl_config is not None and store.ttl_config["refresh_on_read"] is False
        await AgentMemoryStore(store.memory, caller=Identity(tenant.user)).aput(
            ("memories", tenant.user), "k", {"text": "Keeps bees"})
    assert [m.content for m in memory.for_user(tenant.user).list()] == ["Keeps bees"]
    # a platform without a store section: the service's own embedder and no index
    monkeypatch.setitem(sys.modules, "langgraph_api.config", types.SimpleNamespace(STORE_CONFIG=None))
    assert platform_store_config() == {}


def _platform_request(monkeypatch: pytest.MonkeyPatch, user: Any) -> None:
    """A request the platform authenticated (``user``), as its server holds it while it serves
    a store endpoint: ``langgraph_api.utils.get_auth_ctx()``."""
    context = None if user is None else types.SimpleNamespace(user=user, permissions=[])
    monkeypatch.setitem(sys.modules, "langgraph_api.utils", types.SimpleNamespace(get_auth_ctx=lambda: context))


async def test_a_store_endpoint_acts_for_the_requests_user(dsn: str, memory, embeddings, tenant,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from starlette.exceptions import HTTPException  # the platform's server answers with it

    async with open_store({"embed": embeddings}, conn=dsn) as store:
        assert isinstance(store, PlatformStore)
        _platform_request(monkeypatch, {"identity": tenant.user, "project_id": tenant.project})
        await store.aput(("memories", tenant.user, "lists"), "groceries", {"content": "oat milk"})
        await store.aput(("projects", tenant.project), "plan", {"content": "launch in May"})  # the claimed project
        got = await store.aget(("memories", tenant.user, "lists"), "groceries")
        assert got is not None and got.value == {"content": "oat milk"}
        # another user's request: refused with 403 (not a 500), and nothing of the first is shown
        _platform_request(monkeypatch, {"identity": tenant.other_user})
        with pytest.raises(HTTPException) as refused:
            await store.asearch(("memories", tenant.user), query="milk")
        assert refused.value.status_code == 403 and "another user's memory" in str(refused.value.detail)
        with pytest.raises(HTTPException):
            await store.aput(("memories", tenant.user, "lists"), "x", {"content": "from the other user"})
        assert await store.asearch(("memories", tenant.other_user)) == []
        # a request no one authenticated: refused as any call without a caller
        _platform_request(monkeypatch, None)
        with pytest.raises(MissingIdentityError):
            await store.aget(("memories", tenant.user, "lists"), "groceries")
        # inside a run the run's identity is used, as for any store (the request is not consulted)
        _platform_request(monkeypatch, {"identity": tenant.other_user})

        async def node(state: dict[str, Any], *, store: BaseStore) -> dict[str, Any]:
            found = await store.asearch(("memories", tenant.user, "lists"))
            return {"found": [i.value["content"] for i in found]}

        graph = StateGraph(dict).add_node("read", node).add_edge(START, "read").compile(store=store)
        answer = await graph.ainvoke({}, {"configurable": {"langgraph_auth_user": {"identity": tenant.user}}})
        assert answer["found"] == ["oat milk"]
    assert [m.content for m in memory.for_user(tenant.user).list()] == ["oat milk"]
    assert "launch in May" in [m.content for m in memory.for_user(tenant.user, project_id=tenant.project).list()]


async def test_open_store_sweeps_expired_memories_while_open(dsn: str, memory, embeddings, tenant) -> None:
    """The platform runs no sweeper for a custom store; ``ttl.sweep_interval_minutes`` runs ours."""
    import asyncio

    import psycopg

    async with open_store({"embed": embeddings}, conn=dsn, ttl={"sweep_interval_minutes": 0.005}) as store:
        mine = AgentMemoryStore(store.memory, caller=Identity(tenant.user))
        await mine.aput(("memories", tenant.user), "brief", {"content": "A note for a moment"}, ttl=0.001)
        await mine.aput(("memories", tenant.user), "kept", {"content": "A note to keep"})

        def rows() -> int:
            with psycopg.connect(dsn) as conn:
                found = conn.execute("SELECT count(*) FROM memory_items WHERE user_id = %s", (tenant.user,)).fetchone()
                return int(found[0]) if found else 0

        for _ in range(200):  # the sweep deletes the expired row; wait for it without timing it
            if await asyncio.to_thread(rows) == 1:
                break
            await asyncio.sleep(0.1)
        assert await asyncio.to_thread(rows) == 1
    assert [m.content for m in memory.for_user(tenant.user).list()] == ["A note to keep"]
