"""The memory gate's content checks: pure functions, no database, no I/O.

Every write passes through :func:`check_content` before anything is embedded
or stored, so a refused memory costs nothing. Checks answer with a
:class:`~agent_memory.models.Rejection` rather than raising: a refusal is an
ordinary outcome that a tool hands back to the model, which can fix the memory
and try again. Argument types and ranges are validated earlier (in
:mod:`agent_memory.validation`); the gate assumes well-typed input.
"""

from __future__ import annotations

import re

from .config import MemoryConfig
from .models import Rejection, RejectionReason
from .sensitive import find_sensitive
from .validation import is_blank

__all__ = ["check_content", "normalize_content"]

_HORIZONTAL_SPACE = re.compile(r"[^\S\n]+")  # any whitespace except a newline
_SPACE_AROUND_NEWLINE = re.compile(r" ?\n ?")
_BLANK_LINES = re.compile(r"\n{3,}")

#: every other line break Python and Unicode know: vertical tab, form feed, the file, group and
#: record separators, NEL, LINE SEPARATOR and PARAGRAPH SEPARATOR (``\r`` and ``\r\n`` too)
_LINE_BREAK = re.compile("\r\n|[\r\v\f\x1c-\x1e\x85\u2028\u2029]")
#: characters that show nothing and carry no meaning in a memory, removed wherever they are:
#: control characters (not tab and newline), soft hyphen, Mongolian vowel separator, zero-width
#: space, bidi embeddings, overrides and isolates (they reorder what a reader sees: "Trojan
#: Source"), word joiner and invisible operators, Hangul fillers, byte-order mark, interlinear
#: annotation, shorthand and musical format controls, and the tag characters (invisible ASCII:
#: text hidden from the reader but read by a model)
_INVISIBLE = re.compile(
    "[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f\u00ad\u180e\u200b\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\u3164\ufeff\uffa0\ufff9-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f]"
)
#: a subdivision flag (England, Scotland, Wales) is a black flag, tag letters and a cancel tag:
#: the one place tag characters mean something, so it is kept whole
_EMOJI_TAG_SEQUENCE = re.compile("\U0001f3f4[\U000e0020-\U000e007e]+\U000e007f")
#: zero-width joiner / non-joiner: they join two visible characters (emoji ZWJ sequences such as
#: woman + ZWJ + laptop, Indic conjuncts, Persian words), so a run of them becomes one, and one
#: that joins nothing (at an end or beside a space) goes
_JOINER_RUN = re.compile("([\u200c\u200d])[\u200c\u200d]+")
_STRAY_JOINER = re.compile("(?:^|(?<=\\s))[\u200c\u200d]+|[\u200c\u200d]+(?=\\s|$)")
#: variation selectors choose how the character before them looks; with none they select nothing
_STRAY_SELECTOR = re.compile("(?:^|(?<=\\s))[\ufe00-\ufe0f\U000e0100-\U000e01ef\u034f]+")


def normalize_content(content: str) -> str:
    """The form a memory is checked, deduplicated and stored in.

    Line breaks (``\\r\\n``, ``\\r``, ``\\u2028``, ...) become ``\\n``; invisible characters
    (zero-width spaces, bidi overrides, tag characters, control characters) are removed, but
    the joiners and selectors that emoji sequences and scripts need are kept where they join
    something; runs of spaces, tabs and other horizontal whitespace become one space; at most
    one blank line is kept; the ends are stripped. Text with nothing visible left is ``""``, so
    the gate refuses it as empty. Newlines survive because a memory may be a short list, but
    ``"dark  mode"`` and ``"dark\\u200b mode"`` should be the same memory as ``"dark mode"``.
    """
    text = _LINE_BREAK.sub("\n", content)
    kept = [m.span() for m in _EMOJI_TAG_SEQUENCE.finditer(text)] if "\U0001f3f4" in text else []
    if kept:
        bounds = [0, *(i for span in kept for i in span), len(text)]
        text = "".join(text[a:b] if k % 2 else _INVISIBLE.sub("", text[a:b])
                       for k, (a, b) in enumerate(zip(bounds, bounds[1:])))
    else:
        text = _INVISIBLE.sub("", text)
    text = _JOINER_RUN.sub(r"\1", text)
    text = _STRAY_SELECTOR.sub("", _STRAY_JOINER.sub("", text))
    text = _HORIZONTAL_SPACE.sub(" ", text)
    text = _SPACE_AROUND_NEWLINE.sub("\n", text)
    text = _BLANK_LINES.sub("\n\n", text).strip()
    return "" if is_blank(text) else text


#: text longer than this many times max_length is rejected as too long without scanning it
_SCAN_LIMIT_FACTOR = 4


def check_content(content: str, *, confidence: float, config: MemoryConfig) -> Rejection | None:
    """Why ``content`` must not be stored, or None when it may be.

    Checks run in this order: empty, sensitive, length, confidence. Secrets come
    before length so that a long pasted key is reported as a secret (the thing
    to remove) rather than as merely too long; only text far beyond the limit
    skips the scan, so a pasted megabyte costs nothing. The message never
    repeats the secret, so it is safe to show to a user or hand back to a model.
    """
    text = normalize_content(content)
    if not text:
        return Rejection(
            RejectionReason.EMPTY,
            "content is empty; write the memory as a short, self-contained sentence",
        )

    kind = find_sensitive(text) if len(text) <= _SCAN_LIMIT_FACTOR * config.max_length else None
    if kind is not None:
        return Rejection(
            RejectionReason.SENSITIVE,
            f"content looks like it contains {kind}; secrets are never stored — remove it and save the rest",
            kind=kind,
        )

    length, low, high = len(text), config.min_length, config.max_length
    if length < low:
        return Rejection(
            RejectionReason.TOO_SHORT,
            f"content is {length} characters long, but memories must be {low} to {high} characters; "
            "add enough detail for it to make sense on its own",
        )
    if length > high:
        return Rejection(
            RejectionReason.TOO_LONG,
            f"content is {length} characters long, but memories must be {low} to {high} characters; "
            "shorten it or split it into several memories",
        )

    if confidence < config.min_confidence:
        return Rejection(
            RejectionReason.LOW_CONFIDENCE,
            f"confidence {confidence:g} is below the minimum of {config.min_confidence:g}; "
            "save only what you are sure of (the threshold is set by MEMORY_MIN_CONFIDENCE)",
        )
    return None
