"""Who may do what with shared memory: projects, teams and orgs, their members and roles.

The permission matrix is :data:`MATRIX` and :func:`allowed_roles`: pure data, which the
table of ``docs/reference/permissions.md`` is checked against. Reads are enforced in SQL (``queries.visible_filter``
asks the membership tables in the same statement, so a read can never skip them); writes,
edits and membership changes call :func:`require` inside the transaction that does them,
with the scope's row locked, so a role changed at the same moment cannot slip between the
check and the write.

Everything here answers for the user in the caller's :class:`~agent_memory.models.Identity`;
refusals are :class:`~agent_memory.errors.PermissionDeniedError` naming the role needed.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from . import queries
from .config import TEAM_WRITE_POLICIES, MemoryConfig
from .db.requests import Op, Sql
from .errors import InvalidInputError, PermissionDeniedError
from .models import ROLES, SHARED_SCOPES, Identity, Membership, MemoryItem, Role, Scope
from .queries.rows import row_to_membership
from .validation import check_enum, check_id, check_scope_name, segment_prefix_pattern, shown

__all__ = [
    "MATRIX",
    "Action",
    "ScopeAccess",
    "add_member",
    "allowed_roles",
    "check_shared_scope",
    "create_scope",
    "list_members",
    "memberships",
    "remove_member",
    "require",
    "require_edit",
    "require_write",
    "scope_access",
    "set_team_write",
    "share_project",
    "unshare_project",
]


class Action(str, enum.Enum):
    """What a member does in a project, team or org."""

    READ = "read"                   # read the scope's memories (as their visibility allows)
    CREATE = "create"               # write new memories into the scope
    EDIT_OWN = "edit_own"           # edit, delete or restore memories they created
    EDIT_ANY = "edit_any"           # edit, delete or restore anyone's memories they can read
    MANAGE_MEMBERS = "manage_members"
    EDIT_PROFILE = "edit_profile"   # hand-edit the project profile
    SHARE = "share"                 # share the project's public memories with users, teams, orgs
    DELETE_SCOPE = "delete_scope"   # delete the project, team or org and everything in it

    def __str__(self) -> str:
        return self.value


_P, _T, _O = Scope.PROJECT, Scope.TEAM, Scope.ORG
_WRITERS = frozenset({Role.OWNER, Role.ADMIN, Role.EDITOR})
_PROJECT_ADMINS = frozenset({Role.OWNER, Role.ADMIN})

#: roles allowed each action, per scope. Team CREATE/EDIT_OWN follow the team's write policy
#: (``"members"``: leads and members; ``"leads"``: leads only), see :func:`allowed_roles`.
MATRIX: Mapping[Scope, Mapping[Action, frozenset[Role]]] = {
    _P: {
        Action.READ: frozenset(ROLES[_P]),
        Action.CREATE: _WRITERS,
        Action.EDIT_OWN: _WRITERS,
        Action.EDIT_ANY: _PROJECT_ADMINS,
        Action.MANAGE_MEMBERS: _PROJECT_ADMINS,
        Action.EDIT_PROFILE: _PROJECT_ADMINS,
        Action.SHARE: _PROJECT_ADMINS,
        Action.DELETE_SCOPE: frozenset({Role.OWNER}),
    },
    _T: {
        Action.READ: frozenset({Role.LEAD, Role.MEMBER}),
        Action.CREATE: frozenset({Role.LEAD, Role.MEMBER}),
        Action.EDIT_OWN: frozenset({Role.LEAD, Role.MEMBER}),
        Action.EDIT_ANY: frozenset({Role.LEAD}),
        Action.MANAGE_MEMBERS: frozenset({Role.LEAD}),
        Action.DELETE_SCOPE: frozenset({Role.LEAD}),
    },
    _O: {
        Action.READ: frozenset({Role.ADMIN, Role.MEMBER}),
        Action.CREATE: frozenset({Role.ADMIN}),
        Action.EDIT_OWN: frozenset({Role.ADMIN}),
        Action.EDIT_ANY: frozenset({Role.ADMIN}),
        Action.MANAGE_MEMBERS: frozenset({Role.ADMIN}),
        Action.DELETE_SCOPE: frozenset({Role.ADMIN}),
    },
}

#: the role a scope's creator gets, and the role that must never run out
_FOUNDER = {_P: Role.OWNER, _T: Role.LEAD, _O: Role.ADMIN}


def allowed_roles(scope: Scope, action: Action, *, team_write: str = "members") -> frozenset[Role]:
    """The roles that may do ``action`` in a ``scope`` (project, team or org)."""
    roles = MATRIX[scope].get(action, frozenset())
    if scope is _T and action in (Action.CREATE, Action.EDIT_OWN) and team_write == "leads":
        return frozenset({Role.LEAD})
    return roles


def _may_manage(scope: Scope, actor: Role | None, role: Role | None) -> bool:
    """Whether ``actor`` may grant or take away ``role``: project admins manage editors and
    viewers, only owners manage owners and admins; team leads and org admins manage everyone."""
    if actor not in allowed_roles(scope, Action.MANAGE_MEMBERS):
        return False
    return not (scope is _P and actor is Role.ADMIN and role in _PROJECT_ADMINS)


def _a(role: Role | None) -> str:
    if role is None:
        return "not a member"
    return ("an " if role.value[0] in "aeiou" else "a ") + role.value


def _names(roles: frozenset[Role], scope: Scope) -> str:
    ordered = [r.value for r in ROLES[scope] if r in roles]
    return ordered[0] if len(ordered) == 1 else ", ".join(ordered[:-1]) + " or " + ordered[-1]


@dataclass(frozen=True, slots=True)
class ScopeAccess:
    """A user's standing in one project, team or org."""

    scope: Scope
    scope_id: str
    exists: bool
    role: Role | None
    team_write: str = "members"

    def may(self, action: Action) -> bool:
        return self.role in allowed_roles(self.scope, action, team_write=self.team_write)

    def needed(self, action: Action) -> str:
        return _names(allowed_roles(self.scope, action, team_write=self.team_write), self.scope)


