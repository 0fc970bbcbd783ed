"""The I/O requests an operation can make, and the two drivers that serve them.

Every service operation is a generator (see :mod:`agent_memory.ops`) that
yields these small requests and receives their answers. The sync and async
drivers below are the only code that touches a connection or an embedder, so
the logic of each operation exists once and runs the same in both worlds.

Transactions: the first :class:`Sql` opens a connection and a transaction;
:class:`Commit` ends it (the next ``Sql`` opens another); the end of the
operation commits, an exception rolls back. Embedding before the first query
therefore never holds a connection. An :class:`Llm` request (seconds, not
milliseconds) must come outside a transaction, and the connection goes back
to the pool while the model thinks.

Failures: no psycopg error reaches the caller. A lost connection or a server
that is down ends the operation as a ``DatabaseUnavailableError`` that says
whether anything may have been written (see :class:`_Progress`); any other
psycopg error is thrown into the operation and, if it escapes, becomes a
``DatabaseError`` (:mod:`.failures` words them).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Generator, Sequence
from contextlib import AsyncExitStack, ExitStack, suppress
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import psycopg
from pgvector.psycopg.vector import register_vector_info
from psycopg.rows import dict_row
from psycopg.types import TypeInfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ..errors import AgentMemoryError, DatabaseError, EmbeddingError, ModelOutputError
from .connection import AsyncConn, Conn, aflush, aget_connection, flush, get_connection
from .failures import connection_lost, database_error, lost
from .statements import numbered

__all__ = ["Commit", "Copy", "Embed", "Llm", "Op", "Shared", "Sql", "arun", "run"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Sql:
    """Run one statement. ``fetch``: rows as dicts (``all``), the first row or None (``one``),
    the affected row count (``rowcount``) or nothing (``none``)."""

    query: Any
    params: Sequence[Any] | dict[str, Any] | None = None
    fetch: Literal["all", "one", "rowcount", "none"] = "all"


#: pgvector's type per connection, looked up on its first binary COPY (registered on the copying
#: cursor only, so the caller's connection keeps returning vectors as text)
_VECTOR_TYPES: weakref.WeakKeyDictionary[Any, TypeInfo] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class Copy:
    """``COPY ... FROM STDIN`` the given rows; answers the number of rows written.

    With ``types`` (one PostgreSQL type name per column) the rows travel in binary
    (``FORMAT BINARY`` in the statement): a ``vector`` column then takes numpy arrays, sent
    as packed floats instead of formatted text (the cost of a bulk import was mostly
    formatting floats). The vector type is registered on the copying cursor only."""

    statement: Any
    rows: Sequence[Sequence[Any]] = field(default_factory=tuple)
    types: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Embed:
    """Embed texts with the service's embedder; answers one vector (list of floats) per text."""

    texts: tuple[str, ...]
    query: bool = False


@dataclass(frozen=True, slots=True)
class Commit:
    """End the current transaction here (no-op when none is open)."""


@dataclass(frozen=True, slots=True)
class Llm:
    """Ask a LangChain chat model for structured output: answers an instance of ``schema``
    (a pydantic model), via ``model.with_structured_output(schema)``. Failures, including a
    reply that does not fit the schema, are thrown into the operation as exceptions."""

    model: Any
    schema: Any
    messages: tuple[Any, ...]


def embedding_failed(embeddings: Any, exc: Exception) -> EmbeddingError:
    """A provider's error (HTTP 500, a body that is not JSON, a refused connection...) as our
    :class:`EmbeddingError`, saying what to check; the operation is abandoned before it writes."""
    detail = " ".join(str(exc).split())[:300] or type(exc).__name__
    return EmbeddingError(
        f"the embedding model ({type(embeddings).__name__}) failed: {type(exc).__name__}: {detail}; nothing was "
        "written. For OpenAI or a compatible endpoint check OPENAI_BASE_URL, OPENAI_API_KEY and that the "
        "endpoint serves embeddings; MEMORY_EMBEDDINGS=local uses the offline model instead (a database "
        "made with another model then needs `agent-memory reembed`)"
    )


def _structured(request: Llm) -> Any:
    return request.model.with_structured_output(request.schema)


def _check_output(request: Llm, output: Any) -> Any:
    if not isinstance(output, request.schema):
        raise ModelOutputError(
            f"the model returned no {request.schema.__name__} (got {type(output).__name__}); "
            "use a chat model that supports tool calling / structured output"
        )
    return output


@dataclass(frozen=True, slots=True)
class Shared:
    """Answers the object ``make()`` built for this connection pool (or passed-in connection)
    under ``name``, built on first use: state an operation keeps between calls on the same
    database, such as :class:`agent_memory.vector_cache.VectorCache`. The driver holds it only
    as long as the pool lives."""

    name: str
    make: Any  # () -> object


_SHARED: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def _shared(conn: Any, request: Shared) -> Any:
    with _SHARED_LOCK:
        held = _SHARED.setdefault(conn, {})
        if request.name not in held:
            held[request.name] = request.make()
        return held[request.name]


