"""The I/O requests an operation can make, and the two drivers that serve them.

Every service operation is a generator (see :mod:`agent_memory.ops`) that
yields these small requests and receives their answers. The sync and async
drivers below are the only code that touches a connection or an embedder, so
the logic of each operation exists once and runs the same in both worlds. The
drivers are one source too: the asyncio one is written by hand, the blocking one
is generated from it (``python tools/codegen.py``).

Transactions: the first :class:`Sql` opens a connection and a transaction;
:class:`Commit` ends it (the next ``Sql`` opens another); the end of the
operation commits, an exception rolls back. Embedding before the first query
therefore never holds a connection. An :class:`Llm` request (seconds, not
milliseconds) must come outside a transaction, and the connection goes back
to the pool while the model thinks. An :class:`Autocommit` statement runs
outside any transaction (none may be open) and is committed on its own.

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

__all__ = ["Autocommit", "Commit", "Copy", "Embed", "Llm", "Op", "Shared", "Sql", "arun", "run"]

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
class Autocommit:
    """Run one statement outside any transaction, committed on its own: what PostgreSQL refuses
    inside one (``CREATE INDEX CONCURRENTLY``). No transaction may be open (yield ``Commit()``
    first); answers as :class:`Sql` does. A connection lost during it ends the operation saying
    it may have been applied: it is not run again."""

    query: Any
    params: Sequence[Any] | dict[str, Any] | None = None
    fetch: Literal["all", "one", "rowcount", "none"] = "none"


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


Request = Sql | Copy | Embed | Commit | Autocommit | Llm | Shared
Op = Generator[Request, Any, T]


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


# --- the asyncio driver: the one source of both drivers ------------------------------------------
# ``tools/codegen.py`` writes the blocking driver below from this (await and async dropped, the
# asyncio names replaced by the blocking ones, as psycopg_pool's pool.py is made from
# pool_async.py): change this part, then run ``python tools/codegen.py``.


async def arun(op: Op[T], conn: AsyncConn, embeddings: Any) -> T:
    """Drive ``op`` to completion with asyncio I/O.

    A failed request is thrown into the operation at its ``yield``, so an
    operation can turn a database error into one of ours; whatever escapes
    the operation rolls the open transaction back. A lost connection or a
    server that is down is not thrown in (there is nothing an operation could
    do about it): it ends the operation as a
    :class:`~agent_memory.errors.DatabaseUnavailableError` (see :class:`_Progress`),
    and any other psycopg error that escapes becomes a
    :class:`~agent_memory.errors.DatabaseError`.
    """
    progress = _Progress(pooled=isinstance(conn, AsyncConnectionPool))
    async with AsyncExitStack() as held:  # the connection; given back before an LLM call
        link = _AsyncLink(conn, held, progress)
        answer: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    request = op.throw(error) if error is not None else op.send(answer)
                except StopIteration as stop:
                    await link.commit()
                    return stop.value
                answer, error = None, None
                try:
                    answer = await _aserve(request, link, embeddings)
                except DatabaseError:
                    raise  # down, busy or lost: not something the operation can handle
                except Exception as exc:
                    error = exc
        except BaseException as exc:
            await link.abort(exc)
            op.close()
            translated = _translated(exc, progress)
            if translated is exc:
                raise
            raise translated from exc


async def _aserve(request: Request, link: _AsyncLink, embeddings: Any) -> Any:
    """Answer one request (the most frequent asked first)."""
    if isinstance(request, Sql):
        return await link.execute(request)
    if isinstance(request, Commit):
        return await link.commit()
    if isinstance(request, Embed):
        return await _aembed(request, embeddings)
    if isinstance(request, Copy):
        return await link.execute(request)
    if isinstance(request, Shared):
        return _shared(link.conn, request)
    if isinstance(request, Llm):
        if link.tx is not None:
            raise RuntimeError("an Llm request must not run inside a transaction; yield Commit() first")
        await link.release()  # no connection held while the model thinks
        return _check_output(request, await _structured(request).ainvoke(list(request.messages)))
    if isinstance(request, Autocommit):
        return await link.autocommit(request)
    raise TypeError(f"an operation yielded {request!r}, which is not a request (see agent_memory.db.requests)")


class _AsyncLink:
    """The connection an operation holds (taken on its first statement, given back before a
    model call and at its end) and the transaction open on it."""

    __slots__ = ("conn", "connection", "held", "progress", "tx")

    def __init__(self, conn: AsyncConn, held: AsyncExitStack, progress: _Progress) -> None:
        self.conn, self.held, self.progress = conn, held, progress
        self.connection: Any = None
        self.tx: AsyncExitStack | None = None

    async def execute(self, request: Sql | Copy) -> Any:
        """Run a statement or a COPY in the open transaction (one begun if none is). A connection
        lost on a transaction's first statement is replaced, once, and the statement run again."""
        while True:
            try:
                if self.connection is None:
                    self.connection = await self.held.enter_async_context(aget_connection(self.conn))
                if self.tx is None:
                    tx = AsyncExitStack()
                    await tx.enter_async_context(self.connection.transaction())
                    self.tx = tx
                if isinstance(request, Copy):
                    answer = await _acopy(self.connection, request)
                else:
                    answer = await _astatement(self.connection, request)
                self.progress.in_tx = True
                return answer
            except psycopg.Error as exc:
                if not connection_lost(exc, self.connection):
                    raise
                await self.drop()
                if not self.progress.retry():
                    raise self.progress.lost(exc) from exc

    async def autocommit(self, request: Autocommit) -> Any:
        """Run a statement outside any transaction (the connection in autocommit meanwhile)."""
        if self.tx is not None:
            raise RuntimeError("an Autocommit request must not run inside a transaction; yield Commit() first")
        if self.connection is None:
            self.connection = await self.held.enter_async_context(aget_connection(self.conn))
        connection = self.connection
        switched = not connection.autocommit  # a connection of the caller's may not be
        try:
            if switched:
                await connection.set_autocommit(True)
            answer = await _astatement(connection, request)
        except psycopg.Error as exc:
            if not connection_lost(exc, connection):
                raise
            await self.drop()
            raise self.progress.lost(exc, committing=True) from exc
        finally:
            if switched and not connection.closed:
                await connection.set_autocommit(False)
        self.progress.committed = True
        return answer

    async def commit(self) -> None:
        """End the open transaction, if any; a connection lost meanwhile may have committed it."""
        if self.tx is None:
            return
        tx, self.tx = self.tx, None
        try:
            await tx.aclose()
        except psycopg.Error as exc:
            if connection_lost(exc, self.connection):
                raise self.progress.lost(exc, committing=True) from exc
            raise
        self.progress.committed, self.progress.in_tx = True, False

    async def abort(self, exc: BaseException) -> None:
        """Roll the open transaction back, as ``exc`` ends the operation."""
        if self.tx is not None:
            tx, self.tx = self.tx, None
            with suppress(psycopg.Error):  # a dead connection can't roll back; the server did
                await tx.__aexit__(type(exc), exc, exc.__traceback__)

    async def release(self) -> None:
        """Give the connection back (no transaction is open)."""
        if self.connection is not None:
            self.connection = None
            await self.held.aclose()

    async def drop(self) -> None:
        """Forget a connection that died: the pool discards it and checks its others."""
        self.connection, self.tx = None, None
        await self.held.aclose()
        await aflush(self.conn)


