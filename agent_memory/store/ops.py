"""The store's operations, written once as generators of I/O requests (see :mod:`agent_memory.ops`).

Each LangGraph op (``GetOp``, ``PutOp``, ``SearchOp``, ``ListNamespacesOp``) becomes one
generator here; :func:`batch` runs a whole batch as one operation, so
:class:`~agent_memory.store.AgentMemoryStore` serves ``batch`` and ``abatch`` from the same
source. Puts, gets and deletes go through the principal's own operations
(:meth:`~agent_memory.principal.PrincipalOps.put`, ``get_by_key``, ``delete``): the gate,
the access rules and the history of a memory apply to the store as to every entry point.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langgraph.store.base import Item, SearchItem
from psycopg import errors as pg_errors

from .. import queries
from ..config import MemoryConfig
from ..db.requests import Embed, Op, Sql
from ..errors import AgentMemoryError, InvalidInputError, MemoryNotFoundError
from ..gate import normalize_content
from ..models import Identity, MemoryItem, Rejection, Scope, Status
from ..ops import _gate as gate_memory
from ..ops import make_new_memory, put_memory
from ..principal import PrincipalOps
from ..queries.store import STORE_FIELD
from ..queries.types import Query
from ..validation import (
    MAX_QUERY_LENGTH,
    check_int,
    check_metadata,
    check_offset,
    check_text,
)
from .namespaces import NAMESPACE_ROOTS, Target, check_key, encode_key, key_prefix
from ..withheld import metadata_rejection
from .values import check_fields, check_filter, check_value, field_texts, indexed_text

__all__ = [
    "DEFAULT_FIELDS",
    "MAX_LIMIT",
    "StoreSettings",
    "delete_item",
    "field_paths",
    "field_texts_to_embed",
    "get_item",
    "list_namespaces",
    "put_item",
    "put_text",
    "search_items",
]

#: the most items or namespaces one search or listing returns
MAX_LIMIT = 1000

#: no ``fields`` configured: a value's ``content`` or ``text`` string (langmem's shape), else the whole value
DEFAULT_FIELDS: tuple[str, ...] = ()

Principal = Callable[[Identity], PrincipalOps]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """What every op of one store shares: the service's config, how to make a principal's
    operations, the index fields and the TTL defaults."""

    config: MemoryConfig
    principal: Principal
    fields: tuple[str, ...] = DEFAULT_FIELDS
    #: False for a store built with ``index=None``: nothing is embedded (puts store no vector,
    #: a search's query is ignored), as in LangGraph's stores without an index
    embeds: bool = True
    #: the index config's ``distance_type``: how a query search scores (``queries.STORE_DISTANCES``)
    distance: str = "cosine"
    #: a store with an index config: the name of its embedder (each indexed field path gets its
    #: own vector in ``store_vectors``, and a query search scores an item by its best field);
    #: None: the memory's one vector is the item's
    space: str | None = None
    #: the space is the service's own embedder, so a memory saved another way (no field
    #: vectors) is scored by its own vector
    own_space: bool = True
    #: the field paths embedded when a put gives no ``index`` (LangGraph's default: ``("$",)``)
    vector_fields: tuple[str, ...] = ("$",)


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


def _renew(ids: list[Any]) -> Op[None]:
    """Start the TTL of ``ids`` again after a read (``refresh_on_read``), never failing the read.

    The renewal skips rows others hold (:func:`~agent_memory.queries.refresh_store_expiry`), so
    it does not wait; it also runs under a savepoint, so should another transaction still get in
    its way (a deadlock, a serialization failure) only the renewal is undone, and, being safe to
    repeat, it is tried once more before it is left for the next read."""
    q, p = queries.refresh_store_expiry(ids)
    failure: Exception | None = None
    for _ in range(2):
        yield Sql(*queries.renewal_savepoint("set"), fetch="none")
        try:
            yield Sql(q, p, fetch="none")
        except (pg_errors.DeadlockDetected, pg_errors.SerializationFailure) as exc:  # 40P01, 40001
            failure = exc
            yield Sql(*queries.renewal_savepoint("undo"), fetch="none")
            continue
        yield Sql(*queries.renewal_savepoint("release"), fetch="none")
        return
    logger.warning("renewing the TTL of %d store items after a read failed twice (%s); the next read renews "
                   "them", len(ids), failure)


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
        yield from _renew([item.id])
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
        if STORE_FIELD in item.metadata:
            yield Sql(*queries.delete_store_vectors(item.id), fetch="none")
    return None


@dataclass(frozen=True, slots=True)
class _Put:
    """A checked ``PutOp``: the memory it saves (``content`` under ``key``, with ``metadata``)."""

    key: str
    content: str
    metadata: dict[str, Any]
    ttl: float | None


def _checked_put(settings: StoreSettings, namespace: Sequence[str], key: Any, value: Any, index: Any,
                 ttl: Any) -> _Put:
    key = check_key(key)
    value = check_value(value)
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0):
        raise InvalidInputError("ttl", f"must be a number of minutes above 0 or None, got {ttl!r}")
    content, indexed = _content(settings, value, index)
    metadata = check_metadata({STORE_FIELD: {"ns": list(namespace), "value": value, "ttl": ttl, "indexed": indexed}},
                              "value")  # the value with its namespace must fit a memory's metadata
    return _Put(key, content, metadata, ttl)


def _put_args(target: Target, namespace: Sequence[str], put: _Put) -> dict[str, Any]:
    """The arguments of the principal's ``put`` (and of :func:`agent_memory.ops.make_new_memory`)."""
    assert target.scope is not None
    return {"key": encode_key(namespace, put.key), "scope": target.scope.value, "source": "ai",
            "metadata": put.metadata, "ttl": None if put.ttl is None else put.ttl * 60}