def check_shared_scope(value: Any, field: str = "scope") -> Scope:
    scope = check_enum(field, value, Scope)
    if scope not in SHARED_SCOPES:
        raise InvalidInputError(field, f"must be project, team or org (the scopes with members), got {scope.value!r}")
    return scope


Lock = Literal["share", "update"] | None


def scope_access(user_id: str, scope: Scope, scope_id: str, *, lock: Lock = None) -> Op[ScopeAccess]:
    """The user's role in one project/team/org. ``lock`` holds the scope's row until commit:
    writes that depend on a role take it ``"share"``, changes of membership ``"update"``, so a
    role cannot change between the check and the write."""
    row = yield Sql(*queries.select_scope_access(user_id, scope.value, scope_id, lock=lock), fetch="one")
    if row is None:
        return ScopeAccess(scope, scope_id, exists=False, role=None)
    return ScopeAccess(scope, scope_id, exists=True, role=None if row["role"] is None else Role(row["role"]),
                       team_write=(row["settings"] or {}).get("write", "members"))


def _missing(scope: Scope, scope_id: str) -> PermissionDeniedError:
    how = "create_project" if scope is _P else f"create_{scope.value}"
    return PermissionDeniedError(f"{scope.value} {scope_id!r} does not exist; create it first with "
                                 f"{how}({scope_id!r}, user_id=...)")


def refusal(access: ScopeAccess, action: Action, what: str) -> PermissionDeniedError:
    """The error for a refused action: the role needed, the caller's role, what to do."""
    where = f"{access.scope.value} {access.scope_id!r}"
    you = f"you are {_a(access.role)}"
    ask = {_P: "a project owner or admin", _T: "a team lead", _O: "an org admin"}[access.scope]
    policy = " (this team lets only its leads write)" if access.scope is _T and access.team_write == "leads" \
        and action in (Action.CREATE, Action.EDIT_OWN) else ""
    return PermissionDeniedError(
        f"{what} in {where} needs the role {access.needed(action)}{policy}; {you}. Ask {ask} to change your role"
    )


def require(identity: Identity, scope: Scope, scope_id: str, action: Action, what: str,
            *, lock: Lock = "update") -> Op[ScopeAccess]:
    """The caller's access if it allows ``action``, else :class:`PermissionDeniedError`."""
    access = yield from scope_access(identity.user_id, scope, scope_id, lock=lock)
    if not access.exists:
        raise _missing(scope, scope_id)
    if not access.may(action):
        raise refusal(access, action, what)
    return access


def _create(scope: Scope, scope_id: str, user_id: str, settings: Mapping[str, Any]) -> Op[bool]:
    """Create the scope with ``user_id`` as its founder; False if it already existed."""
    row = yield Sql(*queries.create_scope(scope.value, scope_id, user_id, settings, _FOUNDER[scope].value),
                    fetch="one")
    return row is not None


def require_write(config: MemoryConfig, identity: Identity, scope: Scope, what: str = "saving a memory") -> Op[None]:
    """Refuse a write into ``scope`` the caller's role does not allow. User and session memory
    is always the caller's own. A project nobody has created yet is created now, with the caller
    as its owner (unless ``auto_create_projects`` is off)."""
    if scope not in SHARED_SCOPES:
        return
    scope_id = identity.scope_id(scope)
    assert scope_id is not None  # checked by the caller (validation.check_scope_id)
    access = yield from scope_access(identity.user_id, scope, scope_id, lock="share")
    if not access.exists and scope is _P and config.auto_create_projects:
        yield from _create(scope, scope_id, identity.user_id, {})
        access = yield from scope_access(identity.user_id, scope, scope_id, lock="share")
    if not access.exists:
        raise _missing(scope, scope_id)
    if not access.may(Action.CREATE):
        raise refusal(access, Action.CREATE, what)


