"""Render memories into the block injected into a system prompt.

Pure: no I/O. A memory's content is user-controlled text that ends up inside
our prompt, so ``<``, ``>`` and ``&`` are escaped: no memory can close the
``<memory>`` or ``<long_term_memory>`` element it sits in, or forge a new one.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_memory.prompts import render

from .models import MemoryItem, SearchResult

__all__ = ["escape", "format_memories_for_prompt"]

_ELLIPSIS = "…"


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _item(memory: MemoryItem, content: str) -> str:
    return render(
        "memory_item", scope=memory.scope.value, memory_type=memory.memory_type.value, content=escape(content)
    ).rstrip("\n")


def format_memories_for_prompt(
    memories: Iterable[MemoryItem | SearchResult], *, budget_chars: int = 4000
) -> str:
    """The memory block for ``memories`` (best first), at most ``budget_chars`` long.

    Memories that don't fit are left out (the next, shorter ones may still
    fit); if not even the first fits whole, its content is shortened. Returns
    ``""`` when there is nothing to inject, so callers can skip the section.
    """
    items = [m.item if isinstance(m, SearchResult) else m for m in memories]
    if not items:
        return ""
    frame = len(render("memory_block", memories=""))
    room = budget_chars - frame
    lines: list[str] = []
    used = 0
    for memory in items:
        line = _item(memory, memory.content)
        cost = len(line) + (1 if lines else 0)
        if used + cost <= room:
            lines.append(line)
            used += cost
    if not lines:
        first = items[0]

        def shortened(n: int) -> str:
            return _item(first, first.content[:n].rstrip() + _ELLIPSIS)

        lo, hi = 0, len(first.content)  # the longest prefix whose escaped line fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if len(shortened(mid)) <= room else (lo, mid - 1)
        if lo == 0:
            return ""
        lines.append(shortened(lo))
    return render("memory_block", memories="\n".join(lines))
