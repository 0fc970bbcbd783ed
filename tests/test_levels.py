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
        "org": memory.for_user(w.alice, org_id=w.org).add("Use Jest for unit tests.", scope="org", memory_type="constraint"),
        "team": memory.for_user(w.bob, team_id=w.team).add("Use Vitest for unit tests.", scope="team", memory_type="constraint"),
        "user": memory.for_user(w.alice).add("Prefers Bun test for unit tests.", memory_type="preference"),
    }


def test_search_spans_levels_and_tags_each_result(memory, world):
    w = world
    saved = _runners(memory, w)
    results = memory.for_user(w.alice).search("which runner for unit tests", k=10)
    assert {(r.level, r.scope_id) for r in results} == {(Scope.ORG, w.org), (Scope.TEAM, w.team),
                                                         (Scope.USER, w.alice)}
    # a chosen level
    only_team = memory.for_user(w.alice).search("unit tests", k=10, scope="team")
    assert [r.id for r in only_team] == [saved["team"].id]
    # bob is in the team but not the org: no org memory for him
    bob = memory.for_user(w.bob).search("unit tests", k=10)
    assert [r.id for r in bob] == [saved["team"].id]
    # naming a team he is not in narrows to nothing at that level
    assert memory.for_user(w.bob, team_id=f"other-{w.team}").search("unit tests", k=10) == []
    assert memory.for_user(w.outsider).search("unit tests", k=10) == []


def test_the_most_specific_level_ranks_first_and_weights_are_configurable(memory, world, dsn, embeddings):
    w = world
    text = "Commit messages follow the Conventional Commits format."
    project = f"proj-{w.team}"
    ids = {}
    for scope, extra in (("org", {"org_id": w.org}), ("team", {"team_id": w.team}), ("user", {}),
                         ("project", {"project_id": project})):
        ids[scope] = memory.for_user(w.alice, **extra).add(text, scope=scope).id
    order = [r.level.value for r in memory.for_user(w.alice, project_id=project).search("commit message format", k=4)]
    assert order == ["project", "user", "team", "org"]  # scope_priority 0.8 > 0.6 > 0.4 > 0.2
    flipped = MemoryConfig(scope_priority={"org": 1.0, "team": 0.9})
    with MemoryService(dsn, config=flipped, embeddings=embeddings) as other:
        order = [r.level.value for r in other.for_user(w.alice, project_id=project).search("commit message format", k=4)]
    assert order[:2] == ["org", "team"]


def test_conflicts_across_levels_are_returned_together_in_precedence_order(memory, world):
    w = world
    saved = _runners(memory, w)
    results, conflicts = memory.for_user(w.alice).search_with_conflicts("which runner for unit tests", k=1)
    assert len(results) == 1  # k=1 ranks two of them out ...
    [conflict] = conflicts   # ... but the conflict brings them back, most specific first
    assert [m.id for m in conflict.items] == [saved["user"].id, saved["team"].id, saved["org"].id]
    assert conflict.order == "user > team > org" and conflict.winner.id == saved["user"].id
    # bob sees only the team's rule: nothing to conflict with at his levels
    _, bob_conflicts = memory.for_user(w.bob).search_with_conflicts("which runner for unit tests", k=5)
    assert bob_conflicts == []


def test_agreement_and_unrelated_memories_are_not_conflicts(memory, world):
    w = world
    memory.for_user(w.alice, org_id=w.org).add("Use Jest for unit tests.", scope="org")
    memory.for_user(w.alice, team_id=w.team).add("Use Jest for all unit tests.", scope="team")
    memory.for_user(w.alice).add("Deploys happen on Fridays.")
    results, conflicts = memory.for_user(w.alice).search_with_conflicts("unit tests and deploys", k=5)
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
    hidden = memory.for_user(w.outsider, team_id=other_team).add("Use Mocha for unit tests.", scope="team")
    results, conflicts = memory.for_user(w.alice).search_with_conflicts("which runner for unit tests", k=5)
    seen = {r.id for r in results} | {m.id for c in conflicts for m in c.items}
    assert hidden.id not in seen and len(seen) == 3
    # and the outsider's own search sees only their team's memory, with no conflict from alice's levels
    results, conflicts = memory.for_user(w.outsider).search_with_conflicts("which runner for unit tests", k=5)
    assert [r.id for r in results] == [hidden.id] and conflicts == []


async def test_conflicts_async(amemory, world):
    w = world
    await amemory.for_user(w.alice, org_id=w.org).add("Use Jest for unit tests.", scope="org")
    await amemory.for_user(w.alice).add("Prefers Bun test for unit tests.")
    _, conflicts = await amemory.for_user(w.alice).search_with_conflicts("unit test runner")
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
    a = memory.for_user(w.alice).add("Use tabs for indentation.")
    b = memory.for_user(w.alice).add("Use spaces for indentation.")
    c = memory.for_user(w.alice, team_id=w.team).add("Use two spaces for indentation.", scope="team")
    items = {i.id: i for i in (a, b, c)}
    prio = MemoryConfig().scope_priority
    kw = dict(anchors=[a.id, b.id], scope_priority=prio, conflict_threshold=0.4, duplicate_threshold=0.85)
    assert group_conflicts(items, [(a.id, b.id, 0.7)], **kw) == []            # same level: consolidation's job
    assert group_conflicts(items, [(a.id, c.id, 0.9)], **kw) == []            # agreement, not conflict
    assert group_conflicts(items, [(a.id, c.id, 0.3)], **kw) == []            # different subjects
    [conflict] = group_conflicts(items, [(c.id, a.id, 0.6), (b.id, c.id, 0.6)], **kw)
    assert [m.id for m in conflict.items] == [a.id, b.id, c.id] and conflict.order == "user > team"
