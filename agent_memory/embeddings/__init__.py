"""Choosing the embedder, and the two facts the database records about it: its size and its name.

The schema's vector column is sized once, so :func:`embedding_dimensions` must know
the size before the first text is stored; for the embedders we ship it answers from
a table (no API call), for anything else it asks the model once. The name from
:func:`embedding_model_name` is stored next to the vectors so that switching
models is detected instead of mixing two vector spaces.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

from langchain_core.embeddings import Embeddings

from ..config import MemoryConfig
from ..errors import ConfigurationError, EmbeddingError
from .local import LocalEmbeddings

__all__ = ["LocalEmbeddings", "embedding_dimensions", "embedding_model_name", "resolve_embeddings"]

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
#: Native output sizes of OpenAI's embedding models (``dimensions=`` can shorten the v3 ones).
OPENAI_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
_LOCAL_NAMES = (None, LocalEmbeddings.model_name, "all-MiniLM-L6-v2")


def resolve_embeddings(config: MemoryConfig) -> Embeddings:
    """The embedder ``config.embeddings`` names: ``"local"`` (MiniLM, offline) or ``"openai"``."""
    if config.embeddings == "local":
        if config.embedding_model not in _LOCAL_NAMES:
            raise ConfigurationError(
                f"embedding_model={config.embedding_model!r} only applies to embeddings='openai'; the local "
                f"model is always {LocalEmbeddings.model_name}. Unset it, or pass any LangChain Embeddings "
                "object as embeddings= to MemoryService"
            )
        return LocalEmbeddings(threads=config.embedding_threads)
    if config.embeddings == "openai":
        return _openai(config.embedding_model or DEFAULT_OPENAI_MODEL)
    raise ConfigurationError(f"embeddings must be 'local' or 'openai', got {config.embeddings!r}")


def _openai(model: str) -> Embeddings:
    try:
        import openai
        from langchain_openai import OpenAIEmbeddings
    except ImportError:
        raise ConfigurationError(
            "embeddings='openai' needs langchain-openai: pip install langchain-openai, or use embeddings='local'"
        ) from None
    try:
        # check_embedding_ctx_length=False: LangChain would otherwise count tokens client-side with
        # tiktoken, whose encoding file is downloaded on first use, so an OpenAI-compatible endpoint
        # on a machine without internet failed before it was called. Memories are at most a few
        # thousand characters, far inside every embedding model's context, so nothing is lost.
        # Pass your own OpenAIEmbeddings(...) as embeddings= to choose otherwise.
        return OpenAIEmbeddings(model=model, check_embedding_ctx_length=False)
    except openai.OpenAIError as exc:  # raised at construction when no API key is found
        raise ConfigurationError(
            f"could not set up OpenAI embeddings ({exc}); set OPENAI_API_KEY, or use embeddings='local' "
            "(MEMORY_EMBEDDINGS=local) for the offline model"
        ) from exc


def _openai_embeddings_type() -> type | None:
    # Only look at langchain_openai if someone imported it: an object can't be an
    # OpenAIEmbeddings otherwise, and importing it here would cost half a second.
    module = sys.modules.get("langchain_openai")
    return getattr(module, "OpenAIEmbeddings", None)


def _openai_fields(embeddings: Embeddings) -> tuple[str, int | None] | None:
    """(model, explicit dimensions) of an OpenAIEmbeddings, or None for any other embedder."""
    cls = _openai_embeddings_type()
    if cls is None or not isinstance(embeddings, cls):
        return None
    model: Any = getattr(embeddings, "model", None)
    dims: Any = getattr(embeddings, "dimensions", None)
    return str(model), dims


# id(embedder) -> (reference to it, size); the reference proves the id wasn't reused by a newer object.
_PROBED: dict[int, tuple[Callable[[], Any], int]] = {}
_PROBED_LOCK = threading.Lock()


def _remember(embeddings: Embeddings, size: int) -> None:
    key = id(embeddings)
    try:
        ref: Callable[[], Any] = weakref.ref(embeddings, lambda _: _PROBED.pop(key, None))
    except TypeError:  # no weak references to this type: keep it alive instead
        ref = lambda obj=embeddings: obj  # noqa: E731
    with _PROBED_LOCK:
        _PROBED[key] = (ref, size)


def _check_size(embeddings: Embeddings, size: Any, source: str) -> int:
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise EmbeddingError(
            f"{type(embeddings).__name__} {source} {size!r}, not a positive whole number of dimensions"
        )
    return size


def embedding_dimensions(embeddings: Embeddings) -> int:
    """The length of the vectors ``embeddings`` makes.

    Known embedders answer without a call; any other is asked to embed one short
    text, once per object.
    """
    if isinstance(embeddings, LocalEmbeddings):
        return LocalEmbeddings.dimensions
    openai_fields = _openai_fields(embeddings)
    if openai_fields is not None:
        model, dims = openai_fields
        if dims is not None:
            return _check_size(embeddings, dims, "has dimensions=")
        if model in OPENAI_DIMENSIONS:
            return OPENAI_DIMENSIONS[model]
    with _PROBED_LOCK:
        entry = _PROBED.get(id(embeddings))
    if entry is not None and entry[0]() is embeddings:
        return entry[1]
    try:
        vector = embeddings.embed_query("dimension probe")
    except Exception as exc:
        raise EmbeddingError(
            f"could not learn the vector size of {type(embeddings).__name__}: embedding a probe text failed ({exc})"
        ) from exc
    try:
        size = len(vector)
    except TypeError:
        size = vector
    size = _check_size(embeddings, size, "returned a probe vector of length")
    _remember(embeddings, size)
    return size


def embedding_model_name(embeddings: Embeddings) -> str:
    """A stable name for the vector space, e.g. ``local:all-MiniLM-L6-v2-int8`` or ``openai:text-embedding-3-small``.

    Other embedders get their class name, plus ``:<model>`` when they expose a
    ``model`` or ``model_name`` string, so two models of one class aren't confused.
    """
    if isinstance(embeddings, LocalEmbeddings):
        return f"local:{LocalEmbeddings.model_name}"
    openai_fields = _openai_fields(embeddings)
    if openai_fields is not None:
        model, dims = openai_fields
        return f"openai:{model}" if dims is None else f"openai:{model}@{dims}"
    name = type(embeddings).__name__
    for attr in ("model", "model_name"):
        value = getattr(embeddings, attr, None)
        if isinstance(value, str) and value:
            return f"{name}:{value}"
    return name