def may_edit(user_id: str, item: MemoryItem) -> Op[tuple[bool, ScopeAccess | None]]:
    """Whether ``user_id`` may edit/delete/restore ``item`` (one they can read)."""
    if item.scope not in SHARED_SCOPES:
        return item.user_id == user_id, None
    access = yield from scope_access(user_id, item.scope, item.scope_id, lock="share")
    if access.may(Action.EDIT_ANY) or (item.user_id == user_id and access.may(Action.EDIT_OWN)):
        return True, access
    return False, access


def require_edit(identity: Identity, item: MemoryItem, verb: str) -> Op[None]:
    """Refuse to edit/delete/restore ``item`` unless the caller's role allows it."""
    allowed, access = yield from may_edit(identity.user_id, item)
    if allowed:
        return
    if access is None:
        raise PermissionDeniedError(f"memory {item.id} belongs to another user; only its creator may {verb} it")
    action = Action.EDIT_OWN if item.user_id == identity.user_id else Action.EDIT_ANY
    mine = "your memory" if item.user_id == identity.user_id else "another member's memory"
    raise refusal(access, action, f"to {verb} {mine} {item.id}")


# --- managing projects, teams and orgs -------------------------------------------------------


def create_scope(config: MemoryConfig, identity: Identity, scope: Scope, scope_id: Any,
                 team_write: Any = None) -> Op[Membership]:
    """Create a project, team or org with the caller as its owner / lead / admin. Creating one
    that exists is fine for its founder role (idempotent) and refused for anyone else."""
    scope = check_shared_scope(scope)
    scope_id = check_scope_name(f"{scope.value}_id", scope_id)
    settings: dict[str, Any] = {}
    if scope is _T:
        policy = config.team_write if team_write is None else team_write
        if policy not in TEAM_WRITE_POLICIES:
            raise InvalidInputError("write", f"must be one of {', '.join(TEAM_WRITE_POLICIES)}, got {shown(policy)}")
        settings["write"] = policy
    elif team_write is not None:
        raise InvalidInputError("write", "only a team has a write policy")
    yield from _create(scope, scope_id, identity.user_id, settings)
    access = yield from scope_access(identity.user_id, scope, scope_id)
    if access.role is not _FOUNDER[scope]:
        raise PermissionDeniedError(f"{scope.value} {scope_id!r} already exists and you are not its "
                                    f"{_FOUNDER[scope].value}; ask one of its members to add you")
    members = yield from _members(scope, scope_id, identity.user_id)
    return members[0]


def _members(scope: Scope, scope_id: str, user_id: str | None = None) -> Op[list[Membership]]:
    rows = yield Sql(*queries.select_members(scope.value, scope_id, user_id))
    return [row_to_membership(r) for r in rows]


def _target(scope: Any, scope_id: Any) -> tuple[Scope, str]:
    scope = check_shared_scope(scope)
    return scope, check_scope_name(f"{scope.value}_id", scope_id)


def _role(scope: Scope, role: Any) -> Role:
    role = check_enum("role", role, Role)
    if role not in ROLES[scope]:
        raise InvalidInputError("role", f"a {scope.value} role is one of {', '.join(r.value for r in ROLES[scope])}, "
                                        f"got {role.value!r}")
    return role


def _keeps_founder(scope: Scope, scope_id: str, member: str, current: Role | None, new: Role | None) -> Op[None]:
    """Refuse to take away the last owner (project), lead (team) or admin (org)."""
    founder = _FOUNDER[scope]
    if current is not founder or new is founder:
        return
    row = yield Sql(*queries.count_role(scope.value, scope_id, founder.value), fetch="one")
    if int(row["n"]) <= 1:
        raise PermissionDeniedError(f"{member!r} is the last {founder.value} of {scope.value} {scope_id!r}; "
                                    f"make another member {founder.value} first, or delete the {scope.value}")


