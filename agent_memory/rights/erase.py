"""Erasure: forgetting a user, and deleting a project, team or org with everything in it.

- :func:`forget_user` hard-deletes everything a user owns, episodic memory included, in one
  transaction; shared memories others wrote stay. Where others' rows name the user (an edit
  in a history, a creator, a source) the name is replaced, not the row deleted.
- :func:`delete_scope` deletes a project, team or org with everything in it.

SQL comes from the constants and pure functions below; every op validates its input before
its first query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import access
from ..db.requests import Op, Sql
from ..episodic.forget import forget_user_threads
from ..models import Identity, Scope
from ..validation import check_identity, check_scope_name
from .format import FORGOTTEN_USER, DeleteReport, ForgetReport

__all__ = ["DELETE_KEYS", "delete_scope", "forget_user"]

# --- forgetting a user ------------------------------------------------------------------------

#: the role a scope cannot be left without (as :mod:`agent_memory.access` keeps it)
_FOUNDER_ROLE = "CASE {kind} WHEN 'project' THEN 'owner' WHEN 'team' THEN 'lead' ELSE 'admin' END"

#: rows of others that name the user: the name goes, the row stays (``%(u)s`` the user)
_DETACH_OTHERS = (
    ("history.changed_by", ("UPDATE memory_item_history h SET changed_by = %(gone)s FROM memory_items m"
                            " WHERE m.id = h.memory_id AND m.user_id <> %(u)s AND h.changed_by = %(u)s")),
    ("memories.superseded_by", ("UPDATE memory_items SET superseded_by = NULL WHERE user_id <> %(u)s"
                                " AND superseded_by IN (SELECT id FROM memory_items WHERE user_id = %(u)s)")),
    ("memories.source_id", ("UPDATE memory_items SET source_id = NULL WHERE user_id <> %(u)s"
                            " AND source_id IN (SELECT id::text FROM memory_resources WHERE user_id = %(u)s)")),
)
#: what the user owns, deleted in this order (history before its items, decisions before runs)
_REMOVE_OWN = (
    ("history", ("DELETE FROM memory_item_history WHERE memory_id IN"
                 " (SELECT id FROM memory_items WHERE user_id = %(u)s)")),
    ("memories", "DELETE FROM memory_items WHERE user_id = %(u)s"),
    ("decisions", "DELETE FROM memory_decisions WHERE user_id = %(u)s"),
    ("extraction_runs", "DELETE FROM memory_extraction_runs WHERE user_id = %(u)s"),
    ("resources", "DELETE FROM memory_resources WHERE user_id = %(u)s"),
    ("profiles", "DELETE FROM memory_profiles WHERE kind = 'user' AND subject_id = %(u)s"),
    ("shares", "DELETE FROM memory_project_shares WHERE grantee_kind = 'user' AND grantee_id = %(u)s"),
)
#: the user's name in rows that stay: scopes they created, members they added, shares they made
_DETACH_SCOPES = (
    ("scopes.created_by", "UPDATE memory_scopes SET created_by = %(gone)s WHERE created_by = %(u)s"),
    ("members.added_by", "UPDATE memory_members SET added_by = %(gone)s WHERE added_by = %(u)s"),
    ("shares.shared_by", "UPDATE memory_project_shares SET shared_by = %(gone)s WHERE shared_by = %(u)s"),
    ("profiles.edited_by", "UPDATE memory_profiles SET edited_by = %(gone)s WHERE edited_by = %(u)s"),
)


def _lock_memberships(user_id: str) -> Sql:
    """Hold the scopes the user belongs to (as a change of members does), answering the user's
    role in each."""
    return Sql(
        "SELECT s.kind, s.scope_id, mm.role = " + _FOUNDER_ROLE.format(kind="s.kind") + " AS founder"
        " FROM memory_scopes s JOIN memory_members mm ON mm.kind = s.kind AND mm.scope_id = s.scope_id"
        " WHERE mm.user_id = %(u)s ORDER BY s.kind, s.scope_id FOR UPDATE OF s",
        {"u": user_id},
    )


def _left_behind(scopes: Sequence[tuple[str, str]]) -> Sql:
    """For each scope, once the user is out: does anyone remain, does an owner/lead/admin, and
    does it hold anything (memories, resources)?"""
    return Sql(
        "SELECT s.kind, s.scope_id,"
        " EXISTS (SELECT 1 FROM memory_members o WHERE o.kind = s.kind AND o.scope_id = s.scope_id) AS members,"
        " EXISTS (SELECT 1 FROM memory_members o WHERE o.kind = s.kind AND o.scope_id = s.scope_id"
        " AND o.role = " + _FOUNDER_ROLE.format(kind="s.kind") + ") AS founder,"
        " EXISTS (SELECT 1 FROM memory_items i WHERE i.scope = s.kind AND i.scope_id = s.scope_id)"
        " OR EXISTS (SELECT 1 FROM memory_resources r WHERE r.scope = s.kind AND r.scope_id = s.scope_id) AS data"
        " FROM memory_scopes s JOIN unnest(%(kinds)s::text[], %(ids)s::text[]) AS g(kind, scope_id)"
        " ON g.kind = s.kind AND g.scope_id = s.scope_id ORDER BY s.kind, s.scope_id",
        {"kinds": [k for k, _ in scopes], "ids": [i for _, i in scopes]},
    )


def forget_user(user_id: Any) -> Op[ForgetReport]:
    """Hard-delete everything ``user_id`` owns, in one transaction: their memories in every
    scope (with their history), resources, user profile, extraction runs and decisions,
    memberships, the shares granted to them, and their episodic memory (threads, checkpoints,
    archives, snapshots; see :func:`~agent_memory.episodic.forget.forget_user_threads`).

    Others' memories stay. Where others' rows name the user (history of an edit they made to
    someone's memory, a memory citing their resource, a scope they created or a member they
    added), the name is replaced by ``"[forgotten user]"`` or the link cleared (``changed``).
    A scope they were the only member of that holds nothing of anyone else goes too; one left
    without an owner / lead / admin is reported ``ownerless``. Idempotent: again, all zeros.
    """
    user = check_identity(user_id).user_id
    params = {"u": user, "gone": FORGOTTEN_USER}
    held = yield _lock_memberships(user)
    changed: dict[str, int] = {}
    for key, query in _DETACH_OTHERS:
        changed[key] = yield Sql(query, params, fetch="rowcount")
    removed: dict[str, int] = {}
    for key, query in _REMOVE_OWN:
        removed[key] = yield Sql(query, params, fetch="rowcount")
    removed["members"] = yield Sql("DELETE FROM memory_members WHERE user_id = %(u)s", params, fetch="rowcount")

    founded = {(r["kind"], r["scope_id"]) for r in held if r["founder"]}
    ownerless: list[tuple[str, str]] = []
    removed["scopes"] = 0
    left = (yield _left_behind([(r["kind"], r["scope_id"]) for r in held])) if held else []
    for row in left:
        if not row["members"] and not row["data"]:  # theirs alone, and empty now: it goes with them
            gone = yield from _delete_scope_rows(Scope(row["kind"]), row["scope_id"])
            for key in ("profiles", "shares", "scopes", "decisions"):
                removed[key] += gone[key]
        elif not row["founder"] and (row["kind"], row["scope_id"]) in founded:
            ownerless.append((row["kind"], row["scope_id"]))
    for key, query in _DETACH_SCOPES:
        changed[key] = yield Sql(query, params, fetch="rowcount")
    removed.update((yield from forget_user_threads(user)))
    return ForgetReport(user, removed, ownerless, changed)


# --- deleting a project, team or org ----------------------------------------------------------

#: rows outside the scope that point into it: the link is cleared (``%(k)s``/``%(s)s`` the scope)
_DETACH_FROM_SCOPE = (
    ("memories.superseded_by", ("UPDATE memory_items SET superseded_by = NULL WHERE NOT (scope = %(k)s AND"
                                " scope_id = %(s)s) AND superseded_by IN (SELECT id FROM memory_items"
                                " WHERE scope = %(k)s AND scope_id = %(s)s)")),
    ("memories.source_id", ("UPDATE memory_items SET source_id = NULL WHERE NOT (scope = %(k)s AND scope_id = %(s)s)"
                            " AND source_id IN (SELECT id::text FROM memory_resources"
                            " WHERE scope = %(k)s AND scope_id = %(s)s)")),
)
#: everything in the scope, in this order; the scope row last (its members and shares first,
#: so they are counted rather than cascaded)
_REMOVE_SCOPE = (
    ("history", ("DELETE FROM memory_item_history WHERE memory_id IN"
                 " (SELECT id FROM memory_items WHERE scope = %(k)s AND scope_id = %(s)s)")),
    ("memories", "DELETE FROM memory_items WHERE scope = %(k)s AND scope_id = %(s)s"),
    ("resources", "DELETE FROM memory_resources WHERE scope = %(k)s AND scope_id = %(s)s"),
    ("profiles", "DELETE FROM memory_profiles WHERE kind = %(k)s AND subject_id = %(s)s"),
    ("decisions", "DELETE FROM memory_decisions WHERE scope = %(k)s AND scope_id = %(s)s"),
    ("shares", ("DELETE FROM memory_project_shares WHERE (%(k)s = 'project' AND project_id = %(s)s)"
                " OR (grantee_kind = %(k)s AND grantee_id = %(s)s)")),
    ("members", "DELETE FROM memory_members WHERE kind = %(k)s AND scope_id = %(s)s"),
    ("scopes", "DELETE FROM memory_scopes WHERE kind = %(k)s AND scope_id = %(s)s"),
)
DELETE_KEYS = tuple(key for key, _ in _REMOVE_SCOPE)


def _delete_scope_rows(scope: Scope, scope_id: str) -> Op[dict[str, int]]:
    params = {"k": scope.value, "s": scope_id}
    removed: dict[str, int] = {}
    for key, query in _REMOVE_SCOPE:
        removed[key] = yield Sql(query, params, fetch="rowcount")
    return removed


def delete_scope(identity: Identity, scope: Any, scope_id: Any) -> Op[DeleteReport]:
    """Delete a project (its owner), team (a lead) or org (an admin) with everything in it:
    its memories and their history, its resources, its project profile, its consolidation
    decisions, its members and shares, and the shares that name it as grantee. Ids match
    whole: deleting ``acme`` leaves ``acme/web`` and ``acme-corp``. A scope that does not
    exist answers zeros (deleting twice is fine). Memories outside it that pointed into it
    (``superseded_by``, ``source_id``) lose the link."""
    scope = access.check_shared_scope(scope)
    scope_id = check_scope_name(f"{scope.value}_id", scope_id)
    standing = yield from access.scope_access(identity.user_id, scope, scope_id, lock="update")
    if not standing.exists:
        return DeleteReport(scope.value, scope_id, dict.fromkeys(DELETE_KEYS, 0),
                            dict.fromkeys((k for k, _ in _DETACH_FROM_SCOPE), 0))
    yield from access.require(identity, scope, scope_id, access.Action.DELETE_SCOPE, "deleting everything")
    params = {"k": scope.value, "s": scope_id}
    changed: dict[str, int] = {}
    for key, query in _DETACH_FROM_SCOPE:
        changed[key] = yield Sql(query, params, fetch="rowcount")
    removed = yield from _delete_scope_rows(scope, scope_id)
    return DeleteReport(scope.value, scope_id, removed, changed)
