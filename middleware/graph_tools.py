"""Two optional tools over the knowledge graph: ``memory_explore`` and ``memory_traverse``.

They act for the user the run names, like the four memory tools (nothing in their arguments
chooses whose graph it is), answer JSON in the design's result shape, and turn every failure the
model can fix into a tool message with ``status="error"`` that says what to change. Filters are
values: no text from the model becomes a query. ``<`` and ``>`` in a reply are written as JSON
escapes, so a memory quoted in it cannot open or close a tag of the prompt.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import Field

from .backend import MemoryBackend
from .tools import Body, RunInfo, Toolkit, describe_invalid_arguments

__all__ = ["EXPLORE_DESCRIPTION", "GRAPH_TOOL_NAMES", "TRAVERSE_DESCRIPTION", "graph_tools", "to_json"]

GRAPH_TOOL_NAMES = ("memory_explore", "memory_traverse")

EXPLORE_DESCRIPTION = """\
Explore the user's knowledge graph around a topic: the people, organisations, places and tools \
their memories are about, how they relate to the user (sister, friend, works-at...) and the \
memories that mention them. Give `queries` (phrases, e.g. ["google job offer"]) and/or \
`text_matches` (names, e.g. ["Sarah"]). Optional `relationship_filters`: min_attitude, \
max_attitude, min_proximity, max_proximity (1-5), relationship_types, exclude_relationship_types. \
`granularity`: 1 (default) returns memories; 2 storylines (what happened around a person or \
thing over several days, summarised, with previews); 3 long-running themes grouping storylines. \
Use the entity_key of a hit as a seed of memory_traverse to go further."""

TRAVERSE_DESCRIPTION = """\
Walk the user's knowledge graph from seed nodes (entity_keys from memory_explore, or names; "me" \
is the user). mode "ppr" ranks what is connected to the seeds (everything around a decision, a \
person); mode "pattern" lists relations by structure: relationship_types (e.g. ["sister"]), \
direction ("out" from the seeds, "in", "both"), min_proximity/min_attitude (1-5), and since/until \
(ISO dates) for relations that held in a window (without them: current relations only)."""


def to_json(value: Any) -> str:
    """Compact JSON with ``<`` and ``>`` escaped (still valid JSON)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e")


class _GraphKit(Toolkit):
    def explore(self, runtime: RunInfo, queries: list[str] | str | None, text_matches: list[str] | str | None,
                relationship_filters: dict[str, Any] | None, granularity: int) -> Body:
        result = yield self._ops(runtime).explore(queries, text_matches=text_matches,
                                                  relationship_filters=relationship_filters,
                                                  granularity=granularity)
        return to_json(result.to_dict()), False

    def traverse(self, runtime: RunInfo, seed_nodes: list[str], mode: str, top_k: int,
                 relationship_types: list[str] | None, direction: str, min_proximity: int | None,
                 min_attitude: int | None, since: str | None, until: str | None) -> Body:
        result = yield self._ops(runtime).traverse(
            mode=mode, seed_nodes=seed_nodes, top_k=top_k, relationship_types=relationship_types,
            direction=direction, min_proximity=min_proximity, min_attitude=min_attitude, since=since, until=until)
        return to_json(result.to_dict()), False


Level = Annotated[int, Field(ge=1, le=5)]


def graph_tools(memory: Any = None) -> list[BaseTool]:
    """``memory_explore`` and ``memory_traverse`` bound to ``memory`` (as for
    :func:`~agent_memory.middleware.memory_tools`); the identity comes from the run."""
    kit = _GraphKit(MemoryBackend.of(memory), max_k=20)

    def memory_explore(runtime: ToolRuntime, queries: list[str] | str | None = None,
                       text_matches: list[str] | str | None = None,
                       relationship_filters: dict[str, Any] | None = None,
                       granularity: Literal[1, 2, 3] = 1) -> ToolMessage | str:
        return kit.run("memory_explore", kit.explore(runtime, queries, text_matches, relationship_filters,
                                                     granularity), runtime)

    async def amemory_explore(runtime: ToolRuntime, queries: list[str] | str | None = None,
                              text_matches: list[str] | str | None = None,
                              relationship_filters: dict[str, Any] | None = None,
                              granularity: Literal[1, 2, 3] = 1) -> ToolMessage | str:
        return await kit.arun("memory_explore", kit.explore(runtime, queries, text_matches, relationship_filters,
                                                            granularity), runtime)

    def memory_traverse(seed_nodes: list[str], runtime: ToolRuntime, mode: Literal["ppr", "pattern"] = "ppr",
                        top_k: Annotated[int, Field(ge=1, le=50)] = 20, relationship_types: list[str] | None = None,
                        direction: Literal["out", "in", "both"] = "both", min_proximity: Level | None = None,
                        min_attitude: Level | None = None, since: str | None = None,
                        until: str | None = None) -> ToolMessage | str:
        return kit.run("memory_traverse", kit.traverse(runtime, seed_nodes, mode, top_k, relationship_types,
                                                       direction, min_proximity, min_attitude, since, until), runtime)

    async def amemory_traverse(seed_nodes: list[str], runtime: ToolRuntime, mode: Literal["ppr", "pattern"] = "ppr",
                               top_k: Annotated[int, Field(ge=1, le=50)] = 20,
                               relationship_types: list[str] | None = None,
                               direction: Literal["out", "in", "both"] = "both", min_proximity: Level | None = None,
                               min_attitude: Level | None = None, since: str | None = None,
                               until: str | None = None) -> ToolMessage | str:
        return await kit.arun("memory_traverse", kit.traverse(runtime, seed_nodes, mode, top_k, relationship_types,
                                                              direction, min_proximity, min_attitude, since, until),
                              runtime)

    bodies: tuple[tuple[Callable[..., Any], Callable[..., Awaitable[Any]]], ...] = (
        (memory_explore, amemory_explore), (memory_traverse, amemory_traverse))
    return [
        StructuredTool.from_function(func=sync, coroutine=coro, name=name, description=description,
                                     handle_validation_error=describe_invalid_arguments)
        for name, description, (sync, coro) in zip(
            GRAPH_TOOL_NAMES, (EXPLORE_DESCRIPTION, TRAVERSE_DESCRIPTION), bodies, strict=True)
    ]
