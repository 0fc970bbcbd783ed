"""What a server adds: a save and a search through each server, against the same calls in-process.

Three ways to reach the same memory, on one embedded PostgreSQL and the local embedding model:

- in-process: ``memory.for_user(...).add(...)`` / ``.search(...)``;
- the ``memory_store`` JSON-RPC plugin over stdio (``python -m agent_memory.servers.memory_store``):
  ``memory/put`` and ``memory/query``, one line each way;
- the MCP server over stdio (``python -m agent_memory.servers.mcp --transport stdio``), through the
  MCP SDK's client: the ``memory_save`` and ``memory_search`` tools.

Each call is timed end to end from the caller's side (the embedding included, as a client sees
it), ``--calls`` of each after a warm-up, the three ways taking turns per call so they share the
machine's load. Every search must find what its save stored (a save the duplicate check folded
into an earlier memory counts as that memory; the count of misses is printed).

    python benchmarks/servers.py [--calls 200] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: facts are made of these, three each, so no two say the same thing (a save is not deduplicated)
WORDS = ("apricot badminton cathedral dolphin espresso falcon glacier harbour igloo jasmine kayak lantern "
         "meadow nectar orchard pelican quartz raccoon saffron tundra umbrella volcano walnut yacht zeppelin "
         "anchor blizzard canyon desert ember fjord geyser hammock ivory jungle kettle lagoon mosaic nebula "
         "oasis pagoda quiver reef sequoia trumpet velvet willow").split()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)


class StoreClient:
    """The memory_store plugin as a child process, one JSON-RPC line each way."""

    def __init__(self, env: dict[str, str], user: str, project: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent_memory.servers.memory_store", "--user", user],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, bufsize=1)
        self.next_id = 0
        self.call("initialize", {"project_id": project})
        self.project = project

    def call(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                          "params": params}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


async def run(args: argparse.Namespace, dsn: str) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from agent_memory import MemoryService

    env = {**os.environ, "DATABASE_URL": dsn}
    tag = uuid.uuid4().hex[:8]
    user, project = f"bench-{tag}", f"bench-project-{tag}"
    memory = MemoryService(dsn)
    me = memory.for_user(user, project_id=project)
    store = StoreClient(env, f"{user}-store", project)
    params = StdioServerParameters(command=sys.executable, env=env,
                                   args=["-m", "agent_memory.servers.mcp", "--transport", "stdio",
                                         "--user", f"{user}-mcp", "--project", project])
    times: dict[str, list[float]] = {f"{way} {verb}": [] for way in ("in-process", "memory_store", "mcp")
                                     for verb in ("save", "search")}
    misses = dict.fromkeys(("in-process", "memory_store", "mcp"), 0)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        rng = random.Random(7)
        for i in range(args.calls + args.warmup):
            a, b, c = rng.sample(WORDS, 3)
            fact = f"Benchmark fact {i}: keeps a {a} next to the {b} and dreams of a {c} (note {tag}-{i})"
            query = f"the {a} next to the {b}, {c}"
            record = i >= args.warmup

            def timed(name: str, started: float) -> None:
                if record:
                    times[name].append(time.perf_counter() - started)

            t = time.perf_counter()
            saved = me.add(fact)
            timed("in-process save", t)
            t = time.perf_counter()
            hits = me.search(query, k=5)
            timed("in-process search", t)
            # a save may be deduplicated into an earlier, near-identical fact: look for what it returned
            misses["in-process"] += record and not any(h.item.id == getattr(saved, "id", None) for h in hits)

            t = time.perf_counter()
            store.call("memory/put", {"scope": {"project_id": project}, "key": f"fact-{i}", "value": fact})
            timed("memory_store save", t)
            t = time.perf_counter()
            found = store.call("memory/query", {"scope": {"project_id": project}, "query": query, "top_k": 5})
            timed("memory_store search", t)
            misses["memory_store"] += record and fact not in json.dumps(found)

            t = time.perf_counter()
            reply = await session.call_tool("memory_save", {"content": fact})
            timed("mcp save", t)
            t = time.perf_counter()
            result = await session.call_tool("memory_search", {"query": query, "k": 5})
            timed("mcp search", t)
            text = " ".join(getattr(c, "text", "") for c in result.content)
            saved_id = re.search(r"[0-9a-f]{8}-[0-9a-f-]{27}", " ".join(getattr(c, "text", "") for c in reply.content))
            misses["mcp"] += record and (saved_id is None or saved_id.group(0) not in text)
    store.close()
    memory.close()
    return {
        "calls": args.calls,
        "p50_p95_ms": {name: [pct(v, 0.5), pct(v, 0.95)] for name, v in times.items()},
        "mean_ms": {name: round(statistics.mean(v) * 1000, 1) for name, v in times.items()},
        "searches_missing_the_fact": misses,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=200, help="timed saves and searches per way (default 200)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--dsn", help="an empty database instead of a temporary embedded server")
    p.add_argument("--json", help="write the numbers to this file")
    args = p.parse_args()
    started = time.time()
    if args.dsn:
        result = asyncio.run(run(args, args.dsn))
    else:
        from agent_memory import MemoryConfig
        from agent_memory.db.connection import resolve_dsn
        from agent_memory.db.embedded import stop_embedded_server

        with tempfile.TemporaryDirectory(prefix="servers-bench-") as tmp:
            data_dir = Path(tmp) / "pgdata"
            try:
                result = asyncio.run(run(args, resolve_dsn(None, MemoryConfig(data_dir=data_dir))))
            finally:
                stop_embedded_server(data_dir)
    result["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    result["command"] = "python benchmarks/servers.py " + " ".join(sys.argv[1:])
    result["seconds"] = round(time.time() - started, 1)
    print("| call | p50 ms | p95 ms |\n|---|---|---|")
    for name, (p50, p95) in result["p50_p95_ms"].items():
        print(f"| {name} | {p50} | {p95} |")
    print("searches missing the saved fact:", result["searches_missing_the_fact"])
    print(json.dumps({k: v for k, v in result.items() if k not in ("p50_p95_ms",)}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
