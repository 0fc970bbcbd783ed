"""Keeping secrets out of everything that is stored, with one detector for every path.

A secret that reaches any table leaks again: memories and profiles are replayed
into prompts, documents and transcripts are shown as sources, and exports carry
all of it. :mod:`agent_memory.sensitive` finds secrets; this module says what
each kind of stored text does about one, so every write path makes the same
choice:

- a memory is refused whole (the gate's SENSITIVE rejection): it is one short
  statement, and the rest of it is rarely worth keeping without the secret;
- a document or a transcript keeps its text with each secret span replaced by
  ``[withheld: <kind>]`` (:func:`redact`): refusing a whole document would lose
  everything else in it;
- metadata, a hand-edited profile field, an id or an edit reason is refused with
  an error naming the field (:func:`refuse_secret`, :func:`refuse_secrets_in_json`):
  the caller typed it and can take the secret out.

Text is checked both as given and in the form the gate stores
(:func:`~agent_memory.gate.normalize_content`), so a key split by a zero-width
space is still a key. Pure functions; nothing here returns or logs a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import InvalidInputError
from .gate import normalize_content
from .models import Rejection, RejectionReason
from .sensitive import find_sensitive, redact_sensitive

__all__ = [
    "find_secret",
    "metadata_rejection",
    "redact",
    "refuse_secret",
    "refuse_secrets_in_json",
    "secret_in_json",
]

#: a string longer than this is not scanned whole by the id and metadata checks (they are
#: short by construction; their own size limits refuse longer ones)
_MAX_SCAN = 1_000_000


def find_secret(text: str) -> str | None:
    """The kind of secret in ``text`` (as given, or as the gate normalises it), or None."""
    if not text:
        return None
    kind = find_sensitive(text)
    if kind is None:
        normal = normalize_content(text)
        if normal != text:
            kind = find_sensitive(normal)
    return kind


def redact(text: str) -> str:
    """``text`` with every secret span replaced by ``[withheld: <kind>]``, the rest kept as it was,
    byte for byte: indentation, blank lines and line endings are the document's.

    The detector reads through invisible characters and escaped line breaks itself and
    redacts where the secret stands (a key split by a zero-width space, a key file pasted
    as a JSON string). Should the form the gate stores still show a secret, each line that
    shows one is redacted in that form, and only when even that leaves one is the whole
    text withheld.
    """
    if not text:
        return text
    out, _ = redact_sensitive(text)
    if find_secret(out) is None:
        return out
    lines = out.split("\n")
    out = "\n".join(redact_sensitive(normalize_content(line))[0] if find_secret(line) else line for line in lines)
    if find_secret(out) is None:
        return out
    out, _ = redact_sensitive(normalize_content(out))
    kind = find_secret(out)
    # the spans did not cover what the detector still sees: withhold the whole text
    return out if kind is None else f"[withheld: {kind}]"


def secret_in_json(value: Any) -> tuple[str, str] | None:
    """``(where, kind)`` of the first secret in a JSON value's strings, keys included
    (``where`` like ``['auth']['token']``, or ``the key 'x' at ['auth']``); None when clean.
    Walked without recursion, so deep nesting costs no stack."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, str):
            kind = find_secret(node[:_MAX_SCAN])
            if kind is not None:
                return (where or "the top", kind)
        elif isinstance(node, Mapping):
            for key, item in node.items():
                label = _label(key)
                kind = find_secret(str(key)[:_MAX_SCAN])
                if kind is not None:
                    return (f"the key {label} at {where or 'the top'}", kind)
                stack.append((f"{where}[{label}]" if len(where) < 200 else where, item))
        elif isinstance(node, (list, tuple)):
            stack.extend((f"{where}[{i}]" if len(where) < 200 else where, item) for i, item in enumerate(node))
    return None


def _label(key: Any) -> str:
    """A key as an error message shows it: short, and never a secret."""
    text = str(key)
    if find_secret(text):
        return "(withheld)"
    return repr(text if len(text) <= 40 else text[:39] + "…")


def refuse_secret(field: str, text: str | None, what: str | None = None) -> None:
    """Raise :class:`InvalidInputError` naming ``field`` when ``text`` holds a secret."""
    if text is None:
        return
    kind = find_secret(text[:_MAX_SCAN])
    if kind is not None:
        subject = what or "it"
        raise InvalidInputError(field, f"{subject} looks like it contains {kind}; secrets are never stored — "
                                       "remove it and try again")


def _place(value: Any) -> tuple[str, str] | None:
    found = secret_in_json(value)
    if found is None:
        return None
    where, kind = found
    return (where if where.startswith("the key") else f"the value at {where}"), kind


def refuse_secrets_in_json(field: str, value: Any) -> None:
    """Raise :class:`InvalidInputError` naming ``field`` and the place inside it when a string
    value or key of the JSON ``value`` holds a secret (metadata, settings)."""
    found = _place(value)
    if found is not None:
        raise InvalidInputError(field, f"{found[0]} looks like it contains {found[1]}; secrets are never stored "
                                       "— remove it and try again")


def metadata_rejection(value: Any, field: str = "metadata") -> Rejection | None:
    """Why ``value`` (a metadata object) must not be stored, or None: for the paths that
    answer with a :class:`~agent_memory.models.Rejection` instead of raising (a memory)."""
    found = _place(value)
    if found is None:
        return None
    return Rejection(RejectionReason.SENSITIVE, f"{field}: {found[0]} looks like it contains {found[1]}; secrets "
                                                "are never stored — remove it and save the rest", kind=found[1])
