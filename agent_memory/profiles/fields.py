"""The fields of the user and project profiles, and the checks on their values.

Pure: no I/O. One table per profile names each field, its kind, its label in the
prompt and a one-line description (shown to the LLM that writes profiles). Two
cleaners share the same limits:

- :func:`check_profile_fields` is for a user's hand edit: anything wrong raises
  :class:`~agent_memory.errors.InvalidInputError` naming the field and what is allowed.
- :func:`coerce_profile_fields` is for values we did not write by hand (model output,
  stored JSON): it never raises; what can't be used is dropped and what is too long is cut.

Both strip strings, drop blank list entries, deduplicate lists case-insensitively
(keeping the first spelling and the order), and refuse secrets
(:func:`agent_memory.withheld.find_secret`): a profile is replayed into every prompt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from types import MappingProxyType
from typing import Any, Literal

from agent_memory.errors import InvalidInputError
from agent_memory.validation import check_text
from agent_memory.withheld import find_secret

__all__ = [
    "MAX_ENTRY_CHARS",
    "MAX_LIST_ENTRIES",
    "MAX_TEXT_CHARS",
    "PROJECT_FIELDS",
    "USER_FIELDS",
    "FieldKind",
    "FieldSpec",
    "ProfileKind",
    "check_profile_fields",
    "coerce_profile_fields",
    "empty_fields",
    "fields_of",
    "is_empty",
    "merge_fields",
]

MAX_TEXT_CHARS = 500
MAX_LIST_ENTRIES = 50
MAX_ENTRY_CHARS = 300

ProfileKind = Literal["user", "project"]
FieldKind = Literal["text", "choice", "list", "decisions"]

_ELLIPSIS = "…"
_DECISION_KEYS = ("decision", "rationale", "timestamp")


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One profile field: its kind, the label shown in prompts, and what it holds."""

    kind: FieldKind
    label: str
    description: str
    choices: tuple[str, ...] = ()


USER_FIELDS: Mapping[str, FieldSpec] = MappingProxyType({
    "username": FieldSpec("text", "Name", "The name the user wants to be called."),
    "background": FieldSpec("text", "Background", "A few sentences about the user's situation and history."),
    "profession": FieldSpec("text", "Profession", "The user's job or role, e.g. 'senior backend engineer'."),
    "communication_style": FieldSpec(
        "choice", "Communication style", "How the user wants answers written.", ("concise", "detailed", "technical")
    ),
    "response_format": FieldSpec(
        "choice", "Response format", "The format the user wants answers in.", ("markdown", "plain", "code")
    ),
    "language_preference": FieldSpec(
        "text", "Language", "The natural language the user wants answers in, e.g. 'German'."
    ),
    "characteristics": FieldSpec("list", "Characteristics", "The user's habits and traits, one per entry."),
    "custom_instructions": FieldSpec(
        "list", "Custom instructions", "Standing requests on how to answer or behave, one per entry."
    ),
    "expertise_areas": FieldSpec("list", "Expertise", "Subjects and skills the user knows well."),
    "programming_languages": FieldSpec("list", "Programming languages", "Programming languages the user uses."),
    "frequently_used_tools": FieldSpec(
        "list", "Frequently used tools", "Editors, services and tools the user currently uses."
    ),
})

PROJECT_FIELDS: Mapping[str, FieldSpec] = MappingProxyType({
    "project_goal": FieldSpec("text", "Goal", "What the project is for and what it aims to achieve."),
    "tech_stack": FieldSpec("list", "Tech stack", "Languages, frameworks, databases and services in use."),
    "constraints": FieldSpec("list", "Constraints", "Hard limits and rules the work must respect."),
    "key_decisions": FieldSpec(
        "decisions", "Key decisions", "Decisions taken, each with its rationale and when it was taken."
    ),
    "team_conventions": FieldSpec("list", "Team conventions", "How the team works: style, process, habits."),
    "current_phase": FieldSpec("text", "Current phase", "Where the project stands now, e.g. 'MVP, beta in May'."),
})

_TABLES: Mapping[str, Mapping[str, FieldSpec]] = {"user": USER_FIELDS, "project": PROJECT_FIELDS}


