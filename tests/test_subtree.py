"""Subtree reads: ``subtree=True`` reaches the project, team and org levels down their ``/`` paths,
scope by scope under each scope's own rule, whole segments only, nearer scopes first."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from agent_memory import InvalidInputError, MemoryService

SENTENCE = "Deploys go out on Tuesday after the review."


@pytest.fixture
def tree(memory: MemoryService) -> dict[str, Any]:
    """``co/eng`` (alice owns it), ``co/eng/web`` (bob owns it, alice edits), ``co/eng/web/api``
    (alice owns it), ``co/eng/ops`` (carol's; shared with alice: its public memories only),
    ``co/eng/sec`` (carol's; alice has nothing there), ``co/engine`` (alice owns it: a sibling,
    not below). Teams ``t`` and ``t/x`` (alice in both) and ``t/y`` (not hers)."""
    tag = uuid.uuid4().hex[:8]
    u = {n: f"{n}-{tag}" for n in ("alice", "bob", "carol")}
    p = {n: f"co{tag}/{n}" for n in ("eng", "eng/web", "eng/web/api", "eng/ops", "eng/sec", "engine")}
    t = {n: f"t{tag}{n}" for n in ("", "/x", "/y")}
    m = memory
    m.create_project(p["eng"], user_id=u["alice"])
    m.create_project(p["eng/web"], user_id=u["bob"])
    m.add_member("project", p["eng/web"], u["alice"], "editor", user_id=u["bob"])
    m.create_project(p["eng/web/api"], user_id=u["alice"])
    m.create_project(p["eng/ops"], user_id=u["carol"])
    m.share_project(p["eng/ops"], user_id=u["carol"], with_user=u["alice"])
    m.create_project(p["eng/sec"], user_id=u["carol"])
    m.create_project(p["engine"], user_id=u["alice"])
    m.create_team(t[""], user_id=u["alice"])
    m.create_team(t["/x"], user_id=u["bob"])
    m.add_member("team", t["/x"], u["alice"], "member", user_id=u["bob"])
    m.create_team(t["/y"], user_id=u["carol"])
    saved = {}
    for name, owner in (("eng", "alice"), ("eng/web", "bob"), ("eng/web/api", "alice"), ("eng/ops", "carol"),
                        ("eng/sec", "carol"), ("engine", "alice")):
        saved[name] = m.for_user(u[owner], project_id=p[name]).add(SENTENCE, scope="project", dedupe=False)
    saved["eng/ops public"] = m.for_user(u["carol"], project_id=p["eng/ops"]).add(
        "Deploys of the ops tools go out on Tuesday after the review.", scope="project", visibility="public")
    saved["eng/web bob only"] = m.for_user(u["bob"], project_id=p["eng/web"]).add(
        "Deploys of bob's private tools go out on Tuesday.", scope="project", visibility="owner_only")
    for name, owner in (("", "alice"), ("/x", "bob"), ("/y", "carol")):
        saved[f"team{name}"] = m.for_user(u[owner], team_id=t[name]).add(SENTENCE, scope="team", dedupe=False)
    return {"u": u, "p": p, "t": t, "saved": saved}


def _names(tree: dict[str, Any], ids: set[Any]) -> set[str]:
    return {name for name, item in tree["saved"].items() if item.id in ids}


def test_a_project_subtree_reads_each_scope_below_under_its_own_rule(memory: MemoryService, tree: Any) -> None:
    alice = memory.for_user(tree["u"]["alice"], project_id=tree["p"]["eng"])
    flat = {r.item.id for r in alice.search("deploys on Tuesday", k=20, scope="project", min_relevance=0)}
    assert _names(tree, flat) == {"eng"}
    deep = {r.item.id for r in alice.search("deploys on Tuesday", k=20, scope="project", min_relevance=0,
                                            subtree=True)}
    # never co/engine (a sibling), nothing of eng/sec (no role), only the public memory of eng/ops (shared),
    # never bob's owner_only memory of eng/web
    assert _names(tree, deep) == {"eng", "eng/web", "eng/web/api", "eng/ops public"}
    listed = {m.id for m in alice.list(scope="project", subtree=True, limit=100)}
    assert listed == deep


def test_nearer_scopes_rank_first_among_equals(memory: MemoryService, tree: Any) -> None:
    alice = memory.for_user(tree["u"]["alice"], project_id=tree["p"]["eng"])
    hits = alice.search(SENTENCE, k=3, scope="project", subtree=True)
    assert [h.item.scope_id for h in hits] == [tree["p"]["eng"], tree["p"]["eng/web"], tree["p"]["eng/web/api"]]
    assert hits[0].score > hits[1].score > hits[2].score
    # from the middle of the tree, its own scope comes first and the parent is not below it
    web = memory.for_user(tree["u"]["alice"], project_id=tree["p"]["eng/web"])
    assert [h.item.scope_id for h in web.search(SENTENCE, k=5, scope="project", subtree=True)] == [
        tree["p"]["eng/web"], tree["p"]["eng/web/api"]]


def test_a_team_subtree_and_the_other_levels(memory: MemoryService, tree: Any) -> None:
    alice = memory.for_user(tree["u"]["alice"], team_id=tree["t"][""])
    assert _names(tree, {r.item.id for r in alice.search(SENTENCE, k=20, scope="team")}) == {"team"}
    assert _names(tree, {r.item.id for r in alice.search(SENTENCE, k=20, scope="team", subtree=True)}) == {
        "team", "team/x"}
    # a user with no role anywhere below sees nothing of the tree
    stranger = memory.for_user(f"stranger-{uuid.uuid4().hex[:6]}", project_id=tree["p"]["eng"], team_id=tree["t"][""])
    assert stranger.search(SENTENCE, k=20, subtree=True, min_relevance=0) == []
    assert stranger.list(subtree=True) == []


async def test_the_async_door_reads_the_same_subtree(amemory: Any, memory: MemoryService, tree: Any) -> None:
    alice = amemory.for_user(tree["u"]["alice"], project_id=tree["p"]["eng"])
    got = {r.item.id for r in await alice.search("deploys", k=20, scope="project", subtree=True, min_relevance=0)}
    assert _names(tree, got) == {"eng", "eng/web", "eng/web/api", "eng/ops public"}


def test_colon_paths_are_refused_with_the_slash_form(memory: MemoryService) -> None:
    with pytest.raises(InvalidInputError, match="'company/engineering/alice'"):
        memory.for_user("u1", project_id="company:engineering:alice")
    with pytest.raises(InvalidInputError, match="subtree"):
        memory.create_team("acme:web", user_id="u1")
    with pytest.raises(InvalidInputError, match="subtree: must be True or False"):
        memory.for_user("u1").search("x", subtree="yes")  # type: ignore[arg-type]
