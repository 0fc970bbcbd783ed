"""One extraction run, written once as an operation (sync and async share it).

conversation (layer 1) -> proposals -> gate -> consolidation -> memory items
(layer 2) -> profiles (layer 3):

1. The session's conversation resource says which messages were read
   already (its cursor); a run with no new user turn stops here, for free.
2. The rate limit: at most ``max_extractions`` runs per session in the
   window, counted under the session's advisory lock. The run is recorded.
   Without a model, a turn in which the rules find no statement costs
   nothing and is not counted (the limit is there to bound model calls
   and how fast memory grows, and such a run does neither).
3. Proposals: from the configured chat model (structured output), or from
   the deterministic rules for explicit statements without one.
4. The gate: empty, too short/long, low confidence, secrets. Rejections are
   recorded, never stored.
5. Consolidation: the stored items most like each proposal, in its scope,
   and a decision (ADD/UPDATE/SUPERSEDE/NONE) by the model when there is one
   and by :mod:`.consolidate` otherwise (or when the model fails, or gives no
   usable decision for a proposal). Every decision is recorded with who made it.
6. In one transaction, under each scope's lock, the decisions are applied
   (re-checked against the rows as they are now), the conversation's cursor
   moves past what was read, and the run is closed.
7. Profiles whose inputs changed are rebuilt.

The model is never called inside a transaction. A failed extraction call
leaves the cursor where it was, so the next run reads those messages again.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

import numpy as np

from .. import access, history, ops, queries, resources
from ..config import MemoryConfig
from ..db.requests import Commit, Embed, Llm, Op, Sql
from ..errors import InvalidInputError, PermissionDeniedError
from ..gate import check_content, normalize_content
from ..graph import model_extract
from ..graph import ops as graph_ops
from ..graph.extract import Extracted
from ..graph.extract import extract as graph_extract
from ..models import (
    SHARED_SCOPES,
    Decision,
    DecisionMethod,
    Identity,
    MemoryItem,
    NewMemory,
    Proposal,
    Rejection,
    Resource,
    RejectionReason,
    Scope,
    Source,
    Status,
    Visibility,
)
from ..profiles.store import refresh_profiles
from ..queries.rows import new_item_row, row_to_item
from ..reports import Report
from ..validation import shown
from ..withheld import redact
from . import cadence, levels, rules, saved, schemas
from .consolidate import Verdict, decide_by_similarity
from .transcript import Turn, new_turns, transcript, turns_from_messages

__all__ = [
    "ExtractionReport", "Outcome", "Outcomes", "close_failed_run", "consolidate_proposals", "extract_memories",
    "extract_waiting", "model_name",
]

logger = logging.getLogger(__name__)

MAX_PROPOSALS = 20  # per part of a conversation a model reads (:func:`_parts`)
MAX_TRANSCRIPT_CHARS = 12_000


def model_name(model: Any) -> str:
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one proposal. ``memory`` is the item stored, revised or (NONE) already
    there; ``replaced`` the item as it was before an UPDATE or the one a SUPERSEDE retired."""

    proposal: Proposal
    decision: Decision | None = None
    decided_by: DecisionMethod | None = None
    memory: MemoryItem | None = None
    replaced: MemoryItem | None = None
    rejection: Rejection | None = None
    reason: str = ""
    similarity: float | None = None
    said_of: Scope | None = None  # the group level it was said of, when it was kept elsewhere (levels)


class Outcomes:
    """A report's ``outcomes`` by what was decided (extraction from a conversation or a document)."""

    __slots__ = ()
    outcomes: tuple[Outcome, ...]

    def _with(self, decision: Decision) -> list[Outcome]:
        return [o for o in self.outcomes if o.decision is decision]

    @property
    def added(self) -> list[Outcome]:
        """New memories."""
        return self._with(Decision.ADD)

    @property
    def updated(self) -> list[Outcome]:
        """Stored memories revised with what was said."""
        return self._with(Decision.UPDATE)

    @property
    def superseded(self) -> list[Outcome]:
        """New memories that replaced a stored one they contradict (``replaced``)."""
        return self._with(Decision.SUPERSEDE)

    @property
    def unchanged(self) -> list[Outcome]:
        """Proposals a stored memory says already."""
        return self._with(Decision.NONE)

    @property
    def rejected(self) -> list[Outcome]:
        """Proposals the gate refused (a secret, too short, low confidence, no right to write)."""
        return [o for o in self.outcomes if o.rejection is not None]

    @property
    def kept_as_user(self) -> list[Outcome]:
        """Proposals said of a team, project or organisation but kept as the user's own memory
        (the run has no such level, or the caller may not write it): flagged ``said_of``."""
        return [o for o in self.outcomes if o.said_of is not None and o.proposal.scope is Scope.USER]


