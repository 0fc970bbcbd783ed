"""Which memories reach the prompt: the per-turn decision and the relevance floor, on labelled turns.

    python benchmarks/relevance.py [--dsn DSN] [--json OUT]

Data: ``benchmarks/data/relevance_turns.jsonl`` (written for this benchmark): eight people with
8-16 stored memories each (user, project, team and org levels; several domains: coding, food
and fitness, family and travel, work and writing, money and study, data science, gardening,
on-call), and 288 turns, each labelled with whether it needs a stored memory and which of that
person's memories are relevant to it (the others must stay out). Splits: ``dev`` (four people,
152 turns; the rules were written and the floor chosen on it), ``heldout`` (two people, 76
turns; written with ``dev``, but the rules were revised once after looking at errors on both,
so it is not blind for the rules; it is for the floor), ``fresh`` (two people, 60 turns,
written after the rules were frozen and looked at once).

Every turn is searched once with the real local embedding model and the real database (k=6,
no floor), and its decision taken as the middleware takes it (:func:`agent_memory.relevance.needs_memory`,
revised by :func:`agent_memory.relevance.grounded` on what the user's memories know); the floor
and the relative cut are then swept over those hits (``--sweep``, on ``dev``), and the shipped
defaults are measured through the real :class:`~agent_memory.middleware.context.ContextBuilder`
(what the middleware injects, conflict groups included).

Figures, per split:

* generic clean: the share of turns that need no memory which get no memory item (target >= 0.95);
* need served: the share of turns that need a memory which get at least one relevant one (>= 0.95);
* "memory injected" precision / recall: a turn that got any memory item, against "needs memory";
* "relevant memory injected" precision / recall: the injected items that are relevant, and the
  relevant items that were injected.

Without ``--dsn`` a fresh embedded PostgreSQL is started in a temporary directory and removed
at the end. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from agent_memory import MemoryConfig, MemoryService
from agent_memory.embeddings import LocalEmbeddings
from agent_memory.middleware import MemoryBackend
from agent_memory.middleware.context import ContextBuilder, build_query, user_turns
from agent_memory.models import Identity, MemoryItem
from agent_memory.relevance import keep_relevant, needs_memory, relevance

DATA = Path(__file__).resolve().parent / "data" / "relevance_turns.jsonl"
SPLITS = ("dev", "heldout", "fresh", "blind", "blind2")
K = 6
FLOORS = [round(0.025 * i, 3) for i in range(0, 25)]
RELATIVES = (0.0, 0.5, 0.6, 0.7, 0.8)  # a cut relative to the best hit's relevance (not shipped: it loses turns)
TARGET = 0.95


@dataclass
class Turn:
    id: str
    split: str
    persona: str
    turn: str
    previous: list[str]
    needs: bool
    relevant: set[str]
    decided: bool = False  # the shipped decision: the rules, revised by what the user's memories know
    rules: bool = False  # the text rules alone (needs_memory), as shipped before the memory check
    hits: list[tuple[str, float]] = field(default_factory=list)  # (memory key, relevance), best first
    shipped: list[str] = field(default_factory=list)  # keys the middleware would inject with the defaults


def load(path: Path = DATA) -> tuple[dict[str, Any], list[Turn]]:
    personas: dict[str, Any] = {}
    turns: list[Turn] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["kind"] == "persona":
            personas[row["persona"]] = row
        else:
            turns.append(Turn(row["id"], row["split"], row["persona"], row["turn"], row["previous"],
                              row["needs_memory"], set(row["relevant"])))
    return personas, turns


def messages_of(turn: Turn) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for i, text in enumerate(turn.previous):
        out += [HumanMessage(text, id=f"{turn.id}-u{i}"), AIMessage("Sure, here it is.", id=f"{turn.id}-a{i}")]
    return [*out, HumanMessage(turn.turn, id=f"{turn.id}-u")]


def store(memory: MemoryService, personas: dict[str, Any], tag: str) -> tuple[dict[str, Identity], dict[str, str]]:
    """Each persona's memories at their levels; -> identity per persona, memory key per memory id."""
    identities: dict[str, Identity] = {}
    keys: dict[str, str] = {}
    for name, persona in personas.items():
        user = f"{name}-{tag}"
        levels = {m["scope"] for m in persona["memories"]}
        ident = Identity(user_id=user, project_id=f"{name}-proj-{tag}" if "project" in levels else None,
                         session_id=f"{name}-s-{tag}")
        if "team" in levels:
            memory.create_team(f"{name}-team-{tag}", user_id=user)
        if "org" in levels:
            memory.create_org(f"{name}-org-{tag}", user_id=user)
        if ident.project_id:
            memory.create_project(ident.project_id, user_id=user)
        identities[name] = ident
        for m in persona["memories"]:
            extra = {"team": {"team_id": f"{name}-team-{tag}"}, "org": {"org_id": f"{name}-org-{tag}"}}.get(m["scope"], {})
            handle = memory.for_user(**{**ident.kwargs(), **extra})
            saved = handle.add(m["content"], scope=m["scope"], memory_type=m["memory_type"], confidence=0.9)
            if not isinstance(saved, MemoryItem):
                raise SystemExit(f"the gate refused {m['key']} ({m['content']!r}): {saved}")
            keys[str(saved.id)] = m["key"]
    return identities, keys


