"""Latency of agent-memory at scale: search and save percentiles, the cost of the usage
bookkeeping on search, and (``--index-study``) exact per-scope scan versus an HNSW index.

    python benchmarks/latency.py [--sizes 10000,100000] [--users 1000] [--queries 300]
                                 [--saves 300] [--dsn DSN] [--json OUT] [--index-study]

Without ``--dsn`` the embedded PostgreSQL is started in a temporary data directory
(``MemoryConfig(data_dir=tmp)``) that is deleted at the end, so no existing database is
touched. ``--dsn`` must point at a database whose ``memory_items`` is empty or absent;
the rows the run wrote (all ids start with ``bench-``) are deleted at the end.

What is cached, and what is not:

* Stored memories are drawn from a pool of ``--pool`` distinct template sentences,
  embedded once with the local model; the loader's embedder answers from that table
  (a miss would fall back to the model and is counted). Contents repeat across
  tenants but never inside one scope (imports use ``dedupe=False``); each stored vector
  gets a little noise (``--jitter``) so that no two rows share one.
* Search queries, the ``--index-study`` big project and saved contents are never cached:
  "end to end" search and every save run the real local model on the request path.
  "DB only" search swaps in an embedder whose ``embed_query`` returns a vector
  computed before the clock started, so it times everything but the model.

This file parses the arguments and runs the phases; the work lives in the sibling
modules ``latency_data`` (synthetic workload), ``latency_timing`` (percentiles, timed
driver, phase load), ``latency_bench`` (the measurements), ``latency_index_study`` and
``latency_report`` (markdown tables), imported from the script's own directory.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from agent_memory import MemoryConfig, MemoryService
from agent_memory.db.connection import open_pool
from agent_memory.embeddings import LocalEmbeddings

from latency_bench import Bench
from latency_data import (SCOPE_SHARES, SEED, SESSIONS_PER_USER, USERS_PER_PROJECT, CachedEmbeddings, SentenceMaker,
                          caller, load, plan_rows, save_work)
from latency_index_study import HNSW_INDEX, PARTIAL_INDEX, index_study
from latency_report import fmt, markdown
from latency_timing import Phase, loadavg


def code_version() -> str:
    """The commit measured, with ``+dirty`` when agent_memory/ has uncommitted changes (read-only git calls)."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "agent_memory"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def machine_info(pool: ConnectionPool) -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown")
    with pool.connection() as conn:
        one = lambda q: conn.execute(q).fetchone()[0]  # noqa: E731
        return {"nproc": os.cpu_count(), "cpu": cpu, "python": f"Python {platform.python_version()}",
                "postgres": one("SELECT version()").split(" on ")[0],
                "pgvector": one("SELECT extversion FROM pg_extension WHERE extname = 'vector'"),
                "shared_buffers": one("SHOW shared_buffers"), "jit": one("SHOW jit")}


