"""Team and org levels: search across levels, precedence, and conflicts shown together."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from langchain_core.messages import HumanMessage

from agent_memory import MemoryConfig, MemoryService
from agent_memory.conflicts import group_conflicts, precedence
from agent_memory.errors import ConfigurationError
from agent_memory.models import Identity, Scope
from agent_memory.middleware.backend import MemoryBackend
from agent_memory.middleware.context import ContextBuilder
from agent_memory.testing import tool_call

from test_memory_tools import run_tools


@dataclass(frozen=True)
class World:
    alice: str      # org admin, team lead
    bob: str        # team member, not in the org
    outsider: str
    org: str
    team: str

    def ids(self, user: str, **extra):
        return {"user_id": user, **extra}


@pytest.fixture
def world(memory: MemoryService) -> World:
    tag = uuid.uuid4().hex[:8]
    w = World(alice=f"alice-{tag}", bob=f"bob-{tag}", outsider=f"eve-{tag}", org=f"acme-{tag}", team=f"web-{tag}")
    memory.create_org(w.org, user_id=w.alice)
    memory.create_team(w.team, user_id=w.alice)
    memory.add_member("team", w.team, w.bob, "member", user_id=w.alice)
    return w


def _runners(memory: MemoryService, w: World) -> dict[str, object]:
    """The issue's example: the org says Jest, the team Vitest, the user prefers Bun."""
    return {
        "org": memory.add_explicit_memory("Use Jest for unit tests.", scope="org", org_id=w.org, user_id=w.alice,
                                          memory_type="constraint"),
        "team": memory.add_explicit_memory("Use Vitest for unit tests.", scope="team", team_id=w.team,
                                           user_id=w.bob, memory_type="constraint"),
        "user": memory.add_explicit_memory("Prefers Bun test for unit tests.", user_id=w.alice,
                                           memory_type="preference"),
    }


def test_search_spans_levels_and_tags_each_result(memory, world):
    w = world
    saved = _runners(memory, w)
    results = memory.search_memories("which runner for unit tests", k=10, user_id=w.alice)
    assert {(r.level, r.scope_id) for r in results} == {(Scope.ORG, w.org), (Scope.TEAM, w.team),
                                                         (Scope.USER, w.alice)}
    # a chosen level
    only_team = memory.search_memories("unit tests", k=10, scope="team", user_id=w.alice)
    assert [r.id for r in only_team] == [saved["team"].id]
    # bob is in the team but not the org: no org memory for him
    bob = memory.search_memories("unit tests", k=10, user_id=w.bob)
    assert [r.id for r in bob] == [saved["team"].id]
    # naming a team he is not in narrows to nothing at that level
    assert memory.search_memories("unit tests", k=10, user_id=w.bob, team_id=f"other-{w.team}") == []
    assert memory.search_memories("unit tests", k=10, user_id=w.outsider) == []


def test_the_most_specific_level_ranks_first_and_weights_are_configurable(memory, world, dsn, embeddings):
    w = world
    text = "Commit messages follow the Conventional Commits format."
    project = f"proj-{w.team}"
    ids = {}
    for scope, extra in (("org", {"org_id": w.org}), ("team", {"team_id": w.team}), ("user", {}),
                         ("project", {"project_id": project})):
        ids[scope] = memory.add_explicit_memory(text, scope=scope, user_id=w.alice, **extra).id
    order = [r.level.value for r in memory.search_memories("commit message format", k=4, user_id=w.alice,
                                                           project_id=project)]
    assert order == ["project", "user", "team", "org"]  # scope_priority 0.8 > 0.6 > 0.4 > 0.2
    flipped = MemoryConfig(scope_priority={"org": 1.0, "team": 0.9})
    with MemoryService(dsn, config=flipped, embeddings=embeddings) as other:
        order = [r.level.value for r in other.search_memories("commit message format", k=4, user_id=w.alice,
                                                              project_id=project)]
    assert order[:2] == ["org", "team"]


def test_conflicts_across_levels_are_returned_together_in_precedence_order(memory, world):
    w = world
    saved = _runners(memory, w)
    results, conflicts = memory.search_with_conflicts("which runner for unit tests", k=1, user_id=w.alice)
    assert len(results) == 1  # k=1 ranks two of them out ...
    [conflict] = conflicts   # ... but the conflict brings them back, most specific first
    assert [m.id for m in conflict.items] == [saved["user"].id, saved["team"].id, saved["org"].id]
    assert conflict.order == "user > team > org" and conflict.winner.id == saved["user"].id
    # bob sees only the team's rule: nothing to conflict with at his levels
    _, bob_conflicts = memory.search_with_conflicts("which runner for unit tests", k=5, user_id=w.bob)
    assert bob_conflicts == []


def test_agreement_and_unrelated_memories_are_not_conflicts(memory, world):
    w = world
    memory.add_explicit_memory("Use Jest for unit tests.", scope="org", org_id=w.org, user_id=w.alice)
    memory.add_explicit_memory("Use Jest for all unit tests.", scope="team", team_id=w.team, user_id=w.alice)
    memory.add_explicit_memory("Deploys happen on Fridays.", user_id=w.alice)
    results, conflicts = memory.search_with_conflicts("unit tests and deploys", k=5, user_id=w.alice)
    assert len(results) == 3 and conflicts == []


