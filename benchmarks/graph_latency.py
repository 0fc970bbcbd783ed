"""Knowledge graph latency at scale: the extra cost of a save, ``explore`` and ``traverse``.

One user with ``--memories`` memories (default 10,000) naming ``--people`` people (default
2,000, "First Last" names, each in about five memories with a friend, a colleague or an
organisation), loaded with ``add_many`` (which builds the graph as it imports). Then, timed
one call at a time:

- a save (``add``) of a memory that names two people and an organisation, with the graph and
  with its ingest replaced by nothing (interleaved, so load drifts alike on both);
- ``explore(queries=[...], text_matches=[a name])``: found when that person is among the people;
- ``traverse(mode="ppr", seed_nodes=[a node])`` and ``traverse(mode="pattern")``.

Vectors come from a hashing embedder (words into 384 buckets), so what is timed is the
database and the ranking, not the embedding model (the local model adds its own query
embedding time to ``explore``, as to ``search``). Without ``--dsn`` a fresh embedded
PostgreSQL is started in a temporary directory. After the load the tables are vacuumed and
analysed (what autovacuum does on a running server within its one-minute naptime; a benchmark
that measures at once would time plans made without statistics); ``--no-vacuum`` skips that.

    python benchmarks/graph_latency.py [--memories 10000] [--people 2000] [--calls 200] [--json OUT]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

from langchain_core.embeddings import Embeddings

from agent_memory import MemoryConfig, MemoryService

FIRST = ("Ana Ben Cleo Dara Eli Farah Gus Hana Ivo Jada Kai Lena Milo Nia Omar Pia Quin Rosa Sami Tara Umar Vera "
         "Wes Xena Yara Zane Alma Bruno Celia Dmitri Elena Felix Greta Hugo Ines Jonas Kira Luca Maya Nils").split()
LAST = ("Abbott Baker Cruz Diaz Ellis Fischer Garcia Hughes Ibarra Jensen Klein Lopez Moreno Novak Olsen Price "
        "Quinn Reyes Silva Torres Ueda Vargas Walsh Xu Young Zimmer Adler Berg Costa Dunn Engel Ford Gray Hart "
        "Ito Jones Kaur Lund Mills Nash Ortiz Park Roth Stone Tan Vos Webb Yoon Zhou Amir").split()
ORGS = [f"{w}corp" for w in ("Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Soylent", "Tyrell",
                              "Wonka", "Stark", "Wayne", "Cyberdyne", "Aperture", "Gringotts", "Monarch")]
TEMPLATES = (
    "Had lunch with {a}; {a} said the {topic} plan looks good.",
    "My friend {a} is moving to a new flat near the river.",
    "Met {a} and {b} to talk about the {topic} review.",
    "My colleague {a} works on the {topic} migration.",
    "Called {a} about the {topic} budget; {b} joined later.",
    "I work at {org} on the {topic} team with {a}.",
)
TOPICS = "billing search onboarding pricing hiring security mobile analytics design storage".split()


class HashEmbeddings(Embeddings):
    """Words hashed into 384 buckets, normalised: the same text, the same vector."""

    model = "hash-384"

    def _vector(self, text: str) -> list[float]:
        v = [0.01] * 384
        for word in re.findall(r"\w+", text.lower()):
            v[int(hashlib.md5(word.encode()).hexdigest(), 16) % 384] += 1.0
        norm = math.sqrt(sum(x * x for x in v))
        return [x / norm for x in v]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def people(n: int) -> list[str]:
    names = [f"{f} {l}" for l in LAST for f in FIRST]
    if n > len(names):
        raise SystemExit(f"--people at most {len(names)}")
    return names[:n]


def sentences(n: int, names: list[str], rng: random.Random) -> list[str]:
    out = []
    for i in range(n):
        a, b = names[i % len(names)], rng.choice(names)
        out.append(f"Note {i}: " + rng.choice(TEMPLATES).format(a=a, b=b, topic=rng.choice(TOPICS),
                                                                 org=rng.choice(ORGS)))
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


def summary(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {"p50_ms": round(statistics.median(ms), 2), "p95_ms": round(pct(ms, 0.95), 2),
            "mean_ms": round(statistics.fmean(ms), 2), "n": len(ms)}


def _no_ingest(*_: Any, **__: Any) -> Any:
    return 0
    yield  # pragma: no cover - a generator that asks for nothing


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--memories", type=int, default=10_000)
    p.add_argument("--people", type=int, default=2_000)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--dsn", default=None)
    p.add_argument("--json", default=None)
    p.add_argument("--no-vacuum", action="store_true", help="measure right after the load, before any statistics")
    args = p.parse_args()
    rng = random.Random(32)
    names = people(args.people)
    texts = sentences(args.memories, names, rng)
    with tempfile.TemporaryDirectory(prefix="graph-bench-") as tmp:
        config = (MemoryConfig(data_dir=Path(tmp) / "pgdata", knowledge_graph=True) if args.dsn is None
                  else MemoryConfig(knowledge_graph=True))
        with MemoryService(args.dsn, config=config, embeddings=HashEmbeddings()) as service:
            user = f"graph-bench-{rng.randrange(10**9)}"
            me = service.for_user(user)
            t = time.perf_counter()
            for i in range(0, len(texts), 500):
                me.add_many(texts[i:i + 500])
            load_s = time.perf_counter() - t
            if not args.no_vacuum:
                # what autovacuum does within a minute of such a load on a running server (its naptime
                # is 60 s; this process would be measuring before it woke): statistics and a vacuum
                from agent_memory.db.connection import get_connection

                with get_connection(service.conn) as conn:
                    conn.autocommit = True
                    conn.execute("VACUUM ANALYZE memory_items, graph_nodes, graph_mentions, graph_relations")
            nodes = me.graph_nodes(limit=10_000)
            print(f"loaded {len(texts)} memories in {load_s:.0f} s; {len(nodes)} nodes", flush=True)
            by_name = {n.name: n for n in nodes}
            # a save with and without the graph, interleaved
            with_graph, without = [], []
            for i in range(args.calls):
                text = (f"Save {i}: lunch with {rng.choice(names)} and {rng.choice(names)} "
                        f"from {rng.choice(ORGS)} about {rng.choice(TOPICS)}.")
                t = time.perf_counter()
                me.add(text, dedupe=False)
                with_graph.append(time.perf_counter() - t)
                with mock.patch("agent_memory.ops.graph_ops.ingest", _no_ingest):
                    t = time.perf_counter()
                    me.add(text.replace("Save", "Plain"), dedupe=False)
                    without.append(time.perf_counter() - t)
            explores, found = [], 0
            for _ in range(args.calls):
                name = rng.choice(names)
                t = time.perf_counter()
                r = me.explore([f"what happened with {name} and the {rng.choice(TOPICS)} plan"], text_matches=[name])
                explores.append(time.perf_counter() - t)
                found += name in [h.node.name for h in r.people]
            ppr, pattern, reached = [], [], []
            for _ in range(args.calls):
                seed = by_name[rng.choice(names)]
                t = time.perf_counter()
                r = me.traverse(seed_nodes=[str(seed.id)], top_k=20)
                ppr.append(time.perf_counter() - t)
                reached.append(len(r.nodes))
                t = time.perf_counter()
                me.traverse(mode="pattern", seed_nodes=[str(seed.id)], top_k=20)
                pattern.append(time.perf_counter() - t)
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.platform(),
        "python": sys.version.split()[0], "command": " ".join(sys.argv),
        "memories": args.memories, "people": args.people, "nodes": len(nodes), "load_s": round(load_s, 1),
        "save_with_graph": summary(with_graph), "save_without_graph": summary(without),
        "save_extra_p95_ms": round(summary(with_graph)["p95_ms"] - summary(without)["p95_ms"], 2),
        "save_extra_p50_ms": round(summary(with_graph)["p50_ms"] - summary(without)["p50_ms"], 2),
        "explore": summary(explores), "explore_found_person": f"{found}/{args.calls}",
        "traverse_ppr": summary(ppr), "traverse_ppr_short_results": sum(1 for n in reached if n < 20),
        "traverse_pattern": summary(pattern),
    }
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