def measure(memory: MemoryService, turns: list[Turn], identities: dict[str, Identity], keys: dict[str, str]) -> None:
    """Each turn's decision and raw hits (no floor), and what the shipped defaults inject."""
    kw = memory.config.keyword_weight
    builder = ContextBuilder(MemoryBackend(memory), k=K, profiles=False)
    for t in turns:
        msgs = messages_of(t)
        t.rules = needs_memory(*user_turns(msgs)).needed
        query = build_query(msgs)
        assert query is not None
        results = memory.for_user(**identities[t.persona].kwargs()).search(query, k=K, min_relevance=0.0)
        t.hits = [(keys[str(r.id)], relevance(r, kw)) for r in results]
        context = builder.build(identities[t.persona], msgs)
        assert context is not None
        t.shipped = [keys[i] for i in context.memory_ids]
        assert context.decision is not None
        t.decided = context.decision.needed  # the rules, revised by what the user's memories know


def injected(t: Turn, *, gate: bool, floor: float, relative: float, text_rules: bool = False,
             best: bool = True) -> list[str]:
    """What a setting injects: nothing when the decision (``text_rules``: the rules alone) says
    no; else the hits over the floor (``best``: at least the most relevant one, as shipped)."""
    if gate and not (t.rules if text_rules else t.decided):
        return []
    keep = [h for h in t.hits if h[1] >= floor]
    if not keep and gate and best and t.hits:
        keep = [max(t.hits, key=lambda h: h[1])]
    if keep and relative:
        best = max(s for _, s in keep)
        keep = [h for h in keep if h[1] >= relative * best]
    return [k for k, _ in keep]


def scores(turns: Iterable[Turn], shown: Any) -> dict[str, float]:
    """The figures of the module docstring for ``shown(turn) -> injected keys``."""
    generic = need = clean = served = any_inj = any_inj_need = items = rel_items = rel_total = rel_found = 0
    for t in turns:
        got = shown(t)
        hit = [k for k in got if k in t.relevant]
        items += len(got)
        rel_items += len(hit)
        if got:
            any_inj += 1
            any_inj_need += t.needs
        if t.needs:
            need += 1
            served += bool(hit)
            rel_total += len(t.relevant)
            rel_found += len(set(hit))
        else:
            generic += 1
            clean += not got
    ratio = lambda a, b: a / b if b else float("nan")  # noqa: E731
    return {"turns": need + generic, "generic_clean": ratio(clean, generic), "need_served": ratio(served, need),
            "injected_precision": ratio(any_inj_need, any_inj), "injected_recall": ratio(any_inj_need, need),
            "relevant_precision": ratio(rel_items, items), "relevant_recall": ratio(rel_found, rel_total),
            "items_per_turn": ratio(items, need + generic)}


