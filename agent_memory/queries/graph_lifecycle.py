"""The knowledge graph's maintenance and its storylines and macros, as pure statement builders.

Maintenance (``maintain()``, run from cron over every graph) archives faded and ephemeral nodes
(:mod:`agent_memory.lifecycle`), regenerates the descriptions of nodes whose notes changed, and
keeps storylines and macros current: the design's meso layer (a node mentioned by
:data:`STORYLINE_SOURCES`+ memories over :data:`STORYLINE_DAYS`+ days gets a storyline, its
memories as members) and macro layer (a node that :data:`MACRO_STORYLINES`+ storylines belong
to, spanning :data:`MACRO_SPAN_DAYS`+ days, gets a macro, those storylines as members). A
storyline belongs to its anchor and to every node at least half its memories mention.

Tenancy: a storyline lives in its anchor's graph (``scope``, ``scope_id``), and every statement
that reads one for a caller names that graph as a parameter; the memories shown with it are
read through :func:`.visibility.visible_filter`, as search reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import sql

from ..lifecycle import EPHEMERAL_GRAPH_DAYS, FADED_BELOW, NODE_HALF_LIFE_DAYS, spaced_recall_sql
from ..models import Identity
from .types import Query, Statement
from .visibility import live, visible_filter

__all__ = [
    "MACRO_SPAN_DAYS",
    "MACRO_STORYLINES",
    "STORYLINE_COLUMNS",
    "STORYLINE_DAYS",
    "STORYLINE_SOURCES",
    "archive_ephemeral_nodes",
    "archive_faded_nodes",
    "dirty_nodes",
    "dirty_storylines",
    "explore_storylines",
    "refresh_macros",
    "refresh_storylines",
    "set_node_descriptions",
    "set_storyline_summaries",
    "storyline_children",
    "storyline_previews",
    "touch_storylines",
]

#: the design's thresholds: a storyline at 5+ sources over 3+ distinct days ...
STORYLINE_SOURCES = 5
STORYLINE_DAYS = 3
#: ... a macro at 2+ storylines over 30+ days
MACRO_STORYLINES = 2
MACRO_SPAN_DAYS = 30

STORYLINE_COLUMNS = (
    "s.id, s.level, s.anchor_node, s.name, s.description, s.source_count, s.storyline_count, s.started_at,"
    " s.last_source_at, s.salience, s.state, s.retention, s.access_count, s.recall_count, s.last_accessed_at,"
    " s.created_at, s.updated_at"
)


def _idle(at: str, alias: str = "n") -> str:
    """SQL: days from ``alias``'s last mention or recall to ``at``."""
    return (f"greatest(extract(epoch FROM {at} - greatest(coalesce({alias}.last_accessed_at, {alias}.created_at),"
            f" coalesce({alias}.last_mentioned_at, {alias}.created_at))), 0) / 86400.0")


def archive_faded_nodes(at: datetime, limit: int) -> Statement:
    """Archive up to ``limit`` nodes (of every graph) that faded: ``decay`` retention, a candidate
    or active (core never fades), not the owner's own, salience halved every
    ``NODE_HALF_LIFE_DAYS * decay_gradient`` idle days (a candidate's also times its confidence)
    and now under ``FADED_BELOW`` (:func:`agent_memory.lifecycle.faded_salience`). Rows another
    run holds are skipped. Answers ``id`` per node archived."""
    half_life = (f"({NODE_HALF_LIFE_DAYS} * n.decay_gradient"
                 " * CASE WHEN n.state = 'candidate' THEN greatest(n.confidence, 0.1) ELSE 1 END)")
    return (
        "UPDATE graph_nodes u SET state = 'archived' FROM (SELECT n.scope, n.scope_id, n.id FROM graph_nodes n"
        " WHERE n.state IN ('candidate', 'active') AND n.retention = 'decay' AND NOT n.is_owner"
        f" AND n.salience * power(0.5, {_idle('%(at)s::timestamptz')} / {half_life}) < %(below)s"
        " LIMIT %(limit)s FOR UPDATE SKIP LOCKED) x"
        " WHERE u.scope = x.scope AND u.scope_id = x.scope_id AND u.id = x.id RETURNING u.id",
        {"at": at, "below": FADED_BELOW, "limit": limit},
    )