def test_injected_context_marks_the_conflict_and_its_precedence(memory, world):
    w = world
    saved = _runners(memory, w)
    builder = ContextBuilder(MemoryBackend.of(memory), k=1)
    context = builder.build(Identity(w.alice), [HumanMessage("Which test runner should I use for unit tests?")])
    text = context.text
    assert '<conflict precedence="user &gt; team &gt; org"' in text
    body = text[text.index("<conflict"):text.index("</conflict>")]
    assert body.index("Bun test") < body.index("Vitest") < body.index("Jest for")
    assert f'<memory scope="team" scope_id="{w.team}" type="constraint">Use Vitest' in body
    assert set(context.memory_ids) == {str(m.id) for m in saved.values()}


def test_a_conflict_never_pulls_in_another_tenants_memory(memory, world):
    w = world
    _runners(memory, w)
    other_team = f"other-{w.team}"
    memory.create_team(other_team, user_id=w.outsider)
    hidden = memory.add_explicit_memory("Use Mocha for unit tests.", scope="team", team_id=other_team,
                                        user_id=w.outsider)
    results, conflicts = memory.search_with_conflicts("which runner for unit tests", k=5, user_id=w.alice)
    seen = {r.id for r in results} | {m.id for c in conflicts for m in c.items}
    assert hidden.id not in seen and len(seen) == 3
    # and the outsider's own search sees only their team's memory, with no conflict from alice's levels
    results, conflicts = memory.search_with_conflicts("which runner for unit tests", k=5, user_id=w.outsider)
    assert [r.id for r in results] == [hidden.id] and conflicts == []


async def test_conflicts_async(amemory, world):
    w = world
    await amemory.add_explicit_memory("Use Jest for unit tests.", scope="org", org_id=w.org, user_id=w.alice)
    await amemory.add_explicit_memory("Prefers Bun test for unit tests.", user_id=w.alice)
    _, conflicts = await amemory.search_with_conflicts("unit test runner", user_id=w.alice)
    assert [[m.scope.value for m in c.items] for c in conflicts] == [["user", "org"]]


def test_tools_save_to_team_and_org_from_the_runs_config(memory, world):
    w = world
    config = {"configurable": {"user_id": w.bob, "team_id": w.team, "org_id": w.org, "thread_id": "t1"}}
    [team, org] = run_tools(memory, [
        tool_call("memory_save", content="The team reviews every pull request within a day", scope="team"),
        tool_call("memory_save", content="The org requires two approvals per merge", scope="org"),
    ], config)
    assert team.status == "success" and f"(fact, team:{w.team})" in team.text
    assert org.status == "error" and org.text.startswith("Not allowed")
    assert "needs the role admin; you are not a member" in org.text
    memory.set_team_write(w.team, "leads", user_id=w.alice)
    [refused] = run_tools(memory, [tool_call("memory_save", content="The team pairs on Fridays", scope="team")],
                          config)
    assert refused.status == "error" and "needs the role lead (this team lets only its leads write)" in refused.text
    [found] = run_tools(memory, [tool_call("memory_search", query="pull request reviews")], config)
    assert f"(fact, team:{w.team}): The team reviews every pull request" in found.text


def test_precedence_follows_scope_priority():
    assert precedence(MemoryConfig().scope_priority) == [Scope.SESSION, Scope.PROJECT, Scope.USER, Scope.TEAM,
                                                        Scope.ORG]
    assert precedence(MemoryConfig(scope_priority={"org": 1.0}).scope_priority)[:2] == [Scope.SESSION, Scope.ORG]
    assert MemoryConfig(scope_priority={"team": 0.5}).scope_priority["org"] == 0.2  # the rest keep their defaults
    for bad in ({"planet": 0.5}, {"team": 2}, {"team": True}, "team"):
        with pytest.raises(ConfigurationError, match="scope_priority"):
            MemoryConfig(scope_priority=bad)


def test_group_conflicts_is_pure_and_needs_two_levels(memory, world):
    w = world
    a = memory.add_explicit_memory("Use tabs for indentation.", user_id=w.alice)
    b = memory.add_explicit_memory("Use spaces for indentation.", user_id=w.alice)
    c = memory.add_explicit_memory("Use two spaces for indentation.", scope="team", team_id=w.team, user_id=w.alice)
    items = {i.id: i for i in (a, b, c)}
    prio = MemoryConfig().scope_priority
    kw = dict(anchors=[a.id, b.id], scope_priority=prio, conflict_threshold=0.4, duplicate_threshold=0.85)
    assert group_conflicts(items, [(a.id, b.id, 0.7)], **kw) == []            # same level: consolidation's job
    assert group_conflicts(items, [(a.id, c.id, 0.9)], **kw) == []            # agreement, not conflict
    assert group_conflicts(items, [(a.id, c.id, 0.3)], **kw) == []            # different subjects
    [conflict] = group_conflicts(items, [(c.id, a.id, 0.6), (b.id, c.id, 0.6)], **kw)
    assert [m.id for m in conflict.items] == [a.id, b.id, c.id] and conflict.order == "user > team"
