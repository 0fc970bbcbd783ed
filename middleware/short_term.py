"""Short-term memory: the conversation in the thread, summarized before it outgrows the prompt.

:func:`short_term_memory` configures LangChain's ``SummarizationMiddleware``
with defaults chosen for memory (see its docstring), a summary prompt that
keeps facts, preferences, decisions, open tasks and identifiers verbatim, and
an extractive summarizer for offline use (chosen by ``offline_summary=True``,
or when there is no model). It returns a list so it can add
:class:`ToolPairGuard`, which repairs what the model is sent when the history
has a tool result without its call or a call without its result: providers
reject such requests with a 400. Two ways to get there with the installed
LangChain: a run interrupted before its tools ran and then continued with a
new message instead of a resume leaves a call without a result; and
``SummarizationMiddleware``'s cutoff, when it lands on a run of tool results,
moves back to the first AI message sharing *any* id with the run, so a result
whose call was already gone survives beside a valid pair
(langchain-ai/langchain issue 38352). On histories without such leftovers its
cutoff never splits a pair; tests/test_short_term.py checks every cut point.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware.summarization import (
    ContextSize,
    SummarizationMiddleware,
    Summarizer,
    TokenCounter,
    TriggerClause,
)
from langchain.agents.middleware.types import (
    AgentMiddleware,
    ModelRequest,
    ModelResponse,
)
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatResult

from agent_memory.errors import ConfigurationError
from agent_memory.prompts import render

__all__ = [
    "DEFAULT_KEEP",
    "DEFAULT_TRIGGER",
    "DEFAULT_TRIM_TOKENS",
    "ToolPairGuard",
    "extractive_summary",
    "repair_tool_pairs",
    "short_term_memory",
    "summary_prompt",
]

logger = logging.getLogger(__name__)

DEFAULT_TRIGGER: ContextSize = ("tokens", 12_000)
DEFAULT_KEEP: ContextSize = ("tokens", 6_000)
DEFAULT_TRIM_TOKENS = 24_000

_HEADER = "Earlier conversation:"
_DROPPED = re.compile(r"- \((\d+) earlier lines dropped\)")
_SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"  # what SummarizationMiddleware writes
# Content blocks that repeat a client-side tool call (Anthropic, LangChain v1, OpenAI Responses). Server-side
# tool blocks carry their own results and are never touched.
_TOOL_CALL_BLOCKS = frozenset({"tool_use", "tool_call", "function_call"})


def summary_prompt() -> str:
    """The memory-oriented summary prompt, with the ``{messages}`` placeholder SummarizationMiddleware fills."""
    return render("summarization", messages="{messages}")


# --- the offline summarizer (pure) ------------------------------------------------


def _first_line(text: str, limit: int) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _is_summary(message: BaseMessage) -> bool:
    return isinstance(message, HumanMessage) and message.additional_kwargs.get("lc_source") == "summarization"


def extractive_summary(messages: Sequence[BaseMessage], max_chars: int = 2000) -> str:
    """A summary without a model: an earlier summary carried over, then the first line of each turn.

    Deterministic and offline, for tests, demos and deployments without a chat
    model. Lines are at most 200 characters; when the whole exceeds
    ``max_chars``, the oldest lines go first, since the conversation's recent
    past matters most to the turns that follow.
    """
    lines: list[str] = []
    dropped = 0
    for message in messages:
        if _is_summary(message):
            carried = message.text.removeprefix(_SUMMARY_PREFIX).removeprefix(_HEADER)
            for line in filter(None, (part.strip() for part in carried.splitlines())):
                if marker := _DROPPED.fullmatch(line):
                    dropped += int(marker.group(1))
                else:
                    lines.append(line)
        elif isinstance(message, HumanMessage):
            lines.append(f"- user: {_first_line(message.text, 200)}")
        elif isinstance(message, AIMessage):
            if text := _first_line(message.text, 200):
                lines.append(f"- assistant: {text}")
            for call in message.tool_calls:
                args = json.dumps(call["args"], ensure_ascii=False, sort_keys=True, default=str)
                lines.append(f"- assistant called {_first_line(call['name'] + ' ' + args, 190)}")
        elif isinstance(message, ToolMessage):
            outcome = "failed" if message.status == "error" else "returned"
            lines.append(f"- {message.name or 'tool'} {outcome}: {_first_line(message.text, 180)}")
    if not lines:
        return "No earlier conversation."
    kept: list[str] = []
    room = max_chars - len(_HEADER) - 40  # the header and a dropped-lines marker
    for line in reversed(lines):
        if len(line) + 1 > room:
            break
        kept.append(line)
        room -= len(line) + 1
    dropped += len(lines) - len(kept)
    head = [_HEADER] + ([f"- ({dropped} earlier lines dropped)"] if dropped else [])
    return "\n".join(head + kept[::-1])


# --- the guard (pure repair + thin middleware) -----------------------------------


def _strip_calls(message: AIMessage, keep: set[str]) -> AIMessage | None:
    """``message`` without the tool calls whose ids are not in ``keep``; ``None`` if nothing is left."""
    tool_calls = [c for c in message.tool_calls if c.get("id") in keep]
    invalid = [c for c in message.invalid_tool_calls if c.get("id") in keep]
    if len(tool_calls) == len(message.tool_calls) and len(invalid) == len(message.invalid_tool_calls):
        return message
    content: Any = message.content
    if isinstance(content, list):
        content = [
            block for block in content
            if not (isinstance(block, dict) and block.get("type") in _TOOL_CALL_BLOCKS and block.get("id") not in keep)
        ]
    extra = dict(message.additional_kwargs)
    if isinstance(extra.get("tool_calls"), list):
        extra["tool_calls"] = [c for c in extra["tool_calls"] if isinstance(c, dict) and c.get("id") in keep]
        if not extra["tool_calls"]:
            del extra["tool_calls"]
    if not content and not tool_calls and not invalid:
        return None
    return message.model_copy(
        update={"content": content, "tool_calls": tool_calls, "invalid_tool_calls": invalid, "additional_kwargs": extra}
    )


def repair_tool_pairs(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """``messages`` laid out as providers require: each AI tool call answered right after it.

    A tool result is kept only in the run of tool messages directly after the
    AI message that made its call (the first result per call); a call without
    a result there is removed from its AI message, and an AI message left with
    neither text nor calls is dropped. Nothing is reordered or invented, and
    unchanged messages are the same objects.
    """
    out: list[AnyMessage] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        if isinstance(message, ToolMessage):  # not right after its call: an orphan
            i += 1
            continue
        if not (isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls)):
            out.append(message)
            i += 1
            continue
        called = {c.get("id") for c in [*message.tool_calls, *message.invalid_tool_calls]} - {None}
        answers: dict[str, ToolMessage] = {}
        i += 1
        while i < len(messages) and isinstance(messages[i], ToolMessage):
            result = messages[i]
            assert isinstance(result, ToolMessage)
            if result.tool_call_id in called and result.tool_call_id not in answers:
                answers[result.tool_call_id] = result
            i += 1
        kept = _strip_calls(message, set(answers))
        if kept is not None:
            out.append(kept)
        out.extend(answers.values())
    return out


class ToolPairGuard(AgentMiddleware):
    """Sends the model a history where every tool result has its call and every call its result.

    Repairs the request only (see :func:`repair_tool_pairs`); the stored
    history is left as it is, so nothing is lost and a later fix upstream
    needs no migration. Put it last in the middleware list so it sees the
    messages after every other middleware has changed them.
    """

    def _repaired(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        repaired = repair_tool_pairs(request.messages)
        if len(repaired) == len(request.messages) and all(a is b for a, b in zip(repaired, request.messages)):
            return request
        logger.debug("tool pair guard: sent %d of %d messages, with unanswered calls removed",
                     len(repaired), len(request.messages))
        return request.override(messages=repaired)

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        return handler(self._repaired(request))

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any]:
        return await handler(self._repaired(request))


# --- the stack ----------------------------------------------------------------------


class _NoChatModel(BaseChatModel):
    """Stands in for ``model=None``: SummarizationMiddleware needs a model object for token counting."""

    @property
    def _llm_type(self) -> str:
        return "agent-memory-no-model"

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any,
    ) -> ChatResult:
        raise ConfigurationError("short-term memory has no chat model to call; pass model=... or summarizer=...")


def _check_size(name: str, value: Any) -> None:
    if not (isinstance(value, tuple) and len(value) == 2):
        raise ConfigurationError(f"{name} must be a pair like ('tokens', 6000) or ('messages', 20), got {value!r}")
    kind, amount = value
    if kind in ("tokens", "messages"):
        if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
            raise ConfigurationError(f"{name}: the number of {kind} must be a positive integer, got {amount!r}")
    elif kind == "fraction":
        if not isinstance(amount, int | float) or isinstance(amount, bool) or not 0 < amount <= 1:
            raise ConfigurationError(f"{name}: a fraction must be in (0, 1], got {amount!r}")
    else:
        raise ConfigurationError(f"{name} must count 'tokens', 'messages' or 'fraction', got {kind!r}")


def short_term_memory(
    model: str | BaseChatModel | None = None,
    *,
    trigger: ContextSize | TriggerClause | list[ContextSize | TriggerClause] = DEFAULT_TRIGGER,
    keep: ContextSize = DEFAULT_KEEP,
    summarizer: Summarizer | None = None,
    prompt: str | None = None,
    trim_tokens_to_summarize: int | None = DEFAULT_TRIM_TOKENS,
    token_counter: TokenCounter = count_tokens_approximately,
    guard: bool = True,
    offline_summary: bool = False,
) -> list[AgentMiddleware]:
    """Middleware that keeps a thread's history short: ``[SummarizationMiddleware, ToolPairGuard]``.

    Put the list at the end of ``create_agent(middleware=[...])``. Defaults,
    and why:

    - ``trigger=("tokens", 12_000)``: summarize well before any context
      window fills (12k leaves room for the system prompt, memory blocks and
      tool schemas even on a 16k model) and while a summary is still cheap to
      write and the history cheap to resend on every call.
    - ``keep=("tokens", 6_000)``: recent turns stay verbatim, about the last
      few exchanges with their tool results. Counting tokens rather than
      messages bounds what is kept: with ``("messages", 20)``, twenty long
      tool results can exceed the trigger on their own, and every model call
      would then summarize again. Keeping half the trigger means the next
      summary comes only after another ~6k tokens of conversation.
    - ``trim_tokens_to_summarize=24_000``: the summarizer sees the whole span
      it replaces, earlier summary included (the library default, 4000, cuts
      from the front and so drops earlier summaries), yet one huge tool
      output cannot overflow the summarizer's own context.

    ``model`` is the chat model that writes summaries with the memory prompt
    (``prompt`` overrides it and must contain ``{messages}``). ``summarizer``
    is passed to SummarizationMiddleware instead: a chat model, or a
    function/Runnable from the messages to the summary text.
    ``offline_summary=True`` summarizes with :func:`extractive_summary`
    whatever ``model`` is: no model call, no network, deterministic, and a
    scripted or fake model's replies are left for the agent (tests, demos, a
    model that can't summarize). With no ``model`` and no ``summarizer`` the
    summaries are extractive too, since there is nothing else to write them.
    ``guard=False`` leaves out :class:`ToolPairGuard`.
    """
    _check_size("keep", keep)
    if isinstance(trigger, tuple):
        _check_size("trigger", trigger)
    if trim_tokens_to_summarize is not None and (
        not isinstance(trim_tokens_to_summarize, int) or trim_tokens_to_summarize <= 0
    ):
        raise ConfigurationError(
            f"trim_tokens_to_summarize must be a positive integer or None, got {trim_tokens_to_summarize!r}"
        )
    template = summary_prompt() if prompt is None else prompt
    try:
        template.format(messages="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigurationError(
            f"the summary prompt must use {{messages}} as its only placeholder (double any other braces): {exc!r}"
        ) from None
    if "{messages}" not in template:
        raise ConfigurationError("the summary prompt has no {messages} placeholder for the conversation; add one")
    if not isinstance(offline_summary, bool):
        raise ConfigurationError(f"offline_summary must be True or False, got {offline_summary!r}")
    if offline_summary and summarizer is not None:
        raise ConfigurationError("give summarizer=... or offline_summary=True, not both: each chooses the summarizer")
    if offline_summary or (summarizer is None and model is None):
        summarizer = extractive_summary
    try:
        summarization = SummarizationMiddleware(
            _NoChatModel() if model is None else model,
            trigger=trigger,
            keep=keep,
            token_counter=token_counter,
            summary_prompt=template,
            trim_tokens_to_summarize=trim_tokens_to_summarize,
            summarizer=summarizer,
        )
    except (TypeError, ValueError) as exc:
        detail = str(exc)
        raise ConfigurationError(
            f"short-term memory can't use these settings: {detail[:1].lower()}{detail[1:]}"
        ) from exc
    return [summarization, ToolPairGuard()] if guard else [summarization]
