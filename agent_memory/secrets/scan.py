"""Running every rule over a text: the first kind found, every span found, the text redacted.

Rules are tried in one fixed order, from the most specific (a key block, a vendor
prefix) to the most general (a word and a random-looking value). Where two rules
claim overlapping text the earlier one wins, so each secret is reported once,
under its most precise name. Nothing here returns or logs the secret itself.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterator
from typing import NamedTuple

import ahocorasick

from . import keywords, numbers, patterns
from .rules import Rule, Span

__all__ = ["KINDS", "Finding", "find_all_sensitive", "find_sensitive", "redact_sensitive"]

_RULES: tuple[Rule, ...] = patterns.RULES + numbers.RULES + keywords.RULES

#: Every kind :func:`find_sensitive` can return, in the order they are tried.
KINDS: tuple[str, ...] = tuple(dict.fromkeys(rule.kind for rule in _RULES))


class Finding(NamedTuple):
    """One secret found in a text: its kind and the span ``text[start:end]`` that holds it."""

    kind: str
    start: int
    end: int


def _automaton(case_sensitive: bool) -> ahocorasick.Automaton | None:
    """One Aho-Corasick automaton for every rule's anchors: anchor -> (length, indexes of the rules it serves).

    All anchors are found in one pass over the text, however many there are.
    """
    index: dict[str, list[int]] = {}
    for i, rule in enumerate(_RULES):
        if rule.case_sensitive == case_sensitive:
            for anchor in rule.anchors:
                index.setdefault(anchor, []).append(i)
    if not index:
        return None
    automaton = ahocorasick.Automaton()
    for anchor, rules in index.items():
        automaton.add_word(anchor, (len(anchor), tuple(rules)))
    automaton.make_automaton()
    return automaton


_LOWER_ANCHORS = _automaton(False)
_CASE_ANCHORS = _automaton(True)


def _lower(text: str) -> str:
    """``text`` in lower case, with the same length (so positions carry over)."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


_WITHHELD = re.compile(r"\[withheld: [^\]\n]{1,80}\]")


def _runs(text: str) -> Iterator[tuple[Rule, Iterator[Span]]]:
    """Each rule that can match ``text``, in order, with the iterator of its spans.

    Markers left by an earlier redaction (``[withheld: a password]``) are blanked
    first, so redacting twice changes nothing and a marker is never read as a value.
    """
    if "[withheld: " in text:
        text = _WITHHELD.sub(lambda m: "\n" * len(m.group()), text)
    low = _lower(text)
    positions: dict[int, list[int]] = {}
    for automaton, source in ((_LOWER_ANCHORS, low), (_CASE_ANCHORS, text)):
        if automaton is None:
            continue
        for end, (length, rules) in automaton.iter(source):
            for i in rules:
                positions.setdefault(i, []).append(end - length + 1)
    for i, rule in enumerate(_RULES):
        if rule.anchors:
            found = positions.get(i)
            if found:
                yield rule, rule.find(text, low, found)
        elif not rule.hints or any(h in low for h in rule.hints):
            yield rule, rule.find(text, low, ())


def find_sensitive(text: str) -> str | None:
    """The kind of the first secret found (``"a password"``, ``"an API key"``...), or None.

    Kinds are tried from most to least specific; the returned name fits in
    "content looks like it contains {kind}". The secret itself is never returned.
    """
    for rule, spans in _runs(text):
        for _ in spans:
            return rule.kind
    return None


def find_all_sensitive(text: str) -> list[Finding]:
    """Every secret in ``text`` as non-overlapping spans, in text order.

    Where two rules match overlapping text, the earlier (more specific) rule
    wins, so a JWT inside ``Bearer eyJ...`` is one finding, named a JWT.
    """
    starts: list[int] = []  # sorted, non-overlapping: starts[i] goes with found[i]
    found: list[Finding] = []
    for rule, spans in _runs(text):
        for start, end in spans:
            i = bisect_left(starts, start)
            if end <= start or (i < len(found) and found[i].start < end) or (i and found[i - 1].end > start):
                continue
            starts.insert(i, start)
            found.insert(i, Finding(rule.kind, start, end))
    return found


def redact_sensitive(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` with every secret span replaced by ``[withheld: <kind>]``, and the kinds replaced.

    For documents and transcripts, where refusing the whole text would lose
    everything else in it: the rest is kept as it was.
    """
    findings = find_all_sensitive(text)
    if not findings:
        return text, ()
    parts: list[str] = []
    last = 0
    for f in findings:
        parts.append(text[last:f.start])
        parts.append(f"[withheld: {f.kind}]")
        last = f.end
    parts.append(text[last:])
    return "".join(parts), tuple(f.kind for f in findings)
