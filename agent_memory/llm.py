"""The chat model the memory layer itself uses (extraction, consolidation, profiles).

It is optional: without one, extraction uses the deterministic rules, and
consolidation and profiles use thresholds and mappings, all offline. With
one, it is any LangChain chat model that supports structured output, passed
as an object (``MemoryService(llm=ChatOpenAI(...))``) or named in the
configuration (``MEMORY_LLM=openai:gpt-4o-mini``, built with LangChain's
``init_chat_model`` on first use, so naming one costs nothing until it runs).
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

from .config import MemoryConfig
from .errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = ["LlmSlot"]


def _is_chat_model(llm: Any) -> bool:
    """Whether ``llm`` is a LangChain chat model, without importing langchain_core's model classes
    (0.3 s, most of a command line's start) unless some model was made: one can't be an instance
    of a class nobody imported."""
    module = sys.modules.get("langchain_core.language_models")
    return module is not None and isinstance(llm, module.BaseChatModel)


class LlmSlot:
    """Holds the service's chat model: the one given, or the one the config names (built lazily)."""

    def __init__(self, llm: Any, config: MemoryConfig) -> None:
        if llm is not None and not _is_chat_model(llm):
            raise ConfigurationError(
                f"llm must be a LangChain chat model (e.g. ChatOpenAI(model='gpt-4o-mini')) or None, "
                f"got {type(llm).__name__}"
            )
        self._model: BaseChatModel | None = llm
        self._name = config.llm if llm is None else None
        self._lock = threading.Lock()

    @property
    def configured(self) -> bool:
        return self._model is not None or self._name is not None

    def get(self) -> BaseChatModel | None:
        if self._model is None and self._name is not None:
            with self._lock:
                if self._model is None:
                    self._model = _init(self._name)
        return self._model


def _init(name: str) -> BaseChatModel:
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(name)
    except Exception as exc:
        raise ConfigurationError(
            f"MEMORY_LLM={name!r} could not be loaded ({exc}); use 'provider:model' with the provider's "
            "package installed (e.g. 'openai:gpt-4o-mini' and OPENAI_API_KEY), or unset it to run offline"
        ) from exc