def archive_ephemeral_nodes(at: datetime, limit: int) -> Statement:
    """Archive up to ``limit`` ``ephemeral`` nodes neither mentioned nor recalled for
    ``EPHEMERAL_GRAPH_DAYS`` (whatever their state: ephemeral is a hard expiry; ``keep`` wins
    over it by precedence, so a kept node is never here). Answers ``id`` per node archived."""
    return (
        "UPDATE graph_nodes u SET state = 'archived' FROM (SELECT n.scope, n.scope_id, n.id FROM graph_nodes n"
        " WHERE n.state <> 'archived' AND n.retention = 'ephemeral' AND NOT n.is_owner"
        f" AND {_idle('%(at)s::timestamptz')} > %(days)s LIMIT %(limit)s FOR UPDATE SKIP LOCKED) x"
        " WHERE u.scope = x.scope AND u.scope_id = x.scope_id AND u.id = x.id RETURNING u.id",
        {"at": at, "days": EPHEMERAL_GRAPH_DAYS, "limit": limit},
    )


def dirty_nodes(after: tuple[str, str, UUID] | None, limit: int) -> Statement:
    """Nodes (of every graph) whose notes changed since their description was written, after the
    cursor ``(scope, scope_id, id)``, in key order: ``scope, scope_id, id, name, node_type,
    entity_type, aliases, notes, updated_at``."""
    return (
        "SELECT scope, scope_id, id, name, node_type, entity_type, aliases, notes, updated_at FROM graph_nodes"
        " WHERE is_dirty AND NOT is_owner AND state <> 'archived'"
        " AND (%(s)s::text IS NULL OR (scope, scope_id, id) > (%(s)s, %(sid)s, %(id)s::uuid))"
        " ORDER BY scope, scope_id, id LIMIT %(limit)s",
        {"s": after[0] if after else None, "sid": after[1] if after else None, "id": after[2] if after else None,
         "limit": limit},
    )


def set_node_descriptions(rows: Sequence[dict[str, Any]]) -> Statement:
    """Write regenerated descriptions and their embeddings (``scope, scope_id, id, description,
    embedding`` (a vector literal or None), ``seen``: the ``updated_at`` read). A node changed
    since it was read stays dirty (its new notes get the next run)."""
    return (
        "UPDATE graph_nodes n SET description = t.description, embedding = coalesce(t.embedding::vector, n.embedding),"
        " is_dirty = n.updated_at <> t.seen FROM unnest(%(scope)s::text[], %(sid)s::text[], %(id)s::uuid[],"
        " %(d)s::text[], %(v)s::text[], %(seen)s::timestamptz[]) AS t(scope, scope_id, id, description, embedding, seen)"
        " WHERE n.scope = t.scope AND n.scope_id = t.scope_id AND n.id = t.id",
        {"scope": [r["scope"] for r in rows], "sid": [r["scope_id"] for r in rows], "id": [r["id"] for r in rows],
         "d": [r["description"] for r in rows], "v": [r["embedding"] for r in rows],
         "seen": [r["seen"] for r in rows]},
    )


