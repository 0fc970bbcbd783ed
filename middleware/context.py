"""What the memory layer puts in front of the model, and when it needs to look again.

The pure parts (which text to search for, whether anything changed since the
last lookup, how to add the block to a system message) are plain functions,
tested without a database. :class:`ContextBuilder` adds the one I/O step, a
search, in a sync and an async form that share everything else.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)

from agent_memory import ops as memory_ops
from agent_memory.config import INJECT_MODES
from agent_memory.db.requests import Op
from agent_memory.errors import InvalidInputError
from agent_memory.formatting import format_memories_for_prompt
from agent_memory.models import Conflict, Identity, SearchResult
from agent_memory.profiles.store import AgentProfiles
from agent_memory.relevance import Decision, ask_model, grounded, keep_relevant, needs_memory, to_look_up
from agent_memory.validation import check_confidence, check_k

from .backend import MemoryBackend

__all__ = [
    "WRITE_TOOLS",
    "ContextBuilder",
    "MemoryContext",
    "build_query",
    "context_key",
    "render_context",
    "user_turns",
]

logger = logging.getLogger(__name__)

#: tools whose results change what a search would return
WRITE_TOOLS = frozenset({"memory_save", "memory_delete"})

MAX_K = 50  # memories per model call; more is a prompt, not a memory
_SHORT_TURN_WORDS = 8  # "and for the backend?", "yes, do that": too little to search on alone
_CONTEXT_CHARS = 200


def _is_user_turn(message: BaseMessage) -> bool:
    # SummarizationMiddleware files its summary as a HumanMessage; it is not something the user said.
    return isinstance(message, HumanMessage) and message.additional_kwargs.get("lc_source") != "summarization"


def _last_user_index(messages: Sequence[BaseMessage]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if _is_user_turn(messages[i]):
            return i
    return None


def build_query(messages: Sequence[BaseMessage], *, max_chars: int = 1000) -> str | None:
    """The search text for the conversation: the latest user turn, preceded by the user's
    previous turn when the latest is too short to stand alone ("and why?", "yes, do that").
    ``None`` when there is no user turn (nothing to look for).

    Only the user's own words are used: the assistant's answers are long, would dilute the
    query, and cost embedding time on every short follow-up (BENCHMARKS.md, middleware overhead).
    """
    last = _last_user_index(messages)
    if last is None:
        return None
    text = messages[last].text.strip()
    if not text:
        return None
    if len(text.split()) < _SHORT_TURN_WORDS:
        previous = next((m.text.strip() for m in reversed(messages[:last]) if _is_user_turn(m) and m.text.strip()),
                        "")
        if previous:
            text = f"{previous[-_CONTEXT_CHARS:]}\n{text}"
    return text[-max_chars:]


def user_turns(messages: Sequence[BaseMessage]) -> tuple[str, list[str]]:
    """The latest user turn and the user's turns before it (oldest first), for the decision
    whether memory is needed (:func:`agent_memory.relevance.needs_memory`)."""
    last = _last_user_index(messages)
    if last is None:
        return "", []
    earlier = [m.text.strip() for m in messages[:last] if _is_user_turn(m) and m.text.strip()]
    return messages[last].text.strip(), earlier[-3:]


def context_key(identity: Identity, messages: Sequence[BaseMessage], query: str | None) -> str:
    """A fingerprint of everything a lookup depends on: who asks, which user turn, the query,
    and every memory write made since that turn. Equal keys mean the last result still holds."""
    last = _last_user_index(messages)
    writes = [
        m.tool_call_id for m in messages[(last or 0):]
        if isinstance(m, ToolMessage) and m.name in WRITE_TOOLS
    ]
    turn = messages[last].id if last is not None else None
    parts = [*identity.kwargs().values(), turn, query, *writes]
    return hashlib.sha256("\x1f".join("" if p is None else str(p) for p in parts).encode()).hexdigest()[:32]


def render_context(
    results: Sequence[SearchResult], *, budget_chars: int, user_profile: str = "", project_profile: str = "",
    conflicts: Sequence[Conflict] = (),
) -> str:
    """The injected text: profile sections (when there are profiles) then the memories, with
    conflicts between levels grouped, together within ``budget_chars``. ``""`` when there is
    nothing to say."""
    sections = [s.strip("\n") for s in (user_profile, project_profile) if s.strip()]
    room = budget_chars - sum(len(s) + 2 for s in sections)
    block = format_memories_for_prompt(results, budget_chars=room, conflicts=conflicts) if room > 0 else ""
    return "\n\n".join([*sections, block] if block else sections)


@dataclass(frozen=True, slots=True)
class MemoryContext:
    """One lookup's outcome: the text to inject, the key it answers, and what was found."""

    key: str
    text: str
    memory_ids: tuple[str, ...] = ()
    #: whether the turn was found to need memory, and why (``None``: no decision was taken)
    decision: Decision | None = None


