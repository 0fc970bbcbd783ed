"""MemoryRetriever as LangChain's retriever standard tests use it, over both services.

LangChain's ``RetrieversIntegrationTests`` check that ``k`` works given to the constructor and
given to ``invoke`` (``retriever.invoke(query, None, k=1)``), and that ``invoke`` and ``ainvoke``
answer Documents; these tests check the same, on a ``MemoryService`` and an
``AsyncMemoryService`` alike, plus what the call-time keywords may and may not set and where a
blocking ``invoke`` on an async service may run.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.documents import Document

from agent_memory import AsyncMemoryService, ConfigurationError, InvalidInputError, MemoryService
from agent_memory.middleware import MemoryRetriever
from agent_memory.sync_bridge import home_loop

QUERY = "what does the user drink in the morning?"
DRINKS = ("Drinks black coffee every morning.", "Drinks green tea in the afternoon.",
          "Prefers oat milk in coffee.", "Drinks a glass of water first thing in the morning.")


@pytest.fixture
def drinker(memory: MemoryService, tenant) -> str:
    """A user with four memories about drinks (three facts, one preference tagged "milk")."""
    handle = memory.for_user(tenant.user)
    for text in DRINKS:
        if "oat milk" in text:
            handle.add(text, memory_type="preference", metadata={"tags": ["milk"]})
        else:
            handle.add(text, memory_type="fact")
    memory.for_user(tenant.other_user).add("Drinks only espresso in the morning.")
    return tenant.user


@pytest.fixture(params=["sync", "async"])
def service(request, memory: MemoryService, amemory: AsyncMemoryService) -> Any:
    return memory if request.param == "sync" else amemory


def documents(result: Any) -> list[Document]:
    assert isinstance(result, list) and all(isinstance(d, Document) for d in result)
    return result


def test_k_given_to_the_constructor(service, drinker) -> None:
    for k in (3, 1):
        assert len(documents(MemoryRetriever(memory=service, user_id=drinker, k=k).invoke(QUERY))) == k


def test_k_given_to_invoke_overrides_the_retrievers(service, drinker) -> None:
    retriever = MemoryRetriever(memory=service, user_id=drinker)  # k=5: all four of theirs
    assert len(documents(retriever.invoke(QUERY))) == 4
    assert len(documents(retriever.invoke(QUERY, None, k=1))) == 1
    assert len(documents(retriever.invoke(QUERY, k=3))) == 3
    assert len(documents(retriever.invoke(QUERY))) == 4  # a call's k is for that call only


def test_search_filters_given_to_invoke(service, drinker) -> None:
    retriever = MemoryRetriever(memory=service, user_id=drinker, search_kwargs={"memory_type": "fact"})
    assert {d.page_content for d in retriever.invoke(QUERY)} == set(DRINKS) - {"Prefers oat milk in coffee."}
    [typed] = retriever.invoke(QUERY, memory_type="preference")  # the call's filter wins over search_kwargs
    assert typed.page_content == "Prefers oat milk in coffee." and typed.metadata["memory_type"] == "preference"
    [tagged] = retriever.invoke(QUERY, memory_type=None, filter={"tags": {"$contains": "milk"}})
    assert tagged.page_content == "Prefers oat milk in coffee."
    assert retriever.invoke(QUERY, verbose=True)  # LangChain's own keyword is not a search setting


def test_invoke_keywords_are_checked_and_never_choose_the_user(service, drinker, tenant) -> None:
    retriever = MemoryRetriever(memory=service, user_id=drinker)
    with pytest.raises(InvalidInputError, match=r"invoke keywords: has keys search does not take: \['user_id'\]"):
        retriever.invoke(QUERY, user_id=tenant.other_user)
    with pytest.raises(InvalidInputError, match="k: must be between 1 and 100, got 0"):
        retriever.invoke(QUERY, k=0)
    with pytest.raises(InvalidInputError, match="memory_type"):
        retriever.invoke(QUERY, memory_type="opinion")
    assert all("espresso" not in d.page_content for d in retriever.invoke(QUERY, k=10))


async def test_ainvoke_returns_documents_and_takes_k(service, drinker) -> None:
    retriever = MemoryRetriever(memory=service, user_id=drinker)
    assert len(documents(await retriever.ainvoke(QUERY))) == 4
    assert len(documents(await retriever.ainvoke(QUERY, k=2))) == 2
    with pytest.raises(InvalidInputError, match="invoke keywords"):
        await retriever.ainvoke(QUERY, project_id="apollo")


async def test_blocking_invoke_on_an_async_service_from_a_worker_thread(amemory, drinker) -> None:
    """The service's loop is running (this test's): a thread's invoke runs there and waits."""
    retriever = MemoryRetriever(memory=amemory, user_id=drinker, k=2)
    docs = await asyncio.to_thread(retriever.invoke, QUERY)
    assert len(documents(docs)) == 2
    with pytest.raises(ConfigurationError, match="running event loop.*asyncio.to_thread"):
        retriever.invoke(QUERY)  # here it would stall the loop it needs


def test_a_never_used_async_service_gets_a_home_loop(dsn, config, embeddings, drinker) -> None:
    """First used by a blocking call: set up on the shared background loop, which then serves
    ``ainvoke`` from another loop as well (the connections never leave the loop they belong to)."""
    fresh = AsyncMemoryService(dsn, config=config, embeddings=embeddings)
    try:
        retriever = MemoryRetriever(memory=fresh, user_id=drinker, k=3)
        assert len(documents(retriever.invoke(QUERY))) == 3
        home = home_loop(fresh)
        assert home is not None and home.is_running()
        assert len(documents(asyncio.run(retriever.ainvoke(QUERY, k=1)))) == 1
        answers: list[int] = []
        threads = [threading.Thread(target=lambda: answers.append(len(retriever.invoke(QUERY)))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers == [3, 3, 3, 3]
    finally:
        loop = home_loop(fresh)
        if loop is not None:
            asyncio.run_coroutine_threadsafe(fresh.close(), loop).result()
