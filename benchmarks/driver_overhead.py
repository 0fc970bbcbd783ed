"""What the drivers (``agent_memory.db.requests.run`` / ``arun``) cost per operation and per
request, against the drivers of another revision.

    python benchmarks/driver_overhead.py [--against 5a44a8b] [--ops 3000] [--json OUT]

Starts an embedded server in a temporary directory and opens a pool on it (as the service does),
then runs two operations ``--ops`` times each, the two revisions' drivers taking turns:
``one`` (one ``SELECT 1``: a connection taken from the pool, a transaction, a commit) and
``twenty`` (twenty ``SELECT 1`` in one transaction: the cost per request), timing each on the
wall clock and in this process's CPU time (the driver's and psycopg's work, which the load of a
shared machine disturbs less). The other revision's
``requests.py`` is read with ``git show`` and loaded beside this one. The first 10 % of each are
warm-up. Answers are compared.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Generator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from agent_memory.db import requests
from agent_memory.db.connection import aopen_pool, open_pool
from agent_memory.db.embedded import ensure_embedded_server, stop_embedded_server
from agent_memory.db.requests import Sql

ROOT = Path(__file__).resolve().parents[1]


def drivers_of(revision: str, where: Path) -> ModuleType:
    """``agent_memory/db/requests.py`` as it was at ``revision``, importable beside today's."""
    text = subprocess.run(["git", "show", f"{revision}:agent_memory/db/requests.py"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    path = where / "requests_then.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("agent_memory.db.requests_then", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def ones(count: int) -> Callable[[], Generator[Any, Any, int]]:
    def op() -> Generator[Any, Any, int]:
        total = 0
        for _ in range(count):
            total += (yield Sql("SELECT 1 AS one", fetch="one"))["one"]
        return total
    return op


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--against", default="5a44a8b", help="the revision whose drivers to compare with")
    p.add_argument("--ops", type=int, default=3000)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    report: dict[str, Any] = {
        "command": " ".join(["python", *sys.argv]), "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(), "loadavg_before": os.getloadavg()},
    }
    shapes = {"one": ones(1), "twenty": ones(20)}
    times: dict[tuple[str, str, str], list[float]] = {}
    cpus: dict[tuple[str, str, str], list[float]] = {}  # this process's CPU time: the driver and psycopg
    with tempfile.TemporaryDirectory(prefix="driver-overhead-") as tmp:
        then = drivers_of(args.against, Path(tmp))
        sides = {"then": then, "now": requests}
        data_dir = Path(tmp) / "pgdata"
        try:
            dsn = ensure_embedded_server(data_dir).dsn("postgres")
            pool = open_pool(dsn, min_size=2, max_size=2)
            try:
                for i in range(args.ops):
                    for shape, op in shapes.items():
                        for name in (("then", "now") if i % 2 else ("now", "then")):
                            start, cpu = time.perf_counter(), time.process_time()
                            answer = sides[name].run(op(), pool, None)
                            times.setdefault(("run", shape, name), []).append(time.perf_counter() - start)
                            cpus.setdefault(("run", shape, name), []).append(time.process_time() - cpu)
                            assert answer == (1 if shape == "one" else 20)
            finally:
                pool.close()

            async def asyncio_side() -> None:
                apool = await aopen_pool(dsn, min_size=2, max_size=2)
                try:
                    for i in range(args.ops):
                        for shape, op in shapes.items():
                            for name in (("then", "now") if i % 2 else ("now", "then")):
                                start, cpu = time.perf_counter(), time.process_time()
                                answer = await sides[name].arun(op(), apool, None)
                                times.setdefault(("arun", shape, name), []).append(time.perf_counter() - start)
                                cpus.setdefault(("arun", shape, name), []).append(time.process_time() - cpu)
                                assert answer == (1 if shape == "one" else 20)
                finally:
                    await apool.close()

            asyncio.run(asyncio_side())
        finally:
            stop_embedded_server(data_dir)
    report["machine"]["loadavg_after"] = os.getloadavg()
    print(f"{args.ops} of each operation per driver, {args.against} ('then') and this tree ('now') taking turns")
    print("| driver | operation | then p50 / p95 ms | now p50 / p95 ms | then / now client CPU mean ms |\n"
          "|---|---|---|---|---|")
    for driver in ("run", "arun"):
        for shape in shapes:
            row = []
            for name in ("then", "now"):
                a = np.array(times[(driver, shape, name)][args.ops // 10:]) * 1000
                c = np.array(cpus[(driver, shape, name)][args.ops // 10:]) * 1000
                stats = {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)), "n": int(a.size),
                         "cpu_mean": float(c.mean())}
                report[f"{driver}/{shape}/{name}"] = stats
                row.append(f"{stats['p50']:.3f} / {stats['p95']:.3f}")
            cpu = " / ".join(f"{report[f'{driver}/{shape}/{n}']['cpu_mean']:.3f}" for n in ("then", "now"))
            print(f"| {driver} | {shape} | {row[0]} | {row[1]} | {cpu} |")
    print(f"command: {report['command']}\ndate: {report['date']}; machine: {report['machine']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
