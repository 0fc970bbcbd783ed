"""Checks on what callers pass to public entry points.

Pure functions: each returns the cleaned value or raises
:class:`~agent_memory.errors.InvalidInputError` naming the field and what is
allowed, before anything touches the database. Models call our tools with
arbitrary JSON, so nothing here trusts a type annotation.
"""

from __future__ import annotations

import json
import math
import re
import reprlib
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from enum import Enum
from typing import Any, TypeVar
from uuid import UUID

from .errors import InvalidInputError
from .models import Identity, Scope

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_KEY_LENGTH",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "MAX_OFFSET",
    "MAX_QUERY_LENGTH",
    "check_as_of",
    "check_bool",
    "check_confidence",
    "check_enum",
    "check_enum_set",
    "check_id",
    "check_identity",
    "check_int",
    "check_k",
    "check_key",
    "check_list",
    "check_metadata",
    "check_offset",
    "check_scope_id",
    "check_scope_name",
    "check_storable",
    "check_text",
    "check_ttl",
    "check_uuid",
    "check_valid_from",
    "is_blank",
    "segment_prefix_pattern",
    "shown",
]

MAX_ID_LENGTH = 256
MAX_METADATA_BYTES = 16_384
#: nesting levels of a metadata object; JSON deeper than this is data, not metadata
MAX_METADATA_DEPTH = 32
MAX_QUERY_LENGTH = 4_000
#: the largest OFFSET PostgreSQL accepts (a bigint)
MAX_OFFSET = 2**63 - 1

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 2, 60, 60, 40
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = 4


def shown(value: Any) -> str:
    """``repr(value)`` for an error message, kept short: a value nested 5,000 deep or a
    megabyte long is described in a few dozen characters instead of breaking the message
    (plain ``repr`` raises ``RecursionError`` on the first)."""
    try:
        return _SHOWN.repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        return f"a {type(value).__name__}"

E = TypeVar("E", bound=Enum)


#: characters with nothing to see that are not format characters (category Cf, e.g. zero-width
#: space, joiners, bidi marks, tags): variation selectors, the combining grapheme joiner, the
#: Hangul fillers and the blank braille pattern
_BLANK_EXTRA = frozenset("\u034f\u115f\u1160\u2800\u3164\uffa0") | frozenset(
    chr(c) for c in (*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0))
)


def is_blank(text: str) -> bool:
    """Whether ``text`` shows nothing: only whitespace, control and format characters
    (``"\\u200b\\u200b"`` is as empty as ``"  "``)."""
    return all(c.isspace() or c in _BLANK_EXTRA or unicodedata.category(c) in ("Cf", "Cc") for c in text)


