"""Every memory operation, written once as a generator of I/O requests.

An operation validates its arguments (raising before any I/O), then yields
:class:`~agent_memory.db.requests.Embed` / ``Sql`` / ``Copy`` / ``Commit``
requests and returns its result. :func:`agent_memory.db.requests.run` and
``arun`` execute them with sync or async I/O, so the service's two faces
cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import numpy as np

from . import access, conflicts, history, queries, ranking, resources, vector_cache
from .config import MemoryConfig
from .db.requests import Commit, Copy, Embed, Op, Shared, Sql
from .errors import InvalidInputError, MemoryNotFoundError, PermissionDeniedError
from .filters import parse_filter
from .graph import ops as graph_ops
from .graph.maintenance import maintain_graph
from .lifecycle import state_for
from .graph.extract import extract as graph_extract
from .gate import check_content, normalize_content
from .memory_types import check_memory_type, check_memory_types
from .models import (
    Conflict,
    DecisionMethod,
    Identity,
    InjectedTurn,
    MemoryItem,
    MemoryStats,
    MemoryType,
    MemoryVersion,
    NewMemory,
    RecallCount,
    Rejection,
    RejectionReason,
    Scope,
    SearchResult,
    Source,
    Retention,
    Status,
    Visibility,
)
from .queries.rows import new_item_row, row_to_item
from .reports import AddManyReport, MaintenanceReport
from .validation import (
    MAX_QUERY_LENGTH,
    check_as_of,
    check_bool,
    check_confidence,
    check_enum,
    check_enum_set,
    check_id,
    check_k,
    check_key,
    check_list,
    check_metadata,
    check_offset,
    check_optional_id,
    check_scope_id,
    check_text,
    check_ttl,
    check_uuid,
    check_valid_from,
)
from .withheld import find_secret, metadata_rejection, redact, refuse_secret

__all__ = [
    "AddManyReport",
    "add_memory",
    "check_duplicate",
    "delete_memory",
    "edit_memory",
    "extraction_budget",
    "get_by_key",
    "get_memory",
    "import_memories",
    "list_memories",
    "maintain",
    "make_new_memory",
    "memory_history",
    "purge_archived",
    "purge_expired",
    "put_memory",
    "record_extraction_run",
    "restore_memory",
    "search_memories",
    "stats",
    "take_extraction_run",
    "with_default_expiry",
]


#: how many memories of other levels each search result is compared with for conflicts
CONFLICT_NEIGHBOURS = 3

#: the status filter a caller did not choose (active now, or what held at ``as_of``)
DEFAULT_STATUS: Any = object()


def make_new_memory(
    content: Any,
    *,
    memory_type: Any = MemoryType.FACT,
    scope: Any = Scope.USER,
    confidence: Any = 1.0,
    source: Any = Source.USER,
    source_id: Any = None,
    visibility: Any = Visibility.MEMBERS,
    metadata: Any = None,
    key: Any = None,
    ttl: Any = None,
    expires_at: Any = None,
    retention: Any = Retention.DECAY,
    valid_from: Any = None,
    config: MemoryConfig | None = None,
    context: Any = None,
    position: Any = None,
) -> NewMemory:
    """Type-check a proposed memory (the gate's content rules come later, in :func:`add_memory`).
    ``memory_type``: a built-in type, or a custom type of ``config`` (``custom_memory_types``).
    ``ttl`` (seconds or a timedelta) or ``expires_at`` (a time) says when it expires; neither:
    the configured default, if any (:func:`with_default_expiry`). ``valid_from`` (a time, not
    in the future) is when the fact began to hold; None: when it is recorded."""
    return NewMemory(
        content=check_text("content", content, allow_empty=True),
        memory_type=check_memory_type("memory_type", memory_type, config),
        scope=check_enum("scope", scope, Scope),
        confidence=check_confidence(confidence),
        source=check_enum("source", source, Source),
        source_id=check_optional_id("source_id", source_id),
        visibility=check_enum("visibility", visibility, Visibility),
        metadata=check_metadata(metadata),
        key=None if key is None else check_key(key),
        expires_at=_expiry(ttl, expires_at),
        retention=check_enum("retention", retention, Retention),
        valid_from=check_valid_from(valid_from),
        context=check_context(context),
        position=None if position is None else check_position(position),
    )


#: the longest context a memory keeps (a window of a few turns or passages; longer is cut at the end)
MAX_CONTEXT_LENGTH = 8_000


def check_context(value: Any, field: str = "context") -> str | None:
    """A memory's context as it is stored: text (None or blank: none), at most
    :data:`MAX_CONTEXT_LENGTH` characters, secrets withheld (``[withheld: <kind>]``): the context
    is stored, searched and exported with the memory, and the turns around a memory may hold a
    secret the memory itself does not."""
    if value is None:
        return None
    text = check_text(field, value, allow_empty=True).strip()
    return redact(text[:MAX_CONTEXT_LENGTH]) if text else None


def check_position(value: Any, field: str = "position") -> int:
    """A memory's place in its source: a whole number >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > 2**31 - 1:
        raise InvalidInputError(field, f"must be a whole number >= 0 (a turn's or passage's index), got {value!r}")
    return value


def _expiry(ttl: Any, expires_at: Any) -> datetime | None:
    lifetime = check_ttl(ttl)
    at = check_as_of(expires_at, "expires_at")
    if lifetime is not None and at is not None:
        raise InvalidInputError("ttl", "give ttl (how long from now) or expires_at (when), not both")
    if lifetime is not None:
        return datetime.now(UTC) + lifetime
    if at is not None and at <= datetime.now(UTC):
        raise InvalidInputError("expires_at", f"is in the past ({at.isoformat()}); give a later time, or "
                                              "delete the memory instead")
    return at


def with_default_expiry(config: MemoryConfig, new: NewMemory) -> NewMemory:
    """``new`` with the configured lifetime of its level or type (``config.ttl_days``; the
    shorter where both are set) unless it says when it expires itself."""
    if new.expires_at is not None or not config.ttl_days:
        return new
    days = [config.ttl_days[name] for name in (new.scope.value, new.memory_type.value) if name in config.ttl_days]
    if not days:
        return new
    return dataclasses.replace(new, expires_at=datetime.now(UTC) + timedelta(days=min(days)))


def _gate(config: MemoryConfig, new: NewMemory) -> tuple[str, Rejection | None]:
    """The stored form of the content and why the memory must not be stored (or None): the
    gate's content checks, then a secret in ``source_id`` or in a metadata key or value (they
    are stored and exported with the memory, so they are held to the same rule)."""
    content = normalize_content(new.content)
    rejection = check_content(content, confidence=new.confidence, config=config)
    for name, value in (("source_id", new.source_id), ("key", new.key)):
        if rejection is None and value is not None and (kind := find_secret(value)) is not None:
            rejection = Rejection(RejectionReason.SENSITIVE, f"{name} looks like it contains {kind}; secrets are "
                                                             f"never stored — pass a {name} without it", kind=kind)
    if rejection is None:
        rejection = metadata_rejection(new.metadata)
    return content, rejection


def add_memory(config: MemoryConfig, identity: Identity, new: NewMemory, *, dedupe: bool = True) -> Op[MemoryItem | Rejection]:
    """Gate, embed, then in one transaction: lock the scope, find a duplicate or insert."""
    if new.key is not None:
        return (yield from put_memory(config, identity, new))
    content, rejection = _gate(config, new)
    if rejection is not None:
        return rejection
    new = with_default_expiry(config, new)
    scope_id = check_scope_id(identity, new.scope)
    [vector], [context_vector] = yield from _embed_with_context([(new, content)])
    yield Sql(*queries.lock_scope(new.scope, scope_id, identity.user_id), fetch="none")
    yield from access.require_write(config, identity, new.scope)
    if dedupe:
        existing = yield from _duplicate(config, identity, new.scope, vector, new.visibility)
        if existing is not None:
            q, p = queries.refresh_duplicate(existing["id"])
            row = yield Sql(q, p, fetch="one")
            return row_to_item(row, deduplicated=True)
    if new.source_id is None and new.source in (Source.AI, Source.USER) and identity.session_id is not None:
        # said in a session: the session's conversation is where it came from
        conversation = yield from resources.conversation(identity)
        new = dataclasses.replace(new, source_id=str(conversation.id))
    row = yield Sql(queries.insert_item(), new_item_row(identity, new, content, vector, context_vector=context_vector),
                    fetch="one")
    yield from _learn_graph(config, identity, row["id"], content, vector, at=new.valid_from,
                            retention=new.retention.value)
    return row_to_item(row)


def put_memory(config: MemoryConfig, identity: Identity, new: NewMemory, *,
               embed: bool = True) -> Op[MemoryItem | Rejection]:
    """Save ``new`` under its key (``new.key``): the memory that holds the key in its scope is
    revised in place (its earlier wording kept in its history, with the visibility it had; active
    again if it was archived; its visibility, metadata and expiry replaced), or a new one is
    written. An expired holder is deleted first: expired is gone. Never deduplicated: the key
    says which memory it is. ``embed=False``: the memory gets no vector (a LangGraph store built
    without an index embeds nothing, as LangGraph's own; such a memory is found by its words)."""
    if new.key is None:
        raise InvalidInputError("key", "a put needs a key; use add to save a memory without one")
    content, rejection = _gate(config, new)
    if rejection is not None:
        return rejection
    new = with_default_expiry(config, new)
    scope_id = check_scope_id(identity, new.scope)
    yield from access.require_write(config, identity, new.scope)
    vector: Sequence[float] = ()
    if embed:
        [vector] = yield Embed((content,))
    yield Sql(*queries.lock_scope(new.scope, scope_id, identity.user_id), fetch="none")
    holder = yield Sql(*queries.select_by_key(new.scope, scope_id, identity.user_id, new.key), fetch="one")
    if holder is not None and holder["expires_at"] is not None and holder["expires_at"] <= datetime.now(UTC):
        yield Sql(*queries.delete_items([holder["id"]]), fetch="none")
        holder = None
    if holder is None:
        row = yield Sql(queries.insert_item(), new_item_row(identity, new, content, vector), fetch="one")
        yield from _learn_graph(config, identity, row["id"], content, vector, at=new.valid_from,
                                retention=new.retention.value)
        return row_to_item(row)
    item = row_to_item(holder)
    q, p = queries.select_item_by_id(queries.item_filter(identity, statuses=None), item.id)
    if (yield Sql(q, p, fetch="one")) is None:
        raise PermissionDeniedError(f"the key {new.key!r} of this {new.scope.value} belongs to a memory you may "
                                    "not see; choose another key")
    yield from access.require_edit(identity, item, "replace")
    # a new visibility is a new version too: the past stays readable only by whom it was visible to
    if ((content, new.memory_type, new.confidence, new.visibility)
            != (item.content, item.memory_type, item.confidence, item.visibility)):
        row = yield from history.revise(
            item, content=content, vector=vector if content != item.content else None, memory_type=new.memory_type,
            confidence=new.confidence, metadata=new.metadata, change="edit", decided_by=DecisionMethod.USER,
            reason=None, changed_by=identity.user_id)
        item = row_to_item(row)
        if content != holder["content"]:
            yield from _learn_graph(config, identity, item.id, content, vector, at=new.valid_from,
                                    retention=new.retention.value)
    q, p = queries.set_keyed_fields(item.id, visibility=new.visibility.value, metadata=new.metadata,
                                    expires_at=new.expires_at, retention=new.retention.value,
                                    valid_from=new.valid_from)
    return row_to_item((yield Sql(q, p, fetch="one")))


def get_by_key(identity: Identity, key: Any, scope: Any = Scope.USER) -> Op[MemoryItem]:
    """The active memory that holds ``key`` in the caller's ``scope``, if they may see it."""
    key, scope = check_key(key), check_enum("scope", scope, Scope)
    scope_id = check_scope_id(identity, scope)
    q, p = queries.select_by_key(scope, scope_id, identity.user_id, key, queries.item_filter(identity, scopes=(scope,)))
    row = yield Sql(q, p, fetch="one")
    if row is None:
        raise MemoryNotFoundError(f"no memory with the key {key!r} in your {scope.value} memory (or it expired); "
                                  "list or search memories to find it")
    return row_to_item(row)


def purge_expired(*, limit: int = 10_000, distributed: bool = False) -> Op[int]:
    """Delete the memories that have expired (they are already invisible to every read), in
    batches of ``limit`` rows, each its own transaction; answers how many went. ``distributed``
    (a Citus cluster): each shard deletes its expired rows at once."""
    total = 0
    now = datetime.now(UTC)
    while True:
        gone = yield Sql(*queries.delete_expired(now, limit, distributed=distributed), fetch="rowcount")
        yield Commit()
        total += gone
        if gone < limit:
            return total


def maintain(config: MemoryConfig, *, at: Any = None, limit: int = 10_000, model: Any = None) -> Op[MaintenanceReport]:
    """Delete what expired (:func:`purge_expired`), then archive, in batches of ``limit``: the
    ``ephemeral`` memories unused for ``config.ephemeral_days``, and where ``config.archive_below``
    is set, the ``decay`` memories whose salience at ``at`` fell below it and that went unused
    for ``config.archive_idle_days``. ``at`` (default now) is the time to judge by: a later one
    shows what a run then would do. Rows another run holds are skipped, so runs may overlap.
    Then the knowledge graph's share (:func:`agent_memory.graph.maintenance.maintain_graph`; its
    texts by ``model`` when one is given)."""
    when = datetime.now(UTC) if at is None else check_as_of(at, "at")
    expired = yield from purge_expired(limit=limit, distributed=config.distributed is not None)
    archived: dict[Retention, int] = {}
    rules = [(Retention.EPHEMERAL, config.ephemeral_days, None)]
    if config.archive_below is not None:
        rules.append((Retention.DECAY, config.archive_idle_days, config.archive_below))
    for retention, idle_days, below in rules:
        archived[retention] = 0
        while True:
            rows = yield Sql(*queries.archive_unused(when, retention=retention.value, idle_days=idle_days,
                                                     below=below, limit=limit))
            yield Commit()
            archived[retention] += len(rows)
            if len(rows) < limit:
                break
    graph = yield from maintain_graph(at=when or datetime.now(UTC), limit=min(limit, 1000), model=model)
    return MaintenanceReport(expired=expired, faded=archived.get(Retention.DECAY, 0),
                             ephemeral=archived[Retention.EPHEMERAL], nodes_faded=graph.nodes_faded,
                             nodes_ephemeral=graph.nodes_ephemeral, descriptions=graph.descriptions,
                             storylines=graph.storylines, macros=graph.macros)


def check_duplicate(config: MemoryConfig, identity: Identity, content: Any, scope: Any = Scope.USER,
                    visibility: Any = Visibility.MEMBERS) -> Op[MemoryItem | None]:
    """The active memory in ``scope`` that ``content`` would duplicate, if any (nothing is written):
    what an add of it with ``visibility`` would be merged into."""
    content = normalize_content(check_text("content", content, max_length=config.max_length))
    scope = check_enum("scope", scope, Scope)
    visibility = check_enum("visibility", visibility, Visibility)
    check_scope_id(identity, scope)
    [vector] = yield Embed((content,))
    row = yield from _duplicate(config, identity, scope, vector, visibility)
    return None if row is None else row_to_item(row)


def search_memories(
    config: MemoryConfig,
    identity: Identity,
    query: Any,
    *,
    k: Any = 5,
    memory_type: Any = None,
    scope: Any = None,
    status: Any = DEFAULT_STATUS,
    min_relevance: Any = None,
    as_of: Any = None,
    touch: bool = True,
    known_at: Any = None,
    filter: Any = None,
    created_after: Any = None,
    created_before: Any = None,
    updated_after: Any = None,
    updated_before: Any = None,
    source: Any = None,
    source_id: Any = None,
    subtree: Any = False,
) -> Op[list[SearchResult]]:
    """Top ``k`` of the caller's memories for ``query``, best first; ``as_of`` reads the world
    at a past time (event time), ``known_at`` what the memory held at a past time (record time)."""
    query = check_text("query", query, max_length=MAX_QUERY_LENGTH).strip()
    k = check_k(k, config.max_k)
    floor = config.min_relevance if min_relevance is None else check_confidence(min_relevance, "min_relevance")
    types = check_memory_types("memory_type", memory_type, config)
    scopes = check_enum_set("scope", scope, Scope)
    as_of = check_as_of(as_of)
    known_at = check_as_of(known_at, "known_at")
    past = known_at or as_of  # the time whose wordings are read
    statuses = _statuses(status, past)
    narrow = narrowing(filter=filter, created_after=created_after, created_before=created_before,
                       updated_after=updated_after, updated_before=updated_before, source=source,
                       source_id=source_id)
    subtree = check_bool("subtree", subtree)
    scoring = ranking.Scoring.from_config(config)
    [vector] = yield Embed((query,), query=True)
    terms = dict(query_vector=vector, query_text=query, pool=max(config.candidate_pool, k), scoring=scoring)
    indexed = statuses == (Status.ACTIVE,) and past is None and narrow is None and not subtree
    if not indexed:  # a scan of the visible rows, exact under any filter (a subtree ranks nearer scopes first)
        where = queries.item_filter(identity, scopes=scopes, types=types, statuses=statuses, as_of=as_of,
                                    known_at=known_at, subtree=subtree, narrow=narrow)
        depth = queries.subtree_params(identity, ranking.SUBTREE_STEP) if subtree else None

    def ranked_for(extra: list[str], need: int) -> Op[tuple[list[Any], dict[str, int]]]:
        """The exact top ``need`` for the question's lexemes plus ``extra``, and the lexemes' counts."""
        statement = dict(terms, pool=max(config.candidate_pool, need))
        if indexed:  # the search indexes, and the process's copies of big ranges
            cached, copies = yield from _from_copies(config, identity, scopes, types, query_vector=vector,
                                                     query_text=query, extra=extra, need=need, floor=floor,
                                                     scoring=scoring)
            q, p = queries.indexed_search(identity, scopes=scopes, types=types, k=need, min_relevance=floor,
                                          extra_lexemes=extra, cached=cached,
                                          distributed=config.distributed is not None, **statement)
        else:  # one pass over the rows that pass; in the past, each in the wording (and vector) of then
            q, p = queries.narrowed_search(where, k=need, min_relevance=floor, subtree=depth, extra_lexemes=extra,
                                           at=past, **statement)
        rows = yield Sql(q, p)
        df: dict[str, int] = dict(rows[0]["kw_df"] or {}) if rows else {}
        n_docs = int(rows[0]["kw_n"] or 0) if rows else 0
        if indexed and copies is not None and cached is None:  # read from the index: big enough for copies?
            copies.saw(vector_cache.caller(identity, scopes), n_docs)
        return ranking.rank(rows, scoring=scoring, query_terms=list(df), df=df, n_docs=n_docs, k=need,
                            min_relevance=floor), df

    # word feedback: the words the best memories share join the question for a second, exact search
    feedback = config.keyword_feedback if past is None and scoring.weights.keyword > 0 else 0
    ranked, df = yield from ranked_for([], max(k, ranking.FEEDBACK_DOCS) if feedback else k)
    extra = ranking.feedback_lexemes([r[0]["tsv"] for r in ranked[:ranking.FEEDBACK_DOCS]], df, feedback)
    if extra:
        ranked, _ = yield from ranked_for(extra, k)
    ranked = ranked[:k]
    if not ranked:
        return []
    ids = [r[0]["id"] for r in ranked]
    q, p = (queries.touch_items(ids, distributed=config.distributed is not None) if touch and past is None
            else queries.select_items_by_ids(ids))
    full = {row["id"]: row for row in (yield Sql(q, p))}
    if past is not None:
        full = yield from _as_it_was(identity, full, past, subtree=subtree)
    return [
        SearchResult(item=row_to_item(full[row["id"]]), score=final, similarity=sim, keyword=kw)
        for row, final, sim, kw in ranked
        if row["id"] in full  # a hit deleted between the two statements is left out, not an error
    ]


def _copied(config: MemoryConfig) -> bool:
    """Whether big scopes are searched from the process's copies of their vectors: not on a cluster,
    whose change stamps (``pg_current_xact_id()``) are per node and so cannot tell a copy it is stale."""
    return config.vector_cache_rows > 0 and config.distributed is None


def _copies(config: MemoryConfig) -> Op[vector_cache.VectorCache]:
    """The process's copies of big ranges for this service's database (``config.vector_cache_*``)."""
    rows, mb = config.vector_cache_rows, config.vector_cache_mb
    return (yield Shared(f"vector_cache:{rows}:{mb}", lambda: vector_cache.VectorCache(rows, mb * 2**20)))


def _duplicate(config: MemoryConfig, identity: Identity, scope: Scope, vector: Sequence[float],
               visibility: Visibility) -> Op[Any]:
    """The closest active row of ``scope`` the caller sees at ``config.duplicate_threshold`` or
    closer that a new memory of ``visibility`` may be merged into (at least as visible, so no
    reader of the new one is left without it: :func:`queries.merge_visibilities`), or None: from
    the process's copy of the scope when it is copied (only the rows the copy finds near are
    measured in the database: those within the copy's error of its closest, so however many near
    repeats a big scope holds, a handful), else from the search index."""
    visibilities = queries.merge_visibilities(scope, visibility.value)
    if _copied(config):
        cache = yield from _copies(config)
        plan = yield from vector_cache.prepare(cache, identity, (scope,), always=True)
        if plan.ranges and plan.complete:
            near = vector_cache.closest(plan.ranges, query=vector_cache.unit(vector), now=plan.now,
                                        owner_key=queries.scope_key(identity.user_id),
                                        threshold=config.duplicate_threshold, visibilities=visibilities)
            if not near:
                return None
            # none found: the closest is below the threshold, and every row outside the band further
            return (yield Sql(*queries.closest_among(identity, (scope,), near, vector, config.duplicate_threshold,
                                                     1, visibilities), fetch="one"))
    return (yield Sql(*queries.find_duplicate(identity, scope, vector, config.duplicate_threshold,
                                              visibility=visibility.value), fetch="one"))


def _from_copies(config: MemoryConfig, identity: Identity, scopes: Sequence[Scope] | None,
                 types: Sequence[MemoryType] | None, *, query_vector: Sequence[float], query_text: str,
                 extra: Sequence[str], need: int, floor: float, scoring: ranking.Scoring,
                 ) -> Op[tuple[vector_cache.Candidates | None, vector_cache.VectorCache | None]]:
    """The candidates of the big ranges the caller reads, chosen from the process's copies of
    their vectors (:mod:`agent_memory.vector_cache`), or None when no range is copied; and the
    copies (None when turned off). Also sets the transaction's plans to generic
    (:data:`queries.GENERIC_PLANS`), as the indexed search wants."""
    if not _copied(config):
        if config.distributed is None:  # Citus plans no generic plan of a statement it must split
            yield Sql(queries.GENERIC_PLANS, fetch="none")
        return None, None
    cache = yield from _copies(config)
    plan = yield from vector_cache.prepare(cache, identity, scopes, query_text=query_text, extra_lexemes=extra)
    if not plan.planned:
        yield Sql(queries.GENERIC_PLANS, fetch="none")
    if not plan.ranges:
        return None, cache
    rest = yield Sql(*queries.uncopied_statistics(identity, scopes=scopes, types=types,
                                                  copied=[(c.scope, c.key) for c, _ in plan.ranges],
                                                  query_text=query_text, extra_lexemes=extra))
    chosen = vector_cache.candidates(
        plan, query=vector_cache.unit(query_vector), owner_key=queries.scope_key(identity.user_id), types=types,
        k=need, scoring=scoring, min_relevance=floor, error=vector_cache.ERROR,
        rest_n=next(int(r["n"]) for r in rest if r["kind"] == "n"),
        rest_df={r["lexeme"]: int(r["n"]) for r in rest if r["kind"] == "df"})
    return chosen, cache


def _embed_with_context(news: Sequence[tuple[NewMemory, str]]
                        ) -> Op[tuple[list[Sequence[float]], list[Sequence[float] | None]]]:
    """The vectors of each memory's text (``(new, content)``) and of its context (None without
    one), in one embedding batch: a context costs one more text in the batch the memory's own
    vector is made in, never a second call to the model."""
    contexts = [new.context for new, _ in news if new.context is not None]
    answer = yield Embed(tuple(content for _, content in news) + tuple(contexts))
    vectors = list(answer[:len(news)])
    rest = iter(answer[len(news):])
    return vectors, [next(rest) if new.context is not None else None for new, _ in news]


def narrowing(
    *, filter: Any = None, created_after: Any = None, created_before: Any = None, updated_after: Any = None,
    updated_before: Any = None, source: Any = None, source_id: Any = None,
) -> queries.Query | None:
    """The checked narrowing of a search or list (``None``: nothing narrows, so the search keeps its
    indexes): a metadata ``filter`` (:mod:`agent_memory.filters`), ``created_*``/``updated_*``
    bounds (after: inclusive, before: exclusive), and the origin (``source``: one
    :class:`Source` or a list; ``source_id``: one resource id or a list)."""
    tree = parse_filter(filter)
    times = {name: check_as_of(value, name) for name, value in (
        ("created_after", created_after), ("created_before", created_before),
        ("updated_after", updated_after), ("updated_before", updated_before))}
    for start, end in (("created_after", "created_before"), ("updated_after", "updated_before")):
        if times[start] is not None and times[end] is not None and times[start] >= times[end]:  # type: ignore[operator]
            raise InvalidInputError(end, f"must be later than {start} ({times[start]:%Y-%m-%d %H:%M:%S%z}); "
                                         "swap them, or drop one for an open range")
    sources = check_enum_set("source", source, Source)
    if source_id is None:
        source_ids = None
    else:
        many = source_id if isinstance(source_id, (list, tuple, set, frozenset)) else [source_id]
        if not many:
            raise InvalidInputError("source_id", "is an empty list; pass one id, a list of ids, or None for any")
        source_ids = [check_id("source_id", value) for value in many]
    return queries.narrowing(
        tree, sources=None if sources is None else [s.value for s in sources], source_ids=source_ids, **times)


def find_conflicts(config: MemoryConfig, identity: Identity, results: Sequence[SearchResult]) -> Op[list[Conflict]]:
    """Memories at other levels that disagree with ``results`` (see :mod:`agent_memory.conflicts`),
    including ones the search ranked out, so no level is silently dropped. One statement."""
    anchors = [r.item for r in results if r.item.status is Status.ACTIVE]
    if not anchors:
        return []
    q, p = queries.cross_level_neighbours(identity, [a.id for a in anchors], config.conflict_threshold,
                                          CONFLICT_NEIGHBOURS)
    rows = yield Sql(q, p)
    items = {a.id: a for a in anchors} | {r["id"]: row_to_item(r) for r in rows}
    return conflicts.group_conflicts(
        items, conflicts.as_pairs(rows), anchors=[a.id for a in anchors], scope_priority=config.scope_priority,
        conflict_threshold=config.conflict_threshold, duplicate_threshold=config.duplicate_threshold,
    )


def search_with_conflicts(config: MemoryConfig, identity: Identity, query: Any, **kwargs: Any
                          ) -> Op[tuple[list[SearchResult], list[Conflict]]]:
    """:func:`search_memories`, then :func:`find_conflicts` among and around its results."""
    results = yield from search_memories(config, identity, query, **kwargs)
    return results, (yield from find_conflicts(config, identity, results))


def _statuses(status: Any, as_of: datetime | None) -> tuple[Status, ...] | None:
    """The status filter; by default active items, or with ``as_of`` (or ``known_at``) the items
    of that time (active or superseded since; archived ones were deleted by their owner and stay gone)."""
    if status is DEFAULT_STATUS:
        return (Status.ACTIVE,) if as_of is None else (Status.ACTIVE, Status.SUPERSEDED)
    return check_enum_set("status", status, Status)


def _as_it_was(identity: Identity, rows: dict[UUID, dict[str, Any]], as_of: datetime, *, subtree: bool = False
               ) -> Op[dict[UUID, dict[str, Any]]]:
    """Rows in the wording they had at ``as_of`` (items revised since are read from their history);
    a row whose version of then the caller could not read then is left out (the read's filter
    left it out already; this holds even if it was revised between the two statements)."""
    revised = [i for i, r in rows.items() if int(r.get("version") or 1) > 1]
    if not revised:
        return rows
    then = {r["memory_id"]: r for r in (yield history.wording_at(identity, revised, as_of, subtree=subtree))}
    return {i: ({**r, "content": then[i]["content"], "memory_type": then[i]["memory_type"]} if i in then else r)
            for i, r in rows.items() if i not in then or then[i]["visible"]}


def get_memory(identity: Identity, memory_id: Any) -> Op[MemoryItem]:
    memory_id = check_uuid(memory_id)
    q, p = queries.select_item_by_id(queries.item_filter(identity, statuses=None), memory_id)
    row = yield Sql(q, p, fetch="one")
    if row is None:
        raise MemoryNotFoundError(f"no memory {memory_id} is visible to user {identity.user_id!r}; "
                                  "search or list memories to find valid ids")
    return row_to_item(row)


def list_memories(
    config: MemoryConfig, identity: Identity, *, memory_type: Any = None, scope: Any = None,
    status: Any = DEFAULT_STATUS, limit: Any = 50, offset: Any = 0, as_of: Any = None, known_at: Any = None,
    filter: Any = None, created_after: Any = None, created_before: Any = None, updated_after: Any = None,
    updated_before: Any = None, source: Any = None, source_id: Any = None, subtree: Any = False,
) -> Op[list[MemoryItem]]:
    types = check_memory_types("memory_type", memory_type, config)
    scopes = check_enum_set("scope", scope, Scope)
    as_of = check_as_of(as_of)
    known_at = check_as_of(known_at, "known_at")
    past = known_at or as_of
    statuses = _statuses(status, past)
    limit = check_k(limit, 10_000, field="limit")
    offset = check_offset(offset)
    narrow = narrowing(filter=filter, created_after=created_after, created_before=created_before,
                       updated_after=updated_after, updated_before=updated_before, source=source,
                       source_id=source_id)
    subtree = check_bool("subtree", subtree)
    q, p = queries.select_items(
        queries.item_filter(identity, scopes=scopes, types=types, statuses=statuses, as_of=as_of,
                            known_at=known_at, subtree=subtree, narrow=narrow),
        limit=limit, offset=offset,
    )
    rows = {r["id"]: r for r in (yield Sql(q, p))}
    if past is not None:
        rows = yield from _as_it_was(identity, rows, past, subtree=subtree)
    return [row_to_item(r) for r in rows.values()]


def _editable(identity: Identity, memory_id: Any, verb: str) -> Op[MemoryItem]:
    """The memory, if the caller may change it: its creator, or a project owner/admin, team
    lead or org admin for the memories of their scope (see :mod:`agent_memory.access`)."""
    item = yield from get_memory(identity, memory_id)
    yield from access.require_edit(identity, item, verb)
    return item


def delete_memory(identity: Identity, memory_id: Any, *, hard: bool = False) -> Op[MemoryItem]:
    """Archive (default) or permanently delete one of the caller's memories; answers it as it was."""
    item = yield from _editable(identity, memory_id, "delete")
    if hard:
        yield Sql(*queries.delete_items([item.id]), fetch="none")
        return item
    if item.status is Status.ARCHIVED:
        return item
    q, p = queries.update_status(item.id, Status.ARCHIVED)
    return row_to_item((yield Sql(q, p, fetch="one")))


def restore_memory(identity: Identity, memory_id: Any) -> Op[MemoryItem]:
    item = yield from _editable(identity, memory_id, "restore")
    if item.status is not Status.ARCHIVED:
        raise InvalidInputError("memory_id", f"memory {item.id} is {item.status.value}, only archived memories "
                                             "can be restored")
    q, p = queries.update_status(item.id, Status.ACTIVE)
    return row_to_item((yield Sql(q, p, fetch="one")))


def edit_memory(
    config: MemoryConfig, identity: Identity, memory_id: Any, *, content: Any = None, memory_type: Any = None,
    confidence: Any = None, reason: Any = None,
) -> Op[MemoryItem | Rejection]:
    """Revise one of the caller's active memories in place; the wording it had is kept in its history."""
    if content is None and memory_type is None and confidence is None:
        raise InvalidInputError("content", "nothing to change: pass content=, memory_type= and/or confidence=")
    new_type = None if memory_type is None else check_memory_type("memory_type", memory_type, config)
    new_confidence = None if confidence is None else check_confidence(confidence)
    reason = None if reason is None else check_text("reason", reason, max_length=500)
    refuse_secret("reason", reason)  # kept in the memory's history
    raw = None if content is None else check_text("content", content, allow_empty=True)
    item = yield from _editable(identity, memory_id, "edit")
    _check_editable(item)
    # the memory as it would be after the edit passes the whole gate, like a new one: its
    # wording (secrets, length) and its confidence, whichever of them the edit changes
    text, rejection = _gate(config, NewMemory(
        item.content if raw is None else raw, confidence=item.confidence if new_confidence is None
        else new_confidence, metadata=item.metadata))
    if rejection is not None:
        return rejection
    if raw is None:
        text = None
    if ((text is None or text == item.content) and new_type in (None, item.memory_type)
            and new_confidence in (None, item.confidence)):
        return item  # nothing changes: no new version
    vector = None
    if text is not None and text != item.content:
        yield Commit()
        [vector] = yield Embed((text,))
    yield Sql(*queries.lock_scope(item.scope, item.scope_id, item.user_id), fetch="none")
    yield from access.require_edit(identity, item, "edit")  # the role may have changed while embedding
    # read again under the lock: it may have been archived or replaced while the text was embedded
    q, p = queries.select_item_by_id(queries.item_filter(identity, statuses=None), item.id, lock=True,
                                     scope_id=item.scope_id)
    row = yield Sql(q, p, fetch="one")
    if row is None:
        raise MemoryNotFoundError(f"memory {item.id} was deleted while it was being edited")
    item = row_to_item(row)
    _check_editable(item)
    row = yield from history.revise(
        item, content=item.content if text is None else text, vector=vector, memory_type=new_type,
        confidence=new_confidence, change="edit", decided_by=DecisionMethod.USER, reason=reason,
        changed_by=identity.user_id,
    )
    return row_to_item(row)


def _check_editable(item: MemoryItem) -> None:
    if item.status is not Status.ACTIVE:
        raise InvalidInputError("memory_id", f"memory {item.id} is {item.status.value}; only active memories "
                                             "can be edited (restore it first, or edit the one that replaced it)")


def memory_history(identity: Identity, memory_id: Any, *, distributed: bool = False) -> Op[list[MemoryVersion]]:
    """The memory's wordings and its supersession chain, oldest first (what the caller may see)."""
    item = yield from get_memory(identity, memory_id)
    return (yield from history.chain(identity, item.id, distributed=distributed))


def purge_archived(identity: Identity) -> Op[int]:
    """Permanently delete every archived memory the caller created and may still delete
    (in shared scopes their role decides); answers how many."""
    q, p = queries.select_owned(queries.item_filter(identity, statuses=(Status.ARCHIVED,)))
    rows = yield Sql(q, p)
    allowed: dict[tuple[str, str], bool] = {}
    ids = []
    for row in rows:
        key = (row["scope"], row["scope_id"])
        if key not in allowed:
            scope = Scope(row["scope"])
            if scope in (Scope.USER, Scope.SESSION):
                allowed[key] = True
            else:
                standing = yield from access.scope_access(identity.user_id, scope, row["scope_id"], lock="share")
                allowed[key] = standing.may(access.Action.EDIT_OWN)
        if allowed[key]:
            ids.append(row["id"])
    if not ids:
        return 0
    return (yield Sql(*queries.delete_items(ids), fetch="rowcount"))


def extraction_budget(config: MemoryConfig, identity: Identity) -> Op[int | None]:
    """Extraction runs left for the caller's session in the current window (None without a session)."""
    if identity.session_id is None:
        return None
    window = config.extraction_window_hours * 3600.0
    row = yield Sql(*queries.count_extraction_runs(identity.user_id, identity.session_id, window), fetch="one")
    return max(0, config.max_extractions - int(row["n"]))


def take_extraction_run(config: MemoryConfig, identity: Identity, run: queries.Statement, *,
                        then: str = "try again later") -> Op[tuple[int, int] | Rejection]:
    """The rate limit, in one place: under the session's lock, count its runs in the window and,
    if one is left, record one with ``run`` (a statement answering its ``id``). Answers the run's
    id and the runs left after it, or a RATE_LIMITED rejection whose message ends with ``then``."""
    assert identity.session_id is not None  # checked by the caller
    yield Sql(*queries.lock_extraction_session(identity.user_id, identity.session_id), fetch="none")
    left = yield from extraction_budget(config, identity)
    if not left:
        return Rejection(
            RejectionReason.RATE_LIMITED,
            f"session {identity.session_id!r} already had {config.max_extractions} extraction runs in the last "
            f"{config.extraction_window_hours:g} h (MEMORY_MAX_EXTRACTIONS); {then}",
        )
    row = yield Sql(*run, fetch="one")
    return int(row["id"]), left - 1


def record_extraction_run(config: MemoryConfig, identity: Identity) -> Op[int | Rejection]:
    """Take one extraction run from the session's budget; answers the runs left, or a RATE_LIMITED rejection."""
    if identity.session_id is None:
        raise InvalidInputError("session_id", "automatic extraction is counted per session; pass session_id=...")
    taken = yield from take_extraction_run(config, identity,
                                           queries.insert_extraction_run(identity.user_id, identity.session_id))
    return taken if isinstance(taken, Rejection) else taken[1]


def stats(config: MemoryConfig, identity: Identity) -> Op[MemoryStats]:
    q, p = queries.stats(queries.item_filter(identity, statuses=None))
    rows = yield Sql(q, p)
    by_type: dict[str, int] = {}
    by_scope: dict[str, int] = {}
    by_status: dict[str, int] = {}
    for r in rows:
        for bucket, key in ((by_type, "memory_type"), (by_scope, "scope"), (by_status, "status")):
            bucket[r[key]] = bucket.get(r[key], 0) + int(r["n"])
    remaining = yield from extraction_budget(config, identity)
    visible = queries.item_filter(identity, statuses=None)
    totals = yield Sql(*queries.recall_totals(visible), fetch="one")
    most = [_recall(r) for r in (yield Sql(*queries.most_recalled(visible, 3)))]
    least = [_recall(r) for r in (yield Sql(*queries.least_recalled(visible, 3)))]
    session: dict[str, Any] = {}
    if identity.session_id is not None:
        row = yield Sql(*queries.select_conversation(identity), fetch="one")
        metadata = dict(row["metadata"] or {}) if row is not None else {}
        injected = [i for i in metadata.get("injected") or [] if isinstance(i, dict)]
        ids = sorted({str(x) for i in injected for x in i.get("ids") or []})
        seen: dict[str, RecallCount] = {}
        if ids:
            found = yield Sql(*queries.recalls_by_ids(visible, [UUID(x) for x in ids if _is_uuid(x)]))
            seen = {str(r["id"]): _recall(r) for r in found}
        session = {
            "extraction_runs": config.max_extractions - (remaining or 0),
            "extraction_waits": int(metadata.get("budget_waits") or 0),
            "turns_waiting": len(metadata.get("waiting") or []),
            "recently_injected": tuple(InjectedTurn(
                at=datetime.fromisoformat(i["at"]) if isinstance(i.get("at"), str) else datetime.now(UTC),
                count=len(i.get("ids") or []),
                memories=tuple(seen[str(x)] for x in i.get("ids") or [] if str(x) in seen)) for i in injected),
        }
    return MemoryStats(
        total=sum(by_status.values()),
        by_type=by_type,
        by_scope=by_scope,
        by_status=by_status,
        last_write=max((r["last_write"] for r in rows), default=None),
        extractions_remaining=remaining,
        storage_bytes=sum(int(r["bytes"] or 0) for r in rows),
        recalls=int(totals["recalls"]),
        last_used=totals["last_used"],
        most_recalled=tuple(most),
        least_recalled=tuple(least),
        **session,
    )


def record_injected(identity: Identity, memory_ids: Sequence[Any]) -> Op[None]:
    """Remember on the session's conversation which memories were put in this turn's prompt
    (the last few turns are kept, for :func:`stats`); without a session, nothing."""
    if identity.session_id is None:
        return
    ids = [str(check_uuid(i, "memory_ids")) for i in check_list("memory_ids", memory_ids, max_items=1000)]
    conversation = yield from resources.conversation(identity)
    yield Sql(*queries.record_injected(conversation.id, ids), fetch="none")
    yield Commit()


def _recall(row: Any) -> RecallCount:
    return RecallCount(row["id"], row["content"], int(row["access_count"]), row["last_used_at"],
                       state_for(int(row["access_count"]), int(row.get("recall_count") or 0)))


def _is_uuid(value: str) -> bool:
    try:
        UUID(value)
    except ValueError:
        return False
    return True


def import_memories(
    config: MemoryConfig, identity: Identity, items: Iterable[NewMemory], *, dedupe: bool = False,
) -> Op[AddManyReport]:
    """Many memories in one transaction: gate content checks, one batched embedding, one COPY.

    With ``dedupe`` an item is skipped when it duplicates an active memory in
    its scope or an earlier item of the same import.
    """
    result = AddManyReport()
    accepted: list[tuple[int, NewMemory, str]] = []
    for index, new in enumerate(items):
        content, rejection = _gate(config, new)
        if rejection is not None:
            result.rejected.append((index, rejection))
            continue
        check_scope_id(identity, new.scope)
        accepted.append((index, with_default_expiry(config, new), content))
    if not accepted:
        return result
    for scope in dict.fromkeys(new.scope for _, new, _ in accepted):
        yield from access.require_write(config, identity, scope, "importing memories")
    vectors, context_vectors = yield from _embed_with_context([(new, content) for _, new, content in accepted])
    rows = [new_item_row(identity, new, content, vector, binary=True, context_vector=context)
            for (_, new, content), vector, context in zip(accepted, vectors, context_vectors)]
    keep = list(range(len(accepted)))
    if dedupe:
        keep = []
        matrix = np.asarray(vectors, dtype=np.float32)
        by_scope: dict[Scope, list[int]] = {}
        for pos, (_, new, _) in enumerate(accepted):
            by_scope.setdefault(new.scope, []).append(pos)
        for scope, positions in by_scope.items():
            yield Sql(*queries.lock_scope(scope, identity.scope_id(scope), identity.user_id), fetch="none")
            q, p = queries.find_duplicates_bulk(identity, scope, [vectors[i] for i in positions],
                                                config.duplicate_threshold,
                                                [accepted[i][1].visibility.value for i in positions])
            existing = {int(r["ord"]) - 1: r["id"] for r in (yield Sql(q, p))}
            kept_here: list[int] = []
            for j, pos in enumerate(positions):
                index = accepted[pos][0]
                if j in existing:
                    result.duplicates.append((index, existing[j]))
                    continue
                # only into one at least as visible (queries.merge_rank), as against the stored ones
                least = queries.merge_rank(scope, accepted[pos][1].visibility.value)
                wide = [k for k in kept_here
                        if queries.VISIBILITY_RANK[accepted[k][1].visibility.value] >= least]
                if wide:
                    sims = matrix[wide] @ matrix[pos]
                    best = int(np.argmax(sims))
                    if float(sims[best]) >= config.duplicate_threshold:
                        result.duplicates.append((index, rows[wide[best]]["id"]))
                        continue
                kept_here.append(pos)
            keep.extend(kept_here)
        keep.sort()
    copy_rows = [[rows[pos][c] for c in queries.COPY_COLUMNS] for pos in keep]
    result.inserted.extend(rows[pos]["id"] for pos in keep)
    if copy_rows:
        yield Copy(queries.copy_items(), copy_rows, types=queries.COPY_TYPES)
    dated = [(rows[pos]["id"], rows[pos]["valid_from"]) for pos in keep if rows[pos]["valid_from"] is not None]
    if dated:  # the COPY wrote now(): the ones that say when their fact began get it
        yield Sql(*queries.set_valid_from(dated), fetch="none")
    for pos in keep if config.knowledge_graph else ():  # the graph learns what they say (nothing, for most)
        found = graph_extract(accepted[pos][2])
        if found.found:
            yield from _learn_graph(config, identity, rows[pos]["id"], accepted[pos][2], vectors[pos], found=found,
                                    at=rows[pos]["valid_from"], retention=accepted[pos][1].retention.value)
    return result


def _learn_graph(config: MemoryConfig, identity: Identity, memory_id: UUID, content: str, vector: Any,
                 found: Any = None, *, at: datetime | None = None, retention: str = "decay") -> Op[None]:
    """The knowledge graph learns what a new memory says, in the save's transaction, when
    ``config.knowledge_graph`` is on (``MEMORY_KNOWLEDGE_GRAPH``; off by default until a save's
    extra cost meets its target: BENCHMARKS.md, issue 32). A memory without a vector (a store
    without an index) is resolved by name only."""
    if config.knowledge_graph:
        yield from graph_ops.ingest(identity, memory_id, content,
                                    vector if vector is not None and len(vector) else None, found=found, at=at,
                                    retention=retention)
