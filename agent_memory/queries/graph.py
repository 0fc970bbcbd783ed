"""The knowledge graph's statements (:mod:`agent_memory.graph`), as pure builders.

Tenancy: a caller reads and writes one graph, their own (``scope = 'user'`` and ``scope_id`` =
their user id, :func:`graph_of`); every statement here names that key as a parameter and
reads no row outside it. The memories a graph points at are read through
:func:`.visibility.visible_filter`, so a mention never shows a memory its reader may not see.
Values, names a model chose included, always travel as parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import sql

from ..lifecycle import CORE_RECALLS, MAX_DECAY_GRADIENT, NODE_HALF_LIFE_DAYS, spaced_recall_sql
from ..models import Identity
from .items import item_columns
from .types import Query, Statement
from .visibility import live, visible_filter

__all__ = [
    "NODE_COLUMNS",
    "NOTES_KEPT",
    "RELATION_COLUMNS",
    "close_relation",
    "delete_node",
    "explore_memories",
    "graph_of",
    "insert_mentions",
    "list_nodes",
    "merge_nodes",
    "node_candidates",
    "node_names",
    "relations_among",
    "relations_of",
    "resolution_candidates",
    "select_nodes",
    "split_node",
    "touch_nodes",
    "unmentioned_memories",
    "upsert_nodes",
    "upsert_relations",
    "walk_edges",
]

NODE_COLUMNS = (
    "id, node_type, entity_type, name, canonical_name, aliases, description, notes, is_owner, confidence,"
    " salience, recall_count, state, retention, source_count, first_mentioned_at, last_mentioned_at,"
    " last_accessed_at, created_by, created_at, updated_at"
)
RELATION_COLUMNS = (
    "r.id, r.from_node, r.to_node, r.kind, r.rel_type, r.description, r.attitude, r.proximity, r.notes,"
    " r.confidence, r.salience, r.state, r.recorded_by, r.valid_from, r.valid_to, r.recorded_at, r.known_to,"
    " r.updated_at"
)
_MINE = "scope = 'user' AND scope_id = %(g)s"
#: the newest notes a node or relation keeps (explore shows 10; every memory that mentions a node
#: stays linked to it by its mention, so a note dropped here is not knowledge lost)
NOTES_KEPT = 20


def _best_cosine(alias: str, count: int) -> str:
    """SQL: the best cosine similarity of ``alias.embedding`` to the query vectors ``%(v0)s`` ...
    (0 without any, or without an embedding), written out (no subquery per row)."""
    if count == 0:
        return "0::float8"
    terms = ", ".join(f"1 - ({alias}.embedding <=> %(v{i})s::vector)" for i in range(count))
    return f"coalesce(greatest({terms}), 0)"


def _vector_params(vectors: Sequence[str]) -> dict[str, str]:
    return {f"v{i}": v for i, v in enumerate(vectors)}


def graph_of(identity: Identity) -> tuple[str, str]:
    """The graph a caller reads and writes: their own (``('user', user_id)``)."""
    return "user", identity.user_id


def resolution_candidates(owner: str, keys: Sequence[str], people: Sequence[str] | None = None) -> Statement:
    """Nodes a mention of one of ``keys`` (canonical names) may be: by name or alias, or, for a
    person named in ``people`` (default: every key), a person whose name may be a spelling
    variant of it (:func:`agent_memory.graph.resolve.variant_of`: same first letter, as many
    words, a length at most one letter off) and only for a name not already known (an exact name
    or alias wins in :func:`~agent_memory.graph.resolve.resolve`, so most saves read no variant).
    Each branch is one index range of the graph (names in byte order, aliases by GIN).""" 
    people = list(keys if people is None else people)
    cols = "n.id, n.node_type, n.entity_type, n.canonical_name, n.aliases, n.is_owner"
    return (
        f"SELECT {cols} FROM graph_nodes n WHERE n.scope = 'user' AND n.scope_id = %(g)s"
        " AND n.canonical_name COLLATE \"C\" = ANY(%(keys)s::text[])"
        f" UNION SELECT {cols} FROM graph_nodes n WHERE n.scope = 'user' AND n.scope_id = %(g)s"
        " AND n.aliases && %(keys)s::text[]"
        f" UNION SELECT {cols} FROM unnest(%(people)s::text[]) k(key), LATERAL (SELECT {cols} FROM graph_nodes n"
        " WHERE n.scope = 'user' AND n.scope_id = %(g)s AND n.canonical_name COLLATE \"C\" >= left(k.key, 1)"
        " AND n.canonical_name COLLATE \"C\" < left(k.key, 1) || chr(1114111) AND n.node_type = 'person'"
        " AND length(n.canonical_name) BETWEEN length(k.key) - 1 AND length(k.key) + 1"
        " AND array_length(string_to_array(n.canonical_name, ' '), 1)"
        " = array_length(string_to_array(k.key, ' '), 1) LIMIT 200) n WHERE k.key <> ''"
        # a name already known (as a name or an alias) resolves to it: no variant is read for it
        " AND NOT EXISTS (SELECT 1 FROM graph_nodes e WHERE e.scope = 'user' AND e.scope_id = %(g)s"
        " AND e.canonical_name COLLATE \"C\" = k.key)"
        " AND NOT EXISTS (SELECT 1 FROM graph_nodes e WHERE e.scope = 'user' AND e.scope_id = %(g)s"
        " AND e.aliases @> ARRAY[k.key])",
        {"g": owner, "keys": list(keys), "people": people},
    )


def upsert_nodes(owner: str, user: str, rows: Sequence[dict[str, Any]], *, note: str, source_id: UUID | None,
                 at: datetime | None, vector: str | None, mention_kind: str | None = None,
                 retention: str = "decay") -> Statement:
    """Insert the nodes a memory mentions, or add to them: one note (the memory, with its author,
    time and id), an alias (a new spelling), a mention counted once per memory and day.
    ``rows``: ``node_type, entity_type, name, canonical_name, alias, confidence, is_owner,
    description`` (and ``mention``, with ``mention_kind``). Answers ``id, canonical_name,
    node_type, entity_type`` per row.

    With ``mention_kind`` the same statement records that the source ``(mention_kind,
    source_id)`` mentions each row whose ``mention`` is true (a save's graph in one round trip).

    ``retention``: the memory's; a node takes the strongest of its sources' (keep > ephemeral >
    decay, :func:`agent_memory.lifecycle.retention_precedence`); the owner's node is kept. A node
    archived (faded) and named again is a candidate again."""
    cols = ("node_type", "entity_type", "name", "canonical_name", "alias", "confidence", "is_owner", "description")
    types = ("text", "text", "text", "text", "text", "real", "boolean", "text")
    params: dict[str, Any] = {"g": owner, "u": user, "note": note, "src": str(source_id) if source_id else None,
                              "at": at, "vec": vector, "keep": NOTES_KEPT, "ret": retention}
    for c in cols:
        params[f"c_{c}"] = [r[c] for r in rows]
    unnest = ", ".join(f"%(c_{c})s::{t}[]" for c, t in zip(cols, types, strict=True))
    statement = (
        "INSERT INTO graph_nodes AS n (scope, scope_id, id, node_type, entity_type, name, canonical_name, aliases,"
        " description, notes, embedding, is_owner, confidence, created_by, source_count, first_mentioned_at,"
        " last_mentioned_at, distinct_days, is_dirty, retention)"
        " SELECT 'user', %(g)s::text, gen_random_uuid(), t.node_type, t.entity_type, t.name, t.canonical_name,"
        " CASE WHEN t.alias IS NULL THEN '{}'::text[] ELSE ARRAY[t.alias] END, t.description,"
        " CASE WHEN t.is_owner THEN '[]'::jsonb ELSE jsonb_build_array(jsonb_build_object('content', %(note)s::text,"
        " 'added_by', %(u)s::text, 'added_at', coalesce(%(at)s::timestamptz, now()), 'source_id', %(src)s::text,"
        " 'expires_at', NULL)) END,"
        " CASE WHEN t.is_owner THEN NULL ELSE %(vec)s::vector END, t.is_owner, t.confidence, %(u)s::text,"
        " CASE WHEN t.is_owner THEN 0 ELSE 1 END, coalesce(%(at)s::timestamptz, now()),"
        " coalesce(%(at)s::timestamptz, now()), ARRAY[coalesce(%(at)s::timestamptz, now())::date], false,"
        " CASE WHEN t.is_owner THEN 'keep' ELSE %(ret)s::text END"
        f" FROM unnest({unnest}) AS t({', '.join(cols)})"
        " ON CONFLICT (scope, scope_id, node_type, entity_type, canonical_name) DO UPDATE SET"
        " notes = CASE WHEN excluded.is_owner THEN n.notes WHEN jsonb_array_length(n.notes) >= "
        + str(int(NOTES_KEPT)) + " THEN (n.notes - 0) || excluded.notes ELSE n.notes || excluded.notes END,"
        " aliases = ARRAY(SELECT DISTINCT a FROM unnest(n.aliases || excluded.aliases) a WHERE a <> n.canonical_name),"
        " embedding = coalesce(n.embedding, excluded.embedding),"
        " confidence = greatest(n.confidence, excluded.confidence),"
        " source_count = n.source_count + excluded.source_count,"
        " last_mentioned_at = greatest(n.last_mentioned_at, excluded.last_mentioned_at),"
        " first_mentioned_at = least(n.first_mentioned_at, excluded.first_mentioned_at),"
        " distinct_days = CASE WHEN excluded.is_owner OR excluded.distinct_days[1] = ANY(n.distinct_days)"
        " THEN n.distinct_days ELSE n.distinct_days || excluded.distinct_days END,"
        # excluded's is the default, now(): Citus runs no volatile or stable function in DO UPDATE
        " is_dirty = n.is_dirty OR NOT excluded.is_owner, updated_at = excluded.updated_at,"
        " retention = CASE WHEN 'keep' IN (n.retention, excluded.retention) THEN 'keep'"
        " WHEN 'ephemeral' IN (n.retention, excluded.retention) THEN 'ephemeral' ELSE 'decay' END,"
        " state = CASE WHEN n.state = 'archived' THEN 'candidate' ELSE n.state END"
        " RETURNING id, canonical_name, node_type, entity_type",
        params,
    )
    if mention_kind is None:
        return statement
    params["kind"], params["mentioned"] = mention_kind, [bool(r.get("mention", True)) for r in rows]
    return (
        f"WITH up AS ({statement[0]}), men AS (INSERT INTO graph_mentions (scope, scope_id, node_id, source_kind,"
        " source_id, mentioned_at, added_by) SELECT 'user', %(g)s, up.id, %(kind)s, %(src)s::uuid,"
        " coalesce(%(at)s::timestamptz, now()), %(u)s FROM up JOIN unnest(%(c_node_type)s::text[],"
        " %(c_entity_type)s::text[], %(c_canonical_name)s::text[], %(mentioned)s::boolean[])"
        " AS w(node_type, entity_type, canonical_name, mentioned) ON w.mentioned AND w.node_type = up.node_type"
        " AND w.entity_type = up.entity_type AND w.canonical_name = up.canonical_name ON CONFLICT DO NOTHING)"
        " SELECT * FROM up",
        params,
    )


def insert_mentions(owner: str, user: str, node_ids: Sequence[UUID], kind: str, source_id: UUID,
                    at: datetime | None) -> Statement:
    """The source ``(kind, source_id)`` mentions each node (once)."""
    return (
        "INSERT INTO graph_mentions (scope, scope_id, node_id, source_kind, source_id, mentioned_at, added_by)"
        " SELECT 'user', %(g)s::text, n, %(kind)s::text, %(src)s::uuid, coalesce(%(at)s::timestamptz, now()),"
        " %(u)s::text"
        " FROM unnest(%(ids)s::uuid[]) n ON CONFLICT DO NOTHING",
        {"g": owner, "u": user, "ids": list(node_ids), "kind": kind, "src": source_id, "at": at},
    )


def upsert_relations(owner: str, user: str, rows: Sequence[dict[str, Any]], *, note: str,
                     source_id: UUID | None, at: datetime | None) -> Statement:
    """Current relations (``from_node, to_node, kind, rel_type, description, attitude, proximity``
    and, optionally, ``valid_from``: when it began in the world, as a model said):
    new ones are recorded, a known one gains the memory as a note."""
    cols = ("from_node", "to_node", "kind", "rel_type", "description", "attitude", "proximity", "valid_from")
    types = ("uuid", "uuid", "text", "text", "text", "smallint", "smallint", "timestamptz")
    params: dict[str, Any] = {"g": owner, "u": user, "note": note, "src": str(source_id) if source_id else None,
                              "mem": source_id, "at": at, "keep": NOTES_KEPT}
    for c in cols:
        params[f"r_{c}"] = [r.get(c) for r in rows]
    unnest = ", ".join(f"%(r_{c})s::{t}[]" for c, t in zip(cols, types, strict=True))
    return (
        "INSERT INTO graph_relations AS r (scope, scope_id, id, from_node, to_node, kind, rel_type, description,"
        " attitude, proximity, notes, confidence, source_memory, recorded_by, valid_from)"
        " SELECT 'user', %(g)s::text, gen_random_uuid(), t.from_node, t.to_node, t.kind, t.rel_type, t.description,"
        " t.attitude, t.proximity, jsonb_build_array(jsonb_build_object('content', %(note)s::text, 'added_by',"
        " %(u)s::text, 'added_at', coalesce(%(at)s::timestamptz, now()), 'source_id', %(src)s::text,"
        " 'expires_at', NULL)), 0.7, %(mem)s::uuid, %(u)s::text, coalesce(t.valid_from, %(at)s::timestamptz, now())"
        f" FROM unnest({unnest}) AS t({', '.join(cols)})"
        " ON CONFLICT (scope, scope_id, from_node, to_node, rel_type) WHERE valid_to IS NULL AND known_to IS NULL"
        # (NOTES_KEPT written in: Citus passes no parameter to an upsert's DO UPDATE on a shard)
        " DO UPDATE SET notes = CASE WHEN jsonb_array_length(r.notes) >= " + str(int(NOTES_KEPT))
        + " THEN (r.notes - 0) || excluded.notes"
        " ELSE r.notes || excluded.notes END, confidence = least(1, r.confidence + 0.1),"
        " attitude = coalesce(r.attitude, excluded.attitude), proximity = coalesce(r.proximity, excluded.proximity),"
        " updated_at = excluded.updated_at",
        params,
    )


def close_relation(owner: str, user: str, row: dict[str, Any], *, note: str, source_id: UUID | None,
                   at: datetime | None) -> Statement:
    """"Used to work at X": the current relation of that type ends (``valid_to``: the row's
    ``valid_to`` when a model said when, else ``at``), it is not deleted; none known: one is
    recorded already closed. A relation said to have ended before it was recorded as beginning
    (its ``valid_from`` was only when it was first heard of) begins no later than it ended."""
    # the times chosen here and written in as now() or parameters (no coalesce: Citus runs no
    # stable function in a CASE or COALESCE of an UPDATE)
    until, since = row.get("valid_to"), row.get("valid_from")
    when = "now()" if at is None else "%(at)s::timestamptz"
    end = when if until is None else "%(until)s::timestamptz"
    start = end if since is None else "%(since)s::timestamptz"
    closing = ("greatest(valid_from, " + when + ")" if until is None
               else "%(until)s::timestamptz, valid_from = least(valid_from, %(until)s::timestamptz)")
    return (
        "WITH closed AS (UPDATE graph_relations SET valid_to = " + closing + ","
        " updated_at = now() WHERE scope = 'user' AND scope_id = %(g)s AND from_node = %(f)s"
        " AND to_node = %(t)s AND rel_type = %(type)s AND valid_to IS NULL AND known_to IS NULL RETURNING 1)"
        " INSERT INTO graph_relations (scope, scope_id, id, from_node, to_node, kind, rel_type, description, notes,"
        " source_memory, recorded_by, valid_from, valid_to)"
        " SELECT 'user', %(g)s, gen_random_uuid(), %(f)s, %(t)s, %(kind)s, %(type)s, %(desc)s,"
        " jsonb_build_array(jsonb_build_object('content', %(note)s::text, 'added_by', %(u)s::text, 'added_at',"
        " " + when + ", 'source_id', %(src)s::text, 'expires_at', NULL)), %(mem)s, %(u)s,"
        " least(" + start + ", " + end + "), " + end +
        " WHERE NOT EXISTS (SELECT 1 FROM closed)",
        {"g": owner, "u": user, "f": row["from_node"], "t": row["to_node"], "kind": row["kind"],
         "type": row["rel_type"], "desc": row["description"], "note": note,
         "src": str(source_id) if source_id else None, "mem": source_id, "at": at,
         "until": row.get("valid_to"), "since": row.get("valid_from")},
    )


def node_candidates(owner: str, vectors: Sequence[str], texts: Sequence[str], limit: int, *,
                    weights: tuple[float, float, float] = (0.3, 0.3, 0.4), floor: float = 0.0,
                    now: datetime | None = None, rate: float = 0.02) -> Statement:
    """The graph's nodes scored for explore, best ``limit`` first: ``similarity`` (best cosine over
    the query vectors), ``text_match`` (1 for a name or alias, 0.8 for a name containing the
    text) and ``score`` = ``semantic * max(similarity, text_match) + time * exp(-rate * days since
    updated_at) + salience * salience`` (``weights``; :func:`agent_memory.graph.rank.score` is the
    same sum). Nodes neither near a query nor named (both under ``floor``), the owner's own node
    and archived nodes are left out. Scored over narrow columns first; only the best are read
    whole (their notes are what costs)."""
    patterns = ["%" + t.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for t in texts]
    return (
        f"WITH s AS MATERIALIZED (SELECT n.id, {_best_cosine('n', len(vectors))} AS similarity, CASE WHEN n.canonical_name = ANY(%(texts)s) OR n.aliases && %(texts)s::text[] THEN 1.0"
        " WHEN EXISTS (SELECT 1 FROM unnest(%(pats)s::text[]) p WHERE n.canonical_name LIKE p) THEN 0.8"
        " ELSE 0.0 END AS text_match, n.updated_at, n.salience FROM graph_nodes n"
        " WHERE n.scope = 'user' AND n.scope_id = %(g)s AND n.state <> 'archived' AND NOT n.is_owner),"
        " best AS (SELECT id, similarity, text_match, %(ws)s * greatest(similarity, text_match) + %(wt)s"
        " * exp(-%(rate)s * greatest(extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - updated_at), 0)"
        " / 86400.0) + %(wl)s * salience AS score FROM s WHERE greatest(similarity, text_match) >= %(floor)s"
        " ORDER BY score DESC, id LIMIT %(limit)s)"
        f" SELECT {NODE_COLUMNS.replace('id, ', 'n.id, ', 1)}, best.similarity, best.text_match, best.score"
        " FROM best JOIN graph_nodes n ON n.scope = 'user' AND n.scope_id = %(g)s AND n.id = best.id"
        " ORDER BY best.score DESC, n.id",
        {"g": owner, "texts": list(texts), "pats": patterns, "limit": limit, "ws": weights[0], "wt": weights[1],
         "wl": weights[2], "floor": floor, "now": now, "rate": rate, **_vector_params(vectors)},
    )


def node_names(owner: str, ids: Sequence[UUID]) -> Statement:
    """``id, name`` of the graph's nodes with these ids."""
    return ("SELECT id, name FROM graph_nodes WHERE scope = 'user' AND scope_id = %(g)s AND id = ANY(%(ids)s)",
            {"g": owner, "ids": list(ids)})