@dataclass(frozen=True, slots=True)
class ExtractionReport(Report, Outcomes):
    """What one extraction run did.

    status: ``done``; ``nothing_new`` (no new user turn since the last run: no budget used);
    ``waiting`` (fewer new user turns than ``min_new_turns``: no budget used, they wait);
    ``rate_limited`` (the session's runs for the window are used up; the messages wait for a
    later run); ``failed`` (the model failed; ``error`` says how, and the messages wait too).
    ``waiting`` is also the answer when the window's last run is kept for the end of the
    conversation (``keep_last_run``). ``waiting_turns``: how many turns wait on the session's
    conversation after this run (read by the next run; never dropped).
    """

    status: Literal["done", "nothing_new", "waiting", "rate_limited", "failed"]
    extractor: str
    outcomes: tuple[Outcome, ...] = ()
    run_id: int | None = None
    resource_id: UUID | None = None
    runs_left: int | None = None
    error: str | None = None
    profiles_rebuilt: tuple[str, ...] = ()
    waiting_turns: int = 0

    @property
    def changed(self) -> bool:
        return any(o.decision in (Decision.ADD, Decision.UPDATE, Decision.SUPERSEDE) for o in self.outcomes)

    def summary(self) -> str:
        """One line per outcome, for logs and demos."""
        if self.status != "done":
            waiting = f" ({self.waiting_turns} message{'' if self.waiting_turns == 1 else 's'} waiting)" \
                if self.waiting_turns else ""
            return f"extraction {self.status}{waiting}" + (f": {self.error}" if self.error else "")
        lines = []
        for o in self.outcomes:
            if o.rejection is not None:
                lines.append(f"REJECTED {o.proposal.content!r}: {o.rejection.message}")
            else:
                lines.append(f"{o.decision.value.upper():9} {o.proposal.content!r} ({o.decided_by}: {o.reason})")
        return "\n".join(lines) or "nothing worth remembering"


# --- steps ------------------------------------------------------------------------------------


def _parts(turns: Sequence[Turn]) -> list[list[Turn]]:
    """``turns`` in consecutive parts whose transcript fits :data:`MAX_TRANSCRIPT_CHARS` (a run
    reads everything that waited: a long conversation is read part by part, none of it cut)."""
    parts: list[list[Turn]] = [[]]
    size = 0
    for turn in turns:
        length = len(turn.text) + 12
        if parts[-1] and size + length > MAX_TRANSCRIPT_CHARS:
            parts.append([])
            size = 0
        parts[-1].append(turn)
        size += length
    return [p for p in parts if p]


def _propose(model: Any, fresh: Sequence[Turn], config: MemoryConfig | None = None) -> Op[list[Proposal]]:
    """Proposals from the turns not read yet, part by part (a model's: at most
    :data:`MAX_PROPOSALS` a part); when a fact began ("last month") is resolved against the time its turn was said (the
    part's time: its newest turn's for a model), else now. A proposal quoting a secret a waiting
    turn had withheld is no memory."""
    now = datetime.now(UTC)
    proposals: list[Proposal] = []
    for part in _parts(fresh):
        if model is None:
            found = [p for t in part if t.role == "user"
                     for p in rules.extract_proposals(t.text, said_at=min(t.at or now, now))]
        else:
            said = min(next((t.at for t in reversed(part) if t.at is not None), now), now)
            output = yield Llm(model, schemas.extraction_schema(config), tuple(schemas.extraction_messages(
                transcript(part, max_chars=MAX_TRANSCRIPT_CHARS), now=said, config=config)))
            found = schemas.proposals_from_output(output, now=said)
        found = [p for p in found if cadence.WITHHELD not in p.content]
        proposals += found if model is None else found[:MAX_PROPOSALS]  # the rules' are all the user's words
    return proposals


