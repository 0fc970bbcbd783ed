"""Extraction by a chat model: the people, concepts and things memories are about and how they
relate, as structured output, when a model is configured or the agent's model is given.

The rules (:mod:`.extract`) stay the offline default; a model reads what they miss (a
relation said in other words, a concept, when a relation began or ended: "worked at Acme until
March" closes the relation at the end of March, it does not delete it). What it answers is
read like any input: unknown kinds fall back to ``connected_to``, attitude and proximity are
kept only between people and only from 1 to 5, dates after the memory was written are dropped,
secrets are withheld, and a person or entity whose name is not in the memory is dropped (a
concept may be named in other words). The names it gives go through the same resolver
as the rules' (canonical name, alias, spelling variant; within the writer's graph only), so a
model can never merge two owners' people. Pure: the op that asks is :func:`learn`.
"""

from __future__ import annotations

import calendar
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from agent_memory.prompts import render

from ..db.requests import Llm, Op
from ..formatting import escape_line
from ..withheld import redact
from .extract import OWNER, Extracted, Found, Link, canonical

__all__ = ["GraphExtraction", "MAX_MEMORIES", "combine", "found_from_output", "graph_messages", "learn"]

#: memories read in one model call (the rest wait for the next call)
MAX_MEMORIES = 20
_KINDS = ("has_relationship_with", "engages_with", "associated_with", "relates_to", "involves", "connected_to")
_ENTITY_TYPES = ("organisation", "location", "project", "event", "tool", "other")
_ENTITY_ALIASES = {"organization": "organisation", "company": "organisation", "org": "organisation",
                   "place": "location", "city": "location", "country": "location", "software": "tool"}
_ME = frozenset({"me", "@me", "i", "myself", "user", "the user"})
_MAX_NAME = 100
_MAX_TYPE = 40
_MAX_DESCRIPTION = 300
_MAX_PER_MEMORY = 20


class ModelNode(BaseModel):
    name: str = Field(description="the name as written in the memory")
    node_type: str = Field(description="person, concept or entity")
    entity_type: str = Field("", description="for an entity: organisation, location, project, event, tool or other")


class ModelRelation(BaseModel):
    source: str = Field(description='a node name, or "me" for the user')
    target: str = Field(description='a node name, or "me" for the user')
    kind: str = Field(description="has_relationship_with, engages_with, associated_with, relates_to, involves "
                                  "or connected_to")
    relationship_type: str = Field(description='short and lowercase: "sister", "works-at", "uses"')
    description: str = Field("", description="one short sentence")
    attitude: int | None = Field(None, description="between people: 1 hostile .. 5 warm")
    proximity: int | None = Field(None, description="between people: 1 distant .. 5 very close")
    valid_from: str | None = Field(None, description="YYYY-MM-DD when it began, if the memory says")
    valid_to: str | None = Field(None, description="YYYY-MM-DD when it ended, if the memory says it ended")


class ModelMemoryGraph(BaseModel):
    memory: int = Field(description="the index of the memory")
    nodes: list[ModelNode] = Field(default_factory=list)
    relations: list[ModelRelation] = Field(default_factory=list)


class GraphExtraction(BaseModel):
    """The people, concepts and entities each memory is about, and the relations it states."""

    memories: list[ModelMemoryGraph] = Field(default_factory=list)


def graph_messages(contents: Sequence[str], *, now: datetime | None = None) -> list[BaseMessage]:
    """The prompt asking for the graph of ``contents`` (each memory one escaped line, so none can
    close the block or pose as an instruction)."""
    now = datetime.now(UTC) if now is None else now
    lines = "\n".join(f'<memory index="{i}">{escape_line(c)}</memory>' for i, c in enumerate(contents))
    return [SystemMessage(render("graph_extraction")),
            HumanMessage(render("graph_extraction_input", memories=lines, now=f"{now:%A %Y-%m-%d}"))]


def _text(value: Any, most: int) -> str:
    return " ".join(value.split())[:most].strip() if isinstance(value, str) else ""