def select_nodes(owner: str, ids: Sequence[UUID]) -> Statement:
    """The graph's nodes with these ids (ids of another graph answer nothing)."""
    return (f"SELECT {NODE_COLUMNS} FROM graph_nodes WHERE {_MINE} AND id = ANY(%(ids)s)",
            {"g": owner, "ids": list(ids)})


def list_nodes(owner: str, *, node_type: str | None, name: str | None, limit: int) -> Statement:
    """The graph's nodes, most mentioned first; ``name``: by canonical name or alias."""
    return (
        f"SELECT {NODE_COLUMNS} FROM graph_nodes WHERE {_MINE}"
        " AND (%(type)s::text IS NULL OR node_type = %(type)s)"
        " AND (%(name)s::text IS NULL OR canonical_name = %(name)s OR %(name)s = ANY(aliases))"
        " ORDER BY is_owner DESC, source_count DESC, canonical_name LIMIT %(limit)s",
        {"g": owner, "type": node_type, "name": name, "limit": limit},
    )


def relations_of(owner: str, ids: Sequence[UUID] | None, *, direction: str = "both",
                 kinds: Sequence[str] | None = None, types: Sequence[str] | None = None,
                 exclude_types: Sequence[str] | None = None, min_attitude: int | None = None,
                 max_attitude: int | None = None, min_proximity: int | None = None,
                 max_proximity: int | None = None, valid_at: datetime | None = None,
                 since: datetime | None = None, until: datetime | None = None, limit: int = 200,
                 names: bool = False) -> Statement:
    """Relations of the graph touching ``ids`` (None: any), filtered as
    given (every filter is a parameter; None: no filter). Without ``valid_at``/``since``/``until``
    only current relations; ``valid_at``: those that held then; ``since``/``until``: those that
    held at some time in the window (closed ones included). ``names``: with ``from_name`` and
    ``to_name`` (the ends' names, read in the same statement)."""
    # the relations of the nodes as index ranges (an OR of the two ends is planned as a scan)
    ends = {"out": ("from_node",), "in": ("to_node",), "both": ("from_node", "to_node")}[direction]
    touch = ("r.id = ANY(ARRAY(" + " UNION ".join(
        f"SELECT x.id FROM graph_relations x WHERE x.scope = 'user' AND x.scope_id = %(g)s AND x.{end} = ANY(%(ids)s)"
        for end in ends) + "))")
    window = since is not None or until is not None
    return (
        f"SELECT {RELATION_COLUMNS}" + (
            ", (SELECT a.name FROM graph_nodes a WHERE a.scope = r.scope AND a.scope_id = r.scope_id"
            " AND a.id = r.from_node) AS from_name, (SELECT b.name FROM graph_nodes b WHERE b.scope = r.scope"
            " AND b.scope_id = r.scope_id AND b.id = r.to_node) AS to_name" if names else "")
        + " FROM graph_relations r WHERE r.scope = 'user' AND r.scope_id = %(g)s AND r.state <> 'archived'"
        f" AND (%(ids)s::uuid[] IS NULL OR {touch})"
        " AND (%(kinds)s::text[] IS NULL OR r.kind = ANY(%(kinds)s))"
        " AND (%(types)s::text[] IS NULL OR r.rel_type = ANY(%(types)s))"
        " AND (%(xtypes)s::text[] IS NULL OR NOT r.rel_type = ANY(%(xtypes)s))"
        " AND (%(min_att)s::int IS NULL OR r.attitude >= %(min_att)s)"
        " AND (%(max_att)s::int IS NULL OR r.attitude <= %(max_att)s)"
        " AND (%(min_prox)s::int IS NULL OR r.proximity >= %(min_prox)s)"
        " AND (%(max_prox)s::int IS NULL OR r.proximity <= %(max_prox)s)"
        + (" AND r.known_to IS NULL AND r.valid_from <= %(at)s AND (r.valid_to IS NULL OR r.valid_to > %(at)s)"
           if valid_at is not None else
           " AND r.known_to IS NULL AND (%(until)s::timestamptz IS NULL OR r.valid_from <= %(until)s)"
           " AND (%(since)s::timestamptz IS NULL OR r.valid_to IS NULL OR r.valid_to >= %(since)s)"
           if window else " AND r.valid_to IS NULL AND r.known_to IS NULL")
        + " ORDER BY r.salience DESC, r.updated_at DESC, r.id LIMIT %(limit)s",
        {"g": owner, "ids": None if ids is None else list(ids), "kinds": _or_none(kinds), "types": _or_none(types),
         "xtypes": _or_none(exclude_types), "min_att": min_attitude, "max_att": max_attitude,
         "min_prox": min_proximity, "max_prox": max_proximity, "at": valid_at, "since": since, "until": until,
         "limit": limit},
    )