def _evidence(proposal: Proposal) -> str | None:
    """The quote a proposal came with, as kept in the memory's metadata: secrets withheld
    (before it is cut, so that no part of one is kept)."""
    if not proposal.evidence:
        return None
    return redact(normalize_content(proposal.evidence))[:300] or None


def _gate(config: MemoryConfig, identity: Identity, proposal: Proposal) -> tuple[Proposal, str, Rejection | None]:
    note = ""
    if proposal.scope is not Scope.USER and identity.scope_id(proposal.scope) is None:
        proposal = dataclasses.replace(proposal, scope=Scope.USER)
        note = "no project in this run, kept as a user memory; "
    content = normalize_content(proposal.content)
    return dataclasses.replace(proposal, content=content), note, check_content(
        content, confidence=proposal.confidence, config=config)


def _refusal(config: MemoryConfig, identity: Identity, scope: Scope) -> Op[Rejection | None]:
    """Why the caller may not write ``scope`` (their role), or None when they may."""
    try:
        yield from access.require_write(config, identity, scope, "saving an extracted memory")
    except PermissionDeniedError as exc:
        return Rejection(RejectionReason.NOT_PERMITTED, str(exc))
    return None


def _decide(
    config: MemoryConfig, model: Any, gated: Sequence[Proposal], candidates: Sequence[list[tuple[MemoryItem, float]]],
) -> Op[list[tuple[Verdict, DecisionMethod]]]:
    by_model: list[Any] = [None] * len(gated)
    fallback = ""
    if model is not None and any(candidates):
        items = list(zip(gated, candidates))
        try:
            output = yield Llm(model, schemas.ConsolidationDecisions, tuple(schemas.consolidation_messages(items)))
            by_model = schemas.decisions_from_output(output, items)
        except Exception as exc:  # noqa: BLE001 - the thresholds decide instead; the run still learns
            logger.warning("consolidation by the model failed, using similarity thresholds: %s", exc)
            fallback = f"the model failed ({type(exc).__name__}), so "
    verdicts: list[tuple[Verdict, DecisionMethod]] = []
    for proposal, cands, decided in zip(gated, candidates, by_model):
        if decided is not None:
            decision, target, content, reason = decided
            sim = cands[target][1] if target is not None else None
            verdicts.append((Verdict(decision, target, content or proposal.content, reason or "decided by the model",
                                     sim), DecisionMethod.LLM))
        else:
            v = decide_by_similarity(proposal, cands, duplicate_threshold=config.duplicate_threshold)
            if model is not None and cands and not fallback:
                v = dataclasses.replace(v, reason="the model gave no usable decision, so " + v.reason)
            elif fallback:
                v = dataclasses.replace(v, reason=fallback + v.reason)
            verdicts.append((v, DecisionMethod.SIMILARITY))
    return verdicts


#: the visibility of the memories a run writes (:func:`_new_row`: the default); a proposal is a
#: duplicate only of a memory at least as visible (:func:`agent_memory.queries.merge_rank`)
_VISIBLE_TO = Visibility.MEMBERS.value


def _context(proposal: Proposal) -> str | None:
    """What a proposal's memory keeps as its context (issue 29): the text it was read from (the
    turn or passage the extractor quotes), secrets withheld; None without one."""
    return ops.check_context(proposal.evidence) if proposal.evidence else None


def _new_row(config: MemoryConfig, identity: Identity, proposal: Proposal, vector: Sequence[float], *,
             source_id: str, consolidation: dict[str, Any], source: Source = Source.CONVERSATION,
             extra: Mapping[str, Any] | None = None,
             context_vector: Sequence[float] | None = None) -> Op[dict[str, Any]]:
    metadata: dict[str, Any] = {**(extra or {}), "consolidation": consolidation}
    if (evidence := _evidence(proposal)) is not None:
        metadata["evidence"] = evidence
    new = ops.with_default_expiry(config, NewMemory(
        content=proposal.content, memory_type=proposal.memory_type, scope=proposal.scope,
        confidence=proposal.confidence, source=source, source_id=source_id, metadata=metadata,
        valid_from=proposal.valid_from, context=_context(proposal) if context_vector is not None else None))
    return (yield Sql(queries.insert_item(), new_item_row(identity, new, proposal.content, vector,
                                                          context_vector=context_vector), fetch="one"))