def fields_of(kind: ProfileKind) -> Mapping[str, FieldSpec]:
    """The field table of the ``"user"`` or ``"project"`` profile."""
    try:
        return _TABLES[kind]
    except (KeyError, TypeError):
        raise InvalidInputError("kind", f"must be 'user' or 'project', got {kind!r}") from None


def empty_fields(kind: ProfileKind) -> dict[str, Any]:
    """Every field of ``kind`` with no value: ``None`` for text and choices, ``[]`` for lists."""
    return {name: [] if spec.kind in ("list", "decisions") else None for name, spec in fields_of(kind).items()}


def is_empty(kind: ProfileKind, fields: Mapping[str, Any]) -> bool:
    """True when no field of ``kind`` has a value (missing fields count as empty)."""
    return not any(fields.get(name) for name in fields_of(kind))


def merge_fields(kind: ProfileKind, auto: Mapping[str, Any], manual: Mapping[str, Any]) -> dict[str, Any]:
    """The profile a reader sees: ``auto`` (extracted), overridden field by field by ``manual``.

    A field present in ``manual`` wins even when it is ``None`` or ``[]``: the user
    cleared it on purpose, and extraction must not bring the old value back. To hand a
    field back to extraction, remove its key from ``manual``. Unknown keys are ignored.
    """
    merged = empty_fields(kind)
    for source in (auto, manual):
        for name in merged:
            if name in source:
                merged[name] = _copy(source[name])
    return merged


def _copy(value: Any) -> Any:
    """Lists and decision objects copied, so editing the merged profile leaves its sources alone."""
    if isinstance(value, (list, tuple)):
        return [dict(v) if isinstance(v, Mapping) else v for v in value]
    return value


def check_profile_fields(kind: ProfileKind, values: Mapping[str, Any]) -> dict[str, Any]:
    """The cleaned hand edit ``values`` (only the fields given), or InvalidInputError.

    ``None`` for a text or choice field, or ``[]`` (or ``None``) for a list, clears it.
    """
    if not isinstance(values, Mapping):
        raise InvalidInputError("fields", f"must be an object of field -> value, got {type(values).__name__}")
    table = fields_of(kind)
    cleaned: dict[str, Any] = {}
    for name, value in values.items():
        if name not in table:
            raise InvalidInputError(
                str(name), f"is not a {kind} profile field; the fields are {', '.join(table)}"
            )
        cleaned[name] = _clean(name, table[name], value, strict=True)
    return cleaned


def coerce_profile_fields(kind: ProfileKind, values: Any) -> dict[str, Any]:
    """Every field of ``kind`` from untrusted ``values``, never raising.

    Unknown keys, wrong types, choices outside their vocabulary and secrets are
    dropped; a single string where a list belongs becomes a one-entry list; text
    over the limits is cut with an ellipsis; lists keep their first entries.
    """
    fields = empty_fields(kind)
    if not isinstance(values, Mapping):
        return fields
    for name, spec in fields_of(kind).items():
        if name in values:
            fields[name] = _clean(name, spec, values[name], strict=False)
    return fields


# --- one cleaner, strict (raise) or lenient (drop / cut) ------------------------------


class _Drop(Exception):
    """A lenient clean found a value it can't use."""


def _reject(field: str, message: str, strict: bool) -> Exception:
    return InvalidInputError(field, message) if strict else _Drop()


def _clean(name: str, spec: FieldSpec, value: Any, *, strict: bool) -> Any:
    try:
        if spec.kind == "text":
            return _text(name, value, MAX_TEXT_CHARS, strict)
        if spec.kind == "choice":
            return _choice(name, spec.choices, value, strict)
        if spec.kind == "list":
            return _list(name, value, strict)
        return _decisions(name, value, strict)
    except _Drop:
        return [] if spec.kind in ("list", "decisions") else None