def relations_among(owner: str, ids: Sequence[UUID], limit: int) -> Statement:
    """Current relations whose two ends are both among ``ids`` (a walk's nodes), heaviest first:
    read by the from-end's index and checked at the other, so a node with thousands of
    relations (the owner) costs only its relations inside the set."""
    return (
        f"SELECT {RELATION_COLUMNS} FROM graph_relations r WHERE r.scope = 'user' AND r.scope_id = %(g)s"
        " AND r.from_node = ANY(%(ids)s) AND r.to_node = ANY(%(ids)s) AND r.valid_to IS NULL"
        " AND r.known_to IS NULL AND r.state <> 'archived' ORDER BY r.salience DESC, r.id LIMIT %(limit)s",
        {"g": owner, "ids": list(ids), "limit": limit},
    )


def _or_none(values: Sequence[str] | None) -> list[str] | None:
    return None if values is None else list(values)


def walk_edges(owner: str, frontier: Sequence[UUID], *, per_node: int, sources_per_node: int) -> Statement:
    """One hop of a walk from each node of ``frontier`` (``a``), as edges ``a, b, weight``:
    its current relations (weight 1 + salience) and the nodes its sources also mention (weight:
    the number of sources they share; the owner's own node left out, it is in everything).

    Bounded per node, so a hub (an organisation in hundreds of memories) costs what any node
    costs: at most ``per_node`` relations and ``per_node`` co-mentioned nodes, the heaviest,
    counted over its ``sources_per_node`` newest sources. One statement for the whole frontier;
    ``b_owner`` marks the owner's own node, which a walk reaches but does not go on from."""
    # each end by its own index (graph_relations_*_walk_idx: heaviest first), then the heaviest of both
    side = ("(SELECT r.{other} AS b, 1 + r.salience AS weight FROM graph_relations r WHERE r.scope = 'user'"
            " AND r.scope_id = %(g)s AND r.{end} = f.id AND r.valid_to IS NULL AND r.known_to IS NULL"
            " AND r.state <> 'archived' AND r.{other} <> f.id ORDER BY r.salience DESC LIMIT %(n)s)")
    return (
        "WITH edges AS (SELECT f.id AS a, e.b, e.weight FROM unnest(%(f)s::uuid[]) f(id), LATERAL (SELECT x.b, x.weight FROM ("
        + side.format(end="from_node", other="to_node") + " UNION ALL "
        + side.format(end="to_node", other="from_node") + ") x ORDER BY x.weight DESC, x.b LIMIT %(n)s) e"
        " UNION ALL SELECT f.id, c.node_id, c.weight FROM unnest(%(f)s::uuid[]) f(id), LATERAL ("
        "SELECT o.node_id, count(*)::float8 AS weight FROM (SELECT m.source_kind, m.source_id FROM graph_mentions m"
        " WHERE m.scope = 'user' AND m.scope_id = %(g)s AND m.node_id = f.id ORDER BY m.mentioned_at DESC"
        " LIMIT %(s)s) src JOIN graph_mentions o ON o.scope = 'user' AND o.scope_id = %(g)s"
        " AND o.source_kind = src.source_kind AND o.source_id = src.source_id"
        " WHERE o.node_id <> f.id AND o.node_id <> ALL(ARRAY(SELECT w.id FROM graph_nodes w WHERE w.scope = 'user'"
        " AND w.scope_id = %(g)s AND w.is_owner)) GROUP BY o.node_id ORDER BY count(*) DESC, o.node_id"
        " LIMIT %(n)s) c)"
        # the owner's own node is reached, not walked through (it touches everything)
        " SELECT a, b, weight, b = ANY(ARRAY(SELECT w.id FROM graph_nodes w WHERE w.scope = 'user'"
        " AND w.scope_id = %(g)s AND w.is_owner)) AS b_owner FROM edges",
        {"g": owner, "f": list(frontier), "n": per_node, "s": sources_per_node},
    )


