"""Access control against the real database: roles, visibility, sharing, levels, membership
rules, scope ids, and the gates on profiles, resources, tools and extraction. The permission
matrix itself, cell by cell as docs/reference/permissions.md states it, is tests/test_permission_matrix.py."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage

from agent_memory import (
    InvalidInputError,
    MemoryItem,
    MemoryNotFoundError,
    MemoryService,
    PermissionDeniedError,
    RejectionReason,
    Scope,
)
from agent_memory.middleware import MemoryMiddleware, memory_tools
from agent_memory.models import Role
from agent_memory.testing import ScriptedChatModel, tool_call

WRITERS = ("owner", "admin", "editor")


@pytest.fixture(params=["sync", "async"])
def svc(request):
    """The same test body against MemoryService and AsyncMemoryService."""
    return request.getfixturevalue("memory" if request.param == "sync" else "amemory")


async def call(service: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    result = getattr(service, name)(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass(frozen=True)
class Crew:
    """A fresh project with a member of each role (``writer`` is a second editor, the author of
    "someone else's" memories), a user it is shared with (``guest``) and an ``outsider``."""

    project: str
    owner: str
    admin: str
    editor: str
    viewer: str
    writer: str
    guest: str
    outsider: str

    def ids(self, who: str) -> dict[str, str]:
        return {"user_id": getattr(self, who), "project_id": self.project}


@pytest.fixture
def crew(memory: MemoryService) -> Crew:
    tag = uuid.uuid4().hex[:10]
    c = Crew(*(f"{name}-{tag}" for name in ("proj", "owner", "admin", "editor", "viewer", "writer", "guest",
                                            "outsider")))
    memory.create_project(c.project, user_id=c.owner)
    for who, role in (("admin", "admin"), ("editor", "editor"), ("viewer", "viewer"), ("writer", "editor")):
        memory.add_member("project", c.project, getattr(c, who), role, user_id=c.owner)
    memory.share_project(c.project, with_user=c.guest, user_id=c.owner)
    return c


def project_ids(memory: MemoryService, crew: Crew, who: str) -> set[Any]:
    return {i.id for i in memory.for_user(**crew.ids(who)).list(scope="project", status=None)}


# --- project roles ----------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "admin", "editor", "viewer"])
async def test_what_each_project_role_may_do(svc, memory, crew, role) -> None:
    me = crew.ids(role)
    theirs = memory.for_user(**crew.ids("writer")).add("The staging database is refreshed every Monday", scope="project")
    # every member reads the project's memories
    assert (await call(svc.for_user(**me), "get", theirs.id)).id == theirs.id
    assert theirs.id in {i.id for i in await call(svc.for_user(**me), "list", scope="project")}

    # create: owners, admins and editors
    if role in WRITERS:
        mine = await call(svc.for_user(**me), "add", f"The {role} wants release notes for every deploy", scope="project")
        assert isinstance(mine, MemoryItem) and (mine.scope, mine.scope_id, mine.user_id) == (
            Scope.PROJECT, crew.project, me["user_id"])
    else:
        with pytest.raises(PermissionDeniedError,
                           match="saving a memory in project .* needs the role owner, admin or editor; "
                                 "you are a viewer"):
            await call(svc.for_user(**me), "add", "The viewer wants release notes", scope="project")
        # what a viewer wrote while an editor stays theirs, but their role no longer lets them change it
        memory.add_member("project", crew.project, crew.viewer, "editor", user_id=crew.owner)
        mine = memory.for_user(**me).add("The viewer wants release notes for every deploy", scope="project")
        memory.add_member("project", crew.project, crew.viewer, "viewer", user_id=crew.owner)

    # edit, delete and restore their own: the roles that write
    if role in WRITERS:
        edited = await call(svc.for_user(**me), "edit", mine.id, content="Release notes are written for every deploy")
        assert edited.version == 2
        assert (await call(svc.for_user(**me), "delete", mine.id)).status.value == "archived"
        assert (await call(svc.for_user(**me), "restore", mine.id)).status.value == "active"
    else:
        for method, kwargs in (("edit", {"content": "Changed by a viewer"}), ("delete", {})):
            with pytest.raises(PermissionDeniedError, match="your memory .* needs the role owner, admin or editor; "
                                                            "you are a viewer"):
                await call(svc.for_user(**me), method, mine.id, **kwargs)
        memory.for_user(**crew.ids("owner")).delete(mine.id)
        with pytest.raises(PermissionDeniedError, match="to restore your memory"):
            await call(svc.for_user(**me), "restore", mine.id)

    # edit, delete and restore someone else's: owners and admins
    if role in ("owner", "admin"):
        edited = await call(svc.for_user(**me), "edit", theirs.id, content="The staging database is refreshed daily")
        assert edited.content == "The staging database is refreshed daily" and edited.user_id == crew.writer
        await call(svc.for_user(**me), "delete", theirs.id)
        assert (await call(svc.for_user(**me), "restore", theirs.id)).status.value == "active"
    else:
        needed = f"another member's memory .* needs the role owner or admin; you are an? {role}"
        for method, kwargs in (("edit", {"content": "Changed by someone else"}), ("delete", {})):
            with pytest.raises(PermissionDeniedError, match=needed):
                await call(svc.for_user(**me), method, theirs.id, **kwargs)
        memory.for_user(**crew.ids("owner")).delete(theirs.id)
        with pytest.raises(PermissionDeniedError, match=needed):
            await call(svc.for_user(**me), "restore", theirs.id)
    assert memory.for_user(**crew.ids("writer")).get(theirs.id).user_id == crew.writer


def test_refusals_name_the_role_needed_and_the_callers_role(memory, crew) -> None:
    cases = [
        (lambda: memory.for_user(**crew.ids("outsider")).add("Deploys happen on Fridays", scope="project"),
         (f"saving a memory in project '{crew.project}' needs the role owner, admin or editor; you are not a "
          "member. Ask a project owner or admin to change your role")),
        (lambda: memory.add_member("project", crew.project, fresh("new"), "viewer", user_id=crew.editor),
         "managing members in project .* needs the role owner or admin; you are an editor"),
        (lambda: memory.share_project(crew.project, with_user=fresh("x"), user_id=crew.viewer),
         "sharing the project in project .* needs the role owner or admin; you are a viewer"),
        (lambda: memory.list_members("project", crew.project, user_id=crew.guest),
         "listing members in project .* needs the role owner, admin, editor or viewer; you are not a member"),
    ]
    for action, message in cases:
        with pytest.raises(PermissionDeniedError, match=message):
            action()


# --- visibility and sharing -------------------------------------------------------------------


def test_visibility_decides_who_reads_a_project_memory(memory, crew) -> None:
    writer = crew.ids("writer")
    public = memory.for_user(**writer).add("The public roadmap lists the beta in May", scope="project", visibility="public")
    members = memory.for_user(**writer).add("The on-call rotation changes every Tuesday", scope="project")
    private = memory.for_user(**writer).add("The writer's draft idea is a rewrite in Go", scope="project", visibility="owner_only")
    assert members.visibility.value == "members"  # the default
    assert project_ids(memory, crew, "writer") == {public.id, members.id, private.id}
    for member in ("owner", "admin", "editor", "viewer"):  # owner_only: not even the project's owner
        assert project_ids(memory, crew, member) == {public.id, members.id}, member
    assert project_ids(memory, crew, "guest") == {public.id}
    assert project_ids(memory, crew, "outsider") == set()
    for who, hidden in (("owner", private), ("guest", members), ("outsider", public)):
        with pytest.raises(MemoryNotFoundError):
            memory.for_user(**crew.ids(who)).get(hidden.id)
    # the guest reads the shared project by naming it, and searches it like a member
    [hit] = memory.for_user(**crew.ids("guest")).search("roadmap beta", scope="project")
    assert (hit.id, hit.level, hit.scope_id) == (public.id, Scope.PROJECT, crew.project)
    assert memory.for_user(crew.guest).list() == []


@pytest.mark.parametrize("grantee", ["user", "team", "org"])
def test_sharing_with_a_user_a_team_or_an_org_opens_public_memories_until_unshared(memory, crew, grantee) -> None:
    reader, founder = fresh("reader"), fresh("founder")
    if grantee == "user":
        target = {"with_user": reader}
    else:
        group = fresh(grantee)
        getattr(memory, f"create_{grantee}")(group, user_id=founder)
        memory.add_member(grantee, group, reader, "member", user_id=founder)
        target = {f"with_{grantee}": group}
    public = memory.for_user(**crew.ids("writer")).add("The public API is versioned by date", scope="project", visibility="public")
    memory.for_user(**crew.ids("writer")).add("The internal API has no versioning", scope="project")
    me = {"user_id": reader, "project_id": crew.project}

    def seen() -> list[Any]:
        return [i.id for i in memory.for_user(**me).list(scope="project")]

    assert seen() == []
    memory.share_project(crew.project, **target, user_id=crew.admin)
    memory.share_project(crew.project, **target, user_id=crew.owner)  # sharing twice is harmless
    assert seen() == [public.id]
    if grantee != "user":  # the share follows the team's or org's membership
        memory.remove_member(grantee, group, reader, user_id=founder)
        assert seen() == []
        memory.add_member(grantee, group, reader, "member", user_id=founder)
        assert seen() == [public.id]
    # a share grants reading, never a role
    with pytest.raises(PermissionDeniedError, match="you are not a member"):
        memory.for_user(**me).add("The guest adds a note", scope="project")
    assert memory.unshare_project(crew.project, **target, user_id=crew.owner) is True
    assert seen() == []
    assert memory.unshare_project(crew.project, **target, user_id=crew.owner) is False


def test_share_takes_exactly_one_grantee(memory, crew) -> None:
    for kwargs in ({}, {"with_user": "a", "with_team": "b"}):
        with pytest.raises(InvalidInputError, match="exactly one of"):
            memory.share_project(crew.project, user_id=crew.owner, **kwargs)
    with pytest.raises(PermissionDeniedError, match="needs the role owner or admin; you are an editor"):
        memory.unshare_project(crew.project, with_user=crew.guest, user_id=crew.editor)


# --- teams and orgs ---------------------------------------------------------------------------


async def test_a_team_writes_as_its_policy_says(svc) -> None:
    team, lead, member, outsider = fresh("team"), fresh("lead"), fresh("member"), fresh("outsider")
    founded = await call(svc, "create_team", team, user_id=lead)
    assert (founded.scope, founded.scope_id, founded.role) == (Scope.TEAM, team, Role.LEAD)
    await call(svc, "add_member", "team", team, member, "member", user_id=lead)
    as_member = {"user_id": member, "team_id": team}
    # policy "members" (the default): every member writes and edits their own
    own = await call(svc.for_user(**as_member), "add", "The team reviews pull requests within a day", scope="team")
    assert (own.scope, own.scope_id) == (Scope.TEAM, team)
    await call(svc.for_user(**as_member), "edit", own.id, content="The team reviews pull requests the same day")
    with pytest.raises(PermissionDeniedError, match=f"changing who may write in team '{team}' needs the role "
                                                    "lead; you are a member"):
        await call(svc, "set_team_write", team, "leads", user_id=member)
    # policy "leads": members read, only leads write
    assert await call(svc, "set_team_write", team, "leads", user_id=lead) == "leads"
    with pytest.raises(PermissionDeniedError, match=r"needs the role lead \(this team lets only its leads write\); "
                                                    "you are a member"):
        await call(svc.for_user(**as_member), "add", "The team pairs on Fridays", scope="team")
    with pytest.raises(PermissionDeniedError, match="to edit your memory"):
        await call(svc.for_user(**as_member), "edit", own.id, content="The team reviews pull requests weekly")
    assert [i.id for i in await call(svc.for_user(**as_member), "list", scope="team")] == [own.id]
    led = await call(svc.for_user(lead, team_id=team), "add", "The team pairs on Fridays", scope="team")
    assert led.user_id == lead
    await call(svc.for_user(lead, team_id=team), "delete", own.id)  # a lead edits anyone's
    with pytest.raises(PermissionDeniedError, match="you are not a member"):
        await call(svc.for_user(outsider, team_id=team), "add", "The outsider writes here", scope="team")
    assert await call(svc.for_user(outsider, team_id=team), "list") == []
    with pytest.raises(InvalidInputError, match="members, leads"):
        await call(svc, "set_team_write", team, "everyone", user_id=lead)


def test_a_team_can_be_created_leads_only(memory) -> None:
    team, lead, member = fresh("team"), fresh("lead"), fresh("member")
    memory.create_team(team, user_id=lead, write="leads")
    memory.add_member("team", team, member, "member", user_id=lead)
    with pytest.raises(PermissionDeniedError, match="this team lets only its leads write"):
        memory.for_user(member, team_id=team).add("The team deploys twice a week", scope="team")
    with pytest.raises(InvalidInputError, match="members, leads"):
        memory.create_team(fresh("team"), user_id=lead, write="all")


async def test_org_memory_is_written_by_its_admins(svc) -> None:
    org, admin, member, outsider = fresh("org"), fresh("admin"), fresh("member"), fresh("outsider")
    assert (await call(svc, "create_org", org, user_id=admin)).role is Role.ADMIN
    await call(svc, "add_member", "org", org, member, "member", user_id=admin)
    rule = await call(svc.for_user(admin, org_id=org), "add", "All services log in JSON", scope="org", memory_type="constraint")
    with pytest.raises(PermissionDeniedError, match=f"saving a memory in org '{org}' needs the role admin; you are "
                                                    "a member. Ask an org admin"):
        await call(svc.for_user(member, org_id=org), "add", "All services log in XML", scope="org")
    with pytest.raises(PermissionDeniedError, match="another member's memory .* needs the role admin"):
        await call(svc.for_user(member, org_id=org), "delete", rule.id)
    assert [i.id for i in await call(svc.for_user(member), "list", scope="org")] == [rule.id]
    assert await call(svc.for_user(outsider, org_id=org), "list") == []


def test_team_and_org_memories_need_the_team_or_org_to_exist_and_an_id(memory) -> None:
    user, team = fresh("user"), fresh("team")
    with pytest.raises(PermissionDeniedError, match=rf"team '{team}' does not exist; create it first with "
                                                    rf"create_team\('{team}', user_id=\.\.\.\)"):
        memory.for_user(user, team_id=team).add("The team uses trunk-based development", scope="team")
    assert memory.memberships(user_id=user) == []  # only projects are created by a first write
    with pytest.raises(InvalidInputError, match=r"needs an? org_id in the caller's identity; pass org_id=\.\.\."):
        memory.for_user(user).add("The org uses SSO everywhere", scope="org")


# --- levels -----------------------------------------------------------------------------------


async def test_reads_span_every_level_tagged_with_level_and_scope_id(svc) -> None:
    user, session, project = fresh("user"), fresh("sess"), fresh("proj")
    team_a, team_b, org = fresh("team-a"), fresh("team-b"), fresh("org")
    for method, scope_id in (("create_team", team_a), ("create_team", team_b), ("create_org", org)):
        await call(svc, method, scope_id, user_id=user)
    me = {"user_id": user, "project_id": project, "session_id": session}
    written = {
        (Scope.USER, user): ("Prefers code review comments that are short", {}),
        (Scope.SESSION, session): ("In this chat the code review is about the parser", {}),
        (Scope.PROJECT, project): ("The project's code review needs two approvals", {}),
        (Scope.TEAM, team_a): ("Team A does code review in pairs", {"team_id": team_a}),
        (Scope.TEAM, team_b): ("Team B does code review asynchronously", {"team_id": team_b}),
        (Scope.ORG, org): ("The org requires a code review for every change", {"org_id": org}),
    }
    ids = {}
    for (level, scope_id), (content, extra) in written.items():
        item = await call(svc.for_user(**me, **extra), "add", content, scope=level.value)
        assert (item.scope, item.scope_id) == (level, scope_id)
        ids[item.id] = (level, scope_id)

    results = await call(svc.for_user(**me), "search", "code review", k=20)
    assert {r.id: (r.level, r.scope_id) for r in results} == ids  # every team and org of the user
    by_team = await call(svc.for_user(**me), "search", "code review", scope="team", k=20)
    assert {(r.level, r.scope_id) for r in by_team} == {(Scope.TEAM, team_a), (Scope.TEAM, team_b)}
    narrowed = await call(svc.for_user(team_id=team_b, **me), "search", "code review", k=20)
    assert {(r.level, r.scope_id) for r in narrowed if r.level is Scope.TEAM} == {(Scope.TEAM, team_b)}
    assert len(narrowed) == 5
    shared = await call(svc.for_user(org_id=org, team_id=team_a, **me), "list", scope=["team", "org"])
    assert {(i.scope, i.scope_id) for i in shared} == {(Scope.TEAM, team_a), (Scope.ORG, org)}
    # without a project_id the project's memories are not read; a stranger reads none of it
    no_project = await call(svc.for_user(user), "search", "code review", k=20)
    assert Scope.PROJECT not in {r.level for r in no_project} and len(no_project) == 4
    assert await call(svc.for_user(fresh("stranger"), project_id=project, team_id=team_a, org_id=org), "search", "code review", k=20) == []


# --- membership management --------------------------------------------------------------------


def test_project_admins_manage_editors_and_viewers_only(memory, crew) -> None:
    newcomer = fresh("newcomer")
    added = memory.add_member("project", crew.project, newcomer, "editor", user_id=crew.admin)
    assert (added.role, added.added_by) == (Role.EDITOR, crew.admin)
    assert memory.add_member("project", crew.project, newcomer, "viewer", user_id=crew.admin).role is Role.VIEWER
    for role in ("admin", "owner"):
        with pytest.raises(PermissionDeniedError, match=f"granting or changing the role {role} in project .* needs "
                                                        "the role owner; you are an admin"):
            memory.add_member("project", crew.project, newcomer, role, user_id=crew.admin)
    with pytest.raises(PermissionDeniedError, match="the role admin .* needs the role owner; you are an admin"):
        memory.add_member("project", crew.project, crew.admin, "editor", user_id=crew.admin)  # not even themselves
    peer = fresh("peer")
    memory.add_member("project", crew.project, peer, "admin", user_id=crew.owner)
    for target in (crew.owner, peer):
        with pytest.raises(PermissionDeniedError, match="needs the role owner; you are an admin"):
            memory.remove_member("project", crew.project, target, user_id=crew.admin)
    assert memory.remove_member("project", crew.project, newcomer, user_id=crew.admin) is True
    assert memory.remove_member("project", crew.project, newcomer, user_id=crew.admin) is False
    # the owner manages everyone
    assert memory.add_member("project", crew.project, crew.editor, "admin", user_id=crew.owner).role is Role.ADMIN
    with pytest.raises(InvalidInputError, match="a project role is one of owner, admin, editor, viewer, got 'lead'"):
        memory.add_member("project", crew.project, newcomer, "lead", user_id=crew.owner)


def test_the_refusal_to_remove_an_owner_reads_well(memory, crew) -> None:
    with pytest.raises(PermissionDeniedError, match="removing an owner"):
        memory.remove_member("project", crew.project, crew.owner, user_id=crew.admin)


def test_the_missing_org_id_message_reads_well(memory) -> None:
    with pytest.raises(InvalidInputError, match="an org memory needs an org_id"):
        memory.for_user(fresh("user")).add("The org uses SSO everywhere", scope="org")


@pytest.mark.parametrize(("kind", "founder_role", "other_role"),
                         [("project", "owner", "viewer"), ("team", "lead", "member"), ("org", "admin", "member")])
def test_the_last_founder_role_can_neither_leave_nor_be_demoted(memory, kind, founder_role, other_role) -> None:
    scope_id, first, second = fresh(kind), fresh("first"), fresh("second")
    getattr(memory, f"create_{kind}")(scope_id, user_id=first)
    memory.add_member(kind, scope_id, second, other_role, user_id=first)
    last = f"'{first}' is the last {founder_role} of {kind} '{scope_id}'; make another member {founder_role} first"
    with pytest.raises(PermissionDeniedError, match=last):
        memory.remove_member(kind, scope_id, first, user_id=first)
    with pytest.raises(PermissionDeniedError, match=last):
        memory.add_member(kind, scope_id, first, other_role, user_id=first)
    # with a second one, the first may step down or leave
    memory.add_member(kind, scope_id, second, founder_role, user_id=first)
    assert memory.add_member(kind, scope_id, first, other_role, user_id=first).role.value == other_role
    assert memory.remove_member(kind, scope_id, first, user_id=first) is True  # anyone may leave
    assert memory.remove_member(kind, scope_id, first, user_id=first) is False
    assert [(m.user_id, m.role.value) for m in memory.list_members(kind, scope_id, user_id=second)] == [
        (second, founder_role)]


def test_only_members_list_members(memory, crew) -> None:
    listed = memory.list_members("project", crew.project, user_id=crew.viewer)
    assert {m.user_id: m.role.value for m in listed} == {
        crew.owner: "owner", crew.admin: "admin", crew.editor: "editor", crew.viewer: "viewer", crew.writer: "editor"}
    for who in (crew.guest, crew.outsider):
        with pytest.raises(PermissionDeniedError, match="you are not a member"):
            memory.list_members("project", crew.project, user_id=who)
    with pytest.raises(PermissionDeniedError, match="does not exist"):
        memory.list_members("team", fresh("team"), user_id=crew.owner)


@pytest.mark.parametrize(("kind", "founder_role", "other_role"),
                         [("project", "owner", "admin"), ("team", "lead", "member"), ("org", "admin", "member")])
def test_create_is_idempotent_for_its_founder_and_refused_for_anyone_else(memory, kind, founder_role,
                                                                          other_role) -> None:
    scope_id, founder, other = fresh(kind), fresh("founder"), fresh("other")
    create = getattr(memory, f"create_{kind}")
    first = create(scope_id, user_id=founder)
    assert (first.scope.value, first.scope_id, first.user_id, first.role.value) == (kind, scope_id, founder,
                                                                                      founder_role)
    assert create(scope_id, user_id=founder) == first
    refused = f"{kind} '{scope_id}' already exists and you are not its {founder_role}; ask one of its members"
    with pytest.raises(PermissionDeniedError, match=refused):
        create(scope_id, user_id=other)
    memory.add_member(kind, scope_id, other, other_role, user_id=founder)
    with pytest.raises(PermissionDeniedError, match=refused):
        create(scope_id, user_id=other)
    assert {m.user_id: m.role.value for m in memory.list_members(kind, scope_id, user_id=other)} == {
        founder: founder_role, other: other_role}


def test_the_first_write_to_a_project_creates_it_with_the_writer_as_owner(memory) -> None:
    project, user, other = fresh("proj"), fresh("user"), fresh("other")
    memory.for_user(user, project_id=project).add("The project is a webshop for bikes", scope="project")
    [owner] = memory.memberships(user_id=user)
    assert (owner.scope, owner.scope_id, owner.role, owner.added_by) == (Scope.PROJECT, project, Role.OWNER, user)
    with pytest.raises(PermissionDeniedError, match="you are not a member"):
        memory.for_user(other, project_id=project).add("The project is a webshop for cars", scope="project")
    # reading a project nobody created creates nothing
    assert memory.for_user(other, project_id=fresh("proj")).list() == []
    assert memory.memberships(user_id=other) == []


def test_without_auto_create_a_project_must_be_created_first(dsn, config, embeddings) -> None:
    project, user = fresh("proj"), fresh("user")
    with MemoryService(dsn, config=config.replace(auto_create_projects=False), embeddings=embeddings) as strict:
        for write in (
            lambda: strict.for_user(user, project_id=project).add("The project ships weekly", scope="project"),
            lambda: strict.for_user(user, project_id=project).add_resource("A design document", scope="project", kind="project_resource"),
        ):
            with pytest.raises(PermissionDeniedError, match=rf"project '{project}' does not exist; create it first "
                                                            rf"with create_project\('{project}', user_id=\.\.\.\)"):
                write()
        assert strict.memberships(user_id=user) == []
        strict.create_project(project, user_id=user)
        item = strict.for_user(user, project_id=project).add("The project ships weekly", scope="project")
        assert item.scope_id == project


# --- scope ids --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["acme corp", "a:b", "a//b", "%", "acme/", "/acme", "acme%", "a\\b", "acme*"])
def test_bad_scope_ids_are_refused_with_a_message(memory, bad) -> None:
    user = fresh("user")
    calls = [
        lambda: memory.create_project(bad, user_id=user),
        lambda: memory.create_team(bad, user_id=user),
        lambda: memory.create_org(bad, user_id=user),
        lambda: memory.for_user(user, project_id=bad).add("A project memory here", scope="project"),
        lambda: memory.for_user(user, team_id=bad).list(),
        lambda: memory.memberships(user_id=user, prefix=bad),
        lambda: memory.add_member("team", bad, "x", "member", user_id=user),
        lambda: memory.share_project(fresh("proj"), with_org=bad, user_id=user),
    ]
    says = ("uses ':' between levels; scope paths are separated by '/': use 'a/b'" if bad == "a:b" else
            "is not a valid id: use letters, digits and _ . - @ \\+ in segments joined by '/'")
    for bad_call in calls:
        with pytest.raises(InvalidInputError, match=says):
            bad_call()
    assert memory.memberships(user_id=user) == []


def test_a_prefix_matches_whole_segments_and_no_wildcards(memory) -> None:
    user, root = fresh("user"), f"acme{uuid.uuid4().hex[:8]}"
    projects = [root, f"{root}/web", f"{root}/web/api", f"{root}-corp", f"{root}x", f"{root}x/y", f"{root}_",
                f"{root}_/z", f"{root}web"]
    for project in projects:
        memory.create_project(project, user_id=user)
    memory.create_team(f"{root}/platform", user_id=user)

    def ids(**kwargs: Any) -> list[str]:
        return [m.scope_id for m in memory.memberships(user_id=user, **kwargs)]

    assert ids(scope="project", prefix=root) == [root, f"{root}/web", f"{root}/web/api"]
    assert ids(prefix=root) == [root, f"{root}/web", f"{root}/web/api", f"{root}/platform"]  # ordered by kind
    assert ids(prefix=f"{root}/web") == [f"{root}/web", f"{root}/web/api"]
    assert ids(prefix=f"{root}_") == [f"{root}_", f"{root}_/z"]  # "_" is not a one-character wildcard
    assert ids(prefix=f"{root}/w") == []
    assert ids(scope="team") == [f"{root}/platform"]
    assert sorted(ids(scope="project")) == sorted(projects)


def test_scope_ids_are_nfkc_normalized(memory) -> None:
    user, name = fresh("user"), f"acme{uuid.uuid4().hex[:8]}"
    wide = "".join(chr(ord(c) + 0xFEE0) for c in name)  # ａｃｍｅ... (fullwidth forms)
    assert wide != name
    created = memory.create_project(wide, user_id=user)
    assert created.scope_id == name
    assert memory.create_project(name, user_id=user) == created
    with pytest.raises(InvalidInputError, match="project_id: has whitespace"):  # refused, never trimmed
        memory.create_project(f" {name} ", user_id=user)
    item = memory.for_user(user, project_id=wide).add("The wide project uses Django", scope="project")
    assert item.scope_id == name
    assert memory.for_user(user, project_id=name).get(item.id).id == item.id
    assert [m.scope_id for m in memory.memberships(user_id=user, prefix=wide[:4] + name[4:])] == [name]


# --- profiles and resources -------------------------------------------------------------------


def test_the_project_profile_is_read_by_members_and_edited_by_owners_and_admins(memory, crew) -> None:
    profile = memory.for_user(**crew.ids("owner")).update_profile({"current_phase": "Beta in May"}, kind="project")
    assert profile.fields["current_phase"] == "Beta in May"
    memory.for_user(**crew.ids("admin")).update_profile({"project_goal": "A webshop for bikes"}, kind="project")
    for editor in ("editor", "viewer"):
        with pytest.raises(PermissionDeniedError, match="editing the project profile in project .* needs the role "
                                                        f"owner or admin; you are an? {editor}"):
            memory.for_user(**crew.ids(editor)).update_profile({"current_phase": "GA"}, kind="project")
        with pytest.raises(PermissionDeniedError, match="needs the role owner or admin"):
            memory.for_user(**crew.ids(editor)).reset_profile_fields(kind="project")
    for member in ("owner", "admin", "editor", "viewer"):
        read = memory.for_user(**crew.ids(member)).profile("project")
        assert (read.fields["current_phase"], read.fields["project_goal"]) == ("Beta in May", "A webshop for bikes")
        assert memory.for_user(**crew.ids(member)).profiles().project.fields["current_phase"] == "Beta in May"
    for stranger in ("guest", "outsider"):
        with pytest.raises(PermissionDeniedError, match="reading the project profile in project .* you are not a "
                                                        "member"):
            memory.for_user(**crew.ids(stranger)).profile("project")
        for_agent = memory.for_user(**crew.ids(stranger)).profiles()
        assert for_agent.project is None and for_agent.project_text == ""
        assert memory.for_user(**crew.ids(stranger)).refresh_profiles(force=True, llm=None) == ["user"]
    after = memory.for_user(**crew.ids("admin")).reset_profile_fields(["current_phase"], kind="project")
    assert after.fields["current_phase"] is None and after.manual == {"project_goal": "A webshop for bikes"}


def test_project_resources_are_read_by_members_and_added_by_writers(memory, crew) -> None:
    spec = memory.for_user(**crew.ids("editor")).add_resource("Deployment checklist: tag, build, ship.", kind="project_resource", scope="project", title="Checklist")
    with pytest.raises(PermissionDeniedError, match="adding a resource in project .* needs the role owner, admin "
                                                    "or editor; you are a viewer"):
        memory.for_user(**crew.ids("viewer")).add_resource("A viewer's notes", kind="project_resource", scope="project")
    for member in ("owner", "admin", "editor", "viewer"):
        assert memory.for_user(**crew.ids(member)).get_resource(spec.id).id == spec.id
        assert spec.id in {r.id for r in memory.for_user(**crew.ids(member)).list_resources()}
    for stranger in ("guest", "outsider"):
        with pytest.raises(MemoryNotFoundError):
            memory.for_user(**crew.ids(stranger)).get_resource(spec.id)
        assert memory.for_user(**crew.ids(stranger)).list_resources() == []
        with pytest.raises(PermissionDeniedError, match="you are not a member"):
            memory.for_user(**crew.ids(stranger)).add_resource("A stranger's notes", kind="project_resource", scope="project")


# --- tools and extraction ---------------------------------------------------------------------


def run_tools(memory: Any, calls: list[dict[str, Any]], config: dict[str, Any], *,
              use_async: bool = False) -> list[ToolMessage]:
    """One agent turn in which the model makes ``calls``; returns the tool messages."""
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=calls), "done"])
    agent = create_agent(model, [], middleware=[MemoryMiddleware(memory)])
    inputs = {"messages": [("user", "please do the memory things")]}
    result = asyncio.run(agent.ainvoke(inputs, config)) if use_async else agent.invoke(inputs, config)
    by_id = {m.tool_call_id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    return [by_id[c["id"]] for c in calls]


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_viewer_saving_to_the_project_through_the_tools_is_not_allowed(memory, crew, use_async) -> None:
    config = {"configurable": {"user_id": crew.viewer, "project_id": crew.project, "thread_id": fresh("t")}}
    [refused, saved] = run_tools(memory, [
        tool_call("memory_save", content="The project deploys on Fridays", scope="project", memory_type="fact"),
        tool_call("memory_save", content="Prefers deploys on Fridays", memory_type="preference"),
    ], config, use_async=use_async)
    assert refused.status == "error" and refused.text.startswith("Not allowed")
    assert "needs the role owner, admin or editor; you are a viewer" in refused.text
    assert saved.status == "success"  # their own user memory is theirs to write
    assert project_ids(memory, crew, "owner") == set()


def _tool_scopes(memory: Any) -> str:
    [save] = [t for t in memory_tools(memory) if t.name == "memory_save"]
    return str(save.tool_call_schema.model_json_schema()["properties"]["scope"])


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_member_saving_to_a_leads_only_team_through_the_tools_is_not_allowed(memory, use_async) -> None:
    if "team" not in _tool_scopes(memory):
        pytest.skip("memory_save has no team scope yet")
    team, lead, member = fresh("team"), fresh("lead"), fresh("member")
    memory.create_team(team, user_id=lead, write="leads")
    memory.add_member("team", team, member, "member", user_id=lead)
    config = {"configurable": {"user_id": member, "team_id": team, "thread_id": fresh("t")}}
    [refused] = run_tools(memory, [tool_call("memory_save", content="The team ships on Mondays", scope="team")],
                          config, use_async=use_async)
    assert refused.status == "error" and refused.text.startswith("Not allowed")
    assert "needs the role lead" in refused.text and "you are a member" in refused.text
    assert memory.for_user(lead, team_id=team).list() == []


async def test_extraction_keeps_what_the_role_may_not_write_as_the_users_own_flagged(svc, memory, crew) -> None:
    said = ["I prefer short answers. We use PostgreSQL for everything."]
    report = await call(svc.for_user(session_id=fresh("s"), **crew.ids("viewer")), "extract", said, llm=None)
    assert report.status == "done" and report.rejected == []
    [flagged] = report.kept_as_user
    assert flagged.said_of is Scope.PROJECT and "PostgreSQL" in flagged.memory.content
    assert flagged.memory.scope is Scope.USER and flagged.memory.metadata["said_of"] == "project"
    assert "needs the role owner, admin or editor; you are a viewer" in flagged.reason
    assert {o.memory.scope for o in report.added} == {Scope.USER}  # both the viewer's own
    assert project_ids(memory, crew, "owner") == set()
    # not the viewer's background: the user profile leaves it out
    profile = memory.for_user(crew.viewer).profile("user")
    assert "PostgreSQL" not in str(profile.fields) and "short" in str(profile.fields)
    # an editor saying the same thing stores it for the project
    report = await call(svc.for_user(session_id=fresh("s"), **crew.ids("editor")), "extract", said, llm=None)
    assert {(o.memory.scope, o.memory.scope_id) for o in report.added} == {
        (Scope.USER, crew.editor), (Scope.PROJECT, crew.project)}
