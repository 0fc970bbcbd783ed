"""Learning from a document: resource -> passages -> proposals -> gate -> consolidation -> memories.

:func:`add_document` records the document as a resource (as ``add_resource`` does: secrets in
its text withheld), cuts it into passages (:mod:`.chunks`), embeds the new ones in one batch and
stores them (searchable from then on: :mod:`.search`), then reads the passages extraction has
not read yet, with the model when there is one and with the offline rules otherwise, and passes
what they propose through the conversation pipeline's own gate and consolidation
(:func:`agent_memory.extraction.pipeline.consolidate_proposals`). Every memory made is filed
where the document is (its user, session or project), says where it came from (``source``
``knowledge_base`` or ``project_resource``, ``source_id`` the resource's id) and keeps the
passage's place in its ``metadata["passage"]`` (index, character range, headings, hash).

Adding a document again under the same ``external_id`` updates what came from it: a passage
whose text is unchanged is kept (not embedded or read again, its place updated), new passages
are read, and the memories of passages that are gone are superseded (``metadata["retired"]``
says why), unless a passage of the new version said the same thing again, in which case the
memory is kept and now points at that passage.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal
from uuid import UUID

from .. import history, queries, resources
from ..config import MemoryConfig
from ..db.requests import Commit, Embed, Llm, Op, Sql
from ..errors import InvalidInputError
from ..extraction import rules, schemas
from ..extraction.pipeline import (
    MAX_PROPOSALS,
    MAX_TRANSCRIPT_CHARS,
    Outcome,
    Outcomes,
    close_failed_run,
    consolidate_proposals,
    model_name,
)
from ..models import (
    Decision,
    DecisionMethod,
    Identity,
    Proposal,
    Resource,
    ResourceKind,
    Scope,
)
from ..profiles.store import refresh_profiles
from ..queries.rows import row_to_item
from ..reports import Report, counts
from ..validation import check_enum
from ..withheld import redact
from .chunks import Passage, chunk_document, embedding_text

__all__ = ["MAX_DOCUMENT_PROPOSALS", "DocumentReport", "add_document", "prose"]

logger = logging.getLogger(__name__)

#: proposals kept from one document read (MAX_PROPOSALS per passage, this many in all)
MAX_DOCUMENT_PROPOSALS = 500
#: why a memory whose passage left its document is superseded
_GONE = "its passage is no longer in the document"
#: why a memory of a document takes the wording of the new version of its passage
_REWORDED = "the document now says this in other words"


@dataclass(frozen=True, slots=True)
class DocumentReport(Report, Outcomes):
    """What adding a document did.

    ``passages_added`` / ``passages_kept`` / ``passages_removed``: the passages of this version
    that are new, that were there already (same text and headings), and those of the last version
    that are gone. ``outcomes``: what became of each memory proposed from the new passages (as in
    :class:`~agent_memory.extraction.pipeline.ExtractionReport`). ``retired``: the memories
    superseded because their passage is gone. ``status``: ``done``, or ``failed`` when the
    model failed (``error`` says how): the passages are stored and searchable, and the next
    ``add_document`` of the same ``external_id`` reads them.
    """

    resource: Resource
    status: Literal["done", "failed"]
    extractor: str
    passages_added: int = 0
    passages_kept: int = 0
    passages_removed: int = 0
    passages_read: int = 0
    outcomes: tuple[Outcome, ...] = ()
    retired: tuple[UUID, ...] = ()
    run_id: int | None = None
    error: str | None = None
    profiles_rebuilt: tuple[str, ...] = ()

    def summary(self) -> str:
        title = self.resource.title or self.resource.external_id or str(self.resource.id)
        passages = {"added": self.passages_added, "kept": self.passages_kept, "removed": self.passages_removed}
        memories = {"added": len(self.added), "updated": len(self.updated),
                    "superseded": len(self.superseded) + len(self.retired), "rejected": len(self.rejected)}
        text = f"document {title!r}: passages {counts(passages)}; memories {counts(memories)}"
        if self.retired:
            text += f" ({len(self.retired)} whose passage is gone)"
        return text + (f"; extraction failed: {self.error}" if self.status == "failed" else "")


# --- reading passages -------------------------------------------------------------------------

_FENCED = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?(?:^ {0,3}\1[^\n]*$|\Z)", re.MULTILINE | re.DOTALL)
_HEADING_LINE = re.compile(r"^ {0,3}#{1,6}[ \t].*$", re.MULTILINE)
_LINE_MARK = re.compile(r"^[ \t]*(?:>[ \t]?)*(?:[-*+][ \t]+|\d{1,3}[.)][ \t]+)?", re.MULTILINE)
_EMPHASIS = re.compile(r"(\*\*|__|`+|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w))")
_WORD = re.compile(r"[^\W_]{3,}")


def prose(text: str) -> str:
    """A passage as the rules read it: no code, no heading lines, no list or quote marks, no emphasis."""
    text = _HEADING_LINE.sub("", _FENCED.sub("", text))
    return _EMPHASIS.sub("", _LINE_MARK.sub("", text))


def _document_text(resource: Resource, batch: Sequence[Passage]) -> str:
    """Passages as the model reads them: each headed by its place in the document."""
    name = resource.title or resource.external_id or "untitled"
    parts = [f"(A document, {name!r}, given by the user: read it as what they state.)"]
    for p in batch:
        where = " > ".join(p.headings)
        parts.append(f"[passage {p.index}{' | ' + where if where else ''}]\n{p.text}")
    return "\n\n".join(parts)


def _batches(passages: Sequence[Passage]) -> list[list[Passage]]:
    """Passages in groups the model reads in one call (at most ``MAX_TRANSCRIPT_CHARS`` each)."""
    out: list[list[Passage]] = []
    size = 0
    for p in passages:
        if out and size + len(p.text) <= MAX_TRANSCRIPT_CHARS:
            out[-1].append(p)
            size += len(p.text)
        else:
            out.append([p])
            size = len(p.text)
    return out


def _source_passage(proposal: Proposal, batch: Sequence[Passage]) -> Passage:
    """The passage of ``batch`` a model's proposal most likely came from: the most of its words."""
    if len(batch) == 1:
        return batch[0]
    words = {w.lower() for w in _WORD.findall(proposal.content)}
    return max(batch, key=lambda p: len(words & {w.lower() for w in _WORD.findall(p.text)}))


