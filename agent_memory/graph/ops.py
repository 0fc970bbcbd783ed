"""The knowledge graph's operations, as generators of I/O requests (:mod:`agent_memory.db.requests`).

Writing: :func:`ingest` is called in the transaction that stores a memory (save, put, import,
extraction, which saves through them) and by :func:`backfill`; it extracts by rules (pure,
:mod:`.extract`), resolves within the writer's own graph (:mod:`.resolve`) and writes in two
statements (more when it links nodes), none when the memory names nothing. No embedding is
made: a new node takes the vector of the memory that first mentions it (its first note).

Reading: :func:`explore` and :func:`traverse` read the caller's graph only
(:func:`agent_memory.queries.graph.graph_of`); the memories they return are read through the
same tenancy rule as search.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

from ..config import MemoryConfig
from ..db.requests import Commit, Embed, Op, Sql
from ..errors import InvalidInputError
from ..models import Identity
from ..queries import graph as gq
from ..queries import graph_lifecycle as lq
from ..queries import search as search_queries
from ..queries.items import vector_literal
from ..queries.rows import row_to_item
from ..validation import check_int, check_list, check_text, check_uuid
from .extract import OWNER, Extracted, Link, canonical, extract
from .models import ExploreResult, GraphNode, GraphRelation, MemoryHit, NodeHit, StorylineHit, TraverseResult
from .rank import RECENCY_RATE, Weights, notes_snippets, personalized_pagerank, score
from .resolve import resolve

__all__ = ["KINDS", "backfill", "explore", "get_node", "ingest", "list_nodes", "merge", "split", "traverse"]

#: the six relation kinds of the design
KINDS = ("has_relationship_with", "engages_with", "associated_with", "relates_to", "involves", "connected_to")
_TYPES = ("person", "concept", "entity")
_MAX_QUERIES = 5
#: a node no query is near (cosine) and no text names is not an explore hit
_NODE_FLOOR = 0.25
#: a walk's bounds (traverse ppr): edges read per node and hop, the newest sources of a node its
#: co-mentions are counted over, and the nodes a hop goes on from (the most strongly tied)
_WALK_PER_NODE = 15
_WALK_SOURCES = 50
_WALK_FRONTIER = 25
_MAX_TEXT = 500
#: names a caller (or their model) gives their own node
_ME = frozenset({"me", "@me", "myself", "user", "the user"})


_PHRASES = {"works-at": ("works at", "worked at"), "lives-in": ("lives in", "lived in"),
            "visits": ("visited", "visited"), "uses": ("uses", "used"),
            "job-offer-from": ("has a job offer from", "had a job offer from"), "studies-at": ("studies at", "studied at")}


def _describe(link: Link) -> str:
    """The relation in one sentence (offline: from its type)."""
    phrase = _PHRASES.get(link.rel_type)
    if phrase:
        return f"The user {phrase[1] if link.ended else phrase[0]} {link.target}."
    return f"{link.target} is the user's {link.rel_type}."


def ingest(identity: Identity, memory_id: UUID, content: str, vector: Sequence[float] | str | None, *,
           at: datetime | None = None, found: Extracted | None = None, retention: str = "decay") -> Op[int]:
    """Add what one memory says to the writer's graph; answers the number of nodes it mentions.
    Runs inside the caller's transaction (no Commit). ``at``: when the memory's facts happened
    (its ``valid_from``; default now), the day its mentions count for (storylines);
    ``retention``: the memory's, which its nodes inherit by precedence."""
    found = extract(content) if found is None else found
    if not found.found:
        return 0
    if vector is not None and not isinstance(vector, str):
        vector = vector_literal(vector)
    owner_graph = gq.graph_of(identity)[1]
    keys = [canonical(f.name) for f in found.found]
    people = [k for f, k in zip(found.found, keys, strict=True) if f.node_type == "person"]
    existing = yield Sql(*gq.resolution_candidates(owner_graph, keys, people))
    matched = resolve(found.found, existing)
    # a capitalised word opening a sentence counts only as a name already known (by name or alias)
    def known(key: str) -> bool:
        hit = matched.get(key)
        return hit is not None and (hit["canonical_name"] == key or key in (hit["aliases"] or ()))

    kept = [(f, k) for f, k in zip(found.found, keys, strict=True) if not f.known_only or known(k)]
    if not kept:
        return 0
    found = Extracted(tuple(f for f, _ in kept), found.links)
    keys = [k for _, k in kept]
    description = content if len(content) <= 200 else content[:197] + "..."
    rows: list[dict[str, Any]] = []
    for f, key in zip(found.found, keys, strict=True):
        hit = matched.get(key)
        if hit is not None:
            rows.append({"node_type": hit["node_type"], "entity_type": hit["entity_type"], "name": f.name,
                         "canonical_name": hit["canonical_name"],
                         "alias": key if key != hit["canonical_name"] else None,
                         "confidence": f.confidence, "is_owner": False, "description": description,
                         "mention": True})
        else:
            rows.append({"node_type": f.node_type, "entity_type": f.entity_type if f.node_type == "entity" else "",
                         "name": f.name, "canonical_name": key, "alias": None, "confidence": f.confidence,
                         "is_owner": False, "description": description,
                         "mention": True})
    if found.links:
        rows.append({"node_type": "person", "entity_type": "", "name": identity.user_id, "canonical_name": OWNER,
                     "alias": None, "confidence": 1.0, "is_owner": True, "description": "The user.",
                     "mention": False})
    # one row per node (two spellings of one node in a memory would be one conflict twice)
    unique: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        unique.setdefault((r["node_type"], r["entity_type"], r["canonical_name"]), r)
    # in one order (of the unique key), so two saves that name the same nodes never deadlock
    ordered = [unique[k] for k in sorted(unique)]
    # the nodes and the memory's mentions of them in one statement
    written = yield Sql(*gq.upsert_nodes(owner_graph, identity.user_id, ordered, note=content,
                                         source_id=memory_id, at=at, vector=vector, mention_kind="memory",
                                         retention=retention))
    ids = {(r["node_type"], r["entity_type"], r["canonical_name"]): r["id"] for r in written}
    by_key: dict[str, UUID] = {}
    for f, key, r in zip(found.found, keys, rows, strict=False):
        by_key[key] = ids[(r["node_type"], r["entity_type"], r["canonical_name"])]
    owner_id = ids.get(("person", "", OWNER))
    mentioned = sorted({v for k, v in by_key.items()}, key=str)
    current: list[dict[str, Any]] = []
    for link in found.links:
        src = owner_id if link.source == OWNER else by_key.get(canonical(link.source))
        dst = by_key.get(canonical(link.target))
        if src is None or dst is None or src == dst:
            continue
        row = {"from_node": src, "to_node": dst, "kind": link.kind, "rel_type": link.rel_type,
               "description": link.description or _describe(link), "attitude": link.attitude,
               "proximity": link.proximity, "valid_from": link.valid_from, "valid_to": link.valid_to}
        if link.ended:
            yield Sql(*gq.close_relation(owner_graph, identity.user_id, row, note=content, source_id=memory_id,
                                         at=at), fetch="none")
        else:
            current.append(row)
    if current:
        seen: dict[tuple[Any, Any, str], dict[str, Any]] = {}
        for r in current:
            seen.setdefault((r["from_node"], r["to_node"], r["rel_type"]), r)
        yield Sql(*gq.upsert_relations(owner_graph, identity.user_id, [seen[k] for k in sorted(seen, key=str)],
                                       note=content,
                                       source_id=memory_id, at=at), fetch="none")
    return len(mentioned)


