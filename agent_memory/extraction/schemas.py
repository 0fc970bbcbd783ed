"""The structured outputs asked of a chat model, the prompts that ask for them, and the
tolerant readers of what comes back.

Models are asked through ``model.with_structured_output(Schema)``; whatever
they answer is then checked here again, because a model's output is input
like any other: an unknown type, a confidence of 7 or a target that was never
offered is dropped or falls back, it never raises into the agent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field, create_model

from agent_memory.prompts import render

from ..formatting import escape
from ..memory_types import known_types
from ..models import Decision, MemoryItem, MemoryType, Proposal, Scope
from .when import anchor_when, resolve_when

if TYPE_CHECKING:
    from ..config import MemoryConfig

__all__ = [
    "ConsolidationDecision",
    "ConsolidationDecisions",
    "ExtractedMemories",
    "ExtractedMemory",
    "candidate_label",
    "consolidation_messages",
    "decisions_from_output",
    "extraction_instructions",
    "extraction_messages",
    "extraction_schema",
    "proposals_from_output",
]

MemoryTypeName = Literal["preference", "fact", "skill", "habit", "event", "context", "constraint", "decision"]


class ExtractedMemory(BaseModel):
    """One thing worth remembering about the user or their project."""

    content: str = Field(description="One short, self-contained sentence in the third person.")
    memory_type: MemoryTypeName = Field(description="What kind of memory this is.")
    scope: Literal["user", "project"] = Field(
        description="'user' for the person, 'project' for their shared project or team.")
    confidence: float = Field(description="0.9-1.0 stated explicitly, 0.7-0.8 clearly implied.")
    valid_from: str | None = Field(default=None, description=(
        "When the fact began to hold, only if the user said so: a date (YYYY-MM-DD) resolved against "
        "the conversation's time, or their own words ('last month', 'in March 2023'). Omit otherwise."))


class ExtractedMemories(BaseModel):
    """The memories worth keeping from the conversation; usually none."""

    memories: list[ExtractedMemory] = Field(default_factory=list)


class ConsolidationDecision(BaseModel):
    """What to do with one proposal."""

    proposal: int = Field(description="The proposal's number, as shown.")
    decision: Literal["ADD", "UPDATE", "SUPERSEDE", "NONE"]
    target: str | None = Field(default=None, description="For UPDATE/SUPERSEDE/NONE: the stored memory's id "
                                                          "(M1, M2, ...) as listed under the proposal.")
    content: str | None = Field(default=None, description="For UPDATE: the merged sentence.")
    reason: str = Field(default="", description="Why, in a few words.")


class ConsolidationDecisions(BaseModel):
    """One decision per proposal."""

    decisions: list[ConsolidationDecision] = Field(default_factory=list)


def extraction_instructions(config: MemoryConfig | None) -> str:
    """The extraction model's instructions: the bundled ones, then ``config``'s custom memory
    types (each name with its description) and its ``extraction_instructions``, each delimited."""
    text = render("extraction")
    if config is None:
        return text
    if config.custom_memory_types:
        types = "\n".join(f'<type name="{name}">{escape(description)}</type>'
                          for name, description in config.custom_memory_types.items())
        text += render("extraction_custom_types", types=types)
    if config.extraction_instructions:
        text += render("extraction_instructions", instructions=escape(config.extraction_instructions.strip()))
    return text


@cache
def _schema_with(names: tuple[str, ...]) -> type[ExtractedMemories]:
    """The schemas with ``memory_type`` one of ``names`` (built when a config first needs them)."""
    kind: Any = Literal[names]  # a Literal of names known at run time
    memory = create_model("ExtractedMemory", __base__=ExtractedMemory,
                          memory_type=(kind, Field(description="What kind of memory this is.")))
    memories: Any = list[memory]  # type: ignore[valid-type]
    return create_model("ExtractedMemories", __base__=ExtractedMemories,
                        memories=(memories, Field(default_factory=list)))


def extraction_schema(config: MemoryConfig | None) -> type[ExtractedMemories]:
    """What the extraction model answers with: :class:`ExtractedMemories`, whose ``memory_type``
    also takes ``config``'s custom types when it has some (a schema of the same name)."""
    if config is None or not config.custom_memory_types:
        return ExtractedMemories
    return _schema_with(known_types(config))


