"""From how many memories a scope is better searched from a copy of its vectors than from the
search index: the measurement behind ``MemoryConfig.vector_cache_rows`` (BENCHMARKS.md, "Search
at scale").

One embedded server, one database: users of 500 to 20,000 memories (``side_by_side.py``'s random
clustered vectors and template sentences, loaded by binary COPY, ``VACUUM ANALYZE``d). Each user
is searched ``--queries`` times by two services on that database, one reading every scope from the
index (``vector_cache_rows=0``) and one reading every scope from copies (``vector_cache_rows=1``),
taking turns per query; the two answers must be the same (both are exact), and the script says
how many differed. Times are whole ``search(k=10)`` calls with the query vector precomputed.

Run: ``python benchmarks/vector_cache_threshold.py`` (about 4 minutes).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_memory import MemoryConfig, MemoryService  # noqa: E402
from latency_timing import stats_ms  # noqa: E402
from side_by_side import K, Precomputed, World, load_agent_memory, machine, shuffled  # noqa: E402

SIZES = (500, 1000, 2000, 5000, 10_000, 20_000)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queries", type=int, default=150)
    args = p.parse_args(argv)
    from agent_memory.db.embedded import ensure_embedded_server

    tmp = Path(tempfile.mkdtemp(prefix="agent-memory-cache-threshold-"))
    server = ensure_embedded_server(tmp / "pgdata")
    out: dict[str, Any] = {}
    try:
        print(f"machine: {machine(server.ensure_database('postgres'))}", flush=True)
        dsn = server.ensure_database("threshold")
        world = World()
        users = {size: f"user-{size}" for size in SIZES}
        emb = Precomputed()
        with MemoryService(dsn, config=MemoryConfig(vector_cache_rows=0), embeddings=emb) as index, \
                MemoryService(dsn, config=MemoryConfig(vector_cache_rows=1), embeddings=emb) as copies:
            load_agent_memory(dsn, shuffled(*(world.rows([user], "user", None, size) for size, user in users.items())))
            print("| memories | index p50 / p95 ms | copy p50 / p95 ms | answers that differed |", flush=True)
            print("|---|---|---|---|", flush=True)
            for size, user in users.items():
                times: dict[str, list[float]] = {"index": [], "copy": []}
                differed = 0
                for i in range(args.queries + 10):
                    text, vector = world.query("user", user)
                    emb.query = vector.tolist()
                    answers = {}
                    for name, service in (("index", index), ("copy", copies))[:: 1 if i % 2 else -1]:
                        started = time.perf_counter()
                        answers[name] = [(r.item.id, round(r.score, 9))
                                         for r in service.for_user(user).search(text, k=K)]
                        if i >= 10:  # the first searches copy the scope
                            times[name].append(time.perf_counter() - started)
                    differed += answers["index"] != answers["copy"]
                s = {name: stats_ms(t) for name, t in times.items()}
                out[str(size)] = {name: {"p50": round(v["p50"], 1), "p95": round(v["p95"], 1)} for name, v in s.items()}
                out[str(size)]["differed"] = differed
                print(f"| {size:,} | {s['index']['p50']:.1f} / {s['index']['p95']:.1f} | {s['copy']['p50']:.1f} /"
                      f" {s['copy']['p95']:.1f} | {differed} of {args.queries + 10} |", flush=True)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == "__main__":
    main()
