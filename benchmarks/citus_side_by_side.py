"""One PostgreSQL server and a Citus cluster side by side: same machine, same rows, same queries.

    python benchmarks/citus_side_by_side.py [--memories 1000000] [--users 10000] [--project 100000]
                                            [--queries 200] [--saves 100] [--import-rows 10000]
                                            [--cluster-dir /tmp/citus-am-bench] [--port 5460]
                                            [--json OUT]

Two systems hold the same rows and answer the same searches, taking turns:

- **single node**: the embedded PostgreSQL (pgvector) in a temporary directory, as agent-memory
  runs by default;
- **cluster**: a coordinator and two workers started by ``../shared/citus/cluster.sh start DIR 2
  PORT`` (ports PORT..PORT+2, all on 127.0.0.1), with ``MemoryConfig(distributed="citus")`` so
  the service distributes its tables by ``scope_id`` before the load (``agent_memory.db.distributed``).
  The cluster is stopped at the end (unless it was already running in DIR).

Rows (``side_by_side``'s builders): ``--users`` users sharing ``--memories`` minus ``--project``
memories, the timed user owning exactly 100, plus a ``--project``-memory project of 5 members.
The default is the issue's 1,000,000 rows (10,000 users x 90 plus the 100,000-memory project).
Vectors are random clustered unit vectors (384 dimensions, fixed seed), not model output; rows are
shuffled and loaded by binary COPY through ``queries.copy_items`` (so the postings' triggers run:
per statement on one server, per row on a cluster's shards), then VACUUM ANALYZEd.

Measured, the two systems alternating per query:

- search (``search(k=10)``, query vector precomputed, ranking in Python included): the 100-memory
  user (one scope: a router query on the cluster) and a project member (their own memories and the
  project's); recall@10 of each system against **its own** exhaustive ranking (its
  scan-every-visible-row statement) and *short* results (fewer than ``min(10, visible)`` rows);
- saves into the project: the database part (``add`` with the vector precomputed) and end to end
  (``add`` with the text run through the local ONNX model first, ``LocalEmbeddings``); 16 concurrent
  identical saves must leave one row;
- bulk import: the COPY load's rows/s and ``add_many`` of ``--import-rows`` rows (vectors precomputed);
- ``EXPLAIN (ANALYZE)`` of the 100-memory user's search on the cluster (one task on one worker)
  and the task count of the member's search.

How long. On the shared 2-core machine of BENCHMARKS.md (load average about 10) the cluster
loaded about 600 rows/s (the postings' triggers fire per row on the shards) and a member's
search of a 100,000-memory project took about 3.7 s there (its candidates cross the
coordinator), so the default 1M run would take hours: ``--memories 50000 --users 400 --project
10000 --queries 50 --saves 20 --import-rows 2000`` took about 7 minutes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import psycopg
import psycopg.sql
from langchain_core.embeddings import Embeddings
from psycopg.types.json import Jsonb

from agent_memory import MemoryConfig, MemoryService, ops, queries
from agent_memory.embeddings import LocalEmbeddings

sys.path.insert(0, str(Path(__file__).parent))
from latency_timing import stats_ms  # noqa: E402
from side_by_side import K, Precomputed, Rows, Tally, World, _binary_copy, _vacuum, \
    machine, shuffled  # noqa: E402

CLUSTER_SH = Path(__file__).resolve().parents[2] / "shared" / "citus" / "cluster.sh"
PROJECT = "big-project"
SMALL_USER_ROWS = 100


# --- loading -----------------------------------------------------------------------------------


def load(dsn: str, rows: Rows, chunk: int = 50_000) -> float:
    """Seconds to COPY ``rows`` in (one transaction per ``chunk``) and VACUUM ANALYZE. Rows are
    built by :data:`queries.COPY_COLUMNS`' names (a column this benchmark does not set is None)."""
    started = time.perf_counter()
    for lo in range(0, len(rows), chunk):
        def row(i: int) -> tuple[Any, ...]:
            project = rows.scope_id[i] if rows.scope[i] == "project" else None
            given = {"id": uuid.uuid4(), "content": rows.content[i], "memory_type": rows.memory_type[i],
                     "scope": rows.scope[i], "scope_id": rows.scope_id[i], "user_id": rows.user[i],
                     "project_id": project, "source": "user", "confidence": rows.confidence[i],
                     "visibility": "members", "metadata": Jsonb({}), "retention": "decay", "embedding": rows.vectors[i]}
            return tuple(given.get(c) for c in queries.COPY_COLUMNS)

        with psycopg.connect(dsn) as conn:
            _binary_copy(conn, queries.copy_items().as_string(conn), queries.COPY_TYPES,
                         (row(i) for i in range(lo, min(lo + chunk, len(rows)))))
    _vacuum(dsn, ("memory_items", "memory_terms"))
    return time.perf_counter() - started


