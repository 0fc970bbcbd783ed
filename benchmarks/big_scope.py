"""A big project whose notes repeat with small variations, searched and saved into (issue 29).

    python benchmarks/big_scope.py [--project 20000] [--users 50] [--queries 300] [--saves 200]
                                   [--checked 50] [--before] [--vectors CACHE.npz] [--explain] [--json OUT]

Real project notes repeat: the same stand-up, deploy, incident and review sentences with another
name, build number, day or component. ``side_by_side.py``'s project draws distinct sentences and
random vectors; this one writes ``--project`` notes from a few templates with small variations,
embedded by the local model (so near-repeats are near in meaning, as they are for users), each
kept with its context as ``add_transcript`` keeps a turn's (the note and the 2 before it, its
vector embedded too). Beside it, ``--users`` users of 100 memories each (the same kind of notes
about themselves); one of the project's members is one of them.

Timed, the two callers taking turns in one run: the database part of ``search(k=10)`` (the
question's vector made before the clock starts, ranking in Python included) by a project member
(their 100 memories and the project's notes) and by a 100-memory user who is in no project.
``--checked`` answers of each caller, evenly spread, are compared afterwards with the exhaustive
scan's (recall 1.0 means the exact top 10; *short*, an answer with fewer than 10 hits). Then
saves into the project (``add`` with ``context=``, as a turn said in a session keeps it; vectors
made before the clock: the database part), half of them notes the project repeats with small
variations (most are merged into a duplicate), half new ones (inserted). ``--before`` runs the
searches and saves four times, the code as it was before this work (a copy's candidates chosen
with the index's error, two matrix products for rows with context, every row near the duplicate
threshold measured) and the shipped code taking turns; ``--explain`` prints EXPLAIN ANALYZE of
the member's search statement.

The load goes through binary COPY (``queries.copy_items``, so the triggers fill ``memory_terms``)
and VACUUM ANALYZE, in a fresh embedded PostgreSQL in a temporary directory; ``--vectors`` keeps
the model's vectors in a file so a second run skips embedding (about 3 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shlex
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from agent_memory import MemoryConfig, MemoryService, ops, queries, vector_cache

sys.path.insert(0, str(Path(__file__).parent))
from latency_timing import stats_ms  # noqa: E402
from side_by_side import Precomputed, _binary_copy, _vacuum, exhaustive  # noqa: E402

K = 10
SEED = 29
WINDOW = 2

VOCAB = {k: v.split("|") for k, v in {
    "name": "Alice|Bruno|Chen|Dana|Emeka|Farah|Giulia|Hiro|Ines|Jonas|Kavya|Lars|Maya|Nadia|Omar|Priya",
    "component": "payments service|search index|login page|billing export|mobile app|data pipeline|"
                 "notification worker|admin dashboard|API gateway|reporting job",
    "env": "staging|production|the canary|the load-test cluster",
    "weekday": "Monday|Tuesday|Wednesday|Thursday|Friday",
    "blocker": "code review|a flaky test|the database migration|a missing API key|design sign-off|the vendor",
    "status": "passed|failed|was rolled back|is still running|was retried",
    "metric": "p95 latency|error rate|memory use|queue depth|CPU load",
}.items()}
NOTES = [
    "Standup {weekday}: {name} is still working on the {component}, blocked on {blocker}.",
    "Deploy of build {build} of the {component} to {env} {status}.",
    "Incident {build}: the {metric} of the {component} in {env} went over its alert on {weekday}.",
    "{name} reviewed the pull request {build} for the {component} and asked for changes.",
    "Retro note: the {component} release slipped because of {blocker}; {name} owns the follow-up.",
    "CI run {build} on the {component} {status} on {weekday}.",
    "{name} will pair with {other} on the {component} on {weekday}.",
    "The {metric} of the {component} in {env} is back to normal after build {build}.",
]
QUESTIONS = [
    "Who is blocked on {blocker}?",
    "What happened to build {build} of the {component}?",
    "Did the deploy to {env} of the {component} pass?",
    "Which incident hit the {metric} of the {component}?",
    "What is {name} working on?",
    "Why did the {component} release slip?",
    "Who pairs with {name} on {weekday}?",
    "Is the {metric} of the {component} back to normal?",
]
#: saves of things the project has not noted before (half the timed saves; the other half repeat
#: its notes with small variations, and most of those are merged into a duplicate)
FRESH = [
    "The {component} design doc by {name} proposes sharding by tenant before the {weekday} review.",
    "Budget for the {component} in {env}: {name} asked finance for {build} euros of extra capacity.",
    "{name} found that the {component} leaks file handles when {blocker} delays the nightly job.",
    "Customer ticket {build}: exports from the {component} show the wrong time zone for {name}.",
    "Security review of the {component}: {name} must rotate the signing keys in {env} by {weekday}.",
]
PERSONAL = [
    "I prefer {weekday} mornings for deep work on the {component}.",
    "My one-on-one with {name} is on {weekday}.",
    "I keep forgetting the {component} runbook for {env}.",
    "I want alerts on the {metric} of the {component} sent to me.",
]


class Notes:
    """Reproducible notes and questions from the templates above."""

    def __init__(self, seed: int = SEED) -> None:
        self.rng = random.Random(seed)

    def fill(self, template: str) -> str:
        values = {k: self.rng.choice(v) for k, v in VOCAB.items()}
        values["other"] = self.rng.choice(VOCAB["name"])
        values["build"] = str(self.rng.randint(1000, 9999))
        return template.format(**values)

    def many(self, templates: Sequence[str], n: int) -> list[str]:
        return [self.fill(self.rng.choice(templates)) for _ in range(n)]


def windows(texts: Sequence[str], window: int = WINDOW) -> list[str]:
    """Each text with the ``window`` texts before it, as ``add_transcript`` keeps a turn's context."""
    return ["\n".join(texts[max(0, i - window): i + 1]) for i in range(len(texts))]


