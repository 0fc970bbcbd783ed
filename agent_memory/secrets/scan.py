"""Running every rule over a text: the first kind found, every span found, the text redacted.

Rules are tried in one fixed order, from the most specific (a key block, a vendor
prefix) to the most general (a word and a random-looking value). Where two rules
claim overlapping text the earlier one wins, so each secret is reported once,
under its most precise name. Nothing here returns or logs the secret itself.

Text is also read a second way when it holds something that hides a secret's shape
(:func:`_view`): without invisible characters (a key split by a zero-width space) and
with escaped line breaks read as line breaks (a key file pasted as a JSON string,
``"-----BEGIN PRIVATE KEY-----\\nMIIE...\\n-----END PRIVATE KEY-----\\n"``). Spans found
that way are mapped back onto the text as given, so redaction replaces the secret where
it stands and keeps every other character.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import NamedTuple

import ahocorasick

from . import keywords, numbers, pairs, patterns
from .rules import Rule, Span

__all__ = ["KINDS", "Finding", "find_all_sensitive", "find_sensitive", "redact_sensitive"]

_RULES: tuple[Rule, ...] = patterns.RULES + numbers.RULES + pairs.RULES + keywords.RULES

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


#: characters that show nothing and may sit inside a secret: control characters (not tab and
#: line breaks), soft hyphen, zero-width space, joiners and marks, bidi controls, word joiner and
#: invisible operators, variation selectors, byte-order mark, tag characters
_HIDDEN = re.compile(
    "[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufe00-\ufe0f"
    "\ufeff\U000e0000-\U000e007f]+"
)
#: a line break or tab written as an escape (JSON, a string literal, once or escaped again;
#: XML, a URL)
_ESCAPE = re.compile(r"\\+(?:[nrt]|u000[aAdD9])|&#(?:1[03]|x[aAdD]);|%0[aAdD]")


def _blank_escape(m: re.Match[str]) -> str:
    """An escape as blanks of the same length, a newline last where it stood for one."""
    escape = m.group()
    newline = escape[-1] in "nNaA" or escape.endswith(("10;", "a;", "A;"))
    return " " * (len(escape) - 1) + ("\n" if newline else " ")


class _View(NamedTuple):
    """``text`` as the rules read it a second time, and where each of its pieces came from."""

    text: str
    #: where each run of kept characters starts in the view, and where it started in the original
    starts: list[int]
    origins: list[int]

    def original(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that ``view[start:end]`` was made from."""
        def at(pos: int) -> int:
            i = bisect_right(self.starts, pos) - 1
            return self.origins[i] + pos - self.starts[i]

        return at(start), at(end - 1) + 1


def _view(text: str) -> _View | None:
    """``text`` without invisible characters and with escaped line breaks as blanks and a
    line break, or None when that is ``text`` itself (the common case: nothing to do twice)."""
    hidden = _HIDDEN.search(text) is not None
    escaped = ("\\" in text or "&#" in text or "%0" in text) and _ESCAPE.search(text) is not None
    if not hidden and not escaped:
        return None
    view = _ESCAPE.sub(_blank_escape, text) if escaped else text  # same length: positions carry over
    if not hidden:
        return _View(view, [0], [0])
    starts: list[int] = []
    origins: list[int] = []
    parts: list[str] = []
    kept = last = 0
    for m in _HIDDEN.finditer(view):
        if m.start() > last:
            starts.append(kept)
            origins.append(last)
            parts.append(view[last:m.start()])
            kept += m.start() - last
        last = m.end()
    if last < len(view) or not starts:
        starts.append(kept)
        origins.append(last)
        parts.append(view[last:])
    return _View("".join(parts), starts, origins)


def find_sensitive(text: str) -> str | None:
    """The kind of the first secret found (``"a password"``, ``"an API key"``...), or None.

    Kinds are tried from most to least specific; the returned name fits in
    "content looks like it contains {kind}". The secret itself is never returned.
    """
    kind = _first_kind(text)
    if kind is None:
        view = _view(text)
        if view is not None:
            kind = _first_kind(view.text)
    return kind


def _first_kind(text: str) -> str | None:
    for rule, spans in _runs(text):
        for _ in spans:
            return rule.kind
    return None


def find_all_sensitive(text: str) -> list[Finding]:
    """Every secret in ``text`` as non-overlapping spans, in text order.

    Where two rules match overlapping text, the earlier (more specific) rule
    wins, so a JWT inside ``Bearer eyJ...`` is one finding, named a JWT. What is
    found only in the second reading (:func:`_view`) is added, and where a span of
    each reading overlap, the finding covers both.
    """
    found = _findings(text)
    view = _view(text)
    if view is None:
        return found
    more = [Finding(f.kind, *view.original(f.start, f.end)) for f in _findings(view.text)]
    merged: list[Finding] = []
    for f in sorted(found + more, key=lambda f: (f.start, -f.end)):
        if merged and f.start < merged[-1].end:
            if f.end > merged[-1].end:
                merged[-1] = merged[-1]._replace(end=f.end)
            continue
        merged.append(f)
    return merged


def _findings(text: str) -> list[Finding]:
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
