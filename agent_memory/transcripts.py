"""Loading a transcript: each turn a memory that keeps its place and the turns before it.

A turn alone often does not say what it is about ("Yes, the one by the lake"); the turns before
it do. Each turn of :func:`add_transcript` is stored as a memory whose ``source_id`` names the
conversation, whose ``position`` is its index in it, and whose ``context`` is the turn with the
:data:`TRANSCRIPT_WINDOW` turns before it. Only turns *before* a turn are its context, so a turn
appended later never changes (nor re-embeds) what is stored: a second call with the next turns
reads the last turns already stored as the first ones' context.

The window: issue 29's offline measurement on LoCoMo (MiniLM, parameters chosen on the
development conversations, then applied unchanged to conversations never used for tuning) found
"the turn and the 2 turns before it" at R@10 0.787 (dev, leave-one-conversation-out) / 0.782
(unseen), against 0.791 / 0.773 for the turn with 2 turns on each side, which would have to be
embedded again whenever a turn is appended.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from . import ops, queries
from .config import MemoryConfig
from .db.requests import Op, Sql
from .errors import InvalidInputError
from .models import Identity, Scope, Source, Visibility
from .reports import AddManyReport
from .validation import check_bool, check_enum, check_id, check_list, check_metadata

__all__ = ["MAX_WINDOW", "TRANSCRIPT_WINDOW", "add_transcript", "context_windows", "turn_text"]

#: how many turns before a turn are its context by default (see the module docstring)
TRANSCRIPT_WINDOW = 2
#: the widest window a caller may ask for
MAX_WINDOW = 20
#: what a turn given as a mapping may say
_TURN_KEYS = ("content", "metadata")


def turn_text(turn: Any, index: int) -> tuple[str, dict[str, Any]]:
    """A turn (a string, or a mapping with ``content`` and optional ``metadata``) as its text and
    its metadata, checked."""
    if isinstance(turn, str):
        return turn, {}
    if isinstance(turn, Mapping):
        unknown = set(turn) - set(_TURN_KEYS)
        if "content" not in turn or unknown:
            raise InvalidInputError(f"turns[{index}]", f"must be a string or a mapping with 'content' and optional "
                                                       f"'metadata'; got keys {sorted(turn)}")
        if not isinstance(turn["content"], str):
            raise InvalidInputError(f"turns[{index}].content", f"must be a string, got {type(turn['content']).__name__}")
        return turn["content"], dict(turn.get("metadata") or {})
    raise InvalidInputError(f"turns[{index}]", f"must be a string or a mapping with 'content', got {type(turn).__name__}")


def context_windows(before: list[str], texts: list[str], window: int) -> list[str]:
    """Each of ``texts``'s context: the ``window`` turns before it (``before``: the turns stored
    earlier, oldest first, then the earlier ``texts``) and the turn itself, one a line."""
    every = before + texts
    start = len(before)
    return ["\n".join(t.strip() for t in every[max(0, start + i - window): start + i + 1] if t.strip())
            for i in range(len(texts))]


def _check_window(window: Any) -> int:
    if isinstance(window, bool) or not isinstance(window, int) or not 0 <= window <= MAX_WINDOW:
        raise InvalidInputError("window", f"must be a whole number of turns from 0 to {MAX_WINDOW}, got {window!r}")
    return window


def add_transcript(
    config: MemoryConfig, identity: Identity, turns: Iterable[Any], *, conversation: Any, start: Any = None,
    window: Any = TRANSCRIPT_WINDOW, scope: Any = Scope.USER, visibility: Any = "members",
    metadata: Any = None, dedupe: Any = False,
) -> Op[AddManyReport]:
    """Store ``turns`` of the transcript ``conversation`` as memories with their context (see the
    module docstring), through the gate and in one batched embedding (the turns' and their
    contexts' vectors together) and one COPY, as :func:`agent_memory.ops.import_memories`.

    ``start``: the position of the first turn (None: right after the last turn of ``conversation``
    the caller has stored in ``scope``, 0 for a new one). Turns before ``start`` that are stored
    are read as the first turns' context."""
    items = check_list("turns", turns)
    conversation = check_id("conversation", conversation)
    window = _check_window(window)
    scope = check_enum("scope", scope, Scope)
    visibility = check_enum("visibility", visibility, Visibility)
    shared = check_metadata(metadata)
    dedupe = check_bool("dedupe", dedupe)
    first = None if start is None else ops.check_position(start, "start")
    parsed = [turn_text(turn, i) for i, turn in enumerate(items)]
    before: list[str] = []
    if first is None or (first > 0 and window > 0):
        where = queries.item_filter(identity, scopes=(scope,))
        tail = yield Sql(*queries.transcript_tail(where, conversation, window))
        if first is None:
            first = 0 if not tail else int(tail[0]["last"]) + 1
        # only the turns right before ``first`` (a gap or a rewrite leaves them out)
        stored = {int(r["position"]): r["content"] for r in tail}
        for position in range(first - 1, first - 1 - window, -1):
            if position not in stored:
                break
            before.insert(0, stored[position])
    contexts = context_windows(before, [text for text, _ in parsed], window)
    news = []
    for i, ((text, extra), context) in enumerate(zip(parsed, contexts)):
        news.append(ops.make_new_memory(
            text, scope=scope, visibility=visibility, source=Source.CONVERSATION, source_id=conversation,
            metadata={**shared, **extra}, context=context or None, position=first + i))
    return (yield from ops.import_memories(config, identity, news, dedupe=dedupe))
