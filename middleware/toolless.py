"""Models without tool calling: agent-memory's tools are left out of their requests.

LangChain's ``BaseChatModel.bind_tools`` raises ``NotImplementedError``, so a model class that
does not override it (``GenericFakeChatModel``, LangChain's standard test double, and many thin
wrappers of small local models) fails ``create_agent`` with a bare ``NotImplementedError`` as
soon as any middleware contributes a tool. The tools our middlewares contribute (the memory
tools, working memory's ``update_todos``/``add_note``) are an extra: the memory they inject into
the prompt is the point. So each middleware takes its own tools out of such a model's requests,
and the first to do so says it once for that model (a warning in the log), not once per call.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from langchain.agents.middleware import ModelRequest
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool

__all__ = ["calls_tools", "without_tools"]

logger = logging.getLogger("agent_memory.middleware")

_lock = threading.Lock()
#: the models already warned about, by id (weak: a model that is gone is forgotten, never reused)
_warned: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def calls_tools(model: Any) -> bool:
    """Whether ``model`` can be given tools: its class has a ``bind_tools`` of its own (LangChain's
    default only raises ``NotImplementedError``)."""
    method = getattr(type(model), "bind_tools", None)
    return method is not None and method is not BaseChatModel.bind_tools


def _ours_in(request: ModelRequest[Any]) -> list[str]:
    """The names of every agent-memory tool in ``request`` (all middlewares', for one warning)."""
    from .tools import TOOL_NAMES
    from .working import ADD_NOTE, UPDATE_TODOS

    known = {*TOOL_NAMES, ADD_NOTE, UPDATE_TODOS}
    return [t.name for t in request.tools if isinstance(t, BaseTool) and t.name in known]


def _warn_once(model: Any, names: Sequence[str]) -> None:
    with _lock:
        if _warned.get(id(model)) is model:
            return
        try:
            _warned[id(model)] = model
        except TypeError:  # not weak-referenceable: warn each time rather than keep it alive
            pass
    logger.warning(
        "%s cannot call tools (its bind_tools raises NotImplementedError), so agent-memory leaves its "
        "tools (%s) out of this model's requests; memories are still put in the system prompt. Give the "
        "agent a model with tool calling for the model to save and search memories itself",
        type(model).__name__, ", ".join(names))


def without_tools(request: ModelRequest[Any], ours: Sequence[BaseTool]) -> ModelRequest[Any]:
    """``request`` without the tools in ``ours`` when its model cannot call tools; else unchanged."""
    if not ours or calls_tools(request.model):
        return request
    mine = {t.name for t in ours}  # names are unique among an agent's tools
    kept = [t for t in request.tools if not (isinstance(t, BaseTool) and t.name in mine)]
    if len(kept) == len(request.tools):
        return request
    _warn_once(request.model, _ours_in(request))
    return request.override(tools=kept)