#: the keyword list of :func:`queries.search_candidates`; with an unbounded pool the vector list
#: already holds every visible row, so without it the candidates are the same (all of them)
KEYWORD_LIST = re.compile(r"UNION\s+\(SELECT m\.id FROM memory_items m CROSS JOIN q CROSS JOIN ceiling"
                          r".*?LIMIT %\(q_pool\)s\)", re.S)


@contextmanager
def exhaustive():
    """Each system's reference: the statement that scans and ranks every visible row
    (``queries.search_candidates`` with an unbounded pool, every visible row a candidate), in
    place of the indexed search, run by the same service on one server and on the cluster.

    Its keyword list is cut out: with an unbounded pool it adds no row (the vector list holds them
    all), and Citus 14 fails on its lateral join over a row's lexemes ("invalid attnum ... for
    relation u"). The BM25 statistics (``kw_df``, ``kw_n``) stay, so the ranking is the same."""
    def scan(identity, *, scopes, types, k, min_relevance, keyword_share=None, **terms):
        terms["pool"] = 10 ** 7
        terms.pop("cached", None)  # the reference reads every row itself
        terms.pop("distributed", None)  # a generic scan: Citus plans it over the caller's shards
        q, p = queries.search_candidates(queries.item_filter(identity, scopes=scopes, types=types), **terms)
        text = q.as_string(None)
        cut = KEYWORD_LIST.sub("", text)
        if cut == text and terms["scoring"].weights.keyword > 0:
            raise RuntimeError("the reference's keyword list was not found: update KEYWORD_LIST")
        return psycopg.sql.SQL(cut), p  # type: ignore[arg-type]

    with mock.patch.object(ops.queries, "indexed_search", scan):
        yield


# --- the two systems ---------------------------------------------------------------------------


