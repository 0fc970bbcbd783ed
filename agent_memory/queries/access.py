"""Projects, teams and orgs: the scopes, their members and roles, and the shares of a project.

Reads of memory ask the membership tables through :mod:`.visibility`; these are the statements
that read and change them (see :mod:`agent_memory.access` for who may run which).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from psycopg.types.json import Jsonb

from .types import Statement

__all__ = [
    "count_role",
    "create_scope",
    "delete_member",
    "delete_share",
    "insert_share",
    "select_members",
    "select_memberships",
    "select_scope_access",
    "set_team_write",
    "upsert_member",
]

_MEMBER_COLUMNS = "kind, scope_id, user_id, role, added_by, added_at"


def select_scope_access(user_id: str, kind: str, scope_id: str, *,
                        lock: Literal["share", "update"] | None = None) -> Statement:
    """The scope's settings and the user's role in it (NULL: not a member; no row: no such scope).
    ``lock`` holds the scope's row until the transaction ends."""
    return (
        "SELECT s.settings, m.role FROM memory_scopes s LEFT JOIN memory_members m"
        " ON m.kind = s.kind AND m.scope_id = s.scope_id AND m.user_id = %(u)s"
        " WHERE s.kind = %(k)s AND s.scope_id = %(s)s" + (f" FOR {lock.upper()} OF s" if lock else ""),
        {"u": user_id, "k": kind, "s": scope_id},
    )


def create_scope(kind: str, scope_id: str, user_id: str, settings: Mapping[str, Any], role: str) -> Statement:
    """Create the scope with ``user_id`` as its member in ``role``; a row (``created``) only if
    the scope did not exist."""
    return (
        "WITH created AS (INSERT INTO memory_scopes (kind, scope_id, created_by, settings)"
        " VALUES (%(k)s, %(s)s, %(u)s, %(settings)s) ON CONFLICT DO NOTHING RETURNING kind, scope_id)"
        " INSERT INTO memory_members (kind, scope_id, user_id, role, added_by)"
        " SELECT kind, scope_id, %(u)s, %(role)s, %(u)s FROM created RETURNING 1 AS created",
        {"k": kind, "s": scope_id, "u": user_id, "settings": Jsonb(dict(settings)), "role": role},
    )


def select_members(kind: str, scope_id: str, user_id: str | None = None) -> Statement:
    """The scope's members (only ``user_id``, when given), oldest first."""
    return (
        f"SELECT {_MEMBER_COLUMNS} FROM memory_members"
        " WHERE kind = %(k)s AND scope_id = %(s)s AND (%(u)s::text IS NULL OR user_id = %(u)s)"
        " ORDER BY added_at, user_id",
        {"k": kind, "s": scope_id, "u": user_id},
    )


def select_memberships(user_id: str, kind: str | None, prefix: str | None, pattern: str | None) -> Statement:
    """The user's memberships, of one kind or all; with ``prefix``, of the scope ``prefix`` and
    those whose id matches ``pattern`` (a ``LIKE`` pattern, escaped by the caller)."""
    return (
        f"SELECT {_MEMBER_COLUMNS} FROM memory_members"
        " WHERE user_id = %(u)s AND (%(k)s::text IS NULL OR kind = %(k)s)"
        " AND (%(p)s::text IS NULL OR scope_id = %(p)s OR scope_id LIKE %(pat)s)"
        " ORDER BY kind, scope_id",
        {"u": user_id, "k": kind, "p": prefix, "pat": pattern},
    )


def count_role(kind: str, scope_id: str, role: str) -> Statement:
    """How many members of the scope have ``role`` (as ``n``)."""
    return ("SELECT count(*) AS n FROM memory_members WHERE kind = %s AND scope_id = %s AND role = %s",
            (kind, scope_id, role))


def upsert_member(kind: str, scope_id: str, user_id: str, role: str, added_by: str) -> Statement:
    """Add a member, or change their role."""
    return (
        "INSERT INTO memory_members (kind, scope_id, user_id, role, added_by) VALUES (%s, %s, %s, %s, %s)"
        " ON CONFLICT (kind, scope_id, user_id) DO UPDATE SET role = EXCLUDED.role",
        (kind, scope_id, user_id, role, added_by),
    )


def delete_member(kind: str, scope_id: str, user_id: str) -> Statement:
    return ("DELETE FROM memory_members WHERE kind = %s AND scope_id = %s AND user_id = %s",
            (kind, scope_id, user_id))


def set_team_write(team_id: str, policy: str) -> Statement:
    """The team's write policy (``"members"`` or ``"leads"``)."""
    return ("UPDATE memory_scopes SET settings = settings || jsonb_build_object('write', %s::text)"
            " WHERE kind = 'team' AND scope_id = %s", (policy, team_id))


def insert_share(project_id: str, grantee_kind: str, grantee_id: str, shared_by: str) -> Statement:
    return ("INSERT INTO memory_project_shares (project_id, grantee_kind, grantee_id, shared_by)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING", (project_id, grantee_kind, grantee_id, shared_by))


def delete_share(project_id: str, grantee_kind: str, grantee_id: str) -> Statement:
    return ("DELETE FROM memory_project_shares WHERE project_id = %s AND grantee_kind = %s AND grantee_id = %s",
            (project_id, grantee_kind, grantee_id))
