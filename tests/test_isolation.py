"""Tenants never see each other: every read path, against a database holding several users and projects."""

from __future__ import annotations

import uuid

import pytest

from agent_memory import MemoryNotFoundError, MemoryService


@pytest.fixture
def world(memory: MemoryService):
    """Three users; alice and bob share project p1, carol has p2; alice and carol reuse session id "1"."""
    tag = uuid.uuid4().hex[:8]
    u = {name: f"{name}-{tag}" for name in ("alice", "bob", "carol")}
    p1, p2, s = f"p1-{tag}", f"p2-{tag}", "1"
    owned: dict[str, list] = {name: [] for name in u}
    specs = [
        ("alice", dict(project_id=p1, session_id=s), "user", "members", "Alice loves sourdough baking"),
        ("alice", dict(project_id=p1, session_id=s), "session", "members", "Alice is debugging sourdough.py"),
        ("alice", dict(project_id=p1, session_id=s), "project", "members", "Project one bakes sourdough nightly"),
        ("alice", dict(project_id=p1, session_id=s), "project", "owner_only", "Alice's private sourdough note"),
        ("bob", dict(project_id=p1, session_id="b"), "user", "members", "Bob hates sourdough bread"),
        ("bob", dict(project_id=p1, session_id="b"), "project", "public", "Project one sourdough is public"),
        ("carol", dict(project_id=p2, session_id=s), "user", "members", "Carol bakes sourdough on Sundays"),
        ("carol", dict(project_id=p2, session_id=s), "session", "members", "Carol's session about sourdough"),
        ("carol", dict(project_id=p2, session_id=s), "project", "members", "Project two sells sourdough"),
    ]
    memory.create_project(p1, user_id=u["alice"])
    memory.add_member("project", p1, u["bob"], "editor", user_id=u["alice"])
    for name, extra, scope, visibility, content in specs:  # carol's first write creates p2
        item = memory.for_user(u[name], **extra).add(content, scope=scope, visibility=visibility)
        owned[name].append(item)
    return u, p1, p2, s, owned


def visible_contents(memory: MemoryService, **ids) -> dict[str, set[str]]:
    """What each read path returns for one caller."""
    out = {
        "search": {h.content for h in memory.for_user(**ids).search("sourdough", k=50, status=None)},
        "list": {i.content for i in memory.for_user(**ids).list(status=None, limit=100)},
    }
    out["stats"] = {str(memory.for_user(**ids).stats().total)}
    return out


def test_each_read_path_returns_only_what_the_caller_may_see(memory, world):
    u, p1, p2, s, owned = world
    alice = visible_contents(memory, user_id=u["alice"], project_id=p1, session_id=s)
    expected_alice = {
        "Alice loves sourdough baking", "Alice is debugging sourdough.py", "Project one bakes sourdough nightly",
        "Alice's private sourdough note", "Project one sourdough is public",
    }
    assert alice["search"] == expected_alice and alice["list"] == expected_alice and alice["stats"] == {"5"}

    bob = visible_contents(memory, user_id=u["bob"], project_id=p1, session_id="b")
    expected_bob = {"Bob hates sourdough bread", "Project one bakes sourdough nightly",
                    "Project one sourdough is public"}
    assert bob["search"] == expected_bob and bob["list"] == expected_bob and bob["stats"] == {"3"}

    # carol shares alice's session id "1" but not her user or project
    carol = visible_contents(memory, user_id=u["carol"], project_id=p2, session_id=s)
    expected_carol = {"Carol bakes sourdough on Sundays", "Carol's session about sourdough",
                      "Project two sells sourdough"}
    assert carol["search"] == expected_carol and carol["list"] == expected_carol and carol["stats"] == {"3"}

    # a caller naming alice's project without being a member of it sees nothing of it
    intruder = visible_contents(memory, user_id=f"mallory-{uuid.uuid4().hex[:6]}", project_id=p1, session_id=s)
    assert intruder == {"search": set(), "list": set(), "stats": {"0"}}


def test_point_reads_and_writes_by_id_respect_tenancy(memory, world):
    u, p1, p2, s, owned = world
    carol_item = owned["carol"][0]
    for reader in (dict(user_id=u["alice"], project_id=p1, session_id=s),
                   dict(user_id=u["bob"], project_id=p1, session_id="b")):
        with pytest.raises(MemoryNotFoundError):
            memory.for_user(**reader).get(carol_item.id)
        with pytest.raises(MemoryNotFoundError):
            memory.for_user(**reader).delete(carol_item.id)
        with pytest.raises(MemoryNotFoundError):
            memory.for_user(**reader).restore(carol_item.id)
    assert memory.for_user(u["carol"]).get(carol_item.id).status.value == "active"


def test_duplicate_detection_never_matches_another_tenants_memory(memory, world):
    u, p1, p2, s, owned = world
    stranger = f"dave-{uuid.uuid4().hex[:6]}"
    assert memory.for_user(stranger).find_duplicate("Alice loves sourdough baking") is None
    item = memory.for_user(stranger).add("Alice loves sourdough baking")
    assert not item.deduplicated and item.user_id == stranger
    # bob may not see alice's owner_only project note, so his identical save is a new memory
    bobs = memory.for_user(u["bob"], project_id=p1).add("Alice's private sourdough note", scope="project")
    assert not bobs.deduplicated


def test_purge_and_stats_touch_only_the_caller(memory, world):
    u, p1, p2, s, owned = world
    memory.for_user(u["bob"], project_id=p1).delete(owned["bob"][0].id)
    assert memory.for_user(u["alice"], project_id=p1, session_id=s).purge_archived() == 0
    assert memory.for_user(u["bob"]).get(owned["bob"][0].id).status.value == "archived"
    assert memory.for_user(u["alice"], project_id=p1, session_id=s).stats().total == 5
