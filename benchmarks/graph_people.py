"""The people the offline knowledge graph finds in LoCoMo's development conversations (issue 32).

Each conversation is loaded as ``benchmarks/locomo.py`` loads it: one user per conversation,
every turn a memory (``"[date] Speaker: text"``) through ``add_transcript``, with the knowledge
graph on and no model (the rules of :mod:`agent_memory.graph.extract`). Then:

- every conversation: are both speakers Person nodes (recall of speakers), how many Person
  nodes the graph holds, and whether two graphs that both know someone of the same name (two
  different Johns) keep two different nodes;
- with ``--annotation FILE``, the conversation annotated by hand (a JSON file of its people you
  make yourself and keep beside the data, never in this repository, since it is drawn from the
  CC BY-NC conversations: ``{"conversation": "conv-43", "expected": {name: [forms]},
  "named_once": {name: [forms]}, "not_people": [...]}``, forms in lowercase; expected are the
  speakers and everyone named twice or more):
  recall (expected people that are a Person node, by name or alias), precision (Person nodes
  that are a real person of the conversation) and duplicates (an expected person split over
  several nodes: resolution did not merge spelling variants), and for every speaker the other
  Person nodes that are a nickname or a misspelling of their name.

The data is read from ``../shared/data/locomo/`` and never copied into this repository.
Without ``--dsn`` a fresh embedded PostgreSQL is started in a temporary directory.

    python benchmarks/graph_people.py [--data PATH] [--annotation FILE] [--dsn DSN] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import DEFAULT_DATA, database, load_into, load_locomo  # noqa: E402

from agent_memory import MemoryService  # noqa: E402
from agent_memory.embeddings import LocalEmbeddings  # noqa: E402
from agent_memory.graph.extract import canonical  # noqa: E402
from agent_memory.graph.resolve import variant_of  # noqa: E402



def speakers(path: Path) -> dict[str, tuple[str, str]]:
    return {s["sample_id"]: (s["conversation"]["speaker_a"], s["conversation"]["speaker_b"])
            for s in json.loads(path.read_text(encoding="utf-8"))}


def names_of(node: Any) -> set[str]:
    return {canonical(node.name), *node.aliases}


def judge(people: list[Any], annotation: dict[str, Any]) -> dict[str, Any]:
    """Recall, precision and duplicates of ``people`` (Person nodes) against the annotation."""
    expected = {name: set(forms) for name, forms in annotation["expected"].items()}
    real = expected | {name: set(forms) for name, forms in annotation["named_once"].items()}
    found = {name: [n.name for n in people if names_of(n) & forms] for name, forms in expected.items()}
    right = [n.name for n in people if any(names_of(n) & forms for forms in real.values())]
    wrong = sorted(n.name for n in people if n.name not in right)
    hits = sum(bool(v) for v in found.values())
    return {
        "expected": len(expected), "found": hits, "recall": round(hits / len(expected), 3),
        "person_nodes": len(people), "correct_nodes": len(right),
        "precision": round(len(right) / len(people), 3) if people else None,
        "missed": sorted(k for k, v in found.items() if not v),
        "duplicated": {k: v for k, v in found.items() if len(v) > 1},
        "not_people": wrong,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--annotation", type=Path, default=None,
                    help="your hand-made list of one conversation's people (kept outside this repository)")
    ap.add_argument("--dsn", default=None, help="a scratch database (default: a temporary embedded server)")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args()
    annotation = json.loads(args.annotation.read_text(encoding="utf-8")) if args.annotation else None
    if annotation is None:
        print("no --annotation: speakers only (precision and recall need a hand-made list of one conversation)")
    convs = load_locomo(args.data)
    pairs = speakers(args.data)
    started = time.perf_counter()
    results: dict[str, Any] = {"machine": f"{platform.machine()}, {platform.python_version()}",
                               "date": time.strftime("%Y-%m-%d"), "conversations": {}}
    with database(args.dsn) as (config, suffix), \
            MemoryService(config=config.replace(knowledge_graph=True), embeddings=LocalEmbeddings()) as service:
        load_into(service, convs, suffix)
        johns: list[Any] = []
        for c in convs:
            me = service.for_user(c.user_id + suffix)
            people = [n for n in me.graph_nodes(node_type="person", limit=10_000) if not n.is_owner]
            found = [s for s in pairs[c.sample_id] if any(canonical(s) in names_of(n) for n in people)]
            # another node for a speaker: a nickname or a misspelling ("Mel", "Mell" for Melanie)
            others = {s: sorted(n.name for n in people if canonical(s) not in names_of(n)
                                and (canonical(s).startswith(canonical(n.name)) or variant_of(canonical(n.name),
                                                                                             canonical(s))))
                      for s in pairs[c.sample_id]}
            row: dict[str, Any] = {"speakers": list(pairs[c.sample_id]), "speakers_found": found,
                                   "speaker_other_nodes": {k: v for k, v in others.items() if v},
                                   "person_nodes": len(people)}
            if annotation is not None and c.sample_id == annotation["conversation"]:
                row["hand_annotated"] = judge(people, annotation)
            results["conversations"][c.sample_id] = row
            johns += [(c.sample_id, n.id) for n in people if canonical(n.name) == "john"]
            print(c.sample_id, json.dumps(row), flush=True)
        # two conversations each know a John: two graphs, two nodes, never merged
        results["same_name_across_owners"] = {"johns": len(johns), "distinct_nodes": len({i for _, i in johns})}
    speakers_all = [s for r in results["conversations"].values() for s in r["speakers"]]
    found_all = [s for r in results["conversations"].values() for s in r["speakers_found"]]
    results["speaker_recall"] = round(len(found_all) / len(speakers_all), 3)
    results["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps({k: v for k, v in results.items() if k != "conversations"}, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
