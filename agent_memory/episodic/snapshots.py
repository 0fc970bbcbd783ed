"""Session snapshots: a compact, per-user summary of a thread's state for fast reload.

Reopening a session (a page refresh, a session list in a UI) should not need
LangGraph's checkpoints, whose blobs hold every message ever exchanged. The
snapshot is a small JSON document (title, message count, the last few
messages shortened, and state keys such as todos or working memory) written
at the end of each run by
:class:`~agent_memory.middleware.episodic.SessionSnapshotMiddleware`.
The checkpoint stays the source of truth; the snapshot is a cache of it.

Every read and write names the user, and a snapshot is keyed by
``(user_id, thread_id)``: a user never sees another user's snapshot, even for
the same thread id. Thread ids are global in LangGraph, though: two users who
run the same ``thread_id`` share one conversation's checkpoints (each would
get their own snapshot of it). Give every user their own thread ids
(for example ``f"{user_id}:{uuid4()}"``).

Building a snapshot is pure (:func:`build_snapshot`); the ops below are
generators run by :func:`agent_memory.db.requests.run`/``arun``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any
from uuid import UUID

from langchain_core.messages import BaseMessage, convert_to_messages

from ..db.requests import Op, Sql
from ..errors import InvalidInputError
from ..validation import check_id, check_identity
from ..withheld import redact
from . import sql

__all__ = [
    "DEFAULT_STATE_KEYS",
    "SessionSnapshot",
    "build_snapshot",
    "check_thread_id",
    "list_sessions",
    "load_snapshot",
    "save_snapshot",
]

#: state keys copied into a snapshot when a run's state has them (todo lists, working memory)
DEFAULT_STATE_KEYS = ("todos", "working_memory")
RECENT_MESSAGES = 6
MAX_MESSAGE_CHARS = 500
MAX_TITLE_CHARS = 80
MAX_STATE_VALUE_BYTES = 8_192
MAX_LIST_LIMIT = 200


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """What a UI needs to show and reopen a session without loading its checkpoints.

    ``recent_messages`` are ``{"type", "content", "tool_calls"}`` dicts (content
    shortened, tool calls by name), oldest first. ``state`` holds the snapshotted
    state keys that were present (``todos``, ``working_memory``...). ``checkpoint_id``
    is the checkpoint the run's last step started from, when known.
    """

    user_id: str
    thread_id: str
    project_id: str | None
    title: str | None
    message_count: int
    recent_messages: tuple[Mapping[str, Any], ...]
    state: Mapping[str, Any]
    checkpoint_id: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SessionSnapshot:
        doc = row["snapshot"] or {}
        return cls(
            user_id=row["user_id"], thread_id=row["thread_id"], project_id=row["project_id"], title=row["title"],
            message_count=row["message_count"],
            recent_messages=tuple(MappingProxyType(m) for m in doc.get("recent_messages", ())),
            state=MappingProxyType(dict(doc.get("state", {}))), checkpoint_id=row["checkpoint_id"],
            created_at=row["created_at"], updated_at=row["updated_at"],
        )


def check_thread_id(value: Any, field: str = "thread_id") -> str:
    """A LangGraph thread id as stored: strings, ints and UUIDs become text (LangGraph does the same)."""
    if isinstance(value, UUID):
        value = str(value)
    if value is None:
        raise InvalidInputError(field, "is required: pass the thread_id the run used")
    return check_id(field, value)


# --- building a snapshot (pure) ------------------------------------------------------------


def _clean(value: Any) -> Any:
    """JSON PostgreSQL can store: no NUL characters, no lone surrogates, no secrets (withheld)."""
    if isinstance(value, str):
        return redact(value.replace("\x00", "").encode("utf-8", "replace").decode("utf-8"))
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(str(k)): _clean(v) for k, v in value.items()}
    return value


def _json_default(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _jsonable(value: Any) -> Any:
    """``value`` as JSON, or a marker when it is too big to belong in a compact snapshot."""
    encoded = json.dumps(value, default=_json_default, ensure_ascii=False, allow_nan=False)
    size = len(encoded.encode("utf-8", "replace"))
    if size > MAX_STATE_VALUE_BYTES:
        return {"omitted": f"{size} bytes as JSON; snapshots keep values up to {MAX_STATE_VALUE_BYTES}"}
    return _clean(json.loads(encoded))


def _shorten(text: str, limit: int) -> str:
    text = " ".join(_clean(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _messages(value: Any) -> list[BaseMessage]:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidInputError("state", f"'messages' must be a list of messages, got {type(value).__name__}")
    try:
        return [m if isinstance(m, BaseMessage) else convert_to_messages([m])[0] for m in value]
    except (TypeError, ValueError, NotImplementedError) as exc:
        raise InvalidInputError("state", f"'messages' holds something that is not a message: {exc}") from None


def _compact(message: BaseMessage) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": message.type, "content": _shorten(message.text, MAX_MESSAGE_CHARS)}
    tool_calls = getattr(message, "tool_calls", None)
    if tool_calls:
        entry["tool_calls"] = [call["name"] for call in tool_calls]
    if message.type == "tool" and getattr(message, "name", None):
        entry["name"] = message.name
    return entry


def build_snapshot(
    state: Mapping[str, Any], *, state_keys: Iterable[str] = DEFAULT_STATE_KEYS, recent: int = RECENT_MESSAGES,
) -> dict[str, Any]:
    """The compact form of an agent ``state``: ``title``, ``message_count`` and the document
    stored in ``session_state_snapshot.snapshot`` (``recent_messages`` and ``state``)."""
    if not isinstance(state, Mapping):
        raise InvalidInputError("state", f"must be the agent's state (a dict with 'messages'), got {type(state).__name__}")
    messages = _messages(state.get("messages"))
    first_user = next((m for m in messages if m.type == "human" and m.text.strip()), None)
    kept = {key: _jsonable(state[key]) for key in state_keys if state.get(key) is not None}
    return {
        "title": _shorten(first_user.text, MAX_TITLE_CHARS) if first_user is not None else None,
        "message_count": len(messages),
        "document": _clean({
            "v": 1,
            "recent_messages": [_compact(m) for m in messages[-recent:]] if recent > 0 else [],
            "state": kept,
        }),
    }


# --- ops -------------------------------------------------------------------------------------


def save_snapshot(
    state: Mapping[str, Any], *, user_id: Any, thread_id: Any, project_id: Any = None,
    checkpoint_id: Any = None, state_keys: Iterable[str] = DEFAULT_STATE_KEYS,
) -> Op[SessionSnapshot]:
    identity = check_identity(user_id, project_id)
    thread = check_thread_id(thread_id)
    checkpoint = None if checkpoint_id is None else check_id("checkpoint_id", checkpoint_id)
    built = build_snapshot(state, state_keys=state_keys)
    query, params = sql.upsert_snapshot(
        user_id=identity.user_id, thread_id=thread, project_id=identity.project_id, title=built["title"],
        message_count=built["message_count"], checkpoint_id=checkpoint, snapshot=built["document"],
    )
    row = yield Sql(query, params, fetch="one")
    return SessionSnapshot.from_row(row)


def load_snapshot(thread_id: Any, *, user_id: Any) -> Op[SessionSnapshot | None]:
    identity = check_identity(user_id)
    query, params = sql.load_snapshot(user_id=identity.user_id, thread_id=check_thread_id(thread_id))
    row = yield Sql(query, params, fetch="one")
    return None if row is None else SessionSnapshot.from_row(row)


def _check_count(field: str, value: Any, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise InvalidInputError(field, f"must be a whole number between {minimum} and {maximum}, got {value!r}")
    return value


def list_sessions(
    *, user_id: Any, project_id: Any = None, limit: Any = 20, offset: Any = 0,
) -> Op[list[SessionSnapshot]]:
    identity = check_identity(user_id, project_id)
    query, params = sql.list_snapshots(
        user_id=identity.user_id, project_id=identity.project_id,
        limit=_check_count("limit", limit, 1, MAX_LIST_LIMIT), offset=_check_count("offset", offset, 0, 10**9),
    )
    rows = yield Sql(query, params)
    return [SessionSnapshot.from_row(r) for r in rows]