def _text(field: str, value: Any, limit: int, strict: bool) -> str | None:
    """A stripped string within ``limit`` characters, or None for None / blank."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise _reject(field, f"must be a string or null (to clear it), got {type(value).__name__}", strict)
    if strict:
        check_text(field, value, allow_empty=True)
    else:
        value = value.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    value = value.strip()
    if not value:
        return None
    if len(value) > limit and strict:
        raise InvalidInputError(field, f"is {len(value)} characters long; the limit is {limit}")
    # checked before any cut, so that no part of a secret survives in a shortened value
    kind = find_secret(value)
    if kind is not None:
        raise _reject(
            field, f"looks like it contains {kind}; profiles are replayed into prompts, so keep secrets out", strict
        )
    if len(value) > limit:
        value = value[: limit - 1].rstrip() + _ELLIPSIS
    return value


def _choice(field: str, choices: tuple[str, ...], value: Any, strict: bool) -> str | None:
    allowed = f"must be one of {', '.join(choices)}, or null to clear it"
    if value is None:
        return None
    if not isinstance(value, str):
        raise _reject(field, f"{allowed}; got {type(value).__name__}", strict)
    choice = value.strip().lower()
    if not choice:
        return None
    if choice not in choices:
        raise _reject(field, f"{allowed}; got {value[:40]!r}", strict)
    return choice


def _list(field: str, value: Any, strict: bool) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) and not strict:
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise _reject(field, f"must be a list of strings ([] to clear it), got {type(value).__name__}", strict)
    entries: dict[str, str] = {}  # casefolded -> first spelling
    for i, entry in enumerate(value):
        try:
            text = _text(f"{field}[{i}]", entry, MAX_ENTRY_CHARS, strict)
        except _Drop:
            continue
        if text is not None:
            entries.setdefault(text.casefold(), text)
    return _capped(field, list(entries.values()), strict)


def _capped(field: str, entries: list[Any], strict: bool) -> list[Any]:
    if len(entries) > MAX_LIST_ENTRIES:
        if strict:
            raise InvalidInputError(
                field, f"has {len(entries)} entries; the limit is {MAX_LIST_ENTRIES}"
            )
        del entries[MAX_LIST_ENTRIES:]
    return entries


def _decisions(field: str, value: Any, strict: bool) -> list[dict[str, str | None]]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise _reject(field, f"must be a list of decisions ([] to clear it), got {type(value).__name__}", strict)
    decisions: dict[str, dict[str, str | None]] = {}
    for i, entry in enumerate(value):
        try:
            decision = _decision(f"{field}[{i}]", entry, strict)
        except _Drop:
            continue
        decisions.setdefault(str(decision["decision"]).casefold(), decision)
    return _capped(field, list(decisions.values()), strict)


def _decision(field: str, entry: Any, strict: bool) -> dict[str, str | None]:
    shape = "an object with 'decision' (required), 'rationale' and 'timestamp' (ISO-8601)"
    if isinstance(entry, str) and not strict:
        entry = {"decision": entry}
    if not isinstance(entry, Mapping):
        raise _reject(field, f"must be {shape}, got {type(entry).__name__}", strict)
    unknown = [str(k) for k in entry if k not in _DECISION_KEYS]
    if unknown and strict:
        raise InvalidInputError(field, f"has unknown keys {', '.join(unknown)}; it must be {shape}")
    text = _text(f"{field}.decision", entry.get("decision"), MAX_ENTRY_CHARS, strict)
    if text is None:
        raise _reject(f"{field}.decision", "is required: say what was decided", strict)
    try:
        rationale = _text(f"{field}.rationale", entry.get("rationale"), MAX_TEXT_CHARS, strict)
    except _Drop:
        rationale = None
    try:
        timestamp = _timestamp(f"{field}.timestamp", entry.get("timestamp"), strict)
    except _Drop:
        timestamp = None
    return {"decision": text, "rationale": rationale, "timestamp": timestamp}


def _timestamp(field: str, value: Any, strict: bool) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str) and len(value) <= 64:
        text = value.strip()
        try:
            parsed = date.fromisoformat(text) if len(text) == 10 else datetime.fromisoformat(text)
            return parsed.isoformat()
        except ValueError:
            pass
    raise _reject(
        field, "must be an ISO-8601 date or date-time such as '2024-05-01T12:00:00+00:00', or null", strict
    )
