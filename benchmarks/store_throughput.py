"""LangGraph's ``PostgresStore`` and ``AgentMemoryStore`` side by side under upstream's load test.

    python benchmarks/store_throughput.py [--n 50] [--m 4] [--async-n 50] [--async-m 4]
                                          [--variants none,embed] [--pool 10] [--json OUT]

The shape is LangGraph's own ``test_large_batches`` (``libs/checkpoint-postgres/tests``): for
``m`` in ``range(M)`` and ``i`` in ``range(N)``, six calls: ``put`` of ``{"foo": "bar<i>"}`` at
``key<i>`` in a namespace ending in ``m % 2``, ``get`` of it, ``list_namespaces(max_depth=m + 1)``,
``search`` of the root prefix (no query), the same ``put`` again and a ``delete``. The blocking run
submits all ``6 N M`` calls to 10 threads; the async run ``asyncio.gather``-s them all (upstream:
``test_large_batches_async``, N=1000, M=10).

One embedded PostgreSQL serves both, each store in its own database, each with a pool of ``--pool``
connections (``PostgresStore`` given a ``ConnectionPool``, so neither waits on one connection).
LangGraph's namespaces start ``("test", ...)``; ours ``("memories", "bench", ...)`` (a store
namespace names its level and owner), with the same depth below. Variants:

- ``none``: neither store has an index (ours built with ``index=None``): neither embeds anything
  (agent-memory's items then have no vector, migration ``0020_optional_embedding``).
- ``embed``: both index the whole value (``fields=["$"]``) with the same local model
  (``LocalEmbeddings``, passed to LangGraph's index config as ``embed``).

Printed: calls per second of each store, the ratio, and errors (every call must succeed).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from side_by_side import fresh_databases, machine

USER = "bench"


def calls(store: Any, root: tuple[str, ...], n: int, m_count: int) -> list[tuple[Callable[..., Any], tuple, dict]]:
    """Upstream's six calls per (m, i), as (method, args, kwargs), for a blocking store."""
    out: list[tuple[Callable[..., Any], tuple, dict]] = []
    for m in range(m_count):
        for i in range(n):
            ns = (*root, "foo", "bar", "baz", str(m % 2))
            out += [
                (store.put, (ns, f"key{i}"), {"value": {"foo": "bar" + str(i)}}),
                (store.get, (ns, f"key{i}"), {}),
                (store.list_namespaces, (), {"prefix": None, "max_depth": m + 1}),
                (store.search, (root,), {}),
                (store.put, (ns, f"key{i}"), {"value": {"foo": "bar" + str(i)}}),
                (store.delete, (ns, f"key{i}"), {}),
            ]
    return out


def acalls(store: Any, root: tuple[str, ...], n: int, m_count: int) -> list[tuple[Callable[..., Any], tuple, dict]]:
    """:func:`calls` with the async methods."""
    names = {"put": "aput", "get": "aget", "list_namespaces": "alist_namespaces", "search": "asearch",
             "delete": "adelete"}
    return [(getattr(store, names[f.__name__]), args, kwargs) for f, args, kwargs in calls(store, root, n, m_count)]


def run_threads(work: list[tuple[Callable[..., Any], tuple, dict]], threads: int = 10) -> dict[str, Any]:
    errors: list[str] = []

    def one(call: tuple[Callable[..., Any], tuple, dict]) -> None:
        f, args, kwargs = call
        try:
            f(*args, **kwargs)
        except Exception as exc:  # counted and shown: every call must succeed
            errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, work))
    return _result(len(work), time.perf_counter() - started, errors)


async def run_gather(work: list[tuple[Callable[..., Any], tuple, dict]]) -> dict[str, Any]:
    errors: list[str] = []

    async def one(call: tuple[Callable[..., Any], tuple, dict]) -> None:
        f, args, kwargs = call
        try:
            await f(*args, **kwargs)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")

    started = time.perf_counter()
    await asyncio.gather(*(one(c) for c in work))
    return _result(len(work), time.perf_counter() - started, errors)


def _result(n: int, seconds: float, errors: list[str]) -> dict[str, Any]:
    return {"calls": n, "seconds": round(seconds, 2), "calls_per_s": round(n / seconds, 1), "errors": len(errors),
            "first_error": errors[0] if errors else None}


def langgraph_index(variant: str, embeddings: Any) -> dict[str, Any] | None:
    if variant == "none":
        return None
    return {"dims": 384, "embed": embeddings, "fields": ["$"]}


def ours_index(variant: str) -> dict[str, Any] | None:
    return None if variant == "none" else {"fields": ["$"]}


