"""What an operation that touches many rows did: one family of reports.

Six operations answer with a report rather than an item: adding many memories
(:class:`AddManyReport`), learning from a conversation
(:class:`~agent_memory.extraction.pipeline.ExtractionReport`, with its outcomes, next to the
pipeline), importing an export (:class:`ImportReport`), forgetting a user (:class:`ForgetReport`,
from the service and the checkpointer alike), deleting a project, team or org
(:class:`DeleteReport`) and maintenance (:class:`MaintenanceReport`). Each is a frozen dataclass of plain values and a
:class:`Report`: ``summary()`` says what happened in a line or a few, for logs, the CLI and
notebooks, and ``to_dict()`` gives JSON values, for servers and ``--json``; so any caller
can print or send any report the same way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, is_dataclass
from datetime import datetime
from enum import Enum
from typing import Any
from uuid import UUID

from .models import Rejection

__all__ = ["AddManyReport", "DeleteReport", "ForgetReport", "ImportReport", "MaintenanceReport", "Report", "counts",
           "jsonable"]


def jsonable(value: Any) -> Any:
    """Plain JSON values for dataclasses, enums, UUIDs and datetimes (the service's results)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {k: jsonable(v) for k, v in asdict(value).items()}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    return value


def counts(by_kind: dict[str, int]) -> str:
    """``"memories 3, history 1"``: the non-zero counts, or ``"nothing"``."""
    return ", ".join(f"{kind} {n}" for kind, n in by_kind.items() if n) or "nothing"


class Report:
    """The base of every report: ``summary()`` for people, ``to_dict()`` for programs."""

    __slots__ = ()

    def summary(self) -> str:  # pragma: no cover - every report says its own
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON values (``json.dumps`` it): ids and times as strings, enums as their values."""
        return dict(jsonable(self))

    def __str__(self) -> str:
        return self.summary()


@dataclass(frozen=True, slots=True)
class AddManyReport(Report):
    """What adding many memories did, by position in the input: the ids written, the items the
    gate refused (``(position, Rejection)``) and, with ``dedupe``, the items that repeated a
    memory (``(position, id of the memory it repeats)``)."""

    inserted: list[UUID] = field(default_factory=list)
    rejected: list[tuple[int, Rejection]] = field(default_factory=list)
    duplicates: list[tuple[int, UUID]] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{len(self.inserted)} added, {len(self.rejected)} refused by the gate, "
                f"{len(self.duplicates)} already known")


@dataclass(frozen=True, slots=True)
class ImportReport(Report):
    """Rows written, rows skipped (already in the database, or hanging on a row this import
    did not write: a version, a passage, a membership, a share) and rows rejected, per section of
    the export. ``rejected[section]`` lists ``(position in the section, Rejection)``: a memory
    the gate refuses (a secret, too long, low confidence), any row with a secret in a value
    that can't be redacted (ids, metadata, profile fields), and the rows that belong to a
    rejected one (a refused memory's history). Secrets in a resource's text are withheld in
    place instead, and the resource imported."""

    inserted: dict[str, int]
    skipped: dict[str, int]
    rejected: dict[str, list[tuple[int, Rejection]]] = field(default_factory=dict)

    def summary(self) -> str:
        refused = {section: len(rows) for section, rows in self.rejected.items()}
        return (f"imported {counts(self.inserted)}; already there: {counts(self.skipped)}; "
                f"refused: {counts(refused)}")


@dataclass(frozen=True, slots=True)
class ForgetReport(Report):
    """What forgetting ``user_id`` did. ``removed``: rows deleted, per kind (memories, history,
    resources, ..., and the episodic tables). ``ownerless``: ``(kind, scope_id)`` of the scopes
    that lost their last owner / lead / admin with the user; an operator should give them one.
    ``changed``: others' rows that named the user, by ``table.column``, now naming nobody."""

    user_id: str
    removed: dict[str, int]
    ownerless: list[tuple[str, str]] = field(default_factory=list)
    changed: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        text = f"forgot {self.user_id!r}: removed {counts(self.removed)}"
        if self.changed:
            text += f"; others' rows now naming nobody: {counts(self.changed)}"
        if self.ownerless:
            text += "; left without an owner: " + ", ".join(f"{kind} {sid}" for kind, sid in self.ownerless)
        return text


@dataclass(frozen=True, slots=True)
class DeleteReport(Report):
    """What deleting a project, team or org removed (all zeros when it did not exist), and
    rows outside it that pointed into it (``changed``, by ``table.column``)."""

    scope: str
    scope_id: str
    removed: dict[str, int]
    changed: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        text = f"deleted {self.scope} {self.scope_id!r}: removed {counts(self.removed)}"
        return text + (f"; rows outside it now pointing nowhere: {counts(self.changed)}" if self.changed else "")


@dataclass(frozen=True, slots=True)
class MaintenanceReport(Report):
    """What a maintenance run did: memories deleted because they expired, and archived because
    they faded (``decay``, below ``archive_below`` and unused) or went unused (``ephemeral``);
    in the knowledge graph: nodes archived as faded or ephemeral, descriptions written again,
    storylines and macros created or brought up to date (and summarised again)."""

    expired: int = 0
    faded: int = 0
    ephemeral: int = 0
    nodes_faded: int = 0
    nodes_ephemeral: int = 0
    descriptions: int = 0
    storylines: int = 0
    macros: int = 0

    def summary(self) -> str:
        text = (f"deleted {self.expired} expired; archived {self.faded} faded and {self.ephemeral} "
                "ephemeral memories")
        if self.nodes_faded or self.nodes_ephemeral or self.descriptions or self.storylines or self.macros:
            text += (f"; graph: archived {self.nodes_faded} faded and {self.nodes_ephemeral} ephemeral nodes, "
                     f"described {self.descriptions} nodes again, updated {self.storylines} storylines and "
                     f"{self.macros} macros")
        return text