def put_text(settings: StoreSettings, target: Target, namespace: Sequence[str], key: Any, value: Any, *,
             index: Any = None, ttl: Any = None, known: Callable[[str], bool] = lambda text: False) -> str | None:
    """The text :func:`put_item` would have embedded for this put, or None when it would stop
    before embedding (a bad argument, a value the gate refuses: a secret is never sent to an
    embedding provider). Pure: a batch embeds the texts of all its puts in one call.
    ``known``: whether a text has a vector already (it is not embedded, so it is not gated here;
    the put gates it as always)."""
    if target.scope is None or not settings.embeds or index is False:
        return None
    try:
        put = _checked_put(settings, namespace, key, value, index, ttl)
        if known(normalize_content(put.content)):
            return normalize_content(put.content)
        args = _put_args(target, namespace, put)
        text, rejection = gate_memory(settings.config, make_new_memory(put.content, **args))
    except AgentMemoryError:
        return None
    return None if rejection is not None else text


def field_paths(settings: StoreSettings, index: Any) -> tuple[str, ...]:
    """The field paths a put embeds one by one (none for ``index=False`` or a store without an
    index config): the put's own ``index`` list, else the index config's ``fields``."""
    if settings.space is None or not settings.embeds or index is False:
        return ()
    return settings.vector_fields if index is None else check_fields("index", index)


def field_texts_to_embed(settings: StoreSettings, value: Any, index: Any) -> list[tuple[str, str]]:
    """``(path, text)`` per field a put embeds on its own, or none when the put would stop
    before embedding (a bad argument, a value holding a secret: a secret is never sent to an
    embedding provider). Pure: the store embeds the texts of a whole batch in one call."""
    try:
        paths = field_paths(settings, index)
        if not paths:
            return []
        value = check_value(value)
    except AgentMemoryError:
        return []
    if metadata_rejection(value, "value") is not None:
        return []
    return field_texts(value, paths)


