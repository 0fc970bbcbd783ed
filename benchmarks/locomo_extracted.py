"""LoCoMo with extracted memories (issue 29): what a memory's context does for memories the
extraction pipeline wrote, not for raw turns.

Each LoCoMo conversation is read session by session through the public ``extract`` call with the
offline rules (``llm=None``; no model, nothing downloaded), as an agent's conversation would be:
the rules keep the turns' explicit statements ("I'm taking the dog to the vet") as
stand-alone memories ("Is taking the dog to the vet"), each keeping as its context the text
it was read from. A question is then searched (``search``, k = 20) under each ranking setting, and
a hit counts as the turn it was extracted from (the turn of its session whose text holds the
memory's context): Recall@k and MRR over the question's evidence turns, as ``locomo.py`` scores
raw turns. A question whose evidence turns yielded no memory cannot be answered here; the
``reachable`` line says how many can.

    python benchmarks/locomo_extracted.py [--data PATH] [--settings W:K,W:K,...] [--dsn DSN] [--json OUT]

``--settings``: ``context_weight:context_keyword_weight`` pairs to compare (``0:0`` ranks as if
the memories kept no context). The data is CC BY-NC: it is read from ``../shared/data/locomo/``
and never copied into this repository.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import locomo
from locomo import OVERALL, Conversation, Outcome, format_table, score, summarize

from agent_memory import MemoryConfig, MemoryService
from agent_memory.embeddings import LocalEmbeddings


def session_of(dia_id: str) -> str:
    return dia_id.split(":")[0]


def extract_all(service: MemoryService, convs: Sequence[Conversation], suffix: str) -> dict[str, Any]:
    """Extract every conversation, one ``extract`` call per LoCoMo session (its own session id), and
    map each memory to the turn it came from; returns ``{"source": {memory id: dia_id}, ...counts}``."""
    source: dict[Any, str] = {}
    memories = unmatched = 0
    for c in convs:
        by_session: dict[str, list[tuple[str, str]]] = {}
        for dia_id, content in c.turns:
            by_session.setdefault(session_of(dia_id), []).append((dia_id, content))
        for s, turns in by_session.items():
            h = service.for_user(c.user_id + suffix, session_id=f"{c.sample_id}-{s}")
            h.extract([{"role": "user", "content": content} for _, content in turns], llm=None)
        for item in service.for_user(c.user_id + suffix).list(limit=10_000):
            memories += 1
            context = (item.context or "").strip()
            found = next((d for d, content in c.turns if context and context in content), None)
            if found is None:
                unmatched += 1
            else:
                source[item.id] = found
    return {"source": source, "memories": memories, "unmatched": unmatched}


def evaluate(service: MemoryService, convs: Sequence[Conversation], suffix: str,
             source: dict[Any, str]) -> list[Outcome]:
    outcomes = []
    for c in convs:
        h = service.for_user(c.user_id + suffix)
        for q in c.questions:
            seen: list[str] = []
            for hit in h.search(q.text, k=locomo.SEARCH_K):
                d = source.get(hit.item.id)
                if d is not None and d not in seen:
                    seen.append(d)
            outcomes.append(Outcome(c.sample_id, q.index, q.category, q.evidence, tuple(seen)))
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA, help="locomo JSON (default: %(default)s)")
    p.add_argument("--settings", default="0:0,0.7:0", metavar="W:K,...",
                   help="context_weight:context_keyword_weight pairs (default: %(default)s)")
    p.add_argument("--limit-conversations", type=int, default=None, metavar="N")
    p.add_argument("--dsn", default=None, help="PostgreSQL URL (default: a temporary embedded server)")
    p.add_argument("--json", type=Path, default=None, metavar="OUT")
    args = p.parse_args(argv)
    data = args.data.expanduser().resolve()
    if not data.is_file():
        sys.exit(f"error: LoCoMo data not found at {data}; pass --data PATH to locomo-dev.json")
    settings = [tuple(float(x) for x in part.split(":")) for part in args.settings.split(",")]
    convs = locomo.load_locomo(data, args.limit_conversations)
    embeddings = LocalEmbeddings()
    report: dict[str, Any] = {"command": locomo.command_line(), "machine": locomo.machine_info(),
                              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                              "conversations": [c.sample_id for c in convs], "settings": {}}
    with locomo.database(args.dsn) as (base, suffix):
        config = base.replace(max_extractions=1_000_000)
        t0 = time.perf_counter()
        with MemoryService(config=config, embeddings=embeddings) as service:
            found = extract_all(service, convs, suffix)
        report["extract_seconds"] = round(time.perf_counter() - t0, 1)
        source = found["source"]
        reachable = [q for c in convs for q in c.questions if q.category in OVERALL
                     and q.evidence & set(source.values())]
        total = sum(1 for c in convs for q in c.questions if q.category in OVERALL)
        report.update(memories=found["memories"], unmatched=found["unmatched"], turns_with_memories=len(set(source.values())),
                      turns=sum(len(c.turns) for c in convs), reachable=len(reachable), questions=total)
        for w, kw in settings:
            with MemoryService(config=config.replace(context_weight=w, context_keyword_weight=kw),
                               embeddings=embeddings) as service:
                outcomes = evaluate(service, convs, suffix, source)
            name = f"{w:g}:{kw:g}"
            reach = [o for o in outcomes if o.category in OVERALL and o.evidence & set(source.values())]
            report["settings"][name] = {"all": score(outcomes), "reachable": summarize(reach)}
            print(f"context {name}: R@10 {score(outcomes)['overall']['R@10']:.3f} (reachable questions:"
                  f" {summarize(reach)['R@10']:.3f})", flush=True)
    print(f"LoCoMo, extracted memories (offline rules): {len(convs)} conversations, {report['turns']} turns, "
          f"{report['memories']} memories from {report['turns_with_memories']} turns ({report['unmatched']} not"
          f" traced to a turn), {report['reachable']} of {report['questions']} questions (categories 1-4) have"
          f" an evidence turn that yielded a memory; extraction {report['extract_seconds']} s")
    for name, r in report["settings"].items():
        print(f"\ncontext_weight:context_keyword_weight {name}, every question:")
        print(format_table(r["all"]))
        s = r["reachable"]
        print(f"reachable questions only (n={int(s['n'])}): R@5 {s['R@5']:.3f} R@10 {s['R@10']:.3f}"
              f" R@20 {s['R@20']:.3f} MRR {s['MRR']:.3f}")
    print(f"command: {report['command']}\ndate: {report['date']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