def _current(identity: Identity, item: MemoryItem) -> Op[MemoryItem | None]:
    """``item`` as it is now, locked for this transaction; None unless still active."""
    q, p = queries.select_item_by_id(queries.item_filter(identity, statuses=(Status.ACTIVE,)), item.id, lock=True,
                                     scope_id=item.scope_id)
    row = yield Sql(q, p, fetch="one")
    return None if row is None else row_to_item(row)


def _apply(
    config: MemoryConfig, identity: Identity, proposal: Proposal, vector: Sequence[float], verdict: Verdict,
    method: DecisionMethod, target: MemoryItem | None, *, run_id: int, source_id: str,
    update_vector: Sequence[float] | None, note: str, source: Source = Source.CONVERSATION,
    extra: Mapping[str, Any] | None = None, context_vector: Sequence[float] | None = None,
) -> Op[Outcome]:
    """Apply one decision under the scope's lock, re-checking it against the rows as they are now."""
    yield Sql(*queries.lock_scope(proposal.scope, identity.scope_id(proposal.scope), identity.user_id),
              fetch="none")
    decision, reason = verdict.decision, note + verdict.reason
    if target is not None:
        now = yield from _current(identity, target)
        if now is None:
            decision, target, reason = Decision.ADD, None, note + "the memory it was about changed meanwhile; added"
        elif decision in (Decision.UPDATE, Decision.SUPERSEDE) and now.user_id != identity.user_id:
            decision, target = Decision.ADD, None
            reason = note + f"{verdict.reason}; the stored memory is another member's, so this one is added beside it"
        else:
            target = now
    if (decision is Decision.NONE and target is not None
            and queries.VISIBILITY_RANK[target.visibility.value] < queries.merge_rank(proposal.scope, _VISIBLE_TO)):
        # "known already" only if everyone who would read the new one reads the stored one
        reason = note + f"{verdict.reason}; the stored memory is {target.visibility.value}, so this one is added beside it"
        decision, target = Decision.ADD, None
    if decision is Decision.ADD:
        # merged only into a memory at least as visible as the new one would be (_new_row: the default)
        q, p = queries.find_duplicate(identity, proposal.scope, vector, config.duplicate_threshold,
                                      visibility=_VISIBLE_TO)
        dup = yield Sql(q, p, fetch="one")
        if dup is not None:
            decision, target = Decision.NONE, row_to_item(dup)
            reason = note + f"a stored memory says this already (cosine {dup['similarity']:.2f})"
    reason = redact(reason)  # the model's words: they may quote what it read
    record = {"decision": decision.value, "decided_by": method.value, "reason": reason, "run_id": run_id}
    memory: MemoryItem | None = None
    replaced: MemoryItem | None = None
    if decision is Decision.ADD:
        memory = row_to_item((yield from _new_row(config, identity, proposal, vector, source_id=source_id,
                                                  consolidation=record, source=source, extra=extra,
                                                  context_vector=context_vector)))
    elif decision is Decision.UPDATE and target is not None:
        content = verdict.content or proposal.content
        replaced = target
        row = yield from history.revise(
            target, content=content, vector=update_vector if update_vector is not None else vector,
            confidence=max(target.confidence, proposal.confidence),
            metadata={**target.metadata, "consolidation": record}, change="update", decided_by=method,
            reason=reason, changed_by=identity.user_id, valid_from=proposal.valid_from,
        )
        memory = row_to_item(row)
    elif decision is Decision.SUPERSEDE and target is not None:
        new_row = yield from _new_row(config, identity, proposal, vector, source_id=source_id,
                                      consolidation={**record, "supersedes": str(target.id)}, source=source,
                                      extra=extra, context_vector=context_vector)
        replaced = row_to_item((yield from history.supersede(target, new_row)))
        memory = row_to_item(new_row)
    elif target is not None:  # NONE: known already; it was just confirmed
        q, p = queries.refresh_duplicate(target.id)
        memory = row_to_item((yield Sql(q, p, fetch="one")))
    yield Sql(*queries.insert_decision(
        run_id, identity.user_id, proposal.scope.value, identity.scope_id(proposal.scope), proposal.content,
        proposal.memory_type.value, decision.value, method.value, target.id if target is not None else None,
        memory.id if memory is not None else None, verdict.similarity, reason), fetch="none")
    return Outcome(proposal, decision, method, memory, replaced, None, reason, verdict.similarity)