def put_item(settings: StoreSettings, target: Target, namespace: Sequence[str], key: str, value: Any, *,
             index: Any = None, ttl: float | None = None,
             field_vectors: Sequence[tuple[str, Sequence[float]]] = ()) -> Op[None]:
    """``PutOp``: store ``value`` under ``key`` (the memory holding it is revised, its earlier
    wording kept in its history); ``ttl`` minutes from now, renewed by reads with
    ``refresh_on_read``. A value the gate refuses (a secret, ...) raises :class:`InvalidInputError`.
    ``field_vectors``: ``(path, vector)`` per indexed field (:func:`field_paths`), embedded by
    the store beforehand; they replace the item's earlier ones."""
    assert target.scope is not None
    put = _checked_put(settings, namespace, key, value, index, ttl)
    ops = settings.principal(target.identity)
    if len(namespace) == 2:
        try:
            UUID(put.key)
        except ValueError:
            pass
        else:  # a memory saved another way, addressed by its id: replaced by this item
            other = yield from _holder(ops, target, namespace, put.key)
            if other is not None and STORE_FIELD not in other.metadata:
                yield from ops.delete(other.id)
    args = _put_args(target, namespace, put)
    new = make_new_memory(put.content, **args)
    result = yield from put_memory(ops.config, ops.identity, new, embed=settings.embeds and index is not False)
    if isinstance(result, Rejection):
        raise InvalidInputError("value", f"was not stored: {result.message}")
    if settings.space is not None:
        yield Sql(*queries.delete_store_vectors(result.id), fetch="none")
        if field_vectors:
            yield Sql(*queries.insert_store_vectors(result.scope.value, result.scope_id, result.id, result.user_id,
                                                    settings.space, field_vectors), fetch="none")
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
    limit: Any = 10, offset: Any = 0, refresh: bool = False, query_vector: Sequence[float] | None = None,
) -> Op[list[SearchItem]]:
    """``SearchOp``: items under ``prefix`` (whole segments) that pass ``filter``, by similarity
    to ``query`` (a ``score`` of the index config's ``distance_type``) or most recently updated
    first. ``query_vector``: the query embedded by the store's own embedder (a store with an
    index config), compared with the items' field vectors."""
    conditions = check_filter(filter)
    limit = check_int("limit", limit, 1, MAX_LIMIT)
    offset = check_offset(offset)
    if query is not None:
        query = check_text("query", query, max_length=MAX_QUERY_LENGTH, allow_empty=True).strip() or None
        if not settings.embeds:  # no index: LangGraph's stores ignore the query too
            query = None
    scopes = None if target.scope is None else (target.scope,)
    where = queries.item_filter(target.identity, scopes=scopes)
    vector = None
    if query is not None and settings.space is not None:
        if query_vector is None:
            raise InvalidInputError("query", "was not embedded by the store; call the store's search")
        vector = list(query_vector)
    elif query is not None:
        [vector] = yield Embed((query,), query=True)
    q, p = queries.search_store(
        where, roots=NAMESPACE_ROOTS, key_prefix=key_prefix(prefix) if prefix else None, plain_rows=len(prefix) <= 2,
        filters=queries.store_filter(conditions), vector=vector, limit=limit, offset=offset,
        distance=settings.distance, space=None if query is None else settings.space, own_vectors=settings.own_space)
    rows = yield Sql(q, p)
    renew = [row["id"] for row in rows if row["renewable"]] if refresh else []
    if renew:
        yield from _renew(renew)
    found = []
    for row in rows:
        namespace = tuple(row["namespace"])
        found.append(SearchItem(
            namespace=namespace, key=_item_key(row, namespace), value=row["value"], created_at=row["created_at"],
            updated_at=row["updated_at"], score=row["score"]))
    return found


def list_namespaces(
    target: Target, *, prefix: Sequence[str] | None, suffix: Sequence[str] | None, max_depth: Any,
    limit: Any, offset: Any, every_project: bool = False,
) -> Op[list[tuple[str, ...]]]:
    """``ListNamespacesOp``: the namespaces the caller's items are in, matched by whole segments.

    ``every_project``: the listing names no project (``("projects", "*")``, or no level at all),
    so the projects the caller reads besides the identity's own are listed too, each under the
    tenancy rule with that project named (as ``get`` and ``search`` of ``("projects", P)`` read it)."""
    if max_depth is not None:
        max_depth = check_int("max_depth", max_depth, 1, 1000)
    limit = check_int("limit", limit, 1, MAX_LIMIT)
    offset = check_offset(offset)
    scopes = None if target.scope is None else (target.scope,)

    def listing(who: Identity, levels: tuple[Scope, ...] | None, first: int, count: int) -> Query:
        return queries.list_store_namespaces(
            queries.item_filter(who, scopes=levels), roots=NAMESPACE_ROOTS, prefix=prefix, suffix=suffix,
            max_depth=max_depth, limit=count, offset=first)

    if not every_project:
        rows = yield Sql(*listing(target.identity, scopes, offset, limit))
        return [tuple(row["ns"]) for row in rows]
    found: set[tuple[str, ...]] = set()
    mine = target.identity.project_id
    projects = queries.readable_projects(target.identity.user_id)
    if target.scope is None or mine is not None:  # the identity's own levels, and its projects, in one statement
        projects = queries.listed_with(listing(target.identity, scopes, 0, offset + limit), projects)
    rows = yield Sql(*projects)
    found.update(tuple(row["ns"]) for row in rows if row.get("ns") is not None)
    for row in rows:
        if row["project_id"] is not None and row["project_id"] != mine:
            who = dataclasses.replace(target.identity, project_id=row["project_id"])
            found.update(tuple(r["ns"]) for r in (yield Sql(*listing(who, (Scope.PROJECT,), 0, offset + limit))))
    return sorted(found)[offset:offset + limit]  # tuple order, segments by code point, as the statement orders
