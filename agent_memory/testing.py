"""A scripted chat model for tests, notebooks and the offline demo.

LangChain's fake chat models answer from a fixed list, so they cannot react to
what the memory layer put in the prompt, and ``create_agent`` needs
``bind_tools``. :class:`ScriptedChatModel` answers with a function of the
messages it is sent (or from a list), records every request (so a test can
look at the system prompt the model really saw), and binds tools by ignoring
them. Because the reply is a function of the conversation, a run resumed in a
new process gets the same replies as the first one would have.
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

__all__ = ["ScriptedChatModel", "tool_call"]

Reply = AIMessage | str
Script = Callable[[list[BaseMessage]], Reply]


def tool_call(name: str, call_id: str | None = None, /, **args: Any) -> ToolCall:
    """A tool call for a scripted reply: ``AIMessage("", tool_calls=[tool_call("memory_stats")])``."""
    return ToolCall(name=name, args=args, id=call_id or f"call_{uuid.uuid4().hex[:12]}", type="tool_call")


class ScriptedChatModel(BaseChatModel):
    """A chat model whose replies come from ``script``.

    ``script`` is either a function ``messages -> AIMessage | str`` or a list of
    replies used in order (the last one repeats). ``requests`` holds the
    messages of every call, ``system_prompts`` the text of each call's system
    message (``""`` when there was none). ``fail_times`` makes the first calls
    raise, to test recovery.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: Any
    fail_times: int = 0
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _replies: Any = PrivateAttr(default=None)
    _requests: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    def model_post_init(self, context: Any, /) -> None:
        if not callable(self.script):
            replies = list(self.script)
            if not replies:
                raise ValueError("script needs at least one reply")
            self._replies = itertools.chain(replies, itertools.repeat(replies[-1]))

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"

    @property
    def requests(self) -> list[list[BaseMessage]]:
        return list(self._requests)

    @property
    def system_prompts(self) -> list[str]:
        return [
            next((m.text for m in request if isinstance(m, SystemMessage)), "") for request in self._requests
        ]

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        with self._lock:
            self._requests.append(list(messages))
            if self.fail_times > 0:
                self.fail_times -= 1
                raise RuntimeError("scripted model failure (fail_times)")
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
