"""The knowledge graph: the people, things and ideas memories are about, and how they relate.

- :mod:`.extract`: offline rules that find nodes and relations in a memory (pure);
- :mod:`.resolve`: which existing node a mention is, within one owner's graph (pure);
- :mod:`.rank`: explore's score, notes cut for a prompt, personalised PageRank (pure);
- :mod:`.ops`: ingest, backfill, explore, traverse, merge and split, as operations;
- :mod:`.models`: what they answer.

The statements are in :mod:`agent_memory.queries.graph`; the tables in migration
``0021_knowledge_graph``.
"""

from .extract import Extracted, Found, Link, canonical, extract
from .models import ExploreResult, GraphNode, GraphRelation, MemoryHit, NodeHit, TraverseResult

__all__ = [
    "ExploreResult",
    "Extracted",
    "Found",
    "GraphNode",
    "GraphRelation",
    "Link",
    "MemoryHit",
    "NodeHit",
    "TraverseResult",
    "canonical",
    "extract",
]
