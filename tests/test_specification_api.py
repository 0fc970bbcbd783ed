"""The specification's service methods (``add_explicit_memory`` ... ``format_memories_for_prompt``),
sync and async, against the real database: each answers what the handle answers, for the
identity it names and nobody else."""

from __future__ import annotations

import inspect

import pytest

from agent_memory import (
    AsyncMemoryService,
    MemoryItem,
    MemoryService,
    PermissionDeniedError,
    Rejection,
    RejectionReason,
    SearchResult,
)
from agent_memory.profiles.store import AgentProfiles
from agent_memory.specification import SPECIFICATION_METHODS, AsyncSpecificationMethods, SpecificationMethods


@pytest.fixture(params=["sync", "async"])
def svc(request):
    return request.getfixturevalue({"sync": "memory", "async": "amemory"}[request.param])


async def call(service, name, *args, **kwargs):
    result = getattr(service, name)(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


def test_both_services_have_every_specification_method_with_one_signature():
    for name in SPECIFICATION_METHODS:
        sync, asynchronous = getattr(MemoryService, name), getattr(AsyncMemoryService, name)
        assert inspect.signature(sync) == inspect.signature(asynchronous), name
        if name in ("validate_memory", "format_memories_for_prompt"):  # pure: no I/O, never awaited
            assert sync is asynchronous
        else:
            assert inspect.iscoroutinefunction(asynchronous) and not inspect.iscoroutinefunction(sync), name
            assert getattr(SpecificationMethods, name) is sync and getattr(AsyncSpecificationMethods, name) is asynchronous
            params = inspect.signature(sync).parameters
            assert {"user_id", "project_id", "session_id"} <= set(params), name
            assert all(params[p].kind is inspect.Parameter.KEYWORD_ONLY for p in ("user_id", "project_id", "session_id"))


async def test_add_explicit_memory_saves_through_the_gate_for_the_named_user(svc, tenant):
    item = await call(svc, "add_explicit_memory", "Prefers tabs over spaces in Go code", memory_type="preference",
                      user_id=tenant.user, project_id=tenant.project, session_id=tenant.session)
    assert isinstance(item, MemoryItem)
    assert (item.user_id, item.memory_type.value, item.scope.value, item.source.value) == (
        tenant.user, "preference", "user", "user")
    again = await call(svc, "add_explicit_memory", "Prefers tabs over spaces in Go code", user_id=tenant.user)
    assert isinstance(again, MemoryItem) and again.deduplicated and again.id == item.id
    shared = await call(svc, "add_explicit_memory", "The project must support PostgreSQL 16", scope="project",
                        memory_type="constraint", user_id=tenant.user, project_id=tenant.project)
    assert isinstance(shared, MemoryItem) and shared.scope_id == tenant.project
    refused = await call(svc, "add_explicit_memory", "hi", user_id=tenant.user)
    assert isinstance(refused, Rejection) and refused.reason is RejectionReason.TOO_SHORT
    secret = await call(svc, "add_explicit_memory", "my AWS key is AKIAIOSFODNN7EXAMPLE", user_id=tenant.user)
    assert isinstance(secret, Rejection) and secret.reason is RejectionReason.SENSITIVE
    with pytest.raises(PermissionDeniedError):  # not a member of that project
        await call(svc, "add_explicit_memory", "The outsider writes here", scope="project",
                   user_id=f"outsider-{tenant.user}", project_id=tenant.project)


async def test_search_memories_returns_only_what_the_named_user_may_read(svc, tenant):
    await call(svc, "add_explicit_memory", "Prefers dark mode in every editor", memory_type="preference",
               user_id=tenant.user)
    await call(svc, "add_explicit_memory", "Prefers light mode in every editor", memory_type="preference",
               user_id=tenant.other_user)
    await call(svc, "add_explicit_memory", "The team chose Next.js over Remix", memory_type="decision",
               scope="project", user_id=tenant.user, project_id=tenant.project)
    mine = await call(svc, "search_memories", "which editor theme?", user_id=tenant.user, project_id=tenant.project)
    assert mine and all(isinstance(r, SearchResult) for r in mine)
    contents = [r.item.content for r in mine]
    assert "Prefers dark mode in every editor" in contents
    assert "Prefers light mode in every editor" not in contents  # another user's own memory
    assert all(r.item.user_id == tenant.user for r in mine)
    # the project's memory reaches its member, never an outsider
    member = await call(svc, "search_memories", "Next.js or Remix?", user_id=tenant.other_user,
                        project_id=tenant.project, memory_type="decision")
    assert [r.item.content for r in member] == ["The team chose Next.js over Remix"]
    outsider = await call(svc, "search_memories", "Next.js or Remix?", user_id=f"outsider-{tenant.user}",
                          project_id=tenant.project)
    assert outsider == []
    only = await call(svc, "search_memories", "editor", user_id=tenant.user, project_id=tenant.project, scope="project")
    assert {r.item.scope.value for r in only} == {"project"}


async def test_check_duplicate_finds_the_same_fact_of_the_same_user_only(svc, tenant):
    saved = await call(svc, "add_explicit_memory", "Uses PostgreSQL 16 for every service", user_id=tenant.user)
    assert isinstance(saved, MemoryItem)
    same = await call(svc, "check_duplicate", "Uses PostgreSQL 16 for every service", user_id=tenant.user)
    assert isinstance(same, MemoryItem) and same.id == saved.id
    assert await call(svc, "check_duplicate", "Enjoys hiking in the Alps on weekends", user_id=tenant.user) is None
    assert await call(svc, "check_duplicate", "Uses PostgreSQL 16 for every service", user_id=tenant.other_user) is None


async def test_check_rate_limit_looks_without_counting(svc, memory, tenant):
    ids = {"user_id": tenant.user, "session_id": tenant.session}
    assert await call(svc, "check_rate_limit", **ids) is True
    assert await call(svc, "check_rate_limit", **ids) is True  # looking takes nothing
    handle = memory.for_user(tenant.user, session_id=tenant.session)
    for _ in range(memory.config.max_extractions):
        assert not isinstance(handle.record_extraction_run(), Rejection)
    assert await call(svc, "check_rate_limit", **ids) is False
    # another session of the same user, and another user's session of the same name, are untouched
    assert await call(svc, "check_rate_limit", user_id=tenant.user, session_id=tenant.other_session) is True
    assert await call(svc, "check_rate_limit", user_id=tenant.other_user, session_id=tenant.session) is True


async def test_get_profile_for_agent_is_the_named_users_profile(svc, tenant):
    await call(svc, "add_explicit_memory", "I am a frontend engineer", memory_type="fact", user_id=tenant.user)
    await call(svc, "add_explicit_memory", "Proficient in TypeScript and React", memory_type="skill",
               user_id=tenant.user)
    profiles = await call(svc, "get_profile_for_agent", user_id=tenant.user, project_id=tenant.project)
    assert isinstance(profiles, AgentProfiles)
    assert profiles.user.subject_id == tenant.user and profiles.project is not None
    assert "TypeScript" in profiles.user_text
    other = await call(svc, "get_profile_for_agent", user_id=tenant.other_user)
    assert other.project is None and "TypeScript" not in other.user_text


async def test_validate_and_format_round_off_the_specification(svc, tenant):
    assert svc.validate_memory("Prefers concise code reviews") is None
    assert svc.validate_memory("x").reason is RejectionReason.TOO_SHORT
    found = await call(svc, "search_memories", "code reviews", user_id=tenant.user)
    assert found == []
    await call(svc, "add_explicit_memory", "Prefers concise code reviews", memory_type="preference",
               user_id=tenant.user)
    found = await call(svc, "search_memories", "code reviews", user_id=tenant.user)
    block = svc.format_memories_for_prompt(found)
    assert "Prefers concise code reviews" in block and "preference" in block