def _propose(model: Any, resource: Resource, passages: Sequence[Passage],
             config: MemoryConfig | None = None) -> Op[list[tuple[Proposal, Passage]]]:
    """``(proposal, passage it came from)`` for the passages, filed in the document's scope."""
    found: list[tuple[Proposal, Passage]] = []
    if model is None:
        for p in passages:
            found += [(proposal, p) for proposal in rules.extract_proposals(prose(p.text))[:MAX_PROPOSALS]]
    else:
        for batch in _batches(passages):
            output = yield Llm(model, schemas.extraction_schema(config),
                               tuple(schemas.extraction_messages(_document_text(resource, batch), config=config)))
            found += [(proposal, _source_passage(proposal, batch))
                      for proposal in schemas.proposals_from_output(output)[:MAX_PROPOSALS * len(batch)]]
    return [(replace(proposal, scope=resource.scope), p) for proposal, p in found[:MAX_DOCUMENT_PROPOSALS]]


# --- passages in, passages out ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    new: list[Passage]
    kept: list[tuple[dict[str, Any], Passage]]  # (stored row, passage of this version)
    removed: list[dict[str, Any]]


def _plan(passages: Sequence[Passage], stored: Sequence[dict[str, Any]]) -> _Plan:
    """Match this version's passages with the stored ones by hash (each stored row once)."""
    by_hash: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in stored:
        by_hash[row["content_hash"]].append(row)
    new, kept = [], []
    for p in passages:
        if by_hash[p.hash]:
            kept.append((by_hash[p.hash].pop(0), p))
        else:
            new.append(p)
    return _Plan(new, kept, [row for rows in by_hash.values() for row in rows])


def _embedded_text(p: Passage) -> str:
    """What a passage's vector is made from: its text under its section's headings, so that a
    passage deep in a section still carries what the section is about."""
    return embedding_text([redact(h) for h in p.headings], redact(p.text))  # what is stored, as it is stored


def _row(resource: Resource, passage_id: UUID, p: Passage) -> dict[str, Any]:
    return {"id": passage_id, "resource_id": resource.id, "user_id": resource.user_id, "scope": resource.scope.value,
            "scope_id": resource.scope_id, "position": p.index, "char_start": p.start, "char_end": p.end,
            "headings": [redact(h) for h in p.headings], "content": redact(p.text), "content_hash": p.hash}


