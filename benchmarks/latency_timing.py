"""Timing helpers for ``latency.py``: percentiles, a statement-by-statement op driver,
and the machine load of each phase.

``timed_run`` drives an op's requests as ``agent_memory.db.requests.run`` would but
clocks each one, which is how the report splits a search or a save into its parts.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from agent_memory.db.requests import Commit, Copy, Embed, Op, Shared
from agent_memory.db.statements import numbered


#: what ``Shared`` requests are answered with, per pool (``id(pool)``)
_SHARED: dict[int, dict[str, Any]] = {}


def stats_ms(samples: Sequence[float]) -> dict[str, float]:
    a = np.asarray(samples, dtype=float) * 1000.0
    if a.size == 0:
        return {"n": 0}
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    return {"n": int(a.size), "mean": float(a.mean()), "p50": float(p50), "p95": float(p95),
            "p99": float(p99), "max": float(a.max())}


_LABELS = (
    ("WITH q AS MATERIALIZED", "candidates"), ("synchronous_commit", "touch"), ("access_count = access_count + 1", "touch"),
    ("pg_advisory_xact_lock", "lock"), ("<= 1 - ", "duplicate_check"), ("INSERT INTO", "insert"),
    ("SET last_used_at = now() WHERE", "refresh_duplicate"), ("pg_current_snapshot", "copies_plan"),
    ("changed_xid >=", "copies_changes"), ("SELECT 'n' AS kind", "copies_statistics"),
)


def label(text: str) -> str:
    return next((name for needle, name in _LABELS if needle in text), "other")


def timed_run(op: Op[Any], pool: ConnectionPool, embeddings: Any) -> tuple[Any, dict[str, float], list[Any]]:
    """Drive ``op`` like :func:`agent_memory.db.requests.run` (one pooled connection, one
    transaction committed at the end) but time each request: ``embed``, each statement
    by kind, ``commit``. Also answers the statements, for EXPLAIN."""
    times: dict[str, float] = defaultdict(float)
    statements: list[tuple[str, Any, Any]] = []
    answer: Any = None
    with pool.connection() as conn:
        in_tx = False
        while True:
            try:
                request = op.send(answer)
            except StopIteration as stop:
                if in_tx:
                    t = time.perf_counter()
                    conn.execute("COMMIT")
                    times["commit"] += time.perf_counter() - t
                return stop.value, dict(times), statements
            t = time.perf_counter()
            if isinstance(request, Embed):
                texts = list(request.texts)
                answer = ([embeddings.embed_query(texts[0])] if request.query and len(texts) == 1
                          else embeddings.embed_documents(texts))
                times["embed"] += time.perf_counter() - t
                continue
            if isinstance(request, Shared):  # state kept between calls, one per pool (as the drivers keep it)
                held = _SHARED.setdefault(id(pool), {})
                if request.name not in held:
                    held[request.name] = request.make()
                answer = held[request.name]
                continue
            if isinstance(request, (Copy, Commit)):
                raise NotImplementedError("timed_run only serves search and save")
            if not in_tx:
                conn.execute("BEGIN")
                in_tx = True
            text = request.query.as_string(conn) if isinstance(request.query, sql.Composable) else request.query
            t = time.perf_counter()
            query, params, raw = numbered(request.query, request.params, conn)  # as the drivers run it
            with (psycopg.RawCursor(conn, row_factory=dict_row) if raw else conn.cursor(row_factory=dict_row)) as cur:
                cur.execute(query, params)
                answer = {"all": cur.fetchall, "one": cur.fetchone}.get(request.fetch, lambda: None)()
            name = label(text)
            times[name] += time.perf_counter() - t
            statements.append((name, request.query, request.params))


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    # user nice system idle iowait irq softirq steal (guest time is already inside user)
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


class Phase:
    """Records a phase's load average at its start and how busy the whole machine was during it,
    and how much of that was this Python process (the PostgreSQL backends are not included)."""

    def __init__(self, report: dict[str, Any], name: str, rows: int) -> None:
        self.entry = {"phase": name, "rows": rows, "loadavg_start": loadavg()}
        report["phases"].append(self.entry)

    def __enter__(self) -> Phase:
        self.ticks, self.own, self.wall = _cpu_ticks(), sum(os.times()[:2]), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        busy, total = _cpu_ticks()
        wall = time.perf_counter() - self.wall
        self.entry["seconds"] = round(wall, 1)
        self.entry["machine_busy_pct"] = round(100.0 * (busy - self.ticks[0]) / max(1, total - self.ticks[1]), 1)
        self.entry["this_process_pct"] = round(
            100.0 * (sum(os.times()[:2]) - self.own) / max(1e-9, wall * (os.cpu_count() or 1)), 1)
