"""Erasure: forgetting a user, and deleting a project, team or org with everything in it.

- :func:`forget_user` hard-deletes everything a user owns, episodic memory included, in one
  transaction; shared memories others wrote stay. Where others' rows name the user (an edit
  in a history, a creator, a source) the name is replaced, not the row deleted.
- :func:`delete_scope` deletes a project, team or org with everything in it.

Which tables hold a user's data is :data:`agent_memory.queries.USER_DATA_TABLES`; the SQL is
built by :mod:`agent_memory.queries.erase`. Every op validates its input before its first query.
"""

from __future__ import annotations

from typing import Any

from .. import access, queries
from ..db.requests import Op, Sql
from ..episodic.forget import forget_user_threads
from ..models import Identity, Scope
from ..validation import check_identity, check_scope_name
from .format import FORGOTTEN_USER, DeleteReport, ForgetReport

__all__ = ["DELETE_KEYS", "delete_scope", "forget_user"]

#: what :func:`delete_scope` reports removed, per table that holds rows of a scope
DELETE_KEYS = tuple(t.key for t in queries.user_tables(scoped=True))


# --- forgetting a user ------------------------------------------------------------------------


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
    held = yield Sql(*queries.lock_memberships(user))
    changed: dict[str, int] = {}
    for key, statement in queries.detach_others(user, FORGOTTEN_USER):
        changed[key] = yield Sql(*statement, fetch="rowcount")
    removed: dict[str, int] = {}
    for key, statement in queries.forget_deletes(user):
        removed[key] = yield Sql(*statement, fetch="rowcount")

    founded = {(r["kind"], r["scope_id"]) for r in held if r["founder"]}
    ownerless: list[tuple[str, str]] = []
    removed["scopes"] = 0
    left = (yield Sql(*queries.scopes_left_behind([(r["kind"], r["scope_id"]) for r in held]))) if held else []
    for row in left:
        if not row["members"] and not row["data"]:  # theirs alone, and empty now: it goes with them
            gone = yield from _delete_scope_rows(Scope(row["kind"]), row["scope_id"])
            for key in ("profiles", "shares", "scopes", "decisions"):
                removed[key] += gone[key]
        elif not row["founder"] and (row["kind"], row["scope_id"]) in founded:
            ownerless.append((row["kind"], row["scope_id"]))
    for key, statement in queries.rename_user(user, FORGOTTEN_USER):
        changed[key] = yield Sql(*statement, fetch="rowcount")
    removed.update((yield from forget_user_threads(user)))
    return ForgetReport(user, removed, ownerless, changed)


# --- deleting a project, team or org ----------------------------------------------------------


def _delete_scope_rows(scope: Scope, scope_id: str) -> Op[dict[str, int]]:
    removed: dict[str, int] = {}
    for key, statement in queries.scope_deletes(scope.value, scope_id):
        removed[key] = yield Sql(*statement, fetch="rowcount")
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
                            dict.fromkeys(queries.DETACH_FROM_SCOPE_KEYS, 0))
    yield from access.require(identity, scope, scope_id, access.Action.DELETE_SCOPE, "deleting everything")
    changed: dict[str, int] = {}
    for key, statement in queries.detach_from_scope(scope.value, scope_id):
        changed[key] = yield Sql(*statement, fetch="rowcount")
    removed = yield from _delete_scope_rows(scope, scope_id)
    return DeleteReport(scope.value, scope_id, removed, changed)
