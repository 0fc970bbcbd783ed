"""A process's copy of the vectors of big scopes, so that an exact search of a 20,000-memory
project measures 20,000 vectors in memory (one matrix product) instead of reading them from the
search index (BENCHMARKS.md, "Search at scale").

What it may and may not do. The copy never answers a search: it chooses which rows of a big
range the search statement scores (:func:`agent_memory.queries.indexed_search` with ``cached``),
and that statement reads every row it returns again from the table under the caller's full
tenancy rule. A stale or wrong copy can therefore cost recall, never show a row the caller may
not see. It is kept exact the same way the statement is: the copy holds the range's vectors and its
keyword postings, scores each row as the statement will estimate it (vector, confidence, level and
BM25 evidence, with BM25's statistics counted over everything the caller sees), and leaves a row
out only when that score provably cannot reach the statement's cut (:func:`candidates`).

How it stays true (migration ``0016_scope_vector_cache``). Every write that changes what a
candidate list depends on stamps the row with its transaction id (``changed_xid``); each search
first reads, for each copied range, the rows stamped by transactions that had not ended when the
copy was last brought up to date (its snapshot: from ``xmax`` on, or in ``xip``), and applies them. Deletes, rows moved out of a
range and truncation leave a per-range mark (``memory_scope_resets``) that makes the next search
copy the range again in full. Recording a hit's use changes nothing the copy holds.

Only ranges of at least ``MemoryConfig.vector_cache_rows`` active rows are copied (a small range is
cheaper to read from the index than to check); the copies of one connection pool share at most
``MemoryConfig.vector_cache_mb`` megabytes, the least recently searched going first.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import numpy as np

from . import queries
from .db.requests import Op, Sql
from .models import Identity, MemoryType, Scope, Visibility
from .ranking import Scoring, parse_tsvector

__all__ = ["ERROR", "CachedRange", "Candidates", "Plan", "VectorCache", "caller", "candidates", "closest", "prepare",
           "unit"]

_VISIBILITY = {v.value: i for i, v in enumerate(Visibility)}
_OWNER_ONLY = _VISIBILITY[Visibility.OWNER_ONLY.value]
_PUBLIC = _VISIBILITY[Visibility.PUBLIC.value]
_TYPES = {t.value: i for i, t in enumerate(MemoryType)}  # custom types get the next codes as they are met
_TYPES_LOCK = threading.Lock()


def _type_code(name: str) -> int:
    """The small number a memory type is kept as in a copy (built-in ones fixed, custom ones
    numbered in the order this process meets them)."""
    code = _TYPES.get(name)
    if code is None:
        with _TYPES_LOCK:
            code = _TYPES.setdefault(name, len(_TYPES))
    return code

#: How far a copy's cosine similarity may be from the one the database computes with the full
#: vectors: both are float32 vectors made unit, so they differ by rounding alone (about 1e-6 at 384
#: dimensions); 1e-4 leaves a wide margin. A copy chooses its candidates with this error, not the
#: ``halfvec`` index's (:data:`agent_memory.queries.HALF_ERROR`, 100 times wider): over notes that
#: repeat with small variations, more rows lie within the index's error of the k-th best (17 on
#: average for k = 10, up to 80 near a save's duplicate threshold), and each would be read from
#: the table and measured (issue 29, BENCHMARKS.md "Big scopes and project saves").
ERROR = 1e-4

#: how long a range found small is not counted again, and a caller who read no copy not planned again
_SMALL_FOR = 30.0
#: how many callers a cache remembers (:meth:`VectorCache.plans`)
_CALLERS = 10_000


class CachedRange:
    """The copy of one index range ``(scope, scope_key)``: per row its unit vector, confidence,
    visibility, owner key, expiry, type and lexemes, and whether it is still active. Rows are
    updated in place and appended; rows that left stay as dead slots until they are a third of
    the copy. Readers and writers hold ``lock``."""

    def __init__(self, scope: str, key: int, dimensions: int) -> None:
        self.scope, self.key, self.dimensions = scope, key, dimensions
        self.ids: list[UUID] = []
        self.slot: dict[UUID, int] = {}
        self.vectors = np.zeros((0, dimensions), np.float32)
        self.confidence = np.zeros(0, np.float64)
        self.visibility = np.zeros(0, np.int8)
        self.owner = np.zeros(0, np.int64)
        self.expires = np.zeros(0, np.float64)
        self.types = np.zeros(0, np.int32)
        self.alive = np.zeros(0, bool)
        #: the rows' context vectors (unit, zero for a row without context), made with the first row
        #: that has one: a range of memories added by hand holds none
        self.contexts: np.ndarray | None = None
        self.has_context = np.zeros(0, bool)
        #: per row ``vector + share * (context - vector)`` for the context share last searched with
        #: (``mixed_share``), so a search's similarities are one matrix product, not two: the
        #: product reads the whole matrix from memory, and that read is most of a big copy's cost
        #: (a 20,000-memory project: 30 MB a matrix). Kept current by :meth:`apply`; None until a
        #: search with a share above 0 over a copy that holds contexts.
        self.mixed: np.ndarray | None = None
        self.mixed_share = 0.0
        self.size = 0
        #: the snapshot the copy is true as of: every transaction below ``xmax`` but those in ``xip`` had ended
        self.xmax = "0"
        self.xip: tuple[str, ...] = ()
        self.lock = threading.RLock()
        #: lexeme -> {slot: term frequency}: the range's part of ``memory_terms``, and each slot's lexemes
        self.terms: dict[str, dict[int, int]] = {}
        self.slot_terms: list[tuple[str, ...]] = []
        #: the same for the rows' contexts: the range's part of ``memory_context_terms``
        self.context_terms: dict[str, dict[int, int]] = {}
        self.slot_context_terms: list[tuple[str, ...]] = []

    def advance(self, rows: Sequence[Mapping[str, Any]], xmax: str, xip: tuple[str, ...]) -> None:
        """Apply ``rows``, read as of the snapshot ``(xmax, xip)``, and make it the copy's; a
        snapshot older than the copy's (a slower concurrent search) is skipped, so a row's newer
        state is never overwritten by an older one."""
        with self.lock:
            if int(xmax) < int(self.xmax):
                return
            self.apply(rows)
            self.xmax, self.xip = xmax, xip

    def missed(self, xid: str) -> bool:
        """Whether the transaction ``xid`` had not ended when the copy was last brought up to date."""
        return int(xid) >= int(self.xmax) or xid in self.xip

    @property
    def nbytes(self) -> int:
        extra = sum(int(a.nbytes) for a in (self.contexts, self.mixed) if a is not None)
        terms = sum(len(t) for t in self.slot_terms) + sum(len(t) for t in self.slot_context_terms)
        return int(self.vectors.nbytes) + extra + 64 * len(self.ids) + 120 * terms

    def postings(self, lexeme: str, context: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The slots holding ``lexeme`` (in their context's words: ``context``) and its frequency
        in each (call with ``lock`` held)."""
        found = (self.context_terms if context else self.terms).get(lexeme)
        if not found:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        return (np.fromiter(found.keys(), np.int64, len(found)),
                np.fromiter(found.values(), np.float64, len(found)))

    def _index(self, at: int, tsv: str | None, active: bool, context: bool = False) -> None:
        terms, slot_terms = (self.context_terms, self.slot_context_terms) if context else (self.terms, self.slot_terms)
        for lexeme in slot_terms[at]:
            held = terms.get(lexeme)
            if held is not None:
                held.pop(at, None)
                if not held:
                    del terms[lexeme]
        counts = parse_tsvector(tsv or "") if active else {}
        slot_terms[at] = tuple(counts)
        for lexeme, tf in counts.items():
            terms.setdefault(lexeme, {})[at] = tf

    def _grow(self, need: int) -> None:
        capacity = len(self.alive)
        if need <= capacity:
            return
        capacity = max(need, 2 * capacity, 64)
        for name in self._columns():
            old = getattr(self, name)
            new = np.zeros((capacity, *old.shape[1:]), old.dtype)
            new[: self.size] = old[: self.size]
            setattr(self, name, new)

    def _columns(self) -> tuple[str, ...]:
        """The per-slot arrays (``contexts`` and ``mixed`` once made)."""
        names = ("vectors", "confidence", "visibility", "owner", "expires", "types", "alive", "has_context")
        return (*names, *(name for name in ("contexts", "mixed") if getattr(self, name) is not None))

    def similarity(self, query: np.ndarray, rows: np.ndarray, share: float) -> np.ndarray:
        """The similarities of ``rows`` to ``query`` (a unit vector) as
        :meth:`agent_memory.ranking.Scoring.similarity` computes them: a row's cosine, mixed with its
        context's cosine by ``share`` when it keeps a context. The mix is linear, so it is one
        product with the rows' mixed vectors (:attr:`mixed`, made on the first search with
        ``share``), never two (call with ``lock`` held)."""
        matrix: np.ndarray = self.vectors
        if self.contexts is not None and share != 0 and self.has_context[: self.size].any():
            if self.mixed is None or self.mixed_share != share:
                held = self.has_context[:, None]
                self.mixed = np.where(held, self.vectors + np.float32(share) * (self.contexts - self.vectors),
                                      self.vectors).astype(np.float32)
                self.mixed_share = share
            matrix = self.mixed
        sim: np.ndarray = (matrix[: self.size] @ query)[rows].astype(np.float64)
        return sim

    def apply(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Take ``rows`` (:data:`agent_memory.queries.RANGE_COLUMNS`) as they now are: new rows are
        added, known ones overwritten, rows no longer active marked dead."""
        if not rows:
            return
        vectors = _vectors(rows, self.dimensions)
        contexts = None
        if any(r.get("cv") is not None for r in rows):
            contexts = _vectors([{"v": r.get("cv")} for r in rows], self.dimensions)
        with self.lock:
            if contexts is not None and self.contexts is None:
                self.contexts = np.zeros(self.vectors.shape, np.float32)
            self._grow(self.size + len(rows))
            for i, row in enumerate(rows):
                at = self.slot.get(row["id"])
                if at is None:
                    if not row["active"]:
                        continue
                    at = self.size
                    self.size += 1
                    self.ids.append(row["id"])
                    self.slot_terms.append(())
                    self.slot_context_terms.append(())
                    self.slot[row["id"]] = at
                self._index(at, row["tsv"], bool(row["active"]))
                self._index(at, row.get("ctsv"), bool(row["active"]), context=True)
                self.vectors[at] = vectors[i]
                if self.contexts is not None:
                    self.contexts[at] = 0.0 if contexts is None else contexts[i]
                self.has_context[at] = row.get("cv") is not None
                if self.mixed is not None:
                    self.mixed[at] = self.vectors[at] if self.contexts is None or not self.has_context[at] else \
                        self.vectors[at] + np.float32(self.mixed_share) * (self.contexts[at] - self.vectors[at])
                self.confidence[at] = row["confidence"]
                self.visibility[at] = _VISIBILITY.get(row["visibility"], _OWNER_ONLY)
                self.owner[at] = row["owner_key"]
                self.expires[at] = np.inf if row["expires"] is None else row["expires"]
                self.types[at] = _type_code(row["memory_type"])
                self.alive[at] = bool(row["active"])
            if self.size > 1000 and 3 * int(self.alive[: self.size].sum()) < 2 * self.size:
                self._compact()

    def _compact(self) -> None:
        keep = np.flatnonzero(self.alive[: self.size])
        for name in self._columns():
            setattr(self, name, getattr(self, name)[keep].copy())
        self.ids = [self.ids[i] for i in keep]
        self.slot = {id_: i for i, id_ in enumerate(self.ids)}
        self.slot_terms = [self.slot_terms[i] for i in keep]
        self.slot_context_terms = [self.slot_context_terms[i] for i in keep]
        moved = {int(old): new for new, old in enumerate(keep)}
        self.terms = {lexeme: {moved[at]: tf for at, tf in held.items()} for lexeme, held in self.terms.items()}
        self.context_terms = {lexeme: {moved[at]: tf for at, tf in held.items()}
                              for lexeme, held in self.context_terms.items()}
        self.size = len(self.ids)


def _vectors(rows: Sequence[Mapping[str, Any]], dimensions: int) -> np.ndarray:
    """The rows' vectors (pgvector's binary form) as unit float32 rows; a zero vector stays zero."""
    raw = np.frombuffer(b"".join(bytes(r["v"]) if r["v"] is not None else bytes(4 * (dimensions + 1))
                                 for r in rows), dtype=">f4")
    vectors = raw.reshape(len(rows), dimensions + 1)[:, 1:].astype(np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    scaled: np.ndarray = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return scaled


def _dimensions(rows: Sequence[Mapping[str, Any]]) -> int | None:
    for row in rows:
        if row["v"] is not None:
            return int.from_bytes(bytes(row["v"])[:2], "big")
    return None


class VectorCache:
    """The copies of one connection pool (see the module's docstring), least recently used first."""

    def __init__(self, min_rows: int, max_bytes: int) -> None:
        self.min_rows, self.max_bytes = min_rows, max_bytes
        self.recheck_after = _SMALL_FOR  # seconds a small range or an uncopied caller is not planned again
        self.ranges: OrderedDict[tuple[str, int], CachedRange] = OrderedDict()
        self.small: dict[tuple[str, int], float] = {}  # range -> when it was found small
        self.too_big: set[tuple[str, int]] = set()  # ranges whose copy would exceed max_bytes alone
        #: what a caller's (identity and scopes) searches found: True, they read copies (plan each
        #: search); False, their ranges were all small when planned (at the time given)
        self.callers: dict[tuple[Any, ...], tuple[float, bool]] = {}
        self.lock = threading.Lock()

    def get(self, scope: str, key: int) -> CachedRange | None:
        with self.lock:
            found = self.ranges.get((scope, key))
            if found is not None:
                self.ranges.move_to_end((scope, key))
            return found

    def known(self, mine: Iterable[tuple[str, int]] = ()) -> list[str]:
        """``"scope/key"`` of the ranges copied or too big to copy, and of those of ``mine``
        recently found small: the ranges a plan need not count. (Only the caller's own are named, so the list stays
        short however many callers the process serves; a small team's range is counted, up to
        ``min_rows`` keys of the count index, on each search.)"""
        now = time.monotonic()
        with self.lock:
            self.small = {k: t for k, t in self.small.items() if now - t < self.recheck_after}
            return [f"{s}/{k}" for s, k in (*self.ranges, *self.too_big, *(r for r in mine if r in self.small))]

    def plans(self, caller: tuple[Any, ...]) -> bool:
        """Whether a search by ``caller`` plans (reads which of their ranges are copied): only when
        an earlier search saw at least ``min_rows`` rows (:meth:`saw`) and the last plan did not find
        them all small within ``recheck_after`` seconds. Every other search reads its ranges from the
        index, exactly, without the plan's round trip: most callers see few memories."""
        with self.lock:
            found = self.callers.get(caller)
            if found is None:
                return False
            at, copies = found
            if not copies and time.monotonic() - at >= self.recheck_after:
                del self.callers[caller]  # small a while ago: the next search's count decides again
                return False
            return copies

    def saw(self, caller: tuple[Any, ...], rows: int) -> None:
        """A search by ``caller`` that read the index saw ``rows`` rows: from ``min_rows`` on, the next plans."""
        if rows >= self.min_rows:
            with self.lock:
                if caller not in self.callers:
                    self.callers[caller] = (time.monotonic(), True)
                    self._bound()

    def planned(self, caller: tuple[Any, ...], copies: bool) -> None:
        with self.lock:
            self.callers.pop(caller, None)
            self.callers[caller] = (time.monotonic(), copies)
            self._bound()

    def _bound(self) -> None:
        """At most ``_CALLERS`` callers are remembered (each session is a caller, so a long-running
        server would otherwise gather them forever); the least recently planned go first, and a
        forgotten caller's next search reads the index and counts again."""
        while len(self.callers) > _CALLERS:
            del self.callers[next(iter(self.callers))]

    def found_small(self, scope: str, key: int) -> None:
        with self.lock:
            self.small[(scope, key)] = time.monotonic()

    def put(self, copy: CachedRange) -> bool:
        """Keep ``copy``, dropping the least recently searched copies while they take more than
        ``max_bytes``; a copy bigger than that alone is not kept, and its range is read from the
        index from then on (answers whether it was kept)."""
        with self.lock:
            if copy.nbytes > self.max_bytes:
                self.too_big.add((copy.scope, copy.key))
                return False
            self.ranges[(copy.scope, copy.key)] = copy
            self.ranges.move_to_end((copy.scope, copy.key))
            while sum(r.nbytes for r in self.ranges.values()) > self.max_bytes:
                self.ranges.popitem(last=False)
            return True

    def drop(self, scope: str, key: int) -> None:
        with self.lock:
            self.ranges.pop((scope, key), None)

    def clear(self) -> None:
        with self.lock:
            self.ranges.clear()
            self.small.clear()
            self.too_big.clear()
            self.callers.clear()


@dataclass(frozen=True, slots=True)
class Plan:
    """What a search reads from copies: per copied range the copy and the rule the caller reads it
    under; ``now``, the transaction's time (seconds since the epoch), which expiry is judged by;
    ``lexemes``, the query's; ``complete``: every range the caller reads is copied."""

    ranges: tuple[tuple[CachedRange, str], ...]
    now: float
    lexemes: tuple[str, ...]
    complete: bool
    planned: bool = True  # False: not planned (:meth:`VectorCache.plans`), and the plans not set to generic


def caller(identity: Identity, scopes: Sequence[Scope] | None) -> tuple[Any, ...]:
    """Who searches, as :class:`VectorCache` remembers them: the identity's ids and the levels asked for."""
    return (identity.user_id, identity.session_id, identity.project_id, identity.team_id, identity.org_id,
            None if scopes is None else tuple(scopes))


def prepare(cache: VectorCache, identity: Identity, scopes: Sequence[Scope] | None, *, query_text: str = "",
            extra_lexemes: Sequence[str] = (), always: bool = False) -> Op[Plan]:
    """Bring the copies of the big ranges the caller reads up to date, copying a range that
    became big; answer which copies the search reads. Runs in the search's transaction (so
    ``now`` is the search statement's ``now()``). Unless ``always``, a caller not known to read
    big ranges (:meth:`VectorCache.plans`) is not planned: an empty plan, ``planned`` false."""
    who = caller(identity, scopes)
    if not always and not cache.plans(who):
        return Plan((), 0.0, (), False, planned=False)
    mine = [(scope.value, queries.scope_key(value)) for scope, value in (
        (Scope.USER, identity.user_id), (Scope.SESSION, identity.session_id), (Scope.PROJECT, identity.project_id),
        (Scope.TEAM, identity.team_id), (Scope.ORG, identity.org_id)) if value is not None]
    plan = yield Sql(*queries.cache_plan(identity, scopes, known=cache.known(mine), bound=cache.min_rows,
                                         query_text=query_text, extra_lexemes=extra_lexemes))
    now, xmax, xip = float(plan[0]["now"]), plan[0]["xmax"], tuple(plan[0]["xip"] or ())
    used: list[tuple[CachedRange, str]] = []
    stale: list[CachedRange] = []
    complete = True
    for row in plan:
        if row["scope"] is None:
            continue
        scope, key = row["scope"], int(row["scope_key"])
        copy = cache.get(scope, key)
        size = row["size"]
        if copy is not None and row["reset"] is not None and copy.missed(row["reset"]):
            cache.drop(scope, key)  # rows left it: copy it again
            copy, size = None, cache.min_rows if size is None else size
        if copy is None:
            if size is None or int(size) < cache.min_rows:
                if size is not None:
                    cache.found_small(scope, key)
                complete = False
                continue
            rows = yield Sql(*queries.cache_load(scope, key))
            dimensions = _dimensions(rows)
            if dimensions is None:
                complete = False
                continue
            copy = CachedRange(scope, key, dimensions)
            copy.advance(rows, xmax, xip)
            if not cache.put(copy):
                complete = False  # bigger than all copies may be: read from the index from now on
                continue
        else:
            stale.append(copy)
        used.append((copy, row["rule"]))
    if stale:
        changes = yield Sql(*queries.cache_changes([(c.scope, c.key, c.xmax, c.xip) for c in stale]))
        by_range: dict[tuple[str, int], list[Any]] = {}
        for change in changes:
            by_range.setdefault((change["scope"], int(change["scope_key"])), []).append(change)
        for copy in stale:
            rows = by_range.get((copy.scope, copy.key), [])
            if (_dimensions(rows) or copy.dimensions) != copy.dimensions:  # re-embedded with another model
                cache.drop(copy.scope, copy.key)
                return (yield from prepare(cache, identity, scopes, query_text=query_text,
                                           extra_lexemes=extra_lexemes))
            copy.advance(rows, xmax, xip)
    if not always:
        cache.planned(who, copies=bool(used))
    return Plan(tuple(used), now, tuple(plan[0]["lexemes"] or ()), complete)


@dataclass(frozen=True, slots=True)
class Candidates:
    """The rows of the copied ranges a search must score (ids, estimated cosine similarities,
    confidences, levels), the ranges they come from (``keys``), and BM25's statistics over
    everything the caller sees: ``n`` rows, and per query lexeme the rows holding it (``df``);
    ``context``: whether each row keeps a context (its keyword evidence then mixes the context's)."""

    keys: list[tuple[str, int]]
    ids: list[UUID]
    similarity: list[float]
    confidence: list[float]
    scopes: list[str]
    n: int
    df: dict[str, int]
    context: list[bool] = field(default_factory=list)


def candidates(plan: Plan, *, query: np.ndarray, owner_key: int, types: Iterable[MemoryType] | None, k: int,
               scoring: Scoring, min_relevance: float, error: float, rest_n: int,
               rest_df: Mapping[str, int]) -> Candidates:
    """The rows of ``plan``'s copies that can be in a search's top ``k``, and BM25's statistics.

    Each copied row gets the score the search statement will estimate for it under ``scoring``
    (:class:`agent_memory.ranking.Scoring`), ``f = A + keyword_weight * key`` (``A =
    vector_weight * sim + confidence * confidence + scope * priority``; ``key`` the keyword
    evidence from the copy's postings, with ``n`` and ``df`` over the copies plus
    ``rest_n``/``rest_df``, the rows outside them, mixed with the context's for a row that keeps
    one, :meth:`agent_memory.ranking.Scoring.mixed_keyword`), and a relevance. Per range let ``T`` be the
    ``k``-th best ``f`` among rows whose relevance clears ``min_relevance + error``: the
    statement's cut is at least ``T`` (its ``k``-th best runs over more rows), and it keeps rows
    down to ``2 * vector_weight * error + salience_weight`` below its cut, so a row below ``T``
    minus that margin can never be one of its candidates; every other row is returned.
    ``error`` bounds the distance between ``sim`` here and the exact similarity."""
    seen: list[np.ndarray] = []
    sims: list[np.ndarray] = []
    confidences: list[np.ndarray] = []
    names: list[list[UUID]] = []  # each copy's id list as it was (slots index it; a compaction makes a new one)
    counted: list[dict[str, tuple[np.ndarray, np.ndarray]]] = []
    counted_context: list[dict[str, tuple[np.ndarray, np.ndarray]]] = []
    held: list[np.ndarray] = []
    w = scoring.weights
    vector_weight, keyword_weight, k1 = scoring.vector_weight, scoring.keyword_weight, scoring.k1
    df = dict(rest_df)
    n = rest_n
    for copy, rule in plan.ranges:
        with copy.lock:
            rows = _seen(copy, rule, now=plan.now, owner_key=owner_key, types=types)
            sims.append(copy.similarity(query, rows, scoring.context))
            confidences.append(copy.confidence[rows])
            names.append(copy.ids)
            visible = np.zeros(copy.size, bool)
            visible[rows] = True
            found = {}
            for lexeme in plan.lexemes if keyword_weight > 0 else ():
                slots, tf = copy.postings(lexeme)
                keep = visible[slots]
                found[lexeme] = (slots[keep], tf[keep])
                df[lexeme] = df.get(lexeme, 0) + int(keep.sum())
            found_context = {}
            for lexeme in plan.lexemes if keyword_weight > 0 and scoring.context_keyword > 0 else ():
                slots, tf = copy.postings(lexeme, context=True)
                keep = visible[slots]
                found_context[lexeme] = (slots[keep], tf[keep])
            seen.append(rows)
            counted.append(found)
            counted_context.append(found_context)
            held.append(copy.has_context[rows].copy())
        n += len(rows)
    df = {lexeme: count for lexeme, count in df.items() if count > 0}
    idf = {lexeme: math.log(1.0 + (n - count + 0.5) / (count + 0.5)) for lexeme, count in df.items()}
    ceiling = sum(idf.values())
    out = Candidates([], [], [], [], [], n, df)

    def evidence(size: int, rows: np.ndarray, found: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        bm25 = np.zeros(size)
        for lexeme, (slots, tf) in found.items():
            if lexeme in idf:
                bm25[slots] += idf[lexeme] * tf * (k1 + 1) / (tf + k1)
        b = bm25[rows]
        out: np.ndarray
        if scoring.coverage:
            out = np.minimum(b / ceiling, 1.0) if ceiling > 0 else np.zeros_like(b)
        else:
            out = b / (b + scoring.half)
        return out

    for (copy, _), rows, sim, confidence, ids, found, found_context, context in zip(
            plan.ranges, seen, sims, confidences, names, counted, counted_context, held):
        key: Any = evidence(copy.size, rows, found)  # (arrays through Scoring's float arithmetic)
        if found_context and context.any():
            key = np.where(context, key + scoring.context_keyword * (evidence(copy.size, rows, found_context) - key),
                           key)
        score = vector_weight * sim + w.confidence * confidence + w.scope * scoring.scope_priority[copy.scope] \
            + keyword_weight * key
        relevance = scoring.relevance(sim, key)
        sure = score if min_relevance <= 0 else score[relevance >= min_relevance + error]
        cut = np.partition(sure, len(sure) - k)[len(sure) - k] if len(sure) >= k else -np.inf
        keep = score >= cut - 2 * vector_weight * error - w.salience - 1e-9
        if min_relevance > 0:
            keep &= relevance >= min_relevance - error
        chosen = np.flatnonzero(keep)
        out.keys.append((copy.scope, copy.key))
        out.ids.extend(ids[i] for i in rows[chosen])
        out.similarity.extend(sim[chosen].tolist())
        out.confidence.extend(confidence[chosen].tolist())
        out.scopes.extend([copy.scope] * len(chosen))
        out.context.extend(context[chosen].tolist())
    return out


def _seen(copy: CachedRange, rule: str, *, now: float, owner_key: int,
          types: Iterable[MemoryType] | None) -> np.ndarray:
    """The slots of ``copy`` the caller sees under ``rule`` (call with ``copy.lock`` held)."""
    size = copy.size
    mask = copy.alive[:size] & (copy.expires[:size] > now)
    if rule == "mine":
        mask &= copy.owner[:size] == owner_key
    elif rule == "member":
        mask &= (copy.visibility[:size] != _OWNER_ONLY) | (copy.owner[:size] == owner_key)
    elif rule == "public":
        mask &= copy.visibility[:size] == _PUBLIC
    elif rule != "all":
        raise ValueError(f"unknown rule {rule!r}")
    if types is not None:
        mask &= np.isin(copy.types[:size], [_type_code(t.value) for t in types])
    return np.flatnonzero(mask)


def closest(ranges: Sequence[tuple[CachedRange, str]], *, query: np.ndarray, now: float, owner_key: int,
            threshold: float, visibilities: Iterable[str]) -> list[UUID]:
    """The ids of the rows of the copies ``ranges`` (each with the rule it is read under) that can
    be the closest row to ``query`` (a unit vector) at cosine similarity ``threshold`` or more among
    those of ``visibilities``: the copies' best and every row within twice :data:`ERROR` of it (a
    duplicate check measures only these in the database; the closest is among them). Empty when
    no row comes within :data:`ERROR` of ``threshold``."""
    allowed = [_VISIBILITY[v] for v in visibilities]
    found: list[tuple[np.ndarray, list[UUID], np.ndarray]] = []
    best = -np.inf
    for copy, rule in ranges:
        with copy.lock:
            seen = _seen(copy, rule, now=now, owner_key=owner_key, types=None)
            seen = seen[np.isin(copy.visibility[seen], allowed)]
            sim = (copy.vectors[: copy.size] @ query)[seen]
            keep = sim >= threshold - ERROR
            found.append((seen[keep], copy.ids, sim[keep]))
            if keep.any():
                best = max(best, float(sim[keep].max()))
    return [ids[i] for rows, ids, sim in found for i in rows[sim >= best - 2 * ERROR]]


def unit(vector: Sequence[float]) -> np.ndarray:
    """``vector`` as a float32 unit vector (a zero vector stays zero), as copies hold theirs."""
    q = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(q))
    return q / norm if norm > 0 else q
