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
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from psycopg.rows import dict_row

from ..errors import ModelOutputError
from .connection import AsyncConn, Conn, aget_connection, get_connection

__all__ = ["Commit", "Copy", "Embed", "Llm", "Op", "Sql", "arun", "run"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Sql:
    """Run one statement. ``fetch``: rows as dicts (``all``), the first row or None (``one``),
    the affected row count (``rowcount``) or nothing (``none``)."""

    query: Any
    params: Sequence[Any] | dict[str, Any] | None = None
    fetch: Literal["all", "one", "rowcount", "none"] = "all"


@dataclass(frozen=True, slots=True)
class Copy:
    """``COPY ... FROM STDIN`` the given rows; answers the number of rows written."""

    statement: Any
    rows: Sequence[Sequence[Any]] = field(default_factory=tuple)


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


def _structured(request: Llm) -> Any:
    return request.model.with_structured_output(request.schema)


def _check_output(request: Llm, output: Any) -> Any:
    if not isinstance(output, request.schema):
        raise ModelOutputError(
            f"the model returned no {request.schema.__name__} (got {type(output).__name__}); "
            "use a chat model that supports tool calling / structured output"
        )
    return output


Request = Sql | Copy | Embed | Commit | Llm
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


def run(op: Op[T], conn: Conn, embeddings: Any) -> T:
    """Drive ``op`` to completion with blocking I/O.

    A failed request is thrown into the operation at its ``yield``, so an
    operation can turn a database error into one of ours; whatever escapes
    the operation rolls the open transaction back.
    """
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
                        tx.close()
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
                        if request.query and len(texts) == 1:
                            answer = [embeddings.embed_query(texts[0])]
                        else:
                            answer = embeddings.embed_documents(texts)
                    elif isinstance(request, Commit):
                        if tx is not None:
                            tx, closing = None, tx
                            closing.close()
                    else:
                        if connection is None:
                            connection = held.enter_context(get_connection(conn))
                        if tx is None:
                            tx = ExitStack()
                            tx.enter_context(connection.transaction())
                        with connection.cursor(row_factory=dict_row) as cur:
                            if isinstance(request, Copy):
                                with cur.copy(request.statement) as copy:
                                    for row in request.rows:
                                        copy.write_row(row)
                                answer = len(request.rows)
                            else:
                                cur.execute(request.query, request.params)
                                answer = _result(cur, request.fetch)
                except Exception as exc:
                    error = exc
        except BaseException as exc:
            if tx is not None:
                tx.__exit__(type(exc), exc, exc.__traceback__)
            op.close()
            raise


async def arun(op: Op[T], conn: AsyncConn, embeddings: Any) -> T:
    """Drive ``op`` to completion with asyncio I/O (same protocol as :func:`run`)."""
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
                        await tx.aclose()
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
                        if request.query and len(texts) == 1:
                            answer = [await embeddings.aembed_query(texts[0])]
                        else:
                            answer = await embeddings.aembed_documents(texts)
                    elif isinstance(request, Commit):
                        if tx is not None:
                            tx, closing = None, tx
                            await closing.aclose()
                    else:
                        if connection is None:
                            connection = await held.enter_async_context(aget_connection(conn))
                        if tx is None:
                            tx = AsyncExitStack()
                            await tx.enter_async_context(connection.transaction())
                        async with connection.cursor(row_factory=dict_row) as cur:
                            if isinstance(request, Copy):
                                async with cur.copy(request.statement) as copy:
                                    for row in request.rows:
                                        await copy.write_row(row)
                                answer = len(request.rows)
                            else:
                                await cur.execute(request.query, request.params)
                                answer = await _aresult(cur, request.fetch)
                except Exception as exc:
                    error = exc
        except BaseException as exc:
            if tx is not None:
                await tx.__aexit__(type(exc), exc, exc.__traceback__)
            op.close()
            raise