def sweep(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    rows = []
    for floor in FLOORS:
        for relative in RELATIVES:
            s = scores(turns, lambda t, f=floor, r=relative: injected(t, gate=True, floor=f, relative=r))
            rows.append({"floor": floor, "relative": relative, **s})
    return rows


def choose(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The cell meeting both targets with the best precision of relevant memory; ties to the lower floor."""
    ok = [r for r in rows if r["generic_clean"] >= TARGET and r["need_served"] >= TARGET]
    return max(ok, key=lambda r: (round(r["relevant_precision"], 3), -r["floor"], -r["relative"])) if ok else None


def _table(title: str, lines: list[tuple[str, dict[str, float]]]) -> str:
    head = ("| setting | turns | generic turns with no memory | turns needing memory that get it | "
            "\"memory injected\" P / R | \"relevant memory injected\" P / R | items per turn |")
    out = [f"**{title}**", "", head, "|---|---:|---:|---:|---|---|---:|"]
    for name, s in lines:
        out.append(f"| {name} | {s['turns']} | {s['generic_clean']:.3f} | {s['need_served']:.3f} | "
                   f"{s['injected_precision']:.3f} / {s['injected_recall']:.3f} | "
                   f"{s['relevant_precision']:.3f} / {s['relevant_recall']:.3f} | {s['items_per_turn']:.2f} |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", help="a PostgreSQL with pgvector (default: a fresh embedded server)")
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--splits", default=",".join(SPLITS), help="the splits to score (default: all)")
    args = parser.parse_args(argv)
    personas, turns = load()
    chosen = [s for s in args.splits.split(",") if s]
    personas = {n: p for n, p in personas.items() if p["split"] in chosen}
    turns = [t for t in turns if t.split in chosen]
    base = server = None
    dsn = args.dsn
    if dsn is None:
        from agent_memory.db.embedded import ensure_embedded_server

        base = Path(tempfile.mkdtemp(prefix="relevance-bench-"))
        server = ensure_embedded_server(base / "data")
        dsn = server.dsn("postgres")
    try:
        config = MemoryConfig.defaults(database_url=dsn)
        with MemoryService(dsn, config=config, embeddings=LocalEmbeddings()) as memory:
            identities, keys = store(memory, personas, uuid.uuid4().hex[:8])
            measure(memory, turns, identities, keys)
    finally:
        if server is not None:
            server.stop()
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)
    by_split = {s: [t for t in turns if t.split == s] for s in SPLITS if s in chosen}
    grid = sweep(by_split["dev"])
    best = choose(grid)
    report: dict[str, Any] = {
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "defaults": {"inject_when": config.inject_when, "inject_min_relevance": config.inject_min_relevance},
        "dev_choice": best, "splits": {},
    }
    settings = [
        ("before (every turn, no floor)", lambda t: injected(t, gate=False, floor=0.0, relative=0.0)),
        (f"before this revision: text rules + floor {config.inject_min_relevance}",
         lambda t: injected(t, gate=True, floor=config.inject_min_relevance, relative=0.0, text_rules=True,
                            best=False)),
        ("decision only (no floor)", lambda t: injected(t, gate=True, floor=0.0, relative=0.0)),
        (f"floor only ({config.inject_min_relevance}, every turn)",
         lambda t: injected(t, gate=False, floor=config.inject_min_relevance, relative=0.0)),
        (f"floor {config.inject_min_relevance} + x0.6 of the best (not shipped)",
         lambda t: injected(t, gate=True, floor=config.inject_min_relevance, relative=0.6)),
        ("shipped defaults (decision + floor)", lambda t: t.shipped),
    ]
    for split, group in by_split.items():
        lines = [(name, scores(group, fn)) for name, fn in settings]
        report["splits"][split] = dict(lines)
        print(_table(f"{split} ({len(group)} turns)", lines), end="\n\n")
    print("dev choice:", best)
    print("misses (shipped):")
    for t in turns:
        hit = set(t.shipped) & t.relevant
        if (t.needs and not hit) or (not t.needs and t.shipped):
            print(f"  {t.split:8} {t.id} needs={t.needs} decided={t.decided} {t.turn!r} got={t.shipped} "
                  f"want={sorted(t.relevant)} hits={[(k, round(s, 3)) for k, s in t.hits[:3]]}")
    if args.json:
        report["sweep_dev"] = grid
        report["turns"] = [{"id": t.id, "split": t.split, "needs": t.needs, "decided": t.decided, "rules": t.rules,
                            "relevant": sorted(t.relevant), "hits": t.hits, "shipped": t.shipped} for t in turns]
        args.json.write_text(json.dumps(report, indent=2, default=str))
    return report


if __name__ == "__main__":
    main()
