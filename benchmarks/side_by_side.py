"""agent-memory and LangGraph's ``PostgresStore`` side by side: same server, rows, vectors, queries.

    python benchmarks/side_by_side.py [--scenarios users1000,users10,project20k] [--million]
                                      [--queries 300] [--scale 1.0] [--explain] [--json OUT]

One embedded PostgreSQL (pgvector) in a temporary directory serves both systems, each in its own
database. Scenarios (row counts times ``--scale``):

- ``users1000``: 100,000 user memories over 1,000 users; a search is one user's;
- ``users10``: 100,000 over 10 users (10,000 each);
- ``project20k``: ``users1000`` plus a 20,000-memory project of 5 members; a member's search (own
  memories and the project's) is timed alternately with a 100-memory user's, in one run; also
  the save path, 16 concurrent identical saves, and the bulk import rate;
- ``million`` (``--million``): 10,000 users x 90 plus one 100,000-memory project: 1,000,000 rows.

Data. Contents are sentences from ``latency_data``'s templates (real words for the keyword part);
vectors are **random clustered unit vectors** (384 dimensions, fixed seed; each tenant draws from
20 of 1,000 cluster centres, cosine to the centre about 0.7), not model output: at a million rows
embedding text would take hours and the comparison is about the database. A query vector is a
stored vector of the caller plus noise (cosine about 0.8), its text a template question. Rows are
shuffled before loading, so tenants are interleaved on disk. Both systems are loaded by binary COPY
(agent-memory through its own ``queries.copy_items``, so its triggers fill ``memory_terms``) and
then VACUUM ANALYZEd. LangGraph uses its default index config (HNSW, ``vector``), the index built
after the load.

Measured per query, systems interleaved (the order alternates): the database part of a search,
ms — agent-memory ``MemoryHandle.search(k=10)`` with the query vector precomputed
(ranking in Python included), LangGraph ``store.search(prefix, query=..., limit=10)`` with the same
vector. Recall@10 is against each system's own exact answer: agent-memory's exhaustive ranking
(its scan-every-visible-row statement, ``queries.search_candidates`` with an unbounded pool) and
LangGraph's exact cosine top 10 under the prefix (numpy over the loaded vectors). A result is
*short* when it holds fewer than ``min(10, rows the caller sees)`` rows.
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
from langchain_core.embeddings import Embeddings
from pgvector.psycopg.vector import register_vector_info
from psycopg.types import TypeInfo
from psycopg.types.json import Jsonb

from agent_memory import MemoryConfig, MemoryService, ops, queries

sys.path.insert(0, str(Path(__file__).parent))
from latency_data import QUERY_TEMPLATES, TEMPLATES, SentenceMaker  # noqa: E402
from latency_timing import stats_ms  # noqa: E402

DIMS = 384
SEED = 20261124
CENTRES = 1000
TOPICS_PER_TENANT = 20
K = 10


# --- data --------------------------------------------------------------------------------------


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


@dataclass
class Rows:
    """Rows in load order: who wrote each, its level and scope id, text, type, confidence, vector."""

    user: list[str] = field(default_factory=list)
    scope: list[str] = field(default_factory=list)
    scope_id: list[str] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    memory_type: list[str] = field(default_factory=list)
    confidence: list[float] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.user)


class World:
    """Deterministic generator of tenants' rows and of queries near them."""

    def __init__(self, seed: int = SEED) -> None:
        self.rng = np.random.default_rng(seed)
        self.prng = random.Random(seed)
        self.centres = unit(self.rng.normal(size=(CENTRES, DIMS)))
        self.maker = SentenceMaker(seed)
        self.topics: dict[str, np.ndarray] = {}
        self.by_scope: dict[tuple[str, str], list[np.ndarray]] = {}  # (scope, scope_id) -> vector blocks
        self.templates = {s: [(mt, tpl) for mt, sc, tpl in TEMPLATES if sc == s] for s in ("user", "project")}

    def _vectors(self, tenant: str, n: int) -> np.ndarray:
        topics = self.topics.setdefault(tenant, self.rng.choice(CENTRES, TOPICS_PER_TENANT, replace=False))
        noise = self.rng.normal(size=(n, DIMS)).astype(np.float32) / np.sqrt(DIMS)
        return unit(self.centres[self.rng.choice(topics, n)] + noise)

    def rows(self, writers: Sequence[str], scope: str, scope_id: str | None, n: int) -> Rows:
        """``n`` rows of one scope (``scope_id`` None: each writer's own user scope, n each)."""
        out = Rows()
        owners = [(w, w) for w in writers for _ in range(n)] if scope_id is None else \
            [(writers[i % len(writers)], scope_id) for i in range(n)]
        blocks: dict[str, list[int]] = {}
        for i, (_, sid) in enumerate(owners):
            blocks.setdefault(sid, []).append(i)
        vectors = np.empty((len(owners), DIMS), dtype=np.float32)
        for sid, idx in blocks.items():
            vectors[idx] = self._vectors(sid, len(idx))
            self.by_scope.setdefault((scope, sid), []).append(vectors[idx])
        for (writer, sid), vector in zip(owners, vectors):
            mt, tpl = self.prng.choice(self.templates["project" if scope == "project" else "user"])
            out.user.append(writer)
            out.scope.append(scope)
            out.scope_id.append(sid)
            out.content.append(self.maker.fill(tpl))
            out.memory_type.append(mt)
            out.confidence.append(round(self.prng.uniform(0.6, 1.0), 3))
            out.vectors.append(vector)
        return out

    def scope_matrix(self, scope: str, scope_id: str) -> np.ndarray:
        return np.concatenate(self.by_scope[(scope, scope_id)])

    def query(self, scope: str, scope_id: str) -> tuple[str, np.ndarray]:
        stored = self.scope_matrix(scope, scope_id)
        base = stored[self.rng.integers(len(stored))]
        noise = self.rng.normal(size=DIMS).astype(np.float32) * (0.75 / np.sqrt(DIMS))
        return self.maker.fill(self.prng.choice(QUERY_TEMPLATES)), unit(base + noise)