def blocking(server: Any, variant: str, args: argparse.Namespace, embeddings: Any, log: Any) -> dict[str, Any]:
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from agent_memory import Identity, MemoryConfig, MemoryService
    from agent_memory.store import AgentMemoryStore

    am_dsn, lg_dsn = fresh_databases(server, f"st_{variant}")
    out: dict[str, Any] = {}
    with ConnectionPool(lg_dsn, min_size=1, max_size=args.pool, kwargs={"autocommit": True, "prepare_threshold": 0,
                                                                        "row_factory": dict_row}) as pool:
        lg = PostgresStore(pool, index=langgraph_index(variant, embeddings))  # type: ignore[arg-type]
        lg.setup()
        log(f"blocking/{variant}: langgraph")
        out["langgraph"] = run_threads(calls(lg, ("test",), args.n, args.m))
    config = MemoryConfig.defaults().replace(pool_max_size=args.pool)
    with MemoryService(am_dsn, config=config, embeddings=embeddings) as memory:
        ours = AgentMemoryStore(memory, caller=Identity(user_id=USER), index=ours_index(variant))  # type: ignore
        log(f"blocking/{variant}: agent-memory")
        out["agent-memory"] = run_threads(calls(ours, ("memories", USER), args.n, args.m))
    return out


async def concurrent(server: Any, variant: str, args: argparse.Namespace, embeddings: Any,
                     log: Any) -> dict[str, Any]:
    from langgraph.store.postgres import AsyncPostgresStore
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    from agent_memory import AsyncMemoryService, Identity, MemoryConfig
    from agent_memory.store import AgentMemoryStore

    am_dsn, lg_dsn = fresh_databases(server, f"sta_{variant}")
    out: dict[str, Any] = {}
    async with AsyncConnectionPool(lg_dsn, min_size=1, max_size=args.pool, open=False,
                                   kwargs={"autocommit": True, "prepare_threshold": 0,
                                           "row_factory": dict_row}) as pool:
        lg = AsyncPostgresStore(pool, index=langgraph_index(variant, embeddings))  # type: ignore[arg-type]
        await lg.setup()
        log(f"async/{variant}: langgraph")
        out["langgraph"] = await run_gather(acalls(lg, ("test",), args.async_n, args.async_m))
    config = MemoryConfig.defaults().replace(pool_max_size=args.pool)
    async with AsyncMemoryService(am_dsn, config=config, embeddings=embeddings) as memory:
        ours = AgentMemoryStore(memory, caller=Identity(user_id=USER), index=ours_index(variant))  # type: ignore
        log(f"async/{variant}: agent-memory")
        out["agent-memory"] = await run_gather(acalls(ours, ("memories", USER), args.async_n, args.async_m))
    return out


def table(report: dict[str, Any]) -> str:
    lines = ["| run | index | calls | LangGraph calls/s | agent-memory calls/s | LangGraph / agent-memory | errors |",
             "|---|---|---|---|---|---|---|"]
    for run, variants in report["runs"].items():
        for variant, r in variants.items():
            lg, am = r["langgraph"], r["agent-memory"]
            ratio = lg["calls_per_s"] / am["calls_per_s"] if am["calls_per_s"] else float("inf")
            lines.append(f"| {run} | {variant} | {am['calls']:,} | {lg['calls_per_s']:,} | {am['calls_per_s']:,} |"
                         f" {ratio:.2f}x | {lg['errors']} / {am['errors']} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=50, help="keys per round, blocking run (upstream: 100)")
    p.add_argument("--m", type=int, default=4, help="rounds, blocking run (upstream: 10)")
    p.add_argument("--async-n", type=int, default=50, help="keys per round, async run (upstream: 1000)")
    p.add_argument("--async-m", type=int, default=4, help="rounds, async run (upstream: 10)")
    p.add_argument("--variants", default="none,embed")
    p.add_argument("--runs", default="blocking,async")
    p.add_argument("--pool", type=int, default=10, help="connections per store")
    p.add_argument("--json", help="write every number to this file")
    args = p.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    runs = [r for r in args.runs.split(",") if r]
    if set(variants) - {"none", "embed"} or set(runs) - {"blocking", "async"}:
        p.error("--variants: none, embed; --runs: blocking, async")
    started = time.perf_counter()
    log = lambda msg: print(f"[{time.perf_counter() - started:7.1f}s] {msg}", flush=True)  # noqa: E731
    from agent_memory.db.embedded import ensure_embedded_server
    from agent_memory.embeddings import LocalEmbeddings

    embeddings = LocalEmbeddings()
    embeddings.embed_query("warm up")
    tmp = Path(tempfile.mkdtemp(prefix="agent-memory-store-throughput-"))
    report: dict[str, Any] = {
        "command": shlex.join(["python", "benchmarks/store_throughput.py", *(argv or sys.argv[1:])]),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "runs": {}}
    server = ensure_embedded_server(tmp / "pgdata")
    try:
        report["machine"] = machine(server.ensure_database("postgres"))
        log(f"machine: {report['machine']}")
        for run in runs:
            for variant in variants:
                if run == "blocking":
                    result = blocking(server, variant, args, embeddings, log)
                else:
                    result = asyncio.run(concurrent(server, variant, args, embeddings, log))
                report["runs"].setdefault(run, {})[variant] = result
                log(f"{run}/{variant}: {result}")
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(table(report))
    print(f"\ncommand: {report['command']}\ndate: {report['date']}\nmachine: {report['machine']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return report


if __name__ == "__main__":
    main()