Request = Sql | Copy | Embed | Commit | Llm | Shared
Op = Generator[Request, Any, T]


def _result(cur: Any, fetch: str) -> Any:
    if fetch == "all":
        return cur.fetchall()
    if fetch == "one":
        return cur.fetchone()
    if fetch == "rowcount":
        return cur.rowcount
    return None


async def _aresult(cur: Any, fetch: str) -> Any:
    if fetch == "all":
        return await cur.fetchall()
    if fetch == "one":
        return await cur.fetchone()
    if fetch == "rowcount":
        return cur.rowcount
    return None


@dataclass(slots=True)
class _Progress:
    """What an operation has done so far, which decides what a lost connection means.

    A transaction that was not committed is not in the database, whatever its
    statements were, so a connection lost on the first statement of a transaction
    costs nothing: that statement runs again, once, on a fresh connection (after the
    embedded server we own is restarted, see :mod:`.connection`). Lost later in a
    transaction, the operation stops with nothing of that transaction written; lost
    during a commit, or after an earlier commit of the same operation, the writes
    may or may not be in, and we say so rather than repeat them.
    """

    pooled: bool  # a pool can hand us a fresh connection; a passed-in one can't be replaced
    in_tx: bool = False  # a statement of the open transaction has been answered
    committed: bool = False  # an earlier transaction of this operation was committed
    retried: bool = False

    def retry(self) -> bool:
        if self.pooled and not self.in_tx and not self.retried:
            self.retried = True
            return True
        return False

    def lost(self, exc: BaseException, *, committing: bool = False) -> DatabaseError:
        return lost(exc, maybe_applied=committing or self.committed, passed_in=not self.pooled)


def _translated(exc: BaseException, progress: _Progress) -> BaseException:
    """What the caller sees of an error that ended the operation: ours, never psycopg's."""
    if isinstance(exc, psycopg.Error):
        if connection_lost(exc):
            return progress.lost(exc)
        return database_error(exc, committed=progress.committed)
    return exc


def run(op: Op[T], conn: Conn, embeddings: Any) -> T:
    """Drive ``op`` to completion with blocking I/O.

    A failed request is thrown into the operation at its ``yield``, so an
    operation can turn a database error into one of ours; whatever escapes
    the operation rolls the open transaction back. A lost connection or a
    server that is down is not thrown in (there is nothing an operation could
    do about it): it ends the operation as a
    :class:`~agent_memory.errors.DatabaseUnavailableError` (see :class:`_Progress`),
    and any other psycopg error that escapes becomes a
    :class:`~agent_memory.errors.DatabaseError`.
    """
    progress = _Progress(pooled=isinstance(conn, ConnectionPool))
    with ExitStack() as stack:
        held = stack.enter_context(ExitStack())  # the connection; given back before an LLM call
        connection = None
        tx: ExitStack | None = None
        answer: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    request = op.throw(error) if error is not None else op.send(answer)
                except StopIteration as stop:
                    if tx is not None:
                        tx, closing = None, tx
                        _commit(closing, connection, progress)
                    return stop.value
                answer, error = None, None
                try:
                    if isinstance(request, Llm):
                        if tx is not None:
                            raise RuntimeError("an Llm request must not run inside a transaction; yield Commit() first")
                        if connection is not None:
                            connection = None
                            held.close()
                        answer = _check_output(request, _structured(request).invoke(list(request.messages)))
                    elif isinstance(request, Embed):
                        texts = list(request.texts)
                        try:
                            if request.query and len(texts) == 1:
                                answer = [embeddings.embed_query(texts[0])]
                            else:
                                answer = embeddings.embed_documents(texts)
                        except AgentMemoryError:
                            raise
                        except Exception as exc:
                            raise embedding_failed(embeddings, exc) from exc
                    elif isinstance(request, Shared):
                        answer = _shared(conn, request)
                    elif isinstance(request, Commit):
                        if tx is not None:
                            tx, closing = None, tx
                            _commit(closing, connection, progress)
                    else:
                        while True:
                            try:
                                if connection is None:
                                    connection = held.enter_context(get_connection(conn))
                                if tx is None:
                                    tx = ExitStack()
                                    tx.enter_context(connection.transaction())
                                if isinstance(request, Copy):
                                    with connection.cursor(row_factory=dict_row) as cur:
                                        if request.types:
                                            info = _VECTOR_TYPES.get(connection)
                                            if info is None:
                                                info = _VECTOR_TYPES[connection] = TypeInfo.fetch(connection, "vector")
                                            register_vector_info(cur, info)
                                        with cur.copy(request.statement) as copy:
                                            if request.types:
                                                copy.set_types(request.types)
                                            for row in request.rows:
                                                copy.write_row(row)
                                        answer = len(request.rows)
                                else:
                                    query, params, raw = numbered(request.query, request.params, connection)
                                    with (psycopg.RawCursor(connection, row_factory=dict_row) if raw
                                          else connection.cursor(row_factory=dict_row)) as cur:
                                        cur.execute(query, params)
                                        answer = _result(cur, request.fetch)
                                progress.in_tx = True
                                break
                            except psycopg.Error as exc:
                                if not connection_lost(exc, connection):
                                    raise
                                connection, tx = None, None
                                held.close()  # the pool discards the dead connection
                                flush(conn)
                                if not progress.retry():
                                    raise progress.lost(exc) from exc
                except DatabaseError:
                    raise  # down, busy or lost: not something the operation can handle
                except Exception as exc:
                    error = exc
        except BaseException as exc:
            if tx is not None:
                with suppress(psycopg.Error):  # a dead connection can't roll back; the server did
                    tx.__exit__(type(exc), exc, exc.__traceback__)
            op.close()
            translated = _translated(exc, progress)
            if translated is exc:
                raise
            raise translated from exc


