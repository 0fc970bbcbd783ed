"""Searching documents by passage: the caller's readable passages ranked for a query.

Hybrid and exact: every passage the caller may read (through its document, as
``get_resource`` and ``list_resources`` decide) is scored by its cosine similarity to the query
and by the query's words in it (``config.keyword_weight`` shares the score between the two).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from .. import queries
from ..config import MemoryConfig
from ..db.requests import Embed, Op, Sql
from ..errors import InvalidInputError
from ..models import Identity, ResourceKind
from ..validation import MAX_QUERY_LENGTH, check_enum, check_k, check_text

__all__ = ["MAX_PASSAGE_HITS", "PassageHit", "search_documents"]

#: the most passages one search answers
MAX_PASSAGE_HITS = 100


@dataclass(frozen=True, slots=True)
class PassageHit:
    """One passage of a document that matches a search: which document (``resource_id``,
    ``kind``, ``title``, ``external_id``), where in it (``index``, characters ``start`` to ``end``
    of the resource's ``content``, ``headings`` above it), its text, and its ``score`` (with the
    ``similarity`` and ``keyword`` evidence it is made of)."""

    resource_id: UUID
    kind: ResourceKind
    title: str | None
    external_id: str | None
    index: int
    start: int
    end: int
    headings: tuple[str, ...]
    content: str
    score: float
    similarity: float
    keyword: float


def _hit(row: dict[str, Any]) -> PassageHit:
    return PassageHit(
        resource_id=row["resource_id"], kind=ResourceKind(row["kind"]), title=row["title"],
        external_id=row["external_id"], index=row["position"], start=row["char_start"], end=row["char_end"],
        headings=tuple(row["headings"] or ()), content=row["content"], score=float(row["score"]),
        similarity=float(row["similarity"]), keyword=float(row["keyword"]))


def search_documents(config: MemoryConfig, identity: Identity, query: Any, *, k: Any = 5,
                     kind: Any = None) -> Op[list[PassageHit]]:
    """The ``k`` passages the caller may read that best match ``query``, best first."""
    query = check_text("query", query, max_length=MAX_QUERY_LENGTH).strip()
    k = check_k(k, MAX_PASSAGE_HITS)
    if kind is not None:
        kind = check_enum("kind", kind, ResourceKind)
        if kind is ResourceKind.CONVERSATION:
            raise InvalidInputError("kind", "conversations are not cut into passages; search() finds what was "
                                            "learned from them (kind='document' or 'project_resource')")
        kind = kind.value
    [vector] = yield Embed((query,), query=True)
    rows = yield Sql(*queries.search_passages(identity, query_vector=vector, query_text=query, k=k,
                                              keyword_weight=config.keyword_weight, kind=kind))
    return [_hit(r) for r in rows]
