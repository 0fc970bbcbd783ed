"""Memories at different levels that disagree, grouped so the agent sees them together.

An org may say "use Jest", a team "use Vitest" and a user "prefers Bun test". Ranking alone
would show the most specific one and quietly drop the rest, or show them apart and leave the
model to guess. Instead, memories of different levels that speak to the same subject (cosine
similarity at least ``conflict_threshold``) without saying the same thing (below the duplicate
threshold, which would be agreement) form one :class:`~agent_memory.models.Conflict`, ordered
by precedence (``MemoryConfig.scope_priority``): the first one applies.

Similarity is a proxy for "same subject": two memories about testing that merely complement
each other are also grouped. That is harmless, since the rule shown (the most specific level
applies) is the right reading of either.

Pure: the pairs come from :func:`agent_memory.queries.cross_level_neighbours`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

from .models import Conflict, MemoryItem, Scope

__all__ = ["group_conflicts", "precedence"]

#: ties in scope_priority are broken in this order, most specific first
_SPECIFICITY = (Scope.SESSION, Scope.USER, Scope.PROJECT, Scope.TEAM, Scope.ORG)


def precedence(scope_priority: Mapping[str, float]) -> list[Scope]:
    """Levels from the one that wins a conflict to the one that loses."""
    return sorted(_SPECIFICITY, key=lambda s: (-float(scope_priority[s.value]), _SPECIFICITY.index(s)))


def group_conflicts(
    items: Mapping[UUID, MemoryItem],
    pairs: Iterable[tuple[UUID, UUID, float]],
    *,
    anchors: Sequence[UUID],
    scope_priority: Mapping[str, float],
    conflict_threshold: float,
    duplicate_threshold: float,
) -> list[Conflict]:
    """Conflicts among ``items`` from similarity ``pairs`` (id, id, cosine), in the order of the
    first of their ``anchors`` (the search results, best first); each group spans 2+ levels."""
    parent: dict[UUID, UUID] = {}

    def find(x: UUID) -> UUID:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, similarity in pairs:
        if a == b or a not in items or b not in items or items[a].scope is items[b].scope:
            continue
        if conflict_threshold <= similarity < duplicate_threshold:
            parent[find(a)] = find(b)
    groups: dict[UUID, list[MemoryItem]] = {}
    for memory_id in parent:
        groups.setdefault(find(memory_id), []).append(items[memory_id])
    rank = {scope: i for i, scope in enumerate(precedence(scope_priority))}
    first_anchor = {memory_id: i for i, memory_id in reversed(list(enumerate(anchors)))}
    conflicts: list[tuple[int, Conflict]] = []
    for members in groups.values():
        levels = {m.scope for m in members}
        if len(levels) < 2:
            continue
        ordered = sorted(members, key=lambda m: (rank[m.scope], first_anchor.get(m.id, len(anchors)), str(m.id)))
        order = " > ".join(s.value for s in sorted(levels, key=rank.__getitem__))
        position = min((first_anchor[m.id] for m in members if m.id in first_anchor), default=len(anchors))
        conflicts.append((position, Conflict(items=tuple(ordered), order=order)))
    return [c for _, c in sorted(conflicts, key=lambda pc: (pc[0], str(pc[1].winner.id)))]


def describe(conflict: Conflict) -> str:
    """One line for a tool answer or a log."""
    return f"conflict ({conflict.order}; the first applies): " + " | ".join(
        f"{m.scope.value}:{m.scope_id}: {m.content}" for m in conflict.items)


def as_pairs(rows: Iterable[Mapping[str, Any]]) -> list[tuple[UUID, UUID, float]]:
    return [(r["anchor"], r["id"], float(r["similarity"])) for r in rows]