def _store_passages(resource: Resource, passages: Sequence[Passage], vectors: dict[str, Sequence[float]],
                    ) -> Op[tuple[_Plan, dict[int, UUID], list[UUID]]]:
    """Under the resource's lock: delete the passages that are gone, move the kept ones, insert
    the new ones. Answers the plan, the id of each passage (by index) and those not read yet."""
    yield Sql(*queries.advisory_xact_lock(_lock_key(resource.id)), fetch="none")
    plan = _plan(passages, (yield Sql(*queries.select_passages(resource.id))))
    missing = {p.hash: _embedded_text(p) for p in plan.new if p.hash not in vectors}
    if missing:  # another writer changed the passages since they were read: embed what is new now
        vectors = {**vectors, **dict(zip(missing, (yield Embed(tuple(missing.values())))))}
    if plan.removed:
        yield Sql(*queries.delete_passages([r["id"] for r in plan.removed]), fetch="none")
    if plan.kept:
        yield Sql(*queries.move_passages([{"id": row["id"], "position": p.index, "char_start": p.start,
                                           "char_end": p.end} for row, p in plan.kept]), fetch="none")
    ids = {p.index: row["id"] for row, p in plan.kept}
    if plan.new:
        rows = [_row(resource, uuid.uuid4(), p) for p in plan.new]
        yield Sql(*queries.insert_passages(rows, [vectors[p.hash] for p in plan.new]), fetch="none")
        ids.update((p.index, row["id"]) for p, row in zip(plan.new, rows))
    unread = [ids[p.index] for p in plan.new] + [row["id"] for row, _ in plan.kept if not row["extracted"]]
    return plan, ids, unread


def _lock_key(resource_id: UUID) -> int:
    """The advisory lock of a document's passages (a signed 64-bit key from its id)."""
    return int.from_bytes(resource_id.bytes[:8], "big", signed=True)


def _reword(resource: Resource, passages: Sequence[Passage], outcomes: Sequence[Outcome],
            sources: Sequence[Passage]) -> Op[list[Outcome]]:
    """A memory of this document whose passage is gone, which a new passage says in other words
    (consolidation found them the same: NONE), takes the new wording, its old one kept in its
    history: the document is the authority on what it says ("PostgreSQL 16" became "17")."""
    live = {p.hash for p in passages}
    made = {o.memory.id for o in outcomes if o.decision in (Decision.ADD, Decision.SUPERSEDE) and o.memory}
    stale: dict[UUID, int] = {}
    for i, o in enumerate(outcomes):
        m = o.memory
        if (o.decision is Decision.NONE and m is not None and m.id not in made and m.id not in stale
                and m.source_id == str(resource.id) and m.user_id == resource.user_id
                and m.content != o.proposal.content and (m.metadata.get("passage") or {}).get("hash") not in live):
            stale[m.id] = i
    out = list(outcomes)
    if not stale:
        return out
    vectors = yield Embed(tuple(outcomes[i].proposal.content for i in stale.values()))
    for i, vector in zip(stale.values(), vectors):
        old = outcomes[i].memory
        assert old is not None
        row = yield from history.revise(
            old, content=outcomes[i].proposal.content, vector=vector,
            metadata={**old.metadata, "passage": sources[i].position}, change="update",
            decided_by=DecisionMethod.SIMILARITY, reason=_REWORDED, changed_by=resource.user_id)
        out[i] = replace(outcomes[i], decision=Decision.UPDATE, memory=row_to_item(row), replaced=old,
                         reason=_REWORDED)
    return out


def _settle(resource: Resource, passages: Sequence[Passage], outcomes: Sequence[Outcome],
            sources: Sequence[Passage]) -> Op[list[UUID]]:
    """Point the document's memories that this version says again at their new passage, move
    the others with their passage, then supersede those whose passage is gone; answers the ids
    superseded."""
    moves = [{"id": o.memory.id, "passage": p.position} for o, p in zip(outcomes, sources)
             if o.decision in (Decision.NONE, Decision.UPDATE) and o.memory is not None
             and o.memory.source_id == str(resource.id)]
    if moves:
        yield Sql(*queries.repoint_document_memories(moves), fetch="none")
    if passages:
        places = list({p.hash: {"hash": p.hash, "passage": p.position} for p in passages}.values())
        yield Sql(*queries.place_document_memories(resource.user_id, resource.id, places), fetch="none")
    rows = yield Sql(*queries.retire_document_memories(resource.user_id, resource.id, [p.hash for p in passages],
                                                       _GONE))
    return [r["id"] for r in rows]


# --- the op -----------------------------------------------------------------------------------


