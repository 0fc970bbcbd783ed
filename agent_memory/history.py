"""How a memory changes without losing what it was: revisions, supersession and ``as_of``.

Two kinds of change, as consolidation decides them:

- UPDATE (the same fact, said with more detail, or edited by a person): the
  item is revised in place, its ``version`` goes up, and the wording it had is
  kept in ``memory_item_history`` with the time it was replaced.
- SUPERSEDE (a new fact contradicts it): the old item becomes ``superseded``
  with ``superseded_by`` pointing at the new item. Both timelines close: its
  ``valid_to`` (event time) is the new fact's ``valid_from``, and its ``known_to``
  (record time) is now. Superseded items never surface in search or injection
  by default, but the chain stays readable.

Two timelines (as Zep/Graphiti keep them): ``valid_from``/``valid_to`` say when a
fact held in the world ("moved to Lisbon last month": from a month ago, see
:mod:`agent_memory.extraction.when`), ``recorded_at``/``known_to`` when the memory
held it. A search ``as_of`` a past time reads the items whose fact held then
(``valid_from <= as_of < valid_to``); ``known_at`` the items the memory held then
(``recorded_at <= known_at < known_to``); each in the wording it had then, ranked by it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from . import queries
from .db.requests import Op, Sql
from .models import (
    DecisionMethod,
    Identity,
    MemoryItem,
    MemoryType,
    MemoryVersion,
    Source,
    Status,
    Visibility,
)
from .withheld import redact

__all__ = [
    "chain",
    "revise",
    "supersede",
    "wording_at",
]


def revise(
    item: MemoryItem, *, content: str, vector: Sequence[float] | None, memory_type: MemoryType | None = None,
    confidence: float | None = None, metadata: Mapping[str, Any] | None = None, change: str = "update",
    decided_by: DecisionMethod = DecisionMethod.SIMILARITY, reason: str | None = None, changed_by: str,
    valid_from: datetime | None = None,
) -> Op[dict[str, Any]]:
    """Revise ``item`` in place (the caller holds the scope lock and has checked ownership);
    answers the new row. ``vector`` is the new content's embedding (None keeps the old one).
    The reason is kept with secrets withheld, whoever wrote it (a person, or a model quoting
    the conversation). ``valid_from``: when the fact began, if the revision says so (an earlier
    time than the item's moves its start back)."""
    (keep, p), (update, _) = queries.revise_item(
        item.id, content=content, vector=vector, memory_type=memory_type or item.memory_type,
        confidence=item.confidence if confidence is None else confidence,
        metadata=item.metadata if metadata is None else metadata, change=change, decided_by=decided_by,
        reason=None if reason is None else redact(reason), changed_by=changed_by, valid_from=valid_from,
    )
    yield Sql(keep, p, fetch="none")
    return (yield Sql(update, p, fetch="one"))


def supersede(old: MemoryItem, new_row: Mapping[str, Any]) -> Op[dict[str, Any]]:
    """Mark ``old`` superseded by the just-inserted ``new_row`` (same transaction): the old fact
    stops holding when the new one starts (``valid_to`` = its ``valid_from``), and the memory
    stops holding it when it learned the new one (``known_to`` = its ``recorded_at``, the
    transaction's ``now()``); answers the old row."""
    return (yield Sql(*queries.supersede_item(old.id, new_row["id"], new_row["valid_from"]), fetch="one"))


def wording_at(identity: Identity, ids: Sequence[UUID], as_of: datetime, *, subtree: bool = False) -> Sql:
    """For items revised after ``as_of``, the wording they had at ``as_of``, and whether
    ``identity`` could read that version then (``visible``)."""
    return Sql(*queries.wordings_at(queries.version_visible(identity, subtree=subtree), ids, as_of))


class _Change(NamedTuple):
    """How one version came to be."""

    change: str | None
    decided_by: DecisionMethod | None
    reason: str | None
    changed_by: str | None


_UNKNOWN = _Change(None, None, None, None)  # made by a change the reader may not see


def _method(value: Any) -> DecisionMethod | None:
    return DecisionMethod(value) if value in DecisionMethod.values() else None


def _creation(row: Mapping[str, Any], metadata: Mapping[str, Any] | None) -> _Change:
    """How an item's first wording came to be: the consolidation that added it (extraction,
    documents), else stated directly (``add`` by a person or the agent's tool)."""
    decided = (metadata or {}).get("consolidation") or {}
    change = decided.get("decision")
    if change not in ("add", "supersede"):
        change = "supersede" if "supersedes" in decided else "add"
    method = _method(decided.get("decided_by"))
    if method is None and not decided and row["source"] in (Source.USER.value, Source.AI.value):
        method = DecisionMethod.USER
    return _Change(change, method, decided.get("reason"), row["user_id"])


def _chain_ids(memory_id: UUID) -> Op[list[UUID]]:
    """The ids of :func:`queries.supersession_chain`'s rows, found one step a statement (at most 100
    steps each way): the items that replaced ``memory_id`` in turn, and those it replaced, theirs..."""
    found = [memory_id]
    back, fwd, seen = [memory_id], memory_id, {memory_id}
    for _ in range(100):
        if not back and fwd is None:
            break
        step = yield Sql(*queries.chain_step(back, fwd))
        back = [r["id"] for r in step if r["kind"] == "back" and r["id"] not in seen]
        ahead = [r["id"] for r in step if r["kind"] == "fwd" and r["id"] not in seen]
        fwd = ahead[0] if ahead else None
        seen.update(back + ahead)
        found += back + ahead
    return found


def chain(identity: Identity, memory_id: UUID, *, distributed: bool = False) -> Op[list[MemoryVersion]]:
    """Every item of ``memory_id``'s supersession chain the caller may see (older items it
    replaced, newer ones that replaced it), each with the earlier wordings the caller could read
    when they held (under the scope and visibility of then: a memory made visible to more
    readers later keeps its earlier, narrower wordings from them); oldest first. ``distributed``
    (a Citus cluster, which runs no recursive statement over many shards): the chain is followed
    one step a statement, the same rows."""
    where = queries.item_filter(identity, statuses=None)
    if distributed:
        ids = yield from _chain_ids(memory_id)
        rows = yield Sql(*queries.chain_rows(where, ids))
    else:
        rows = yield Sql(*queries.supersession_chain(where, memory_id))
    if not rows:
        return []
    old = yield Sql(*queries.earlier_wordings(queries.version_visible(identity), [r["id"] for r in rows]))
    versions: list[MemoryVersion] = []
    for row in rows:
        status = Status(row["status"])
        kept = [h for h in old if h["memory_id"] == row["id"]]
        # a kept wording's row records the change that REPLACED it; each version is shown with
        # the change that MADE it: the row of the version before, or the item's creation
        made_by: dict[int, _Change] = {h["version"] + 1: _Change(
            h["change"], _method(h["decided_by"]), h["reason"], h["changed_by"]) for h in kept}
        first = kept[0] if kept and kept[0]["version"] == 1 else None
        if first is not None or not kept:
            made_by.setdefault(1, _creation(row, (first or row)["metadata"]))
        for h in kept:
            change = made_by.get(h["version"], _UNKNOWN)
            versions.append(MemoryVersion(
                memory_id=row["id"], version=h["version"], content=h["content"],
                memory_type=MemoryType(h["memory_type"]), status=status, valid_from=row["valid_from"],
                valid_to=row["valid_to"], recorded_until=h["replaced_at"], current=False, change=change.change,
                decided_by=change.decided_by, reason=change.reason, superseded_by=row["superseded_by"],
                visibility=Visibility(h["visibility"]), changed_by=change.changed_by,
            ))
        change = made_by.get(row["version"], _UNKNOWN)
        versions.append(MemoryVersion(
            memory_id=row["id"], version=row["version"], content=row["content"],
            memory_type=MemoryType(row["memory_type"]), status=status, valid_from=row["valid_from"],
            valid_to=row["valid_to"], recorded_until=None, current=True, superseded_by=row["superseded_by"],
            reason=change.reason, decided_by=change.decided_by, change=change.change,
            visibility=Visibility(row["visibility"]), changed_by=change.changed_by,
        ))
    epoch = datetime.min.replace(tzinfo=rows[0]["created_at"].tzinfo)
    versions.sort(key=lambda v: (v.valid_from or epoch, v.recorded_until is None, v.recorded_until or epoch,
                                 v.version))
    return versions
