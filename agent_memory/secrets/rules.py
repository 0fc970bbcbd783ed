"""What a detection rule is, and the three ways rules are built.

A rule has a kind and a ``find`` function that yields ``(start, end)`` spans of
the secret *value* (after "password is", inside ``AccountKey=...;``), so that
redaction keeps the words around it.

The detector runs on every save and on whole documents, so no rule reads a
long text character by character in Python, and no rule runs a big
alternation over all of it. Rules come in three forms:

- :func:`regex_rule`: one pattern over the whole text, for patterns that start
  with a literal or a digit (which the regex engine skips to quickly);
- :func:`anchored_rule`: literal *anchors* (a vendor prefix such as ``ghp_``)
  are found first, all rules' anchors in one pass by :mod:`.scan`, and the
  pattern is only matched where an anchor is;
- keyword rules (:mod:`.keywords`) are anchored too, on the stems of their words.

``find(text, low, anchors)`` gets the text, its lower-case form (same length) and
the positions of the rule's anchors (empty for a :func:`regex_rule`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

__all__ = ["Finder", "Rule", "Span", "anchored_rule", "regex_rule"]

Span = tuple[int, int]
Finder = Callable[[str, str, Sequence[int]], Iterator[Span]]


class Rule(NamedTuple):
    kind: str
    find: Finder
    #: literal anchors; the rule runs only where one is (lower-case unless ``case_sensitive``)
    anchors: tuple[str, ...] = ()
    case_sensitive: bool = False
    #: lower-case substrings the text must contain for a :func:`regex_rule` to run at all
    hints: tuple[str, ...] = ()


def _span(m: re.Match[str], has_value: bool) -> Span:
    return m.span("value") if has_value and m.group("value") else m.span()


def regex_rule(
    kind: str,
    pattern: str,
    check: Callable[[re.Match[str]], bool] | None = None,
    *,
    hints: tuple[str, ...] = (),
    left: str | None = None,
    flags: int = 0,
) -> Rule:
    """A rule from one pattern run over the whole text.

    ``left`` is a character class that must not come just before the match (a
    token boundary kept out of the pattern so that it starts with a literal).
    """
    compiled = re.compile(pattern, flags)
    before = re.compile(left) if left else None
    has_value = "value" in compiled.groupindex

    def find(text: str, low: str, anchors: Sequence[int]) -> Iterator[Span]:
        for m in compiled.finditer(text):
            if before is not None and m.start() and before.match(text, m.start() - 1):
                continue
            if check is None or check(m):
                yield _span(m, has_value)

    return Rule(kind, find, hints=hints)


def anchored_rule(
    kind: str,
    variants: Sequence[tuple[str, int, str]],
    check: Callable[[re.Match[str]], bool] | None = None,
    *,
    left: str | None = r"[A-Za-z0-9_-]",
    case_sensitive: bool = True,
    flags: int = 0,
) -> Rule:
    """A rule from ``(anchor, offset, pattern)`` variants.

    ``pattern`` must match starting ``offset`` characters before where the anchor was found.
    """
    table: dict[str, list[tuple[int, re.Pattern[str]]]] = {}
    for anchor, offset, pattern in variants:
        key = anchor if case_sensitive else anchor.lower()
        table.setdefault(key, []).append((offset, re.compile(pattern, flags)))
    before = re.compile(left) if left else None
    lengths = sorted({len(a) for a in table})

    def find(text: str, low: str, anchors: Sequence[int]) -> Iterator[Span]:
        source = text if case_sensitive else low
        done = -1
        for p in anchors:
            for n in lengths:
                for offset, compiled in table.get(source[p:p + n], ()):
                    start = p - offset
                    if start < 0 or start < done:
                        continue
                    if before is not None and start and before.match(text, start - 1):
                        continue
                    m = compiled.match(text, start)
                    if m and (check is None or check(m)):
                        has_value = "value" in compiled.groupindex
                        span = _span(m, has_value)
                        done = m.end()
                        yield span
                        break

    return Rule(kind, find, tuple(table), case_sensitive)
