"""Resources (``memory_resources``): documents, project resources and session conversations.

Reads are scoped like memory items, by :func:`resource_filter`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg import sql

from ..models import Identity
from .types import Query, Statement
from .visibility import member_of

__all__ = [
    "RESOURCE_COLUMNS",
    "append_transcript",
    "insert_conversation",
    "resource_filter",
    "select_conversation",
    "select_resource_by_id",
    "select_resources",
    "upsert_resource",
]

#: columns read back into a Resource
RESOURCE_COLUMNS = ("id", "kind", "user_id", "scope", "scope_id", "project_id", "session_id", "external_id",
                    "title", "content", "metadata", "cursor", "created_at", "updated_at")
_COLS = sql.SQL(", ").join(sql.SQL("r.") + sql.Identifier(c) for c in RESOURCE_COLUMNS)
_RETURNING = sql.SQL(", ").join(sql.Identifier(c) for c in RESOURCE_COLUMNS)
#: what :func:`upsert_resource` writes
_WRITTEN = ("id", "kind", "user_id", "scope", "scope_id", "project_id", "session_id", "external_id", "title",
            "content", "metadata")


def resource_filter(identity: Identity) -> Query:
    """``r`` rows the caller may read: their own user resources and conversations (of any of
    their sessions: "where did this come from?" must answer from a later session too), and
    their project's resources if they are a member of it."""
    parts = [sql.SQL("(r.scope IN ('user', 'session') AND r.user_id = %(rv_user)s)")]
    params: dict[str, Any] = {"rv_user": identity.user_id}
    if identity.project_id is not None:  # project resources: its members (any role)
        parts.append(sql.SQL(
            "(r.scope = 'project' AND r.scope_id = %(rv_project)s AND "
            + member_of("'project'", "%(rv_project)s", "%(rv_user)s") + ")"
        ))
        params["rv_project"] = identity.project_id
    return sql.SQL("(") + sql.SQL(" OR ").join(parts) + sql.SQL(")"), params


def upsert_resource(row: Mapping[str, Any]) -> Query:
    """Insert ``row`` (keyed by the written columns), answering it as stored. With an
    ``external_id``, a row of the same owner, kind, scope and id is updated instead: new
    content, the title if one is given, metadata merged."""
    conflict = sql.SQL(
        " ON CONFLICT (user_id, kind, scope, scope_id, external_id) WHERE external_id IS NOT NULL"
        " DO UPDATE SET title = coalesce(EXCLUDED.title, memory_resources.title), content = EXCLUDED.content,"
        " metadata = memory_resources.metadata || EXCLUDED.metadata, updated_at = "
        # a row that names no time gets the default, now(), as EXCLUDED's (Citus runs no stable function there)
        + ("now()" if "updated_at" in row else "EXCLUDED.updated_at")
    ) if row["external_id"] is not None else sql.SQL("")
    query = sql.SQL("INSERT INTO memory_resources ({cols}) VALUES ({vals}){conflict} RETURNING {ret}").format(
        cols=sql.SQL(", ").join(sql.Identifier(c) for c in _WRITTEN),
        vals=sql.SQL(", ").join(sql.Placeholder(c) for c in _WRITTEN), conflict=conflict, ret=_RETURNING,
    )
    return query, {c: row[c] for c in _WRITTEN}


def select_conversation(identity: Identity) -> Statement:
    """The conversation of the caller's session, if it exists."""
    return (
        sql.SQL("SELECT {cols} FROM memory_resources r WHERE r.user_id = %s AND r.kind = 'conversation'"
                " AND r.scope = 'session' AND r.scope_id = %s AND r.external_id = %s").format(cols=_COLS),
        (identity.user_id, identity.session_id, identity.session_id),
    )


def insert_conversation(resource_id: Any, identity: Identity) -> Statement:
    """Create the conversation of the caller's session, unless another statement just did."""
    return (
        "INSERT INTO memory_resources (id, kind, user_id, scope, scope_id, session_id, project_id, external_id,"
        " title) VALUES (%s, 'conversation', %s, 'session', %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (resource_id, identity.user_id, identity.session_id, identity.session_id, identity.project_id,
         identity.session_id, f"session {identity.session_id}"),
    )


def append_transcript(resource_id: Any, transcript: str, cursor: str | None, max_chars: int) -> Statement:
    """Add ``transcript`` to the conversation (keeping its newest ``max_chars``) and move its
    cursor to ``cursor`` (None keeps it)."""
    return (
        "UPDATE memory_resources SET content = right(CASE WHEN content = '' THEN %(t)s"
        " ELSE content || E'\\n' || %(t)s END, %(max)s), cursor = coalesce(%(cursor)s, cursor), updated_at = now()"
        " WHERE id = %(id)s",
        {"t": transcript, "cursor": cursor, "id": resource_id, "max": max_chars},
    )


def select_resource_by_id(identity: Identity, resource_id: Any) -> Query:
    """The resource ``resource_id``, if the caller may read it."""
    filt, params = resource_filter(identity)
    return (
        sql.SQL("SELECT {cols} FROM memory_resources r WHERE r.id = %(r_id)s AND {filt}").format(cols=_COLS, filt=filt),
        dict(params, r_id=resource_id),
    )


def select_resources(identity: Identity, *, kind: str | None, limit: int, offset: int) -> Query:
    """The resources the caller may read (of one kind, or all), most recently updated first."""
    filt, params = resource_filter(identity)
    if kind is not None:
        filt = filt + sql.SQL(" AND r.kind = %(r_kind)s")
        params["r_kind"] = kind
    return (
        sql.SQL("SELECT {cols} FROM memory_resources r WHERE {filt} ORDER BY r.updated_at DESC, r.id"
                " LIMIT %(r_limit)s OFFSET %(r_offset)s").format(cols=_COLS, filt=filt),
        dict(params, r_limit=limit, r_offset=offset),
    )
