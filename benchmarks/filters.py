"""Narrowed searches at scale (issue 18): metadata filters, time ranges and subtree reads, exact.

    python benchmarks/filters.py [--queries 200] [--scale 1.0] [--json OUT]

One embedded PostgreSQL in a temporary directory. The data of ``side_by_side.py``'s
``project20k`` scenario (random clustered unit vectors, template sentences: see its docstring),
each memory with metadata ``{"n": 0..99, "kind": "a"|"b"|"c"|"d", "due": "2026-MM-DD"}`` and, for
one memory in ten, ``"tags": ["urgent"]``; the 20,000-memory project is split into
``big-project`` (10,000), ``big-project/web`` (6,000) and ``big-project/web/api`` (4,000), with
the caller a member of all three.

Timed (database part of ``MemoryHandle.search(k=10)``, query vector precomputed), per caller
and narrowing: none (the indexed search), a selective filter (about 1 %), a broad one (about
half), a date comparison, ``$contains`` on tags, a creation range, and ``subtree=True`` over the
project's three scopes. Every narrowed search is compared with the exhaustive ranking of the
memories that pass (every one a candidate): recall@10 and short results are printed with the
times. Also ``list(filter=...)`` (the 50 most recently updated that pass).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from agent_memory import MemoryConfig, MemoryService, queries

sys.path.insert(0, str(Path(__file__).parent))
from latency_timing import stats_ms  # noqa: E402
from side_by_side import K, Precomputed, Rows, World, _binary_copy, _vacuum, machine, shuffled  # noqa: E402

PROJECT = "big-project"
SCAN = queries.search_candidates
SUBSCOPES = {PROJECT: 10_000, f"{PROJECT}/web": 6_000, f"{PROJECT}/web/api": 4_000}

NARROWINGS: dict[str, dict[str, Any]] = {
    "none (indexed)": {},
    "selective filter (~1 %)": {"filter": {"n": 7, "kind": {"$in": ["a", "b", "c"]}}},
    "broad filter (~50 %)": {"filter": {"n": {"$lt": 50}}},
    "date comparison (~25 %)": {"filter": {"due": {"$lt": "2026-04-01"}}},
    "$contains tag (~10 %)": {"filter": {"tags": {"$contains": "urgent"}}},
    "created range (all)": {"created_after": "2020-01-01", "created_before": "2100-01-01"},
    "subtree (project + 2 below)": {"subtree": True},
}


def metadata(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        md: dict[str, Any] = {"n": int(rng.integers(100)), "kind": "abcd"[int(rng.integers(4))],
                              "due": f"2026-{int(rng.integers(1, 13)):02d}-{int(rng.integers(1, 29)):02d}"}
        if rng.random() < 0.1:
            md["tags"] = ["urgent"]
        out.append(md)
    return out


def load(dsn: str, rows: Rows, meta: Sequence[dict[str, Any]], chunk: int = 50_000) -> float:
    started = time.perf_counter()
    for lo in range(0, len(rows), chunk):
        with psycopg.connect(dsn) as conn:
            _binary_copy(conn, queries.copy_items().as_string(conn), queries.COPY_TYPES, (
                (uuid.uuid4(), rows.content[i], rows.memory_type[i], rows.scope[i], rows.scope_id[i], rows.user[i],
                 rows.scope_id[i] if rows.scope[i] == "project" else None, None, "user", None, rows.confidence[i],
                 "members", Jsonb(meta[i]), None, None, "decay", None, None, None, rows.vectors[i])  # no context
                for i in range(lo, min(lo + chunk, len(rows)))))
    _vacuum(dsn, ("memory_items", "memory_terms"))
    return time.perf_counter() - started


def generic_scan(where: Any, *, k: int, min_relevance: float, keyword_share: Any = None, at: Any = None,
                 **terms: Any) -> Any:
    """The generic scan with its usual candidate pool (``--generic-scan``)."""
    return SCAN(where, **terms)


def reference(am: MemoryService, ids: dict[str, str], text: str, narrowing: dict[str, Any]) -> list[Any]:
    """The exhaustive answer: the generic scan (``queries.search_candidates``) with every memory
    that passes a candidate, in place of the one-pass narrowed search."""
    def everything(where: Any, *, k: int, min_relevance: float, keyword_share: Any = None, at: Any = None,
                   **terms: Any) -> Any:
        return SCAN(where, **dict(terms, pool=10 ** 7))

    with mock.patch.object(queries, "narrowed_search", everything):
        return [r.item.id for r in am.for_user(**ids).search(text, k=K, min_relevance=0, **narrowing)]


def run(args: argparse.Namespace, server: Any, log: Any) -> dict[str, Any]:
    world = World()
    rng = np.random.default_rng(7)
    users = [f"user-{i:05d}" for i in range(int(1000 * args.scale))]
    members = users[:5]
    parts = [world.rows(users, "user", None, 100)]
    for scope_id, n in SUBSCOPES.items():
        parts.append(world.rows(members, "project", scope_id, int(n * args.scale)))
    rows = shuffled(*parts)
    meta = metadata(rng, len(rows))
    dsn = server.ensure_database("postgres")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS "filters" WITH (FORCE)')
        conn.execute('CREATE DATABASE "filters"')
    url = server.ensure_database("filters")
    emb = Precomputed()
    generic = mock.patch.object(queries, "narrowed_search", generic_scan) if args.generic_scan else nullcontext()
    with MemoryService(url, config=MemoryConfig(**args.config), embeddings=emb) as am, generic:
        log(f"loading {len(rows):,} rows")
        seconds = load(url, rows, meta)
        for scope_id in SUBSCOPES:
            am.create_project(scope_id, user_id=members[0])
            for m in members[1:]:
                am.add_member("project", scope_id, m, "editor", user_id=members[0])
        callers = {"100-memory user": ({"user_id": users[-1]}, ("user", users[-1])),
                   "10,000-memory project member": ({"user_id": members[1], "project_id": PROJECT},
                                                    ("project", PROJECT))}
        out: dict[str, Any] = {"rows": len(rows), "load_s": round(seconds)}
        for caller, (ids, tenant) in callers.items():
            for name, narrowing in NARROWINGS.items():
                if name.startswith("subtree") and "project_id" not in ids:
                    continue
                times, recall, short = [], [], 0
                for i in range(args.queries + 5):
                    text, vector = world.query(*tenant)
                    emb.query = vector.tolist()
                    started = time.perf_counter()
                    got = [r.item.id for r in am.for_user(**ids).search(text, k=K, min_relevance=0, **narrowing)]
                    elapsed = time.perf_counter() - started
                    if i < 5:
                        continue  # warm-up
                    times.append(elapsed)
                    want = reference(am, ids, text, narrowing)
                    recall.append(len(set(got) & set(want)) / len(want) if want else 1.0)
                    short += len(got) < len(want)
                s = stats_ms(times)
                out.setdefault(caller, {})[name] = {"p50": round(s["p50"], 1), "p95": round(s["p95"], 1),
                                                    "recall": round(float(np.mean(recall)), 4), "short": short,
                                                    "n": len(times)}
                log(f"{caller} / {name}: {out[caller][name]}")
            times = []
            for _ in range(args.queries):
                started = time.perf_counter()
                am.for_user(**ids).list(limit=50, filter={"n": {"$lt": 10}})
                times.append(time.perf_counter() - started)
            s = stats_ms(times)
            out[caller]["list(filter n < 10, limit 50)"] = {"p50": round(s["p50"], 1), "p95": round(s["p95"], 1)}
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--scale", type=float, default=1.0, help="multiply row counts (0.05 for a smoke run)")
    p.add_argument("--json", help="write every number to this file")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                   help="a MemoryConfig field for this run, e.g. --set candidate_pool=100 (repeatable)")
    p.add_argument("--generic-scan", action="store_true",
                   help="narrowed searches by the generic scan (queries.search_candidates) instead of the one-pass "
                        "statement, for comparison")
    args = p.parse_args(argv)
    try:
        args.config = {f: json.loads(v) for f, v in (item.split("=", 1) for item in args.set)}
    except ValueError:
        p.error("--set takes FIELD=JSON, e.g. --set candidate_pool=100")
    started = time.perf_counter()
    log = lambda msg: print(f"[{time.perf_counter() - started:7.1f}s] {msg}", flush=True)  # noqa: E731
    from agent_memory.db.embedded import ensure_embedded_server

    tmp = Path(tempfile.mkdtemp(prefix="agent-memory-filters-"))
    server = ensure_embedded_server(tmp / "pgdata")
    report: dict[str, Any] = {"command": shlex.join(["python", "benchmarks/filters.py", *(argv or sys.argv[1:])]),
                              "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    try:
        report["machine"] = machine(server.ensure_database("postgres"))
        report["results"] = run(args, server, log)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(report, indent=2, default=str))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return report


if __name__ == "__main__":
    main()