def check_text(field: str, value: Any, *, max_length: int | None = None, allow_empty: bool = False) -> str:
    """A string PostgreSQL can store: no NUL bytes, no lone surrogates."""
    if not isinstance(value, str):
        raise InvalidInputError(field, f"must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInputError(field, "contains a NUL character (\\x00); remove it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(
            field, "contains a lone surrogate (invalid unicode); pass valid UTF-8 text"
        ) from None
    if not allow_empty and is_blank(value):
        raise InvalidInputError(field, "must not be empty, whitespace or invisible characters only")
    if max_length is not None and len(value) > max_length:
        raise InvalidInputError(field, f"is {len(value)} characters long; the limit is {max_length}")
    return value


#: characters no id may hold anywhere: controls (tab, newline...), format characters (zero-width
#: space, joiners, bidi marks, BOM, soft hyphen) and line/paragraph separators
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def _check_id_characters(field: str, value: str) -> None:
    """Refuse an id that holds a character a reader cannot see, instead of rewriting it.

    Ids are compared exactly: were ``"alice "`` or ``"alice\u200b"`` trimmed to ``"alice"``, two
    spellings would silently be one user; were they kept, two users would look the same in
    every listing. So neither is accepted: no whitespace at either end (``str.isspace`` or a
    Unicode space separator, e.g. U+00A0), and no control, format or line/paragraph separator
    character anywhere. Spaces inside (``"alice smith"``) are fine.
    """
    for end, char in (("start", value[0]), ("end", value[-1])):
        if char.isspace() or unicodedata.category(char) == "Zs":
            raise InvalidInputError(
                field, f"has whitespace ({_codepoint(char)}) at its {end}; ids are compared exactly and never "
                       "trimmed, so remove it before passing the id")
    for i, char in enumerate(value):
        if unicodedata.category(char) in _HIDDEN_CATEGORIES:
            raise InvalidInputError(
                field, f"must not contain control characters or invisible (format) characters; found "
                       f"{_codepoint(char)} at position {i}: pass the id with printable characters only")


_CONTROL_NAMES = {"\t": "TAB", "\n": "NEWLINE", "\r": "CARRIAGE RETURN", "\v": "VERTICAL TAB", "\f": "FORM FEED"}


def _codepoint(char: str) -> str:
    return f"U+{ord(char):04X} {_CONTROL_NAMES.get(char) or unicodedata.name(char, '')}".rstrip()


def check_id(field: str, value: Any) -> str:
    """An identifier (user, project, session, source): 1..256 characters, taken exactly as given:
    surrounding whitespace and hidden characters are refused, not stripped
    (:func:`_check_id_characters`)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInputError(field, f"must be a string id, got {type(value).__name__}")
    value = check_text(field, str(value), max_length=MAX_ID_LENGTH)
    _check_id_characters(field, value)
    return value


#: how long a memory's key may be (a store's namespace and key together)
MAX_KEY_LENGTH = 1024


def check_key(value: Any, field: str = "key") -> str:
    """A memory's key: 1..1024 characters of text, taken exactly as given (no surrounding
    whitespace or hidden characters, as for ids); ``/`` and any other character is allowed."""
    if not isinstance(value, str):
        raise InvalidInputError(field, f"must be a string key, got {type(value).__name__}")
    value = check_text(field, value, max_length=MAX_KEY_LENGTH)
    _check_id_characters(field, value)
    return value


def check_ttl(value: Any, field: str = "ttl") -> timedelta | None:
    """A time to live: seconds (a positive number) or a ``timedelta``; None for none."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise InvalidInputError(field, f"must be a number of seconds or a timedelta, got {type(value).__name__}")
    if not math.isfinite(seconds) or seconds <= 0 or seconds > 100 * 366 * 86400:
        raise InvalidInputError(field, f"must be more than 0 seconds and at most 100 years, got {shown(value)}")
    return timedelta(seconds=seconds)


def check_optional_id(field: str, value: Any) -> str | None:
    return None if value is None else check_id(field, value)


#: one segment of a project, team or org id; segments are joined by "/" ("acme/web")
_SEGMENT = r"\w[\w.@+-]*"
_SCOPE_NAME = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT})*")


def check_scope_name(field: str, value: Any) -> str:
    """A project, team or org id, normalized to Unicode NFKC (``"ａｃｍｅ"`` is ``"acme"``).

    Surrounding whitespace and hidden characters are refused as for :func:`check_id`.

    Ids are segments of letters, digits and ``_ . - @ +`` joined by ``/`` (``acme``,
    ``acme/web``), so no id can smuggle in a separator, a wildcard or an empty segment, and a
    prefix always means whole segments: ``acme`` covers ``acme/web`` but never ``acme-corp``.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInputError(field, f"must be a string id, got {type(value).__name__}")
    text = check_text(field, str(value), max_length=MAX_ID_LENGTH)
    _check_id_characters(field, text)
    name = unicodedata.normalize("NFKC", text)
    if ":" in name and _SCOPE_NAME.fullmatch(name.replace(":", "/")):
        raise InvalidInputError(
            field, f"{name!r} uses ':' between levels; scope paths are separated by '/': use "
                   f"{name.replace(':', '/')!r} (then subtree=True on a search covers everything below a path)",
        )
    if not _SCOPE_NAME.fullmatch(name) or len(name) > MAX_ID_LENGTH:
        raise InvalidInputError(
            field, f"{name!r} is not a valid id: use letters, digits and _ . - @ + in segments joined by '/' "
                   "(e.g. 'acme' or 'acme/web'), with no spaces, empty segments or other punctuation",
        )
    return name


def check_optional_scope_name(field: str, value: Any) -> str | None:
    return None if value is None else check_scope_name(field, value)


def segment_prefix_pattern(prefix: str) -> str:
    """The ``LIKE`` pattern for ids strictly below ``prefix`` (``acme`` -> ``acme/%``); a checked
    scope name has no ``%`` or ``\\``, and ``_`` is escaped here, so the pattern matches whole
    segments only."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"