def _record_rejection(identity: Identity, run_id: int, proposal: Proposal, rejection: Rejection) -> Sql:
    # the proposal's text is not kept when it holds a secret: the record would keep the secret;
    # any other rejected text is kept with secrets withheld (a text far too long is not scanned
    # by the gate, so it is redacted here before it is cut)
    text = "[withheld]" if rejection.reason is RejectionReason.SENSITIVE else redact(proposal.content)[:2000]
    return Sql(*queries.insert_rejection(
        run_id, identity.user_id, proposal.scope.value, identity.scope_id(proposal.scope) or identity.user_id,
        text, proposal.memory_type.value, redact(rejection.message)), fetch="none")


def _consolidate(
    config: MemoryConfig, identity: Identity, proposals: Sequence[Proposal], model: Any, *, run_id: int,
    source_id: str, source: Source = Source.CONVERSATION, extras: Sequence[Mapping[str, Any]] | None = None,
    place: bool = False,
) -> Op[list[Outcome]]:
    """Gate, decide and apply ``proposals`` (one outcome each, in order). New memories get
    ``source``/``source_id`` and, from ``extras`` (one per proposal), more metadata. With
    ``place``, a statement said of a group goes to the nearest level the run has and the caller
    may write, else to the user's, flagged (:mod:`.levels`), instead of being refused."""
    outcomes: list[Outcome | None] = [None] * len(proposals)
    gated: list[tuple[int, Proposal, str]] = []
    refused: dict[Scope, Rejection | None] = {}
    known: dict[Scope, str | None] = {}
    said_of: dict[int, Scope] = {}
    for i, raw in enumerate(proposals):
        placed = levels.Placement(raw)
        if place:
            placed = yield from levels.place(config, identity, raw, known)
            if placed.said_of is not None:
                said_of[i] = placed.said_of
        proposal, note, rejection = _gate(config, identity, placed.proposal)
        note = placed.note + note
        if rejection is None and proposal.scope in SHARED_SCOPES:
            if proposal.scope not in refused:
                refused[proposal.scope] = yield from _refusal(config, identity, proposal.scope)
            rejection = refused[proposal.scope]
        if rejection is not None:
            outcomes[i] = Outcome(proposal, rejection=rejection, reason=rejection.message, said_of=said_of.get(i))
            yield _record_rejection(identity, run_id, proposal, rejection)
        else:
            gated.append((i, proposal, note))
    if gated:
        # each memory's vector and its context's (the text it was read from) in one batch
        contexts = [_context(p) for _, p, _ in gated]
        answer = yield Embed(tuple(p.content for _, p, _ in gated) + tuple(c for c in contexts if c is not None))
        vectors = answer[:len(gated)]
        rest = iter(answer[len(gated):])
        context_vectors = [next(rest) if c is not None else None for c in contexts]
        candidates: list[list[tuple[MemoryItem, float]]] = []
        for (_, proposal, _), vector in zip(gated, vectors):
            q, p = queries.similar_items(identity, (proposal.scope,), vector, config.consolidation_floor,
                                         config.consolidation_candidates)
            candidates.append([(row_to_item(r), float(r["similarity"])) for r in (yield Sql(q, p))])
        yield Commit()
        verdicts = yield from _decide(config, model, [p for _, p, _ in gated], candidates)

        merged: dict[int, str] = {}
        for j, ((_, proposal, _), (verdict, _)) in enumerate(zip(gated, verdicts)):
            if verdict.decision is Decision.UPDATE and verdict.content and verdict.content != proposal.content:
                content = normalize_content(verdict.content)
                if check_content(content, confidence=proposal.confidence, config=config) is None:
                    merged[j] = content
                else:  # the model's merged wording failed the gate: store the proposal's own
                    verdicts[j] = (dataclasses.replace(verdict, content=proposal.content), verdicts[j][1])
        merged_vectors = dict(zip(merged, (yield Embed(tuple(merged.values()))))) if merged else {}
        said = yield from _graph_by_model(config, model, [
            merged.get(j, verdict.content or p.content if verdict.decision is Decision.UPDATE else p.content)
            for j, ((_, p, _), (verdict, _)) in enumerate(zip(gated, verdicts)) if verdict.decision is not Decision.NONE])

        seen: list[tuple[np.ndarray, Outcome]] = []  # what this run stored so far
        for j, ((i, proposal, note), vector, (verdict, method)) in enumerate(zip(gated, vectors, verdicts)):
            v = np.asarray(vector, dtype=np.float32)
            earlier = next((o for s, o in seen if o.proposal.scope is proposal.scope
                            and float(s @ v) >= config.duplicate_threshold), None)
            if earlier is not None:  # said twice in one run: the first one stands for both
                outcomes[i] = Outcome(proposal, Decision.NONE, DecisionMethod.SIMILARITY, earlier.memory,
                                      reason="repeats an earlier proposal of this run", said_of=said_of.get(i))
                continue
            target = candidates[j][verdict.target][0] if verdict.target is not None else None
            extra = None if extras is None else extras[i]
            if i in said_of:
                extra = {**(extra or {}), levels.SAID_OF: said_of[i].value}
            outcome = yield from _apply(
                config, identity, proposal, vector, verdict, method, target, run_id=run_id, source_id=source_id,
                update_vector=merged_vectors.get(j), note=note, source=source, extra=extra,
                context_vector=context_vectors[j],
            )
            outcome = outcomes[i] = dataclasses.replace(outcome, said_of=said_of.get(i))
            seen.append((v, outcome))
            if config.knowledge_graph and outcome.memory is not None and outcome.decision is not Decision.NONE:
                yield from _learn_graph(identity, outcome.memory, merged_vectors.get(j, vector), said)
    return [o for o in outcomes if o is not None]


