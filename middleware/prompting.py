"""Adding a section to the system message of one model request.

Shared by every middleware that injects context (long-term memory, working
memory), so they all treat the agent's own prompt the same way: it comes
first, and a content-block prompt (e.g. with cache control) keeps its blocks.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import SystemMessage

__all__ = ["with_section"]


def with_section(system_message: SystemMessage | None, text: str) -> SystemMessage | None:
    """``system_message`` with ``text`` appended as its own paragraph; unchanged when ``text`` is empty."""
    if not text:
        return system_message
    if system_message is None:
        return SystemMessage(content=text)
    content: Any = system_message.content
    if isinstance(content, str):
        new: Any = f"{content}\n\n{text}" if content else text
    else:
        new = [*content, {"type": "text", "text": f"\n\n{text}"}]
    return system_message.model_copy(update={"content": new})