def check_identity(
    user_id: Any, project_id: Any = None, session_id: Any = None, team_id: Any = None, org_id: Any = None,
) -> Identity:
    if user_id is None:
        raise InvalidInputError(
            "user_id", "is required: pass the id of the user the memories belong to (user_id='alice')"
        )
    return Identity(
        user_id=check_id("user_id", user_id),
        project_id=check_optional_scope_name("project_id", project_id),
        session_id=check_optional_id("session_id", session_id),
        team_id=check_optional_scope_name("team_id", team_id),
        org_id=check_optional_scope_name("org_id", org_id),
    )


def check_scope_id(identity: Identity, scope: Scope, what: str = "memory") -> str:
    """The caller's id for ``scope``; a project, session, team or org ``what`` needs that id in
    the identity."""
    scope_id = identity.scope_id(scope)
    if scope_id is None:
        needed = f"{scope.value}_id"
        article = "an" if scope.value[0] in "aeiou" else "a"
        raise InvalidInputError("scope", f"{article} {scope.value} {what} needs {article} {needed} in the caller's "
                                         f"identity; pass {needed}=...")
    return scope_id


def check_enum(field: str, value: Any, enum_cls: type[E]) -> E:
    """Accept a member or its string value (case and surrounding space ignored)."""
    if isinstance(value, enum_cls):
        return value
    allowed = ", ".join(m.value for m in enum_cls)  # type: ignore[attr-defined]
    if isinstance(value, str):
        try:
            return enum_cls(value.strip().lower())
        except ValueError:
            pass
    raise InvalidInputError(field, f"must be one of {allowed}; got {shown(value)}")


def check_enum_set(field: str, value: Any, enum_cls: type[E]) -> tuple[E, ...] | None:
    """``None`` (no filter), one value, or an iterable of values."""
    if value is None:
        return None
    if isinstance(value, (str, Enum)):
        return (check_enum(field, value, enum_cls),)
    if not isinstance(value, Iterable):
        raise InvalidInputError(field, f"must be a value or a list of values, got {type(value).__name__}")
    members = tuple(dict.fromkeys(check_enum(field, v, enum_cls) for v in value))
    if not members:
        raise InvalidInputError(field, "must not be an empty list; pass None for no filter")
    return members


def check_confidence(value: Any, field: str = "confidence") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError(field, f"must be a number between 0 and 1, got {type(value).__name__}")
    value = float(value)
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise InvalidInputError(field, f"must be between 0 and 1, got {value}")
    return value


def check_int(field: str, value: Any, low: int, high: int) -> int:
    """A whole number in ``low..high``: not a bool (``True`` is no count), not a float."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(field, f"must be a whole number between {low} and {high}, got {shown(value)}")
    if not low <= value <= high:
        raise InvalidInputError(field, f"must be between {low} and {high}, got {shown(value)}")
    return value


def check_k(value: Any, max_k: int, field: str = "k") -> int:
    return check_int(field, value, 1, max_k)


def check_offset(value: Any, field: str = "offset") -> int:
    """How many rows to skip: ``0`` or more, at most what PostgreSQL's ``OFFSET`` takes."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(field, f"must be a whole number >= 0, got {shown(value)}")
    if value > MAX_OFFSET:
        raise InvalidInputError(field, f"must be at most {MAX_OFFSET} (2**63 - 1), got a {value.bit_length()}-bit "
                                       "number; page with smaller offsets")
    return value


def check_bool(field: str, value: Any) -> bool:
    """``True`` or ``False`` and nothing else: ``hard="no"`` is a truthy string, and a delete
    that takes it for yes cannot be undone."""
    if not isinstance(value, bool):
        raise InvalidInputError(field, f"must be True or False, got {shown(value)}")
    return value


def check_list(field: str, value: Any, *, max_items: int | None = None) -> list[Any]:
    """A list (or tuple, or other iterable) of items. A string, bytes or a dict is refused:
    iterating one gives characters or keys, never what the caller meant."""
    if isinstance(value, (str, bytes, bytearray, Mapping)) or not isinstance(value, Iterable):
        raise InvalidInputError(field, f"must be a list, got {type(value).__name__}")
    items = list(value)
    if max_items is not None and len(items) > max_items:
        raise InvalidInputError(field, f"has {len(items)} items; pass at most {max_items} per call")
    return items


def check_uuid(value: Any, field: str = "memory_id") -> UUID:
    if isinstance(value, UUID):
        return value
    if isinstance(value, str) and len(value) <= 64:
        try:
            return UUID(value.strip())
        except ValueError:
            pass
    given = shown(value) if not isinstance(value, str) or len(value) <= 64 else f"a {len(value)}-character string"
    what = "a memory id" if field == "memory_id" else "an id"
    raise InvalidInputError(field, f"must be {what} (a UUID such as 'a3f1…'), got {given}")


