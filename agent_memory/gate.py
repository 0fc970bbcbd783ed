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

__all__ = ["check_content", "normalize_content"]

_HORIZONTAL_SPACE = re.compile(r"[^\S\n]+")  # any whitespace except a newline
_SPACE_AROUND_NEWLINE = re.compile(r" ?\n ?")
_BLANK_LINES = re.compile(r"\n{3,}")


def normalize_content(content: str) -> str:
    """The form a memory is checked, deduplicated and stored in.

    Line endings become ``\\n``; runs of spaces, tabs and other horizontal
    whitespace become one space; at most one blank line is kept; the ends are
    stripped. Newlines survive because a memory may be a short list, but
    ``"dark  mode"`` and ``"dark mode"`` should be the same memory.
    """
    text = content.replace("\r\n", "\n").replace("\r", "\n")
    text = _HORIZONTAL_SPACE.sub(" ", text)
    text = _SPACE_AROUND_NEWLINE.sub("\n", text)
    return _BLANK_LINES.sub("\n\n", text).strip()


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
