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
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from enum import Enum
from typing import Any, TypeVar
from uuid import UUID

from .errors import InvalidInputError
from .models import Identity, Scope

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_METADATA_BYTES",
    "MAX_QUERY_LENGTH",
    "check_as_of",
    "check_confidence",
    "check_enum",
    "check_enum_set",
    "check_id",
    "check_identity",
    "check_k",
    "check_metadata",
    "check_scope_id",
    "check_scope_name",
    "check_text",
    "check_uuid",
    "segment_prefix_pattern",
]

MAX_ID_LENGTH = 256
MAX_METADATA_BYTES = 16_384
MAX_QUERY_LENGTH = 4_000

E = TypeVar("E", bound=Enum)


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
    if not allow_empty and not value.strip():
        raise InvalidInputError(field, "must not be empty or whitespace")
    if max_length is not None and len(value) > max_length:
        raise InvalidInputError(field, f"is {len(value)} characters long; the limit is {max_length}")
    return value


def check_id(field: str, value: Any) -> str:
    """An identifier (user, project, session, source): 1..256 printable characters."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInputError(field, f"must be a string id, got {type(value).__name__}")
    value = check_text(field, str(value), max_length=MAX_ID_LENGTH).strip()
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidInputError(field, "must not contain control characters")
    return value


def check_optional_id(field: str, value: Any) -> str | None:
    return None if value is None else check_id(field, value)


#: one segment of a project, team or org id; segments are joined by "/" ("acme/web")
_SEGMENT = r"\w[\w.@+-]*"
_SCOPE_NAME = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT})*")


def check_scope_name(field: str, value: Any) -> str:
    """A project, team or org id, normalized (Unicode NFKC, surrounding space removed).

    Ids are segments of letters, digits and ``_ . - @ +`` joined by ``/`` (``acme``,
    ``acme/web``), so no id can smuggle in a separator, a wildcard or an empty segment, and a
    prefix always means whole segments: ``acme`` covers ``acme/web`` but never ``acme-corp``.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInputError(field, f"must be a string id, got {type(value).__name__}")
    text = check_text(field, str(value), max_length=MAX_ID_LENGTH)
    name = unicodedata.normalize("NFKC", text).strip()
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
    raise InvalidInputError(field, f"must be one of {allowed}; got {value!r}")


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


def check_k(value: Any, max_k: int, field: str = "k") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(field, f"must be a whole number between 1 and {max_k}, got {value!r}")
    if not 1 <= value <= max_k:
        raise InvalidInputError(field, f"must be between 1 and {max_k}, got {value}")
    return value


def check_uuid(value: Any, field: str = "memory_id") -> UUID:
    if isinstance(value, UUID):
        return value
    if isinstance(value, str) and len(value) <= 64:
        try:
            return UUID(value.strip())
        except ValueError:
            pass
    shown = repr(value) if not isinstance(value, str) or len(value) <= 64 else f"a {len(value)}-character string"
    what = "a memory id" if field == "memory_id" else "an id"
    raise InvalidInputError(field, f"must be {what} (a UUID such as 'a3f1…'), got {shown}")


def check_metadata(value: Any) -> dict[str, Any]:
    """A JSON object of at most 16 KiB with string keys and storable strings."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError("metadata", f"must be a JSON object (dict), got {type(value).__name__}")
    try:
        encoded = json.dumps(dict(value), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError("metadata", f"must be JSON-serialisable without NaN: {exc}") from None
    check_text("metadata", encoded)
    if len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        raise InvalidInputError("metadata", f"is larger than {MAX_METADATA_BYTES} bytes as JSON; keep it small")
    return json.loads(encoded)


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
                                           f"'2026-01-31T12:00:00+00:00', got {value!r}") from None
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if not isinstance(value, datetime):
        raise InvalidInputError(field, f"must be a datetime or an ISO-8601 string, got {type(value).__name__}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
