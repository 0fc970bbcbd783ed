"""Cutting a document into passages: pure, markdown-aware, any length.

A passage is a span of the document (``text == document[start:end]``) that carries where it
is: its ``index`` in the document, its character range and the headings above it
(``("Guide", "Install")``). The cut follows the document's own structure:

- a markdown heading (``#`` to ``######``) starts a new section, and every passage of the
  section carries the path of headings down to it; plain text is one section;
- blocks are paragraphs (lines up to a blank line) and fenced code (```` ``` ```` or ``~~~``
  up to its closing fence); a code block is kept whole when it fits ``max_chars``, and cut at
  line ends otherwise; a paragraph that does not fit is cut at sentence ends, then at spaces;
- blocks of one section are packed into passages of at most ``max_chars`` (plus the heading
  line, which always goes with what follows it); a passage that
  continues a section repeats up to ``overlap`` characters of the one before it (from a word
  boundary), so a sentence cut by the boundary is read whole once;
- a tiny section (less than ``min_section_chars`` of text under its heading: a heading with a
  short line, or none) is no passage of its own: consecutive tiny sections share passages of up
  to ``max_chars``, under the headings they have in common, and headings with nothing under them
  just before a larger section go with it. A file of 10,000 one-line sections is some 70
  passages, not 10,000 (each one embedded, stored and read).

Nothing here looks for secrets: the text passed in is already redacted (see
:func:`agent_memory.documents.learn.add_document`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_CHARS", "DEFAULT_OVERLAP", "MIN_SECTION_CHARS", "Passage", "chunk_document", "embedding_text"]

#: passage size: a few paragraphs, small enough for one embedding to stand for it
DEFAULT_MAX_CHARS = 1500
#: how much of the previous passage of a section a passage repeats
DEFAULT_OVERLAP = 150
#: a section with less text than this under its heading (a short line) shares a passage with its
#: tiny neighbours: one embedding for a few words says little, and costs as much as a full passage
MIN_SECTION_CHARS = 32

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class Passage:
    """One span of a document: ``text`` is ``document[start:end]``; ``headings`` the path of
    markdown headings above it, outermost first (empty before the first heading)."""

    index: int
    start: int
    end: int
    headings: tuple[str, ...]
    text: str

    @property
    def hash(self) -> str:
        """What identifies the passage across versions of its document: its text and headings
        (its position may move when text before it changes)."""
        return hashlib.sha256("\x1f".join((*self.headings, self.text)).encode("utf-8")).hexdigest()

    @property
    def position(self) -> dict[str, object]:
        """The passage's place, as a memory made from it keeps it in its metadata."""
        return {"index": self.index, "start": self.start, "end": self.end, "headings": list(self.headings),
                "hash": self.hash}


@dataclass(frozen=True, slots=True)
class _Block:
    start: int
    end: int
    code: bool = False
    heading: bool = False


