"""Ranking of search candidates: pure functions, testable without a database.

``final = relevance*w_sim + confidence*w_conf + scope_priority*w_scope`` (the
spec's formula), where *relevance* fuses the two kinds of evidence:

    relevance = (1 - keyword_weight) * cosine + keyword_weight * keyword

*keyword* is BM25 over PostgreSQL's own lexemes (english stemming, stop
words removed) with IDF from the caller's visible rows, brought to [0, 1] by
:func:`coverage` (the default ``keyword_norm``): ``min(bm25 / ceiling, 1)``, the
share of the question's IDF mass the memory matches, so a memory holding the
question's rare word beats one holding only its common words however long the
question is. The former :func:`squash`, ``bm25 / (bm25 + BM25_HALF)``, stays
selectable. Both are absolute (a weak match stays weak however few rows match)
and depend only on the row and the caller's collection. ``BM25_B = 0`` (no length normalisation): memories
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

Issue 14 chose by leave-one-conversation-out instead (``benchmarks/locomo.py --cv``):
coverage with ``keyword_weight`` 0.4 (every fold's choice) scores 0.719 held out
against 0.707 for the squash above, whose own grid, re-tuned per fold, scores
0.696 held out: its best cells were noise. Word feedback (:func:`feedback_lexemes`,
a second search with the words the best memories share) takes it to 0.744, but only
through the session dates LoCoMo's memories start with, so it is off by default.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

__all__ = ["BM25_B", "BM25_HALF", "BM25_K1", "FEEDBACK_DOCS", "FEEDBACK_SHARED", "KEYWORD_NORMS", "SUBTREE_STEP",
           "Scoring", "Weights", "bm25_ceiling", "bm25_scores", "coverage", "feedback_lexemes", "idf", "parse_tsvector", "rank",
           "squash"]

BM25_K1 = 1.2
#: no document-length normalisation (see the module docstring); the SQL side assumes it
BM25_B = 0.0
#: the BM25 score that maps to keyword evidence 0.5
BM25_HALF = 5.0
#: in a subtree search, how much of a level's precedence a memory loses for each ``/`` segment its
#: scope lies below the caller's (``co/eng`` searching: ``co/eng`` 0.8, ``co/eng/web`` 0.7, ...): with
#: the default ``weight_scope`` 0.2 that is 0.02 of final score a level, enough to put the nearer of
#: two equally good memories first, never enough to bury a clearly better one
SUBTREE_STEP = 0.1
#: word feedback (:func:`feedback_lexemes`, ``MemoryConfig.keyword_feedback``, off by default): the
#: words shared by at least ``FEEDBACK_SHARED`` of the question's ``FEEDBACK_DOCS`` best memories
FEEDBACK_DOCS = 3
FEEDBACK_SHARED = 2
#: how BM25 becomes keyword evidence in [0, 1]: ``"coverage"`` (:func:`coverage`, the default) or
#: ``"squash"`` (:func:`squash`, the former default)
KEYWORD_NORMS = ("coverage", "squash")

_TSV_ENTRY = re.compile(r"'((?:[^']|'')*)'(?::([0-9A-D,]+))?")


@dataclass(frozen=True, slots=True)
class Weights:
    similarity: float
    confidence: float
    scope: float
    keyword: float
    #: how much a memory's salience now (0..1: recalled often and lately) adds; 0 by default
    salience: float = 0.0


@dataclass(frozen=True)
class Scoring:
    """The scoring rule of a search, once: built from the config (:meth:`from_config`) by the
    search operation and handed to every place that scores rows, the Python ranking
    (:func:`rank`), the SQL statements (``queries.search_candidates``, ``queries.indexed_search``,
    ``queries.narrowed_search``) and the copies of big scopes (``vector_cache.candidates``). They
    must rank alike for the indexed search to stay exact, so none of them keeps a default of its
    own: a new term of the score is added here, and each reads it from here.

    ``relevance = (1 - weights.keyword) * similarity + weights.keyword * keyword`` and
    ``final = weights.similarity * relevance + weights.confidence * confidence + weights.scope *
    priority + weights.salience * salience``; *keyword* is BM25 (``k1``, b = 0) brought to [0, 1]
    by ``keyword_norm`` (:func:`coverage` or :func:`squash` with ``half``). *similarity* is the
    cosine of the question and the memory, or, for a memory that keeps its context (a
    transcript's turn, issue 29), ``(1 - context) * cosine + context * context cosine``, the
    second the cosine of the question and the context's vector (:meth:`similarity`). Likewise
    *keyword*, for such a memory, is ``(1 - context_keyword) * keyword + context_keyword *
    context keyword``, the second BM25 of the context's words with the same IDF and ``key``
    (:meth:`mixed_keyword`): a turn that says "yes, the one by the lake" is found by the word
    "lake" of the turn before it.
    """

    weights: Weights
    #: each level's precedence (``MemoryConfig.scope_priority``)
    scope_priority: Mapping[str, float]
    keyword_norm: str = "coverage"
    k1: float = BM25_K1
    half: float = BM25_HALF
    #: the share of the context's cosine in the similarity of a memory that keeps its context
    context: float = 0.0
    #: the share of the keyword evidence over the context in the keyword evidence of such a memory
    context_keyword: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.context <= 1.0:
            raise ValueError(f"context must be between 0 and 1, got {self.context!r}")
        if not 0.0 <= self.context_keyword <= 1.0:
            raise ValueError(f"context_keyword must be between 0 and 1, got {self.context_keyword!r}")
        if self.keyword_norm not in KEYWORD_NORMS:
            raise ValueError(f"keyword_norm must be one of {', '.join(KEYWORD_NORMS)}, got {self.keyword_norm!r}")
        if self.k1 <= 0 or self.half <= 0:
            raise ValueError(f"k1 and half must be positive, got k1={self.k1!r}, half={self.half!r}")
        object.__setattr__(self, "scope_priority", MappingProxyType(dict(self.scope_priority)))

    @classmethod
    def from_config(cls, config: Any) -> Scoring:
        """The rule a :class:`agent_memory.MemoryConfig` sets (its ``weight_*``, ``keyword_weight``,
        ``keyword_norm`` and ``scope_priority``)."""
        return cls(
            weights=Weights(similarity=config.weight_similarity, confidence=config.weight_confidence,
                            scope=config.weight_scope, keyword=config.keyword_weight,
                            salience=config.weight_salience),
            scope_priority=dict(config.scope_priority), keyword_norm=config.keyword_norm,
            context=config.context_weight, context_keyword=config.context_keyword_weight)

    def with_weights(self, **changes: float) -> Scoring:
        """This rule with some of its :class:`Weights` changed (``keyword=0``: vector only)."""
        return replace(self, weights=replace(self.weights, **changes))

    @property
    def vector_weight(self) -> float:
        """The weight of cosine similarity in the final score."""
        return self.weights.similarity * (1 - self.weights.keyword)

    @property
    def keyword_weight(self) -> float:
        """The weight of keyword evidence in the final score."""
        return self.weights.similarity * self.weights.keyword

    @property
    def coverage(self) -> bool:
        """Whether keyword evidence is :func:`coverage` (else :func:`squash`)."""
        return self.keyword_norm == "coverage"

    def similarity(self, cosine: float, context_cosine: float | None) -> float:
        """A memory's similarity: its cosine, mixed with its context's (None: it keeps none)."""
        return cosine if context_cosine is None else cosine + self.context * (context_cosine - cosine)

    def mixed_keyword(self, keyword: float, context_keyword: float | None) -> float:
        """A memory's keyword evidence: its own, mixed with its context's (None: it keeps none)."""
        return keyword if context_keyword is None else keyword + self.context_keyword * (context_keyword - keyword)

    def keyword(self, bm25: float, ceiling: float) -> float:
        """BM25 ``bm25`` as keyword evidence in [0, 1] (``ceiling``: :func:`bm25_ceiling`)."""
        return coverage(bm25, ceiling) if self.coverage else squash(bm25, self.half)

    def relevance(self, similarity: float, keyword: float) -> float:
        """The two kinds of evidence fused: what the relevance floor (``min_relevance``) reads."""
        return (1.0 - self.weights.keyword) * similarity + self.weights.keyword * keyword

    def final(self, row: Mapping[str, Any], relevance: float) -> float:
        """The score a search ranks by, for ``row`` (``confidence``, ``scope_priority`` and, when
        ``weights.salience`` is set, ``salience``) of ``relevance``."""
        w = self.weights
        return (w.similarity * relevance + w.confidence * float(row["confidence"])
                + w.scope * float(row["scope_priority"])
                + (w.salience * float(row["salience"]) if w.salience else 0.0))


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


def bm25_ceiling(query_terms: Sequence[str], df: Mapping[str, int], n_docs: int) -> float:
    """The BM25 of a memory holding each query lexeme (that any visible row holds) once: the sum of
    their IDFs, since ``tf * (k1 + 1) / (tf + k1)`` is 1 at ``tf = 1``."""
    return sum(idf(df[t], n_docs) for t in set(query_terms) if df.get(t))


def coverage(bm25: float, ceiling: float) -> float:
    """Keyword evidence as the share of the query's IDF mass a memory matches, at most 1: a memory
    with the query's one rare word scores high, one with only its common words low, whatever the
    question's length (which the absolute :func:`squash` does not see)."""
    return min(bm25 / ceiling, 1.0) if bm25 > 0 and ceiling > 0 else 0.0


def feedback_lexemes(tsvs: Sequence[str | None], query_terms: Collection[str], limit: int) -> list[str]:
    """Pseudo-relevance feedback on words: the lexemes, not of the question, that at least
    :data:`FEEDBACK_SHARED` of ``tsvs`` (the best memories' ``content_tsv``, best first; only the
    first :data:`FEEDBACK_DOCS` count) hold, most shared first, then alphabetical; at most ``limit``.

    Words that the best answers have in common are likely the topic's own words the question did
    not use ("kids", "camping" for "what did Melanie do with her family"); a second search for the
    question's words and these finds the other memories on that topic."""
    if limit <= 0:
        return []
    shared: dict[str, int] = {}
    for tsv in tsvs[:FEEDBACK_DOCS]:
        for lexeme in parse_tsvector(tsv or ""):
            if lexeme not in query_terms:
                shared[lexeme] = shared.get(lexeme, 0) + 1
    ranked = sorted((t for t, n in shared.items() if n >= FEEDBACK_SHARED), key=lambda t: (-shared[t], t))
    return ranked[:limit]


def rank(
    rows: Sequence[Mapping[str, Any]],
    *,
    scoring: Scoring,
    query_terms: Sequence[str] = (),
    df: Mapping[str, int] | None = None,
    n_docs: int = 0,
    k: int,
    min_relevance: float = 0.0,
) -> list[tuple[Mapping[str, Any], float, float, float]]:
    """Score candidate rows (with ``similarity``, ``confidence``, ``scope_priority``, ``tsv``,
    optionally ``context_similarity`` (None: no context) and ``context_tsv`` and, when ``scoring.weights.salience`` is set, ``salience``)
    by ``scoring`` and return the best ``k`` as ``(row, final, similarity, keyword)``
    (``similarity`` and ``keyword``: the memory's own, without its context's part); ties go to the
    newer row.
    With ``min_relevance > 0``, rows whose relevance is below it are left out before the cut."""
    if scoring.weights.keyword > 0 and query_terms:
        bm25 = bm25_scores([parse_tsvector(r.get("tsv") or "") for r in rows], query_terms, df or {}, n_docs,
                           k1=scoring.k1)
        context_bm25 = bm25_scores([parse_tsvector(r.get("context_tsv") or "") for r in rows], query_terms,
                                   df or {}, n_docs, k1=scoring.k1)
    else:
        bm25 = context_bm25 = [0.0] * len(rows)
    ceiling = bm25_ceiling(query_terms, df or {}, n_docs)
    scored = []
    for row, raw, context_raw in zip(rows, bm25, context_bm25):
        similarity = float(row["similarity"])
        context = row.get("context_similarity")
        keyword = scoring.keyword(raw, ceiling)
        # a memory keeps its context when it has the context's vector (as every SQL path reads it)
        context_keyword = None if context is None else scoring.keyword(context_raw, ceiling)
        relevance = scoring.relevance(scoring.similarity(similarity, None if context is None else float(context)),
                                      scoring.mixed_keyword(keyword, context_keyword))
        if min_relevance > 0 and relevance < min_relevance:
            continue
        scored.append((row, scoring.final(row, relevance), similarity, keyword))
    scored.sort(key=lambda s: (-s[1], -s[0]["created_at"].timestamp(), str(s[0]["id"])))
    return scored[:k]
