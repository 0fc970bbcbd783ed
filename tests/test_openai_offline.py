"""The OpenAI path against an OpenAI-compatible endpoint, with no other network.

A fake server on 127.0.0.1 (tests/fake_openai.py) stands in for the endpoint: the embeddings
must be fetched from it alone (LangChain used to download a tiktoken file first), a provider's
failure must become an :class:`EmbeddingError` that says what to check, and an agent on
``ChatOpenAI`` must save with a tool call and extract with structured output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fake_openai import DIMENSIONS, FakeOpenAI, fake_openai, tool_call

from agent_memory import MemoryConfig, MemoryService
from agent_memory.errors import EmbeddingError


@pytest.fixture
def endpoint(monkeypatch) -> Iterator[FakeOpenAI]:
    with fake_openai() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-key-for-tests")
        monkeypatch.delenv("OPENAI_API_BASE", raising=False)
        # no network: a download of tiktoken's encoding would fail loudly instead of hanging
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/nonexistent-tiktoken-cache")
        yield server


@pytest.fixture
def openai_memory(endpoint: FakeOpenAI, fresh_dsn: Callable[[], str]) -> Iterator[MemoryService]:
    config = MemoryConfig.defaults(embeddings="openai", embedding_model="fake-embed")
    with MemoryService(fresh_dsn(), config=config) as service:
        yield service


def test_openai_embeddings_use_only_the_configured_endpoint(openai_memory: MemoryService, endpoint: FakeOpenAI):
    saved = openai_memory.for_user("oa-user").add("I prefer green tea in the morning.")
    openai_memory.for_user("oa-user").add("The deploy runs every Friday.")
    [hit, *_] = openai_memory.for_user("oa-user").search("green tea")
    assert hit.id == saved.id
    assert endpoint.paths() and all(p.endswith("/embeddings") for p in endpoint.paths())
    assert all(body["model"] == "fake-embed" for _, body in endpoint.requests)
    assert openai_memory.embeddings.embed_query("x") and len(openai_memory.embeddings.embed_query("x")) == DIMENSIONS


@pytest.mark.parametrize("failure", ["500", "html"])
def test_a_failing_endpoint_is_an_embedding_error_and_nothing_is_written(
    openai_memory: MemoryService, endpoint: FakeOpenAI, failure: str
):
    endpoint.fail = failure
    with pytest.raises(EmbeddingError, match="OPENAI_BASE_URL") as caught:
        openai_memory.for_user("oa-fail").add("I like long walks on the beach.")
    assert "nothing was written" in str(caught.value)
    endpoint.fail = None
    assert openai_memory.for_user("oa-fail").list() == []


def test_an_agent_on_chat_openai_saves_with_a_tool_and_extracts_with_structured_output(
    openai_memory: MemoryService, endpoint: FakeOpenAI
):
    from langchain_openai import ChatOpenAI

    from agent_memory.middleware import create_memory_agent

    def chat(messages: list[dict]) -> dict:
        if messages[-1]["role"] == "tool":
            return {"content": "Noted."}
        return tool_call("memory_save", content="Works on the Apollo project.", memory_type="fact")

    endpoint.chat = chat
    endpoint.structured = {
        "ExtractedMemories": {"memories": [
            {"content": "Has a dog named Rex.", "memory_type": "fact", "scope": "user", "confidence": 0.9}]},
        "ConsolidationDecisions": {"decisions": []},
        "UserProfileUpdate": {},
    }
    model = ChatOpenAI(model="fake-chat", base_url=endpoint.url, api_key="sk-fake", max_retries=0)
    agent = create_memory_agent(model, memory=openai_memory, checkpointer=False, summarization=False)
    result = agent.invoke({"messages": [("user", "Rex, my dog, barked all night.")]},
                          {"configurable": {"user_id": "oa-agent", "thread_id": "oa-thread"}})
    assert result["messages"][-1].text == "Noted."
    contents = sorted(m.content for m in openai_memory.for_user("oa-agent").list())
    assert contents == ["Has a dog named Rex.", "Works on the Apollo project."]
    chats = [body for path, body in endpoint.requests if path.endswith("/chat/completions")]
    assert any(body.get("tools") for body in chats)  # the agent's call, with the memory tools
    assert any(body.get("response_format") or isinstance(body.get("tool_choice"), dict) for body in chats)