def _graph_by_model(config: MemoryConfig, model: Any, contents: Sequence[str]) -> Op[dict[str, Extracted]]:
    """What the model says the new memories are about (:mod:`agent_memory.graph.model_extract`),
    by content; nothing without a model or the graph, or when the model fails (the rules then
    read them). Asked with no transaction open."""
    if not (config.knowledge_graph and model is not None and contents):
        return {}
    unique = list(dict.fromkeys(contents))
    answer = yield from model_extract.learn(model, unique)
    if answer is None:
        logger.warning("graph extraction by the model failed; the rules read these memories")
        return {}
    return dict(zip(unique, answer))


def _learn_graph(identity: Identity, memory: MemoryItem, vector: Sequence[float],
                 said: Mapping[str, Extracted]) -> Op[None]:
    """The graph learns a memory the run wrote, in its transaction: what the model said of it
    together with what the rules read, or the rules alone."""
    rules_found = graph_extract(memory.content)
    by_model = said.get(memory.content)
    found = rules_found if by_model is None else model_extract.combine(by_model, rules_found)
    yield from graph_ops.ingest(identity, memory.id, memory.content, vector if len(vector) else None, found=found)


#: the gate, consolidation and writes of a run, for proposals from another source than a
#: conversation (documents: :mod:`agent_memory.documents.learn`); the caller records the run
consolidate_proposals = _consolidate


def _counts(outcomes: Sequence[Outcome]) -> dict[str, int]:
    counts = {d.value: 0 for d in Decision} | {"rejected": 0}
    for o in outcomes:
        counts["rejected" if o.rejection is not None else o.decision.value] += 1  # type: ignore[union-attr]
    return counts


# --- the run ----------------------------------------------------------------------------------


def _skip_saved(proposals: Sequence[Proposal], fresh: Sequence[Turn],
                saves: Sequence[saved.Save]) -> Op[tuple[list[Proposal], list[Outcome]]]:
    """The proposals a ``memory_save`` of the same turn did not say already; the others as
    ``unchanged`` outcomes (nothing written: the tool wrote it)."""
    kept, skipped = yield from saved.skip_saved(proposals, fresh, saves)
    return kept, [Outcome(p, Decision.NONE, DecisionMethod.SIMILARITY, reason=(
        redact(f"saved with memory_save in the same turn ({s.scope or 'default'} scope: {shown(s.content)}, "
               f"cosine {cosine:.2f})"))) for p, s, cosine in skipped]


