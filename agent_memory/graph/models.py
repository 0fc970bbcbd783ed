"""What the knowledge graph answers: nodes, relations, and explore's and traverse's results.

The shapes follow the design the graph was built from (``semantic`` people, concepts, entities
and relationships; ``episodic`` memories, sources, storylines and macros) so an agent always
gets one structure; :meth:`ExploreResult.to_dict` is what the tools hand a model.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from ..models import MemoryItem

__all__ = ["ExploreResult", "GraphNode", "GraphRelation", "MemoryHit", "NodeHit", "StorylineHit", "TraverseResult"]


@dataclass(frozen=True, slots=True)
class GraphNode:
    """A person, concept or entity of one graph. ``notes_snippets``: its live notes, newest
    first, cut as the design says (10 notes, 500 characters each, 5,000 in all)."""

    id: UUID
    node_type: str
    entity_type: str
    name: str
    aliases: tuple[str, ...]
    description: str
    notes_snippets: tuple[str, ...]
    is_owner: bool
    confidence: float
    salience: float
    state: str
    retention: str
    source_count: int
    first_mentioned_at: datetime | None
    last_mentioned_at: datetime | None
    last_accessed_at: datetime | None
    created_by: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class GraphRelation:
    """A relation between two nodes: its kind (the six of the design), a free type ("sister",
    "works-at"), attitude and proximity 1-5 where known, and two timelines (``valid_to`` set:
    it ended in the world; ``known_to`` set: memory stopped believing it)."""

    id: UUID
    from_id: UUID
    from_name: str
    to_id: UUID
    to_name: str
    kind: str
    rel_type: str
    description: str
    attitude: int | None
    proximity: int | None
    notes_snippets: tuple[str, ...]
    confidence: float
    salience: float
    state: str
    recorded_by: str
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    known_to: datetime | None


@dataclass(frozen=True, slots=True)
class NodeHit:
    node: GraphNode
    score: float
    explanation: dict[str, float] | None = None


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """A memory explore found, with the nodes it mentions (at most 10)."""

    memory: MemoryItem
    score: float
    mentioned: tuple[tuple[UUID, str, str], ...]  # (id, node_type, name)
    explanation: dict[str, float] | None = None


@dataclass(frozen=True, slots=True)
class StorylineHit:
    """A storyline (``level`` ``"storyline"``: the memories about one node, 5+ over 3+ days) or
    a macro (``"macro"``: 2+ storylines over 30+ days that belong to one node), as explore
    found it. ``full``: returned in detail at this granularity (storylines at 2, macros at 3),
    else as minimal context (id and name). ``previews``: a storyline's newest memories the caller
    may read (``(id, content, created_at)``, at granularity 2); ``children``: a macro's storylines
    (at granularity 3)."""

    id: UUID
    level: str
    name: str
    description: str
    score: float
    anchor_id: UUID
    anchor_name: str
    anchor_type: str
    source_count: int
    storyline_count: int
    started_at: datetime
    last_source_at: datetime
    salience: float
    state: str
    full: bool = True
    previews: tuple[tuple[UUID, str, datetime], ...] = ()
    children: tuple[StorylineHit, ...] = ()
    explanation: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The design's ``StorylineHit`` / ``MacroHit`` (minimal context: id and name only)."""
        key = "storyline_id" if self.level == "storyline" else "macro_id"
        if not self.full:
            return {key: str(self.id), "name": self.name}
        out: dict[str, Any] = {
            key: str(self.id), "name": self.name, "description": self.description,
            "relevance_score": round(self.score, 4), "source_count": self.source_count,
            "started_at": _iso(self.started_at), "last_source_at": _iso(self.last_source_at),
            "anchor": {"entity_key": str(self.anchor_id), "node_type": self.anchor_type.capitalize(),
                       "name": self.anchor_name},
            "salience": round(self.salience, 4), "state": self.state}
        if self.level == "storyline":
            out["preview_sources"] = [{"id": str(i), "content": c[:500], "created_at": _iso(t)}
                                      for i, c, t in self.previews]
        else:
            out["storyline_count"] = self.storyline_count
            out["storylines"] = [c.to_dict() for c in self.children]
        if self.explanation is not None:
            out["explanation"] = self.explanation
        return out


