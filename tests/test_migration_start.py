"""A start on an up-to-date schema is cheap: it reads the applied migrations' names once, in one
transaction, counted on the wire (libpq's trace of a real connection)."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field

import psycopg
from psycopg.pq import Trace

from agent_memory import AsyncMemoryService, MemoryService
from agent_memory.db.migrations import MIGRATION_LOCK_KEY, MIGRATIONS, migrate
from agent_memory.db.requests import run


@dataclass
class Wire:
    """What a connection sent: statements (simple queries and executed portals, BEGIN and COMMIT
    aside) and transactions (BEGINs)."""

    statements: list[str] = field(default_factory=list)
    transactions: int = 0


@contextmanager
def traced(dsn: str) -> Iterator[tuple[psycopg.Connection, Wire]]:
    """An autocommit connection whose frontend messages are counted into a :class:`Wire`."""
    wire = Wire()
    with tempfile.TemporaryDirectory() as where, psycopg.connect(dsn, autocommit=True) as conn:
        path = os.path.join(where, "trace")
        with open(path, "w") as out:
            conn.pgconn.trace(out.fileno())
            conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
            try:
                yield conn, wire
            finally:
                conn.pgconn.untrace()
        _count(path, wire)


@asynccontextmanager
async def atraced(dsn: str) -> AsyncIterator[tuple[psycopg.AsyncConnection, Wire]]:
    """:func:`traced` for asyncio."""
    wire = Wire()
    with tempfile.TemporaryDirectory() as where:
        path = os.path.join(where, "trace")
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            with open(path, "w") as out:
                conn.pgconn.trace(out.fileno())
                conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
                try:
                    yield conn, wire
                finally:
                    conn.pgconn.untrace()
        _count(path, wire)


def _count(path: str, wire: Wire) -> None:
    """Count the frontend messages of a libpq trace into ``wire``."""
    parsed: dict[str, str] = {}  # statement name -> text
    bound = ""
    with open(path, encoding="utf-8", errors="replace") as traced_text:
        messages = _MESSAGE.split(traced_text.read())  # a statement's newlines are written as they are
    for message in messages:
        parts = message.rstrip("\n").split("\t", 3)
        if len(parts) < 4 or parts[0] != "F":
            continue
        kind, fields = parts[2], _QUOTED.findall(parts[3])
        if kind == "Query":
            text = fields[0].strip()
            if text.upper() == "BEGIN":
                wire.transactions += 1
            elif text.upper() not in ("COMMIT", "ROLLBACK"):
                wire.statements.append(text)
        elif kind == "Parse":
            parsed[fields[0]] = fields[1]
        elif kind == "Bind":
            bound = parsed.get(fields[1], "?")
        elif kind == "Execute":
            wire.statements.append(bound)


#: where a traced message begins: who sent it (Frontend, Backend) at the start of a line
_MESSAGE = re.compile(r"^(?=[FB]\t)", re.MULTILINE)
#: the quoted fields of a traced message (a quote inside one is doubled)
_QUOTED = re.compile(r'"((?:[^"]|"")*)"')


def test_an_up_to_date_start_reads_the_applied_names_once(dsn, memory, embeddings):
    with traced(dsn) as (conn, wire):
        with MemoryService(conn, embeddings=embeddings) as again:
            assert again.applied_migrations == []
    # before: a lock, a check and a commit per migration (46 statements, 23 transactions for 21)
    assert wire.transactions == 1, wire
    assert len(wire.statements) == 3, wire.statements
    assert sum("agent_memory_migrations" in s for s in wire.statements) == 2  # where it is, then the names
    assert not any("lock" in s for s in wire.statements)


async def test_an_up_to_date_asyncio_start_too(dsn, memory, embeddings):
    async with atraced(dsn) as (conn, wire):
        async with AsyncMemoryService(conn, embeddings=embeddings) as again:
            assert again.applied_migrations == []
    assert wire.transactions == 1 and len(wire.statements) == 3, wire


def test_the_checkpointer_start_is_as_cheap(dsn, memory):
    with traced(dsn) as (conn, wire):
        assert run(migrate(lambda: 384, None, schema="public"), conn, None) == []
    assert wire.transactions == 1 and len(wire.statements) == 2, wire


def test_an_up_to_date_start_waits_for_no_lock(dsn, memory, embeddings):
    """Another process holding the migrations' lock (migrating, re-embedding) does not hold up a
    process that has nothing to apply: it would fail here on the lock timeout."""
    with psycopg.connect(dsn) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        with psycopg.connect(dsn, autocommit=True, options="-c lock_timeout=2s") as conn:
            with MemoryService(conn, embeddings=embeddings) as again:
                assert again.applied_migrations == []
                assert again.for_user("lock-free-start").list() == []


def test_a_start_that_finds_one_missing_applies_only_that_one(fresh_dsn, embeddings):
    new = fresh_dsn()
    with psycopg.connect(new, autocommit=True) as conn:
        run(migrate(384, "test", MIGRATIONS[:-1]), conn, None)
    with traced(new) as (conn, wire):
        assert run(migrate(384, "test"), conn, None) == [MIGRATIONS[-1].name]
    # the first read, then under the lock: the check, the migration, its record; the embedder's check
    assert wire.transactions == 3, wire
    assert sum("advisory" in s for s in wire.statements) == 1
    assert not any(s.startswith("CREATE TABLE IF NOT EXISTS agent_memory_migrations") for s in wire.statements)
