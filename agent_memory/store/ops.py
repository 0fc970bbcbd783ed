"""The store's operations, written once as generators of I/O requests (see :mod:`agent_memory.ops`).

Each LangGraph op (``GetOp``, ``PutOp``, ``SearchOp``, ``ListNamespacesOp``) becomes one
generator here; :func:`batch` runs a whole batch as one operation, so
:class:`~agent_memory.store.AgentMemoryStore` serves ``batch`` and ``abatch`` from the same
source. Puts, gets and deletes go through the principal's own operations
(:meth:`~agent_memory.principal.PrincipalOps.put`, ``get_by_key``, ``delete``): the gate,
the access rules and the history of a memory apply to the store as to every entry point.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langgraph.store.base import Item, SearchItem

from .. import queries
from ..config import MemoryConfig
from ..db.requests import Embed, Op, Sql
from ..errors import InvalidInputError, MemoryNotFoundError
from ..models import Identity, MemoryItem, Rejection, Status
from ..principal import PrincipalOps
from ..queries.store import STORE_FIELD
from ..validation import (
    MAX_QUERY_LENGTH,
    check_int,
    check_metadata,
    check_offset,
    check_text,
)
from .namespaces import NAMESPACE_ROOTS, Target, check_key, encode_key, key_prefix
from .values import check_fields, check_filter, check_value, indexed_text

__all__ = [
    "DEFAULT_FIELDS",
    "MAX_LIMIT",
    "StoreSettings",
    "delete_item",
    "get_item",
    "list_namespaces",
    "put_item",
    "search_items",
]

#: the most items or namespaces one search or listing returns
MAX_LIMIT = 1000

#: no ``fields`` configured: a value's ``content`` or ``text`` string (langmem's shape), else the whole value
DEFAULT_FIELDS: tuple[str, ...] = ()

Principal = Callable[[Identity], PrincipalOps]


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """What every op of one store shares: the service's config, how to make a principal's
    operations, the index fields and the TTL defaults."""

    config: MemoryConfig
    principal: Principal
    fields: tuple[str, ...] = DEFAULT_FIELDS


def _content(settings: StoreSettings, value: Mapping[str, Any], index: Any) -> tuple[str, bool]:
    """The memory's content for ``value`` and whether a query search may find it."""
    if index is False:
        fields: tuple[str, ...] = ("$",)
        indexed = False
    else:
        fields = settings.fields if index is None else check_fields("index", index)
        indexed = True
    if not fields:  # the default: langmem's {"content": ...}, a {"text": ...}, else the whole value
        fields = next((((name,)) for name in ("content", "text") if isinstance(value.get(name), str)), ("$",))
    text = indexed_text(value, fields)
    if len(" ".join(text.split())) < settings.config.min_length:
        # the fields are missing or too short to be a memory: the whole value stands for them
        whole = indexed_text(value, ("$",))
        indexed = indexed and bool(text)
        text = whole
    return text[: settings.config.max_length], indexed


def _holder(ops: PrincipalOps, target: Target, namespace: Sequence[str], key: str) -> Op[MemoryItem | None]:
    """The memory at ``(namespace, key)``: the store item, or for a level's root namespace a
    memory saved another way whose id is ``key``."""
    assert target.scope is not None
    try:
        return (yield from ops.get_by_key(encode_key(namespace, key), scope=target.scope.value))
    except MemoryNotFoundError:
        pass
    if len(namespace) != 2:
        return None
    try:
        memory_id = UUID(key)
    except ValueError:
        return None
    try:
        item = yield from ops.get(memory_id)
    except MemoryNotFoundError:
        return None
    if (item.status is not Status.ACTIVE or item.scope is not target.scope or STORE_FIELD in item.metadata
            or item.scope_id != namespace[1]):
        return None
    return item


def _value_of(item: MemoryItem) -> dict[str, Any]:
    stored = item.metadata.get(STORE_FIELD)
    if isinstance(stored, Mapping) and isinstance(stored.get("value"), Mapping):
        return dict(stored["value"])
    return {"content": item.content}


def get_item(settings: StoreSettings, target: Target, namespace: Sequence[str], key: str, *,
             refresh: bool) -> Op[Item | None]:
    """``GetOp``: the item, or ``None`` when there is none the caller may see (or it expired)."""
    key = check_key(key)
    item = yield from _holder(settings.principal(target.identity), target, namespace, key)
    if item is None:
        return None
    if refresh and item.expires_at is not None:
        yield Sql(*queries.refresh_store_expiry([item.id]), fetch="none")
    return Item(value=_value_of(item), key=key, namespace=tuple(namespace), created_at=item.created_at,
                updated_at=item.updated_at)


