"""What the agent already saved with ``memory_save`` in the turns a run reads: said once is enough.

The model saves "All endpoints must return JSON errors" with ``memory_save(scope="project")``
while it answers; the extraction run that reads that turn afterwards would propose the same fact
again, in other words and perhaps at another level. A proposal is skipped when a save answering
the same user turn says the same thing: a cosine of at least :data:`SAME_FACT_COSINE` between the
two, or nearly all of the proposal's content words in the save (:data:`SAME_FACT_WORDS`; the
local model scores some paraphrases low). A proposal whose turn is not known (a model's, which
reads all the new turns at once) is compared with every save of the run's turns. A save the
tool refused (its result is an error) does not count.

Two different facts of one turn ("allergic to peanuts", "allergic to shellfish") score below
both limits on the local model (0.47 and 0.5), paraphrases of one fact above (0.55 to 0.93 cosine,
and their words).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from langchain_core.messages import AIMessage, ToolMessage

from ..db.requests import Embed, Op
from ..models import Proposal
from .transcript import Turn, turn_of

__all__ = ["SAME_FACT_COSINE", "SAME_FACT_WORDS", "Save", "saves_in", "skip_saved"]

SAME_FACT_COSINE = 0.6
SAME_FACT_WORDS = 0.75
_TOOL = "memory_save"
_WORD = re.compile(r"[a-z0-9][a-z0-9+#.'-]*")
#: words that say who rather than what ("The team uses Poetry" / "Project uses Poetry")
_NOT_CONTENT = frozenset(
    "the a an and or of to in on for with at by is are was were be has have had their they them user user's "
    "users team team's project project's organisation org company this that it its".split())


@dataclass(frozen=True, slots=True)
class Save:
    """A ``memory_save`` call: ``turn_id`` is the user turn it answered (None before any)."""

    turn_id: str | None
    content: str
    scope: str | None = None


def _calls(message: Any) -> list[tuple[str | None, dict[str, Any]]]:
    if isinstance(message, AIMessage):
        return [(c.get("id"), c.get("args") or {}) for c in message.tool_calls if c.get("name") == _TOOL]
    return []


def _failed(message: Any) -> str | None:
    """The id of the tool call ``message`` answers when it is a failed ``memory_save``."""
    if isinstance(message, ToolMessage) and message.status == "error":
        return message.tool_call_id
    return None


def saves_in(messages: Any, fresh: Sequence[Turn]) -> list[Save]:
    """The ``memory_save`` calls in ``messages`` that answered one of the ``fresh`` user turns
    and did not fail, in order."""
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return []
    reading = {t.id for t in fresh if t.role == "user"}
    turn_id: str | None = None
    calls: list[tuple[str | None, Save]] = []
    failed: set[str] = set()
    for i, message in enumerate(messages):
        turn = turn_of(message, i)
        if turn is not None and turn.role == "user":
            turn_id = turn.id
        for call_id, args in _calls(message):
            content = args.get("content")
            if isinstance(content, str) and content.strip() and turn_id in reading:
                scope = args.get("scope")
                calls.append((call_id, Save(turn_id, content, scope if isinstance(scope, str) else None)))
        if (answered := _failed(message)) is not None:
            failed.add(answered)
    return [save for call_id, save in calls if call_id is None or call_id not in failed]


def _words(text: str) -> set[str]:
    return {w.rstrip("s.") for w in _WORD.findall(text.lower()) if w not in _NOT_CONTENT and len(w) > 1}


def same_words(proposal: str, save: str) -> float:
    """The share of the proposal's content words that the save has too."""
    mine = _words(proposal)
    return len(mine & _words(save)) / len(mine) if mine else 0.0


def _turn_of(proposal: Proposal, fresh: Sequence[Turn]) -> str | None:
    evidence = (proposal.evidence or "").strip()
    if not evidence:
        return None
    return next((t.id for t in fresh if t.role == "user" and evidence in t.text), None)


def skip_saved(proposals: Sequence[Proposal], fresh: Sequence[Turn], saves: Sequence[Save],
               ) -> Op[tuple[list[Proposal], list[tuple[Proposal, Save, float]]]]:
    """``proposals`` without those a save of the same turn says already; the skipped ones come
    back with the save and their cosine, for the run report."""
    if not saves or not proposals:
        return list(proposals), []
    vectors = yield Embed(tuple(p.content for p in proposals) + tuple(s.content for s in saves))
    matrix = np.asarray(vectors, dtype=np.float32)
    mine, theirs = matrix[: len(proposals)], matrix[len(proposals):]
    kept: list[Proposal] = []
    skipped: list[tuple[Proposal, Save, float]] = []
    for proposal, vector in zip(proposals, mine):
        turn = _turn_of(proposal, fresh)
        best: tuple[float, Save] | None = None
        for save, other in zip(saves, theirs):
            if turn is not None and save.turn_id != turn:
                continue
            cosine = float(vector @ other)
            if cosine >= SAME_FACT_COSINE or same_words(proposal.content, save.content) >= SAME_FACT_WORDS:
                if best is None or cosine > best[0]:
                    best = (cosine, save)
        if best is None:
            kept.append(proposal)
        else:
            skipped.append((proposal, best[1], best[0]))
    return kept, skipped