def add_member(identity: Identity, scope: Any, scope_id: Any, member: Any, role: Any) -> Op[Membership]:
    """Add ``member`` with ``role``, or change their role."""
    scope, scope_id = _target(scope, scope_id)
    member = check_id("member", member)
    role = _role(scope, role)
    access = yield from require(identity, scope, scope_id, Action.MANAGE_MEMBERS, "managing members")
    current = yield from scope_access(member, scope, scope_id)
    for r in (current.role, role):
        if r is not None and not _may_manage(scope, access.role, r):
            raise PermissionDeniedError(f"granting or changing the role {r.value} in {scope.value} {scope_id!r} "
                                        f"needs the role owner; you are {_a(access.role)}")
    yield from _keeps_founder(scope, scope_id, member, current.role, role)
    yield Sql(*queries.upsert_member(scope.value, scope_id, member, role.value, identity.user_id), fetch="none")
    return (yield from _members(scope, scope_id, member))[0]


def remove_member(identity: Identity, scope: Any, scope_id: Any, member: Any) -> Op[bool]:
    """Take ``member`` out (anyone may leave; managing others needs the role). The memories they
    wrote stay, owned by them; answers whether they were a member."""
    scope, scope_id = _target(scope, scope_id)
    member = check_id("member", member)
    if member == identity.user_id:
        access = yield from scope_access(identity.user_id, scope, scope_id, lock="update")
        if not access.exists:
            return False
    else:
        access = yield from require(identity, scope, scope_id, Action.MANAGE_MEMBERS, "removing a member")
    current = yield from scope_access(member, scope, scope_id)
    if current.role is None:
        return False
    if member != identity.user_id and not _may_manage(scope, access.role, current.role):
        raise PermissionDeniedError(f"removing {_a(current.role)} from {scope.value} {scope_id!r} needs the "
                                    f"role owner; you are {_a(access.role)}")
    yield from _keeps_founder(scope, scope_id, member, current.role, None)
    n = yield Sql(*queries.delete_member(scope.value, scope_id, member), fetch="rowcount")
    return bool(n)


def list_members(identity: Identity, scope: Any, scope_id: Any) -> Op[list[Membership]]:
    """The members of a project, team or org the caller belongs to."""
    scope, scope_id = _target(scope, scope_id)
    yield from require(identity, scope, scope_id, Action.READ, "listing members", lock=None)
    return (yield from _members(scope, scope_id))


def memberships(identity: Identity, scope: Any = None, prefix: Any = None) -> Op[list[Membership]]:
    """The caller's own memberships, of one kind or all; ``prefix`` keeps ids equal to it or
    below it by whole segments (``acme`` -> ``acme``, ``acme/web``; never ``acme-corp``)."""
    kind = None if scope is None else check_shared_scope(scope).value
    prefix = None if prefix is None else check_scope_name("prefix", prefix)
    pattern = None if prefix is None else segment_prefix_pattern(prefix)
    rows = yield Sql(*queries.select_memberships(identity.user_id, kind, prefix, pattern))
    return [row_to_membership(r) for r in rows]


def set_team_write(identity: Identity, team_id: Any, policy: Any) -> Op[str]:
    """Let all members (``"members"``) or only leads (``"leads"``) write the team's memory."""
    team_id = check_scope_name("team_id", team_id)
    if policy not in TEAM_WRITE_POLICIES:
        raise InvalidInputError("write", f"must be one of {', '.join(TEAM_WRITE_POLICIES)}, got {shown(policy)}")
    yield from require(identity, _T, team_id, Action.MANAGE_MEMBERS, "changing who may write")
    yield Sql(*queries.set_team_write(team_id, policy), fetch="none")
    return policy


def _grantee(with_user: Any, with_team: Any, with_org: Any) -> tuple[str, str]:
    given = [(k, v) for k, v in (("user", with_user), ("team", with_team), ("org", with_org)) if v is not None]
    if len(given) != 1:
        raise InvalidInputError("with_user", "pass exactly one of with_user=, with_team= or with_org=")
    kind, value = given[0]
    return kind, (check_id("with_user", value) if kind == "user" else check_scope_name(f"with_{kind}", value))


def share_project(identity: Identity, project_id: Any, *, with_user: Any = None, with_team: Any = None,
                  with_org: Any = None) -> Op[None]:
    """Let a user, or every member of a team or an org, read the project's public memories."""
    project_id = check_scope_name("project_id", project_id)
    kind, grantee = _grantee(with_user, with_team, with_org)
    yield from require(identity, _P, project_id, Action.SHARE, "sharing the project")
    yield Sql(*queries.insert_share(project_id, kind, grantee, identity.user_id), fetch="none")


def unshare_project(identity: Identity, project_id: Any, *, with_user: Any = None, with_team: Any = None,
                    with_org: Any = None) -> Op[bool]:
    project_id = check_scope_name("project_id", project_id)
    kind, grantee = _grantee(with_user, with_team, with_org)
    yield from require(identity, _P, project_id, Action.SHARE, "unsharing the project")
    n = yield Sql(*queries.delete_share(project_id, kind, grantee), fetch="rowcount")
    return bool(n)