def shuffled(*parts: Rows, seed: int = SEED) -> Rows:
    order = [(p, i) for p in parts for i in range(len(p))]
    random.Random(seed).shuffle(order)
    out = Rows()
    for p, i in order:
        for name in ("user", "scope", "scope_id", "content", "memory_type", "confidence", "vectors"):
            getattr(out, name).append(getattr(p, name)[i])
    return out


# --- loading -----------------------------------------------------------------------------------


def _binary_copy(conn: psycopg.Connection, statement: str, types: Sequence[str], rows: Any) -> None:
    with conn.cursor() as cur:
        register_vector_info(cur, TypeInfo.fetch(conn, "vector"))
        with cur.copy(statement) as copy:
            copy.set_types(list(types))
            for row in rows:
                copy.write_row(row)


def load_agent_memory(dsn: str, rows: Rows, chunk: int = 50_000) -> float:
    started = time.perf_counter()
    for lo in range(0, len(rows), chunk):
        with psycopg.connect(dsn) as conn:
            _binary_copy(conn, queries.copy_items().as_string(conn), queries.COPY_TYPES, (
                (uuid.uuid4(), rows.content[i], rows.memory_type[i], rows.scope[i], rows.scope_id[i], rows.user[i],
                 rows.scope_id[i] if rows.scope[i] == "project" else None, None, "user", None, rows.confidence[i],
                 "members", Jsonb({}), None, None, "decay", None, None, None, rows.vectors[i])  # no key, expiry, context
                for i in range(lo, min(lo + chunk, len(rows)))))
    _vacuum(dsn, ("memory_items", "memory_terms"))
    return time.perf_counter() - started


def lg_prefix(scope: str, scope_id: str) -> tuple[str, str]:
    return ("memories", scope_id) if scope == "user" else ("project", scope_id)


