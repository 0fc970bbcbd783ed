"""What parsing a big statement once saves (``agent_memory.db.statements``).

    python benchmarks/statement_parse.py [--memories 150] [--runs 1200] [--json OUT]

psycopg splits a statement's text to find its ``%(name)s`` placeholders on every execution of a
statement over 4 KB or 50 parameters; the search statement is about 10 KB. This captures the
search statement of one real ``search`` (a user with ``--memories`` memories, in a fresh embedded
server), then executes it ``--runs`` times on one connection, the two ways taking turns: through
psycopg's own path (parsed each time) and numbered once by ``statements.numbered`` through a raw
cursor (what the drivers do). Both include rendering the composed statement and fetching the
rows; the first 100 of each are warm-up. The answers are compared every time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import dict_row

from agent_memory import MemoryConfig, MemoryService
from agent_memory.db import requests
from agent_memory.db.embedded import ensure_embedded_server, stop_embedded_server
from agent_memory.db.statements import numbered
from agent_memory.embeddings import LocalEmbeddings

WORDS = "apple river mountain code python travel coffee music garden book tennis chess piano bread soup".split()


def capture_search_statement(service: MemoryService, user: str, query: str) -> tuple[Any, Any]:
    """The first statement of ``search`` that the drivers number (the search statement)."""
    seen: list[tuple[Any, Any]] = []
    original = requests.numbered

    def spy(q: Any, p: Any, c: Any) -> Any:
        answer = original(q, p, c)
        if answer[2]:
            seen.append((q, p))
        return answer

    requests.numbered = spy
    try:
        service.for_user(user).search(query, k=5)
    finally:
        requests.numbered = original
    if not seen:
        sys.exit("error: the search ran no statement big enough to be numbered")
    return seen[0]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--memories", type=int, default=150)
    p.add_argument("--runs", type=int, default=1200)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    if args.memories < 1 or args.runs < 300:
        p.error("--memories must be at least 1 and --runs at least 300")
    rnd = random.Random(0)
    report: dict[str, Any] = {
        "command": " ".join(["python", *sys.argv]), "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(), "loadavg": os.getloadavg()},
    }
    with tempfile.TemporaryDirectory(prefix="statement-parse-") as tmp:
        data_dir = Path(tmp) / "pgdata"
        try:
            with MemoryService(config=MemoryConfig(data_dir=data_dir), embeddings=LocalEmbeddings()) as service:
                service.for_user("u1").add_many(
                    [{"content": " ".join(rnd.choices(WORDS, k=8)) + f" note {i}"} for i in range(args.memories)],
                    dedupe=False)
                query, params = capture_search_statement(service, "u1", "coffee and music in the garden")
            with psycopg.connect(ensure_embedded_server(data_dir).dsn("agent_memory"), autocommit=True) as conn:
                report["statement_bytes"] = len(query.as_bytes(conn))
                report["parameters"] = len(params)
                times: dict[str, list[float]] = {"psycopg": [], "numbered": []}
                differed = 0
                for i in range(args.runs):
                    start = time.perf_counter()
                    if i % 2:
                        text, values, raw = numbered(query, params, conn)
                        assert raw, "the search statement must be numbered"
                        with psycopg.RawCursor(conn, row_factory=dict_row) as cur:
                            cur.execute(text, values)
                            rows = cur.fetchall()
                        times["numbered"].append(time.perf_counter() - start)
                        differed += [r["id"] for r in rows] != last
                    else:
                        with conn.cursor(row_factory=dict_row) as cur:
                            cur.execute(query, params)
                            rows = cur.fetchall()
                        times["psycopg"].append(time.perf_counter() - start)
                        last = [r["id"] for r in rows]
        finally:
            stop_embedded_server(data_dir)
    report["answers_differed"] = differed
    for name, samples in times.items():
        a = np.array(samples[100:]) * 1000
        report[name] = {"n": int(a.size), "p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)),
                        "mean": float(a.mean())}
    print(f"search statement: {report['statement_bytes']} bytes, {report['parameters']} parameters; "
          f"{args.memories} memories; {args.runs} executions taking turns")
    print("| path | p50 ms | p95 ms | mean ms |\n|---|---|---|---|")
    for name in ("psycopg", "numbered"):
        r = report[name]
        print(f"| {name} | {r['p50']:.3f} | {r['p95']:.3f} | {r['mean']:.3f} |")
    print(f"answers that differed: {differed} of {len(times['numbered'])}")
    print(f"command: {report['command']}\ndate: {report['date']}; machine: {report['machine']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