def _mark_read(conversation: Resource, fresh: Sequence[Turn], waited: int) -> Op[None]:
    """Keep what was read (secrets withheld) on the conversation, move its cursor past it and
    drop the ``waited`` turns that waited on it (they are read now)."""
    read = list(fresh)
    if waited:
        yield Sql(*queries.clear_waiting(conversation.id, waited), fetch="none")
    if read:
        cursor = next((t.id for t in reversed(read) if t.id and not t.id.startswith(_WAITED)), None)
        yield from resources.append_to_conversation(
            conversation.id, transcript(read, max_chars=resources.MAX_RESOURCE_CHARS, redact=True), cursor)


#: the ids of turns read back from the waiting list are marked so the cursor never moves back to one
_WAITED = "\x00waited:"


def _stash(config: MemoryConfig, identity: Identity, conversation: Resource, fresh: Sequence[Turn], *,
           budget_wait: bool = False) -> Op[int]:
    """Keep ``fresh`` on the conversation to be read by a later run (the cadence deferred them,
    the budget is spent, or the model failed) and move the cursor past them. With
    ``budget_wait`` the wait is counted, and logged at WARNING the first time in the session.
    Answers how many turns wait now."""
    waiting = len(cadence.waiting_turns(conversation.metadata)) + len(cadence.turns_to_json(fresh))
    if not fresh and not budget_wait:
        return waiting
    cursor = fresh[-1].id if fresh else None
    row = yield Sql(*queries.stash_turns(conversation.id, cadence.turns_to_json(fresh), cursor,
                                         budget_wait=budget_wait), fetch="one")
    if budget_wait and row is not None and not row["warned"]:
        logger.warning(
            "memory extraction for session %r of user %r waits: its %d runs of the last %g h are used "
            "(MEMORY_MAX_EXTRACTIONS); %d message(s) are kept and read by the next run the limit allows "
            "(logged once per session; stats() counts the waits)",
            identity.session_id, identity.user_id, config.max_extractions, config.extraction_window_hours, waiting)
    return waiting


def close_failed_run(run_id: int, exc: Exception) -> Op[None]:
    """After an error in mid-run (a database error, a bug): undo the run's unfinished writes
    and mark it ``failed`` with the error, so it never stays ``running``. The caller re-raises;
    if the database cannot even take this, the original error is what matters."""
    error = redact(f"{type(exc).__name__}: {exc}")[:1000]
    logger.warning("memory extraction run %s failed: %s", run_id, error)
    try:
        yield Sql(*queries.rollback(), fetch="none")  # the open transaction's half-applied decisions go
        yield Commit()
        yield Sql(*queries.fail_extraction_run(run_id, error), fetch="none")
        yield Commit()
    except Exception as again:  # noqa: BLE001 - keep the first error
        logger.warning("could not mark extraction run %s failed: %s", run_id, again)