def check_metadata(value: Any, field: str = "metadata") -> dict[str, Any]:
    """A JSON object of at most 16 KiB and 32 levels, with string keys and storable strings.

    The structure is walked before it is encoded, so a NUL or a lone surrogate in a key or a
    value is named (PostgreSQL's ``jsonb`` refuses ``\\u0000`` with an untranslatable-character
    error), and an object nested thousands deep is refused without recursing that deep.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(field, f"must be a JSON object (dict), got {type(value).__name__}")
    _check_json(field, value)
    try:
        encoded = json.dumps(dict(value), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInputError(field, f"must be JSON-serialisable without NaN: {exc}") from None
    if len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        raise InvalidInputError(field, f"is larger than {MAX_METADATA_BYTES} bytes as JSON; keep it small")
    return json.loads(encoded)


def _check_json(field: str, value: Any) -> None:
    """Walk ``value`` iteratively: keys are strings, strings are storable, numbers finite,
    nesting at most :data:`MAX_METADATA_DEPTH`, and at most ``MAX_METADATA_BYTES`` nodes (each
    costs a byte or more as JSON, so a larger one could never fit). Errors name ``field`` and
    say where inside it (``at ['prefs']['theme']``)."""
    stack: list[tuple[str, Any, int]] = [("", value, 1)]
    nodes = 0
    while stack:
        where, node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_METADATA_BYTES:
            raise InvalidInputError(field, f"is larger than {MAX_METADATA_BYTES} bytes as JSON; keep it small")
        if isinstance(node, str):
            check_storable(field, f"the value at {where}", node)
        elif isinstance(node, float) and not math.isfinite(node):
            raise InvalidInputError(field, f"must be JSON-serialisable without NaN or infinity; "
                                           f"the value at {where} is {node}")
        elif isinstance(node, (Mapping, list, tuple)):
            if depth > MAX_METADATA_DEPTH:
                raise InvalidInputError(field, f"is nested more than {MAX_METADATA_DEPTH} levels deep; flatten it")
            if isinstance(node, Mapping):
                for key, item in node.items():
                    if not isinstance(key, str):
                        raise InvalidInputError(field, f"keys must be strings; the key {shown(key)} at "
                                                       f"{where or 'the top'} is not ({type(key).__name__})")
                    check_storable(field, f"the key {shown(key)} at {where or 'the top'}", key)
                    stack.append((f"{where}[{shown(key)}]" if len(where) < 200 else where, item, depth + 1))
            else:
                stack.extend((f"{where}[{i}]" if len(where) < 200 else where, item, depth + 1)
                             for i, item in enumerate(node))


def check_storable(field: str, what: str, text: str) -> None:
    """``text``, the part of ``field`` that ``what`` describes ("message 3"), can be stored in
    PostgreSQL: no NUL, no lone surrogate (:func:`check_text` checks a whole argument)."""
    if "\x00" in text:
        raise InvalidInputError(field, f"{what} contains a NUL character (\\x00); remove it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(field, f"{what} contains a lone surrogate (invalid unicode); "
                                       "pass valid UTF-8 text") from None


def check_as_of(value: Any, field: str = "as_of") -> datetime | None:
    """A point in time: an aware ``datetime``, or an ISO-8601 string. A naive one is taken as UTC
    (say so with a timezone to mean local time)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidInputError(field, f"must be a datetime or an ISO-8601 time such as "
                                           f"'2026-01-31T12:00:00+00:00', got {shown(value)}") from None
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if not isinstance(value, datetime):
        raise InvalidInputError(field, f"must be a datetime or an ISO-8601 string, got {type(value).__name__}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def check_valid_from(value: Any, *, now: datetime | None = None) -> datetime | None:
    """When a fact began to hold (event time): a time (as :func:`check_as_of` reads it) no later
    than ``now`` (default: the current time); None stays None (it holds from when it is recorded)."""
    at = check_as_of(value, "valid_from")
    if at is None:
        return None
    now = datetime.now(UTC) if now is None else now
    if at > now + timedelta(minutes=1):  # a little leeway for clocks that disagree
        raise InvalidInputError("valid_from", f"is in the future ({at.isoformat()}); a memory records what "
                                              "holds already: give the time it began, or leave valid_from out")
    return at
