"""The offline rules' exact-meaning accuracy on a labelled set of first-person sentences.

Run ``python benchmarks/rules_accuracy.py`` from the repository root. The set is
``benchmarks/data/rules_sentences.jsonl``: one sentence a line, written by hand, each with the
memory a careful reader would keep (``expected``: one wording, a list of acceptable wordings, or
null for "nothing lasting": questions, hypotheticals, small talk) and its level (``scope``). A
sentence counts as right when the rules give nothing and nothing was expected, or exactly one
memory whose wording is one of the expected ones and whose level is the expected one. ``split``
says ``dev`` (written before the rules were fixed, and used to fix them) or ``heldout`` (written
after the fixes and never used to change them): the held-out figure is the honest one.

It prints a table for the rules as they are and, read from git history, as they were before
issue 31 (skipped when git or that commit is not at hand); ``--misses`` lists every sentence the
current rules get wrong. Pure: no database, no model, nothing downloaded.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data" / "rules_sentences.jsonl"
#: the last commit with the rules as they were before issue 31
PREVIOUS_COMMIT = "6d18071"

Rules = Callable[[str], Sequence[Any]]


def load(path: Path = DATA) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def previous_rules() -> Rules | None:
    """``statements_in`` as it was at :data:`PREVIOUS_COMMIT` (imported as a sibling of the
    current rules, so its relative imports resolve)."""
    try:
        source = subprocess.run(
            ["git", "show", f"{PREVIOUS_COMMIT}:agent_memory/extraction/rules.py"],
            cwd=ROOT, capture_output=True, text=True, check=True, timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    name = "agent_memory.extraction._rules_before_issue_31"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "agent_memory.extraction"
    sys.modules[name] = module
    exec(compile(source, "rules_before_issue_31.py", "exec"), module.__dict__)  # our own code, from our history
    return module.statements_in  # type: ignore[no-any-return]


def _norm(text: str) -> str:
    return " ".join(text.split()).rstrip(".").strip()


def right(row: dict[str, Any], found: Sequence[Any]) -> bool:
    """Whether ``found`` (what the rules made of ``row["said"]``) is the labelled memory."""
    expected = row["expected"]
    if expected is None:
        return not found
    wordings = [expected] if isinstance(expected, str) else expected
    return (len(found) == 1 and _norm(found[0].content) in {_norm(w) for w in wordings}
            and found[0].scope == row["scope"])


def score(rules: Rules, rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], tuple[int, int]]:
    """(split, kind) -> (right, total), with ``all`` rows for each split and overall."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        ok = right(row, rules(row["said"]))
        for key in ((row["split"], row["kind"]), (row["split"], "all"), ("all", "all")):
            counts[key][0] += ok
            counts[key][1] += 1
    return {k: (v[0], v[1]) for k, v in counts.items()}


def table(results: dict[str, dict[tuple[str, str], tuple[int, int]]]) -> str:
    keys = sorted({k for r in results.values() for k in r}, key=lambda k: (k[0] == "all", k[0], k[1] == "all", k[1]))
    lines = ["| split | kind | sentences | " + " | ".join(results) + " |",
             "|---|---|---:|" + "---:|" * len(results)]
    for key in keys:
        total = next(r[key][1] for r in results.values() if key in r)
        cells = [f"{r[key][0] / r[key][1]:.1%} ({r[key][0]})" if key in r else "-" for r in results.values()]
        name = [f"**{part}**" if part == "all" else part for part in key]
        lines.append(f"| {name[0]} | {name[1]} | {total} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list the sentences the current rules get wrong")
    args = parser.parse_args(argv)
    from agent_memory.extraction.rules import statements_in

    rows = load()
    results = {}
    if (before := previous_rules()) is not None:
        results["before (6d18071)"] = score(before, rows)
    results["now"] = score(statements_in, rows)
    print(table(results))
    if args.misses:
        for row in rows:
            found = statements_in(row["said"])
            if not right(row, found):
                got = [(s.content, s.scope) for s in found]
                print(f"[{row['split']}/{row['kind']}] {row['said']!r}\n   expected {row['expected']!r} "
                      f"({row['scope']})\n   got      {got}")


if __name__ == "__main__":
    main()