def embed_all(texts: Sequence[str], cache: Path | None, log: Any) -> np.ndarray:
    """The local model's vectors of ``texts``; those ``cache`` holds are read from it, the rest
    embedded and added to it."""
    held: dict[str, np.ndarray] = {}
    if cache is not None and cache.exists():
        with np.load(cache, allow_pickle=False) as f:
            held = dict(zip(f["texts"].tolist(), f["vectors"]))
    missing = sorted({t for t in texts if t not in held})
    if missing:
        from agent_memory.embeddings import LocalEmbeddings

        started = time.perf_counter()
        model = LocalEmbeddings()
        for lo in range(0, len(missing), 2000):
            part = missing[lo: lo + 2000]
            held.update(zip(part, np.asarray(model.embed_documents(part), np.float32)))
            log(f"embedded {min(lo + 2000, len(missing)):,} of {len(missing):,}")
        log(f"embedding took {time.perf_counter() - started:.0f} s")
        if cache is not None:
            np.savez(cache, texts=np.asarray(list(held)), vectors=np.stack(list(held.values())))
    return np.stack([held[t] for t in texts])


def load(dsn: str, rows: list[tuple[Any, ...]]) -> float:
    """Rows of (user, scope, scope_id, content, context, position, context vector, vector) by COPY."""
    started = time.perf_counter()
    order = list(range(len(rows)))
    random.Random(SEED).shuffle(order)  # tenants interleaved on disk, as over time
    with psycopg.connect(dsn) as conn:
        _binary_copy(conn, queries.copy_items().as_string(conn), queries.COPY_TYPES, (
            (uuid.uuid4(), content, "episodic" if context else "semantic", scope, scope_id, user,
             scope_id if scope == "project" else None, None, "conversation" if context else "user",
             f"{scope_id}-notes" if context else None, 0.8, "members", Jsonb({}), None, None, "decay",
             context, position, cvector, vector)
            for user, scope, scope_id, content, context, position, cvector, vector in (rows[i] for i in order)))
    _vacuum(dsn, ("memory_items", "memory_terms"))
    return time.perf_counter() - started