def load_langgraph(dsn: str, rows: Rows, chunk: int = 50_000) -> float:
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP INDEX IF EXISTS store_vectors_embedding_idx")
    for lo in range(0, len(rows), chunk):
        idx = range(lo, min(lo + chunk, len(rows)))
        keys = {i: uuid.uuid4().hex for i in idx}
        with psycopg.connect(dsn) as conn:
            _binary_copy(conn, "COPY store (prefix, key, value) FROM STDIN (FORMAT BINARY)", ("text", "text", "jsonb"),
                         ((".".join(lg_prefix(rows.scope[i], rows.scope_id[i])), keys[i],
                           Jsonb({"text": rows.content[i], "type": rows.memory_type[i]})) for i in idx))
            _binary_copy(conn, "COPY store_vectors (prefix, key, field_name, embedding) FROM STDIN (FORMAT BINARY)",
                         ("text", "text", "text", "vector"),
                         ((".".join(lg_prefix(rows.scope[i], rows.scope_id[i])), keys[i], "text", rows.vectors[i])
                          for i in idx))
    with psycopg.connect(dsn, autocommit=True) as conn:  # LangGraph's own index, built once after the load
        conn.execute("SET maintenance_work_mem = '2GB'")
        conn.execute("CREATE INDEX store_vectors_embedding_idx ON store_vectors USING hnsw"
                     " (embedding vector_cosine_ops)")
    _vacuum(dsn, ("store", "store_vectors"))
    return time.perf_counter() - started


def _vacuum(dsn: str, tables: Sequence[str]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in tables:
            conn.execute(f"VACUUM ANALYZE {table}")


# --- the two systems ---------------------------------------------------------------------------


class Precomputed(Embeddings):
    """Hands out the vector set for the next call: the query's, or the saved texts'."""

    model = "side-by-side-random-384"

    def __init__(self) -> None:
        self.query: list[float] = unit(np.ones(DIMS, dtype=np.float32)).tolist()
        self.documents: dict[str, np.ndarray] = {}

    def embed_query(self, text: str) -> list[float]:
        return self.query

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.documents[t].tolist() if t in self.documents else self.query for t in texts]


@contextmanager
def exhaustive():
    """agent-memory's reference: the statement that scans and ranks every visible row."""
    def scan(identity, *, scopes, types, k, min_relevance, keyword_share=None, **terms):
        terms["pool"] = 10 ** 7
        terms.pop("cached", None)  # the reference reads every row itself
        return queries.search_candidates(queries.item_filter(identity, scopes=scopes, types=types), **terms)

    with mock.patch.object(ops.queries, "indexed_search", scan):
        yield


@dataclass
class Caller:
    name: str
    ids: dict[str, str]                     # agent-memory identity keywords
    lg: tuple[str, str]                     # LangGraph namespace prefix searched
    lg_rows: tuple[str, str]                # (scope, scope_id) whose vectors LangGraph searches
    visible: int                            # rows agent-memory shows this caller


@dataclass
class Tally:
    times: list[float] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)
    short: int = 0

    def summary(self) -> dict[str, Any]:
        s = stats_ms(self.times)
        return {"p50": round(s["p50"], 1), "p95": round(s["p95"], 1), "recall": round(float(np.mean(self.recall)), 4),
                "short": self.short, "n": len(self.times)}


