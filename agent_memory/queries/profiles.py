"""Profiles (``memory_profiles``): what a build made (``fields``), what a person set (``manual``),
and whether a change since calls for a rebuild (``dirty``, set by a trigger on memory items)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from .items import item_columns
from .types import Statement
from .visibility import live, member_of

__all__ = [
    "claim_profile",
    "ensure_profile",
    "mark_profile_dirty",
    "profile_inputs",
    "reset_manual_fields",
    "select_agent_profiles",
    "select_profile",
    "set_manual_fields",
    "write_built_profile",
]

#: ``dirty`` as read: changed since the build, or one of the memories it was built from has expired
_DIRTY = "(dirty OR (stale_at IS NOT NULL AND stale_at <= now()))"
_COLUMNS = f"kind, subject_id, fields, manual, {_DIRTY} AS dirty, built_by, built_at, edited_at"


def select_profile(kind: str, subject_id: str, *, lock: bool = False) -> Statement:
    """One profile; with ``lock``, its row held until the transaction ends."""
    return (f"SELECT {_COLUMNS} FROM memory_profiles WHERE kind = %s AND subject_id = %s"
            + (" FOR UPDATE" if lock else ""), (kind, subject_id))


def select_agent_profiles(user_id: str, project_id: str | None) -> Statement:
    """One round trip for the agent: the user's profile, and the project's if the user is a
    member of it; every row (at least one, with NULLs) says whether they are (``member``)."""
    return (
        "SELECT pr.kind, pr.subject_id, pr.fields, pr.manual, (pr.dirty OR coalesce(pr.stale_at <= now(), false))"
        " AS dirty, pr.built_by, pr.built_at, pr.edited_at,"
        " a.member FROM (SELECT " + member_of("'project'", "%(p)s", "%(u)s") + " AS member) a"
        " LEFT JOIN memory_profiles pr ON (pr.kind = 'user' AND pr.subject_id = %(u)s)"
        " OR (pr.kind = 'project' AND pr.subject_id = %(p)s AND a.member)",
        {"u": user_id, "p": project_id},
    )


def profile_inputs(kind: str, subject_id: str, limit: int) -> Statement:
    """The active items a profile is built from, newest first: a user's user-scope items, or a
    project's items except those their creator marked ``owner_only``."""
    private = sql.SQL(" AND m.visibility <> 'owner_only'") if kind == "project" else sql.SQL("")
    return (
        sql.SQL("SELECT {cols} FROM memory_items m WHERE m.scope = %s AND m.scope_id = %s AND m.status = 'active'"
                " AND {live}{private} ORDER BY m.valid_from DESC, m.id LIMIT %s").format(
            cols=item_columns(), live=sql.SQL(live()), private=private),
        (kind, subject_id, limit),
    )


def ensure_profile(kind: str, subject_id: str) -> Statement:
    """The profile's row, made (stale) if there is none."""
    return "INSERT INTO memory_profiles (kind, subject_id) VALUES (%s, %s) ON CONFLICT DO NOTHING", (kind, subject_id)


def write_built_profile(kind: str, subject_id: str, fields: Mapping[str, Any], built_by: str, *,
                        clean: bool) -> Statement:
    """Store what a build made; ``clean`` also marks the profile fresh."""
    # stale from when the first memory it could have read expires (its inputs: :func:`profile_inputs`)
    return (
        "UPDATE memory_profiles SET fields = %s, built_by = %s, built_at = now(), updated_at = now(),"
        " stale_at = (SELECT min(m.expires_at) FROM memory_items m WHERE m.scope = %s AND m.scope_id = %s"
        " AND m.status = 'active' AND m.expires_at > now())"
        + (", dirty = false" if clean else "") + " WHERE kind = %s AND subject_id = %s",
        (Jsonb(dict(fields)), built_by, kind, subject_id, kind, subject_id),
    )


def claim_profile(kind: str, subject_id: str) -> Statement:
    """Take the profile for a build by the model: stale, or built by the rules meanwhile. Marks
    it fresh and answers its ``fields``; no row when there is nothing to do."""
    return ("UPDATE memory_profiles SET dirty = false WHERE kind = %s AND subject_id = %s"
            f" AND ({_DIRTY} OR built_by IS DISTINCT FROM 'llm') RETURNING fields", (kind, subject_id))


def mark_profile_dirty(kind: str, subject_id: str) -> Statement:
    return "UPDATE memory_profiles SET dirty = true WHERE kind = %s AND subject_id = %s", (kind, subject_id)


def set_manual_fields(kind: str, subject_id: str, values: Mapping[str, Any], edited_by: str) -> Statement:
    """Set hand-made values over the built ones."""
    return (
        "UPDATE memory_profiles SET manual = manual || %s, edited_by = %s, edited_at = now(), updated_at = now()"
        " WHERE kind = %s AND subject_id = %s", (Jsonb(dict(values)), edited_by, kind, subject_id),
    )


def reset_manual_fields(kind: str, subject_id: str, names: Sequence[str], edited_by: str) -> Statement:
    """Drop the hand-made values of the fields ``names``."""
    return (
        "UPDATE memory_profiles SET manual = manual - %s::text[], edited_by = %s, edited_at = now(),"
        " updated_at = now() WHERE kind = %s AND subject_id = %s", (list(names), edited_by, kind, subject_id),
    )