def explore_memories(identity: Identity, owner: str, node_ids: Sequence[UUID], vectors: Sequence[str],
                     near_ids: Sequence[UUID], *, mentioning: int) -> Query:
    """explore's memories, in one statement: the ``mentioning`` active memories the caller may
    read that mention most of ``node_ids`` (then the newest), and those of ``near_ids`` (the
    nearest to the queries, :func:`.search.similar_items`) the caller may read; each with
    ``node_ids`` (which of ``node_ids`` it mentions), ``similarity`` (best cosine to the query
    ``vectors``, 0 without any) and ``mentions`` (up to 10 ``[id, node_type, name]`` of the nodes
    it mentions, most salient first). Tenancy: :func:`.visibility.visible_filter`, checked on
    each candidate by its key (a hub's hundreds of mentions are ranked first, read after)."""
    rule, params = visible_filter(identity)
    params.update({"g": owner, "ids": list(node_ids), "near": list(near_ids), "men": mentioning,
                   **_vector_params(vectors)})
    visible = sql.SQL("m.status = 'active' AND {live} AND {rule}").format(live=sql.SQL(live()), rule=rule)
    return (
        sql.SQL(
            "WITH ranked AS (SELECT g.source_id AS id, array_agg(g.node_id) AS node_ids, count(*) AS hits,"
            " max(g.mentioned_at) AS latest FROM graph_mentions g WHERE g.scope = 'user' AND g.scope_id = %(g)s"
            " AND g.source_kind = 'memory' AND g.node_id = ANY(%(ids)s) GROUP BY g.source_id"
            " ORDER BY hits DESC, latest DESC LIMIT 3 * %(men)s),"
            " found AS ((SELECT r.id, r.node_ids FROM ranked r ORDER BY r.hits DESC, r.latest DESC LIMIT 3 * %(men)s)"
            " UNION ALL SELECT n, NULL FROM unnest(%(near)s::uuid[]) n)"
            " SELECT {cols}, coalesce(max(f.node_ids), '{{}}'::uuid[]) AS node_ids,"
            " " + _best_cosine("m", len(vectors)) + " AS similarity,"
            " (SELECT coalesce(jsonb_agg(jsonb_build_array(t.id, t.node_type, t.name)), '[]'::jsonb) FROM"
            " (SELECT n.id, n.node_type, n.name FROM graph_mentions g JOIN graph_nodes n ON n.scope = g.scope"
            " AND n.scope_id = g.scope_id AND n.id = g.node_id WHERE g.scope = 'user' AND g.scope_id = %(g)s"
            " AND g.source_kind = 'memory' AND g.source_id = m.id AND NOT n.is_owner"
            " ORDER BY n.salience DESC, n.source_count DESC, n.id LIMIT 10) t) AS mentions"
            " FROM found f JOIN memory_items m ON m.id = f.id WHERE {visible} GROUP BY m.scope_id, m.id"
        ).format(visible=visible, cols=item_columns()),
        params,
    )


