"""``AgentMemoryStore``: LangGraph's ``BaseStore`` over the same memory items as the service.

A memory saved through the store (by langmem's tools, or any code written for LangGraph's
store) is injected by ``MemoryMiddleware`` and found by ``memory_search``; a memory saved any
other way is found by the store's ``search``. Namespaces map to levels of memory
(:mod:`.namespaces`); the store acts for the run's user (or the ``caller`` it was given) under
the same access rules as every entry point.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Literal, cast

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    NamespacePath,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from ..db.requests import Op as Operation
from ..embeddings import embedding_dimensions
from ..errors import (
    ConfigurationError,
    EmbeddingDimensionMismatchError,
    InvalidInputError,
)
from ..identity import identity_from
from ..models import Identity, Scope
from ..principal import AdminOps, PrincipalOps
from ..service import AsyncMemoryService, MemoryService
from ..sync_bridge import home_loop, run_async, run_blocking
from ..validation import check_identity, check_int, check_offset
from .namespaces import as_given, check_own_labels, check_segments, own_namespace, resolve
from .ops import (
    StoreSettings,
    delete_item,
    get_item,
    list_namespaces,
    put_item,
    put_text,
    search_items,
)
from .gathering import Gatherer, each_alone
from .fields import FieldEmbedder, FieldVectors, field_work
from .ops import MAX_LIMIT, field_texts_to_embed
from .values import check_fields
from .vectors import RecentVectors, answered, embed_first

__all__ = ["AgentMemoryStore"]

logger = logging.getLogger(__name__)

_INDEX_KEYS = {"dims", "embed", "fields", "distance_type", "ann_index_config"}
_TTL_KEYS = {"default_ttl", "refresh_on_read", "sweep_interval_minutes", "omit_expired"}


class BlockingCallOnLoopError(ConfigurationError, asyncio.InvalidStateError):
    """A blocking store method was called on the thread of the event loop its
    :class:`AsyncMemoryService` runs on (it would block the loop it waits for). Also
    ``asyncio.InvalidStateError``, which LangGraph's async stores raise in this case."""


def _run_identity() -> Identity | None:
    """The identity of the LangGraph run this call is part of (its config or context), if any."""
    from langgraph.config import get_config

    try:
        config = get_config()
    except RuntimeError:  # not inside a run
        return None
    return identity_from(config, required=False)