def backfill(identity: Identity, *, batch: int = 200, limit: int | None = None, model: Any = None) -> Op[int]:
    """Build the caller's graph from their memories written before it existed (or while it was
    off): oldest first, a transaction per ``batch``; a memory already mentioned is skipped, so a
    run that stops half way is simply run again. With ``model``, each batch is also read by the
    model (:mod:`.model_extract`, with no transaction open); if it fails, the rules read it.
    Answers how many memories were read."""
    from .model_extract import combine, learn  # the model's reading (kept out of the save path)

    batch = check_int("batch", batch, 1, 10_000)
    done = 0
    cursor: tuple[datetime, UUID] | None = None
    while limit is None or done < limit:
        rows = yield Sql(*gq.unmentioned_memories(identity.user_id, cursor, batch))
        if not rows:
            break
        said: list[Extracted] | None = None
        if model is not None:
            yield Commit()
            said = yield from learn(model, [r["content"] for r in rows])
        for pos, r in enumerate(rows):
            found = None if said is None else combine(said[pos], extract(r["content"]))
            yield from ingest(identity, r["id"], r["content"], r["embedding"], at=r["valid_from"] or r["created_at"],
                              found=found, retention=r["retention"])
            cursor = (r["created_at"], r["id"])
            done += 1
        yield Commit()
    return done


