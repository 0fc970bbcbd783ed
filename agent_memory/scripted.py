"""A chat model whose replies are a script: the offline demo's model, and the stand-in of tests.

LangChain's fake chat models answer from a fixed list, so they cannot react to
what the memory layer put in the prompt, and ``create_agent`` needs
``bind_tools``. :class:`ScriptedChatModel` answers with a function of the
messages it is sent (or from a list), records every request (so a test can
look at the system prompt the model really saw), and binds tools by ignoring
them. Because the reply is a function of the conversation, a run resumed in a
new process gets the same replies as the first one would have.

It lives here, not in :mod:`agent_memory.testing`, because the offline demo
(:mod:`agent_memory.demo_model`) runs on it and production code never imports
the testing module; ``agent_memory.testing`` re-exports it for tests.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolCall
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, PrivateAttr

__all__ = ["ScriptedChatModel", "structured_reply", "tool_call"]

Reply = AIMessage | str
Script = Callable[[list[BaseMessage]], Reply]


def tool_call(name: str, call_id: str | None = None, /, **args: Any) -> ToolCall:
    """A tool call for a scripted reply: ``AIMessage("", tool_calls=[tool_call("memory_stats")])``."""
    return ToolCall(name=name, args=args, id=call_id or f"call_{uuid.uuid4().hex[:12]}", type="tool_call")


def structured_reply(schema: Any, /, **fields: Any) -> AIMessage:
    """The reply of a model asked for ``schema`` via ``with_structured_output`` (a tool call
    named after it), for scripts: ``structured_reply(ExtractedMemories, memories=[...])``."""
    name = schema if isinstance(schema, str) else schema.__name__
    return AIMessage("", tool_calls=[tool_call(name, **fields)])


class ScriptedChatModel(BaseChatModel):
    """A chat model whose replies come from ``script``.

    ``script`` is either a function ``messages -> AIMessage | str`` or a list of
    replies used in order (the last one repeats). ``requests`` holds the
    messages of every call, ``system_prompts`` the text of each call's system
    message (``""`` when there was none). ``fail_times`` makes the first calls
    raise, to test recovery.

    ``structured`` scripts structured output: when the model is asked for a schema
    (``with_structured_output(Schema)``), the reply comes from ``structured["Schema"]``,
    a function ``messages -> dict | AIMessage`` or a list of dicts used in order
    (the last repeats), turned into the tool call LangChain's parser expects. A
    schema with no entry raises, so a test notices an unexpected model call.
    ``structured_requests`` records ``(schema name, messages)`` of those calls.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: Any = None
    structured: dict[str, Any] | None = None
    fail_times: int = 0
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _replies: Any = PrivateAttr(default=None)
    _requests: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _structured: dict[str, Any] = PrivateAttr(default_factory=dict)
    _structured_requests: list[tuple[str, list[BaseMessage]]] = PrivateAttr(default_factory=list)
    _bound: str | None = PrivateAttr(default=None)
    _fails: list[int] = PrivateAttr(default_factory=list)  # shared with bound copies

    def model_post_init(self, context: Any, /) -> None:
        self._fails = [self.fail_times]
        if self.script is None and not self.structured:
            raise ValueError("give a script, structured replies, or both")
        if self.script is not None and not callable(self.script):
            replies = list(self.script)
            if not replies:
                raise ValueError("script needs at least one reply")
            self._replies = itertools.chain(replies, itertools.repeat(replies[-1]))
        for name, replies in (self.structured or {}).items():
            if callable(replies):
                self._structured[name] = replies
            else:
                replies = list(replies)
                if not replies:
                    raise ValueError(f"structured[{name!r}] needs at least one reply")
                chain = itertools.chain(replies, itertools.repeat(replies[-1]))
                self._structured[name] = lambda messages, _chain=chain: next(_chain)

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"

    @property
    def requests(self) -> list[list[BaseMessage]]:
        return list(self._requests)

    @property
    def structured_requests(self) -> list[tuple[str, list[BaseMessage]]]:
        return list(self._structured_requests)

    @property
    def system_prompts(self) -> list[str]:
        return [
            next((m.text for m in request if isinstance(m, SystemMessage)), "") for request in self._requests
        ]

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        """Structured output as scripted in ``structured``; a model with none scripted can't give
        any, and says so the way LangChain's models without tool calling do (NotImplementedError),
        so the memory layer extracts with its rules instead of asking it."""
        if not self._structured:
            raise NotImplementedError("this ScriptedChatModel has no structured replies scripted")
        return super().with_structured_output(schema, **kwargs)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        if kwargs.get("tool_choice") in (None, "auto", "none") or len(tools) != 1:
            return self
        # structured output: the same model (same records) answering for one schema
        from langchain_core.utils.function_calling import convert_to_openai_tool

        bound = self.model_copy()
        bound._bound = convert_to_openai_tool(tools[0])["function"]["name"]
        return bound

    def _structured_reply(self, name: str, messages: list[BaseMessage]) -> AIMessage:
        if name not in self._structured:
            raise RuntimeError(f"the model was asked for {name} structured output, which the test did not script")
        self._structured_requests.append((name, list(messages)))
        reply = self._structured[name](list(messages))
        return reply if isinstance(reply, AIMessage) else structured_reply(name, **dict(reply))

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        with self._lock:
            self._requests.append(list(messages))
            if self._fails[0] > 0:
                self._fails[0] -= 1
                raise RuntimeError("scripted model failure (fail_times)")
            if self._bound is not None:
                reply: Any = self._structured_reply(self._bound, list(messages))
            elif self.script is None:
                raise RuntimeError("the model was called for a plain reply, which the test did not script")
            else:
                reply = self.script(list(messages)) if self._replies is None else next(self._replies)
        if isinstance(reply, str):
            reply = AIMessage(content=reply)
        if not isinstance(reply, AIMessage):
            raise TypeError(f"a script must return an AIMessage or a str, got {type(reply).__name__}")
        return reply.model_copy(update={"id": reply.id or f"msg_{uuid.uuid4().hex[:12]}"})

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    @classmethod
    def from_replies(cls, replies: Iterable[Reply], **kwargs: Any) -> ScriptedChatModel:
        return cls(script=list(replies), **kwargs)
