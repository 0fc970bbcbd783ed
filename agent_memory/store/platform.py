"""``AgentMemoryStore`` for LangGraph Platform (``langgraph dev``, a deployment): the factory
``langgraph.json`` names.

The platform loads a custom store from ``"store": {"path": ...}`` and calls it with no
arguments; whatever else the ``store`` section says (``index``, ``ttl``) it keeps to itself.
:func:`make_store` reads that section from the running platform and opens the store over an
:class:`~agent_memory.AsyncMemoryService` on the server's event loop, closing it when the server
stops::

    {"store": {"path": "agent_memory.store.platform.make_store",
               "index": {"embed": "openai:text-embedding-3-small", "dims": 1536, "fields": ["text"]}}}

``index.embed`` chooses the embedder as the platform's own store does (:func:`resolve_embed`):
``"provider:model"`` (LangChain's ``init_embeddings``), ``"./file.py:name"`` or
``"module.py:name"`` (an ``Embeddings`` object or a function from texts to vectors), or an
object. Without it the service's own embedder is used (``MEMORY_EMBEDDINGS``, else the local
model). ``dims`` must be that embedder's size, ``fields`` choose the text embedded. The database
is ``DATABASE_URL`` (else the embedded server), as for every entry point.

Whose memory a run touches is the platform's authenticated user
(``configurable["langgraph_auth_user"]``, read by :mod:`agent_memory.identity`), never a
``user_id`` the client sends.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, cast

from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig, Op, Result, TTLConfig

from ..config import MemoryConfig
from ..errors import ConfigurationError, PermissionDeniedError
from ..identity import AUTH_USER_KEY, authenticated_fields
from ..models import Identity
from ..service import AsyncMemoryService
from ..validation import check_identity
from .store import AgentMemoryStore

__all__ = ["PlatformStore", "make_store", "open_store", "platform_store_config", "resolve_embed"]

_HOW = ("give index['embed'] as 'provider:model' (e.g. 'openai:text-embedding-3-small'), './file.py:name' or "
        "'module.py:name' naming an Embeddings object or a function from texts to vectors")


def platform_store_config() -> Mapping[str, Any]:
    """The ``store`` section of the running platform's ``langgraph.json`` (``{}`` outside one).

    It is read from the platform's own parsed configuration, which exists only once its server
    has imported it: outside a platform server there is nothing to read and nothing is imported.
    """
    platform = sys.modules.get("langgraph_api.config")
    section = getattr(platform, "STORE_CONFIG", None) if platform is not None else None
    return section if isinstance(section, Mapping) else {}


def _load(spec: str) -> Any:
    """The object ``name`` in ``"./file.py:name"`` (a path, relative to the working directory,
    as the platform reads it) or ``"module.py:name"`` (an importable module)."""
    location, _, name = spec.rpartition(":")
    if "/" in location or location.endswith(".py") and Path(location).is_file():
        path = Path(location)
        if not path.is_file():
            raise ConfigurationError(f"index['embed'] names {location!r}, which is not a file (paths are relative "
                                     f"to the directory the server runs in, {Path.cwd()}); {_HOW}")
        module_spec = importlib.util.spec_from_file_location(f"agent_memory_embed_{path.stem}", path)
        if module_spec is None or module_spec.loader is None:
            raise ConfigurationError(f"index['embed'] names {location!r}, which cannot be loaded as Python; {_HOW}")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module_name = location[:-3] if location.endswith(".py") else location
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ConfigurationError(f"index['embed'] names module {module_name!r}, which cannot be imported "
                                     f"({exc}); install it, or {_HOW}") from exc
    if not hasattr(module, name):
        raise ConfigurationError(f"index['embed'] names {name!r}, which {location!r} does not define; {_HOW}")
    return getattr(module, name)


def resolve_embed(embed: Any) -> Embeddings:
    """``index['embed']`` as an ``Embeddings`` object, read as LangGraph Platform reads it.

    A function (from a list of texts to a list of vectors, sync or async) is wrapped with
    LangGraph's ``ensure_embeddings``. A name the platform cannot resolve raises
    :class:`ConfigurationError` saying which forms are accepted.
    """
    if isinstance(embed, str):
        if not embed.strip():
            raise ConfigurationError(f"index['embed'] is empty; {_HOW}")
        if ".py:" in embed:
            embed = _load(embed)
        else:
            try:
                from langchain.embeddings import init_embeddings
            except ImportError as exc:  # pragma: no cover - langchain is a dependency
                raise ConfigurationError(f"index['embed'] {embed!r} needs the langchain package; {_HOW}") from exc
            try:
                return init_embeddings(embed)
            except (ImportError, ValueError) as exc:
                raise ConfigurationError(f"index['embed'] {embed!r} could not be loaded: {exc}") from exc
    if isinstance(embed, Embeddings):
        return embed
    if callable(embed):
        from langgraph.store.base import ensure_embeddings

        return ensure_embeddings(embed)
    raise ConfigurationError(f"index['embed'] must be a name, an Embeddings object or a function, got "
                             f"{type(embed).__name__}; {_HOW}")


def _request_caller() -> Identity | None:
    """The user the platform authenticated for the HTTP request being served (its store
    endpoints: ``client.store.put_item``, ``search_items``...), outside any run; ``None`` when
    there is none or this is not a platform server."""
    utils = sys.modules.get("langgraph_api.utils")
    context = getattr(utils, "get_auth_ctx", lambda: None)() if utils is not None else None
    user = getattr(context, "user", None)
    if user is None or getattr(user, "is_authenticated", True) is False:
        return None
    fields = authenticated_fields({"configurable": {AUTH_USER_KEY: user}})
    if fields is None:
        return None
    return check_identity(fields["user_id"], fields["project_id"], None, fields["team_id"], fields["org_id"])


def _in_a_run() -> bool:
    from langgraph.config import get_config

    try:
        get_config()
    except RuntimeError:
        return False
    return True


class PlatformStore(AgentMemoryStore):
    """:class:`AgentMemoryStore` as the platform serves it: inside a run it acts for the run's
    (authenticated) user like any store; a call from the platform's store endpoints
    (``client.store.put_item``, ``search_items``...), which run outside any run, acts for the user
    the platform authenticated for that request, and a refusal there answers HTTP 403."""

    def _for_request(self) -> bool:
        """Whether a call made now comes from the platform's store endpoints (no caller given,
        outside any run): it then acts for the request's user, and a refusal answers HTTP 403."""
        return self.caller is None and not _in_a_run()

    def _current_caller(self) -> Identity | None:
        return _request_caller() if self._for_request() else super()._current_caller()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        with _refused_as_http(self._for_request()):
            return super().batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        with _refused_as_http(self._for_request()):
            return await super().abatch(ops)

    async def _gathered(self, op: Op) -> Any:
        with _refused_as_http(self._for_request()):
            return await super()._gathered(op)