def node_of(row: Mapping[str, Any], now: datetime) -> GraphNode:
    return GraphNode(
        id=row["id"], node_type=row["node_type"], entity_type=row["entity_type"], name=row["name"],
        aliases=tuple(row["aliases"] or ()), description=row["description"],
        notes_snippets=notes_snippets(row["notes"] or (), now), is_owner=row["is_owner"],
        confidence=float(row["confidence"]), salience=float(row["salience"]), state=row["state"],
        retention=row["retention"], source_count=row["source_count"], first_mentioned_at=row["first_mentioned_at"],
        last_mentioned_at=row["last_mentioned_at"], last_accessed_at=row["last_accessed_at"],
        created_by=row["created_by"], created_at=row["created_at"], updated_at=row["updated_at"],
    )


def _named(owner: str, rows: Sequence[Mapping[str, Any]], now: datetime) -> Op[list[GraphRelation]]:
    """Relation rows as :class:`GraphRelation`, with their ends' names (one statement)."""
    ends = sorted({i for r in rows for i in (r["from_node"], r["to_node"])}, key=str)
    names = {r["id"]: r["name"] for r in (yield Sql(*gq.node_names(owner, ends)))} if ends else {}
    return [relation_of(r, names, now) for r in rows]


def relation_of(row: Mapping[str, Any], names: Mapping[UUID, str], now: datetime) -> GraphRelation:
    return GraphRelation(
        id=row["id"], from_id=row["from_node"], from_name=names.get(row["from_node"], ""), to_id=row["to_node"],
        to_name=names.get(row["to_node"], ""), kind=row["kind"], rel_type=row["rel_type"], description=row["description"],
        attitude=row["attitude"], proximity=row["proximity"], notes_snippets=notes_snippets(row["notes"] or (), now),
        confidence=float(row["confidence"]), salience=float(row["salience"]), state=row["state"],
        recorded_by=row["recorded_by"], valid_from=row["valid_from"], valid_to=row["valid_to"],
        recorded_at=row["recorded_at"], known_to=row["known_to"],
    )


_FILTER_KEYS = ("min_attitude", "max_attitude", "min_proximity", "max_proximity", "relationship_types",
                "exclude_relationship_types")