def extraction_messages(transcript: str, *, now: datetime | None = None,
                        config: MemoryConfig | None = None) -> list[BaseMessage]:
    """The extraction prompt for ``transcript``, said at ``now`` (default: the current time), with
    ``config``'s custom types and instructions (:func:`extraction_instructions`)."""
    now = datetime.now(UTC) if now is None else now
    return [SystemMessage(extraction_instructions(config)),
            HumanMessage(render("extraction_input", transcript=escape(transcript),
                                now=f"{now:%A %Y-%m-%d %H:%M %Z}".strip()))]


def _valid_from(said: object, content: str, now: datetime) -> datetime | None:
    """When the model says the fact began: an ISO date or time, or words resolved against ``now``
    (falling back to the memory's own words); never after ``now``, None when it cannot tell."""
    at: datetime | None = None
    if isinstance(said, str) and said.strip():
        try:
            at = datetime.fromisoformat(said.strip())
        except ValueError:
            at = resolve_when(said, now)
        else:
            at = at if at.tzinfo is not None else at.replace(tzinfo=now.tzinfo or UTC)
    if at is None:
        at = resolve_when(content, now)
    return None if at is None or at > now else at


def _number(value: object, default: float) -> float:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return default
    return default if math.isnan(x) else min(1.0, max(0.0, x))


def proposals_from_output(output: ExtractedMemories, *, evidence: str | None = None,
                          now: datetime | None = None) -> list[Proposal]:
    """The model's proposals as :class:`Proposal` objects; malformed entries are dropped. With
    ``now`` (when the conversation was said) each gets ``valid_from`` when the model, or the
    memory's own words, say when the fact began (never later than ``now``)."""
    out: list[Proposal] = []
    for m in output.memories:
        content = (m.content or "").strip()
        if not content:
            continue
        try:
            memory_type, scope = MemoryType(m.memory_type), Scope(m.scope)
        except ValueError:
            continue
        valid_from = None if now is None else _valid_from(getattr(m, "valid_from", None), content, now)
        content = content if now is None else anchor_when(content, now)  # "last month" stays true next year
        out.append(Proposal(content, memory_type, scope, _number(m.confidence, 0.0), evidence, valid_from))
    return out


def candidate_label(i: int) -> str:
    return f"M{i + 1}"


def consolidation_messages(items: Sequence[tuple[Proposal, Sequence[tuple[MemoryItem, float]]]]) -> list[BaseMessage]:
    """The prompt for deciding every proposal at once; candidates are labelled ``M1``, ``M2``...
    per proposal (see :func:`candidate_label`), never by database id."""
    blocks = []
    for n, (proposal, candidates) in enumerate(items, start=1):
        head = f'<proposal number="{n}" type="{proposal.memory_type.value}" scope="{proposal.scope.value}">'
        lines = [f"{head}{escape(proposal.content)}</proposal>"]
        if candidates:
            lines += [f'  <stored id="{candidate_label(i)}" type="{item.memory_type.value}" '
                      f'date="{(item.valid_from or item.created_at):%Y-%m-%d}">{escape(item.content)}</stored>'
                      for i, (item, _) in enumerate(candidates)]
        else:
            lines.append("  (no similar stored memories)")
        blocks.append("\n".join(lines))
    return [SystemMessage(render("consolidation")),
            HumanMessage(render("consolidation_input", proposals="\n".join(blocks)))]


def decisions_from_output(
    output: ConsolidationDecisions, items: Sequence[tuple[Proposal, Sequence[tuple[MemoryItem, float]]]],
) -> list[tuple[Decision, int | None, str | None, str] | None]:
    """Per proposal: (decision, candidate index, merged content, reason), or None when the model
    gave no usable decision for it (the caller falls back to the similarity thresholds)."""
    out: list[tuple[Decision, int | None, str | None, str] | None] = [None] * len(items)
    for d in output.decisions:
        n = d.proposal - 1
        if not 0 <= n < len(items) or out[n] is not None:
            continue
        decision = Decision(d.decision.lower())
        candidates = items[n][1]
        labels = {candidate_label(i): i for i in range(len(candidates))}
        target = labels.get((d.target or "").strip().upper())
        if decision is not Decision.ADD and target is None:
            if decision is Decision.NONE and not candidates:
                continue  # "already known" with nothing known: not usable
            if len(candidates) != 1:
                continue
            target = 0  # one candidate: the model can only have meant it
        content = (d.content or "").strip() or None if decision is Decision.UPDATE else None
        out[n] = (decision, target if decision is not Decision.ADD else None, content, (d.reason or "").strip())
    return out