def _check_size(config: MemoryConfig, passages: Sequence[Passage]) -> None:
    """Refuse a document of more passages than ``config.max_document_passages``: each one is
    embedded, stored and read, so one huge file would hold the embedder for minutes."""
    if len(passages) > config.max_document_passages:
        raise InvalidInputError("content", f"is cut into {len(passages)} passages; a document may have at most "
                                           f"{config.max_document_passages} (max_document_passages): split it into "
                                           "several documents, or raise MemoryConfig(max_document_passages=...) "
                                           "or MEMORY_MAX_DOCUMENT_PASSAGES")


def add_document(
    config: MemoryConfig, identity: Identity, content: Any, *, model: Any = None, profile_model: Any = None,
    kind: Any = ResourceKind.DOCUMENT, scope: Any = Scope.USER, title: Any = None, external_id: Any = None,
    metadata: Any = None,
) -> Op[DocumentReport]:
    """Record a document, make it searchable by passage and learn from it; see the module docstring."""
    kind = check_enum("kind", kind, ResourceKind)
    if kind is ResourceKind.CONVERSATION:
        raise InvalidInputError("kind", "a conversation is learned from by extract(); add_document takes "
                                        "kind='document' or 'project_resource'")
    extractor = "rules" if model is None else f"llm:{model_name(model)}"
    resource = yield from resources.add_resource(config, identity, content, kind=kind, scope=scope, title=title,
                                                 external_id=external_id, metadata=metadata)
    passages = chunk_document(resource.content)
    _check_size(config, passages)  # raising here rolls the resource back: nothing stored, nothing embedded
    first = _plan(passages, (yield Sql(*queries.select_passages(resource.id))))
    yield Commit()  # no connection is held while the embedder works
    texts = {p.hash: _embedded_text(p) for p in first.new}
    vectors = dict(zip(texts, (yield Embed(tuple(texts.values()))))) if texts else {}
    plan, ids, unread = yield from _store_passages(resource, passages, vectors)
    report = DocumentReport(resource, "done", extractor, len(plan.new), len(plan.kept), len(plan.removed))
    waiting = set(unread)
    to_read = [p for p in passages if ids[p.index] in waiting]
    if not to_read:
        retired = yield from _settle(resource, passages, (), ())
        yield Commit()
        rebuilt = (yield from refresh_profiles(identity, model=profile_model)) if retired else []
        return replace(report, retired=tuple(retired), profiles_rebuilt=tuple(rebuilt))

    run_id = (yield Sql(*queries.start_extraction_run(
        identity.user_id, f"document:{resource.id}", identity.project_id, resource.id, extractor), fetch="one"))["id"]
    yield Commit()
    try:
        proposed = yield from _propose(model, resource, to_read, config)
    except Exception as exc:  # noqa: BLE001 - the model failed: the passages wait for the next add_document
        error = redact(f"{type(exc).__name__}: {exc}")[:1000]
        logger.warning("learning from document %s failed: %s", resource.id, error)
        yield Sql(*queries.fail_extraction_run(run_id, error), fetch="none")
        retired = yield from _settle(resource, passages, (), ())
        yield Commit()
        return replace(report, status="failed", run_id=run_id, error=error, retired=tuple(retired))

    source = resources.RESOURCE_SOURCES[kind]
    try:
        outcomes = yield from consolidate_proposals(
            config, identity, [pr for pr, _ in proposed], model, run_id=run_id, source_id=str(resource.id),
            source=source, extras=[{"passage": p.position} for _, p in proposed])
        outcomes = yield from _reword(resource, passages, outcomes, [p for _, p in proposed])
        retired = yield from _settle(resource, passages, outcomes, [p for _, p in proposed])
        yield Sql(*queries.mark_passages_extracted([ids[p.index] for p in to_read]), fetch="none")
        tally = {d.value: sum(o.decision is d and o.rejection is None for o in outcomes) for d in Decision}
        tally["rejected"] = sum(o.rejection is not None for o in outcomes)
        yield Sql(*queries.close_extraction_run(run_id, tally), fetch="none")
        yield Commit()
    except Exception as exc:
        yield from close_failed_run(run_id, exc)
        raise
    rebuilt = yield from refresh_profiles(identity, model=profile_model)
    return replace(report, passages_read=len(to_read), outcomes=tuple(outcomes), retired=tuple(retired),
                   run_id=run_id, profiles_rebuilt=tuple(rebuilt))