def touch_nodes(owner: str, ids: Sequence[UUID]) -> Statement:
    """Recalled: count it (``access_count``; ``recall_count`` only for a spaced recall, an hour
    or more after the last), remember the interval (days) since the last recall, raise salience a
    little, let a spaced recall slow its fading (``decay_gradient`` grows by up to the interval
    over its half-life, as a memory's ``stability``) and promote it: candidate -> active at the
    first recall, core at :data:`~agent_memory.lifecycle.CORE_RECALLS` spaced ones
    (:mod:`agent_memory.lifecycle`). Bookkeeping: the commit does not wait for its WAL flush.

    A read's bookkeeping never waits or deadlocks (as ``items.touch_items``): the nodes are locked
    in id order and a node another transaction holds is skipped (its recall is not counted)."""
    spaced = spaced_recall_sql("last_accessed_at")
    days = "extract(epoch FROM now() - last_accessed_at) / 86400.0"
    return (
        "WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true)),"
        f" free AS (SELECT id AS free_id FROM graph_nodes WHERE {_MINE} AND id = ANY(%(ids)s)"
        " ORDER BY id FOR NO KEY UPDATE SKIP LOCKED)"
        " UPDATE graph_nodes SET access_count = access_count + 1,"
        f" recall_count = recall_count + CASE WHEN {spaced} THEN 1 ELSE 0 END,"
        f" last_recall_interval_days = CASE WHEN last_accessed_at IS NULL THEN NULL ELSE {days} END,"
        f" decay_gradient = CASE WHEN last_accessed_at IS NOT NULL AND {spaced} THEN least({MAX_DECAY_GRADIENT},"
        f" decay_gradient * (1 + least(1, {days} / ({NODE_HALF_LIFE_DAYS} * decay_gradient)))) ELSE decay_gradient END,"
        " last_accessed_at = now(), salience = least(1, salience + 0.05 * (1 - salience)),"
        " state = CASE WHEN state = 'archived' THEN state"
        f" WHEN recall_count + CASE WHEN {spaced} THEN 1 ELSE 0 END >= {CORE_RECALLS} THEN 'core'"
        " ELSE 'active' END"
        f" FROM async_commit, free WHERE {_MINE} AND id = free_id",
        {"g": owner, "ids": list(ids)},
    )