def _minutes(field: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigurationError(f"ttl[{field!r}] must be a number of minutes above 0 or None, got {value!r}")
    return float(value)


class AgentMemoryStore(BaseStore):
    """LangGraph's ``BaseStore`` over agent-memory's memory items.

    ``memory``: a :class:`MemoryService` (``batch``; ``abatch`` runs it in a thread) or an
    :class:`AsyncMemoryService` (``abatch``; ``batch`` works from another thread than the event
    loop's). ``caller``: who the store acts for outside a LangGraph run (inside one, the run's
    ``user_id``/``project_id``/... are read from its config or context, as the middleware reads
    them). ``trusted=True``: the namespace ``("memories", user_id, ...)`` itself names whose
    memory it is (for server code that authenticated the user); otherwise another user's
    namespace is refused. ``index``: LangGraph's index config, as LangGraph's stores read it:
    each path of ``fields`` (default ``["$"]``; a put's ``index=[...]`` instead) gets its own
    vector from ``embed`` (an ``Embeddings``, a function, or ``"provider:model"``; of ``dims``
    dimensions, which may differ from the database's; without it the service's embedder), kept in
    ``store_vectors``, and a query search scores an item by its best field under
    ``distance_type`` (:mod:`.fields`); the memory keeps its own vector of its content for
    ``memory_search``. ``ttl``: ``default_ttl`` (minutes), ``refresh_on_read`` (default True)
    and ``sweep_interval_minutes`` for :meth:`start_ttl_sweeper`.

    ``index`` left out: each value's text is embedded with the service's embedder, so a query
    search ranks by meaning and ``memory_search`` finds store items as it finds any memory.
    ``index=None`` given outright: as LangGraph's stores without an index, nothing is embedded
    (puts are faster, a ``query`` is ignored and items come newest first; ``memory_search``
    finds them by their words; ``agent-memory reembed`` embeds them later).
    """

    supports_ttl = True

    def __init__(
        self, memory: MemoryService | AsyncMemoryService, *, caller: Identity | None = None, trusted: bool = False,
        index: IndexConfig | None | NotProvided = NOT_PROVIDED, ttl: TTLConfig | None = None,
    ) -> None:
        if not isinstance(memory, (MemoryService, AsyncMemoryService)):
            raise ConfigurationError(
                f"memory must be a MemoryService or AsyncMemoryService, got {type(memory).__name__}")
        if caller is not None and not isinstance(caller, Identity):
            raise ConfigurationError(f"caller must be an Identity (agent_memory.Identity), got {type(caller).__name__}")
        if not isinstance(trusted, bool):
            raise ConfigurationError(f"trusted must be True or False, got {trusted!r}")
        self.memory = memory
        self.caller = None if caller is None else check_identity(**caller.kwargs())
        self.trusted = trusted
        embeds = not (index is None)  # index=None said outright: LangGraph's store without an index
        if isinstance(index, NotProvided):
            index = None
        self.index_config = self._check_index(index)
        self.ttl_config = self._check_ttl(ttl)
        fields = (() if index is None or index.get("fields") is None
                  else check_fields("index['fields']", index["fields"]))
        #: embeds each indexed field on its own (a store with an index config; else None)
        self._fields = None if self.index_config is None else FieldEmbedder(memory.embeddings, self.index_config)
        self._settings = StoreSettings(config=memory.config, principal=self._principal, fields=fields, embeds=embeds,
                                       distance=str((self.index_config or {}).get("distance_type", "cosine")),
                                       space=None if self._fields is None else self._fields.space,
                                       own_space=self._fields is None or self._fields.own,
                                       vector_fields=fields or ("$",))
        self._gatherer = Gatherer(self)  # the async calls made at once, run as one batch
        try:  # built in async code: a service not set up yet is set up on this loop, its home
            self._built_on: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._built_on = None
        self._sweeper: concurrent.futures.Future[None] | None = None
        self._sweeper_task: asyncio.Task[None] | None = None
        self._stop = threading.Event()
        self._recent = RecentVectors()  # the vectors of the texts this store embedded last

    # --- configuration --------------------------------------------------------------------

    def _check_index(self, index: IndexConfig | None) -> IndexConfig | None:
        if index is None:
            return None
        if not isinstance(index, Mapping):
            raise ConfigurationError(f"index must be a dict like {{'dims': 384, 'fields': ['text']}}, got "
                                     f"{type(index).__name__}")
        unknown = set(index) - _INDEX_KEYS
        if unknown:
            raise ConfigurationError(f"index has unknown keys {sorted(unknown)}; allowed: {sorted(_INDEX_KEYS)}")
        dims = index.get("dims")
        if index.get("embed") is not None and index.get("embed") is not self.memory.embeddings:
            if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
                raise ConfigurationError(f"index['dims'] must be the number of dimensions index['embed'] makes "
                                         f"(a whole number above 0), got {dims!r}")
        elif dims is not None:
            have = embedding_dimensions(self.memory.embeddings)
            if dims != have:
                raise EmbeddingDimensionMismatchError(
                    f"index['dims'] is {dims!r} but this memory's embedder and database use {have} dimensions; "
                    f"without index['embed'] the store embeds with the service's embedder, so pass dims={have}, "
                    "leave it out, or give the embedder of that size as index['embed']")
        distance = index.get("distance_type", "cosine")
        if distance not in ("cosine", "l2", "inner_product"):
            raise ConfigurationError(f"index['distance_type'] must be 'cosine', 'l2' or 'inner_product' (LangGraph's "
                                     f"choices), got {distance!r}")
        return index

    @staticmethod
    def _check_ttl(ttl: TTLConfig | None) -> TTLConfig | None:
        if ttl is None:
            return None
        if not isinstance(ttl, Mapping):
            raise ConfigurationError(f"ttl must be a dict like {{'default_ttl': 60}}, got {type(ttl).__name__}")
        unknown = set(ttl) - _TTL_KEYS
        if unknown:
            raise ConfigurationError(f"ttl has unknown keys {sorted(unknown)}; allowed: {sorted(_TTL_KEYS)}")
        refresh = ttl.get("refresh_on_read", True)
        if not isinstance(refresh, bool):
            raise ConfigurationError(f"ttl['refresh_on_read'] must be True or False, got {refresh!r}")
        checked: TTLConfig = {"refresh_on_read": refresh,
                              "default_ttl": _minutes("default_ttl", ttl.get("default_ttl"))}
        interval = _minutes("sweep_interval_minutes", ttl.get("sweep_interval_minutes"))
        checked["sweep_interval_minutes"] = interval  # type: ignore[typeddict-item]  # LangGraph types it int
        return checked

    def _principal(self, identity: Identity) -> PrincipalOps:
        return self.memory.for_user(identity).ops

    def _current_caller(self) -> Identity | None:
        """Who a call made now acts for: the store's ``caller``, else the LangGraph run's user
        (read in the caller's context; a subclass may know another source, as the platform's)."""
        return self.caller if self.caller is not None else _run_identity()

    # --- the two doors --------------------------------------------------------------------

    def _operation(self, ops: Iterable[Op], *, embed_here: bool = False,
                   fields: FieldVectors | None = None) -> Operation[list[Result]]:
        """The batch as one operation; namespaces are resolved now, in the caller's context
        (where the run's identity is). ``embed_here``: embed what the batch needs now, in this
        thread (a worker thread that waits for the event loop anyway: on the loop, the embedder
        would need a thread of the executor that such waiting threads may all hold)."""
        caller = self._current_caller()
        texts: list[str] = []  # what the batch's puts embed, embedded in one call before anything else
        ops = list(ops)
        if fields is None:
            fields = self._embed_fields(ops)
        steps = [self._step(i, op, caller, texts, fields) for i, op in enumerate(ops)]
        if embed_here:
            self._embed_now(texts, [op.query for op in ops if isinstance(op, SearchOp) and isinstance(op.query, str)])
        return _sequence(steps, texts, self._recent)

    def _step(self, i: int, op: Op, caller: Identity | None, texts: list[str],
              fields: FieldVectors | None = None) -> Operation[Any]:
        """One op as an operation for ``caller``; the text a put embeds is added to ``texts``;
        ``fields``: the field vectors and query vectors of a store with an index config."""
        fields = fields or FieldVectors()
        settings, trusted = self._settings, self.trusted
        if isinstance(op, GetOp):
            namespace = own_namespace(check_segments("namespace", op.namespace), caller)
            target = resolve(namespace, caller, trusted=trusted, exact=True)
            return _given_back(get_item(settings, target, namespace, op.key, refresh=bool(op.refresh_ttl)), caller)
        if isinstance(op, PutOp):
            namespace = own_namespace(check_segments("namespace", op.namespace), caller)
            target = resolve(namespace, caller, trusted=trusted, exact=True)
            if op.value is None:
                return delete_item(settings, target, namespace, op.key)
            text = put_text(settings, target, namespace, op.key, op.value, index=op.index, ttl=op.ttl,
                            known=self._recent.knows)
            if text is not None:
                texts.append(text)
            vectors = [(path, fields.documents[t]) for path, t in field_texts_to_embed(settings, op.value, op.index)
                       if t in fields.documents]
            return put_item(settings, target, namespace, op.key, op.value, index=op.index, ttl=op.ttl,
                            field_vectors=vectors)
        if isinstance(op, SearchOp):
            prefix = own_namespace(check_segments("namespace_prefix", op.namespace_prefix), caller,
                                   "namespace_prefix")
            target = resolve(prefix, caller, trusted=trusted, exact=False, field="namespace_prefix")
            question = op.query.strip() if isinstance(op.query, str) else None
            return _given_back(search_items(settings, target, prefix, query=op.query, filter=op.filter,
                                            limit=op.limit, offset=op.offset, refresh=bool(op.refresh_ttl),
                                            query_vector=fields.queries.get(question or "")), caller)
        if isinstance(op, ListNamespacesOp):
            return _given_back(self._listing(op, caller), caller)
        raise InvalidInputError(f"ops[{i}]", f"is not a store op: {type(op).__name__}")

    async def _run_gathered(self, ops: list[Op], callers: list[Identity | None]) -> list[Result | BaseException]:
        """The calls one event-loop tick gathered (:mod:`.gathering`): one transaction, one
        embedding call for their puts, and each call's own result or error."""
        texts: list[str] = []
        try:
            fields = await self._aembed_fields(ops)
        except Exception as exc:  # noqa: BLE001 - the embedder failed: every call hears it
            return [exc] * len(ops)
        if len(ops) == 1:  # alone: its error ends the transaction, as an abatch of one would
            try:
                one = await self._execute(_sequence([self._step(0, ops[0], callers[0], texts, fields)], texts,
                                                    self._recent))
                return cast("list[Result | BaseException]", one)
            except Exception as exc:  # noqa: BLE001 - given to the one caller
                return [exc]
        steps: list[Operation[Any] | BaseException] = []
        for i, (op, caller) in enumerate(zip(ops, callers, strict=True)):
            try:
                steps.append(self._step(i, op, caller, texts, fields))
            except Exception as exc:  # noqa: BLE001 - refused before it ran: only its caller hears
                steps.append(exc)
        writes = [isinstance(op, PutOp) for op in ops]
        return cast("list[Result | BaseException]", await self._execute(_alone(steps, writes, texts, self._recent)))

    async def _execute(self, operation: Operation[Any]) -> Any:
        memory = self.memory
        if isinstance(memory, AsyncMemoryService):
            return await run_async(memory, operation)
        return await asyncio.get_running_loop().run_in_executor(None, memory.execute, operation)

    def _embed_now(self, texts: list[str], questions: list[str]) -> None:
        """Remember the vectors of ``texts`` and ``questions`` (queries) now, with the blocking
        embedder; a failure is left for the operation to meet and report as usual."""
        embeddings, recent = self.memory.embeddings, self._recent
        try:
            missing = [t for t in dict.fromkeys(texts) if not recent.knows(t)]
            if missing:
                recent.learn(False, missing, embeddings.embed_documents(missing))
            for question in dict.fromkeys(q.strip() for q in questions):
                if question and recent.get(True, question) is None:
                    recent.learn(True, [question], [embeddings.embed_query(question)])
        except Exception:  # noqa: BLE001 - the operation embeds again and says what failed
            logger.debug("embedding ahead of a blocking store call failed", exc_info=True)

    def _embed_fields(self, ops: list[Op]) -> FieldVectors:
        """The field and query vectors ``ops`` need (:mod:`.fields`), embedded now."""
        if self._fields is None:
            return FieldVectors()
        return self._fields.embed(*field_work(self._settings, ops), also=self._recent)

    async def _aembed_fields(self, ops: list[Op]) -> FieldVectors:
        """:meth:`_embed_fields` for asyncio."""
        if self._fields is None:
            return FieldVectors()
        return await self._fields.aembed(*field_work(self._settings, ops), also=self._recent)

    def _listing(self, op: ListNamespacesOp, caller: Identity | None) -> Operation[list[tuple[str, ...]]]:
        paths: dict[str, tuple[str, ...]] = {}
        for condition in op.match_conditions or ():
            kind = condition.match_type
            if kind not in ("prefix", "suffix"):
                raise InvalidInputError("match_conditions", f"match_type must be 'prefix' or 'suffix', got {kind!r}")
            if kind in paths:
                raise InvalidInputError("match_conditions", f"give at most one {kind} condition")
            path = condition.path
            if isinstance(path, str):  # LangGraph's stores take a lone string as one segment
                path = (path,)
            paths[kind] = check_segments(kind, path)
        depth = op.max_depth
        if "prefix" in paths:
            mapped = own_namespace(paths["prefix"], caller, "prefix")
            if mapped != paths["prefix"] and isinstance(depth, int) and not isinstance(depth, bool):
                depth += len(mapped) - len(paths["prefix"])  # counted from the namespace as written
            paths["prefix"] = mapped
        prefix = paths.get("prefix", ())
        fixed = prefix[: prefix.index("*")] if "*" in prefix else prefix  # who acts: what is spelled out
        target = resolve(fixed, caller, trusted=self.trusted, exact=False, field="prefix")
        every_project = len(fixed) < 2 and target.scope in (None, Scope.PROJECT)  # no project named
        if "prefix" not in paths and caller is not None:
            # every namespace: the caller's own that name no level are stored under
            # ("memories", user_id, "~"), so they are cut, ordered and paged as written
            checked_depth = None if depth is None else check_int("max_depth", depth, 1, 1000)
            limit, offset = check_int("limit", op.limit, 1, MAX_LIMIT), check_offset(op.offset)
            every = list_namespaces(target, prefix=None, suffix=paths.get("suffix"), max_depth=None,
                                    limit=MAX_LIMIT, offset=0, every_project=every_project)
            return _as_written(every, caller, checked_depth, limit, offset)
        return list_namespaces(target, prefix=paths.get("prefix"), suffix=paths.get("suffix"),
                               max_depth=depth, limit=op.limit, offset=op.offset, every_project=every_project)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order, in one transaction; results in the same order. Over an
        :class:`AsyncMemoryService`, from any thread but its event loop's: the call runs on the
        service's own loop (:func:`agent_memory.sync_bridge.run_blocking`, as the middleware's)."""
        memory = self.memory
        if isinstance(memory, MemoryService):
            return memory.execute(self._operation(ops))
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise BlockingCallOnLoopError(
                "this store wraps an AsyncMemoryService and was called with a blocking method on a thread that "
                "runs an event loop, which the call would block: await its async methods here (aget, aput, "
                "asearch, alist_namespaces, adelete); the blocking ones work from other threads")
        built_on = self._built_on
        if home_loop(memory) is None and built_on is not None and built_on.is_running():
            # not set up yet, and this store was built on a loop that runs: set it up there, where
            # the application's async calls will use it too (else sync_bridge's shared loop)
            asyncio.run_coroutine_threadsafe(memory.setup(), built_on).result()
        return run_blocking(memory, self._operation(ops, embed_here=True))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` for asyncio (a blocking service runs it in a worker thread). The single
        async calls (``aget``, ``aput``, ...) made at once are gathered into batches themselves
        (:mod:`.gathering`)."""
        ops = list(ops)
        fields = await self._aembed_fields(ops)
        return cast("list[Result]", await self._execute(self._operation(ops, fields=fields)))

    async def _gathered(self, op: Op) -> Any:
        """``op``'s result, run in one batch with the other calls made in this event-loop tick;
        the caller is read now, in this call's context (a LangGraph run's identity)."""
        return await self._gatherer.submit(op, self._current_caller())

    # --- LangGraph's methods, without its rule against "." in namespace labels ---------------
    # (its PostgresStore joins labels with "."; our keys are JSON, so "alice@example.com" or a
    # project "acme.io" is a namespace label like any other; the ops are checked in batch)

    def _refresh(self, refresh_ttl: bool | None) -> bool:
        if refresh_ttl is not None:
            return refresh_ttl
        return bool((self.ttl_config or {}).get("refresh_on_read", True))

    def _ttl(self, ttl: float | None | NotProvided) -> float | None:
        if isinstance(ttl, NotProvided):
            return (self.ttl_config or {}).get("default_ttl")
        return ttl

    @staticmethod
    def _listing_op(prefix: NamespacePath | None, suffix: NamespacePath | None, max_depth: int | None, limit: int,
                    offset: int) -> ListNamespacesOp:
        conditions = [MatchCondition(match_type="prefix", path=prefix)] if prefix else []
        if suffix:
            conditions.append(MatchCondition(match_type="suffix", path=suffix))
        return ListNamespacesOp(match_conditions=tuple(conditions), max_depth=max_depth, limit=limit, offset=offset)

    def get(self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None) -> Item | None:
        """The item at ``key`` in ``namespace``, or ``None``."""
        return cast("Item | None", self.batch([GetOp(namespace, str(key), self._refresh(refresh_ttl))])[0])

    async def aget(self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None) -> Item | None:
        """:meth:`get` for asyncio."""
        return cast("Item | None", await self._gathered(GetOp(namespace, str(key), self._refresh(refresh_ttl))))

    def search(
        self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None, filter: dict[str, Any] | None = None,
        limit: int = 10, offset: int = 0, refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        """Items under ``namespace_prefix`` (whole segments), by similarity to ``query`` or newest first."""
        op = SearchOp(namespace_prefix, filter, limit, offset, query, self._refresh(refresh_ttl))
        return cast("list[SearchItem]", self.batch([op])[0])

    async def asearch(
        self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None, filter: dict[str, Any] | None = None,
        limit: int = 10, offset: int = 0, refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        """:meth:`search` for asyncio."""
        op = SearchOp(namespace_prefix, filter, limit, offset, query, self._refresh(refresh_ttl))
        return cast("list[SearchItem]", await self._gathered(op))

    def put(
        self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None, *, ttl: float | None | NotProvided = NOT_PROVIDED,
    ) -> None:
        """Store ``value`` at ``key`` in ``namespace`` (``ttl`` in minutes; default: the ttl config's)."""
        check_own_labels(check_segments("namespace", namespace))
        self.batch([PutOp(namespace, str(key), value, index=index, ttl=self._ttl(ttl))])

    async def aput(
        self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None, *, ttl: float | None | NotProvided = NOT_PROVIDED,
    ) -> None:
        """:meth:`put` for asyncio."""
        check_own_labels(check_segments("namespace", namespace))
        await self._gathered(PutOp(namespace, str(key), value, index=index, ttl=self._ttl(ttl)))

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """Delete the item at ``key`` in ``namespace`` (nothing there: nothing happens)."""
        self.batch([PutOp(namespace, str(key), None)])

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        """:meth:`delete` for asyncio."""
        await self._gathered(PutOp(namespace, str(key), None))

    def list_namespaces(
        self, *, prefix: NamespacePath | None = None, suffix: NamespacePath | None = None, max_depth: int | None = None,
        limit: int = 100, offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """The namespaces of what the caller may read, in tuple order (``"*"``: any one segment)."""
        op = self._listing_op(prefix, suffix, max_depth, limit, offset)
        return cast("list[tuple[str, ...]]", self.batch([op])[0])

    async def alist_namespaces(
        self, *, prefix: NamespacePath | None = None, suffix: NamespacePath | None = None, max_depth: int | None = None,
        limit: int = 100, offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """:meth:`list_namespaces` for asyncio."""
        op = self._listing_op(prefix, suffix, max_depth, limit, offset)
        return cast("list[tuple[str, ...]]", await self._gathered(op))

    # --- TTL ------------------------------------------------------------------------------

    def sweep_expired(self) -> int:
        """Delete every expired memory now (they are already invisible); answers how many."""
        memory = self.memory
        if not isinstance(memory, MemoryService):
            raise ConfigurationError("this store wraps an AsyncMemoryService: await asweep_expired()")
        return memory.execute(AdminOps(memory.config).purge_expired())

    async def asweep_expired(self) -> int:
        """:meth:`sweep_expired` for asyncio."""
        memory = self.memory
        if isinstance(memory, AsyncMemoryService):
            return await memory.execute(AdminOps(memory.config).purge_expired())
        return await asyncio.get_running_loop().run_in_executor(None, self.sweep_expired)

    def _interval(self, given: float | None) -> float:
        minutes = given if given is not None else (self.ttl_config or {}).get("sweep_interval_minutes")
        checked = _minutes("sweep_interval_minutes", minutes)
        if checked is None:
            raise ConfigurationError("no sweep interval: pass sweep_interval_minutes, or give it in the store's "
                                     "ttl config")
        return checked * 60

    def sweep_ttl(self) -> Any:
        """LangGraph's name for :meth:`sweep_expired`: on an :class:`AsyncMemoryService` it
        answers the coroutine to await, as ``AsyncPostgresStore.sweep_ttl`` is awaited."""
        if isinstance(self.memory, AsyncMemoryService):
            return self.asweep_expired()
        return self.sweep_expired()

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Any:
        """Delete expired memories every ``sweep_interval_minutes`` (default: the ttl config's) in a
        background thread, until :meth:`stop_ttl_sweeper`; answers the thread's future. On an
        :class:`AsyncMemoryService` it answers a coroutine (``await store.start_ttl_sweeper()``,
        as LangGraph's ``AsyncPostgresStore`` is called) that starts :meth:`astart_ttl_sweeper`."""
        if isinstance(self.memory, AsyncMemoryService):
            return self.astart_ttl_sweeper(sweep_interval_minutes)
        seconds = self._interval(sweep_interval_minutes)
        if self._sweeper is not None and not self._sweeper.done():
            return self._sweeper
        self._stop.clear()
        future: concurrent.futures.Future[None] = concurrent.futures.Future()

        def sweep() -> None:
            while not self._stop.wait(seconds):
                try:
                    self.sweep_expired()
                except Exception:  # a database that is down now may be up at the next sweep
                    logger.warning("the TTL sweep failed; trying again in %.0f s", seconds, exc_info=True)
            future.set_result(None)

        threading.Thread(target=sweep, name="agent-memory-ttl-sweeper", daemon=True).start()
        self._sweeper = future
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> Any:
        """Stop the sweeper thread; answers whether it stopped within ``timeout`` seconds. On an
        :class:`AsyncMemoryService`: a coroutine (``await store.stop_ttl_sweeper()``) that stops
        the sweeper task (:meth:`astop_ttl_sweeper`)."""
        if isinstance(self.memory, AsyncMemoryService):
            return self.astop_ttl_sweeper(timeout)
        if self._sweeper is None:
            return True
        self._stop.set()
        try:
            self._sweeper.result(timeout)
        except concurrent.futures.TimeoutError:
            return False
        finally:
            if self._sweeper.done():
                self._sweeper = None
        return True

    async def astart_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> asyncio.Task[None]:
        """:meth:`start_ttl_sweeper` as an asyncio task on the running loop."""
        if self._sweeper_task is not None and not self._sweeper_task.done():
            return self._sweeper_task
        seconds = self._interval(sweep_interval_minutes)

        async def sweep() -> None:
            while True:
                await asyncio.sleep(seconds)
                try:
                    await self.asweep_expired()
                except Exception:
                    logger.warning("the TTL sweep failed; trying again in %.0f s", seconds, exc_info=True)

        self._sweeper_task = asyncio.get_running_loop().create_task(sweep())
        return self._sweeper_task

    async def astop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper task; answers whether one was running (``timeout``: accepted as
        LangGraph's ``stop_ttl_sweeper`` takes it; a cancelled task ends at once)."""
        task, self._sweeper_task = self._sweeper_task, None
        if task is None or task.done():
            return False
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return True


def _sequence(steps: list[Operation[Any]], texts: list[str], recent: RecentVectors) -> Operation[list[Result]]:
    """The batch's ops in order, in one transaction, after one embedding call for all its puts."""
    try:
        batch = (yield from embed_first(texts, recent)) if texts else {}
        results: list[Result] = []
        for step in steps:
            results.append((yield from answered(step, recent, batch)))
        return results
    finally:
        for step in steps:
            step.close()


def _alone(steps: list[Operation[Any] | BaseException], writes: list[bool], texts: list[str],
           recent: RecentVectors) -> Operation[list[Result | BaseException]]:
    """Gathered calls in one transaction, after one embedding call for all their puts (an
    embedder that fails leaves each put to embed and fail alone), each write under its savepoint."""
    try:
        try:
            batch = (yield from embed_first(texts, recent)) if texts else {}
        except Exception:  # noqa: BLE001 - each put embeds again and reports its own failure
            batch = {}
        return (yield from each_alone([s if isinstance(s, BaseException) else answered(s, recent, batch)
                                       for s in steps], writes))
    finally:
        for step in steps:
            if not isinstance(step, BaseException):
                step.close()


def _as_written(listing: Operation[list[tuple[str, ...]]], caller: Identity, depth: int | None, limit: int,
                offset: int) -> Operation[list[tuple[str, ...]]]:
    """The namespaces of ``listing`` as the caller wrote them, cut to ``depth`` segments,
    without repeats, in tuple order, then paged."""
    found = yield from listing
    written = {as_given(namespace, caller)[:depth] if depth else as_given(namespace, caller) for namespace in found}
    return sorted(written)[offset:offset + limit]


def _given_back(step: Operation[Any], caller: Identity | None) -> Operation[Any]:
    """``step``, with the namespaces it answers as the caller wrote them (:func:`.namespaces.as_given`)."""
    result = yield from step
    if isinstance(result, Item):
        result.namespace = as_given(result.namespace, caller)
        return result
    if isinstance(result, list):
        out: list[Any] = []
        for entry in result:
            if isinstance(entry, Item):
                entry.namespace = as_given(entry.namespace, caller)
                out.append(entry)
            elif isinstance(entry, tuple):
                out.append(as_given(entry, caller))
            else:
                out.append(entry)
        return out
    return result