# --- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="10000,100000", help="row counts to measure at, loaded incrementally")
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--queries", type=int, default=300, help="timed searches per size (each in every mode)")
    p.add_argument("--saves", type=int, default=300, help="timed saves per size (plus 100 statement-timed)")
    p.add_argument("--pool", type=int, default=5000, help="distinct stored sentences, embedded once")
    p.add_argument("--jitter", type=float, default=0.3, help="noise norm added to each stored cached vector")
    p.add_argument("--load-chunk", type=int, default=10, help="rows per import call (callers take turns)")
    p.add_argument("--big-project", type=int, default=20000, help="rows of the one big project (--index-study)")
    p.add_argument("--dsn", help="an empty database to use instead of a temporary embedded server")
    p.add_argument("--json", help="write every number to this file")
    p.add_argument("--index-study", action="store_true", help="exact scan versus HNSW at the largest size")
    p.add_argument("--explain", action="store_true", help="print EXPLAIN ANALYZE of a search at each size")
    p.add_argument("--keep", action="store_true", help="leave the temporary server and its data running, to inspect")
    args = p.parse_args(argv)
    args.sizes = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()})
    if not args.sizes or args.sizes[0] < 1 or args.users < USERS_PER_PROJECT:
        p.error("--sizes needs positive numbers and --users at least 5")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    started = time.perf_counter()
    log = lambda msg: print(f"[{time.perf_counter() - started:7.1f}s] {msg}", flush=True)  # noqa: E731
    report: dict[str, Any] = {"command": shlex.join([Path(sys.executable).name, *sys.argv]), "code": code_version(),
                              "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                              "loadavg_before": loadavg(), "phases": []}
    tmp = server = None
    config = MemoryConfig()
    if args.dsn:
        dsn = args.dsn
        with psycopg.connect(dsn) as conn:
            if conn.execute("SELECT to_regclass('memory_items') IS NOT NULL").fetchone()[0]:
                n = conn.execute("SELECT count(*) FROM memory_items").fetchone()[0]
                if n:
                    raise SystemExit(f"memory_items in --dsn already holds {n} rows; point --dsn at an empty "
                                     "database made for the benchmark")
    else:
        from agent_memory.db.embedded import ensure_embedded_server
        from agent_memory.service import DEFAULT_DATABASE

        tmp = Path(tempfile.mkdtemp(prefix="agent-memory-latency-"))
        config = MemoryConfig(data_dir=tmp / "pgdata")
        server = ensure_embedded_server(config.resolved_data_dir(), keep_running=args.keep)
        dsn = server.ensure_database(DEFAULT_DATABASE)
        log(f"embedded PostgreSQL started in {config.data_dir}")
    pool = open_pool(dsn, min_size=1, max_size=4)
    try:
        MemoryService(pool, config=config, embeddings=LocalEmbeddings())  # migrates the schema
        report["machine"] = machine_info(pool)
        log(f"machine: {report['machine']}; load average {report['loadavg_before']}")
        log(f"command: {report['command']}")
        maker = SentenceMaker(SEED)
        n_pool = {s: max(50, int(args.pool * share)) for s, share in
                  (("user", 0.6), ("project", 0.3), ("session", 0.1))}
        pools = {scope: maker.memories(scope, n) for scope, n in n_pool.items()}
        local = LocalEmbeddings()
        t = time.perf_counter()
        texts = [c for pool_ in pools.values() for c, _ in pool_]
        vectors = dict(zip(texts, local.embed_documents_array(texts)))
        report["pool_embed_s"] = time.perf_counter() - t
        log(f"embedded the pool of {len(texts)} distinct sentences in {report['pool_embed_s']:.0f} s "
            f"({len(texts) / report['pool_embed_s']:.0f} texts/s)")
        max_q = args.queries + 30
        qtexts = maker.questions(max(max_q, 220))
        qvecs = {q: local.embed_query(q) for q in qtexts}
        loader_embeddings = CachedEmbeddings(vectors, jitter=args.jitter)
        loader = MemoryService(pool, config=config, embeddings=loader_embeddings)
        bench = Bench(pool, config, local, MemoryService(pool, config=config, embeddings=local),
                      MemoryService(pool, config=config, embeddings=CachedEmbeddings({}, qvecs)),
                      CachedEmbeddings({}, qvecs), qvecs)
        for first in range(0, args.users, USERS_PER_PROJECT):  # projects need members (access control)
            owner = caller(first)
            loader.create_project(owner.project_id, user_id=owner.user_id)
            for other in range(first + 1, min(first + USERS_PER_PROJECT, args.users)):
                loader.add_member("project", owner.project_id, caller(other).user_id, "editor", user_id=owner.user_id)
        rng = np.random.default_rng(SEED)
        rows = plan_rows(args.sizes[-1], args.users, pools, rng)
        report["data"] = (
            f"{args.users} users with lognormal activity (sigma 0.5), projects of {USERS_PER_PROJECT} users, "
            f"{SESSIONS_PER_USER} sessions per user; scopes {SCOPE_SHARES}. Stored contents come from "
            f"{len(texts)} distinct template sentences embedded once with the local model ({report['pool_embed_s']:.0f} s) "
            "and reused through a caching Embeddings (repeats across tenants, never inside a scope); each stored "
            f"vector gets noise of norm {args.jitter:g} (cosine ~{1 / (1 + args.jitter ** 2) ** 0.5:.2f} to the model's) "
            "so no two rows share a vector. Queries and saved contents are new sentences; end-to-end searches "
            "and saves run the model on every call.")
        report["sizes"] = []
        loaded = 0
        load_rng = random.Random(SEED)
        for size in args.sizes:
            log(f"loading rows {loaded:,} .. {size:,} (import calls of {args.load_chunk} rows, callers interleaved)")
            with Phase(report, "load", size):
                load_stats = load(loader, rows[loaded:size], args.load_chunk, load_rng)
            loaded = size
            with pool.connection() as conn:
                t = time.perf_counter()
                conn.execute("VACUUM ANALYZE memory_items")
                load_stats["vacuum_analyze_s"] = time.perf_counter() - t
                load_stats["table_size"] = conn.execute(
                    "SELECT pg_size_pretty(pg_total_relation_size('memory_items'))").fetchone()[0]
            log(f"  {load_stats}; embedder cache misses so far: {loader_embeddings.misses}")
            prng = random.Random(SEED + size)
            picks = [caller(prng.randrange(args.users), prng.randrange(SESSIONS_PER_USER)) for _ in range(max_q)]
            work = list(zip(picks[30:], qtexts[30:max_q]))
            log(f"  searching: {len(work)} queries x 5 modes (+30 warm-up)")
            with Phase(report, "search", size):
                search = bench.searches(work, list(zip(picks[:30], qtexts[:30])))
            visible = [bench.visible_rows(who) for who, _ in work]
            n_bd = min(100, args.saves)
            log(f"  saving: {args.saves} + {n_bd} statement-timed (+20 warm-up)")
            sw = save_work(maker, args.users, args.saves + n_bd + 20, random.Random(SEED + 2 * size))
            with Phase(report, "save", size):
                saves = bench.saves(sw[20:], sw[:20], n_bd, random.Random(size))
            touch = bench.touch_study(work[:100])
            entry = {"rows": size, "load": load_stats, "search": search, "saves": saves, "touch": touch,
                     "visible_rows": {"median": float(np.median(visible)), "p95": float(np.percentile(visible, 95)),
                                      "max": int(max(visible))},
                     "explain": bench.explain(*work[0])}
            report["sizes"].append(entry)
            log(f"  search end-to-end {fmt(search['end_to_end'])} | DB-only {fmt(search['db_only'])} | "
                f"no UPDATE {fmt(search['db_only_no_touch'])} ms (p50|p95|p99); save {fmt(saves['save'])}; "
                f"visible rows {entry['visible_rows']}")
            if args.explain:
                for name, plan in entry["explain"].items():
                    print(f"--- EXPLAIN {name} at {size:,} rows\n{plan}")
        if args.index_study:
            log("index study")
            prng = random.Random(SEED + 99)
            work_users = [(caller(prng.randrange(args.users), prng.randrange(SESSIONS_PER_USER)), q)
                          for q in qtexts[:100]]
            with Phase(report, "index_study", loaded):
                report["index_study"] = index_study(bench, maker, vectors, args.users, work_users,
                                                    args.big_project, log)
        report["loadavg_after"] = loadavg()
        report["total_s"] = time.perf_counter() - started
        print()
        print(markdown(report))
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1, default=str))
        return report
    finally:
        if args.dsn:
            with pool.connection() as conn:
                for index in (HNSW_INDEX, PARTIAL_INDEX):
                    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index)))
                conn.execute("DELETE FROM memory_items WHERE user_id LIKE 'bench-%'")
        pool.close()
        if server is not None and args.keep:
            print(f"\nkept: {server.dsn(DEFAULT_DATABASE)}\nstop it with: python -c \"from agent_memory.db.embedded "
                  f"import stop_embedded_server; stop_embedded_server('{server.data_dir}')\"; rm -rf {tmp}")
        elif server is not None:
            server.stop()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
