"""Render a profile into the block injected into the system prompt.

Pure: no I/O. One ``label: value`` line per non-empty field, in the order of the
field table; list entries joined with "; ", key decisions one per line with their
date and rationale. Values are put on one line and escaped
(:func:`agent_memory.formatting.escape`), so no value can close the
``<user_profile>`` / ``<project_profile>`` element or forge a new one.

With ``budget_chars`` the block is made to fit: first text fields longer than
200 characters are shortened, then list entries are dropped from the end of the
list with the most entries (lists are newest first, so the oldest go), then text
is shortened further and fields dropped. ``""`` when nothing is left to say.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_memory.errors import InvalidInputError
from agent_memory.formatting import escape
from agent_memory.prompts import render

from .fields import ProfileKind, coerce_profile_fields, fields_of, is_empty

__all__ = ["render_profile", "render_project_profile", "render_user_profile"]

_ELLIPSIS = "…"
_SHORT_TEXT = 200  # text is cut to this length before any list entry is dropped
_MIN_TEXT = 20  # below this, a field is dropped rather than cut further


def render_user_profile(fields: Mapping[str, Any], *, budget_chars: int | None = None) -> str:
    """The ``<user_profile>`` block for ``fields``, or ``""`` when every field is empty."""
    return render_profile("user", fields, budget_chars=budget_chars)


def render_project_profile(fields: Mapping[str, Any], *, budget_chars: int | None = None) -> str:
    """The ``<project_profile>`` block for ``fields``, or ``""`` when every field is empty."""
    return render_profile("project", fields, budget_chars=budget_chars)


def render_profile(kind: ProfileKind, fields: Mapping[str, Any], *, budget_chars: int | None = None) -> str:
    """The profile block of ``kind``, at most ``budget_chars`` long when that is given.

    ``fields`` may be partial or come from storage: it is read through
    :func:`~agent_memory.profiles.fields.coerce_profile_fields`, so unknown keys and
    values of the wrong type are ignored.
    """
    if budget_chars is not None and (isinstance(budget_chars, bool) or not isinstance(budget_chars, int)):
        raise InvalidInputError("budget_chars", f"must be a whole number or None, got {budget_chars!r}")
    values = coerce_profile_fields(kind, fields)
    if is_empty(kind, values):
        return ""
    block = _block(kind, values)
    if budget_chars is None or len(block) <= budget_chars:
        return block
    return _fit(kind, values, budget_chars)


def _block(kind: ProfileKind, values: Mapping[str, Any]) -> str:
    return render(f"{kind}_profile", fields="\n".join(_lines(kind, values)))


def _lines(kind: ProfileKind, values: Mapping[str, Any]) -> list[str]:
    lines = []
    for name, spec in fields_of(kind).items():
        value = values.get(name)
        if not value:
            continue
        if spec.kind == "list":
            lines.append(f"{spec.label}: {'; '.join(_one_line(entry) for entry in value)}")
        elif spec.kind == "decisions":
            lines.append(f"{spec.label}:")
            lines.extend(f"- {_decision(entry)}" for entry in value)
        else:
            lines.append(f"{spec.label}: {_one_line(value)}")
    return lines


def _one_line(text: str) -> str:
    return escape(" ".join(text.split()))


def _decision(entry: Mapping[str, Any]) -> str:
    line = _one_line(entry["decision"])
    if entry.get("timestamp"):
        line = f"{_one_line(entry['timestamp'][:10])}: {line}"
    if entry.get("rationale"):
        line += f" (rationale: {_one_line(entry['rationale'])})"
    return line


def _fit(kind: ProfileKind, values: dict[str, Any], budget: int) -> str:
    specs = fields_of(kind)
    values = {name: list(v) if isinstance(v, list) else v for name, v in values.items()}

    def overflow() -> int:
        return len(_block(kind, values)) - budget

    def longest(kinds: tuple[str, ...]) -> str | None:
        sized = [(len(values[n]), i, n) for i, n in enumerate(specs) if specs[n].kind in kinds and values[n]]
        return max(sized)[2] if sized else None

    # 1. long text down to _SHORT_TEXT characters
    while overflow() > 0 and (name := longest(("text",))) and len(values[name]) > _SHORT_TEXT:
        values[name] = _cut(values[name], max(_SHORT_TEXT, len(values[name]) - overflow()))
    # 2. list entries, from the end of the fullest list
    while overflow() > 0 and (name := longest(("list", "decisions"))):
        values[name].pop()
    # 3. text shortened further, then text and choices dropped
    while overflow() > 0 and (name := longest(("text", "choice"))):
        keep = len(values[name]) - overflow()
        values[name] = _cut(values[name], keep) if specs[name].kind == "text" and keep >= _MIN_TEXT else None
    if is_empty(kind, values) or overflow() > 0:
        return ""
    return _block(kind, values)


def _cut(text: str, length: int) -> str:
    """``text`` in at most ``length`` characters, ending with an ellipsis when shortened."""
    return text if len(text) <= length else text[: length - 1].rstrip() + _ELLIPSIS