def extract_memories(
    config: MemoryConfig, identity: Identity, messages: Any, *, model: Any = None, profile_model: Any = None,
    min_new_turns: int = 1, keep_last_run: bool = False,
) -> Op[ExtractionReport]:
    """Read the session's messages not read yet (those that waited on its conversation first,
    then the new ones) and turn what is worth keeping into memory items.

    min_new_turns: run only once this many user turns wait (fewer: they are kept for a later
        run, ``waiting``). keep_last_run: never spend the window's last run here; it is kept for
        the end of the conversation (:func:`extract_waiting`). Turns a run cannot read now (the
        cadence, the budget, a failed model) are kept on the conversation, never dropped.
    """
    if isinstance(min_new_turns, bool) or not isinstance(min_new_turns, int) or min_new_turns < 1:
        raise InvalidInputError("min_new_turns", f"must be a whole number >= 1, got {shown(min_new_turns)}")
    turns = turns_from_messages(messages)
    if identity.session_id is None:
        raise InvalidInputError("session_id", "automatic extraction reads a session's conversation and is "
                                              "rate-limited per session; pass session_id=...")
    extractor = "rules" if model is None else f"llm:{model_name(model)}"
    conversation = yield from resources.conversation(identity)
    fresh = new_turns(turns, conversation.cursor)
    waited = cadence.waiting_turns(conversation.metadata)
    pending = [dataclasses.replace(t, id=_WAITED + str(t.id)) for t in waited] + fresh
    new_user_turns = cadence.user_turns(pending)

    def report(status: Any, waiting: int, **fields: Any) -> Op[ExtractionReport]:
        yield Commit()
        rebuilt = yield from refresh_profiles(identity, model=profile_model)
        return ExtractionReport(status, extractor, resource_id=conversation.id, profiles_rebuilt=tuple(rebuilt),
                                waiting_turns=waiting, **fields)

    if new_user_turns == 0 or new_user_turns < min_new_turns:
        waiting = yield from _stash(config, identity, conversation, fresh if new_user_turns else [])
        return (yield from report("waiting" if new_user_turns else "nothing_new", waiting if new_user_turns else 0))

    saves = saved.saves_in(messages, fresh)  # what the agent saved with memory_save meanwhile
    ruled: list[Proposal] = []
    skipped: list[Outcome] = []
    if model is None:
        ruled, skipped = yield from _skip_saved((yield from _propose(None, pending)), pending, saves)
        if not ruled:  # the rules cost nothing: turns without a statement use no budget
            yield from _mark_read(conversation, pending, len(waited))
            return (yield from report("done", 0, outcomes=tuple(skipped)))
    if keep_last_run:
        left = yield from ops.extraction_budget(config, identity)
        if cadence.due(new_user_turns, every=min_new_turns, runs_left=left, keep_last_run=True) == "keep_last_run":
            waiting = yield from _stash(config, identity, conversation, fresh)
            return (yield from report("waiting", waiting, runs_left=left))
    run = queries.start_extraction_run(identity.user_id, identity.session_id, identity.project_id, conversation.id,
                                       extractor)
    taken = yield from ops.take_extraction_run(config, identity, run, then="its new messages wait")
    if isinstance(taken, Rejection):
        waiting = yield from _stash(config, identity, conversation, fresh, budget_wait=True)
        return (yield from report("rate_limited", waiting, runs_left=0, error=taken.message))
    run_id, left = taken
    yield Commit()

    try:
        proposals = ruled
        if model is not None:
            proposals, skipped = yield from _skip_saved((yield from _propose(model, pending, config)), pending, saves)
    except Exception as exc:  # noqa: BLE001 - the model failed: record it, keep the messages for the next run
        error = redact(f"{type(exc).__name__}: {exc}")[:1000]  # an error may quote the conversation
        logger.warning("memory extraction failed for session %r: %s", identity.session_id, error)
        yield Sql(*queries.fail_extraction_run(run_id, error), fetch="none")
        waiting = yield from _stash(config, identity, conversation, fresh)
        yield Commit()
        return ExtractionReport("failed", extractor, run_id=run_id, resource_id=conversation.id,
                                runs_left=left, error=error, waiting_turns=waiting)

    try:
        outcomes = yield from _consolidate(config, identity, proposals, model, run_id=run_id,
                                           source_id=str(conversation.id), place=True)
        yield from _mark_read(conversation, pending, len(waited))
        yield Sql(*queries.close_extraction_run(run_id, _counts(outcomes)), fetch="none")
        yield Commit()
    except Exception as exc:
        yield from close_failed_run(run_id, exc)
        raise
    rebuilt = yield from refresh_profiles(identity, model=profile_model)
    return ExtractionReport("done", extractor, (*skipped, *outcomes), run_id, conversation.id, left,
                            profiles_rebuilt=tuple(rebuilt))


def extract_waiting(
    config: MemoryConfig, identity: Identity, *, model: Any = None, profile_model: Any = None,
    idle_seconds: float = 0.0,
) -> Op[list[ExtractionReport]]:
    """Read the turns waiting on the caller's conversations, each session's with its own budget:
    the end of a conversation, when the last run of its window was kept for it (the agent
    middleware calls this when a thread goes idle, is resumed, or the user's next session starts).
    Only conversations with no new turn for ``idle_seconds`` (0: all); only the caller's own."""
    if isinstance(idle_seconds, bool) or not isinstance(idle_seconds, (int, float)) or not idle_seconds >= 0:
        raise InvalidInputError("idle_seconds", f"must be a number >= 0, got {shown(idle_seconds)}")
    rows = yield Sql(*queries.select_waiting_conversations(identity.user_id, idle_seconds=float(idle_seconds)))
    yield Commit()
    reports: list[ExtractionReport] = []
    for row in rows:
        session = Identity(identity.user_id, project_id=row["project_id"], session_id=row["session_id"],
                           team_id=identity.team_id, org_id=identity.org_id)
        reports.append((yield from extract_memories(config, session, [], model=model, profile_model=profile_model)))
    return reports
