"""The memory service against the real database and the real local model, run sync and async."""

from __future__ import annotations

import inspect
from datetime import timedelta

import psycopg
import pytest

from agent_memory import (
    AsyncMemoryService,
    InvalidInputError,
    MemoryItem,
    MemoryNotFoundError,
    MemoryService,
    PermissionDeniedError,
    Rejection,
    RejectionReason,
    Scope,
    Status,
)


@pytest.fixture(scope="module")
def memory_on_connection(dsn, embeddings):
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield MemoryService(conn, embeddings=embeddings)


@pytest.fixture(scope="module")
async def amemory_on_connection(dsn, embeddings):
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        yield AsyncMemoryService(conn, embeddings=embeddings)


@pytest.fixture(params=["sync-pool", "sync-connection", "async-pool", "async-connection"])
def svc(request):
    """One test body over every way of running the service."""
    name = {"sync-pool": "memory", "sync-connection": "memory_on_connection",
            "async-pool": "amemory", "async-connection": "amemory_on_connection"}[request.param]
    return request.getfixturevalue(name)


async def call(service, name, *args, **kwargs):
    result = getattr(service, name)(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


async def test_save_then_get_round_trips_every_field(svc, tenant):
    ids = tenant.ids()
    item = await call(svc.for_user(**ids), "add", "  I prefer   dark mode in every editor  ", memory_type="preference", scope="project", confidence=0.9, source="ai", source_id="msg-1", visibility="owner_only", metadata={"origin": "test", "n": 3})
    assert isinstance(item, MemoryItem)
    assert item.content == "I prefer dark mode in every editor"
    assert (item.memory_type.value, item.scope.value, item.scope_id) == ("preference", "project", tenant.project)
    assert (item.user_id, item.project_id, item.session_id) == (tenant.user, tenant.project, None)
    assert (item.source.value, item.source_id, item.visibility.value) == ("ai", "msg-1", "owner_only")
    assert item.confidence == pytest.approx(0.9)
    assert item.status is Status.ACTIVE and item.access_count == 0 and not item.deduplicated
    assert item.metadata == {"origin": "test", "n": 3}
    again = await call(svc.for_user(**ids), "get", str(item.id))
    assert again == item


async def test_saving_the_same_fact_twice_returns_the_existing_item(svc, tenant):
    ids = tenant.ids()
    first = await call(svc.for_user(**ids), "add", "My favourite programming language is Rust")
    second = await call(svc.for_user(**ids), "add", "my favourite programming language is rust.")
    assert second.id == first.id and second.deduplicated and second.last_used_at is not None
    items = await call(svc.for_user(**ids), "list")
    assert [i.id for i in items] == [first.id]
    # the same words in another scope are another memory
    project_item = await call(svc.for_user(**ids), "add", "My favourite programming language is Rust", scope="project")
    assert project_item.id != first.id and not project_item.deduplicated
    dup = await call(svc.for_user(**ids), "find_duplicate", "My favorite programming language is Rust")
    assert dup is not None and dup.id == first.id
    assert await call(svc.for_user(**ids), "find_duplicate", "I live in Lisbon with two cats") is None


@pytest.mark.parametrize(
    ("content", "confidence", "reason"),
    [
        ("   ", 1.0, RejectionReason.EMPTY),
        ("hey", 1.0, RejectionReason.TOO_SHORT),
        ("x" * 2001, 1.0, RejectionReason.TOO_LONG),
        ("The user might like jazz", 0.5, RejectionReason.LOW_CONFIDENCE),
        ("my password is Tr0ub4dor&3 for the bank", 1.0, RejectionReason.SENSITIVE),
        ("use key sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6" + " for openai", 1.0, RejectionReason.SENSITIVE),
    ],
)
async def test_gate_rejections_write_nothing(svc, tenant, content, confidence, reason):
    ids = tenant.ids()
    result = await call(svc.for_user(**ids), "add", content, confidence=confidence)
    assert isinstance(result, Rejection) and result.reason is reason
    assert "Tr0ub4dor" not in result.message and "sk-proj" not in result.message
    assert await call(svc.for_user(**ids), "list", status=None) == []


async def test_search_ranks_relevant_memories_first_and_filters(svc, tenant):
    ids = tenant.ids()
    facts = {
        "I am allergic to peanuts": "constraint",
        "My daughter Mia plays the violin": "fact",
        "We deploy the backend on Kubernetes in eu-west-1": "context",
        "I prefer answers as short bullet points": "preference",
        "Our team decided to use PostgreSQL instead of MongoDB": "decision",
    }
    for content, memory_type in facts.items():
        await call(svc.for_user(**ids), "add", content, memory_type=memory_type)
    hits = await call(svc.for_user(**ids), "search", "what food should I avoid?", k=5)
    assert hits[0].content == "I am allergic to peanuts"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(0.0 <= h.keyword < 1.0 for h in hits)
    only = await call(svc.for_user(**ids), "search", "database choice", memory_type=["decision", "context"])
    assert {h.item.memory_type.value for h in only} <= {"decision", "context"} and only
    assert only[0].content.startswith("Our team decided")
    none_in_session = await call(svc.for_user(**ids), "search", "database", scope="session")
    assert none_in_session == []


async def test_exact_terms_are_found_by_keyword_even_when_embeddings_miss_them(svc, tenant):
    ids = tenant.ids()
    filler = [f"Note {i}: the weekly sync covered roadmap item {i} and hiring" for i in range(40)]
    await call(svc.for_user(**ids), "add_many", filler)
    target = await call(svc.for_user(**ids), "add", "The staging cluster is called QZX-7741")
    hits = await call(svc.for_user(**ids), "search", "QZX-7741", k=3)
    assert hits[0].id == target.id and hits[0].keyword > 0


async def test_search_records_use(svc, tenant):
    ids = tenant.ids()
    item = await call(svc.for_user(**ids), "add", "I run every morning before work")
    await call(svc.for_user(**ids), "search", "exercise routine", k=1)
    await call(svc.for_user(**ids), "search", "exercise routine", k=1)
    after = await call(svc.for_user(**ids), "get", item.id)
    assert after.access_count == 2 and after.last_used_at is not None


async def test_session_scope_needs_and_uses_the_session(svc, tenant):
    ids = tenant.ids(session=False)
    with pytest.raises(InvalidInputError, match="session_id"):
        await call(svc.for_user(**ids), "add", "Today we are debugging the login page", scope="session")
    item = await call(svc.for_user(**tenant.ids()), "add", "Today we are debugging the login page", scope="session")
    assert item.scope is Scope.SESSION and item.scope_id == tenant.session
    hits = await call(svc.for_user(**tenant.ids()), "search", "what are we debugging")
    assert hits[0].id == item.id and hits[0].item.scope is Scope.SESSION


async def test_scope_priority_breaks_ties_between_equal_memories(svc, tenant):
    ids = tenant.ids()
    text = "The release train leaves every second Tuesday"
    user = await call(svc.for_user(**ids), "add", text, scope="user")
    session = await call(svc.for_user(**ids), "add", text, scope="session")
    project = await call(svc.for_user(**ids), "add", text, scope="project")
    hits = await call(svc.for_user(**ids), "search", "when is the release", k=3)
    assert [h.id for h in hits] == [session.id, project.id, user.id]


async def test_delete_archives_restore_and_hard_delete(svc, tenant):
    ids = tenant.ids()
    item = await call(svc.for_user(**ids), "add", "I commute by bicycle")
    archived = await call(svc.for_user(**ids), "delete", item.id)
    assert archived.status is Status.ARCHIVED
    assert await call(svc.for_user(**ids), "search", "bicycle") == []
    assert [h.id for h in await call(svc.for_user(**ids), "search", "bicycle", status="archived")] == [item.id]
    restored = await call(svc.for_user(**ids), "restore", item.id)
    assert restored.status is Status.ACTIVE
    assert (await call(svc.for_user(**ids), "search", "bicycle"))[0].id == item.id
    await call(svc.for_user(**ids), "delete", item.id, hard=True)
    with pytest.raises(MemoryNotFoundError):
        await call(svc.for_user(**ids), "get", item.id)


async def test_purge_removes_only_the_callers_archived_items(svc, tenant):
    ids = tenant.ids()
    keep = await call(svc.for_user(**ids), "add", "I speak Portuguese and English")
    gone = await call(svc.for_user(**ids), "add", "I used to live in Berlin")
    theirs = await call(svc.for_user(**tenant.ids(tenant.other_user)), "add", "I used to live in Madrid")
    await call(svc.for_user(**ids), "delete", gone.id)
    await call(svc.for_user(**tenant.ids(tenant.other_user)), "delete", theirs.id)
    assert await call(svc.for_user(**ids), "purge_archived") == 1
    assert [i.id for i in await call(svc.for_user(**ids), "list", status=None)] == [keep.id]
    assert (await call(svc.for_user(**tenant.ids(tenant.other_user)), "get", theirs.id)).status is Status.ARCHIVED


async def test_an_editor_may_not_delete_another_members_project_memory(svc, tenant):
    mine = await call(svc.for_user(**tenant.ids()), "add", "The API uses snake_case JSON keys", scope="project")
    with pytest.raises(PermissionDeniedError, match="needs the role owner or admin; you are an editor"):
        await call(svc.for_user(**tenant.ids(tenant.other_user)), "delete", mine.id)
    with pytest.raises(MemoryNotFoundError):
        await call(svc.for_user(tenant.other_user, project_id=tenant.other_project), "delete", mine.id)
    assert (await call(svc.for_user(**tenant.ids()), "get", mine.id)).status is Status.ACTIVE


async def test_stats_count_what_the_caller_sees(svc, tenant):
    ids = tenant.ids()
    await call(svc.for_user(**ids), "add", "I prefer tea over coffee", memory_type="preference")
    await call(svc.for_user(**ids), "add", "I work as a data engineer", memory_type="fact")
    p = await call(svc.for_user(**ids), "add", "The project targets Python 3.12", scope="project", memory_type="constraint")
    await call(svc.for_user(**ids), "delete", p.id)
    await call(svc.for_user(**tenant.ids(tenant.other_user,
                                                                                          project=False)), "add", "I collect vintage synthesizers")
    stats = await call(svc.for_user(**ids), "stats")
    assert stats.total == 3
    assert stats.by_type == {"preference": 1, "fact": 1, "constraint": 1}
    assert stats.by_scope == {"user": 2, "project": 1}
    assert stats.by_status == {"active": 2, "archived": 1}
    assert stats.last_write is not None and stats.storage_bytes > 0
    assert stats.extractions_remaining == 3


async def test_extraction_budget_is_per_session_and_per_window(svc, tenant, dsn):
    ids = tenant.ids()
    assert [await call(svc.for_user(**ids), "record_extraction_run") for _ in range(3)] == [2, 1, 0]
    limited = await call(svc.for_user(**ids), "record_extraction_run")
    assert isinstance(limited, Rejection) and limited.reason is RejectionReason.RATE_LIMITED
    assert await call(svc.for_user(**ids), "extraction_budget") == 0
    other_session = dict(ids, session_id=tenant.other_session)
    assert await call(svc.for_user(**other_session), "extraction_budget") == 3
    # runs older than the window no longer count
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE memory_extraction_runs SET created_at = now() - %s WHERE user_id = %s AND session_id = %s",
            (timedelta(hours=24, minutes=1), tenant.user, tenant.session),
        )
    assert await call(svc.for_user(**ids), "extraction_budget") == 3
    with pytest.raises(InvalidInputError, match="session_id"):
        await call(svc.for_user(tenant.user, session_id=None), "record_extraction_run")