class Embedded(Embeddings):
    """A save end to end: the text goes through the local ONNX model (the real cost), and the row
    keeps the benchmark's precomputed vector (so both systems store the same rows)."""

    def __init__(self, vectors: Precomputed, model: LocalEmbeddings) -> None:
        self.vectors, self.local = vectors, model
        self.model = vectors.model

    def embed_query(self, text: str) -> list[float]:
        self.local.embed_query(text)
        return self.vectors.embed_query(text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.local.embed_documents(texts)
        return self.vectors.embed_documents(texts)


#: the same vector space as the loaded rows' (the service names an embedder by its class)
Embedded.__name__ = Precomputed.__name__


@dataclass(frozen=True)
class Caller:
    """Who searches, which levels (``scope``: None for every level they can read, as a plain
    ``search`` does), whose vectors the queries are drawn near, and how many rows they see."""

    name: str
    ids: dict[str, str]
    scope: str | list[str] | None
    near: tuple[str, str]
    visible: int

    def search(self, system: System, text: str) -> list[Any]:
        return system.am.for_user(**self.ids).search(text, k=K, scope=self.scope)


@dataclass
class System:
    name: str
    url: str
    config: MemoryConfig
    emb: Precomputed = field(default_factory=Precomputed)
    service: MemoryService | None = None
    load_s: float = 0.0

    @property
    def am(self) -> MemoryService:
        assert self.service is not None
        return self.service


def cluster_start(directory: Path, port: int, log: Any) -> tuple[str, bool]:
    """The coordinator's URL of a 2-worker cluster in ``directory``; True when this run started it."""
    if not CLUSTER_SH.exists():
        raise SystemExit(f"no Citus build at {CLUSTER_SH.parent}: this benchmark needs ../shared/citus (see its README)")
    running = (directory / f"n{port}" / "postmaster.pid").exists()
    env = {**os.environ, "PYTHON": sys.executable}
    log(f"cluster: {'joining the one running' if running else 'starting'} in {directory} (ports {port}-{port + 2})")
    command = ["url", str(directory)] if running else ["start", str(directory), "2", str(port)]
    done = subprocess.run([str(CLUSTER_SH), *command], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"cluster.sh {command[0]} failed: {done.stderr.strip() or done.stdout.strip()}")
    out = done.stdout
    url = next(line.split("=", 1)[1] for line in out.splitlines() if line.startswith("DATABASE_URL="))
    return url, not running


def cluster_stop(directory: Path) -> None:
    """``cluster.sh stop``, then any node it left running (its list of ports may hold the
    coordinator's only), each by its own data directory."""
    subprocess.run([str(CLUSTER_SH), "stop", str(directory)], check=False, capture_output=True)
    owner = (directory / "owner").read_text().strip() if (directory / "owner").exists() else None
    for node in sorted(directory.glob("n*/postmaster.pid")):
        command = [str(directory / "pg" / "bin" / "pg_ctl"), "-D", str(node.parent), "-m", "fast", "-w", "stop"]
        if owner and os.geteuid() == 0:
            command = ["runuser", "-u", owner, "--", *command]
        subprocess.run(command, check=False, capture_output=True,
                       env={**os.environ, "LD_LIBRARY_PATH": str(directory / "pg" / "lib")})


def fresh_cluster_database(url: str) -> str:
    """A new database on every node of ``url``'s cluster, citus and vector in it, workers registered."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from citus_cluster import create_database, drop_database

    drop_database(url, "am_side_by_side")
    return create_database(url, "am_side_by_side")


def fresh_single_database(server: Any) -> str:
    with psycopg.connect(server.ensure_database("postgres"), autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS "am_side_by_side" WITH (FORCE)')
        conn.execute('CREATE DATABASE "am_side_by_side"')
    return server.ensure_database("am_side_by_side")


def cluster_facts(url: str) -> dict[str, Any]:
    with psycopg.connect(url) as conn:
        one = lambda q: conn.execute(q).fetchone()[0]  # noqa: E731
        return {"citus": one("SELECT extversion FROM pg_extension WHERE extname = 'citus'"),
                "workers": one("SELECT count(*) FROM pg_dist_node WHERE groupid <> 0"),
                "shards_memory_items": one("SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'memory_items'::regclass"),
                "shared_buffers_per_node": one("SHOW shared_buffers"),
                "distributed_tables": one("SELECT count(*) FROM citus_tables WHERE citus_table_type = 'distributed'"),
                "reference_tables": one("SELECT count(*) FROM citus_tables WHERE citus_table_type = 'reference'")}


# --- measurements ------------------------------------------------------------------------------


def run_searches(world: World, systems: Sequence[System], callers: Sequence[Caller], n: int
                 ) -> dict[str, dict[str, Tally]]:
    """``n`` searches per caller, the systems taking turns (the order alternates); then each
    system's answers are scored against its own exhaustive ranking (after the timed loop: the
    scan reads the whole table and would evict the pages the timed searches use)."""
    tallies = {c.name: {s.name: Tally() for s in systems} for c in callers}
    asked: list[tuple[System, Caller, str, list[float], list[Any]]] = []
    for i in range(n):
        for caller in callers:
            text, vector = world.query(*caller.near)
            for system in (systems if i % 2 == 0 else list(reversed(systems))):
                system.emb.query = vector.tolist()
                t = time.perf_counter()
                got = caller.search(system, text)
                tallies[caller.name][system.name].times.append(time.perf_counter() - t)
                asked.append((system, caller, text, system.emb.query, [r.item.id for r in got]))
    with exhaustive():
        for system, caller, text, vector, got in asked:
            system.emb.query = vector
            want = [r.item.id for r in caller.search(system, text)]
            tally = tallies[caller.name][system.name]
            tally.recall.append(len(set(got) & set(want)) / max(1, len(want)))
            tally.short += len(got) < min(K, caller.visible)
    return tallies


def measure_saves(world: World, systems: Sequence[System], local: LocalEmbeddings, member: str, n: int
                  ) -> dict[str, dict[str, Any]]:
    """``n`` saves per system into the project, DB part and end to end alternating, the systems
    taking turns; then 16 concurrent identical saves per system."""
    times = {s.name: {"db": [], "end_to_end": []} for s in systems}
    outcomes = {s.name: {"inserted": 0, "deduplicated": 0} for s in systems}
    e2e = {s.name: MemoryService(s.url, config=s.config, embeddings=Embedded(s.emb, local)) for s in systems}
    try:
        for i in range(n):
            for kind in ("db", "end_to_end"):
                text, vector = world.query("project", PROJECT)
                text = f"{text} (save {i} {kind} {uuid.uuid4().hex[:6]})"
                for system in (systems if i % 2 == 0 else list(reversed(systems))):
                    system.emb.documents[text] = vector
                    am = system.am if kind == "db" else e2e[system.name]
                    t = time.perf_counter()
                    item = am.for_user(member, project_id=PROJECT).add(text, scope="project")
                    times[system.name][kind].append(time.perf_counter() - t)
                    outcomes[system.name]["deduplicated" if item.deduplicated else "inserted"] += 1
    finally:
        for am in e2e.values():
            am.close()
    out: dict[str, dict[str, Any]] = {}
    warm = min(10, n // 5)
    for system in systems:
        db, full = stats_ms(times[system.name]["db"][warm:]), stats_ms(times[system.name]["end_to_end"][warm:])
        out[system.name] = {"db_p50": round(db["p50"], 1), "db_p95": round(db["p95"], 1),
                            "e2e_p50": round(full["p50"], 1), "e2e_p95": round(full["p95"], 1),
                            "n": n - warm, "outcomes": outcomes[system.name],
                            "rows_after_16_concurrent_saves": concurrent_saves(world, system, member)}
    return out


def concurrent_saves(world: World, system: System, member: str) -> int:
    text, vector = world.query("project", PROJECT)
    text = f"The incident review for the {uuid.uuid4().hex[:6]} outage is on Monday"
    system.emb.documents[text] = vector
    barrier = threading.Barrier(16)

    def save() -> None:
        barrier.wait()
        system.am.for_user(member, project_id=PROJECT).add(text, scope="project")

    threads = [threading.Thread(target=save) for _ in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    with psycopg.connect(system.url) as conn:
        return conn.execute("SELECT count(*) FROM memory_items WHERE content = %s AND status = 'active'",
                            (text,)).fetchone()[0]


def measure_import(world: World, system: System, user: str, n: int) -> dict[str, Any]:
    rows = world.rows([user], "user", None, n)
    system.emb.documents.update({c: v for c, v in zip(rows.content, rows.vectors)})
    items = [{"content": c, "memory_type": t} for c, t in zip(rows.content, rows.memory_type)]
    t = time.perf_counter()
    result = system.am.for_user(user).add_many(items)
    seconds = time.perf_counter() - t
    return {"rows": len(result.inserted), "seconds": round(seconds, 2), "rows_per_s": round(len(result.inserted) / seconds)}


def explain(system: System, caller: Caller, text: str) -> str:
    """``EXPLAIN (ANALYZE)`` of the search statement one real search of ``caller`` runs (each
    statement its own transaction: Citus will not mix its local and remote execution in one)."""
    seen: list[Any] = []
    real = queries.indexed_search

    def capture(*args: Any, **kwargs: Any) -> Any:
        seen.append(real(*args, **kwargs))
        return seen[-1]

    with mock.patch.object(ops.queries, "indexed_search", capture):
        caller.search(system, text)
    q, p = seen[-1]
    with psycopg.connect(system.url, autocommit=True) as conn:
        text = psycopg.ClientCursor(conn).mogrify(q, p)  # parameters written in: Citus explains no parameterised subplan
        conn.execute(text).fetchall()
        plan = conn.execute("EXPLAIN (ANALYZE) " + text).fetchall()
    return "\n".join(r[0] for r in plan)


def statement_times(systems: Sequence[System], world: World, caller: Caller, n: int) -> dict[str, dict[str, Any]]:
    """Where a search's time goes: each statement a ``search`` of ``caller`` sends, p50 in ms over
    ``n`` searches per system (the ranking statement; recording the hits' use), and the whole call."""
    out: dict[str, dict[str, Any]] = {}
    real = psycopg.Cursor.execute
    for system in systems:
        seen: dict[str, list[float]] = {}

        def timed(cur: Any, query: Any, params: Any = None, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return real(cur, query, params, **kw)
            finally:
                text = query.decode() if isinstance(query, bytes) else query if isinstance(query, str) \
                    else query.as_string(None)
                kind = "record use (UPDATE of the hits)" if "UPDATE memory_items" in text else \
                    "ranking statement" if "memory_terms" in text else "other"
                seen.setdefault(kind, []).append(time.perf_counter() - t)

        whole: list[float] = []
        with mock.patch.object(psycopg.Cursor, "execute", timed):
            for _ in range(n):
                text, vector = world.query(*caller.near)
                system.emb.query = vector.tolist()
                t = time.perf_counter()
                caller.search(system, text)
                whole.append(time.perf_counter() - t)
        out[system.name] = {k: round(stats_ms(v)["p50"], 1) for k, v in seen.items()}
        out[system.name]["whole search()"] = round(stats_ms(whole)["p50"], 1)
    return out


def task_counts(plan: str) -> list[int]:
    return [int(m) for m in re.findall(r"Task Count: (\d+)", plan)]


# --- the run -----------------------------------------------------------------------------------


def build_rows(world: World, args: argparse.Namespace) -> tuple[Rows, list[str], str]:
    users = [f"user-{i:05d}" for i in range(args.users)]
    small = users[-1]
    per_user = (args.memories - args.project - SMALL_USER_ROWS) // max(1, args.users - 1)
    parts = [world.rows(users[:-1], "user", None, per_user), world.rows([small], "user", None, SMALL_USER_ROWS)]
    if args.project:
        parts.append(world.rows(users[:5], "project", PROJECT, args.project))
    return shuffled(*parts), users, small


def run(args: argparse.Namespace, log: Any) -> dict[str, Any]:
    from agent_memory.db.embedded import ensure_embedded_server

    world = World()
    rows, users, small = build_rows(world, args)
    members = users[:5]
    log(f"data: {len(rows):,} rows ({args.users:,} users, the timed one with {SMALL_USER_ROWS}; project {args.project:,})")
    report: dict[str, Any] = {"rows": len(rows)}
    tmp = Path(tempfile.mkdtemp(prefix="agent-memory-citus-side-by-side-"))
    server = ensure_embedded_server(tmp / "pgdata")
    cluster_dir = Path(args.cluster_dir)
    started_cluster = False
    systems: list[System] = []
    try:
        cluster_url, started_cluster = cluster_start(cluster_dir, args.port, log)
        systems = [System("single node", fresh_single_database(server), MemoryConfig()),
                   System("cluster (2 workers)", fresh_cluster_database(cluster_url), MemoryConfig(distributed="citus"))]
        report["machine"] = machine(server.ensure_database("postgres"))
        for system in systems:
            system.service = MemoryService(system.url, config=system.config, embeddings=system.emb)
            log(f"{system.name}: loading {len(rows):,} rows by COPY")
            system.load_s = load(system.url, rows)
            log(f"{system.name}: loaded in {system.load_s:.0f} s ({len(rows) / system.load_s:,.0f} rows/s)")
            system.am.create_project(PROJECT, user_id=members[0])
            for m in members[1:]:
                system.am.add_member("project", PROJECT, m, "editor", user_id=members[0])
        report["cluster"] = cluster_facts(systems[1].url)
        user = f"{SMALL_USER_ROWS}-memory user"
        callers = [Caller(f"{user}, own scope (`scope=\"user\"`)", {"user_id": small}, "user", ("user", small), SMALL_USER_ROWS),
                   Caller(f"{user}, every level (default)", {"user_id": small}, None, ("user", small), SMALL_USER_ROWS)]
        if args.project:
            per_user = (args.memories - args.project - SMALL_USER_ROWS) // max(1, args.users - 1)
            member = {"user_id": members[1], "project_id": PROJECT}
            member_name = f"{args.project:,}-memory project's member"
            callers += [Caller(f"{member_name}, own + project (`scope=[\"user\", \"project\"]`)", member,
                               ["user", "project"], ("project", PROJECT), args.project + per_user),
                        Caller(f"{member_name}, every level (default)", member, None, ("project", PROJECT),
                               args.project + per_user)]
        log(f"searches: {args.queries} per caller per system, interleaved")
        for _ in range(10):
            for c in callers:
                for system in systems:
                    system.emb.query = world.query(*c.near)[1].tolist()
                    c.search(system, "warm up")
        tallies = run_searches(world, systems, callers, args.queries)
        report["searches"] = {c.name: {s.name: tallies[c.name][s.name].summary() for s in systems} for c in callers}
        report["statements"] = statement_times(systems, world, callers[0], min(args.queries, 30))
        report["explain"] = {}
        for c in callers:
            text, vector = world.query(*c.near)
            systems[1].emb.query = vector.tolist()
            plan = explain(systems[1], c, text)
            report["explain"][c.name] = {"task_counts": task_counts(plan), "plan": plan}
        if args.project and args.saves:
            log(f"saves: {args.saves} per system, DB part and end to end; 16 concurrent identical saves")
            report["saves"] = measure_saves(world, systems, LocalEmbeddings(), members[2], args.saves)
        if args.import_rows:
            log(f"bulk import: add_many of {args.import_rows:,} rows per system")
            report["import"] = {s.name: measure_import(world, s, f"importer-{i}", args.import_rows)
                                for i, s in enumerate(systems)}
        report["load"] = {s.name: {"seconds": round(s.load_s), "rows_per_s": round(len(rows) / s.load_s)} for s in systems}
    finally:
        for system in systems:
            if system.service is not None:
                system.service.close()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        if started_cluster and not args.keep_cluster:
            cluster_stop(cluster_dir)
    return report


def markdown(report: dict[str, Any]) -> str:
    names = list(next(iter(report["searches"].values())))
    single, cluster = names
    lines = [f"{report['rows']:,} rows; load by COPY: " + ", ".join(
        f"{n} {v['seconds']} s ({v['rows_per_s']:,} rows/s)" for n, v in report["load"].items()), "",
        "| measured | " + " | ".join(names) + " | cluster / single |", "|---|---|---|---|"]
    for caller, by in report["searches"].items():
        a, b = by[single], by[cluster]
        lines.append(f"| search, {caller}: p50 / p95 ms | {a['p50']} / {a['p95']} | {b['p50']} / {b['p95']} |"
                     f" {b['p50'] / a['p50']:.2f}x / {b['p95'] / a['p95']:.2f}x |")
        lines.append(f"| search, {caller}: recall@10, short | {a['recall']}, {a['short']} of {a['n']} |"
                     f" {b['recall']}, {b['short']} of {b['n']} | |")
    if "saves" in report:
        a, b = report["saves"][single], report["saves"][cluster]
        for kind, label in (("db", "DB part"), ("e2e", "end to end")):
            lines.append(f"| save into the project, {label}: p50 / p95 ms | {a[kind + '_p50']} / {a[kind + '_p95']} |"
                         f" {b[kind + '_p50']} / {b[kind + '_p95']} | {b[kind + '_p95'] / a[kind + '_p95']:.2f}x (p95) |")
        lines.append(f"| 16 concurrent identical saves: rows left | {a['rows_after_16_concurrent_saves']} |"
                     f" {b['rows_after_16_concurrent_saves']} | |")
    if "import" in report:
        a, b = report["import"][single], report["import"][cluster]
        lines.append(f"| bulk import (`add_many`, {a['rows']:,} rows): rows/s | {a['rows_per_s']:,} | {b['rows_per_s']:,} |"
                     f" {b['rows_per_s'] / a['rows_per_s']:.2f}x |")
    a, b = report["load"][single], report["load"][cluster]
    lines.append(f"| bulk load (COPY, {report['rows']:,} rows): rows/s | {a['rows_per_s']:,} | {b['rows_per_s']:,} |"
                 f" {b['rows_per_s'] / a['rows_per_s']:.2f}x |")
    lines += ["", f"Where a search's time goes ({next(iter(report['searches']))}), p50 ms per statement:", ""]
    for name, parts in report["statements"].items():
        lines.append(f"- {name}: " + ", ".join(f"{k} {v}" for k, v in parts.items()))
    for caller, e in report["explain"].items():
        lines.append(f"\nCluster EXPLAIN, {caller}: Task Count {e['task_counts']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--memories", type=int, default=1_000_000, help="rows in all (users' and the project's)")
    p.add_argument("--users", type=int, default=10_000)
    p.add_argument("--project", type=int, default=100_000, help="memories of the 5-member project (0: none)")
    p.add_argument("--queries", type=int, default=200, help="searches per caller per system")
    p.add_argument("--saves", type=int, default=100, help="saves per system of each kind (DB part, end to end)")
    p.add_argument("--import-rows", type=int, default=10_000, help="rows of the add_many import per system")
    p.add_argument("--cluster-dir", default="/tmp/citus-am-bench")
    p.add_argument("--port", type=int, default=5460, help="the coordinator's port; the workers take the next two")
    p.add_argument("--keep-cluster", action="store_true", help="leave a cluster this run started running")
    p.add_argument("--json", help="write every number (and the plans) to this file")
    args = p.parse_args(argv)
    if args.users < 2 or args.queries < 1 or args.saves < 0 or args.import_rows < 0 or args.project < 0:
        p.error("--users must be >= 2, --queries >= 1, and --saves, --import-rows, --project >= 0")
    if (args.memories - args.project - SMALL_USER_ROWS) // (args.users - 1) < 1:
        p.error("--memories must leave at least one memory per user after the project and the timed user's 100")
    started = time.perf_counter()
    log = lambda msg: print(f"[{time.perf_counter() - started:7.1f}s] {msg}", flush=True)  # noqa: E731
    report: dict[str, Any] = {"command": shlex.join(["python", "benchmarks/citus_side_by_side.py", *(argv or sys.argv[1:])]),
                              "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                              "loadavg_start": os.getloadavg()}
    report.update(run(args, log))
    report["loadavg_end"] = os.getloadavg()
    report["seconds"] = round(time.perf_counter() - started)
    print(markdown(report), flush=True)
    for caller, e in report["explain"].items():
        print(f"\nEXPLAIN (ANALYZE) on the cluster, {caller}:\n{e['plan']}\n", flush=True)
    print(f"command: {report['command']}\ndate: {report['date']}\nmachine: {report['machine']}\n"
          f"cluster: {report['cluster']}\nload average at start / end: {report['loadavg_start']} / {report['loadavg_end']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return report


if __name__ == "__main__":
    main()
