"""Tenancy, as one pure builder: which rows the caller may read.

Every read of memory items filters rows by the caller's identity through
:func:`visible_filter` (or its per-level form :func:`visible_parts`) before anything
else, so no read path can forget tenancy. Values always travel as parameters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg import sql

from ..models import Identity, MemoryType, Scope, Status
from ..validation import segment_prefix_pattern
from .types import Query

__all__ = [
    "granted_to",
    "item_filter",
    "level_members",
    "live",
    "member_of",
    "scope_key",
    "shared_with",
    "version_visible",
    "visible_filter",
    "visible_parts",
]


def live(alias: str = "m") -> str:
    """SQL: the row has not expired. Every read of memory items (and of their keyword postings,
    which carry ``expires_at`` too) holds to it, so an expired memory is gone the moment it
    expires, before a sweep deletes it."""
    return f"({alias}.expires_at IS NULL OR {alias}.expires_at > now())"


def member_of(kind: str, scope_id: str, user: str, alias: str = "mm") -> str:
    """SQL: ``user`` is a member of the project/team/org ``(kind, scope_id)``. The arguments are
    SQL expressions (a column, a literal or a placeholder), so every read builds its membership
    test here, whether it names the scope by parameter or by column."""
    return (f"EXISTS (SELECT 1 FROM memory_members {alias} WHERE {alias}.kind = {kind}"
            f" AND {alias}.scope_id = {scope_id} AND {alias}.user_id = {user})")


def granted_to(user: str, share: str = "ps") -> str:
    """SQL: the project share row ``share`` is granted to ``user``, or to a team or org of theirs."""
    return (f"(({share}.grantee_kind = 'user' AND {share}.grantee_id = {user}) OR "
            + member_of(f"{share}.grantee_kind", f"{share}.grantee_id", user, "gm") + ")")


def shared_with(project_id: str, user: str) -> str:
    """SQL: the project ``project_id`` is shared with ``user`` (directly or through a team/org)."""
    return (f"EXISTS (SELECT 1 FROM memory_project_shares ps WHERE ps.project_id = {project_id}"
            f" AND {granted_to(user)})")


def scope_key(value: str) -> int:
    """The 64-bit key an id is indexed under: the first 8 bytes of its md5, as PostgreSQL's
    ``agent_memory_key`` (migration ``0010_search_at_scale``) computes it."""
    return int.from_bytes(hashlib.md5(value.encode("utf-8")).digest()[:8], "big", signed=True)


def level_members(scope: Scope, chosen: str | None, prefix: str, params: dict[str, Any], *,
                  subtree: bool = False) -> str:
    """``FROM memory_members mm WHERE ...``: the caller's (``%(<prefix>_user)s``) memberships of
    ``scope`` (a team or an org), only ``chosen`` when the identity names one (with ``subtree``,
    and the levels below it); adds the parameters it names, ``<prefix>_<scope>...``, to ``params``.
    The team/org half of the tenancy rule, for :func:`visible_parts` and the range planner."""
    narrow = ""
    if chosen is not None:
        params[f"{prefix}_{scope.value}"] = chosen
        narrow = f" AND mm.scope_id = %({prefix}_{scope.value})s"
        if subtree:
            params[f"{prefix}_{scope.value}_below"] = segment_prefix_pattern(chosen)
            narrow = (f" AND (mm.scope_id = %({prefix}_{scope.value})s"
                      f" OR mm.scope_id LIKE %({prefix}_{scope.value}_below)s)")
    return f"FROM memory_members mm WHERE mm.kind = '{scope.value}' AND mm.user_id = %({prefix}_user)s{narrow}"


def visible_parts(identity: Identity, scopes: Sequence[Scope] | None = None, *, keyed: bool = False,
                  alias: str = "m", subtree: bool = False,
                  skip: bool = False, distributed: bool = False,
                  ) -> tuple[dict[Scope, sql.Composable], dict[str, Any]]:
    """The tenancy rule of :func:`visible_filter` as one condition per level the caller can read,
    each narrow enough for one index range (a search reads them as ``UNION ALL`` branches).

    With ``keyed`` the conditions name ids by their 64-bit keys (``scope_key``, ``owner_key``), which
    both search indexes carry in place of the ids: such a branch can be answered from the index
    alone. A keyed condition admits a superset of the caller's rows only on an md5 collision, and
    every keyed read is re-checked with the full rule before anything is returned.

    With ``subtree`` the project, team and org levels also cover every scope below the identity's
    id by whole ``/`` segments (``co/eng`` covers ``co/eng/web``, never ``co/engine``), each under
    its own rule: a member of that scope, or (projects) its public memories when it is shared
    with the caller. Being a member of ``co/eng`` gives nothing of ``co/eng/web`` by itself.

    With ``skip`` (keyed only) each level also leaves out the ranges a search reads from a copy
    instead (:mod:`agent_memory.vector_cache`): ``%(vs_user)s``, ``%(vs_session)s`` and
    ``%(vs_project)s`` (booleans, default false) drop their level's one range, a test on
    parameters alone, so the plan does not read it at all; ``%(vs_team)s`` and ``%(vs_org)s``
    (arrays of keys, default empty) drop those teams' and orgs' ranges from the level's keys.

    With ``distributed`` (keyed only; a Citus cluster, whose rows are hashed by ``scope_id``) the
    user, session and project levels also name their ``scope_id``, so each reads one shard.
    """
    if subtree and keyed:
        raise ValueError("a subtree read names its scopes by id; it has no keyed form")
    if skip and not keyed:
        raise ValueError("only a keyed read skips ranges")
    scopes = tuple(Scope) if scopes is None else tuple(scopes)
    m = alias
    parts: dict[Scope, sql.Composable] = {}
    params: dict[str, Any] = {"vf_user": identity.user_id}
    if keyed:
        params["vk_user"] = scope_key(identity.user_id)
    mine = f"{m}.owner_key = %(vk_user)s" if keyed else f"{m}.user_id = %(vf_user)s"

    def _is(column: str, name: str, value: str) -> str:
        if keyed:
            params[f"vk_{name}"] = scope_key(value)
            if skip:
                params[f"vs_{name}"] = False
                return f"{m}.scope_key = %(vk_{name})s AND NOT %(vs_{name})s::boolean"
            if distributed:
                return f"{m}.scope_key = %(vk_{name})s AND {m}.scope_id = %(vf_{name})s"
            return f"{m}.scope_key = %(vk_{name})s"
        return f"{m}.scope_id = %(vf_{name})s"

    if Scope.USER in scopes:
        parts[Scope.USER] = sql.SQL(f"({m}.scope = 'user' AND {_is('scope_id', 'user', identity.user_id)})")
    if Scope.SESSION in scopes and identity.session_id is not None:
        params["vf_session"] = identity.session_id
        parts[Scope.SESSION] = sql.SQL(
            f"({m}.scope = 'session' AND {_is('scope_id', 'session', identity.session_id)} AND {mine})")
    if Scope.PROJECT in scopes and identity.project_id is not None and subtree:
        params["vf_project"] = identity.project_id
        params["vf_project_below"] = segment_prefix_pattern(identity.project_id)
        within = "(ps.project_id = %(vf_project)s OR ps.project_id LIKE %(vf_project_below)s)"
        members = ("SELECT mm.scope_id FROM memory_members mm WHERE mm.kind = 'project' AND mm.user_id = %(vf_user)s"
                   " AND (mm.scope_id = %(vf_project)s OR mm.scope_id LIKE %(vf_project_below)s)")
        parts[Scope.PROJECT] = sql.SQL(
            f"({m}.scope = 'project' AND ("
            f"({m}.scope_id = ANY(ARRAY({members})) AND ({m}.visibility <> 'owner_only' OR {mine}))"
            f" OR ({m}.visibility = 'public' AND {m}.scope_id = ANY(ARRAY(SELECT ps.project_id"
            f" FROM memory_project_shares ps WHERE {within} AND {granted_to('%(vf_user)s')})))))"
        )
    elif Scope.PROJECT in scopes and identity.project_id is not None:
        params["vf_project"] = identity.project_id
        parts[Scope.PROJECT] = sql.SQL(
            f"({m}.scope = 'project' AND {_is('scope_id', 'project', identity.project_id)} AND ("
            "(" + member_of("'project'", "%(vf_project)s", "%(vf_user)s")
            + f" AND ({m}.visibility <> 'owner_only' OR {mine}))"
            f" OR ({m}.visibility = 'public' AND " + shared_with("%(vf_project)s", "%(vf_user)s") + ")))"
        )
    for scope, chosen in ((Scope.TEAM, identity.team_id), (Scope.ORG, identity.org_id)):
        if scope not in scopes:
            continue
        members = level_members(scope, chosen, "vf", params, subtree=subtree)
        # keyed: an array of keys, so the level is index ranges (an IN would join and filter)
        if skip:
            params[f"vs_{scope.value}"] = []
            members += f" AND NOT agent_memory_key(mm.scope_id) = ANY(%(vs_{scope.value})s::bigint[])"
        among = (f"{m}.scope_key = ANY(ARRAY(SELECT agent_memory_key(mm.scope_id) {members}))" if keyed
                 else f"{m}.scope_id IN (SELECT mm.scope_id {members})")
        parts[scope] = sql.SQL(
            f"({m}.scope = '{scope.value}' AND {among} AND ({m}.visibility <> 'owner_only' OR {mine}))"
        )
    return parts, params


def visible_filter(identity: Identity, scopes: Sequence[Scope] | None = None, *, subtree: bool = False) -> Query:
    """``m`` rows the caller may read; the tenancy rule every read goes through.

    - user memories: their own; session memories: their own, of their current session;
    - the project's memories if they are a member (all but other members' owner_only ones),
      or only its public ones if the project is shared with them (or a team/org of theirs);
    - team and org memories of every team and org they belong to (only ``team_id`` /
      ``org_id`` when the identity names one), except other members' owner_only ones.

    Membership is read in the same statement, so a read never sees a role older than itself.
    ``subtree``: the shared levels reach down their ``/`` paths (:func:`visible_parts`).
    """
    parts, params = visible_parts(identity, scopes, subtree=subtree)
    if not parts:
        return sql.SQL("FALSE"), params
    return sql.SQL("(") + sql.SQL(" OR ").join(parts.values()) + sql.SQL(")"), params


#: a kept version of ``m`` as a row the tenancy rule reads: the scope and visibility the memory
#: had while the version held (``memory_item_history``), and the memory's creator
_VERSION_ROW = "SELECT {h}.scope, {h}.scope_id, {h}.visibility, {m}.user_id"


def _version_rule(identity: Identity, scopes: Sequence[Scope] | None = None, *,
                  subtree: bool = False) -> Query:
    """SQL over a row ``v`` (scope, scope_id, visibility, user_id): the caller may read it; the
    rule of :func:`visible_filter`, for a version of a memory as it was (:func:`version_visible`)."""
    parts, params = visible_parts(identity, scopes, alias="v", subtree=subtree)
    if not parts:
        return sql.SQL("FALSE"), params
    return sql.SQL("(") + sql.SQL(" OR ").join(parts.values()) + sql.SQL(")"), params


def version_visible(identity: Identity, *, version: str = "h", item: str = "m", subtree: bool = False) -> Query:
    """SQL: the caller could read the kept version ``version`` (a ``memory_item_history`` row) of
    the memory ``item`` under the scope and visibility it had then. A memory widened later
    (owner_only, then members) must not show its earlier wordings to its new readers; every read
    of the past asks this as well as :func:`visible_filter` of the memory now."""
    rule, params = _version_rule(identity, subtree=subtree)
    row = sql.SQL(_VERSION_ROW.format(h=version, m=item))
    return sql.SQL("EXISTS (SELECT FROM ({row}) v WHERE {rule})").format(row=row, rule=rule), params


def _then_visible(identity: Identity, scopes: Sequence[Scope] | None, subtree: bool) -> Query:
    """SQL: ``m``'s version at ``%(f_then)s`` (the first wording kept that was replaced after then;
    none: the current row, which the caller reads now) is one the caller could read then."""
    rule, params = _version_rule(identity, scopes, subtree=subtree)
    row = sql.SQL(_VERSION_ROW.format(h="h", m="m"))
    return sql.SQL(
        "(m.version = 1 OR coalesce((SELECT {rule} FROM ({row} FROM memory_item_history h"
        " WHERE h.scope_id = m.scope_id AND h.memory_id = m.id AND h.replaced_at > %(f_then)s"
        " ORDER BY h.replaced_at LIMIT 1) v), TRUE))"
    ).format(rule=rule, row=row), params


def item_filter(
    identity: Identity,
    *,
    scopes: Sequence[Scope] | None = None,
    types: Sequence[MemoryType] | None = None,
    statuses: Sequence[Status] | None = (Status.ACTIVE,),
    as_of: datetime | None = None,
    known_at: datetime | None = None,
    subtree: bool = False,
    narrow: Query | None = None,
) -> Query:
    """:func:`visible_filter` narrowed to what has not expired (:func:`live`), by type and
    status; with ``as_of`` (event time), only items whose fact held in the world at that time
    (``valid_from <= as_of < valid_to``); with ``known_at`` (record time), only items the memory
    held at that time (``recorded_at <= known_at < known_to``). With both: the world at ``as_of``
    as the memory knew it at ``known_at`` (an end of validity recorded later does not count).
    In the past a memory is read only if the caller could read it then as well: the version it
    had then (the one a past read shows, ``%(f_then)s`` = ``known_at`` or ``as_of``) under that
    version's scope and visibility (:func:`version_visible`)."""
    where, params = visible_filter(identity, scopes, subtree=subtree)
    clauses = [where, sql.SQL(live())]
    if narrow is not None:  # metadata, time ranges, origin (:func:`.filters.narrowing`)
        clauses.append(narrow[0])
        params.update(narrow[1])
    if as_of is not None:
        ended = "m.valid_to IS NULL OR m.valid_to > %(f_as_of)s"
        if known_at is not None:
            ended += " OR m.known_to > %(f_known_at)s"
        clauses.append(sql.SQL(f"m.valid_from <= %(f_as_of)s AND ({ended})"))
        params["f_as_of"] = as_of
    if known_at is not None:
        clauses.append(sql.SQL("coalesce(m.recorded_at, m.created_at) <= %(f_known_at)s"
                               " AND (m.known_to IS NULL OR m.known_to > %(f_known_at)s)"))
        params["f_known_at"] = known_at
    if as_of is not None or known_at is not None:  # and in the past, each memory as it was then
        then, then_params = _then_visible(identity, scopes, subtree)
        clauses.append(then)
        params.update(then_params)
        params["f_then"] = known_at or as_of
    if types is not None:
        clauses.append(sql.SQL("m.memory_type = ANY(%(f_types)s)"))
        params["f_types"] = [t.value for t in types]
    if statuses is not None:
        clauses.append(sql.SQL("m.status = ANY(%(f_statuses)s)"))
        params["f_statuses"] = [s.value for s in statuses]
    return sql.SQL(" AND ").join(clauses), params
