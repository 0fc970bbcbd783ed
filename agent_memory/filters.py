"""Filters on JSON metadata, parsed once: one language for memories and the LangGraph store.

A filter is a dict. Each key names a top-level field of the JSON object being filtered (a
memory's ``metadata``, a store item's value) and says what it must hold::

    {"tag": "billing"}                              # equality (numbers as numbers: 1 == 1.0)
    {"priority": {"$gte": 2, "$lt": 5}}             # numeric comparison
    {"due": {"$lt": "2026-12-01"}}                  # an ISO date compares as a time
    {"lang": {"$in": ["en", "pt"]}, "draft": {"$ne": True}}
    {"tags": {"$contains": "urgent"}}               # an element of a list (or a sub-object)
    {"reviewed_by": {"$exists": False}}
    {"$or": [{"team": "web"}, {"priority": {"$gte": 4}}]}

Keys of one dict must all hold (``$and`` says the same with a list); ``$or`` takes a list of
filters, ``$not`` one. A filter is bounded so that no caller can make one search slow for
everyone: at most :data:`MAX_FILTER_CONDITIONS` field tests, :data:`MAX_FILTER_DEPTH` levels of
``$and``/``$or``/``$not``, and :data:`MAX_FILTER_VALUES` values in its ``$in``/``$nin`` lists;
keys and values are checked as stored metadata is (no NUL, no lone surrogate, no larger than
metadata can be). Comparisons (``$gt``, ``$gte``, ``$lt``, ``$lte``) take a number (compared
with numbers only), a string (compared with strings by code point), or a time: a ``datetime``,
a ``date`` or an ISO-8601 date string (``"2026-11-01"``, ``"2026-11-01T09:30:00+01:00"``), which
compares with stored strings that are ISO times, as times (no zone means UTC). A key that is
missing passes only ``$ne``, ``$nin`` and ``$exists: False``.

Nothing here touches the database: :func:`parse_filter` checks a filter and returns its
:data:`Filter` tree, which :func:`agent_memory.queries.filter_sql` turns into SQL whose values
all travel as parameters.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Union

from .errors import InvalidInputError
from .validation import MAX_METADATA_BYTES, check_metadata, check_storable, shown

__all__ = [
    "COMPARISONS",
    "FILTER_OPERATORS",
    "AllOf",
    "AnyOf",
    "Condition",
    "Filter",
    "MAX_FILTER_CONDITIONS",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_VALUES",
    "Not",
    "parse_filter",
]

#: the comparison operators, which order numbers, strings or times
COMPARISONS = ("$gt", "$gte", "$lt", "$lte")

#: the operators a field may use (a bare value means ``$eq``)
FILTER_OPERATORS = ("$eq", "$ne", *COMPARISONS, "$in", "$nin", "$contains", "$exists")

_LOGICAL = ("$and", "$or", "$not")

#: how deep ``$and``/``$or``/``$not`` may nest (8: eight operators inside one another)
MAX_FILTER_DEPTH = 8
#: how many field tests one filter may hold (``{"p": {"$gt": 1, "$lt": 9}}`` is two;
#: ``$and``/``$or``/``$not`` themselves count none, so ``{"$or": [64 tests]}`` is allowed)
MAX_FILTER_CONDITIONS = 64
#: how many values the ``$in``/``$nin`` lists of one filter may hold in all: each value is one
#: more comparison for every row a search reads (200,000 took seconds per search)
MAX_FILTER_VALUES = 1_000

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:?\d{2})?)?")


@dataclass(frozen=True)
class Condition:
    """``key`` holds what ``op`` says of ``operand``; ``temporal`` comparisons read both as times."""

    key: str
    op: str
    operand: Any
    temporal: bool = False


@dataclass(frozen=True)
class AllOf:
    parts: tuple[Filter, ...]


@dataclass(frozen=True)
class AnyOf:
    parts: tuple[Filter, ...]


@dataclass(frozen=True)
class Not:
    part: Filter


Filter = Union[Condition, AllOf, AnyOf, Not]


def parse_filter(filter: Any, field: str = "filter") -> Filter | None:
    """``filter`` checked and parsed (``None`` or ``{}``: no filter). Malformed filters raise
    :class:`InvalidInputError` naming the offending part and showing the form to use."""
    if filter is None:
        return None
    tree = _parse(filter, field, 0, _Budget(field))
    return None if isinstance(tree, AllOf) and not tree.parts else tree


@dataclass
class _Budget:
    """What a filter has used so far of :data:`MAX_FILTER_CONDITIONS` and :data:`MAX_FILTER_VALUES`
    (``field``: the whole filter's name, which an error over its total names)."""

    field: str
    conditions: int = 0
    values: int = 0


def _parse(filter: Any, field: str, depth: int, budget: _Budget) -> Filter:
    if not isinstance(filter, Mapping):
        raise InvalidInputError(field, f"must be a dict such as {{'tag': 'billing'}} or "
                                       f"{{'priority': {{'$gte': 2}}}}, got {type(filter).__name__}")
    if depth > MAX_FILTER_DEPTH:
        raise InvalidInputError(field, f"nests $and/$or/$not deeper than {MAX_FILTER_DEPTH} levels (the limit); "
                                       "flatten it")
    if depth and not filter:  # {} alone is no filter; inside $and/$or/$not it is a slip (and has no SQL)
        raise InvalidInputError(field, "is an empty filter; give it a condition such as {'tag': 'billing'}, "
                                       "or leave it out")
    parts: list[Filter] = []
    for key, wanted in filter.items():
        _check_key(key, field)
        where = f"{field}[{shown(key)}]"
        if key in ("$and", "$or"):
            if isinstance(wanted, (str, bytes)) or not isinstance(wanted, Sequence) or not wanted:
                raise InvalidInputError(where, f"takes a non-empty list of filters, e.g. {{'{key}': [{{'a': 1}}, "
                                               f"{{'b': 2}}]}}, got {shown(wanted)}")
            subs = tuple(_parse(sub, f"{where}[{i}]", depth + 1, budget) for i, sub in enumerate(wanted))
            parts.append(AllOf(subs) if key == "$and" else AnyOf(subs))
        elif key == "$not":
            parts.append(Not(_parse(wanted, where, depth + 1, budget)))
        elif key.startswith("$"):
            raise InvalidInputError(where, f"{key!r} is not a logical operator ($and, $or, $not); field operators "
                                           f"go inside a field: {{'priority': {{'{key}': ...}}}}")
        else:
            found = _conditions(key, wanted, where, budget)
            budget.conditions += len(found)
            if budget.conditions > MAX_FILTER_CONDITIONS:
                raise InvalidInputError(budget.field, f"holds more than {MAX_FILTER_CONDITIONS} conditions (the limit; "
                                                      "each field test counts one); narrow it down or split the search")
            parts.extend(found)
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def _check_key(key: Any, field: str) -> None:
    """A key is checked as a key of stored metadata is: a non-empty string PostgreSQL can store
    (no NUL, no lone surrogate), no longer than metadata may be (a longer one names no field)."""
    if not isinstance(key, str) or not key:
        raise InvalidInputError(field, f"keys must be non-empty strings, got {shown(key)}")
    check_storable(field, f"the key {shown(key)}", key)
    if len(key.encode("utf-8")) > MAX_METADATA_BYTES:
        raise InvalidInputError(field, f"the key {shown(key)} is {len(key.encode('utf-8'))} bytes long; no stored "
                                       f"field is named by more than {MAX_METADATA_BYTES} bytes (the limit of "
                                       "metadata), so shorten it")


def _conditions(key: str, wanted: Any, where: str, budget: _Budget) -> list[Filter]:
    operators = [k for k in wanted if isinstance(k, str) and k.startswith("$")] if isinstance(wanted, Mapping) else []
    if isinstance(wanted, Mapping) and operators and len(operators) != len(wanted):
        raise InvalidInputError(where, "mixes operators ('$gt', ...) with plain keys; use "
                                       "{'$gt': 1, '$lt': 9}, or {'$eq': {...}} to compare with an object")
    if not operators:
        return [_condition(key, "$eq", wanted, where, budget)]
    return [_condition(key, op, operand, where, budget) for op, operand in wanted.items()]


def _condition(key: str, op: str, operand: Any, where: str, budget: _Budget) -> Condition:
    if op not in FILTER_OPERATORS:
        raise InvalidInputError(where, f"{op!r} is not an operator; use one of {', '.join(FILTER_OPERATORS)}")
    if op == "$exists":
        if not isinstance(operand, bool):
            raise InvalidInputError(where, f"$exists takes true or false, got {shown(operand)}")
        return Condition(key, op, operand)
    if op in ("$in", "$nin"):
        if isinstance(operand, (str, bytes)) or not isinstance(operand, Sequence):
            raise InvalidInputError(where, f"{op} takes a list of values, e.g. ['en', 'pt'], got {shown(operand)}")
        budget.values += len(operand)
        if budget.values > MAX_FILTER_VALUES:
            raise InvalidInputError(where, f"{op} brings the filter's $in/$nin lists to {budget.values} values; "
                                           f"the limit is {MAX_FILTER_VALUES} in all: shorten the list, or filter on "
                                           "a field those memories share (such as a tag)")
        return Condition(key, op, [_json(x, where) for x in operand])
    when = _time(operand, literal_only=op not in COMPARISONS)
    if when is not None:
        return Condition(key, op, when, temporal=True)
    if op in COMPARISONS:
        number = isinstance(operand, (int, float)) and not isinstance(operand, bool)
        if not (number or isinstance(operand, str)) or (number and not math.isfinite(operand)):
            raise InvalidInputError(where, f"{op} compares with a number, a string or a date, got {shown(operand)}")
    return Condition(key, op, _json(operand, where))


def _time(operand: Any, *, literal_only: bool) -> datetime | None:
    """``operand`` as an aware time when it is one: a ``datetime``/``date`` always, an ISO date string
    only in a comparison (``$eq`` on a string stays string equality)."""
    if isinstance(operand, datetime):
        return operand if operand.tzinfo is not None else operand.replace(tzinfo=UTC)
    if isinstance(operand, date):
        return datetime(operand.year, operand.month, operand.day, tzinfo=UTC)
    if literal_only or not isinstance(operand, str) or not _ISO_DATE.fullmatch(operand.strip()):
        return None
    try:
        parsed = datetime.fromisoformat(operand.strip().replace("z", "Z"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _json(value: Any, where: str) -> Any:
    """A JSON operand, checked as metadata is (finite numbers, storable strings, bounded size)."""
    return check_metadata({"v": value}, where)["v"]
