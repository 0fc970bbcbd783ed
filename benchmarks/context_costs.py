"""What keeping a memory's context costs (issue 29): storage per memory, save latency (one more
text embedded in the save's batch) and search latency, with and without context.

Two users of ``--n`` memories each, in a throwaway embedded PostgreSQL: one loaded with
``add_many`` (no context), one with ``add_transcript`` (each memory with its context and its
context's vector). Then ``--saves`` single saves each way (``add``, and ``add`` with
``context=``), end to end (the local model's embedding included) and ``--queries`` searches of
each user, end to end. Every search answer is compared with the exhaustive scan's (recall 1.0
means the exact top k; "short" counts answers with fewer than k hits).

    python benchmarks/context_costs.py [--n 10000] [--saves 200] [--queries 200] [--json OUT]
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from latency_timing import stats_ms  # noqa: E402
from search_reference import exhaustive, texts  # noqa: E402

from agent_memory import MemoryConfig, MemoryService  # noqa: E402
from agent_memory.db.embedded import stop_embedded_server  # noqa: E402
from agent_memory.embeddings import LocalEmbeddings  # noqa: E402

QUERIES = ["what do I do on weekends?", "kubernetes deadline", "coffee", "money and taxes", "guitar lessons",
           "when is the marathon", "sourdough recipe", "release plan for the database", "holiday budget",
           "chess club", "invoice from the vendor", "vacation in the mountains"]
K = 10


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=10000)
    p.add_argument("--saves", type=int, default=200)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    rng = random.Random(29)
    embeddings = LocalEmbeddings()
    report: dict[str, Any] = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                              "command": " ".join(["python", *sys.argv]), "n": args.n}
    with tempfile.TemporaryDirectory(prefix="context-costs-") as tmp:
        data_dir = Path(tmp) / "pgdata"
        try:
            config = MemoryConfig(data_dir=data_dir)
            with MemoryService(config=config, embeddings=embeddings) as service:
                plain, turns = service.for_user("plain"), service.for_user("turns")
                words = texts(rng, "m", args.n)
                t0 = time.perf_counter()
                plain.add_many(words)
                t1 = time.perf_counter()
                turns.add_transcript(words, conversation="bench")
                t2 = time.perf_counter()
                report["load_s"] = {"add_many": round(t1 - t0, 1), "add_transcript": round(t2 - t1, 1)}
                print(f"loaded {args.n} memories each: add_many {t1 - t0:.1f}s, add_transcript {t2 - t1:.1f}s",
                      flush=True)
                saves: dict[str, list[float]] = {"add": [], "add with context": []}
                for i in range(args.saves):
                    text = f"Saved note {i}: " + rng.choice(words)
                    for name, extra in (("add", {}), ("add with context", {"context": "earlier turn\n" + text})):
                        s0 = time.perf_counter()
                        service.for_user(f"saver-{name}").add(text, dedupe=True, **extra)
                        saves[name].append(time.perf_counter() - s0)
                report["saves_ms"] = {name: stats_ms(v) for name, v in saves.items()}
                searches: dict[str, list[float]] = {"plain": [], "turns": []}
                recall = {"plain": [0, 0], "turns": [0, 0]}  # exact answers, short answers
                for i in range(args.queries):
                    query = QUERIES[i % len(QUERIES)]
                    for name, h in (("plain", plain), ("turns", turns)):
                        s0 = time.perf_counter()
                        got = [x.id for x in h.search(query, k=K)]
                        searches[name].append(time.perf_counter() - s0)
                        if i < len(QUERIES):
                            with exhaustive():
                                want = [x.id for x in h.search(query, k=K)]
                            recall[name][0] += got == want
                            recall[name][1] += len(got) < K
                report["search_ms"] = {name: stats_ms(v) for name, v in searches.items()}
                report["exact"] = {name: {"exact": r[0], "checked": min(args.queries, len(QUERIES)), "short": r[1]}
                                   for name, r in recall.items()}
                with service.conn.connection() as conn:  # the service's pool
                    rows: dict[str, Any] = {}
                    for user in ("plain", "turns"):
                        r = conn.execute(
                            "SELECT avg(pg_column_size(m.*))::float8, avg(coalesce(pg_column_size(m.context), 0)"
                            " + coalesce(pg_column_size(m.context_embedding), 0)"
                            " + coalesce(pg_column_size(m.context_half), 0))::float8 FROM memory_items m"
                            " WHERE user_id = %s", (user,)).fetchone()
                        rows[user] = {"row_bytes": round(r[0], 1), "context_bytes": round(r[1], 1)}
                    index = conn.execute("SELECT pg_relation_size('memory_items_search_idx')").fetchone()[0]
                    rows["search_index_bytes_per_memory"] = round(index / (2 * args.n), 1)
                report["storage"] = rows
        finally:
            stop_embedded_server(data_dir)
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
