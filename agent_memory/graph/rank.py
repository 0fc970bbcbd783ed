"""Pure scoring for the graph: explore's multi-signal score, notes cut for a prompt, and
personalised PageRank. No I/O."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

__all__ = ["RECENCY_RATE", "Weights", "notes_snippets", "personalized_pagerank", "recency", "score"]

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
    otherwise it jumps back to a seed. Dangling mass returns to the seeds. Scores sum to 1."""
    if not seeds:
        return {}
    adj: dict[Any, dict[Any, float]] = {}
    for a, b, w in edges:
        if a == b or w <= 0:
            continue
        adj.setdefault(a, {})[b] = adj.get(a, {}).get(b, 0.0) + w
        adj.setdefault(b, {})[a] = adj.get(b, {}).get(a, 0.0) + w
    nodes = set(adj) | set(seeds)
    restart = {s: 1.0 / len(set(seeds)) for s in set(seeds)}
    rank = dict.fromkeys(nodes, 0.0)
    rank.update(restart)
    for _ in range(iterations):
        nxt = {n: (1 - damping) * restart.get(n, 0.0) for n in nodes}
        dangling = 0.0
        for n, r in rank.items():
            out = adj.get(n)
            if not out:
                dangling += r
                continue
            s = sum(out.values())
            for m, w in out.items():
                nxt[m] += damping * r * w / s
        for s_, share in restart.items():
            nxt[s_] += damping * dangling * share
        delta = sum(abs(nxt[n] - rank[n]) for n in nodes)
        rank = nxt
        if delta < tol:
            break
    return rank