def timed_searches(service: MemoryService, emb: Precomputed, callers: dict[str, dict[str, str]],
                   asks: dict[str, list[tuple[str, np.ndarray]]], checked: int) -> dict[str, Any]:
    """Each caller's questions, callers taking turns (the order alternating); then ``checked`` of
    each caller's answers, evenly spread, against the exhaustive scan's (which ranks every one of
    the 20,000 rows in Python: about a second a search)."""
    times: dict[str, list[float]] = {name: [] for name in callers}
    got: dict[str, list[list[Any]]] = {name: [] for name in callers}
    names = list(callers)
    for i in range(len(asks[names[0]])):
        for name in (names if i % 2 == 0 else names[::-1]):
            text, vector = asks[name][i]
            emb.query = vector.tolist()
            t = time.perf_counter()
            found = service.for_user(**callers[name]).search(text, k=K)
            times[name].append(time.perf_counter() - t)
            got[name].append([r.item.id for r in found])
    out: dict[str, Any] = {}
    with exhaustive():
        for name in names:
            recall, short = [], 0
            step = max(1, len(got[name]) // max(1, checked))
            for (text, vector), ids in list(zip(asks[name], got[name]))[::step][:checked]:
                emb.query = vector.tolist()
                want = [r.item.id for r in service.for_user(**callers[name]).search(text, k=K)]
                recall.append(len(set(ids) & set(want)) / max(1, len(want)))
                short += len(ids) < K
            s = stats_ms(times[name])
            out[name] = {"p50": round(s["p50"], 1), "p95": round(s["p95"], 1), "p99": round(s["p99"], 1),
                         "recall": round(float(np.mean(recall)), 4), "short": short, "checked": len(recall),
                         "n": len(times[name])}
    return out


def timed_saves(service: MemoryService, emb: Precomputed, member: str, project: str,
                saves: list[tuple[str, str, np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """``add(content, context=...)`` into the project, vectors made before: the database part."""
    times: list[float] = []
    outcomes = {"inserted": 0, "deduplicated": 0}
    handle = service.for_user(member, project_id=project)
    for text, context, vector, cvector in saves:
        emb.documents[text], emb.documents[context] = vector, cvector
        t = time.perf_counter()
        item = handle.add(text, scope="project", context=context)
        times.append(time.perf_counter() - t)
        outcomes["deduplicated" if item.deduplicated else "inserted"] += 1
    s = stats_ms(times[5:])
    return {"p50": round(s["p50"], 1), "p95": round(s["p95"], 1), "p99": round(s["p99"], 1), "n": len(times) - 5,
            "outcomes": outcomes}


def _two_products(copy: vector_cache.CachedRange, query: np.ndarray, rows: np.ndarray, share: float) -> np.ndarray:
    """A copy's similarities as before issue 29's big-scope work: the vectors' product, then the
    contexts' product mixed in (two reads of a 20,000-row matrix instead of one)."""
    sim = (copy.vectors[: copy.size] @ query)[rows].astype(np.float64)
    if copy.contexts is None or share == 0:
        return sim
    csim = (copy.contexts[: copy.size] @ query)[rows].astype(np.float64)
    return np.where(copy.has_context[rows], sim + share * (csim - sim), sim)


def _near(ranges: Sequence[tuple[vector_cache.CachedRange, str]], *, query: np.ndarray, now: float, owner_key: int,
          threshold: float, visibilities: Sequence[str]) -> list[Any]:
    """A duplicate check's rows as before issue 29's big-scope work: every row the copy finds
    within the index's error of the threshold (over repetitive notes, hundreds), each measured
    in the database."""
    out: list[Any] = []
    for copy, rule in ranges:
        with copy.lock:
            seen = vector_cache._seen(copy, rule, now=now, owner_key=owner_key, types=None)
            sim = copy.vectors[: copy.size] @ query
            out += [copy.ids[i] for i in seen[sim[seen] >= threshold - queries.HALF_ERROR]]
    return out


def explain(service: MemoryService, emb: Precomputed, ids: dict[str, str], text: str, vector: np.ndarray) -> str:
    """EXPLAIN ANALYZE of the search statement one real search of ``ids`` runs."""
    seen: list[Any] = []
    real = queries.indexed_search

    def capture(*args: Any, **kwargs: Any) -> Any:
        seen.append(real(*args, **kwargs))
        return seen[-1]

    emb.query = vector.tolist()
    with mock.patch.object(ops.queries, "indexed_search", capture):
        service.for_user(**ids).search(text, k=K)
    q, p = seen[-1]
    with psycopg.connect(service.conn.conninfo) as conn:  # type: ignore[union-attr]
        conn.execute(queries.GENERIC_PLANS)
        conn.execute(q, p).fetchall()
        plan = conn.execute(psycopg.sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + q, p).fetchall()
    return "\n".join(r[0] for r in plan)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--project", type=int, default=20_000, help="notes in the project")
    p.add_argument("--users", type=int, default=50, help="users of 100 memories each")
    p.add_argument("--queries", type=int, default=300, help="timed searches per caller")
    p.add_argument("--saves", type=int, default=200, help="timed saves into the project")
    p.add_argument("--checked", type=int, default=50, help="answers per caller compared with the exhaustive scan")
    p.add_argument("--before", action="store_true",
                   help="also time searches and saves with the copies choosing candidates with the index's"
                        " error (queries.HALF_ERROR), as before issue 29, taking turns with the shipped code")
    p.add_argument("--vectors", type=Path, default=None, help="keep the model's vectors in this .npz")
    p.add_argument("--explain", action="store_true")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    started = time.perf_counter()
    log = lambda msg: print(f"[{time.perf_counter() - started:6.1f}s] {msg}", flush=True)  # noqa: E731
    notes = Notes()
    project_notes = notes.many(NOTES, args.project)
    users = [f"user-{i:03d}" for i in range(args.users)]
    personal = {u: notes.many(PERSONAL + NOTES[:2], 100) for u in users}
    questions = {"member": notes.many(QUESTIONS, args.queries), "user": notes.many(QUESTIONS, args.queries)}
    save_texts = [notes.fill(notes.rng.choice(FRESH if i % 2 else NOTES)) for i in range(args.saves + 10)]
    contexts = windows(project_notes)
    save_contexts = [f"{project_notes[-2 + i % 2]}\n{text}" for i, text in enumerate(save_texts)]
    flat = (project_notes + contexts + [t for u in users for t in personal[u]] + questions["member"]
            + questions["user"] + save_texts + save_contexts)
    vectors = embed_all(flat, args.vectors, log)
    at = iter(range(len(flat)))
    take = lambda n: vectors[[next(at) for _ in range(n)]]  # noqa: E731
    v_notes, v_contexts = take(len(project_notes)), take(len(contexts))
    v_personal = {u: take(100) for u in users}
    v_questions = {name: take(len(qs)) for name, qs in questions.items()}
    v_saves, v_save_contexts = take(len(save_texts)), take(len(save_contexts))
    member, loner, project = users[1], users[-1], "big-project"
    rows: list[tuple[Any, ...]] = [
        (users[i % 5], "project", project, text, context, i, cv, v)
        for i, (text, context, v, cv) in enumerate(zip(project_notes, contexts, v_notes, v_contexts))]
    rows += [(u, "user", u, text, None, None, None, v) for u in users for text, v in zip(personal[u], v_personal[u])]
    report: dict[str, Any] = {
        "command": shlex.join(["python", "benchmarks/big_scope.py", *(argv if argv is not None else sys.argv[1:])]),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "loadavg_before": os.getloadavg(),
        "rows": len(rows)}
    from agent_memory.db.embedded import ensure_embedded_server

    tmp = Path(tempfile.mkdtemp(prefix="agent-memory-big-scope-"))
    server = ensure_embedded_server(tmp / "pgdata")
    try:
        dsn = server.ensure_database("postgres")
        emb = Precomputed()
        with MemoryService(dsn, config=MemoryConfig(), embeddings=emb) as service:
            report["load_s"] = round(load(dsn, rows), 1)
            log(f"loaded {len(rows):,} rows in {report['load_s']} s")
            service.create_project(project, user_id=users[0])
            for u in users[1:5]:
                service.add_member("project", project, u, "editor", user_id=users[0])
            callers = {"member": {"user_id": member, "project_id": project}, "user": {"user_id": loner}}
            asks = {name: list(zip(questions[name], v_questions[name])) for name in callers}
            for name, ids in callers.items():  # warm up: copies made, plans cached
                for text, vector in asks[name][:10]:
                    emb.query = vector.tolist()
                    service.for_user(**ids).search(text, k=K)
            saves = list(zip(save_texts, save_contexts, v_saves, v_save_contexts))
            variants = [("shipped", vector_cache.ERROR, vector_cache.CachedRange.similarity, vector_cache.closest)]
            if args.before:  # the shipped code and the code as before, each in turn, twice
                variants = [("before", queries.HALF_ERROR, _two_products, _near), *variants] * 2
            report["runs"] = []
            per = max(1, len(saves) // len(variants))
            for i, (label, error, similarity, closest) in enumerate(variants):
                sent: dict[str, list[int]] = {"search": [], "duplicate check": []}
                choose = vector_cache.candidates

                def chosen(*a: Any, **kw: Any) -> Any:
                    found = choose(*a, **kw)
                    sent["search"].append(len(found.ids))
                    return found

                def near(*a: Any, _closest: Any = closest, **kw: Any) -> Any:
                    found = _closest(*a, **kw)
                    sent["duplicate check"].append(len(found))
                    return found

                with mock.patch.object(vector_cache, "ERROR", error), \
                        mock.patch.object(vector_cache.CachedRange, "similarity", similarity), \
                        mock.patch.object(vector_cache, "candidates", chosen), \
                        mock.patch.object(vector_cache, "closest", near):
                    run: dict[str, Any] = {"variant": label, "copy_error": error, "loadavg": os.getloadavg()}
                    run["search"] = timed_searches(service, emb, callers, asks, args.checked)
                    m, u = run["search"]["member"], run["search"]["user"]
                    run["ratio_p95"] = round(m["p95"] / u["p95"], 2)
                    log(f"{label}: search member {m}, user {u}; p95 ratio {run['ratio_p95']}")
                    run["saves"] = timed_saves(service, emb, users[2], project, saves[i * per:(i + 1) * per])
                    log(f"{label}: saves into the project (DB part): {run['saves']}")
                    # rows the copy sent to the database to be measured: a search's candidates, a
                    # save's duplicate check (the cost that grows with near repeats, whatever the load)
                    run["rows_sent"] = {what: {"mean": round(float(np.mean(n)), 1), "max": int(max(n))}
                                        for what, n in sent.items() if n}
                    log(f"{label}: rows the copy sent to be measured: {run['rows_sent']}")
                report["runs"].append(run)
            if args.explain:
                report["explain"] = explain(service, emb, callers["member"], *asks["member"][0])
                print(report["explain"])
            report["loadavg_after"] = os.getloadavg()
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    return report


if __name__ == "__main__":
    main()