def merge_nodes(owner: str, keep: UUID, absorb: UUID) -> list[Statement]:
    """``absorb`` becomes ``keep``: its mentions and relations move over (duplicates dropped),
    its names become aliases, its notes join; then it goes."""
    p = {"g": owner, "k": keep, "a": absorb}
    return [
        ("INSERT INTO graph_mentions (scope, scope_id, node_id, source_kind, source_id, mentioned_at, added_by)"
         " SELECT scope, scope_id, %(k)s, source_kind, source_id, mentioned_at, added_by FROM graph_mentions"
         f" WHERE {_MINE} AND node_id = %(a)s ON CONFLICT DO NOTHING", p),
        ("UPDATE graph_relations r SET from_node = CASE WHEN from_node = %(a)s THEN %(k)s ELSE from_node END,"
         " to_node = CASE WHEN to_node = %(a)s THEN %(k)s ELSE to_node END"
         f" WHERE r.{_MINE.replace(' AND scope_id', ' AND r.scope_id')} AND (from_node = %(a)s OR to_node = %(a)s)"
         " AND NOT (from_node IN (%(a)s, %(k)s) AND to_node IN (%(a)s, %(k)s))"
         " AND NOT EXISTS (SELECT 1 FROM graph_relations o WHERE o.scope = r.scope AND o.scope_id = r.scope_id"
         " AND o.from_node = CASE WHEN r.from_node = %(a)s THEN %(k)s ELSE r.from_node END"
         " AND o.to_node = CASE WHEN r.to_node = %(a)s THEN %(k)s ELSE r.to_node END AND o.rel_type = r.rel_type"
         " AND o.valid_to IS NULL AND o.known_to IS NULL AND r.valid_to IS NULL AND r.known_to IS NULL)", p),
        ("UPDATE graph_nodes k SET aliases = ARRAY(SELECT DISTINCT x FROM unnest(k.aliases || a.aliases"
         " || a.canonical_name) x WHERE x <> k.canonical_name), notes = k.notes || a.notes,"
         " source_count = k.source_count + a.source_count, confidence = greatest(k.confidence, a.confidence),"
         " salience = greatest(k.salience, a.salience), recall_count = k.recall_count + a.recall_count,"
         " first_mentioned_at = least(k.first_mentioned_at, a.first_mentioned_at),"
         " last_mentioned_at = greatest(k.last_mentioned_at, a.last_mentioned_at),"
         " distinct_days = ARRAY(SELECT DISTINCT d FROM unnest(k.distinct_days || a.distinct_days) d ORDER BY d),"
         " is_dirty = true, updated_at = now() FROM graph_nodes a"
         " WHERE k.scope = 'user' AND k.scope_id = %(g)s AND k.id = %(k)s"
         " AND a.scope = 'user' AND a.scope_id = %(g)s AND a.id = %(a)s", p),
        delete_node(owner, absorb),
    ]