def _commit(tx: ExitStack, connection: Any, progress: _Progress) -> None:
    try:
        tx.close()
    except psycopg.Error as exc:
        if connection_lost(exc, connection):
            raise progress.lost(exc, committing=True) from exc
        raise
    progress.committed, progress.in_tx = True, False


async def _acommit(tx: AsyncExitStack, connection: Any, progress: _Progress) -> None:
    try:
        await tx.aclose()
    except psycopg.Error as exc:
        if connection_lost(exc, connection):
            raise progress.lost(exc, committing=True) from exc
        raise
    progress.committed, progress.in_tx = True, False


async def arun(op: Op[T], conn: AsyncConn, embeddings: Any) -> T:
    """Drive ``op`` to completion with asyncio I/O (same protocol as :func:`run`)."""
    progress = _Progress(pooled=isinstance(conn, AsyncConnectionPool))
    async with AsyncExitStack() as stack:
        held = await stack.enter_async_context(AsyncExitStack())
        connection = None
        tx: AsyncExitStack | None = None
        answer: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    request = op.throw(error) if error is not None else op.send(answer)
                except StopIteration as stop:
                    if tx is not None:
                        tx, closing = None, tx
                        await _acommit(closing, connection, progress)
                    return stop.value
                answer, error = None, None
                try:
                    if isinstance(request, Llm):
                        if tx is not None:
                            raise RuntimeError("an Llm request must not run inside a transaction; yield Commit() first")
                        if connection is not None:
                            connection = None
                            await held.aclose()
                        answer = _check_output(request, await _structured(request).ainvoke(list(request.messages)))
                    elif isinstance(request, Embed):
                        texts = list(request.texts)
                        try:
                            if request.query and len(texts) == 1:
                                answer = [await embeddings.aembed_query(texts[0])]
                            else:
                                answer = await embeddings.aembed_documents(texts)
                        except AgentMemoryError:
                            raise
                        except Exception as exc:
                            raise embedding_failed(embeddings, exc) from exc
                    elif isinstance(request, Shared):
                        answer = _shared(conn, request)
                    elif isinstance(request, Commit):
                        if tx is not None:
                            tx, closing = None, tx
                            await _acommit(closing, connection, progress)
                    else:
                        while True:
                            try:
                                if connection is None:
                                    connection = await held.enter_async_context(aget_connection(conn))
                                if tx is None:
                                    tx = AsyncExitStack()
                                    await tx.enter_async_context(connection.transaction())
                                if isinstance(request, Copy):
                                    async with connection.cursor(row_factory=dict_row) as cur:
                                        if request.types:
                                            info = _VECTOR_TYPES.get(connection)
                                            if info is None:
                                                info = _VECTOR_TYPES[connection] = await TypeInfo.fetch(connection,
                                                                                                        "vector")
                                            register_vector_info(cur, info)
                                        async with cur.copy(request.statement) as copy:
                                            if request.types:
                                                copy.set_types(request.types)
                                            for row in request.rows:
                                                await copy.write_row(row)
                                        answer = len(request.rows)
                                else:
                                    query, params, raw = numbered(request.query, request.params, connection)
                                    async with (psycopg.AsyncRawCursor(connection, row_factory=dict_row) if raw
                                                else connection.cursor(row_factory=dict_row)) as cur:
                                        await cur.execute(query, params)
                                        answer = await _aresult(cur, request.fetch)
                                progress.in_tx = True
                                break
                            except psycopg.Error as exc:
                                if not connection_lost(exc, connection):
                                    raise
                                connection, tx = None, None
                                await held.aclose()
                                await aflush(conn)
                                if not progress.retry():
                                    raise progress.lost(exc) from exc
                except DatabaseError:
                    raise
                except Exception as exc:
                    error = exc
        except BaseException as exc:
            if tx is not None:
                with suppress(psycopg.Error):
                    await tx.__aexit__(type(exc), exc, exc.__traceback__)
            op.close()
            translated = _translated(exc, progress)
            if translated is exc:
                raise
            raise translated from exc