def _lines(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each line, without its line break."""
    spans, pos = [], 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        spans.append((pos, pos + len(body)))
        pos += len(line)
    return spans


def _sections(text: str) -> list[tuple[tuple[str, ...], list[_Block]]]:
    """The document as sections (heading path, blocks); a heading line is the first block of its section."""
    sections: list[tuple[tuple[str, ...], list[_Block]]] = [((), [])]
    path: list[tuple[int, str]] = []
    lines = _lines(text)
    i = 0
    para: int | None = None

    def close(end: int) -> None:
        nonlocal para
        if para is not None:
            sections[-1][1].append(_Block(para, end))
            para = None

    while i < len(lines):
        start, end = lines[i]
        line = text[start:end]
        if fence := _FENCE.match(line):
            close(lines[i - 1][1])
            marker = fence.group(1)
            j = i + 1
            while j < len(lines) and not text[lines[j][0]:lines[j][1]].lstrip().startswith(marker):
                j += 1
            last = min(j, len(lines) - 1)
            sections[-1][1].append(_Block(start, lines[last][1], code=True))
            i = last + 1
            continue
        if heading := _HEADING.match(line):
            close(lines[i - 1][1])
            level, title = len(heading.group(1)), heading.group(2).strip()
            path = [(lvl, t) for lvl, t in path if lvl < level] + [(level, title)]
            sections.append((tuple(t for _, t in path if t), [_Block(start, end, heading=True)]))
        elif not line.strip():
            close(lines[i - 1][1])
        elif para is None:
            para = start
        i += 1
    if para is not None:
        close(lines[-1][1])
    return [(headings, blocks) for headings, blocks in sections if blocks]


def _cut_at(text: str, start: int, end: int, max_chars: int, boundaries: re.Pattern[str] | None) -> list[tuple[int, int]]:
    """``[start, end)`` in pieces of at most ``max_chars``, cut after a boundary match, else at
    whitespace, else anywhere."""
    pieces = []
    while end - start > max_chars:
        window = text[start:start + max_chars]
        cut = 0
        if boundaries is not None:
            for m in boundaries.finditer(window):
                if m.start() > 0:
                    cut = m.end()
        if cut <= 0:
            cut = window.rfind(" ") + 1 or window.rfind("\n") + 1
        if cut <= 0:
            cut = max_chars
        pieces.append((start, start + cut))
        start += cut
        while start < end and text[start].isspace():
            start += 1
    if start < end:
        pieces.append((start, end))
    return pieces


def _pieces(text: str, block: _Block, max_chars: int) -> list[tuple[int, int]]:
    """A block as spans of at most ``max_chars``: whole when it fits; code cut at line ends,
    prose at sentence ends."""
    if block.end - block.start <= max_chars:
        return [(block.start, block.end)]
    if block.code:
        return _cut_at(text, block.start, block.end, max_chars, re.compile(r"\n"))
    return _cut_at(text, block.start, block.end, max_chars, _SENTENCE_END)


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _overlap_start(text: str, section_start: int, prev_end: int, start: int, overlap: int) -> int:
    """Where a passage that continues its section begins: up to ``overlap`` characters before
    ``start``, from a word boundary, never before the section."""
    if overlap <= 0:
        return start
    lo = max(section_start, prev_end - overlap)
    if lo >= start:
        return start
    if lo > section_start and not text[lo - 1].isspace():
        space = text.find(" ", lo, start)
        if space < 0:
            return start
        lo = space + 1
    return _trimmed(text, lo, start)[0] if lo < start else start


@dataclass(frozen=True, slots=True)
class _Section:
    """A section packed into spans (trimmed, in order); ``body``: characters under its heading line."""

    headings: tuple[str, ...]
    spans: list[tuple[int, int]]
    body: int

    def tiny(self, min_chars: int) -> bool:
        return len(self.spans) == 1 and self.body < min_chars


def _packed(text: str, headings: tuple[str, ...], blocks: list[_Block], max_chars: int) -> _Section:
    """A section's blocks packed into spans of at most ``max_chars`` (its heading line always with what follows)."""
    spans = [p for block in blocks for p in _pieces(text, block, max_chars)]
    packed: list[tuple[int, int]] = []
    lone_heading = blocks[0].heading  # a heading line is never a passage of its own
    for start, end in spans:
        if packed and (end - packed[-1][0] <= max_chars or lone_heading):
            packed[-1] = (packed[-1][0], end)
        else:
            packed.append((start, end))
        lone_heading = lone_heading and len(packed) == 1 and packed[0] == spans[0]
    trimmed = [span for span in (_trimmed(text, start, end) for start, end in packed) if span[0] < span[1]]
    return _Section(headings, trimmed, sum(b.end - b.start for b in blocks if not b.heading))


def _shared(paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The headings every path starts with."""
    common = paths[0]
    for path in paths[1:]:
        n = 0
        while n < min(len(common), len(path)) and common[n] == path[n]:
            n += 1
        common = common[:n]
    return common


def _merged(sections: list[_Section], max_chars: int, min_chars: int) -> list[_Section]:
    """Consecutive tiny sections as one (up to ``max_chars``, under the headings their texts share);
    the headings with nothing under them that end a run of tiny ones (a few lines) go with the
    larger section after it, as a heading line goes with what follows it."""
    out: list[_Section] = []
    run: list[_Section] = []

    def flush() -> None:
        if run:
            paths = [s.headings for s in run if s.body] or [s.headings for s in run]
            out.append(_Section(_shared(paths), [(run[0].spans[0][0], run[-1].spans[-1][1])],
                                sum(s.body for s in run)))
            run.clear()

    for section in sections:
        if not section.spans:
            continue
        if section.tiny(min_chars):
            if run and section.spans[-1][1] - run[0].spans[0][0] > max_chars:
                flush()
            run.append(section)
            continue
        lead: list[_Section] = []  # a few heading lines, never a passage's worth
        while run and not run[-1].body and section.spans[0][0] - run[-1].spans[0][0] <= max_chars // 4:
            lead.insert(0, run.pop())
        flush()
        if lead:
            first = (lead[0].spans[0][0], section.spans[0][1])
            section = _Section(section.headings, [first, *section.spans[1:]], section.body)
        out.append(section)
    flush()
    return out


def chunk_document(text: str, *, max_chars: int = DEFAULT_MAX_CHARS, overlap: int = DEFAULT_OVERLAP,
                   min_section_chars: int = MIN_SECTION_CHARS) -> list[Passage]:
    """``text`` (plain text or markdown, any length) as passages in document order; see the
    module docstring. ``max_chars`` bounds a passage without its overlap; ``overlap`` must be
    smaller than half of it; ``min_section_chars`` (0: every section on its own) what a section
    needs under its heading to be passages of its own."""
    if max_chars < 100:
        raise ValueError(f"max_chars must be at least 100, got {max_chars}")
    if not 0 <= overlap <= max_chars // 2:
        raise ValueError(f"overlap must be between 0 and max_chars // 2 ({max_chars // 2}), got {overlap}")
    if not 0 <= min_section_chars <= max_chars:
        raise ValueError(f"min_section_chars must be between 0 and max_chars ({max_chars}), got {min_section_chars}")
    sections = [_packed(text, headings, blocks, max_chars) for headings, blocks in _sections(text)]
    passages: list[Passage] = []
    for section in _merged(sections, max_chars, min_section_chars):
        section_start = section.spans[0][0]
        prev_end = None
        for start, end in section.spans:
            if prev_end is not None:
                start = _overlap_start(text, section_start, prev_end, start, overlap)
            passages.append(Passage(len(passages), start, end, section.headings, text[start:end]))
            prev_end = end
    return passages


def embedding_text(headings: Sequence[str], text: str) -> str:
    """What a passage's vector is made from: its text under its section's headings (``Runbook >
    Deploys``), so that a passage deep in a section still carries what the section is about. One
    definition for every writer of passage vectors: learning a document, re-embedding, importing."""
    where = " > ".join(headings)
    return f"{where}\n\n{text}" if where else text