def delete_node(owner: str, node_id: UUID) -> Statement:
    """One node of the graph goes (its mentions and relations with it)."""
    return (f"DELETE FROM graph_nodes WHERE {_MINE} AND id = %(id)s", {"g": owner, "id": node_id})


def split_node(owner: str, user: str, node_id: UUID, new_id: UUID, name: str, key: str,
               memory_ids: Sequence[UUID]) -> list[Statement]:
    """Part of a node was someone else: a new node of the same kind named ``name`` takes the
    mentions (and the notes) of ``memory_ids``; the old one loses them and the alias ``key``."""
    p = {"g": owner, "u": user, "id": node_id, "new": new_id, "name": name, "key": key,
         "mems": list(memory_ids), "srcs": [str(m) for m in memory_ids]}
    return [
        ("INSERT INTO graph_nodes (scope, scope_id, id, node_type, entity_type, name, canonical_name, notes,"
         " embedding, confidence, created_by, source_count, first_mentioned_at, last_mentioned_at, is_dirty)"
         " SELECT scope, scope_id, %(new)s, node_type, entity_type, %(name)s, %(key)s,"
         " coalesce((SELECT jsonb_agg(x) FROM jsonb_array_elements(notes) x WHERE x->>'source_id' = ANY(%(srcs)s)),"
         " '[]'::jsonb), embedding, confidence, %(u)s, 0, now(), now(), true"
         f" FROM graph_nodes WHERE {_MINE} AND id = %(id)s", p),
        ("UPDATE graph_mentions SET node_id = %(new)s"
         f" WHERE {_MINE} AND node_id = %(id)s AND source_kind = 'memory' AND source_id = ANY(%(mems)s)", p),
        ("UPDATE graph_nodes n SET aliases = array_remove(aliases, %(key)s),"
         " notes = coalesce((SELECT jsonb_agg(x) FROM jsonb_array_elements(n.notes) x"
         " WHERE x->>'source_id' IS NULL OR NOT x->>'source_id' = ANY(%(srcs)s)), '[]'::jsonb),"
         " source_count = (SELECT count(*) FROM graph_mentions g WHERE g.scope = n.scope"
         " AND g.scope_id = n.scope_id AND g.node_id = n.id), is_dirty = true, updated_at = now()"
         " WHERE n.scope = 'user' AND n.scope_id = %(g)s AND n.id IN (%(id)s, %(new)s)", p),
    ]


def unmentioned_memories(user: str, after: tuple[datetime, UUID] | None, limit: int) -> Statement:
    """The user's own active memories after the cursor ``(created_at, id)`` that no node of their
    graph mentions yet, oldest first: what a backfill reads next."""
    return (
        "SELECT m.id, m.content, m.created_at, m.valid_from, m.retention, m.embedding::text AS embedding"
        " FROM memory_items m"
        " WHERE m.user_id = %(u)s AND m.status = 'active' AND " + live() +
        " AND NOT EXISTS (SELECT 1 FROM graph_mentions g WHERE g.scope = 'user' AND g.scope_id = %(u)s"
        " AND g.source_kind = 'memory' AND g.source_id = m.id)" +
        " AND (%(at)s::timestamptz IS NULL OR (m.created_at, m.id) > (%(at)s, %(id)s::uuid))"
        " ORDER BY m.created_at, m.id LIMIT %(limit)s",
        {"u": user, "at": after[0] if after else None, "id": after[1] if after else None, "limit": limit},
    )