def _check_budget(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 400:
        raise InvalidInputError("budget_chars", f"must be a whole number of characters >= 400 (the block's frame alone takes about 260), got {value!r}")
    return value


#: characters per token, for the profiles' token budget (English text with common tokenizers)
CHARS_PER_TOKEN = 4


def _check_mode(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in INJECT_MODES:
        raise InvalidInputError("inject_when", f"must be one of {', '.join(INJECT_MODES)} or None for "
                                               f"config.inject_when, got {value!r}")
    return value


def relevant_only(found: tuple[Sequence[SearchResult], Sequence[Conflict]], *, floor: float,
                  keyword_weight: float, at_least_one: bool = False) -> tuple[list[SearchResult], list[Conflict]]:
    """The hits worth injecting (:func:`~agent_memory.relevance.keep_relevant`), and the
    conflicts that involve one of them (a conflict around a dropped hit goes with it)."""
    results, conflicts = found
    kept = keep_relevant(results, floor=floor, keyword_weight=keyword_weight, at_least_one=at_least_one)
    ids = {r.id for r in kept}
    return kept, [c for c in conflicts if any(m.id in ids for m in c.items)]


class ContextBuilder:
    """Looks up the memories for a conversation and renders them, sync or async.

    A turn that does not need memory (``inject_when``, :mod:`agent_memory.relevance`) is not
    searched at all, unless it names someone or asks for work (``worth_a_look``): then it is
    searched, and needs memory when a hit knows what it names (``grounded``). The profiles
    are injected on every turn. Hits under the relevance floor (``min_relevance``, default
    ``config.inject_min_relevance``) are left out, except that a turn needing memory gets its
    most relevant hit even under it.
    """

    def __init__(
        self, backend: MemoryBackend, *, k: int = 6, budget_chars: int | None = None,
        min_relevance: float | None = None, profiles: bool = True, inject_when: str | None = None,
    ) -> None:
        self.backend = backend
        self.profiles = profiles
        self.k = check_k(k, MAX_K)
        self.budget_chars = _check_budget(budget_chars)
        if min_relevance is not None:
            check_confidence(min_relevance, "min_relevance")
        self.min_relevance = min_relevance
        self.inject_when = _check_mode(inject_when)

    @property
    def floor(self) -> float:
        return self.backend.config.inject_min_relevance if self.min_relevance is None else self.min_relevance

    @property
    def mode(self) -> str:
        return self.backend.config.inject_when if self.inject_when is None else self.inject_when

    def _plan(self, identity: Identity, messages: Sequence[AnyMessage]) -> tuple[str, str | None]:
        query = build_query(messages)
        return context_key(identity, messages, query), query

    def _model(self) -> Any:
        """The service's chat model when the decision is the model's to take, else ``None``."""
        if self.mode != "model":
            return None
        return getattr(self.backend.service, "llm", None)

    def _rules(self, messages: Sequence[AnyMessage]) -> Decision:
        if self.mode == "always":
            return Decision(True, "always")
        return needs_memory(*user_turns(messages))

    def _keep_best(self, decision: Decision | None) -> bool:
        """A turn decided to need memory gets its best hit even under the floor; not with
        ``inject_when="always"``, where nothing was decided and the floor alone filters."""
        return decision is not None and decision.needed and self.mode != "always"

    def _wants_search(self, query: str | None, decision: Decision, turn: tuple[str, list[str]]) -> bool:
        return bool(query) and (decision.needed or (self.mode == "rules" and bool(to_look_up(*turn))))

    def _lookup(self, identity: Identity, query: str, decision: Decision,
                turn: tuple[str, list[str]]) -> Op[tuple[tuple[list[SearchResult], list[Conflict]], Decision]]:
        """The hits for a turn, and the decision, revised when a generic-looking turn (or the turn
        it follows up) names what the user's memories know (:func:`~agent_memory.relevance.grounded`)."""
        if not decision.needed:
            # a look that counts no recall: these hits are shown only if the turn proves to need them
            principal = self.backend.ops(identity)
            peek, _ = yield from memory_ops.search_with_conflicts(
                principal.config, principal.identity, query, k=self.k, min_relevance=0.0, touch=False)
            contents = [r.item.content for r in peek]
            grounds = [(checked, why) for checked in to_look_up(*turn) if (why := grounded(checked, contents))]
            if not grounds:
                return ([], []), decision
            checked, reason = grounds[0]
            decision = Decision(True, reason if checked == turn[0] else f"follow-up of a turn that {reason}")
        ops = self.backend.ops(identity)
        found = yield from ops.search_with_conflicts(query, k=self.k, min_relevance=self.floor)
        if not found[0] and self._keep_best(decision):  # its best hit, however weak (keep_relevant's at_least_one)
            found = yield from ops.search_with_conflicts(query, k=1, min_relevance=0.0)
        return found, decision

    def _finish(self, key: str, found: tuple[Sequence[SearchResult], Sequence[Conflict]],
                profiles: AgentProfiles | None, decision: Decision | None = None) -> MemoryContext:
        config = self.backend.config
        results, conflicts = relevant_only(found, floor=self.floor, keyword_weight=config.keyword_weight,
                                           at_least_one=self._keep_best(decision))
        budget = self.budget_chars if self.budget_chars is not None else config.prompt_budget_chars
        # each profile: its token budget, and at most a third of the whole, so this turn's memories fit too
        room = min(budget // 3, config.profile_budget_tokens * CHARS_PER_TOKEN)
        user = profiles.user.render(budget_chars=room) if profiles is not None and room else ""
        project = profiles.project.render(budget_chars=room) if profiles and profiles.project and room else ""
        text = render_context(results, budget_chars=budget, user_profile=user, project_profile=project,
                              conflicts=conflicts)
        shown = dict.fromkeys([str(r.id) for r in results] + [str(m.id) for c in conflicts for m in c.items])
        if decision is not None:
            logger.debug("memory %s for this turn (%s): %d of %d hits over the floor %.3g injected",
                         "needed" if decision.needed else "not needed", decision.reason, len(results),
                         len(found[0]), self.floor)
        return MemoryContext(key=key, text=text, memory_ids=tuple(shown), decision=decision)

    def build(self, identity: Identity, messages: Sequence[AnyMessage], *, known_key: str | None = None
              ) -> MemoryContext | None:
        """The context for ``messages``; ``None`` when ``known_key`` shows nothing changed."""
        key, query = self._plan(identity, messages)
        if key == known_key:
            return None
        model = self._model() if query else None
        turn = user_turns(messages)
        decision = self.backend.run(ask_model(model, *turn)) if model else self._rules(messages)
        found: tuple[Sequence[SearchResult], Sequence[Conflict]] = ([], [])
        if self._wants_search(query, decision, turn):
            assert query is not None
            found, decision = self.backend.run(self._lookup(identity, query, decision, turn))
        profiles = self.backend.run(self.backend.ops(identity).profiles()) if self.profiles else None
        return self._finish(key, found, profiles, decision)

    async def abuild(self, identity: Identity, messages: Sequence[AnyMessage], *, known_key: str | None = None
                     ) -> MemoryContext | None:
        key, query = self._plan(identity, messages)
        if key == known_key:
            return None
        model = self._model() if query else None
        turn = user_turns(messages)
        decision = await self.backend.arun(ask_model(model, *turn)) if model else self._rules(messages)
        found: tuple[Sequence[SearchResult], Sequence[Conflict]] = ([], [])
        if self._wants_search(query, decision, turn):
            assert query is not None
            found, decision = await self.backend.arun(self._lookup(identity, query, decision, turn))
        profiles = await self.backend.arun(self.backend.ops(identity).profiles()) if self.profiles else None
        return self._finish(key, found, profiles, decision)
