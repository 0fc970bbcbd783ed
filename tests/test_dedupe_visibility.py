"""A duplicate is merged only into a memory at least as visible as the new one would be.

Folding a public note into a members-only memory that says the same leaves nothing public: the
project's guests never read it. Each test runs over both ways a duplicate is found: the search
index, and the process's copy of a big scope (:mod:`agent_memory.vector_cache`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_memory import Decision, MemoryService
from agent_memory.db import requests
from agent_memory.models import NewMemory
from agent_memory.testing import ScriptedChatModel

NOTE = "The design review happens every Thursday at ten in room B."
FILLER = ("Deploys go out on Tuesdays after the standup.", "The staging cluster is rebuilt every night.",
          "Invoices are approved by the finance lead.", "The on-call rotation changes every Monday.")


@pytest.fixture(scope="module", params=["index", "copy"])
def service(request, memory: MemoryService) -> Iterator[MemoryService]:
    """The session's database, its duplicates found from the search index or from copies of
    every scope of at least 3 memories."""
    rows = 0 if request.param == "index" else 3
    with MemoryService(memory.conn, config=memory.config.replace(vector_cache_rows=rows),
                       embeddings=memory.embeddings) as svc:
        yield svc


@pytest.fixture
def crew(service: MemoryService, tenant):
    """The tenant's project with filler memories (copied when copies are on), shared with a guest."""
    owner = service.for_user(tenant.user, project_id=tenant.project)
    owner.add_many([NewMemory(content=t, scope="project") for t in FILLER])
    guest = f"guest-{tenant.user}"
    service.share_project(tenant.project, with_user=guest, user_id=tenant.user)
    owner.search("design review")
    owner.search("design review")
    if service.config.vector_cache_rows:
        config = service.config
        cache = requests._SHARED[service.conn][f"vector_cache:{config.vector_cache_rows}:{config.vector_cache_mb}"]
        assert any(c.scope == "project" for c in cache.ranges.values())
    return owner, service.for_user(guest, project_id=tenant.project)


def test_a_public_add_is_not_folded_into_a_members_only_memory(crew) -> None:
    owner, guest = crew
    members = owner.add(NOTE, scope="project", visibility="members")
    public = owner.add(NOTE, scope="project", visibility="public")
    assert not public.deduplicated and public.id != members.id and public.visibility.value == "public"
    assert [r.id for r in guest.search("design review Thursday", k=10)] == [public.id]
    # a narrower or equal one is merged into the closest one at least as visible (the older one)
    for visibility in ("members", "owner_only"):
        again = owner.add(NOTE, scope="project", visibility=visibility)
        assert again.deduplicated and again.id == members.id, visibility
    assert owner.add(NOTE, scope="project", visibility="public").id == public.id
    assert owner.find_duplicate(NOTE, scope="project").id == members.id


def test_a_members_add_is_not_folded_into_an_owner_only_memory(crew, tenant, service: MemoryService) -> None:
    owner, _ = crew
    private = owner.add(NOTE, scope="project", visibility="owner_only")
    shared = owner.add(NOTE, scope="project")
    assert not shared.deduplicated and shared.id != private.id
    editor = service.for_user(tenant.other_user, project_id=tenant.project)
    found = [r.id for r in editor.search("design review Thursday", k=10)]
    assert found[0] == shared.id and private.id not in found


def test_visibility_is_no_bar_in_a_users_own_memory(service: MemoryService, tenant) -> None:
    """A user's memories have one reader whatever their visibility says: a duplicate is a duplicate."""
    me = service.for_user(tenant.user)
    first = me.add(NOTE, visibility="owner_only")
    assert me.add(NOTE, visibility="public").id == first.id


def test_add_many_keeps_a_wider_repeat(crew) -> None:
    owner, guest = crew
    members = owner.add(NOTE, scope="project")
    report = owner.add_many([NewMemory(content=NOTE, scope="project", visibility="public"),
                             NewMemory(content=NOTE, scope="project", visibility="members")], dedupe=True)
    [public] = report.inserted
    assert report.duplicates == [(1, members.id)]
    assert [r.id for r in guest.search("design review Thursday", k=10)] == [public]
    # within one call too: a public repeat of a members item is kept, a members repeat of a public one is not
    other = "The quarterly roadmap is published on the wiki."
    report = owner.add_many([NewMemory(content=other, scope="project", visibility="members"),
                             NewMemory(content=other, scope="project", visibility="public"),
                             NewMemory(content=other, scope="project", visibility="members")], dedupe=True)
    assert len(report.inserted) == 2 and [pos for pos, _ in report.duplicates] == [2]


def _model(decision: str, target: str = "M1") -> ScriptedChatModel:
    """A model that extracts :data:`NOTE` as a project fact and judges it ``decision`` about the
    stored memory ``target`` (``M1``: the closest; one that does not exist leaves the decision
    to similarity)."""
    return ScriptedChatModel(structured={
        "ExtractedMemories": [{"memories": [
            {"content": NOTE, "memory_type": "fact", "scope": "project", "confidence": 0.95}]}],
        "ConsolidationDecisions": [{"decisions": [
            {"proposal": 1, "decision": decision, "target": target, "content": None, "reason": "says the same"}]}],
        "UserProfileUpdate": [{"frequently_used_tools": []}], "ProjectProfileUpdate": [{}],
    })


@pytest.mark.parametrize("decided_by", ["model", "similarity"])
def test_extraction_does_not_fold_a_project_fact_into_an_owner_only_memory(crew, service: MemoryService,
                                                                           tenant, decided_by: str) -> None:
    owner, _ = crew
    private = owner.add(NOTE, scope="project", visibility="owner_only")
    llm = _model("NONE") if decided_by == "model" else _model("SUPERSEDE", "M9")
    said = ["The design review happens every Thursday at ten in room B."]
    runner = service.for_user(tenant.user, project_id=tenant.project, session_id=tenant.session)
    [outcome] = runner.extract(said, llm=llm).outcomes
    assert outcome.decision is Decision.ADD and outcome.memory.id != private.id, outcome.reason
    assert outcome.memory.visibility.value == "members"
    editor = service.for_user(tenant.other_user, project_id=tenant.project)
    assert outcome.memory.id in {r.id for r in editor.search("design review Thursday", k=10)}
    # said again: the members one is known already
    again = service.for_user(tenant.user, project_id=tenant.project, session_id=tenant.session + "-2")
    [repeat] = again.extract(said, llm=llm).outcomes
    assert repeat.decision is Decision.NONE and repeat.memory.id in (outcome.memory.id, private.id)
