"""Custom memory types: a deployment's own kinds of memory next to the eight built-in ones.

``MemoryConfig(custom_memory_types={"incident": "An outage or production incident and its
cause"})`` (or ``MEMORY_CUSTOM_TYPES``) lets a service write, search and filter memories of type
``incident``; the description is what the extraction model and the ``memory_save`` tool are told
about it. The rules for a custom type, checked when the config is built: a name like the built-in
ones (lowercase letters, digits and ``_``, 2 to 32 characters, starting with a letter), not a
built-in name, a description of 1 to :data:`MAX_DESCRIPTION` characters, at most
:data:`MAX_CUSTOM_TYPES` of them.

Reading is never refused: a stored memory of a type the reading config does not list still reads
back (:class:`~agent_memory.models.MemoryType` makes the member on first use). What is checked
against the config is what a caller *asks for*: the type of a new or edited memory and a search
or list filter (:func:`check_memory_type`, :func:`check_memory_types`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

from .errors import InvalidInputError
from .models import MEMORY_TYPE_NAME, MemoryType
from .validation import shown

if TYPE_CHECKING:
    from .config import MemoryConfig

__all__ = [
    "MAX_CUSTOM_TYPES", "MAX_DESCRIPTION", "MAX_INSTRUCTIONS", "check_memory_type", "check_memory_types",
    "custom_types_problem", "known_types", "memory_type_descriptions", "normalized_custom_types",
]

MAX_CUSTOM_TYPES = 16
MAX_DESCRIPTION = 300
MAX_INSTRUCTIONS = 4000


def custom_types_problem(value: Any) -> str | None:
    """Why ``value`` is not a valid set of custom types (``None``: it is)."""
    if not isinstance(value, Mapping):
        return f"a mapping of type names to descriptions, got {type(value).__name__}"
    if len(value) > MAX_CUSTOM_TYPES:
        return f"at most {MAX_CUSTOM_TYPES} custom types, got {len(value)}"
    for name, description in value.items():
        if not isinstance(name, str) or MEMORY_TYPE_NAME.fullmatch(name) is None:
            return (f"type names of lowercase letters, digits and '_' (2 to 32 characters, starting with a "
                    f"letter), like the built-in ones, got {name!r}")
        if name in MemoryType.values():
            return f"new names: {name!r} is a built-in type (built-in: {', '.join(MemoryType.values())})"
        if not isinstance(description, str) or not description.strip():
            return f"a description for each type (what it holds, for the model), got {description!r} for {name!r}"
        if len(description) > MAX_DESCRIPTION or "\x00" in description:
            return f"descriptions of at most {MAX_DESCRIPTION} characters, {name!r} has {len(description)}"
    return None


def normalized_custom_types(value: Mapping[str, str]) -> dict[str, str]:
    """``value`` (valid) with each description's runs of white space folded to one space."""
    return {name: " ".join(description.split()) for name, description in value.items()}


def memory_type_descriptions(raw: str) -> dict[str, str]:
    """``MEMORY_CUSTOM_TYPES``: a JSON object (``{"incident": "An outage ..."}``) or
    ``name=description`` pairs separated by ``;`` (``incident=An outage;runbook=A procedure``)."""
    raw = raw.strip()
    if raw.startswith("{"):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise ValueError(raw) from None
        if not isinstance(value, dict):
            raise ValueError(raw)
        return value
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in raw.split(";"))):
        name, sep, description = part.partition("=")
        if not sep:
            raise ValueError(raw)
        out[name.strip()] = description.strip()
    return out


def _custom(config: MemoryConfig | None) -> Mapping[str, str]:
    return {} if config is None else config.custom_memory_types


def known_types(config: MemoryConfig | None) -> tuple[str, ...]:
    """Every type a caller of this config may write or filter by: the built-in ones, then the
    custom ones (``None``: the built-in ones only)."""
    return (*MemoryType.values(), *_custom(config))


def check_memory_type(field: str, value: Any, config: MemoryConfig | None) -> MemoryType:
    """``value`` as a :class:`MemoryType` this config knows (case and surrounding space ignored);
    :class:`InvalidInputError` listing the known types otherwise."""
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, str):
        name = value.strip().lower()
        if name in MemoryType.values() or name in _custom(config):
            return MemoryType(name)
    hint = "" if _custom(config) else " (add your own with MEMORY_CUSTOM_TYPES)"
    raise InvalidInputError(field, f"must be one of {', '.join(known_types(config))}{hint}; got {shown(value)}")


def check_memory_types(field: str, value: Any, config: MemoryConfig | None) -> tuple[MemoryType, ...] | None:
    """A type filter: ``None`` (no filter), one type, or a list of them, each known to ``config``."""
    if value is None:
        return None
    if isinstance(value, (str, Enum)):
        return (check_memory_type(field, value, config),)
    if not isinstance(value, Iterable):
        raise InvalidInputError(field, f"must be a value or a list of values, got {type(value).__name__}")
    members = tuple(dict.fromkeys(check_memory_type(field, v, config) for v in value))
    if not members:
        raise InvalidInputError(field, "must not be an empty list; pass None for no filter")
    return members