def refresh_storylines(limit: int) -> Statement:
    """Create or bring up to date the storylines of up to ``limit`` nodes (of every graph) that
    qualify (``STORYLINE_SOURCES`` memories over ``STORYLINE_DAYS`` days, counted from their
    mentions; not archived, not the owner's node) and changed since their storyline was last
    brought up to date: counts and dates, members (the memories that mention the anchor) added
    and those that no longer do removed, marked dirty for a new summary. Answers ``scope,
    scope_id, id`` per storyline touched."""
    return (
        "WITH a AS (SELECT n.scope, n.scope_id, n.id, n.name, n.created_by, n.retention FROM graph_nodes n"
        " WHERE NOT n.is_owner AND n.state <> 'archived' AND n.source_count >= %(sources)s"
        " AND cardinality(n.distinct_days) >= %(days)s AND NOT EXISTS (SELECT 1 FROM graph_storylines s"
        " WHERE s.scope = n.scope AND s.scope_id = n.scope_id AND s.level = 'storyline' AND s.anchor_node = n.id"
        " AND s.updated_at >= n.updated_at) ORDER BY n.scope, n.scope_id, n.id LIMIT %(limit)s),"
        " counted AS (SELECT a.scope, a.scope_id, a.id, a.name, a.created_by, a.retention, count(*) AS sources,"
        " min(g.mentioned_at) AS first, max(g.mentioned_at) AS last FROM a JOIN graph_mentions g"
        " ON g.scope = a.scope AND g.scope_id = a.scope_id AND g.node_id = a.id AND g.source_kind = 'memory'"
        " GROUP BY a.scope, a.scope_id, a.id, a.name, a.created_by, a.retention"
        " HAVING count(*) >= %(sources)s AND count(DISTINCT g.mentioned_at::date) >= %(days)s),"
        " up AS (INSERT INTO graph_storylines AS s (scope, scope_id, id, level, anchor_node, name, source_count,"
        " started_at, last_source_at, retention, created_by)"
        " SELECT scope, scope_id, gen_random_uuid(), 'storyline', id, name, sources, first, last, retention, created_by"
        " FROM counted ON CONFLICT (scope, scope_id, level, anchor_node) DO UPDATE SET name = excluded.name,"
        " source_count = excluded.source_count, started_at = excluded.started_at,"
        " last_source_at = excluded.last_source_at, retention = excluded.retention, is_dirty = true,"
        " state = CASE WHEN s.state = 'archived' THEN 'candidate' ELSE s.state END, updated_at = now()"
        " RETURNING s.scope, s.scope_id, s.id, s.anchor_node),"
        " gone AS (DELETE FROM graph_storyline_members m USING up WHERE m.scope = up.scope"
        " AND m.scope_id = up.scope_id AND m.storyline_id = up.id AND m.member_kind = 'memory'"
        " AND NOT EXISTS (SELECT 1 FROM graph_mentions g WHERE g.scope = up.scope AND g.scope_id = up.scope_id"
        " AND g.node_id = up.anchor_node AND g.source_kind = 'memory' AND g.source_id = m.member_id)),"
        " added AS (INSERT INTO graph_storyline_members (scope, scope_id, storyline_id, member_kind, member_id,"
        " member_at) SELECT up.scope, up.scope_id, up.id, 'memory', g.source_id, g.mentioned_at FROM up"
        " JOIN graph_mentions g ON g.scope = up.scope AND g.scope_id = up.scope_id AND g.node_id = up.anchor_node"
        " AND g.source_kind = 'memory' ON CONFLICT DO NOTHING)"
        " SELECT scope, scope_id, id FROM up",
        {"sources": STORYLINE_SOURCES, "days": STORYLINE_DAYS, "limit": limit},
    )