async def _astatement(connection: Any, request: Sql | Autocommit) -> Any:
    query, params, raw = numbered(request.query, request.params, connection)
    cursor = (psycopg.AsyncRawCursor(connection, row_factory=dict_row) if raw
              else connection.cursor(row_factory=dict_row))
    async with cursor as cur:
        await cur.execute(query, params)
        return await _aresult(cur, request.fetch)


async def _aresult(cur: Any, fetch: str) -> Any:
    if fetch == "all":
        return await cur.fetchall()
    if fetch == "one":
        return await cur.fetchone()
    if fetch == "rowcount":
        return cur.rowcount
    return None


async def _acopy(connection: Any, request: Copy) -> int:
    async with connection.cursor(row_factory=dict_row) as cur:
        if request.types:
            info = _VECTOR_TYPES.get(connection)
            if info is None:
                info = _VECTOR_TYPES[connection] = await TypeInfo.fetch(connection, "vector")
            register_vector_info(cur, info)
        async with cur.copy(request.statement) as copy:
            if request.types:
                copy.set_types(request.types)
            for row in request.rows:
                await copy.write_row(row)
    return len(request.rows)


async def _aembed(request: Embed, embeddings: Any) -> Any:
    texts = list(request.texts)
    try:
        if request.query and len(texts) == 1:
            return [await embeddings.aembed_query(texts[0])]
        return await embeddings.aembed_documents(texts)
    except AgentMemoryError:
        raise
    except Exception as exc:
        raise embedding_failed(embeddings, exc) from exc


# --- end of the asyncio driver ---------------------------------------------------------------------


# --- the blocking driver: GENERATED by tools/codegen.py from the asyncio driver above: do not edit ---


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
    with ExitStack() as held:  # the connection; given back before an LLM call
        link = _Link(conn, held, progress)
        answer: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    request = op.throw(error) if error is not None else op.send(answer)
                except StopIteration as stop:
                    link.commit()
                    return stop.value
                answer, error = None, None
                try:
                    answer = _serve(request, link, embeddings)
                except DatabaseError:
                    raise  # down, busy or lost: not something the operation can handle
                except Exception as exc:
                    error = exc
        except BaseException as exc:
            link.abort(exc)
            op.close()
            translated = _translated(exc, progress)
            if translated is exc:
                raise
            raise translated from exc


