"""The knowledge graph's share of ``maintain()`` (the design's nightly consolidation), as an
operation (:mod:`agent_memory.db.requests`): archive what faded or was ephemeral
(:mod:`agent_memory.lifecycle`), write again the descriptions of nodes whose notes changed, and
keep storylines and macros current, summarised. Over every graph, in batches, each its own
transaction; rows another run holds are skipped, so runs may overlap. Extractive offline
(:mod:`.summaries`); with a chat model, the model writes descriptions and summaries (a failed
call falls back to the extractive text: maintenance never stops on a model)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from ..db.requests import Commit, Embed, Llm, Op, Sql
from ..queries import graph_lifecycle as lq
from ..queries.items import vector_literal
from ..queries.types import Statement
from .summaries import Summary, describe_node, prompt, summarise_macro, summarise_storyline

__all__ = ["MODEL_CALLS", "GraphMaintenance", "maintain_graph"]

#: at most this many model calls a run (a big backlog is not a big bill): past it, the texts are
#: extractive until the thing changes again
MODEL_CALLS = 500


@dataclass(frozen=True, slots=True)
class GraphMaintenance:
    nodes_faded: int = 0
    nodes_ephemeral: int = 0
    descriptions: int = 0
    storylines: int = 0
    macros: int = 0


def maintain_graph(*, at: datetime, limit: int = 1000, model: Any = None) -> Op[GraphMaintenance]:
    """One maintenance pass over every graph (see the module); ``at`` is the time to judge
    fading by, ``limit`` the batch size, ``model`` an optional chat model for the texts."""
    faded = yield from _drain(lambda: lq.archive_faded_nodes(at, limit), limit)
    ephemeral = yield from _drain(lambda: lq.archive_ephemeral_nodes(at, limit), limit)
    budget = [MODEL_CALLS if model is not None else 0]
    described = yield from _describe_nodes(limit, model, budget)
    graphs: set[tuple[str, str]] = set()
    storylines = 0
    while True:
        rows = yield Sql(*lq.refresh_storylines(limit))
        yield Commit()
        storylines += len(rows)
        graphs |= {(r["scope"], r["scope_id"]) for r in rows}
        if len(rows) < limit:
            break
    macros = 0
    ordered = sorted(graphs)
    for i in range(0, len(ordered), 100):
        rows = yield Sql(*lq.refresh_macros(ordered[i:i + 100]))
        yield Commit()
        macros += len(rows)
    yield from _summarise("storyline", limit, model, budget)
    yield from _summarise("macro", limit, model, budget)
    return GraphMaintenance(len(faded), len(ephemeral), described, storylines, macros)


def _drain(statement: Callable[[], Statement], limit: int) -> Op[list[Any]]:
    """Run an archiving statement batch after batch (each committed) until one does less than a batch."""
    done: list[Any] = []
    while True:
        rows = yield Sql(*statement())
        yield Commit()
        done.extend(rows)
        if len(rows) < limit:
            return done


def _write(model: Any, kind: str, name: str, texts: Sequence[str], fallback: str, budget: list[int]) -> Op[str]:
    """The model's text, or ``fallback`` (offline, the run's model calls spent, or the model
    failed or answered nothing)."""
    if model is None or not texts or budget[0] <= 0:
        return fallback
    budget[0] -= 1
    try:
        answer = yield Llm(model, Summary, tuple(prompt(kind, name, texts)))
    except Exception:  # noqa: BLE001 - a model's failure leaves the extractive text
        return fallback
    text = " ".join(str(getattr(answer, "text", "") or "").split())
    return text[:1000] or fallback


def _embedded(texts: Sequence[str]) -> Op[list[str | None]]:
    if not texts:
        return []
    vectors = yield Embed(tuple(texts))
    return [vector_literal(v) if v is not None and len(v) else None for v in vectors]


def _describe_nodes(limit: int, model: Any, budget: list[int]) -> Op[int]:
    """Nodes whose notes changed get a description again (and an embedding of it with their
    newest notes, the design's "description + notes")."""
    done = 0
    cursor: tuple[str, str, UUID] | None = None
    while True:
        rows = yield Sql(*lq.dirty_nodes(cursor, limit))
        yield Commit()
        if not rows:
            return done
        cursor = (rows[-1]["scope"], rows[-1]["scope_id"], rows[-1]["id"])
        out: list[dict[str, Any]] = []
        for r in rows:
            notes = list(r["notes"] or ())
            text = describe_node(r["name"], r["aliases"] or (), notes)
            text = yield from _write(model, "node", r["name"], [str(n.get("content", "")) for n in notes[-10:]],
                                     text, budget)
            out.append({"scope": r["scope"], "scope_id": r["scope_id"], "id": r["id"], "description": text,
                        "seen": r["updated_at"], "basis": _basis(text, notes)})
        vectors = yield from _embedded([o.pop("basis") for o in out])
        for o, v in zip(out, vectors, strict=True):
            o["embedding"] = v
        yield Sql(*lq.set_node_descriptions(out), fetch="none")
        yield Commit()
        done += len(out)
        if len(rows) < limit:
            return done


def _basis(description: str, notes: Sequence[Mapping[str, Any]]) -> str:
    """What a node's embedding is made of: its description and its newest notes."""
    newest = sorted(notes, key=lambda n: str(n.get("added_at") or ""), reverse=True)[:5]
    return " ".join([description, *(str(n.get("content", "")) for n in newest)])[:2000]


def _summarise(level: str, limit: int, model: Any, budget: list[int]) -> Op[int]:
    done = 0
    cursor: tuple[str, str, UUID] | None = None
    while True:
        rows = yield Sql(*lq.dirty_storylines(level, cursor, limit))
        yield Commit()
        if not rows:
            return done
        cursor = (rows[-1]["scope"], rows[-1]["scope_id"], rows[-1]["id"])
        out: list[dict[str, Any]] = []
        for r in rows:
            texts = list(r["children"] if level == "macro" else r["texts"])
            text = (summarise_macro(r["anchor_name"], texts) if level == "macro"
                    else summarise_storyline(r["anchor_name"], texts))
            text = yield from _write(model, level, r["anchor_name"], texts, text, budget)
            out.append({"scope": r["scope"], "scope_id": r["scope_id"], "id": r["id"], "description": text,
                        "seen": r["updated_at"]})
        vectors = yield from _embedded([o["description"] for o in out])
        for o, v in zip(out, vectors, strict=True):
            o["embedding"] = v
        yield Sql(*lq.set_storyline_summaries(out), fetch="none")
        yield Commit()
        done += len(out)
        if len(rows) < limit:
            return done