def refresh_macros(graphs: Sequence[tuple[str, str]]) -> Statement:
    """Create or bring up to date the macros of these graphs (``(scope, scope_id)``): a node
    (not the owner's, not archived) that ``MACRO_STORYLINES``+ storylines belong to (its own, and
    any whose memories mention it at least half the time), together spanning ``MACRO_SPAN_DAYS``+
    days, gets a macro grouping them. A macro whose storylines changed is marked dirty. Answers
    ``scope, scope_id, id`` per macro touched."""
    return (
        "WITH g AS (SELECT * FROM unnest(%(scopes)s::text[], %(ids)s::text[]) AS g(scope, scope_id)),"
        " sl AS (SELECT s.* FROM graph_storylines s JOIN g ON s.scope = g.scope AND s.scope_id = g.scope_id"
        " WHERE s.level = 'storyline' AND s.state <> 'archived'),"
        " ties AS (SELECT sl.scope, sl.scope_id, sl.id AS storyline_id, sl.anchor_node AS node_id FROM sl"
        " UNION SELECT sl.scope, sl.scope_id, sl.id, gm.node_id FROM sl JOIN graph_storyline_members m"
        " ON m.scope = sl.scope AND m.scope_id = sl.scope_id AND m.storyline_id = sl.id AND m.member_kind = 'memory'"
        " JOIN graph_mentions gm ON gm.scope = sl.scope AND gm.scope_id = sl.scope_id AND gm.source_kind = 'memory'"
        " AND gm.source_id = m.member_id GROUP BY sl.scope, sl.scope_id, sl.id, gm.node_id, sl.source_count"
        " HAVING 2 * count(*) >= sl.source_count),"
        " roots AS (SELECT t.scope, t.scope_id, t.node_id, count(*) AS storylines, sum(sl.source_count) AS sources,"
        " min(sl.started_at) AS first, max(sl.last_source_at) AS last FROM ties t JOIN sl ON sl.scope = t.scope"
        " AND sl.scope_id = t.scope_id AND sl.id = t.storyline_id GROUP BY t.scope, t.scope_id, t.node_id"
        " HAVING count(*) >= %(storylines)s AND max(sl.last_source_at) - min(sl.started_at)"
        " >= make_interval(days => %(span)s)),"
        " up AS (INSERT INTO graph_storylines AS s (scope, scope_id, id, level, anchor_node, name, source_count,"
        " storyline_count, started_at, last_source_at, retention, created_by)"
        " SELECT r.scope, r.scope_id, gen_random_uuid(), 'macro', r.node_id, n.name, r.sources, r.storylines,"
        " r.first, r.last, n.retention, n.created_by FROM roots r JOIN graph_nodes n ON n.scope = r.scope"
        " AND n.scope_id = r.scope_id AND n.id = r.node_id AND NOT n.is_owner AND n.state <> 'archived'"
        " ON CONFLICT (scope, scope_id, level, anchor_node) DO UPDATE SET name = excluded.name,"
        " source_count = excluded.source_count, storyline_count = excluded.storyline_count,"
        " started_at = excluded.started_at, last_source_at = excluded.last_source_at,"
        " is_dirty = s.is_dirty OR s.storyline_count <> excluded.storyline_count"
        " OR s.last_source_at <> excluded.last_source_at, updated_at = now()"
        " RETURNING s.scope, s.scope_id, s.id, s.anchor_node),"
        " added AS (INSERT INTO graph_storyline_members (scope, scope_id, storyline_id, member_kind, member_id,"
        " member_at) SELECT up.scope, up.scope_id, up.id, 'storyline', t.storyline_id, sl.last_source_at FROM up"
        " JOIN ties t ON t.scope = up.scope AND t.scope_id = up.scope_id AND t.node_id = up.anchor_node"
        " JOIN sl ON sl.scope = t.scope AND sl.scope_id = t.scope_id AND sl.id = t.storyline_id"
        " ON CONFLICT DO NOTHING)"
        " SELECT scope, scope_id, id FROM up",
        {"scopes": [s for s, _ in graphs], "ids": [i for _, i in graphs], "storylines": MACRO_STORYLINES,
         "span": MACRO_SPAN_DAYS},
    )


def dirty_storylines(level: str, after: tuple[str, str, UUID] | None, limit: int) -> Statement:
    """Storylines or macros (``level``; of every graph) to summarise again, after the cursor ``(scope,
    scope_id, id)`` in key order, with their anchor's name, and for a storyline its newest
    memories' texts (``texts``: up to 12, oldest first), for a macro its storylines' names and
    descriptions (``children``)."""
    return (
        f"SELECT s.scope, s.scope_id, {STORYLINE_COLUMNS}, a.name AS anchor_name,"
        " ARRAY(SELECT x.content FROM (SELECT mi.content, m.member_at, mi.created_at FROM graph_storyline_members m"
        " JOIN memory_items mi ON mi.id = m.member_id WHERE m.scope = s.scope AND m.scope_id = s.scope_id"
        " AND m.storyline_id = s.id AND m.member_kind = 'memory' AND mi.status = 'active'"
        " ORDER BY m.member_at DESC, mi.created_at DESC LIMIT 12) x ORDER BY x.member_at, x.created_at) AS texts,"
        " ARRAY(SELECT c.name || ': ' || c.description FROM graph_storyline_members m JOIN graph_storylines c"
        " ON c.scope = m.scope AND c.scope_id = m.scope_id AND c.id = m.member_id WHERE m.scope = s.scope"
        " AND m.scope_id = s.scope_id AND m.storyline_id = s.id AND m.member_kind = 'storyline'"
        " ORDER BY c.started_at) AS children"
        " FROM graph_storylines s JOIN graph_nodes a ON a.scope = s.scope AND a.scope_id = s.scope_id"
        " AND a.id = s.anchor_node WHERE s.is_dirty AND s.level = %(level)s"
        " AND (%(s)s::text IS NULL OR (s.scope, s.scope_id, s.id) > (%(s)s, %(sid)s, %(id)s::uuid))"
        " ORDER BY s.scope, s.scope_id, s.id LIMIT %(limit)s",
        {"level": level, "s": after[0] if after else None, "sid": after[1] if after else None, "id": after[2] if after else None,
         "limit": limit},
    )