def run_queries(world: World, am: MemoryService, emb: Precomputed, store: Any, callers: Sequence[Caller],
                n: int) -> dict[str, dict[str, Tally]]:
    """Time ``n`` searches per caller, the two systems taking turns; then score them against the
    exact answers. agent-memory's reference runs after the timed loop: its exhaustive scan reads
    the whole table and would evict the index pages the timed searches use."""
    tallies = {c.name: {"agent-memory": Tally(), "langgraph": Tally()} for c in callers}
    lg_vectors = {c.name: world.scope_matrix(*c.lg_rows) for c in callers}
    asked: list[tuple[Caller, str, list[float], list[Any]]] = []
    for i in range(n):
        for caller in callers:
            text, vector = world.query(*caller.lg_rows)
            emb.query = vector.tolist()

            def agent_memory() -> None:
                t = time.perf_counter()
                got = am.for_user(**caller.ids).search(text, k=K)
                tallies[caller.name]["agent-memory"].times.append(time.perf_counter() - t)
                asked.append((caller, text, emb.query, [r.item.id for r in got]))

            def langgraph() -> None:
                t = time.perf_counter()
                got = store.search(caller.lg, query=text, limit=K)
                tallies[caller.name]["langgraph"].times.append(time.perf_counter() - t)
                sims = lg_vectors[caller.name] @ vector
                exact = np.sort(sims)[::-1][:K]
                tally = tallies[caller.name]["langgraph"]
                found = sorted((float(x.score) for x in got), reverse=True)
                # recall by score: vectors are distinct, so the exact top K is the K best cosines
                tally.recall.append(sum(1 for s in found if s >= exact[-1] - 1e-5) / len(exact))
                tally.short += len(got) < min(K, len(sims))

            for system in ((agent_memory, langgraph) if i % 2 == 0 else (langgraph, agent_memory)):
                system()
    with exhaustive():
        for caller, text, vector, got in asked:
            emb.query = vector
            want = [r.item.id for r in am.for_user(**caller.ids).search(text, k=K)]
            tally = tallies[caller.name]["agent-memory"]
            tally.recall.append(len(set(got) & set(want)) / max(1, len(want)))
            tally.short += len(got) < min(K, caller.visible)
    return tallies


def explain(am: MemoryService, emb: Precomputed, caller: Caller, text: str) -> str:
    """EXPLAIN of the search statement one real search runs (with the candidates its copies of
    big ranges chose, if any: those are parameters of the statement)."""
    seen: list[Any] = []
    real = queries.indexed_search

    def capture(*args: Any, **kwargs: Any) -> Any:
        seen.append(real(*args, **kwargs))
        return seen[-1]

    with mock.patch.object(ops.queries, "indexed_search", capture):
        am.for_user(**caller.ids).search(text, k=K)
    q, p = seen[-1]
    with psycopg.connect(am_dsn(am)) as conn:
        conn.execute(q, p).fetchall()
        plan = conn.execute(psycopg.sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + q, p).fetchall()
    return "\n".join(r[0] for r in plan)


def am_dsn(am: MemoryService) -> str:
    return am.conn.conninfo  # type: ignore[union-attr]


# --- saves and imports (project20k) ------------------------------------------------------------


