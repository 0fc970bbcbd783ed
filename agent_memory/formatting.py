"""Render memories into the block injected into a system prompt.

Pure: no I/O. A memory's content is user-controlled text that ends up inside
our prompt, so it goes through :func:`escape_line`: ``<``, ``>`` and ``&`` are
escaped, so no memory can close the ``<memory>`` or ``<long_term_memory>``
element it sits in or forge a new one, and every line break is shown as
`` / ``, so no memory can start a line of the prompt (``SYSTEM: ...``,
``# New instructions``). The memory tools answer with the same function.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from agent_memory.prompts import render

from .models import Conflict, MemoryItem, Scope, SearchResult

__all__ = ["LINE_BREAK_MARK", "escape", "escape_line", "format_memories_for_prompt"]

_ELLIPSIS = "…"

#: what a line break inside a memory looks like in a prompt or a tool reply
LINE_BREAK_MARK = " / "
#: every line break ``str.splitlines`` knows (``\n``, ``\r``, ``\v``, ``\f``, ``\x1c``-``\x1e``,
#: ``\x85``, ``\u2028``, ``\u2029``), with the whitespace around it: one run becomes one mark
_LINE_BREAKS = re.compile(r"\s*[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]\s*")


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_line(text: str) -> str:
    """``text`` as one escaped line, for a prompt or a tool reply: each run of line breaks
    becomes :data:`LINE_BREAK_MARK`, other whitespace one space, and ``& < >`` entities, so
    nothing in it can begin a line (a fake ``SYSTEM:`` turn, a heading) or open or close a tag."""
    return escape(" ".join(_LINE_BREAKS.sub(LINE_BREAK_MARK, text.strip()).split()))


def _item(memory: MemoryItem, content: str) -> str:
    # a team's or org's memories say which team or org: a user may belong to several
    origin = f' scope_id="{escape(memory.scope_id)}"' if memory.scope in (Scope.TEAM, Scope.ORG) else ""
    return render(
        "memory_item", scope=memory.scope.value, origin=origin, memory_type=memory.memory_type.value,
        content=escape_line(content),
    ).rstrip("\n")


def _conflict(conflict: Conflict) -> str:
    return render("memory_conflict", order=escape_line(conflict.order),
                  memories="\n".join(_item(m, m.content) for m in conflict.items)).rstrip("\n")


def _entries(items: list[MemoryItem], conflicts: Sequence[Conflict]) -> list[str]:
    """One line per memory, best first, except that a memory in a conflict brings its whole
    conflict group in at the place of its best-ranked member."""
    group_of = {m.id: c for c in conflicts for m in c.items}
    done: set[int] = set()
    out: list[str] = []
    for memory in items:
        conflict = group_of.get(memory.id)
        if conflict is None:
            out.append(_item(memory, memory.content))
        elif id(conflict) not in done:
            done.add(id(conflict))
            out.append(_conflict(conflict))
    out.extend(_conflict(c) for c in conflicts if id(c) not in done)
    return out


def format_memories_for_prompt(
    memories: Iterable[MemoryItem | SearchResult], *, budget_chars: int = 4000, conflicts: Sequence[Conflict] = (),
) -> str:
    """The memory block for ``memories`` (best first), at most ``budget_chars`` long.

    Memories that don't fit are left out (the next, shorter ones may still
    fit); if not even the first fits whole, its content is shortened. Each of
    ``conflicts`` is shown as one ``<conflict>`` group, whole or not at all.
    Returns ``""`` when there is nothing to inject, so callers can skip the section.
    """
    items = [m.item if isinstance(m, SearchResult) else m for m in memories]
    if not items and not conflicts:
        return ""
    frame = len(render("memory_block", memories=""))
    room = budget_chars - frame
    lines: list[str] = []
    used = 0
    for line in _entries(items, conflicts):
        cost = len(line) + (1 if lines else 0)
        if used + cost <= room:
            lines.append(line)
            used += cost
    if not lines and items:
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
    if not lines:
        return ""
    return render("memory_block", memories="\n".join(lines))
