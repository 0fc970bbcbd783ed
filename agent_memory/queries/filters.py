"""Filters as SQL: a parsed :data:`agent_memory.filters.Filter` over a ``jsonb`` expression, and the
narrowing of a read by when a memory was written and where it came from.

Everything a caller typed (keys, operands, times) travels as a parameter; the parameter names
carry a ``prefix`` so two filters can share one statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from ..filters import AllOf, Condition, Filter, Not
from .types import Query

__all__ = ["filter_sql", "narrowing"]

_COMPARE = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<=", "$eq": "=", "$ne": "<>"}


def filter_sql(tree: Filter | None, value: str, *, prefix: str = "mf") -> Query:
    """SQL: the JSON object ``value`` (an expression such as ``m.metadata``) passes ``tree``.

    Equality compares JSON values (``1`` equals ``1.0``; objects and lists as wholes); ``$gt``..
    ``$lte`` compare numbers with numbers and strings with strings (code points), never a number
    with a string; a time compares with stored strings that read as ISO times
    (``agent_memory_timestamp``, migration ``0015_metadata_filters``); ``$contains`` is JSON
    containment (an element of a list, or a sub-object). A missing key is ``NULL``, which only
    ``$ne``, ``$nin`` and ``$exists: false`` let through."""
    params: dict[str, Any] = {}
    if tree is None:
        return sql.SQL("TRUE"), params
    counter = [0]
    return _node(tree, sql.SQL(value), prefix, params, counter), params


def _node(tree: Filter, value: sql.Composable, prefix: str, params: dict[str, Any], counter: list[int]
          ) -> sql.Composable:
    if isinstance(tree, Condition):
        return _condition(tree, value, prefix, params, counter)
    if isinstance(tree, Not):
        return sql.SQL("NOT COALESCE(") + _node(tree.part, value, prefix, params, counter) + sql.SQL(", false)")
    joiner = " AND " if isinstance(tree, AllOf) else " OR "
    inner: list[sql.Composable] = [sql.SQL("COALESCE(") + _node(p, value, prefix, params, counter) + sql.SQL(", false)")
                                   for p in tree.parts]  # a parsed filter never has an empty $and/$or
    return sql.SQL("(") + sql.SQL(joiner).join(inner) + sql.SQL(")")


def _condition(c: Condition, value: sql.Composable, prefix: str, params: dict[str, Any], counter: list[int]
               ) -> sql.Composable:
    i = counter[0]
    counter[0] += 1
    k, v = f"{prefix}{i}_key", f"{prefix}{i}_val"
    params[k] = c.key
    field = sql.SQL("({value} -> %({k})s)").format(value=value, k=sql.SQL(k))
    text = sql.SQL("({value} ->> %({k})s)").format(value=value, k=sql.SQL(k))
    name = sql.SQL(v)
    if c.op == "$exists":
        test = sql.SQL("({value} ? %({k})s)").format(value=value, k=sql.SQL(k))
        return test if c.operand else sql.SQL("NOT ") + test
    if c.temporal:
        params[v] = c.operand
        compared = sql.SQL("agent_memory_timestamp(CASE WHEN jsonb_typeof({field}) = 'string' THEN {text} END)"
                           ).format(field=field, text=text)
        if c.op == "$ne":
            return sql.SQL("({compared} IS DISTINCT FROM %({v})s::timestamptz)").format(compared=compared, v=name)
        return sql.SQL("COALESCE({compared} {op} %({v})s::timestamptz, false)").format(
            compared=compared, op=sql.SQL(_COMPARE[c.op]), v=name)
    if c.op == "$eq":
        params[v] = Jsonb(c.operand)
        return sql.SQL("COALESCE({field} = %({v})s::jsonb, false)").format(field=field, v=name)
    if c.op == "$ne":
        params[v] = Jsonb(c.operand)
        return sql.SQL("({field} IS DISTINCT FROM %({v})s::jsonb)").format(field=field, v=name)
    if c.op in ("$in", "$nin"):
        params[v] = [Jsonb(x) for x in c.operand]
        test = sql.SQL("COALESCE({field} = ANY(%({v})s::jsonb[]), false)").format(field=field, v=name)
        return test if c.op == "$in" else sql.SQL("NOT ") + test
    if c.op == "$contains":
        params[v] = Jsonb(c.operand)
        return sql.SQL("COALESCE({field} @> %({v})s::jsonb, false)").format(field=field, v=name)
    op = sql.SQL(_COMPARE[c.op])
    if isinstance(c.operand, str):
        params[v] = c.operand
        return sql.SQL("(jsonb_typeof({field}) = 'string' AND {text} COLLATE \"C\" {op} %({v})s)").format(
            field=field, text=text, op=op, v=name)
    params[v] = Jsonb(c.operand)
    return sql.SQL("(jsonb_typeof({field}) = 'number' AND {field} {op} %({v})s::jsonb)").format(
        field=field, op=op, v=name)


def narrowing(
    metadata: Filter | None = None,
    *,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    updated_after: datetime | None = None,
    updated_before: datetime | None = None,
    sources: Sequence[str] | None = None,
    source_ids: Sequence[str] | None = None,
) -> Query | None:
    """SQL on ``m``: a metadata filter, ``created_at``/``updated_at`` ranges (after: at or after,
    before: strictly before) and the origin (``source``, ``source_id``); ``None`` when nothing
    narrows, so a read without filters keeps its indexed plan."""
    clauses: list[sql.Composable] = []
    filt, params = filter_sql(metadata, "m.metadata")
    if metadata is not None:
        clauses.append(filt)
    for column, bound, op, name in (("created_at", created_after, ">=", "n_ca"),
                                    ("created_at", created_before, "<", "n_cb"),
                                    ("updated_at", updated_after, ">=", "n_ua"),
                                    ("updated_at", updated_before, "<", "n_ub")):
        if bound is not None:
            params[name] = bound
            clauses.append(sql.SQL(f"m.{column} {op} %({name})s::timestamptz"))
    if sources is not None:
        params["n_sources"] = list(sources)
        clauses.append(sql.SQL("m.source = ANY(%(n_sources)s)"))
    if source_ids is not None:
        params["n_source_ids"] = list(source_ids)
        clauses.append(sql.SQL("m.source_id = ANY(%(n_source_ids)s)"))
    if not clauses:
        return None
    return sql.SQL("(") + sql.SQL(" AND ").join(clauses) + sql.SQL(")"), params