def set_storyline_summaries(rows: Sequence[dict[str, Any]]) -> Statement:
    """Write summaries (``scope, scope_id, id, description, embedding``, ``seen``: the
    ``updated_at`` read); one changed since stays dirty."""
    return (
        "UPDATE graph_storylines s SET description = t.description,"
        " embedding = coalesce(t.embedding::vector, s.embedding), is_dirty = s.updated_at <> t.seen"
        " FROM unnest(%(scope)s::text[], %(sid)s::text[], %(id)s::uuid[], %(d)s::text[], %(v)s::text[],"
        " %(seen)s::timestamptz[]) AS t(scope, scope_id, id, description, embedding, seen)"
        " WHERE s.scope = t.scope AND s.scope_id = t.scope_id AND s.id = t.id",
        {"scope": [r["scope"] for r in rows], "sid": [r["scope_id"] for r in rows], "id": [r["id"] for r in rows],
         "d": [r["description"] for r in rows], "v": [r["embedding"] for r in rows],
         "seen": [r["seen"] for r in rows]},
    )


def explore_storylines(owner: str, vectors: Sequence[str], texts: Sequence[str], node_ids: Sequence[UUID], *,
                       storylines: int, macros: int, weights: tuple[float, float, float], now: datetime,
                       rate: float, floor: float = 0.25) -> Statement:
    """The graph's best ``storylines`` storylines and ``macros`` macros for explore (one
    statement), each with its anchor's name and type and ``similarity`` / ``text_match`` /
    ``score`` as nodes are scored: ``semantic`` is the best of the summary's cosine to the
    queries, a text naming its anchor, and 1 when its anchor is one of the nodes found
    (``node_ids``); time is its last source's. Archived ones, or of an archived anchor, are left out."""
    patterns = ["%" + t.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for t in texts]
    sims = ", ".join(f"1 - (s.embedding <=> %(v{i})s::vector)" for i in range(len(vectors)))
    similarity = f"coalesce(greatest({sims}), 0)" if vectors else "0::float8"
    return (
        f"WITH c AS (SELECT s.id, s.level, {similarity} AS similarity,"
        " CASE WHEN s.anchor_node = ANY(%(ids)s) OR a.canonical_name = ANY(%(texts)s)"
        " OR a.aliases && %(texts)s::text[] THEN 1.0"
        " WHEN EXISTS (SELECT 1 FROM unnest(%(pats)s::text[]) p WHERE a.canonical_name LIKE p) THEN 0.8"
        " ELSE 0.0 END AS text_match, a.name AS anchor_name, a.node_type AS anchor_type,"
        " s.last_source_at, s.salience FROM graph_storylines s JOIN graph_nodes a ON a.scope = s.scope"
        " AND a.scope_id = s.scope_id AND a.id = s.anchor_node WHERE s.scope = 'user' AND s.scope_id = %(g)s"
        " AND s.state <> 'archived' AND a.state <> 'archived'),"
        " scored AS (SELECT c.*, %(ws)s * greatest(c.similarity, c.text_match) + %(wt)s * exp(-%(rate)s"
        " * greatest(extract(epoch FROM %(now)s::timestamptz - c.last_source_at), 0) / 86400.0)"
        " + %(wl)s * c.salience AS score FROM c WHERE greatest(c.similarity, c.text_match) >= %(floor)s),"
        " ranked AS (SELECT scored.*, row_number() OVER (PARTITION BY level ORDER BY score DESC, id) AS place"
        " FROM scored)"
        f" SELECT {STORYLINE_COLUMNS}, r.similarity, r.text_match, r.anchor_name, r.anchor_type, r.score"
        " FROM ranked r JOIN graph_storylines s ON s.scope = 'user' AND s.scope_id = %(g)s AND s.id = r.id"
        " WHERE r.place <= CASE r.level WHEN 'storyline' THEN %(n_story)s ELSE %(n_macro)s END"
        " ORDER BY r.score DESC, s.id",
        {"g": owner, "texts": list(texts), "pats": patterns, "ids": list(node_ids), "ws": weights[0],
         "wt": weights[1], "wl": weights[2], "now": now, "rate": rate, "floor": floor, "n_story": storylines,
         "n_macro": macros, **{f"v{i}": v for i, v in enumerate(vectors)}},
    )