def _filters(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError("relationship_filters", f"must be a dict, got {type(value).__name__}")
    unknown = set(value) - set(_FILTER_KEYS)
    if unknown:
        raise InvalidInputError("relationship_filters", f"has unknown keys {sorted(unknown)}; allowed: "
                                                        f"{', '.join(_FILTER_KEYS)}")
    out: dict[str, Any] = {}
    for k in ("min_attitude", "max_attitude", "min_proximity", "max_proximity"):
        if value.get(k) is not None:
            out[k] = check_int(f"relationship_filters.{k}", value[k], 1, 5)
    for k, to in (("relationship_types", "types"), ("exclude_relationship_types", "exclude_types")):
        if value.get(k) is not None:
            out[to] = [check_text(f"relationship_filters.{k}", t, max_length=100).strip().lower()
                       for t in check_list(f"relationship_filters.{k}", value[k], max_items=50)]
    return out


def _texts(field: str, value: Any, most: int) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    items = [check_text(field, v, max_length=_MAX_TEXT).strip() for v in check_list(field, value, max_items=most)]
    return [i for i in items if i]


def explore(
    config: MemoryConfig, identity: Identity, *, queries: Any = None, text_matches: Any = None,
    relationship_filters: Any = None, granularity: Any = 1, semantic_weight: Any = 0.3, time_weight: Any = 0.3,
    salience_weight: Any = 0.4, return_explanations: bool = False, touch: bool = True,
) -> Op[ExploreResult]:
    """Nodes (by similarity of their notes to ``queries`` and by name for ``text_matches``),
    the relations touching the best of them (after ``relationship_filters``), and the memories
    that mention them or answer the queries, each scored ``semantic * match + time * recency +
    salience * salience``."""
    qs = _texts("queries", queries, _MAX_QUERIES)
    texts = _texts("text_matches", text_matches, 20)
    if not qs and not texts:
        raise InvalidInputError("queries", "give at least one query or text match (a name, a word)")
    gran = check_int("granularity", granularity, 1, 3)
    filters = _filters(relationship_filters)
    weights = Weights(semantic_weight, time_weight, salience_weight)
    now = datetime.now(UTC)
    vectors: list[str] = []
    raw: list[Any] = []
    if qs:
        raw = list((yield Embed(tuple(qs), query=True)))
        vectors = [vector_literal(v) for v in raw]
    owner = gq.graph_of(identity)[1]
    keys = [canonical(t) for t in texts]
    # scored in the statement (the sum rank.score makes), best five read whole
    rows = yield Sql(*gq.node_candidates(owner, vectors, keys, 5, weights=(weights.semantic, weights.time,
                                                                         weights.salience),
                                         floor=_NODE_FLOOR, now=now, rate=RECENCY_RATE))
    top: list[NodeHit] = []
    for r in rows:
        total, parts = score(weights, similarity=float(r["similarity"]), text=float(r["text_match"]),
                             updated=r["updated_at"], salience=float(r["salience"]), now=now)
        top.append(NodeHit(node_of(r, now), total, parts if return_explanations else None))
    top_ids = [h.node.id for h in top]
    relations: list[GraphRelation] = []
    if top_ids:
        rel_rows = yield Sql(*gq.relations_of(owner, top_ids, min_attitude=filters.get("min_attitude"),
                                              max_attitude=filters.get("max_attitude"),
                                              min_proximity=filters.get("min_proximity"),
                                              max_proximity=filters.get("max_proximity"),
                                              types=filters.get("types"), exclude_types=filters.get("exclude_types"),
                                              limit=10, names=True))
        relations = [relation_of(r, {r["from_node"]: r["from_name"], r["to_node"]: r["to_name"]}, now)
                     for r in rel_rows]
    memories: list[MemoryHit] = []
    if gran == 1 and (top_ids or vectors):
        # the memories that mention the nodes found, and those nearest the queries, in one statement
        near: list[UUID] = []
        for v in raw:  # exact nearest from the search index, under the same tenancy rule as search
            q, p = search_queries.similar_items(identity, None, v, 0.0, 5)
            near.extend(r["id"] for r in (yield Sql(q, p)) if r["id"] not in near)
        mem_rows = yield Sql(*gq.explore_memories(identity, owner, top_ids, vectors, near, mentioning=20))
        mem_rows = _best_mentioning(mem_rows, set(near), 20)
        node_score = {h.node.id: h.score for h in top}
        hits: list[MemoryHit] = []
        for r in mem_rows:
            item = row_to_item(r)
            link = max((node_score.get(n, 0.0) for n in r["node_ids"]), default=0.0)
            # without a query, a memory that mentions a node found is a full match
            sim = float(r["similarity"]) if vectors else (1.0 if r["node_ids"] else 0.0)
            total, parts = score(weights, similarity=sim, text=0.0, updated=item.created_at, salience=link, now=now)
            mentioned = tuple((UUID(str(i)), str(t), str(nm)) for i, t, nm in r["mentions"])
            hits.append(MemoryHit(item, total, mentioned, parts if return_explanations else None))
        hits.sort(key=lambda h: (-h.score, str(h.memory.id)))
        memories = hits[:5]
    storylines, macros = yield from _arcs(identity, owner, gran, vectors, keys, top_ids, weights, now,
                                          return_explanations)
    if touch and top_ids:
        yield Sql(*gq.touch_nodes(owner, top_ids), fetch="none")
    if touch and (storylines or macros):
        yield Sql(*lq.touch_storylines(owner, [h.id for h in (*storylines, *macros)]), fetch="none")
    by_type = {t: tuple(h for h in top if h.node.node_type == t) for t in _TYPES}
    return ExploreResult(gran, tuple(qs) + tuple(texts), by_type["person"], by_type["concept"], by_type["entity"],
                         tuple(relations), tuple(memories), storylines, macros)


#: per granularity, how many storylines and macros explore returns (the design's table)
_ARCS = {1: (3, 2), 2: (5, 2), 3: (0, 5)}


def _arcs(identity: Identity, owner: str, gran: int, vectors: Sequence[str], keys: Sequence[str],
          top_ids: Sequence[UUID], weights: Weights, now: datetime, explain: bool
          ) -> Op[tuple[tuple[StorylineHit, ...], tuple[StorylineHit, ...]]]:
    """explore's storylines and macros: in full at their granularity (2: storylines with their
    newest memories the caller may read; 3: macros with their storylines), else as names."""
    n_story, n_macro = _ARCS[gran]
    rows = yield Sql(*lq.explore_storylines(owner, vectors, keys, top_ids, storylines=n_story, macros=n_macro,
                                            weights=(weights.semantic, weights.time, weights.salience), now=now,
                                            rate=RECENCY_RATE, floor=_NODE_FLOOR))
    if not rows:
        return (), ()
    previews: dict[UUID, list[tuple[UUID, str, datetime]]] = {}
    children: dict[UUID, list[StorylineHit]] = {}
    if gran == 2:
        ids = [r["id"] for r in rows if r["level"] == "storyline"]
        if ids:
            q, p = lq.storyline_previews(identity, owner, ids, 3)
            for r in (yield Sql(q, p)):
                previews.setdefault(r["storyline_id"], []).append((r["id"], r["content"], r["created_at"]))
    if gran == 3:
        ids = [r["id"] for r in rows if r["level"] == "macro"]
        if ids:
            for r in (yield Sql(*lq.storyline_children(owner, ids))):
                children.setdefault(r["macro_id"], []).append(_arc(r, full=True, score=0.0))

    def hit(r: Mapping[str, Any]) -> StorylineHit:
        full = (gran == 2 and r["level"] == "storyline") or (gran == 3 and r["level"] == "macro")
        parts = None
        if explain:
            parts = score(weights, similarity=float(r["similarity"]), text=float(r["text_match"]),
                          updated=r["last_source_at"], salience=float(r["salience"]), now=now)[1]
        return _arc(r, full=full, score=float(r["score"]), previews=tuple(previews.get(r["id"], ())),
                    children=tuple(children.get(r["id"], ())), explanation=parts)

    return (tuple(hit(r) for r in rows if r["level"] == "storyline"),
            tuple(hit(r) for r in rows if r["level"] == "macro"))


def _arc(r: Mapping[str, Any], *, full: bool, score: float, previews: tuple[Any, ...] = (),
         children: tuple[StorylineHit, ...] = (), explanation: dict[str, float] | None = None) -> StorylineHit:
    return StorylineHit(
        id=r["id"], level=r["level"], name=r["name"], description=r["description"], score=score,
        anchor_id=r["anchor_node"], anchor_name=r.get("anchor_name") or r["name"],
        anchor_type=r.get("anchor_type") or "", source_count=r["source_count"],
        storyline_count=r["storyline_count"], started_at=r["started_at"], last_source_at=r["last_source_at"],
        salience=float(r["salience"]), state=r["state"], full=full, previews=previews, children=children,
        explanation=explanation)


def _best_mentioning(rows: Sequence[Mapping[str, Any]], near: set[UUID], most: int) -> list[Mapping[str, Any]]:
    """The nearest memories, and of those that mention the nodes found, the ``most`` that mention
    most of them (then the newest): the statement read a few more, to check who may read them."""
    mentioning = sorted((r for r in rows if r["id"] not in near),
                        key=lambda r: (-len(r["node_ids"]), -r["created_at"].timestamp()))
    return [r for r in rows if r["id"] in near] + mentioning[:most]


def _seed_ids(owner: str, seeds: Any) -> Op[list[UUID]]:
    """Seeds as node ids; a name (not a UUID) is looked up by canonical name or alias."""
    out: list[UUID] = []
    for s in check_list("seed_nodes", seeds, max_items=50):
        try:
            out.append(check_uuid(s, "seed_nodes"))
        except InvalidInputError:
            name = canonical(check_text("seed_nodes", s, max_length=_MAX_TEXT))
            if s == owner or name in _ME:
                name = OWNER
            rows = yield Sql(*gq.list_nodes(owner, node_type=None, name=name, limit=1))
            if not rows:
                raise InvalidInputError("seed_nodes", f"no node named {s!r} in your graph; find nodes with "
                                                      "explore() or list them with graph_nodes()") from None
            out.append(rows[0]["id"])
    return out


def traverse(
    identity: Identity, *, mode: Any = "ppr", seed_nodes: Any = (), max_depth: Any = 3, damping: Any = 0.85,
    top_k: Any = 20, relation_kinds: Any = None, relationship_types: Any = None, direction: Any = "both",
    min_attitude: Any = None, max_attitude: Any = None, min_proximity: Any = None, max_proximity: Any = None,
    valid_at: Any = None, since: Any = None, until: Any = None, max_edges: int = 5000,
) -> Op[TraverseResult]:
    """``ppr``: personalised PageRank from ``seed_nodes`` over the caller's graph, walked at most
    ``max_depth`` hops and ``max_edges`` edges out; ``pattern``: the relations matching the
    filters (from/to/either side of the seeds, or anywhere without seeds), with their nodes."""
    if mode not in ("ppr", "pattern"):
        raise InvalidInputError("mode", f"must be 'ppr' or 'pattern', got {mode!r}")
    depth = check_int("max_depth", max_depth, 1, 5)
    k = check_int("top_k", top_k, 1, 200)
    if isinstance(damping, bool) or not isinstance(damping, (int, float)) or not 0 < damping < 1:
        raise InvalidInputError("damping", "must be a number between 0 and 1 (0.85 is usual)")
    if direction not in ("out", "in", "both"):
        raise InvalidInputError("direction", f"must be 'out', 'in' or 'both', got {direction!r}")
    owner = gq.graph_of(identity)[1]
    now = datetime.now(UTC)
    seeds = yield from _seed_ids(owner, seed_nodes)
    if mode == "ppr":
        if not seeds:
            raise InvalidInputError("seed_nodes", "ppr needs at least one seed node (an entity_key from explore)")
        edges: dict[tuple[Any, Any], float] = {}
        seen, frontier = set(seeds), list(seeds)
        for _ in range(depth):
            if not frontier or len(edges) >= max_edges:
                break
            rows = yield Sql(*gq.walk_edges(owner, frontier, per_node=_WALK_PER_NODE,
                                            sources_per_node=_WALK_SOURCES))
            step = []
            for r in rows:  # an edge read from both its ends (on two hops) counts once
                pair = (r["a"], r["b"]) if str(r["a"]) < str(r["b"]) else (r["b"], r["a"])
                if pair not in edges:
                    step.append((r["a"], r["b"], float(r["weight"])))
                    edges[pair] = float(r["weight"])
                if len(edges) >= max_edges:
                    break
            # the next hop starts from the new nodes most strongly tied to this one
            pull: dict[Any, float] = {}
            owners = {r["b"] for r in rows if r["b_owner"]}
            for _a, b, w in step:
                if b not in seen and b not in owners:
                    pull[b] = pull.get(b, 0.0) + w
            seen |= set(pull)
            frontier = sorted(pull, key=lambda n: (-pull[n], str(n)))[:_WALK_FRONTIER]
        ranks = personalized_pagerank([(a, b, w) for (a, b), w in edges.items()], seeds, damping=float(damping))
        best = sorted(ranks.items(), key=lambda kv: (-kv[1], str(kv[0])))[:k]
        rows = (yield Sql(*gq.select_nodes(owner, [n for n, _ in best]))) if best else []
        by_id = {r["id"]: r for r in rows}
        hits = tuple(NodeHit(node_of(by_id[n], now), s) for n, s in best if n in by_id and s > 0)
        ids = [h.node.id for h in hits]
        rel_rows = (yield Sql(*gq.relations_among(owner, ids, 100))) if ids else []
        inside = set(ids)
        names = {i: by_id[i]["name"] for i in inside}
        rels = tuple(relation_of(r, names, now) for r in rel_rows if r["from_node"] in inside and r["to_node"] in inside)
        return TraverseResult("ppr", hits, rels)
    from ..validation import check_as_of

    kinds = _texts("relation_kinds", relation_kinds, 6) or None
    for kd in kinds or ():
        if kd not in KINDS:
            raise InvalidInputError("relation_kinds", f"{kd!r} is not a kind; kinds: {', '.join(KINDS)}")
    types = [t.lower() for t in _texts("relationship_types", relationship_types, 50)] or None
    def level(name: str, value: Any) -> int | None:
        return None if value is None else check_int(name, value, 1, 5)

    rel_rows = yield Sql(*gq.relations_of(
        owner, seeds or None, direction=direction, kinds=kinds, types=types, valid_at=check_as_of(valid_at, "valid_at"),
        since=check_as_of(since, "since"), until=check_as_of(until, "until"), limit=k * 5,
        min_attitude=level("min_attitude", min_attitude), max_attitude=level("max_attitude", max_attitude),
        min_proximity=level("min_proximity", min_proximity), max_proximity=level("max_proximity", max_proximity)))
    rels = tuple((yield from _named(owner, rel_rows, now)))[: k * 5]
    ends = sorted({i for r in rels for i in (r.from_id, r.to_id)} - set(seeds), key=str)
    node_rows = (yield Sql(*gq.select_nodes(owner, ends))) if ends else []
    hits = tuple(NodeHit(node_of(r, now), 1.0) for r in node_rows if not r["is_owner"])[:k]
    return TraverseResult("pattern", hits, rels)


def list_nodes(identity: Identity, *, node_type: Any = None, name: Any = None, limit: Any = 100) -> Op[list[GraphNode]]:
    """The caller's nodes, most mentioned first; ``name`` finds one by name or alias."""
    if node_type is not None and node_type not in _TYPES:
        raise InvalidInputError("node_type", f"must be one of {', '.join(_TYPES)}, got {node_type!r}")
    key = None if name is None else canonical(check_text("name", name, max_length=_MAX_TEXT))
    rows = yield Sql(*gq.list_nodes(gq.graph_of(identity)[1], node_type=node_type, name=key,
                                    limit=check_int("limit", limit, 1, 10_000)))
    now = datetime.now(UTC)
    return [node_of(r, now) for r in rows]


def get_node(identity: Identity, node: Any) -> Op[tuple[GraphNode, list[GraphRelation]]]:
    """One node of the caller's graph (by id or name) and its relations, current and past."""
    owner = gq.graph_of(identity)[1]
    [node_id] = yield from _seed_ids(owner, [node])
    rows = yield Sql(*gq.select_nodes(owner, [node_id]))
    if not rows:
        raise InvalidInputError("node", f"no node {node!r} in your graph; list them with graph_nodes()")
    now = datetime.now(UTC)
    rels = yield Sql(*gq.relations_of(owner, [node_id], since=datetime(1, 1, 1, tzinfo=UTC), limit=500))
    return node_of(rows[0], now), (yield from _named(owner, rels, now))


def merge(identity: Identity, keep: Any, absorb: Any) -> Op[GraphNode]:
    """Two nodes are one (a nickname, a misspelling the rules did not catch): ``absorb`` joins
    ``keep``, its names become aliases, its mentions, relations and notes move over."""
    owner = gq.graph_of(identity)[1]
    [k] = yield from _seed_ids(owner, [keep])
    [a] = yield from _seed_ids(owner, [absorb])
    if k == a:
        raise InvalidInputError("absorb", "is the same node as keep; name two different nodes")
    rows = yield Sql(*gq.select_nodes(owner, [k, a]))
    if any(r["is_owner"] for r in rows if r["id"] == a):
        raise InvalidInputError("absorb", "is your own node; merge another node into it instead")
    for statement in gq.merge_nodes(owner, k, a):
        yield Sql(*statement, fetch="none")
    [row] = yield Sql(*gq.select_nodes(owner, [k]))
    return node_of(row, datetime.now(UTC))


def split(identity: Identity, node: Any, name: Any, memory_ids: Any) -> Op[GraphNode]:
    """Part of a node is someone (or something) else: a new node ``name`` of the same kind takes
    the mentions and notes of ``memory_ids``; answers the new node."""
    owner = gq.graph_of(identity)[1]
    [node_id] = yield from _seed_ids(owner, [node])
    name = check_text("name", name, max_length=200).strip()
    key = canonical(name)
    if not key:
        raise InvalidInputError("name", "must name the new node")
    mems = [check_uuid(m) for m in check_list("memory_ids", memory_ids, max_items=10_000)]
    if not mems:
        raise InvalidInputError("memory_ids", "name the memories that are about the new node")
    taken = yield Sql(*gq.list_nodes(owner, node_type=None, name=key, limit=1))
    if taken and taken[0]["id"] != node_id:  # the node's own alias is the name being split off
        raise InvalidInputError("name", f"{name!r} is already a node of your graph; merge() moves mentions into it")
    new_id = uuid4()
    for statement in gq.split_node(owner, identity.user_id, node_id, new_id, name, key, mems):
        yield Sql(*statement, fetch="none")
    [row] = yield Sql(*gq.select_nodes(owner, [new_id]))
    return node_of(row, datetime.now(UTC))