@contextmanager
def _refused_as_http(request: bool) -> Iterator[None]:
    """A refusal of a call from the platform's store endpoints (``request``) as HTTP 403."""
    try:
        yield
    except PermissionDeniedError as exc:
        if request:
            raise _forbidden(exc) from exc
        raise


def _forbidden(exc: PermissionDeniedError) -> Exception:
    """The refusal as the platform's server answers it: HTTP 403 with our message (it would
    otherwise answer 500 and drop the connection)."""
    from starlette.exceptions import HTTPException  # the platform's server runs on starlette

    return HTTPException(status_code=403, detail=str(exc))


@asynccontextmanager
async def open_store(
    index: IndexConfig | None = None, *, ttl: TTLConfig | None = None, conn: Any = None,
    config: MemoryConfig | None = None,
) -> AsyncIterator[AgentMemoryStore]:
    """An :class:`AgentMemoryStore` over a new :class:`AsyncMemoryService` on the running event
    loop, closed on exit: the body of a ``langgraph.json`` store factory of your own.

    ``index``: LangGraph's index config (``embed`` chooses the embedder, see
    :func:`resolve_embed`; ``dims`` and ``fields`` as :class:`AgentMemoryStore` takes them).
    ``ttl``: LangGraph's ttl config; with ``sweep_interval_minutes`` expired memories are deleted
    that often while the store is open (they are invisible from the moment they expire).
    ``conn``/``config``: as :class:`AsyncMemoryService` takes
    them (default: ``DATABASE_URL``, else the embedded server; settings from the environment).
    """
    if index is not None and not isinstance(index, Mapping):
        raise ConfigurationError(f"index must be a dict like {{'embed': 'openai:text-embedding-3-small', "
                                 f"'dims': 1536}}, got {type(index).__name__}")
    embed = None if index is None else index.get("embed")
    embeddings = None if embed is None else resolve_embed(embed)
    async with AsyncMemoryService(conn, config=config, embeddings=embeddings) as memory:
        if embeddings is not None:  # the embedder resolved once: the service's is the store's
            index = cast("IndexConfig", {**cast("Mapping[str, Any]", index), "embed": memory.embeddings})
        store = PlatformStore(memory, index=index, ttl=ttl)
        # the platform runs no TTL sweeper for a custom store: ours runs while the store is open
        sweeping = bool((store.ttl_config or {}).get("sweep_interval_minutes"))
        if sweeping:
            await store.astart_ttl_sweeper()
        try:
            yield store
        finally:
            if sweeping:
                await store.astop_ttl_sweeper()


def make_store() -> AbstractAsyncContextManager[AgentMemoryStore]:
    """The store for ``"store": {"path": "agent_memory.store.platform.make_store"}`` in
    ``langgraph.json``: :func:`open_store` with that section's ``index`` and ``ttl``.

    The platform calls it with no arguments and enters what it returns (an async context
    manager) once, on its server's event loop, for the server's lifetime.
    """
    section = platform_store_config()
    index = cast("IndexConfig | None", section.get("index"))
    ttl = cast("TTLConfig | None", section.get("ttl"))
    return open_store(index, ttl=ttl)
