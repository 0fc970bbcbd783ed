"""The chat model behind ``agent-memory demo`` and ``agent-memory chat``.

With ``OPENAI_API_KEY`` (or an OpenAI-compatible ``OPENAI_BASE_URL``) set, it
is a real ``ChatOpenAI``. Without one, the demo still has to show memory
doing its job offline, so :func:`offline_chat_model` is a small rule-based
model: it saves what the user states explicitly ("I prefer...", "we
decided... because...") with ``memory_save`` tool calls, and otherwise answers
only from the ``<long_term_memory>`` block it finds in its own system prompt.
Its answers therefore depend on what the memory layer really injected,
which is the thing the demo is there to show. The rules are pure functions;
what counts as a statement lives in :mod:`agent_memory.extraction.rules`, shared
with automatic extraction. With ``save_with_tool=False`` the model leaves saving
to automatic extraction and only acknowledges statements.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from .extraction.rules import Statement, statements_in
from .scripted import ScriptedChatModel, tool_call

__all__ = [
    "DEFAULT_CHAT_MODEL",
    "ChatModelChoice",
    "Statement",
    "choose_chat_model",
    "injected_memories",
    "memory_block",
    "offline_chat_model",
    "offline_reply",
    "statements_in",
]

DEFAULT_CHAT_MODEL = "gpt-4o-mini"
OFFLINE_NAME = "offline scripted model (rule-based, no network)"
ACKNOWLEDGEMENT = "Got it, thanks."


# --- choosing the model ----------------------------------------------------------------------


@dataclass(frozen=True)
class ChatModelChoice:
    """The model to run and how to describe it to the person watching."""

    model: BaseChatModel
    description: str
    offline: bool


def choose_chat_model(env: Mapping[str, str] | None = None, *, offline: bool = False) -> ChatModelChoice:
    """A real chat model when ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` is set (and ``offline`` is
    false), else the offline rule-based one. ``AGENT_MEMORY_CHAT_MODEL`` names the real model.
    Building the model makes no request."""
    env = os.environ if env is None else env
    key, base_url = env.get("OPENAI_API_KEY") or None, env.get("OPENAI_BASE_URL") or None
    if offline or not (key or base_url):
        return ChatModelChoice(offline_chat_model(), OFFLINE_NAME, True)
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ImportError("a real chat model needs langchain-openai: pip install langchain-openai") from exc
    name = env.get("AGENT_MEMORY_CHAT_MODEL") or DEFAULT_CHAT_MODEL
    # OpenAI-compatible local servers (Ollama, vLLM...) take any key, but the client insists on one.
    model = ChatOpenAI(model=name, base_url=base_url, api_key=key or "not-needed")
    where = f" at {base_url}" if base_url else ""
    return ChatModelChoice(model, f"{name} (OpenAI-compatible chat model{where})", False)


# --- what the memory layer injected -----------------------------------------------------------

_MEMORY = re.compile(r'<memory scope="(?P<scope>[^"]*)" type="(?P<type>[^"]*)">(?P<content>.*?)</memory>', re.DOTALL)


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def memory_block(system_prompt: str) -> str | None:
    """The ``<long_term_memory>`` block the memory layer appended to a system prompt, or ``None``.

    The last one counts: the agent's own instructions may mention the tag, and memory contents
    are escaped, so they cannot contain it."""
    end = system_prompt.rfind("</long_term_memory>")
    start = system_prompt.rfind("<long_term_memory>", 0, end)
    if end < 0 or start < 0:
        return None
    return system_prompt[start:end + len("</long_term_memory>")]


def injected_memories(system_prompt: str) -> list[Statement]:
    """The memories inside the ``<long_term_memory>`` block of a system prompt (``[]`` when absent)."""
    block = memory_block(system_prompt) or ""
    return [Statement(_unescape(m["content"]), m["type"], m["scope"]) for m in _MEMORY.finditer(block)]


# --- the replies ------------------------------------------------------------------------------

_ID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12} ")


def _system_prompt(messages: Sequence[BaseMessage]) -> str:
    return next((m.text for m in messages if isinstance(m, SystemMessage)), "")


def _confirm(results: Sequence[ToolMessage]) -> str:
    saves = all(m.name == "memory_save" for m in results)
    lines = [f"- {_ID.sub('', m.text)}" for m in results]
    return "\n".join(["Noted, I'll remember that:" if saves else "Here is what the tools said:", *lines])


def _answer(memories: Sequence[Statement]) -> str:
    if not memories:
        return ("I don't know anything about you yet: no memories from earlier conversations were given to me. "
                "Tell me what you prefer or what your team decided, and I will remember it.")
    lines = [f"- {m.content} ({m.memory_type}, {m.scope} memory)" for m in memories]
    return "\n".join(["From what I remember of our earlier conversations:", *lines,
                      "I'll answer with that in mind."])


def offline_reply(messages: Sequence[BaseMessage], *, save_with_tool: bool = True) -> AIMessage:
    """The rule-based model's reply to a conversation.

    After tool results it confirms them; for a user turn with explicit statements it calls
    ``memory_save`` once per statement (or, with ``save_with_tool=False``, only acknowledges
    them: automatic extraction learns them after the turn); otherwise it answers from the
    injected memories.
    """
    tail: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        tail.insert(0, message)
    if tail:
        return AIMessage(_confirm(tail))
    user = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
    statements = statements_in(user.text) if user is not None else []
    if statements and not save_with_tool:
        return AIMessage(ACKNOWLEDGEMENT)
    if statements:
        # a team's or an organisation's statement is saved for the project: the one shared level
        # the demo's runs have (extraction places such statements by the run's levels instead)
        calls = [tool_call("memory_save", content=s.content, memory_type=s.memory_type,
                           scope="project" if s.scope in ("team", "org") else s.scope)
                 for s in statements]
        return AIMessage("", tool_calls=calls)
    return AIMessage(_answer(injected_memories(_system_prompt(messages))))


def offline_chat_model(*, save_with_tool: bool = True) -> ScriptedChatModel:
    """The offline model: a :class:`~agent_memory.scripted.ScriptedChatModel` running :func:`offline_reply`.

    ``save_with_tool=False`` is for agents with automatic extraction: statements are acknowledged,
    not saved with ``memory_save``."""
    script = offline_reply if save_with_tool else partial(offline_reply, save_with_tool=False)
    return ScriptedChatModel(script=script)