async def test_bulk_import_gates_batches_and_dedupes(svc, tenant):
    ids = tenant.ids()
    existing = await call(svc.for_user(**ids), "add", "I have two cats named Miso and Tofu")
    result = await call(svc.for_user(**ids), "add_many", [
        "I have two cats named Miso and Tofu",                      # duplicate of an active memory
        {"content": "I enjoy hiking in the Alps", "memory_type": "habit"},
        {"content": "I really enjoy hiking in the Alps!", "memory_type": "habit"},  # duplicate within the batch
        "no",                                                       # too short
        {"content": "The repo uses trunk-based development", "scope": "project", "memory_type": "context"},
        {"content": "my api_key=AbC9x7Qm2LpR8sT4vW6yZ1nK3jH5gF0d", "confidence": 0.9},  # secret
    ], dedupe=True)
    assert len(result.inserted) == 2
    assert [(i, r.reason) for i, r in result.rejected] == [(3, RejectionReason.TOO_SHORT),
                                                           (5, RejectionReason.SENSITIVE)]
    hiking = result.inserted[0]
    assert result.duplicates == [(0, existing.id), (2, hiking)]
    contents = sorted(i.content for i in await call(svc.for_user(**ids), "list", limit=10))
    assert contents == sorted(["I have two cats named Miso and Tofu", "I enjoy hiking in the Alps",
                               "The repo uses trunk-based development"])
    plain = await call(svc.for_user(**ids), "add_many", ["I like green tea", "I like green tea"])
    assert len(plain.inserted) == 2 and plain.duplicates == []


async def test_bad_import_items_raise_before_writing(svc, tenant):
    ids = tenant.ids()
    with pytest.raises(InvalidInputError, match=r"items\[1\]"):
        await call(svc.for_user(**ids), "add_many", ["A perfectly fine memory", 42])
    with pytest.raises(InvalidInputError, match="memory_type"):
        await call(svc.for_user(**ids), "add_many", [{"content": "A fine memory", "memory_type": "opinion"}])
    assert await call(svc.for_user(**ids), "list") == []


async def test_min_relevance_drops_weak_matches(svc, tenant):
    ids = tenant.ids()
    await call(svc.for_user(**ids), "add", "I am allergic to peanuts")
    await call(svc.for_user(**ids), "add", "The quarterly report is due in March")
    everything = await call(svc.for_user(**ids), "search", "food allergies", k=5)
    relevant = await call(svc.for_user(**ids), "search", "food allergies", k=5, min_relevance=0.2)
    assert len(everything) == 2
    assert [h.content for h in relevant] == ["I am allergic to peanuts"]
    with pytest.raises(InvalidInputError, match="min_relevance"):
        await call(svc.for_user(**ids), "search", "food", min_relevance=2)
