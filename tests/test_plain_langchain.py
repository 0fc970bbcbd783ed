"""The memory tools and the retriever in plain LangChain: no LangGraph run, an explicit identity."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document

from agent_memory import AsyncMemoryService, MemoryService
from agent_memory.errors import InvalidInputError, MissingIdentityError
from agent_memory.middleware import MemoryRetriever, memory_tools


def test_tools_with_an_explicit_identity_work_outside_a_run(memory: MemoryService, tenant) -> None:
    save, search, delete, stats = memory_tools(memory, user_id=tenant.user, project_id=tenant.project)
    reply = save.invoke({"content": "Prefers dark roast coffee.", "memory_type": "preference"})
    assert "Saved" in reply and "dark roast" in reply
    found = search.invoke({"query": "what coffee does the user like?"})
    assert "dark roast" in found
    [item] = memory.for_user(tenant.user).list()
    assert item.user_id == tenant.user and item.source.value == "ai"
    # the model chooses no identity: the schemas have no id fields
    for tool in (save, search, delete, stats):
        assert not {"user_id", "project_id", "runtime"} & set(tool.args)
    assert "1" in stats.invoke({})
    delete.invoke({"memory_id": str(item.id)})
    assert memory.for_user(tenant.user).list() == []


def test_explicit_tools_see_only_their_users_memories(memory: MemoryService, tenant) -> None:
    memory.for_user(tenant.other_user).add("Has a cat named Miso.")
    [_, search, delete, _] = memory_tools(memory, user_id=tenant.user)
    assert "Has a cat" not in search.invoke({"query": "cat named Miso"})
    [theirs] = memory.for_user(tenant.other_user).list()
    reply = delete.invoke({"memory_id": str(theirs.id)})
    assert "No memory with that id is visible" in reply and memory.for_user(tenant.other_user).list() != []


def test_bad_explicit_identities_are_refused(memory: MemoryService) -> None:
    with pytest.raises(MissingIdentityError, match="user_id"):
        memory_tools(memory, project_id="apollo")
    with pytest.raises(InvalidInputError, match="user_id"):
        memory_tools(memory, user_id="alice ")
    with pytest.raises(InvalidInputError, match="user_id"):
        MemoryRetriever(memory=memory, user_id="")


async def test_async_tools_with_an_explicit_identity(amemory: AsyncMemoryService, tenant) -> None:
    save, search, *_ = memory_tools(amemory, user_id=tenant.user)
    assert "Saved" in await save.ainvoke({"content": "Runs every Sunday morning.", "memory_type": "habit"})
    assert "Sunday" in await search.ainvoke({"query": "when does the user run?"})


def test_the_retriever_returns_documents_for_its_principal_only(memory: MemoryService, tenant) -> None:
    memory.for_user(tenant.user, project_id=tenant.project).add("Deploys go out on Thursdays.", scope="project")
    memory.for_user(tenant.other_user).add("Thursday is my day off.")
    retriever = MemoryRetriever(memory=memory, user_id=tenant.user, project_id=tenant.project, k=3)
    docs = retriever.invoke("when do deploys happen?")
    assert docs and all(isinstance(d, Document) for d in docs)
    assert docs[0].page_content == "Deploys go out on Thursdays."
    assert docs[0].metadata["scope"] == "project" and docs[0].metadata["score"] > 0
    assert all("day off" not in d.page_content for d in docs)
    typed = MemoryRetriever(memory=memory, user_id=tenant.user, project_id=tenant.project,
                            search_kwargs={"memory_type": "preference"})
    assert typed.invoke("deploys") == []


async def test_the_retriever_awaits_an_async_service(amemory: AsyncMemoryService, tenant) -> None:
    await amemory.for_user(tenant.user).add("Allergic to peanuts.")
    docs = await MemoryRetriever(memory=amemory, user_id=tenant.user).ainvoke("allergies")
    assert [d.page_content for d in docs][:1] == ["Allergic to peanuts."]
