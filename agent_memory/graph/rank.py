"""Pure scoring for the graph: explore's multi-signal score, notes cut for a prompt, and
personalised PageRank. No I/O."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

__all__ = ["RECENCY_RATE", "Weights", "co_mention_edges", "notes_snippets", "personalized_pagerank", "recency", "score"]

#: recency = exp(-RECENCY_RATE * days since the last change): a half-life of about 35 days
RECENCY_RATE = 0.02


class Weights:
    """explore's weights (each 0-1): ``semantic`` (the better of embedding similarity and a text
    match), ``time`` (recency) and ``salience``. Defaults are the design's 0.3 / 0.3 / 0.4."""

    __slots__ = ("salience", "semantic", "time")

    def __init__(self, semantic: float = 0.3, time: float = 0.3, salience: float = 0.4) -> None:
        for name, v in (("semantic_weight", semantic), ("time_weight", time), ("salience_weight", salience)):
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v <= 1:
                from ..errors import InvalidInputError

                raise InvalidInputError(name, "must be a number from 0 to 1")
        self.semantic, self.time, self.salience = float(semantic), float(time), float(salience)


def recency(updated: datetime | None, now: datetime) -> float:
    if updated is None:
        return 0.0
    days = max((now - updated).total_seconds() / 86400.0, 0.0)
    return math.exp(-RECENCY_RATE * days)


def score(w: Weights, *, similarity: float, text: float, updated: datetime | None, salience: float,
          now: datetime) -> tuple[float, dict[str, float]]:
    """``semantic * max(similarity, text) + time * recency + salience * salience``, and its parts."""
    sem = max(similarity, text)
    rec = recency(updated, now)
    total = w.semantic * sem + w.time * rec + w.salience * salience
    return total, {"similarity": round(similarity, 4), "text_match": round(text, 4), "recency": round(rec, 4),
                   "salience": round(salience, 4), "score": round(total, 4)}


def notes_snippets(notes: Iterable[Mapping[str, Any]], now: datetime, *, per_note: int = 500,
                   total: int = 5000, most: int = 10) -> tuple[str, ...]:
    """Live notes (no ``expires_at`` or a later one), newest first, at most ``most``, each cut
    to ``per_note`` characters, ``total`` characters in all."""
    live = [n for n in notes if not n.get("expires_at") or str(n["expires_at"]) > now.isoformat()]
    live.sort(key=lambda n: str(n.get("added_at") or ""), reverse=True)
    out: list[str] = []
    left = total
    for n in live[:most]:
        text = str(n.get("content", ""))[:per_note][:left]
        if not text:
            break
        out.append(text)
        left -= len(text)
    return tuple(out)


def personalized_pagerank(edges: Sequence[tuple[Any, Any, float]], seeds: Sequence[Any], *,
                          damping: float = 0.85, iterations: int = 50, tol: float = 1e-9) -> dict[Any, float]:
    """Personalised PageRank over an undirected weighted graph, restarting at ``seeds`` (equal
    shares): with probability ``damping`` a walker follows an edge (in proportion to weight),
    otherwise it jumps back to a seed. Dangling mass returns to the seeds. Scores sum to 1.
    Power iteration on arrays (numpy), so thousands of edges cost milliseconds."""
    import numpy as np

    if not seeds:
        return {}
    index: dict[Any, int] = {}
    for s_ in seeds:
        index.setdefault(s_, len(index))
    src: list[int] = []
    dst: list[int] = []
    wts: list[float] = []
    for a, b, w in edges:
        if a == b or w <= 0:
            continue
        ia, ib = index.setdefault(a, len(index)), index.setdefault(b, len(index))
        src += (ia, ib)
        dst += (ib, ia)
        wts += (w, w)
    n = len(index)
    s_arr, d_arr, w_arr = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64), np.asarray(wts)
    out = np.bincount(s_arr, weights=w_arr, minlength=n) if len(src) else np.zeros(n)
    share = w_arr / out[s_arr] if len(src) else w_arr
    restart = np.zeros(n)
    seed_ids = sorted({index[s_] for s_ in seeds})
    restart[seed_ids] = 1.0 / len(seed_ids)
    rank = restart.copy()
    dangling = out == 0
    for _ in range(iterations):
        flow = np.bincount(d_arr, weights=rank[s_arr] * share, minlength=n) if len(src) else np.zeros(n)
        nxt = (1 - damping) * restart + damping * flow + damping * rank[dangling].sum() * restart
        delta = float(np.abs(nxt - rank).sum())
        rank = nxt
        if delta < tol:
            break
    names = list(index)
    return {names[i]: float(rank[i]) for i in range(n)}


def co_mention_edges(sources: Iterable[Mapping[str, Any]], together: Iterable[Mapping[str, Any]]
                     ) -> list[tuple[Any, Any, float]]:
    """Edges between a frontier node and every other node a source of it mentions, weighted by
    how many sources they share. ``sources``: (``node_id``, ``source_id``) of the frontier;
    ``together``: (``node_id``, ``source_id``) of every node those sources mention."""
    by_source: dict[Any, list[Any]] = {}
    for row in together:
        by_source.setdefault(row["source_id"], []).append(row["node_id"])
    weight: dict[tuple[Any, Any], float] = {}
    for row in sources:
        for other in by_source.get(row["source_id"], ()):
            if other != row["node_id"]:
                key = (row["node_id"], other)
                weight[key] = weight.get(key, 0.0) + 1.0
    return [(a, b, w) for (a, b), w in sorted(weight.items(), key=lambda kv: (-kv[1], str(kv[0])))]
