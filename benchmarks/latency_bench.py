"""The measurements of ``latency.py`` at one size: searches in every mode, saves, the usage
UPDATE on its own, and EXPLAIN of a search.

``Bench`` bundles the pool and the services (real model, precomputed query vectors) that
the per-size loop and the index study both time against.
"""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from psycopg import sql
from psycopg_pool import ConnectionPool

from agent_memory import MemoryConfig, MemoryService, ops, queries
from agent_memory.db.requests import run
from agent_memory.embeddings import LocalEmbeddings
from agent_memory.models import MemoryItem, Rejection

from latency_data import CachedEmbeddings, Caller
from latency_timing import stats_ms, timed_run


@dataclass
class Bench:
    pool: ConnectionPool
    config: MemoryConfig
    local: LocalEmbeddings
    real: MemoryService          # LocalEmbeddings: the model runs on every call
    pre: MemoryService           # queries answered from precomputed vectors
    pre_embeddings: CachedEmbeddings
    qvecs: dict[str, list[float]]

    def visible_rows(self, who: Caller) -> int:
        filt, params = queries.item_filter(who.identity())
        with self.pool.connection() as conn:
            return conn.execute(sql.SQL("SELECT count(*) FROM memory_items m WHERE {f}").format(f=filt),
                                params).fetchone()[0]

    def search_modes(self) -> dict[str, Callable[[Caller, str], Any]]:
        def no_touch(who: Caller, q: str) -> Any:
            op = ops.search_memories(self.config, who.identity(), q, k=5, touch=False)
            return run(op, self.pool, self.pre_embeddings)

        def breakdown(who: Caller, q: str) -> Any:
            return timed_run(ops.search_memories(self.config, who.identity(), q, k=5), self.pool,
                             self.pre_embeddings)

        return {
            "query_embedding": lambda who, q: self.local.embed_query(q),
            "end_to_end": lambda who, q: self.real.for_user(**who.kwargs()).search(q, k=5),
            "db_only": lambda who, q: self.pre.for_user(**who.kwargs()).search(q, k=5),
            "db_only_no_touch": no_touch,
            "breakdown": breakdown,
        }

    def searches(self, work: Sequence[tuple[Caller, str]], warmup: Sequence[tuple[Caller, str]]) -> dict[str, Any]:
        """Every mode on every (caller, query); the order of modes rotates per query so no mode
        always finds the caller's pages freshly cached by another."""
        modes = self.search_modes()
        names = list(modes)
        for who, q in warmup:
            for name in names:
                modes[name](who, q)
        samples: dict[str, list[float]] = defaultdict(list)
        parts: dict[str, list[float]] = defaultdict(list)
        hits = []
        for i, (who, q) in enumerate(work):
            for name in names[i % len(names):] + names[: i % len(names)]:
                t = time.perf_counter()
                out = modes[name](who, q)
                samples[name].append(time.perf_counter() - t)
                if name == "breakdown":
                    for part in ("candidates", "touch", "commit"):
                        parts[part].append(out[1].get(part, 0.0))
                elif name == "db_only":
                    hits.append(len(out))
        result = {name: stats_ms(s) for name, s in samples.items()}
        result["breakdown_parts"] = {part: stats_ms(s) for part, s in parts.items()}
        result["results_per_query"] = float(np.mean(hits)) if hits else 0.0
        return result

    def saves(self, work: Sequence[tuple[Caller, dict[str, Any]]], warmup: Sequence[tuple[Caller, dict[str, Any]]],
              n_breakdown: int, rng: random.Random) -> dict[str, Any]:
        """``MemoryHandle.add`` with the real model, the gate and the duplicate check."""
        def save(who: Caller, item: dict[str, Any]) -> Any:
            return self.real.for_user(**who.kwargs()).add(item["content"], memory_type=item["memory_type"], scope=item["scope"], confidence=item["confidence"])

        for who, item in warmup:
            save(who, item)
        plan = [("service", w) for w in work[n_breakdown:]] + [("breakdown", w) for w in work[:n_breakdown]]
        rng.shuffle(plan)
        samples: dict[str, list[float]] = defaultdict(list)
        parts: dict[str, list[float]] = defaultdict(list)
        outcomes: Counter[str] = Counter()
        for how, (who, item) in plan:
            t = time.perf_counter()
            if how == "service":
                out = save(who, item)
            else:
                op = ops.add_memory(self.config, who.identity(), ops.make_new_memory(
                    item["content"], memory_type=item["memory_type"], scope=item["scope"],
                    confidence=item["confidence"]))
                out, times, _ = timed_run(op, self.pool, self.real.embeddings)
                for part in ("embed", "lock", "duplicate_check", "insert", "commit"):
                    parts[part].append(times.get(part, 0.0))
            samples[how].append(time.perf_counter() - t)
            outcomes["rejected" if isinstance(out, Rejection) else
                     "deduplicated" if isinstance(out, MemoryItem) and out.deduplicated else "inserted"] += 1
        return {"save": stats_ms(samples["service"]), "breakdown_total": stats_ms(samples["breakdown"]),
                "breakdown_parts": {p: stats_ms(s) for p, s in parts.items()}, "outcomes": dict(outcomes)}

    def touch_study(self, work: Sequence[tuple[Caller, str]]) -> dict[str, Any]:
        """The bookkeeping UPDATE on its own, with the op's exact SQL and transaction settings,
        on the ids real searches returned; and whether the updated rows stayed on their page
        (a HOT update) or moved (new index entries in all four indexes, GIN included)."""
        samples, moved, total = [], 0, 0
        for who, q in work:
            ids = [r.item.id for r in self.pre.for_user(**who.kwargs()).search(q, k=5)]
            if not ids:
                continue
            with self.pool.connection() as conn:
                pages = "SELECT id, (ctid::text::point)[0] AS page FROM memory_items WHERE id = ANY(%s)"
                before = dict(conn.execute(pages, (ids,)).fetchall())
                t = time.perf_counter()
                with conn.transaction():
                    conn.execute(*queries.touch_items(ids))
                samples.append(time.perf_counter() - t)
                after = dict(conn.execute(pages, (ids,)).fetchall())
            moved += sum(before[i] != after[i] for i in ids)
            total += len(ids)
        with self.pool.connection() as conn:
            fillfactor = conn.execute("SELECT reloptions FROM pg_class WHERE relname = 'memory_items'").fetchone()[0]
        return {"update_tx": stats_ms(samples), "rows_updated": total, "rows_moved_page": moved,
                "reloptions": fillfactor}

    def explain(self, who: Caller, q: str) -> dict[str, str]:
        """EXPLAIN (ANALYZE, BUFFERS) of the two SELECTs a search issues."""
        _, _, statements = timed_run(ops.search_memories(self.config, who.identity(), q, k=5, touch=False),
                                     self.pool, self.pre_embeddings)
        plans = {}
        with self.pool.connection() as conn:
            for name, query, params in statements:
                text = query if isinstance(query, str) else query.as_string(conn)
                rows = conn.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + sql.SQL(text), params).fetchall()
                plans[name] = "\n".join(r[0] for r in rows)
        return plans
