"""The lifecycle memories and the knowledge graph share: states, spaced recall, fading, retention.

Everything remembered (a memory, a node of the graph, a storyline) is in one of four states:
``candidate`` (never recalled), ``active`` (recalled), ``core`` (recalled often, over time) or
``archived`` (hidden from reads, restorable). The design this follows counts recalls for the
spacing effect: a recall counts towards ``core`` only when it comes at least
:data:`RECALL_SPACING_HOURS` after the previous one (ten searches in one conversation are one
recall, ten over ten days are ten), and the longer the gap, the slower the thing fades after
(a memory's ``stability``, a node's ``decay_gradient``).

Forgetting (``maintain()``) follows the retention policy first, with the design's precedence
``keep`` > ``ephemeral`` > ``decay`` when two sources disagree: ``keep`` is never archived,
``ephemeral`` goes once unused for a while whatever its state, and only ``decay`` items fade,
and of those only candidates and active ones: ``core`` is never faded.

This module holds the rules as plain values and pure functions; the statements that apply them
are in :mod:`agent_memory.queries.items` (memories) and :mod:`agent_memory.queries.graph_lifecycle`.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "CORE_RECALLS",
    "EPHEMERAL_GRAPH_DAYS",
    "FADED_BELOW",
    "MAX_DECAY_GRADIENT",
    "NODE_HALF_LIFE_DAYS",
    "RECALL_SPACING_HOURS",
    "STATES",
    "faded_salience",
    "retention_precedence",
    "spaced_recall_sql",
    "state_for",
]

STATES = ("candidate", "active", "core", "archived")
#: a recall counts towards promotion only this long after the previous one
RECALL_SPACING_HOURS = 1.0
#: spaced recalls that make a thing ``core`` (the design: "retrieved 10+ times")
CORE_RECALLS = 10
#: a node's salience halves every this many days unused, times its ``decay_gradient``
NODE_HALF_LIFE_DAYS = 30.0
#: the design: a node is archived once its salience is under 0.01
FADED_BELOW = 0.01
#: the design: an ``ephemeral`` semantic item (node, storyline) goes after 90 days unused
EPHEMERAL_GRAPH_DAYS = 90.0
#: a node's half-life grows at most to this many times :data:`NODE_HALF_LIFE_DAYS` (about ten years)
MAX_DECAY_GRADIENT = 120.0

_PRECEDENCE = {"keep": 2, "ephemeral": 1, "decay": 0}


def state_for(recalls: int, spaced_recalls: int) -> str:
    """The state of something recalled ``recalls`` times in all, ``spaced_recalls`` of them
    spaced (not archived): ``candidate`` (never), ``active``, ``core`` (10+ spaced)."""
    if spaced_recalls >= CORE_RECALLS:
        return "core"
    return "active" if recalls > 0 or spaced_recalls > 0 else "candidate"


def retention_precedence(policies: Iterable[str]) -> str:
    """The policy that wins when sources disagree: ``keep`` > ``ephemeral`` > ``decay``
    (a node named by a kept memory is kept; by an ephemeral one and never by a kept one,
    ephemeral). None given: ``decay``."""
    best = "decay"
    for p in policies:
        if p not in _PRECEDENCE:
            raise ValueError(f"unknown retention {p!r}; one of keep, decay, ephemeral")
        if _PRECEDENCE[p] > _PRECEDENCE[best]:
            best = p
    return best


def faded_salience(salience: float, idle_days: float, *, decay_gradient: float = 1.0, state: str = "active",
                   confidence: float = 1.0) -> float:
    """A node's salience after ``idle_days`` neither mentioned nor recalled: halved every
    ``NODE_HALF_LIFE_DAYS * decay_gradient`` days; a candidate's half-life is also scaled by its
    confidence (a doubtful name the rules found fades first). ``core`` does not fade."""
    if state == "core":
        return salience
    half_life = NODE_HALF_LIFE_DAYS * max(decay_gradient, 1e-6)
    if state == "candidate":
        half_life *= max(confidence, 0.1)
    return salience * 0.5 ** (max(idle_days, 0.0) / half_life)


def spaced_recall_sql(last_recalled: str) -> str:
    """SQL: a recall now is spaced (``last_recalled``, a column, is NULL or old enough)."""
    return (f"({last_recalled} IS NULL OR {last_recalled} <= now() - make_interval(secs => "
            f"{RECALL_SPACING_HOURS * 3600.0}))")