@dataclass(frozen=True, slots=True)
class ExploreResult:
    """``granularity``, the queries run, then the semantic layer (people, concepts, entities,
    relationships) and the episodic one (memories, storylines, macros: what each granularity
    returns in detail is the design's; see :meth:`PrincipalOps.explore`)."""

    granularity: int
    queries: tuple[str, ...]
    people: tuple[NodeHit, ...]
    concepts: tuple[NodeHit, ...]
    entities: tuple[NodeHit, ...]
    relationships: tuple[GraphRelation, ...]
    memories: tuple[MemoryHit, ...]
    storylines: tuple[StorylineHit, ...] = ()
    macros: tuple[StorylineHit, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The design's result shape, JSON-ready (ids and times as strings)."""
        def node(h: NodeHit) -> dict[str, Any]:
            n = h.node
            out: dict[str, Any] = {"entity_key": str(n.id), "node_type": n.node_type.capitalize(), "type": n.entity_type or None,
                   "name": n.name, "description": n.description, "notes_snippets": list(n.notes_snippets),
                   "salience": round(n.salience, 4), "state": n.state, "score": round(h.score, 4),
                   "last_accessed_at": _iso(n.last_accessed_at)}
            if h.explanation is not None:
                out["explanation"] = h.explanation
            return out

        def memory(h: MemoryHit) -> dict[str, Any]:
            out: dict[str, Any] = {"id": str(h.memory.id), "content": h.memory.content, "memory_type": h.memory.memory_type.value,
                   "created_at": _iso(h.memory.created_at), "relevance_score": round(h.score, 4),
                   "mentioned_nodes": [{"entity_key": str(i), "node_type": t.capitalize(), "name": nm}
                                       for i, t, nm in h.mentioned]}
            if h.explanation is not None:
                out["explanation"] = h.explanation
            return out

        return {
            "meta": {"granularity": self.granularity, "query_used": list(self.queries)},
            "semantic": {"people": [node(h) for h in self.people], "concepts": [node(h) for h in self.concepts],
                         "entities": [node(h) for h in self.entities],
                         "relationships": [relation_dict(r) for r in self.relationships]},
            "episodic": {"memories": [memory(h) for h in self.memories], "sources": [],
                         "storylines": [s.to_dict() for s in self.storylines],
                         "macros": [m.to_dict() for m in self.macros]},
        }


@dataclass(frozen=True, slots=True)
class TraverseResult:
    """The nodes a walk reached, best first (with their scores), and the relations among them."""

    mode: str
    nodes: tuple[NodeHit, ...]
    relationships: tuple[GraphRelation, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode,
                "nodes": [{"entity_key": str(h.node.id), "node_type": h.node.node_type.capitalize(),
                           "type": h.node.entity_type or None, "name": h.node.name,
                           "description": h.node.description, "score": round(h.score, 6)} for h in self.nodes],
                "relationships": [relation_dict(r) for r in self.relationships]}


def relation_dict(r: GraphRelation) -> dict[str, Any]:
    """One relation as the design's ``RelationshipHit``, JSON-ready."""
    d = asdict(r)
    return {"from_entity_key": str(r.from_id), "from_name": r.from_name, "to_entity_key": str(r.to_id),
            "to_name": r.to_name, "relationship_kind": r.kind, "relationship_type": r.rel_type,
            "description": r.description, "attitude": r.attitude, "proximity": r.proximity,
            "notes_snippets": list(r.notes_snippets), "salience": round(r.salience, 4), "state": r.state,
            "valid_from": _iso(d["valid_from"]), "valid_to": _iso(d["valid_to"])}


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()