def storyline_previews(identity: Identity, owner: str, ids: Sequence[UUID], per: int) -> Query:
    """For each storyline of ``ids`` (in the caller's graph), its ``per`` newest member memories
    the caller may read (``storyline_id, id, content, created_at``). Tenancy: the visibility rule."""
    rule, params = visible_filter(identity)
    params.update({"g": owner, "ids": list(ids), "per": per})
    return (
        sql.SQL(
            "SELECT x.storyline_id, x.id, x.content, x.created_at FROM unnest(%(ids)s::uuid[]) sid, LATERAL ("
            "SELECT sm.storyline_id, m.id, m.content, m.created_at FROM graph_storyline_members sm"
            " JOIN memory_items m ON m.id = sm.member_id WHERE sm.scope = 'user' AND sm.scope_id = %(g)s"
            " AND sm.storyline_id = sid AND sm.member_kind = 'memory' AND m.status = 'active' AND {live}"
            " AND {rule} ORDER BY sm.member_at DESC, m.created_at DESC LIMIT %(per)s) x"
        ).format(live=sql.SQL(live()), rule=rule),
        params,
    )


def storyline_children(owner: str, ids: Sequence[UUID]) -> Statement:
    """The storylines each macro of ``ids`` groups (in the caller's graph): ``macro_id``, then
    the storyline's columns."""
    return (
        f"SELECT m.storyline_id AS macro_id, {STORYLINE_COLUMNS} FROM graph_storyline_members m"
        " JOIN graph_storylines s ON s.scope = m.scope AND s.scope_id = m.scope_id AND s.id = m.member_id"
        " WHERE m.scope = 'user' AND m.scope_id = %(g)s AND m.storyline_id = ANY(%(ids)s)"
        " AND m.member_kind = 'storyline' ORDER BY s.started_at",
        {"g": owner, "ids": list(ids)},
    )


def touch_storylines(owner: str, ids: Sequence[UUID]) -> Statement:
    """Recalled (explore returned them): counted as nodes are (:func:`.graph.touch_nodes`),
    without waiting on a held row or on the WAL flush."""
    spaced = spaced_recall_sql("last_accessed_at")
    return (
        "WITH async_commit AS (SELECT set_config('synchronous_commit', 'off', true)),"
        " free AS (SELECT id AS free_id FROM graph_storylines WHERE scope = 'user' AND scope_id = %(g)s"
        " AND id = ANY(%(ids)s) ORDER BY id FOR NO KEY UPDATE SKIP LOCKED)"
        " UPDATE graph_storylines SET access_count = access_count + 1,"
        f" recall_count = recall_count + CASE WHEN {spaced} THEN 1 ELSE 0 END, last_accessed_at = now(),"
        " salience = least(1, salience + 0.05 * (1 - salience)), state = CASE WHEN state = 'archived' THEN state"
        f" WHEN recall_count + CASE WHEN {spaced} THEN 1 ELSE 0 END >= 10 THEN 'core' ELSE 'active' END"
        " FROM async_commit, free WHERE scope = 'user' AND scope_id = %(g)s AND id = free_id",
        {"g": owner, "ids": list(ids)},
    )
