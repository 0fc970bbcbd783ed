"""What MemoryMiddleware adds to each model call, at 10k memories in the database.

    python benchmarks/middleware_overhead.py [--rows 10000] [--own 300] [--samples 300] [--dsn DSN] [--json OUT]

Per model call the middleware works out who is asking, builds the search text from the
conversation, searches (query embedding with the local model + one SQL statement), reads the
user and project profiles, renders the block (``before_model``), and appends it to the system prompt
(``wrap_model_call``). This times exactly those two hooks, called as the agent calls
them, with a no-op model handler, for a new user turn each time (so the per-turn cache
never hits), and splits the time into query embedding, database and the rest (identity,
query, key, formatting, state). It also times:

* the second model call of the same turn (after a tool call that writes no memory): the
  cached path, which should cost next to nothing;
* one whole ``agent.invoke`` turn of a ``create_agent`` agent with a scripted model, with
  and without ``MemoryMiddleware`` (and with the whole ``memory_middleware_stack``), taken
  in turns on the same conversation; the difference is the middleware's cost inside the
  graph, the model's own time cancelling out.

Every turn is the third message of a conversation (a user turn and an answer come first),
as in a thread that is under way, so short questions are searched together with the turn
before them, as ``build_query`` does; the report splits the two cases.

Data: ``--rows`` memories. The acting user has ``--own`` user memories, 20 memories of
their current session and a project of 5 members with 120 project memories; every other
row belongs to one of 400 other users (projects of 5, 70/25/5 % user/project/session).
Contents are template sentences from ``latency_data`` embedded once with the local model
and reused across tenants (never inside one scope), each stored vector with a little noise;
queries are new sentences and run the real model. Without ``--dsn`` a fresh embedded
PostgreSQL is started in a temporary directory and removed at the end. Not part of the
test suite.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import shlex
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.runtime import Runtime
from latency import code_version, machine_info
from latency_data import SEED, CachedEmbeddings, SentenceMaker
from latency_timing import loadavg, stats_ms

from agent_memory import MemoryConfig, MemoryService
from agent_memory.db.connection import open_pool
from agent_memory.embeddings import LocalEmbeddings
from agent_memory.middleware import (
    MemoryBackend,
    MemoryMiddleware,
    build_query,
    memory_middleware_stack,
)
from agent_memory.testing import ScriptedChatModel, tool_call

TARGET_P95_MS = 20.0
ME, MY_PROJECT, MY_SESSION = "bench-me", "bench-p-me", "bench-me-s1"
TYPICAL = ("bench-u0000", "bench-p000", "bench-u0000-s0")  # one of the other users, for comparison
OTHER_USERS, PROJECT_SIZE = 400, 5
SYSTEM_PROMPT = "You are a helpful assistant for a software team."


# --- timing probes ------------------------------------------------------------------------------


class TimedEmbeddings(LocalEmbeddings):
    """The local model, recording how long each query embedding takes."""

    def __init__(self) -> None:
        super().__init__()
        self.last = 0.0

    def embed_query(self, text: str) -> list[float]:
        t = time.perf_counter()
        try:
            return super().embed_query(text)
        finally:
            self.last = time.perf_counter() - t


class TimedBackend(MemoryBackend):
    """The real backend, recording how long the last search (embedding included) and the last
    profile lookup took."""

    last = 0.0
    last_profiles = 0.0

    def run(self, op: Any) -> Any:
        t = time.perf_counter()
        try:
            return super().run(op)
        finally:
            if op.__name__ == "profiles":  # the operation's own name (PrincipalOps.profiles)
                self.last_profiles = time.perf_counter() - t
            else:
                self.last = time.perf_counter() - t


# --- data ---------------------------------------------------------------------------------------


def plan(rows: int, own: int, rng: random.Random, maker: SentenceMaker) -> dict[tuple[str, str | None, str | None],
                                                                                  list[dict[str, Any]]]:
    """Import batches by caller: ``(user, project, session) -> [items]``."""
    pools = {"user": maker.memories("user", 1500), "project": maker.memories("project", 800),
             "session": maker.memories("session", 300)}
    drawn: dict[tuple[str, str], set[int]] = defaultdict(set)
    batches: dict[tuple[str, str | None, str | None], list[dict[str, Any]]] = defaultdict(list)

    def add(user: str, project: str, session: str, scope: str) -> None:
        scope_id = {"user": user, "project": project, "session": session}[scope]
        taken = drawn[(scope, scope_id)]
        i = rng.choice([j for j in range(len(pools[scope])) if j not in taken])
        taken.add(i)
        content, memory_type = pools[scope][i]
        batches[(user, project, session)].append({"content": content, "memory_type": memory_type, "scope": scope})

    teammates = [f"bench-mate{i}" for i in range(1, PROJECT_SIZE)]
    for _ in range(own):
        add(ME, MY_PROJECT, MY_SESSION, "user")
    for _ in range(20):
        add(ME, MY_PROJECT, MY_SESSION, "session")
    for i in range(120):
        add(ME if i % PROJECT_SIZE == 0 else teammates[i % len(teammates)], MY_PROJECT, "bench-mate-s", "project")
    rest = rows - own - 20 - 120
    scopes = rng.choices(["user", "project", "session"], weights=[70, 25, 5], k=rest)
    for scope in scopes:
        u = rng.randrange(OTHER_USERS)
        add(f"bench-u{u:04d}", f"bench-p{u // PROJECT_SIZE:03d}", f"bench-u{u:04d}-s{rng.randrange(2)}", scope)
    return batches


def seed(memory: MemoryService, batches: dict[tuple[str, str | None, str | None], list[dict[str, Any]]]) -> int:
    members: dict[str, list[str]] = defaultdict(list)
    for user, project, _ in batches:
        if project is not None and user not in members[project]:
            members[project].append(user)
    for project, users in members.items():  # a project's members write its memories
        memory.create_project(project, user_id=users[0])
        for user in users[1:]:
            memory.add_member("project", project, user, "editor", user_id=users[0])
    n = 0
    for (user, project, session), items in batches.items():
        result = memory.for_user(user, project_id=project, session_id=session).add_many(items)
        n += len(result.inserted)
        if result.rejected:
            raise SystemExit(f"the gate rejected {len(result.rejected)} seeded memories; fix the templates")
    return n


# --- measurements -------------------------------------------------------------------------------


def _conversation(question: str, i: int) -> list[Any]:
    return [HumanMessage("Can you help me plan the next sprint for the checkout service?", id=f"h-prev-{i}"),
            AIMessage("Sure. Which parts of checkout are you worried about?", id=f"a-prev-{i}"),
            HumanMessage(question, id=f"h-{i}")]


def _noop(request: ModelRequest) -> ModelResponse:
    return ModelResponse(result=[AIMessage("ok")])


class Recorder:
    """A no-op model handler that keeps the request it was given (to count what was injected)."""

    request: Any = None

    def __call__(self, request: ModelRequest) -> ModelResponse:
        self.request = request
        return _noop(request)


def hooks(mw: MemoryMiddleware, backend: TimedBackend, embeddings: TimedEmbeddings, model: Any,
          questions: Sequence[str], warmup: int, who: tuple[str, str, str]) -> dict[str, Any]:
    """The two hooks per model call, first call of a turn and the cached second call, for caller ``who``."""
    runtime = Runtime(context=dict(zip(("user_id", "project_id", "session_id"), who)))
    parts: dict[str, list[float]] = defaultdict(list)
    injected: list[int] = []
    for i, question in enumerate(questions):
        state: dict[str, Any] = {"messages": _conversation(question, i)}
        backend.last = backend.last_profiles = embeddings.last = 0.0
        t0 = time.perf_counter()
        update = mw.before_model(state, runtime)
        t1 = time.perf_counter()
        state.update(update or {})
        request = ModelRequest(model=model, messages=state["messages"], system_message=SystemMessage(SYSTEM_PROMPT),
                               state=state, runtime=runtime, tools=[])
        seen = Recorder()
        t2 = time.perf_counter()
        mw.wrap_model_call(request, seen)
        t3 = time.perf_counter()
        # the second model call of this turn, after a tool that writes no memory
        call = tool_call("order_status", order_id="A-1")
        state2 = {**state, "messages": [*state["messages"], AIMessage("", tool_calls=[call], id=f"ai-{i}"),
                                        ToolMessage("shipped", tool_call_id=call["id"], name="order_status")]}
        t4 = time.perf_counter()
        again = mw.before_model(state2, runtime)
        request2 = ModelRequest(model=model, messages=state2["messages"], system_message=SystemMessage(SYSTEM_PROMPT),
                                state=state2, runtime=runtime, tools=[])
        mw.wrap_model_call(request2, _noop)
        t5 = time.perf_counter()
        if again is not None:
            raise SystemExit("the second model call of a turn searched again: the per-turn cache is broken")
        if i < warmup:
            continue
        injected.append(seen.request.system_message.text.count("<memory "))
        group = "standalone" if build_query(state["messages"]) == question else "with_context"
        parts[f"total_{group}"].append((t1 - t0) + (t3 - t2))
        parts[f"embedding_{group}"].append(embeddings.last)
        parts[f"database_{group}"].append(backend.last - embeddings.last)
        parts["total"].append((t1 - t0) + (t3 - t2))
        parts["before_model"].append(t1 - t0)
        parts["wrap_model_call"].append(t3 - t2)
        parts["embedding"].append(embeddings.last)
        parts["database"].append(backend.last - embeddings.last)
        parts["profiles"].append(backend.last_profiles)
        parts["rest"].append((t1 - t0) - backend.last - backend.last_profiles)
        parts["cached_second_call"].append(t5 - t4)
    out: dict[str, Any] = {k: stats_ms(v) for k, v in parts.items()}
    out["memories_injected_mean"] = float(np.mean(injected))
    return out


def invokes(memory: MemoryService, questions: Sequence[str], warmup: int) -> dict[str, Any]:
    """Whole agent turns with a scripted model: plain, + MemoryMiddleware, + the whole memory stack."""
    model = ScriptedChatModel(script=["ok"])
    agents = {
        "plain": create_agent(model, [], system_prompt=SYSTEM_PROMPT),
        "memory_middleware": create_agent(model, [], system_prompt=SYSTEM_PROMPT,
                                          middleware=[MemoryMiddleware(memory)]),
        "memory_stack": create_agent(model, [], system_prompt=SYSTEM_PROMPT,
                                     middleware=memory_middleware_stack(model, memory)),
    }
    times: dict[str, list[float]] = defaultdict(list)
    names = list(agents)
    for i, question in enumerate(questions):
        config = {"configurable": {"user_id": ME, "project_id": MY_PROJECT, "thread_id": MY_SESSION}}
        took = {}
        for name in names[i % 3:] + names[:i % 3]:  # rotate the order so none always goes first
            t = time.perf_counter()
            agents[name].invoke({"messages": _conversation(question, i)}, config)
            took[name] = time.perf_counter() - t
        if i >= warmup:
            for name in names:
                times[name].append(took[name])
            times["memory_middleware - plain"].append(took["memory_middleware"] - took["plain"])
            times["memory_stack - plain"].append(took["memory_stack"] - took["plain"])
    return {k: stats_ms(v) for k, v in times.items()}


# --- report -------------------------------------------------------------------------------------


def _f(s: dict[str, float]) -> str:
    return f"{s['p50']:.2f} / {s['p95']:.2f} / {s['p99']:.2f}"


def markdown(r: dict[str, Any]) -> str:
    m, h, a = r["machine"], r["hooks"], r["invoke"]
    met = h["total"]["p95"] <= TARGET_P95_MS
    lines = [
        f"Command: `{r['command']}` (code {r['code']})  ",
        (f"Date: {r['date']}; machine: {m['nproc']} cores ({m['cpu']}), {m['python']}, {m['postgres']}, "
         f"pgvector {m['pgvector']}; load average before {r['loadavg_before']}, after {r['loadavg_after']}.  "),
        (f"Data: {r['rows']:,} memories ({r['data']}); {r['samples']} timed turns after {r['warmup']} warm-up; "
         f"{h['memories_injected_mean']:.1f} memories injected per call on average."),
        "",
        "| per model call (ms) | p50 / p95 / p99 |",
        "|---|---|",
        f"| **MemoryMiddleware, first call of a turn (before_model + wrap_model_call)** | **{_f(h['total'])}** |",
        f"| &nbsp; query embedding (local MiniLM) | {_f(h['embedding'])} |",
        f"| &nbsp; database (search and conflict statements, round trips) | {_f(h['database'])} |",
        f"| &nbsp; profiles (profiles(): user + project profile, one query) | {_f(h['profiles'])} |",
        f"| &nbsp; the rest of before_model (identity, query, key, rendering) | {_f(h['rest'])} |",
        f"| &nbsp; wrap_model_call (injection) | {_f(h['wrap_model_call'])} |",
        (f"| the same for {TYPICAL[0]}, who sees {r['typical_visible']} memories "
         f"| {_f(r['hooks_typical']['total'])} |"),
        f"| second model call of the same turn (cached) | {_f(h['cached_second_call'])} |",
        f"| agent.invoke, one turn, scripted model: plain agent | {_f(a['plain'])} |",
        f"| &nbsp; with MemoryMiddleware | {_f(a['memory_middleware'])} |",
        f"| &nbsp; with memory_middleware_stack (working + summarization + long-term) | {_f(a['memory_stack'])} |",
        f"| &nbsp; difference, MemoryMiddleware - plain (same question, paired) | {_f(a['memory_middleware - plain'])} |",
        f"| &nbsp; difference, memory stack - plain | {_f(a['memory_stack - plain'])} |",
        "",
        "By the search text (`build_query` puts the user's previous turn before turns under 8 words):",
        "",
        "| turns | n | total ms p50 / p95 / p99 | embedding | database |",
        "|---|---|---|---|---|",
        *(f"| {label} | {h['total_' + g]['n']} | {_f(h['total_' + g])} | {_f(h['embedding_' + g])} "
          f"| {_f(h['database_' + g])} |"
          for g, label in (("standalone", "8+ words, searched alone"),
                           ("with_context", "shorter, searched with the previous user turn"))),
        "",
        (f"Target p95 <= {TARGET_P95_MS:g} ms per model call: {'met' if met else 'NOT met'} "
         f"({h['total']['p95']:.1f} ms)."),
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--own", type=int, default=300, help="user memories of the acting user")
    p.add_argument("--samples", type=int, default=300, help="timed turns in each measurement")
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--dsn", help="an empty database to use instead of a temporary embedded server")
    p.add_argument("--json", help="write every number to this file")
    args = p.parse_args(argv)
    if args.rows < args.own + 140 or args.samples < 1:
        p.error("--rows must leave room for the acting user's memories, --samples must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    started = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {msg}", flush=True)

    report: dict[str, Any] = {"command": shlex.join([Path(sys.executable).name, *sys.argv]), "code": code_version(),
                              "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                              "loadavg_before": loadavg(), "rows": args.rows, "samples": args.samples,
                              "warmup": args.warmup}
    tmp = server = None
    config = MemoryConfig()
    if args.dsn:
        dsn = args.dsn
        with psycopg.connect(dsn) as conn:
            if conn.execute("SELECT to_regclass('memory_items') IS NOT NULL").fetchone()[0] and \
                    conn.execute("SELECT count(*) FROM memory_items").fetchone()[0]:
                raise SystemExit("memory_items in --dsn is not empty; point --dsn at an empty database")
    else:
        from agent_memory.db.embedded import ensure_embedded_server
        from agent_memory.service import DEFAULT_DATABASE

        tmp = Path(tempfile.mkdtemp(prefix="agent-memory-middleware-"))
        config = MemoryConfig(data_dir=tmp / "pgdata")
        server = ensure_embedded_server(config.resolved_data_dir())
        dsn = server.ensure_database(DEFAULT_DATABASE)
        log(f"embedded PostgreSQL started in {config.data_dir}")
    pool = open_pool(dsn, min_size=1, max_size=4)
    try:
        maker = SentenceMaker(SEED)
        rng = random.Random(SEED)
        batches = plan(args.rows, args.own, rng, maker)
        texts = sorted({i["content"] for items in batches.values() for i in items})
        t = time.perf_counter()
        vectors = dict(zip(texts, LocalEmbeddings().embed_documents_array(texts)))
        log(f"embedded {len(texts)} distinct sentences in {time.perf_counter() - t:.0f} s")
        loader = MemoryService(pool, config=config, embeddings=CachedEmbeddings(vectors, jitter=0.3))
        report["machine"] = machine_info(pool)
        t = time.perf_counter()
        n = seed(loader, batches)
        with pool.connection() as conn:
            conn.execute("VACUUM ANALYZE memory_items")
            visible, typical = (conn.execute(
                "SELECT count(*) FROM memory_items WHERE (scope = 'user' AND scope_id = %s) "
                "OR (scope = 'project' AND scope_id = %s) OR (scope = 'session' AND scope_id = %s)",
                who).fetchone()[0] for who in ((ME, MY_PROJECT, MY_SESSION), TYPICAL))
        report["typical_visible"] = typical
        log(f"seeded {n:,} memories in {time.perf_counter() - t:.0f} s; the acting user sees {visible}")
        report["data"] = (f"the acting user sees {visible}: {args.own} of their own, 20 of their session, 120 of "
                          f"their 5-member project; the rest belong to {OTHER_USERS} other users, of whom {TYPICAL[0]} sees {typical}")

        embeddings = TimedEmbeddings()
        memory = MemoryService(pool, config=config, embeddings=embeddings)
        backend = TimedBackend(memory)
        mw = MemoryMiddleware(backend)
        questions = SentenceMaker(SEED + 1).questions(2 * (args.samples + args.warmup))
        split = args.samples + args.warmup
        log(f"timing the hooks: {args.samples} turns (+{args.warmup} warm-up)")
        model = ScriptedChatModel(script=["ok"])
        report["hooks"] = hooks(mw, backend, embeddings, model, questions[:split], args.warmup,
                                (ME, MY_PROJECT, MY_SESSION))
        log(f"timing the hooks for {TYPICAL[0]}: {args.samples} turns (+{args.warmup} warm-up)")
        report["hooks_typical"] = hooks(mw, backend, embeddings, model, questions[split:], args.warmup, TYPICAL)
        log(f"timing agent.invoke: {args.samples} turns x 3 agents (+{args.warmup} warm-up)")
        report["invoke"] = invokes(memory, questions[split:], args.warmup)
        report["loadavg_after"] = loadavg()
    finally:
        pool.close()
        if server is not None:
            server.stop()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(markdown(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