def _serve(request: Request, link: _Link, embeddings: Any) -> Any:
    """Answer one request (the most frequent asked first)."""
    if isinstance(request, Sql):
        return link.execute(request)
    if isinstance(request, Commit):
        return link.commit()
    if isinstance(request, Embed):
        return _embed(request, embeddings)
    if isinstance(request, Copy):
        return link.execute(request)
    if isinstance(request, Shared):
        return _shared(link.conn, request)
    if isinstance(request, Llm):
        if link.tx is not None:
            raise RuntimeError("an Llm request must not run inside a transaction; yield Commit() first")
        link.release()  # no connection held while the model thinks
        return _check_output(request, _structured(request).invoke(list(request.messages)))
    if isinstance(request, Autocommit):
        return link.autocommit(request)
    raise TypeError(f"an operation yielded {request!r}, which is not a request (see agent_memory.db.requests)")


class _Link:
    """The connection an operation holds (taken on its first statement, given back before a
    model call and at its end) and the transaction open on it."""

    __slots__ = ("conn", "connection", "held", "progress", "tx")

    def __init__(self, conn: Conn, held: ExitStack, progress: _Progress) -> None:
        self.conn, self.held, self.progress = conn, held, progress
        self.connection: Any = None
        self.tx: ExitStack | None = None

    def execute(self, request: Sql | Copy) -> Any:
        """Run a statement or a COPY in the open transaction (one begun if none is). A connection
        lost on a transaction's first statement is replaced, once, and the statement run again."""
        while True:
            try:
                if self.connection is None:
                    self.connection = self.held.enter_context(get_connection(self.conn))
                if self.tx is None:
                    tx = ExitStack()
                    tx.enter_context(self.connection.transaction())
                    self.tx = tx
                if isinstance(request, Copy):
                    answer = _copy(self.connection, request)
                else:
                    answer = _statement(self.connection, request)
                self.progress.in_tx = True
                return answer
            except psycopg.Error as exc:
                if not connection_lost(exc, self.connection):
                    raise
                self.drop()
                if not self.progress.retry():
                    raise self.progress.lost(exc) from exc

    def autocommit(self, request: Autocommit) -> Any:
        """Run a statement outside any transaction (the connection in autocommit meanwhile)."""
        if self.tx is not None:
            raise RuntimeError("an Autocommit request must not run inside a transaction; yield Commit() first")
        if self.connection is None:
            self.connection = self.held.enter_context(get_connection(self.conn))
        connection = self.connection
        switched = not connection.autocommit  # a connection of the caller's may not be
        try:
            if switched:
                connection.set_autocommit(True)
            answer = _statement(connection, request)
        except psycopg.Error as exc:
            if not connection_lost(exc, connection):
                raise
            self.drop()
            raise self.progress.lost(exc, committing=True) from exc
        finally:
            if switched and not connection.closed:
                connection.set_autocommit(False)
        self.progress.committed = True
        return answer

    def commit(self) -> None:
        """End the open transaction, if any; a connection lost meanwhile may have committed it."""
        if self.tx is None:
            return
        tx, self.tx = self.tx, None
        try:
            tx.close()
        except psycopg.Error as exc:
            if connection_lost(exc, self.connection):
                raise self.progress.lost(exc, committing=True) from exc
            raise
        self.progress.committed, self.progress.in_tx = True, False

    def abort(self, exc: BaseException) -> None:
        """Roll the open transaction back, as ``exc`` ends the operation."""
        if self.tx is not None:
            tx, self.tx = self.tx, None
            with suppress(psycopg.Error):  # a dead connection can't roll back; the server did
                tx.__exit__(type(exc), exc, exc.__traceback__)

    def release(self) -> None:
        """Give the connection back (no transaction is open)."""
        if self.connection is not None:
            self.connection = None
            self.held.close()

    def drop(self) -> None:
        """Forget a connection that died: the pool discards it and checks its others."""
        self.connection, self.tx = None, None
        self.held.close()
        flush(self.conn)


def _statement(connection: Any, request: Sql | Autocommit) -> Any:
    query, params, raw = numbered(request.query, request.params, connection)
    cursor = (psycopg.RawCursor(connection, row_factory=dict_row) if raw
              else connection.cursor(row_factory=dict_row))
    with cursor as cur:
        cur.execute(query, params)
        return _result(cur, request.fetch)


def _result(cur: Any, fetch: str) -> Any:
    if fetch == "all":
        return cur.fetchall()
    if fetch == "one":
        return cur.fetchone()
    if fetch == "rowcount":
        return cur.rowcount
    return None


def _copy(connection: Any, request: Copy) -> int:
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
    return len(request.rows)


def _embed(request: Embed, embeddings: Any) -> Any:
    texts = list(request.texts)
    try:
        if request.query and len(texts) == 1:
            return [embeddings.embed_query(texts[0])]
        return embeddings.embed_documents(texts)
    except AgentMemoryError:
        raise
    except Exception as exc:
        raise embedding_failed(embeddings, exc) from exc


# --- end of the blocking driver ---------------------------------------------------------------
