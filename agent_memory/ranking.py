"""Ranking of search candidates: pure functions, testable without a database.

``final = relevance*w_sim + confidence*w_conf + scope_priority*w_scope`` (the
spec's formula), where *relevance* fuses the two kinds of evidence:

    relevance = (1 - keyword_weight) * cosine + keyword_weight * keyword

*keyword* is BM25 over PostgreSQL's own lexemes (english stemming, stop
words removed) with IDF from the caller's visible rows, squashed to [0, 1) by
``bm25 / (bm25 + BM25_HALF)`` so it is absolute (a weak match stays weak
however few rows match). ``BM25_B = 0`` (no length normalisation): memories
are short, and without it a row's score depends only on the row and the
caller's collection (IDF), never on which other rows were fetched as
candidates, so it equals the score an exact scan of every row would give.

Chosen on the LoCoMo dev split (BENCHMARKS.md, ``benchmarks/locomo.py --sweep``),
overall Recall@10 / MRR over categories 1-4 with MiniLM: vector only
0.541 / 0.356, BM25 only 0.668 / 0.518, this fusion 0.707 / 0.546 (the
textbook b=0.75 gives 0.700 / 0.518; the MRR gain is outside bootstrap noise,
the Recall@10 gain is not). Max-normalised BM25 (best 0.707) and RRF
(at most 0.696) were no better and depend on the candidate set. Every
``keyword_weight`` 0.4-0.6 with ``BM25_HALF`` 3-12 scores 0.699-0.710 and k1
0.6-2 changes nothing: a plateau, so the defaults sit in its middle rather
than on this dev split's best cell.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["BM25_B", "BM25_HALF", "BM25_K1", "Weights", "bm25_scores", "idf", "parse_tsvector", "rank", "squash"]

BM25_K1 = 1.2
#: no document-length normalisation (see the module docstring); the SQL side assumes it
BM25_B = 0.0
#: the BM25 score that maps to keyword evidence 0.5
BM25_HALF = 5.0

_TSV_ENTRY = re.compile(r"'((?:[^']|'')*)'(?::([0-9A-D,]+))?")


@dataclass(frozen=True, slots=True)
class Weights:
    similarity: float
    confidence: float
    scope: float
    keyword: float
    #: how much a memory's salience now (0..1: recalled often and lately) adds; 0 by default
    salience: float = 0.0


def parse_tsvector(text: str) -> dict[str, int]:
    """``"'cat':2,5 'sat':3"`` -> ``{"cat": 2, "sat": 1}`` (term frequencies)."""
    out: dict[str, int] = {}
    for lexeme, positions in _TSV_ENTRY.findall(text or ""):
        out[lexeme.replace("''", "'")] = len(positions.split(",")) if positions else 1
    return out


def idf(df: int, n_docs: int) -> float:
    """BM25's inverse document frequency (the non-negative "+1" form)."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def bm25_scores(
    docs: Sequence[Mapping[str, int]],
    query_terms: Sequence[str],
    df: Mapping[str, int],
    n_docs: int,
    *,
    k1: float = BM25_K1,
) -> list[float]:
    """BM25 (b = 0) of each doc (term-frequency map) for the query terms; IDF from ``df`` over ``n_docs``.

    :func:`agent_memory.queries.search_candidates` computes the same sum in SQL to
    order its keyword candidates; keep the two in step.
    """
    weights = {t: idf(df.get(t, 0), n_docs) for t in set(query_terms)}
    return [
        sum(w * doc[t] * (k1 + 1) / (doc[t] + k1) for t, w in weights.items() if doc.get(t))
        for doc in docs
    ]


def squash(bm25: float, half: float = BM25_HALF) -> float:
    return bm25 / (bm25 + half) if bm25 > 0 else 0.0


def rank(
    rows: Sequence[Mapping[str, Any]],
    *,
    weights: Weights,
    query_terms: Sequence[str] = (),
    df: Mapping[str, int] | None = None,
    n_docs: int = 0,
    k: int,
    min_relevance: float = 0.0,
) -> list[tuple[Mapping[str, Any], float, float, float]]:
    """Score candidate rows (with ``similarity``, ``confidence``, ``scope_priority``, ``tsv`` and,
    when ``weights.salience`` is set, ``salience``)
    and return the best ``k`` as ``(row, final, similarity, keyword)``; ties go to the newer row.
    With ``min_relevance > 0``, rows whose relevance is below it are left out before the cut."""
    if weights.keyword > 0 and query_terms:
        bm25 = bm25_scores([parse_tsvector(r.get("tsv") or "") for r in rows], query_terms, df or {}, n_docs)
    else:
        bm25 = [0.0] * len(rows)
    scored = []
    for row, raw in zip(rows, bm25):
        similarity = float(row["similarity"])
        keyword = squash(raw)
        relevance = (1.0 - weights.keyword) * similarity + weights.keyword * keyword
        if min_relevance > 0 and relevance < min_relevance:
            continue
        final = (
            weights.similarity * relevance
            + weights.confidence * float(row["confidence"])
            + weights.scope * float(row["scope_priority"])
            + (weights.salience * float(row["salience"]) if weights.salience else 0.0)
        )
        scored.append((row, final, similarity, keyword))
    scored.sort(key=lambda s: (-s[1], -s[0]["created_at"].timestamp(), str(s[0]["id"])))
    return scored[:k]
