"""The chat model behind ``agent-memory demo`` and ``agent-memory chat``.

With ``OPENAI_API_KEY`` (or an OpenAI-compatible ``OPENAI_BASE_URL``) set, it
is a real ``ChatOpenAI``. Without one, the demo still has to show memory
doing its job offline, so :func:`offline_chat_model` is a small rule-based
model: it saves what the user states explicitly ("I prefer...", "we
decided... because...") with ``memory_save`` tool calls, and otherwise answers
only from the ``<long_term_memory>`` block it finds in its own system prompt.
Its answers therefore depend on what the memory layer really injected,
which is the thing the demo is there to show. The rules are pure functions.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from .testing import ScriptedChatModel, tool_call

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


# --- what the user states ---------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    """One thing worth remembering, as ``memory_save`` arguments."""

    content: str
    memory_type: str
    scope: str


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_LEAD_IN = _rx(r"^(?:(?:hi|hello|hey|ok|okay|also|and|so|btw|by the way|please)\b[,!.]?\s*)+")
_REMEMBER = _rx(r"^(?:remember|note|don't forget|do not forget)(?: that)?\s+(?P<rest>.+)$")
_DECIDED = _rx(r"^we(?: have|'ve)? (?P<verb>decided|agreed|chose|picked|settled on)\b\s*(?P<rest>.*)$")
_PREFER = _rx(r"^i (?P<verb>prefer|like|love|want|enjoy|hate|dislike)\b\s*(?P<rest>.*)$")
_RULE = _rx(r"^(?P<verb>always|never)\b\s*(?P<rest>.+)$")
_HABIT = _rx(r"^i (?P<adverb>usually|often|always|never|normally) (?P<verb>\w+)\b\s*(?P<rest>.*)$")
_AM = _rx(r"^(?:i am|i'm)\s+(?P<rest>.+)$")
_DO = _rx(r"^i (?P<verb>work|live|use|have|speak|study|run|own|need|can't|cannot)\b\s*(?P<rest>.*)$")
_MY = _rx(r"^my (?P<rest>.+)$")
_CONSTRAINT = _rx(r"\b(allergic|intolerant|can't|cannot|unable)\b")

_PRONOUNS = (
    (re.compile(r"\bI'm\b"), "they are"), (re.compile(r"\bI am\b"), "they are"), (re.compile(r"\bI\b"), "they"),
    (_rx(r"\bmy\b"), "their"), (_rx(r"\bme\b"), "them"), (_rx(r"\bmine\b"), "theirs"),
    (_rx(r"\bmyself\b"), "themselves"),
)
_IRREGULAR = {"have": "has", "can't": "can't", "cannot": "cannot", "do": "does", "go": "goes"}


def _third_person(text: str) -> str:
    for pattern, replacement in _PRONOUNS:
        text = pattern.sub(replacement, text)
    return text


def _verb_s(verb: str) -> str:
    """``prefer`` -> ``prefers``, ``study`` -> ``studies``: the verb after "I", said of someone else."""
    verb = verb.lower()
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    return verb + "s"


def _sentence(*parts: str) -> str:
    text = " ".join(p for p in parts if p).strip().rstrip(".!")
    return text[:1].upper() + text[1:] + "."


def _statement(sentence: str) -> Statement | None:
    """The memory in one sentence, or ``None`` when it states nothing lasting."""
    text = _LEAD_IN.sub("", sentence.strip()).strip()
    if not text or text.endswith("?"):
        return None
    if m := _REMEMBER.match(text):
        inner = _statement(m["rest"])
        return inner or Statement(_sentence(_third_person(m["rest"])), "fact", "user")
    if m := _DECIDED.match(text):
        return Statement(_sentence("The team", m["verb"].lower(), _third_person(m["rest"])), "decision", "project")
    if m := _PREFER.match(text):
        return Statement(_sentence(_verb_s(m["verb"]), _third_person(m["rest"])), "preference", "user")
    if m := _RULE.match(text):
        return Statement(_sentence("Wants the assistant to", m["verb"].lower(), _third_person(m["rest"])),
                         "preference", "user")
    if m := _HABIT.match(text):
        return Statement(_sentence(m["adverb"].capitalize(), _verb_s(m["verb"]), _third_person(m["rest"])),
                         "habit", "user")
    if m := _AM.match(text):
        kind = "constraint" if _CONSTRAINT.search(text) else "fact"
        return Statement(_sentence("Is", _third_person(m["rest"])), kind, "user")
    if m := _DO.match(text):
        return Statement(_sentence(_verb_s(m["verb"]), _third_person(m["rest"])), "fact", "user")
    if m := _MY.match(text):
        return Statement(_sentence("Their", _third_person(m["rest"])), "fact", "user")
    return None


def statements_in(text: str) -> list[Statement]:
    """Every explicit, lasting statement in a user turn, in order (questions are skipped)."""
    sentences = re.split(r"(?<=[.!?])\s+|\n+", text)
    return [s for s in (_statement(x) for x in sentences) if s is not None]


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


def offline_reply(messages: Sequence[BaseMessage]) -> AIMessage:
    """The rule-based model's reply to a conversation.

    After tool results it confirms them; for a user turn with explicit statements it calls
    ``memory_save`` once per statement; otherwise it answers from the injected memories.
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
    if statements:
        calls = [tool_call("memory_save", content=s.content, memory_type=s.memory_type, scope=s.scope)
                 for s in statements]
        return AIMessage("", tool_calls=calls)
    return AIMessage(_answer(injected_memories(_system_prompt(messages))))


def offline_chat_model() -> ScriptedChatModel:
    """The offline model: a :class:`~agent_memory.testing.ScriptedChatModel` running :func:`offline_reply`."""
    return ScriptedChatModel(script=offline_reply)