def _level(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 5 else None


def _date(value: Any, now: datetime, *, end: bool) -> datetime | None:
    """``YYYY-MM-DD`` (or ``YYYY-MM``: the month's first or, for an end, last day) as an aware
    time, never after ``now``; anything else None."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        if len(text) == 7:  # a month
            year, month = int(text[:4]), int(text[5:7])
            day = calendar.monthrange(year, month)[1] if end else 1
            at = datetime(year, month, day, tzinfo=now.tzinfo or UTC)
        else:
            at = datetime.fromisoformat(text)
            at = at if at.tzinfo is not None else at.replace(tzinfo=now.tzinfo or UTC)
    except ValueError:
        return None
    if end and len(text) in (7, 10):
        at += timedelta(days=1) - timedelta(microseconds=1)  # the end of that day
    return min(at, now) if end else (None if at > now else at)


def _node(raw: ModelNode, said: str) -> Found | None:
    name = redact(_text(raw.name, _MAX_NAME))
    key = canonical(name)
    if not key or key in _ME or len(key) < 2 or "[" in name:
        return None
    node_type = raw.node_type.strip().lower() if isinstance(raw.node_type, str) else ""
    if node_type not in ("person", "concept", "entity") or (node_type != "concept" and key not in said):
        return None
    entity_type = ""
    if node_type == "entity":
        given = _text(raw.entity_type, _MAX_TYPE).lower()
        entity_type = _ENTITY_ALIASES.get(given, given)
        entity_type = entity_type if entity_type in _ENTITY_TYPES else "other"
    return Found(name, node_type, entity_type, confidence=0.8)


def found_from_output(output: Any, contents: Sequence[str], *, now: datetime | None = None) -> list[Extracted]:
    """What the model said of each of ``contents`` (one :class:`Extracted` each, in order; empty
    where it said nothing usable). See the module docstring for what is dropped."""
    now = datetime.now(UTC) if now is None else now
    out: list[Extracted] = [Extracted((), ()) for _ in contents]
    if not isinstance(output, GraphExtraction):
        return out
    for block in output.memories:
        if not 0 <= block.memory < len(contents) or out[block.memory].found:
            continue
        found: dict[str, Found] = {}
        said = canonical(contents[block.memory])
        for raw in block.nodes[:_MAX_PER_MEMORY]:
            f = _node(raw, said)
            if f is not None:
                found.setdefault(canonical(f.name), f)
        people = {k for k, f in found.items() if f.node_type == "person"}
        links: list[Link] = []
        for rel in block.relations[:_MAX_PER_MEMORY]:
            ends = []
            for end in (rel.source, rel.target):
                key = canonical(_text(end, _MAX_NAME))
                ends.append(OWNER if key in _ME else key if key in found else None)
            if None in ends or ends[0] == ends[1]:
                continue
            rel_type = "-".join(_text(rel.relationship_type, _MAX_TYPE).lower().split())
            if not rel_type:
                continue
            kind = rel.kind.strip().lower() if isinstance(rel.kind, str) else ""
            kind = kind if kind in _KINDS else "connected_to"
            between_people = all(e == OWNER or e in people for e in ends)
            valid_to = _date(rel.valid_to, now, end=True)
            valid_from = _date(rel.valid_from, now, end=False)
            if valid_from is not None and valid_to is not None and valid_to < valid_from:
                valid_from = None
            source, target = (e if e == OWNER else found[e].name for e in ends)  # type: ignore[index]
            links.append(Link(source, target, kind, rel_type,
                              _level(rel.attitude) if between_people else None,
                              _level(rel.proximity) if between_people else None,
                              ended=valid_to is not None, description=redact(_text(rel.description, _MAX_DESCRIPTION)),
                              valid_from=valid_from, valid_to=valid_to))
        out[block.memory] = Extracted(tuple(found.values()), tuple(links))
    return out


def combine(by_model: Extracted, by_rules: Extracted) -> Extracted:
    """The model's reading with what the rules found that it did not (the rules are precise: a
    "my sister Sarah" they read is kept even when the model left it out); the model's word wins
    where both name a node or a relation."""
    keys = {canonical(f.name) for f in by_model.found}
    found = by_model.found + tuple(f for f in by_rules.found if canonical(f.name) not in keys)
    said = {(canonical(k.source), canonical(k.target), k.rel_type) for k in by_model.links}
    links = by_model.links + tuple(k for k in by_rules.links
                                   if (canonical(k.source), canonical(k.target), k.rel_type) not in said)
    return Extracted(found, links)


def learn(model: Any, contents: Sequence[str], *, now: datetime | None = None) -> Op[list[Extracted] | None]:
    """Ask ``model`` for the graph of ``contents`` (at most :data:`MAX_MEMORIES` per call);
    answers one :class:`Extracted` per content, or None when the model failed (the caller
    then uses the rules: a model's failure never loses a memory or raises into the agent).
    Call it with no transaction open: the model may take seconds."""
    now = datetime.now(UTC) if now is None else now
    out: list[Extracted] = []
    for start in range(0, len(contents), MAX_MEMORIES):
        part = list(contents[start:start + MAX_MEMORIES])
        try:
            output = yield Llm(model, GraphExtraction, tuple(graph_messages(part, now=now)))
        except Exception:  # noqa: BLE001 - the rules take over; logged by the caller's report
            return None
        out += found_from_output(output, part, now=now)
    return out
