"""What a picture of a graph needs: its nodes and the relations among them, read in two or
three statements (not one per node), for :mod:`.html` and ``agent-memory graph show --html``.
An operation; reads the caller's own graph only (:func:`agent_memory.queries.graph.graph_of`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..db.requests import Op, Sql
from ..models import Identity
from ..queries import graph as gq
from ..validation import check_int
from .models import GraphNode, GraphRelation
from .ops import get_node, node_of, relation_of

__all__ = ["GraphView", "view"]

#: relations read for a picture at most (a page with more is unreadable anyway)
MAX_RELATIONS = 5_000
_EVER = datetime(1, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class GraphView:
    """A graph to draw: its nodes (the caller's own first, then the most mentioned) and every
    relation among them, ended ones included (``valid_to`` set). ``storylines``: the layers
    above nodes, when built (each a mapping with ``title`` and ``node_ids``)."""

    nodes: tuple[GraphNode, ...]
    relations: tuple[GraphRelation, ...]
    storylines: tuple[dict[str, Any], ...] = ()


def view(identity: Identity, *, around: Any = None, limit: Any = 300) -> Op[GraphView]:
    """The caller's graph for a picture: the ``limit`` most mentioned nodes, or with ``around``
    (a node's id or name) that node and the nodes related to it (up to ``limit``)."""
    limit = check_int("limit", limit, 1, 10_000)
    owner = gq.graph_of(identity)[1]
    now = datetime.now(UTC)
    if around is None:
        rows = yield Sql(*gq.list_nodes(owner, node_type=None, name=None, limit=limit))
        nodes = [node_of(r, now) for r in rows]
    else:
        centre, relations = yield from get_node(identity, around)
        others = list(dict.fromkeys(i for r in relations for i in (r.from_id, r.to_id) if i != centre.id))
        rows = (yield Sql(*gq.select_nodes(owner, others[:limit - 1]))) if others else []
        nodes = [centre, *sorted((node_of(r, now) for r in rows), key=lambda n: (-n.source_count, n.name))]
    ids = {n.id for n in nodes}
    names = {n.id: n.name for n in nodes}
    rows = (yield Sql(*gq.relations_of(owner, sorted(ids, key=str), since=_EVER, limit=MAX_RELATIONS))) if ids else []
    relations = [relation_of(r, names, now) for r in rows if r["from_node"] in ids and r["to_node"] in ids]
    return GraphView(tuple(nodes), tuple(relations))
