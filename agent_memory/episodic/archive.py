"""Moving old checkpoints out of LangGraph's hot tables, and back.

LangGraph saves a checkpoint at every step and keeps them all, so the hot
tables grow with every turn of every thread. :func:`archive` moves the
checkpoints saved more than ``older_than_days`` ago into ``checkpoint_archive``,
one row per checkpoint holding its pending writes and the blobs that leave
with it, in one statement (so one transaction and one snapshot).

What stays hot, always: each thread's latest checkpoint in each namespace
(with its writes and every blob it references, shared or not). An idle
session therefore still opens, resumes and answers ``get_state`` with no
extra work, and the checkpointer's hot path is LangGraph's own SQL with no
archive lookups. Only history moves: ``get_state_history`` shows what is hot,
:func:`restore` puts a thread's archived checkpoints back byte for byte, and
the checkpointer restores a thread by itself when asked for an archived
checkpoint by id (time travel). Threads that use a LangGraph ``DeltaChannel``
are skipped whole, because their latest value is rebuilt from older
checkpoints; they are counted in ``skipped_threads``.

Forking from an old checkpoint while the archive runs is not safe (the same
caveat as LangGraph's own ``prune``); ordinary runs append to the latest
checkpoint and are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..db.requests import Op, Sql
from ..errors import InvalidInputError
from . import sql
from .snapshots import check_thread_id

__all__ = ["ArchiveCounts", "archive", "check_age_days", "forget_threads", "restore"]


@dataclass(frozen=True, slots=True)
class ArchiveCounts:
    """What one archive or restore moved: threads touched, checkpoints, blobs and writes.
    ``skipped_threads`` counts threads with old checkpoints left hot because they use a DeltaChannel."""

    threads: int = 0
    checkpoints: int = 0
    blobs: int = 0
    writes: int = 0
    skipped_threads: int = 0


def check_age_days(value: Any, field: str = "older_than_days") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidInputError(field, f"must be a positive number of days, got {value!r}")
    return float(value)


def _check_now(value: Any) -> datetime:
    if value is None:
        return datetime.now(UTC)
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInputError("now", f"must be a timezone-aware datetime (or None for the current time), got {value!r}")
    return value


def archive(older_than_days: Any, *, thread_id: Any = None, now: Any = None) -> Op[ArchiveCounts]:
    """Archive checkpoints saved before ``now - older_than_days`` (every thread, or ``thread_id``)."""
    days = check_age_days(older_than_days)
    thread = None if thread_id is None else check_thread_id(thread_id)
    try:
        cutoff = _check_now(now) - timedelta(days=days)
    except OverflowError:
        raise InvalidInputError("older_than_days", f"is too large ({days!r} days)") from None
    query, params = sql.archive_checkpoints(cutoff=cutoff, thread_id=thread)
    row = yield Sql(query, params, fetch="one")
    return ArchiveCounts(**row)


def restore(thread_id: Any) -> Op[ArchiveCounts]:
    """Put all of ``thread_id``'s archived checkpoints back (a no-op when it has none)."""
    query, params = sql.restore_thread(check_thread_id(thread_id))
    row = yield Sql(query, params, fetch="one")
    return ArchiveCounts(**row)


def forget_threads(thread_ids: list[str], *, snapshots: bool) -> Op[None]:
    """Drop what deleted threads left in our tables (see :func:`sql.forget_threads`)."""
    for query, params in sql.forget_threads(thread_ids, snapshots=snapshots):
        yield Sql(query, params, fetch="none")