def measure_saves(world: World, am: MemoryService, emb: Precomputed, member: str, project: str, n: int = 200
                  ) -> dict[str, Any]:
    times: list[float] = []
    outcomes = {"inserted": 0, "deduplicated": 0}
    for i in range(n):
        text, vector = world.query("project", project)
        text = f"{text} (save {i} {uuid.uuid4().hex[:6]})"
        emb.documents[text] = vector
        t = time.perf_counter()
        item = am.for_user(member, project_id=project).add(text, scope="project")
        times.append(time.perf_counter() - t)
        outcomes["deduplicated" if item.deduplicated else "inserted"] += 1
    # 16 threads save the same new memory at once: exactly one row
    text, vector = world.query("project", project)
    text = f"The incident review for the {uuid.uuid4().hex[:6]} outage is on Monday"
    emb.documents[text] = vector
    barrier = threading.Barrier(16)

    def save() -> None:
        barrier.wait()
        am.for_user(member, project_id=project).add(text, scope="project")

    threads = [threading.Thread(target=save) for _ in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    with psycopg.connect(am_dsn(am)) as conn:
        rows = conn.execute("SELECT count(*) FROM memory_items WHERE content = %s AND status = 'active'",
                            (text,)).fetchone()[0]
    s = stats_ms(times[20:])
    return {"p50": round(s["p50"], 1), "p95": round(s["p95"], 1), "outcomes": outcomes,
            "rows_after_16_concurrent_saves": rows}


def measure_import(world: World, am: MemoryService, emb: Precomputed, n: int = 10_000) -> dict[str, Any]:
    user = f"importer-{uuid.uuid4().hex[:6]}"
    rows = world.rows([user], "user", None, n)
    emb.documents.update({c: v for c, v in zip(rows.content, rows.vectors)})
    items = [{"content": c, "memory_type": t} for c, t in zip(rows.content, rows.memory_type)]
    t = time.perf_counter()
    result = am.for_user(user).add_many(items)
    seconds = time.perf_counter() - t
    return {"rows": len(result.inserted), "seconds": round(seconds, 2), "rows_per_s": round(len(result.inserted) / seconds)}


# --- scenarios ---------------------------------------------------------------------------------


def scenario_layout(name: str, scale: float) -> dict[str, Any]:
    s = lambda x: max(1, int(round(x * scale)))  # noqa: E731
    return {
        "users1000": {"users": s(1000), "per_user": 100, "project": 0},
        "users10": {"users": 10, "per_user": s(10_000), "project": 0},
        "project20k": {"users": s(1000), "per_user": 100, "project": s(20_000)},
        "million": {"users": s(10_000), "per_user": 90, "project": s(100_000)},
    }[name]


def fresh_databases(server: Any, tag: str) -> tuple[str, str]:
    admin = server.ensure_database("postgres")
    names = (f"am_{tag}", f"lg_{tag}")
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
    return tuple(server.ensure_database(name) for name in names)  # type: ignore[return-value]


def run_scenario(server: Any, name: str, args: argparse.Namespace, log: Any) -> dict[str, Any]:
    from langgraph.store.postgres import PostgresStore

    layout = scenario_layout(name, args.scale)
    world = World()
    users = [f"user-{i:05d}" for i in range(layout["users"])]
    parts = [world.rows(users, "user", None, layout["per_user"])]
    members = users[:5]
    if layout["project"]:
        parts.append(world.rows(members, "project", "big-project", layout["project"]))
    rows = shuffled(*parts)
    am_url, lg_url = fresh_databases(server, name)
    emb = Precomputed()
    config = MemoryConfig()
    with MemoryService(am_url, config=config, embeddings=emb) as am, \
            PostgresStore.from_conn_string(lg_url, index={"dims": DIMS, "embed": lambda texts: [emb.query for _ in texts],
                                                          "fields": ["text"]}) as store:
        store.setup()
        log(f"{name}: loading {len(rows):,} rows into each system")
        am_load = load_agent_memory(am_url, rows)
        lg_load = load_langgraph(lg_url, rows)
        log(f"{name}: loaded (agent-memory {am_load:.0f} s, LangGraph {lg_load:.0f} s)")
        callers: list[Caller] = []
        small = users[-1]
        callers.append(Caller(f"{layout['per_user']:,}-memory user",
                              {"user_id": small}, lg_prefix("user", small), ("user", small), layout["per_user"]))
        if layout["project"]:
            am.create_project("big-project", user_id=members[0])
            for m in members[1:]:
                am.add_member("project", "big-project", m, "editor", user_id=members[0])
            callers.append(Caller(f"{layout['project']:,}-memory project member",
                                  {"user_id": members[1], "project_id": "big-project"},
                                  lg_prefix("project", "big-project"), ("project", "big-project"),
                                  layout["project"] + layout["per_user"]))
        log(f"{name}: {args.queries} queries per caller, systems interleaved")
        for _ in range(10):  # warm both
            for c in callers:
                emb.query = world.query(*c.lg_rows)[1].tolist()
                am.for_user(**c.ids).search("warm up", k=K)
                store.search(c.lg, query="warm up", limit=K)
        tallies = run_queries(world, am, emb, store, callers, args.queries)
        out: dict[str, Any] = {"rows": len(rows), "load_s": {"agent-memory": round(am_load), "langgraph": round(lg_load)},
                               "callers": {c.name: {s: t.summary() for s, t in tallies[c.name].items()} for c in callers}}
        if args.explain:
            for c in callers:
                text, vector = world.query(*c.lg_rows)
                emb.query = vector.tolist()
                out.setdefault("explain", {})[c.name] = explain(am, emb, c, text)
        if layout["project"] and name == "project20k":
            log(f"{name}: saves in the big project, concurrent saves, bulk import")
            out["saves"] = measure_saves(world, am, emb, members[2], "big-project")
            out["import"] = measure_import(world, am, emb)
    return out


def machine(server_dsn: str) -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown")
    mem = next((int(line.split()[1]) // 1024 // 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), 0)
    with psycopg.connect(server_dsn) as conn:
        one = lambda q: conn.execute(q).fetchone()[0]  # noqa: E731
        return {"nproc": os.cpu_count(), "cpu": cpu, "ram_gib": mem, "python": platform.python_version(),
                "postgres": one("SELECT version()").split(" on ")[0],
                "pgvector": one("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"),
                "shared_buffers": one("SHOW shared_buffers"), "loadavg": os.getloadavg()}


def markdown(name: str, result: dict[str, Any]) -> str:
    lines = [f"### {name}: {result['rows']:,} rows (load: agent-memory {result['load_s']['agent-memory']} s,"
             f" LangGraph {result['load_s']['langgraph']} s)", "",
             "| caller | system | p50 ms | p95 ms | recall@10 | short results |", "|---|---|---|---|---|---|"]
    for caller, systems in result["callers"].items():
        for system, s in systems.items():
            lines.append(f"| {caller} | {system} | {s['p50']} | {s['p95']} | {s['recall']} | {s['short']} of {s['n']} |")
    if "saves" in result:
        sv = result["saves"]
        lines += ["", f"Saves into the big project (`add`, DB part): p50 {sv['p50']} ms, p95 {sv['p95']} ms"
                      f" ({sv['outcomes']}); 16 concurrent identical saves left {sv['rows_after_16_concurrent_saves']} row."]
    if "import" in result:
        im = result["import"]
        lines += [f"Bulk import (`add_many`, precomputed vectors): {im['rows']:,} rows in {im['seconds']} s,"
                  f" **{im['rows_per_s']:,} rows/s**."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenarios", default="users1000,users10,project20k")
    p.add_argument("--million", action="store_true", help="also the 1,000,000-row scenario (about an hour)")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--scale", type=float, default=1.0, help="multiply row counts (0.05 for a smoke run)")
    p.add_argument("--explain", action="store_true", help="EXPLAIN (ANALYZE, BUFFERS) of one agent-memory search each")
    p.add_argument("--json", help="write every number to this file")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()] + (["million"] if args.million else [])
    unknown = [n for n in names if n not in ("users1000", "users10", "project20k", "million")]
    if unknown or args.queries < 1 or args.scale <= 0:
        p.error(f"unknown scenario(s) {unknown}; choose from users1000, users10, project20k, million"
                if unknown else "--queries and --scale must be positive")
    started = time.perf_counter()
    log = lambda msg: print(f"[{time.perf_counter() - started:7.1f}s] {msg}", flush=True)  # noqa: E731
    from agent_memory.db.embedded import ensure_embedded_server

    tmp = Path(tempfile.mkdtemp(prefix="agent-memory-side-by-side-"))
    report: dict[str, Any] = {"command": shlex.join(["python", "benchmarks/side_by_side.py", *(argv or sys.argv[1:])]),
                              "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "scenarios": {}}
    server = ensure_embedded_server(tmp / "pgdata")
    try:
        report["machine"] = machine(server.ensure_database("postgres"))
        log(f"machine: {report['machine']}")
        for name in names:
            report["scenarios"][name] = run_scenario(server, name, args, log)
            print(markdown(name, report["scenarios"][name]), flush=True)
            for caller, plan in report["scenarios"][name].get("explain", {}).items():
                print(f"\nEXPLAIN, {caller}:\n{plan}\n", flush=True)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\ncommand: {report['command']}\ndate: {report['date']}\nmachine: {report['machine']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return report


if __name__ == "__main__":
    main()
