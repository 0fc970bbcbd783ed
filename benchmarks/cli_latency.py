"""Wall time of ``agent-memory`` commands as a user runs them: one process per command.

    .venv/bin/python benchmarks/cli_latency.py [--runs 15] [--data-dir DIR]

On the embedded server in a fresh data directory (removed afterwards): seeds 20 memories of one
user, then times ``list``, ``stats`` and ``search`` (the first is cold: the server starts; the
others find it running, as any command within MEMORY_SERVER_IDLE_TIMEOUT of the last does).
Each search asks for one seeded memory by other words; recall counts the searches whose top 5
hold it, short results the searches that returned fewer than 5. Also times the same commands
with MEMORY_SERVER_IDLE_TIMEOUT=0 (each command starts and stops the server, as before).
Reports the median and the 90th percentile of wall time per command, and the median CPU time of
the command's process (user + system), which a busy machine stretches far less than wall time,
and of the resident command process (agent_memory.cli.resident) that answers warm memory
commands; the machine's load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from agent_memory.cli.resident import resident_status

CLI = [str(Path(sys.executable).with_name("agent-memory"))]
MEMORIES = [
    ("Prefers dark mode in every editor", "which colour theme do I like?"),
    ("Uses VS Code as the main editor", "what do I write code in?"),
    ("Deploys the webshop on Fridays after lunch", "when do we ship?"),
    ("Allergic to peanuts", "any food I must avoid?"),
    ("Runs PostgreSQL 18 in production", "which database version is live?"),
] + [(f"Note number {i} about the quarterly report section {i}", "") for i in range(15)]


CPU: dict[str, list[float]] = {}
RESIDENT: dict[str, Any] = {"pid": None}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Wall time of one command; its CPU time (user + system, the command's own process; the
    server's work is not counted) goes to CPU under the command's name."""
    resident = _resident_cpu()
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run(CLI + argv, capture_output=True, text=True, env=env, check=True)
    wall = time.perf_counter() - start
    CPU.setdefault(argv[0], []).append(_children_cpu() - cpu)
    if resident is not None and (after := _resident_cpu()) is not None:
        CPU.setdefault(argv[0] + " (resident)", []).append(after - resident)
    return wall, done


def _resident_cpu() -> float | None:
    """CPU time so far of the resident command process (None when none runs)."""
    try:
        times = psutil.Process(RESIDENT["pid"]).cpu_times() if RESIDENT["pid"] else None
    except psutil.Error:
        return None
    return None if times is None else times.user + times.system


def _summary(times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered):.2f} s, p90 {p90:.2f} s (n={len(ordered)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--data-dir", help="default: a fresh temporary directory")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="agent-memory-cli-bench-"))
    data_dir = Path(args.data_dir) if args.data_dir else base / "pgdata"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PYTHONDONTWRITEBYTECODE")}
    env.update(MEMORY_DATA_DIR=str(data_dir), MEMORY_SERVER_IDLE_TIMEOUT="600")
    user = ["--user", "bench-user"]
    try:
        print(f"load average before: {os.getloadavg()}")
        cold, _ = _run(["list", *user], env)
        print(f"first command (initdb and server start): {cold:.2f} s")
        for _ in range(600):  # the first command started the resident; wait until it answers
            status = resident_status(data_dir)
            if status is not None:
                RESIDENT["pid"] = status["pid"]
                break
            time.sleep(0.5)
        ids = {}
        for content, _question in MEMORIES:
            _, done = _run(["add", content, *user, "--json"], env)
            ids[content] = json.loads(done.stdout)["id"]
        results: dict[str, list[float]] = {"list": [], "stats": [], "search": []}
        hits = short = asked = 0
        questions = [(c, q) for c, q in MEMORIES if q]
        for i in range(args.runs):
            results["list"].append(_run(["list", *user], env)[0])
            results["stats"].append(_run(["stats", *user], env)[0])
            content, question = questions[i % len(questions)]
            took, done = _run(["search", question, *user, "-k", "5", "--json"], env)
            results["search"].append(took)
            found = json.loads(done.stdout)
            asked += 1
            hits += any(hit["id"] == ids[content] for hit in found)
            short += len(found) < 5
        for name, times in results.items():
            cpu = statistics.median(CPU[name][-len(times):])
            served = CPU.get(name + " (resident)", [])[-len(times):]
            there = f", resident's CPU median {statistics.median(served):.2f} s" if served else ""
            print(f"{name:<7} warm server: {_summary(times)}; CPU median {cpu:.2f} s{there}")
        print(f"search recall@5 {hits}/{asked}, short results {short}/{asked}")
        print(f"load average after: {os.getloadavg()}")
        subprocess.run(CLI + ["server", "stop"], env=env, capture_output=True, check=True)
        RESIDENT["pid"] = None
        env["MEMORY_SERVER_IDLE_TIMEOUT"] = "0"
        old = {"list": [], "search": []}
        for i in range(max(3, args.runs // 3)):
            old["list"].append(_run(["list", *user], env)[0])
            old["search"].append(_run(["search", questions[i % len(questions)][1], *user], env)[0])
        for name, times in old.items():
            print(f"{name:<7} server started and stopped by each command (timeout 0): {_summary(times)}")
    finally:
        subprocess.run(CLI + ["server", "stop"], env=env, capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