def delete_item(settings: StoreSettings, target: Target, namespace: Sequence[str], key: str) -> Op[None]:
    """``PutOp`` with ``value=None``: a store item is deleted for good; a memory saved another
    way (addressed by its id at its level's root) is archived, as ``memory_delete`` does."""
    key = check_key(key)
    ops = settings.principal(target.identity)
    item = yield from _holder(ops, target, namespace, key)
    if item is not None:
        yield from ops.delete(item.id, hard=STORE_FIELD in item.metadata)
    return None


def put_item(settings: StoreSettings, target: Target, namespace: Sequence[str], key: str, value: Any, *,
             index: Any = None, ttl: float | None = None) -> Op[None]:
    """``PutOp``: store ``value`` under ``key`` (the memory holding it is revised, its earlier
    wording kept in its history); ``ttl`` minutes from now, renewed by reads with
    ``refresh_on_read``. A value the gate refuses (a secret, ...) raises :class:`InvalidInputError`."""
    assert target.scope is not None
    key = check_key(key)
    value = check_value(value)
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0):
        raise InvalidInputError("ttl", f"must be a number of minutes above 0 or None, got {ttl!r}")
    content, indexed = _content(settings, value, index)
    ops = settings.principal(target.identity)
    metadata = check_metadata({STORE_FIELD: {"ns": list(namespace), "value": value, "ttl": ttl, "indexed": indexed}},
                              "value")  # the value with its namespace must fit a memory's metadata
    encoded = encode_key(namespace, key)
    if len(namespace) == 2:
        try:
            UUID(key)
        except ValueError:
            pass
        else:  # a memory saved another way, addressed by its id: replaced by this item
            other = yield from _holder(ops, target, namespace, key)
            if other is not None and STORE_FIELD not in other.metadata:
                yield from ops.delete(other.id)
    result = yield from ops.put(encoded, content, scope=target.scope.value, source="ai", metadata=metadata,
                                ttl=None if ttl is None else ttl * 60)
    if isinstance(result, Rejection):
        raise InvalidInputError("value", f"was not stored: {result.message}")
    return None


def _item_key(row: Mapping[str, Any], namespace: tuple[str, ...]) -> str:
    stored = row.get("key")
    if isinstance(stored, str) and stored.startswith("["):
        try:
            parts = json.loads(stored)
        except ValueError:
            parts = None
        if isinstance(parts, list) and tuple(parts[:-1]) == namespace and isinstance(parts[-1], str):
            return parts[-1]
    return str(row["id"])


def search_items(
    settings: StoreSettings, target: Target, prefix: Sequence[str], *, query: Any = None, filter: Any = None,
    limit: Any = 10, offset: Any = 0, refresh: bool = False,
) -> Op[list[SearchItem]]:
    """``SearchOp``: items under ``prefix`` (whole segments) that pass ``filter``, by similarity
    to ``query`` (a cosine ``score``) or most recently updated first."""
    conditions = check_filter(filter)
    limit = check_int("limit", limit, 1, MAX_LIMIT)
    offset = check_offset(offset)
    if query is not None:
        query = check_text("query", query, max_length=MAX_QUERY_LENGTH, allow_empty=True).strip() or None
    scopes = None if target.scope is None else (target.scope,)
    where = queries.item_filter(target.identity, scopes=scopes)
    vector = None
    if query is not None:
        [vector] = yield Embed((query,), query=True)
    q, p = queries.search_store(
        where, roots=NAMESPACE_ROOTS, key_prefix=key_prefix(prefix) if prefix else None, plain_rows=len(prefix) <= 2,
        filters=queries.store_filter(conditions), vector=vector, limit=limit, offset=offset)
    rows = yield Sql(q, p)
    renew = [row["id"] for row in rows if row["renewable"]] if refresh else []
    if renew:
        yield Sql(*queries.refresh_store_expiry(renew), fetch="none")
    found = []
    for row in rows:
        namespace = tuple(row["namespace"])
        found.append(SearchItem(
            namespace=namespace, key=_item_key(row, namespace), value=row["value"], created_at=row["created_at"],
            updated_at=row["updated_at"], score=row["score"]))
    return found


def list_namespaces(
    target: Target, *, prefix: Sequence[str] | None, suffix: Sequence[str] | None, max_depth: Any,
    limit: Any, offset: Any,
) -> Op[list[tuple[str, ...]]]:
    """``ListNamespacesOp``: the namespaces the caller's items are in, matched by whole segments."""
    if max_depth is not None:
        max_depth = check_int("max_depth", max_depth, 1, 1000)
    limit = check_int("limit", limit, 1, MAX_LIMIT)
    offset = check_offset(offset)
    scopes = None if target.scope is None else (target.scope,)
    q, p = queries.list_store_namespaces(
        queries.item_filter(target.identity, scopes=scopes), roots=NAMESPACE_ROOTS, prefix=prefix, suffix=suffix,
        max_depth=max_depth, limit=limit, offset=offset)
    rows = yield Sql(q, p)
    return [tuple(row["ns"]) for row in rows]
