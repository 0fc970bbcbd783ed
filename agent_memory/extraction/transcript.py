"""What an extraction run reads: the turns of a conversation after the last one read.

Pure functions. Messages come as LangChain messages (from an agent's state),
``{"role": ..., "content": ...}`` dicts (from an API) or plain strings (user
turns); tool traffic, system prompts and summaries of earlier turns are not
the user's words and are left out.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ..errors import InvalidInputError
from ..validation import check_storable, shown
from ..withheld import find_secret
from ..withheld import redact as redact_secrets
from .when import said_on

__all__ = ["Turn", "new_turns", "transcript", "turn_of", "turns_from_messages"]

Role = Literal["user", "assistant"]
_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant"}
MAX_MESSAGES = 10_000


@dataclass(frozen=True, slots=True)
class Turn:
    id: str | None
    role: Role
    text: str
    at: datetime | None = None  # when it was said, if the message carries the time


def _turn(message: Any, index: int) -> Turn | None:
    if isinstance(message, str):
        return Turn(None, "user", message)
    if isinstance(message, BaseMessage):
        if isinstance(message, HumanMessage):
            if message.additional_kwargs.get("lc_source") == "summarization":
                return None
            return Turn(message.id, "user", message.text, said_on(message))
        if isinstance(message, AIMessage):
            return Turn(message.id, "assistant", message.text, said_on(message)) if message.text.strip() else None
        return None  # system prompts and tool results are not what the user said
    if isinstance(message, dict):
        role = _ROLES.get(str(message.get("role", "")).lower())
        content = message.get("content")
        if role is None or not isinstance(content, str):
            if str(message.get("role", "")).lower() in ("system", "tool"):
                return None
            raise InvalidInputError(
                "messages", f"message {index} must have role user/assistant and string content, got {shown(message)}"
            )
        return Turn(message.get("id"), role, content, said_on(message))  # type: ignore[arg-type]
    raise InvalidInputError(
        "messages", f"message {index} must be a LangChain message, a {{'role', 'content'}} dict or a string, "
                    f"got {type(message).__name__}"
    )


def _with_id(turn: Turn, index: int) -> Turn:
    """A turn without an id (a plain string or dict) gets one from its position and text, so a
    caller who passes the whole conversation again is still read from where the last run stopped."""
    check_storable("messages", f"message {index}", turn.text)  # before anything is written
    if isinstance(turn.id, str):
        check_storable("messages", f"the id of message {index}", turn.id)
        if find_secret(turn.id):  # the last id read is stored as the cursor: keep a digest instead
            return dataclasses.replace(turn, id="#" + hashlib.sha256(turn.id.encode()).hexdigest()[:24])
    if turn.id is not None:
        return turn
    digest = hashlib.sha1(f"{turn.role}\x1f{turn.text}".encode()).hexdigest()[:12]
    return dataclasses.replace(turn, id=f"#{index}:{digest}")


def turns_from_messages(messages: Any) -> list[Turn]:
    """The user and assistant turns of ``messages``, in order."""
    if isinstance(messages, (str, BaseMessage, dict)):
        messages = [messages]
    if not isinstance(messages, Sequence):
        raise InvalidInputError("messages", f"must be a list of messages, got {type(messages).__name__}")
    if len(messages) > MAX_MESSAGES:
        raise InvalidInputError("messages", f"has {len(messages)} messages; pass at most {MAX_MESSAGES}")
    return [_with_id(t, i) for i, m in enumerate(messages) if (t := _turn(m, i)) is not None]


def turn_of(message: Any, index: int) -> Turn | None:
    """The turn ``message`` (at ``index`` in its list) is, with the id :func:`turns_from_messages`
    gives it; None for tool traffic, system prompts and summaries, or a message it cannot read."""
    try:
        turn = _turn(message, index)
        return None if turn is None else _with_id(turn, index)
    except InvalidInputError:
        return None


def new_turns(turns: Sequence[Turn], cursor: str | None) -> list[Turn]:
    """The turns after the one whose id is ``cursor`` (all of them when it is not among them:
    a first run, messages without ids, or a history summarized since)."""
    if cursor is not None:
        for i in range(len(turns) - 1, -1, -1):
            if turns[i].id == cursor:
                return list(turns[i + 1:])
    return list(turns)


def transcript(turns: Sequence[Turn], *, max_chars: int = 12_000, redact: bool = False) -> str:
    """``user: ...`` / ``assistant: ...`` lines, the newest ``max_chars`` of them. With ``redact``
    (the copy kept as a resource) each secret is replaced by ``[withheld: <kind>]`` and the rest
    of the turn kept; the model that extracts sees the conversation it already saw, and the gate
    stops secrets after it."""
    lines = []
    for turn in turns:
        text = turn.text.strip()
        if not text:
            continue
        lines.append(f"{turn.role}: " + (redact_secrets(text) if redact else text))
    out = "\n".join(lines)
    return out[-max_chars:]
