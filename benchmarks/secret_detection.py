"""Secret detection: catch rate and false positives of the detector, against detect-secrets and the old rules.

Run ``python benchmarks/secret_detection.py`` from the repository root. It prints, for each
detector, how many corpus secrets it flags (and, for ours, how many it withholds
completely) and how many harmless look-alikes it flags:

- ``agent-memory``: :func:`agent_memory.sensitive.find_sensitive`, the detector the gate uses;
- ``previous rules``: the detector as it was before the multilingual rework (read from
  git history; skipped when git or that commit is not at hand);
- ``detect-secrets``: Yelp's detect-secrets 1.5.0 plugins (vendor regexes, keyword, and
  high-entropy strings with their default limits), called in-process on the text, with no
  verification requests (skipped when it is not installed: ``pip install detect-secrets``);
- ``combined``: a text is flagged when either ours or detect-secrets flags it.

The corpus is ``tests/secrets_corpus.py``, plus 2,000 random values of each ambiguous
shape (16-digit order numbers, 13-digit EAN barcodes, NNN-NN-NNNN part numbers) in
neutral sentences. Nothing is downloaded.
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is named like the standard library's `secrets`, which `mnemonic` imports: take its
# own folder off the import path before anything else is imported.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import importlib.util  # noqa: E402
import random  # noqa: E402
import string  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from collections.abc import Callable  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from secrets_corpus import BENIGN, SECRETS, ean13  # noqa: E402

from agent_memory.sensitive import find_sensitive, redact_sensitive  # noqa: E402

#: the last commit with the single-module, English-only detector
PREVIOUS_COMMIT = "a759be1"

Detector = Callable[[str], bool]


def previous_rules() -> Detector | None:
    try:
        source = subprocess.run(
            ["git", "show", f"{PREVIOUS_COMMIT}:agent_memory/sensitive.py"],
            cwd=ROOT, capture_output=True, text=True, check=True, timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    module = types.ModuleType("previous_sensitive")
    exec(compile(source, "previous_sensitive.py", "exec"), module.__dict__)  # our own code, from our history
    return lambda text: module.find_sensitive(text) is not None


def detect_secrets() -> Detector | None:
    if importlib.util.find_spec("detect_secrets") is None:
        return None
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin

    plugins = [cls() for cls in get_mapping_from_secret_type_to_class().values()]
    plugins = [p for p in plugins if type(p).__name__ != "IPPublicDetector"]  # an address is not a secret

    def flagged(text: str) -> bool:
        for plugin in plugins:
            if isinstance(plugin, HighEntropyStringsPlugin):
                # ad-hoc string scanning, as `detect-secrets scan --string` does: quotes not required
                with plugin.non_quoted_string_regex(is_exact_match=False):
                    found = [s for s in plugin.analyze_string(text)
                             if plugin.calculate_shannon_entropy(s) > plugin.entropy_limit]
            else:
                found = list(plugin.analyze_string(text))
            if found:
                return True
        return False

    return flagged


def random_look_alikes(n: int = 2000) -> dict[str, list[str]]:
    rng = random.Random(1234)
    neutral = ["The number {} came up twice in the report.", "{} is what they wrote on the form.",
               "Please check {} again tomorrow.", "It says {} on the label."]

    def digits(k: int) -> str:
        return rng.choice("123456789") + "".join(rng.choice(string.digits) for _ in range(k - 1))

    def part() -> str:
        return f"{rng.randrange(100, 1000)}-{rng.randrange(10, 100)}-{rng.randrange(1000, 10000)}"

    return {
        "16-digit order numbers": [rng.choice(neutral).format(digits(16)) for _ in range(n)],
        "13-digit EAN barcodes": [rng.choice(neutral).format(ean13(rng)) for _ in range(n)],
        "NNN-NN-NNNN part numbers": [rng.choice(neutral).format(part()) for _ in range(n)],
    }


def rate(detector: Detector, texts: list[str]) -> tuple[int, float]:
    hits = sum(1 for t in texts if detector(t))
    return hits, hits / len(texts)


def main() -> None:
    ours: Detector = lambda text: find_sensitive(text) is not None  # noqa: E731
    detectors: dict[str, Detector | None] = {
        "agent-memory": ours,
        "previous rules": previous_rules(),
        "detect-secrets": detect_secrets(),
    }
    theirs = detectors["detect-secrets"]
    if theirs is not None:
        detectors["combined"] = lambda text: ours(text) or theirs(text)

    secrets = [s.text for s in SECRETS]
    looks = random_look_alikes()
    print(f"corpus: {len(SECRETS)} secrets of {len({s.kind for s in SECRETS})} kinds, {len(BENIGN)} benign "
          f"look-alikes, {' / '.join(f'{len(v)} {k}' for k, v in looks.items())}\n")
    header = f"{'detector':16} {'secrets caught':>16} {'benign flagged':>16}" + "".join(
        f" {k.split()[0] + ' ' + k.split()[1]:>18}" for k in looks)
    print(header)
    for name, detector in detectors.items():
        if detector is None:
            print(f"{name:16} (not available)")
            continue
        caught, caught_rate = rate(detector, secrets)
        fp, fp_rate = rate(detector, BENIGN)
        row = f"{name:16} {caught:5} ({caught_rate:6.1%}) {fp:5} ({fp_rate:6.1%})"
        for texts in looks.values():
            hits, r = rate(detector, texts)
            row += f" {hits:7} ({r:6.2%})"
        print(row)

    withheld = sum(1 for s in SECRETS if s.secret not in redact_sensitive(s.text)[0])
    print(f"\nagent-memory withholds the secret completely in {withheld} of {len(SECRETS)} texts")
    missed = sorted({s.kind for s in SECRETS if find_sensitive(s.text) is None})
    if missed:
        print("kinds missed:", ", ".join(missed))

    document = "\n".join((BENIGN * 40)[:2500] + secrets)
    document = (document * (1_000_000 // len(document) + 1))[:1_000_000]
    start = time.perf_counter()
    redact_sensitive(document)
    print(f"1 MB document of look-alikes and secrets redacted in {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
