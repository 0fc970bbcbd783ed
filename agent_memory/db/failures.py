"""What a psycopg error means for the caller, as one of our errors.

The drivers in :mod:`agent_memory.db.requests` are the only code that talks to
the server, and every psycopg error that leaves an operation passes through
here, so a caller never sees ``psycopg.errors.AdminShutdown`` or a pool's
``PoolTimeout``: they see a :class:`~agent_memory.errors.DatabaseError` that says
what failed, whether anything was written, and what to do.

Everything here is pure (no I/O), so each verdict is tested without a server.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import PoolClosed

from ..errors import DatabaseBusyError, DatabaseError, DatabaseUnavailableError

__all__ = [
    "busy",
    "connection_lost",
    "database_error",
    "first_line",
    "lost",
    "missing_extension",
    "refused_by_server",
    "server_answer",
    "server_down",
]

# SQLSTATE classes that mean "this session is gone": 08 connection exception,
# 57P01-57P03 admin/crash shutdown and "cannot connect now" (starting or stopping).
_GONE_STATES = ("57P01", "57P02", "57P03")


def connection_lost(exc: BaseException, connection: Any = None) -> bool:
    """Whether ``exc`` means the session died (server down, killed, network cut), as opposed
    to the server refusing one statement; a lost session can't be used again."""
    if not isinstance(exc, psycopg.OperationalError) or isinstance(exc, PoolClosed):
        return False
    state = getattr(exc, "sqlstate", None) or ""
    if state.startswith("08") or state in _GONE_STATES:
        return True
    if connection is not None:
        return bool(connection.closed)
    return not state  # no answer from a server at all


#: how libpq words an error the server itself sent while we connected; psycopg gives a failed
#: connection attempt no sqlstate, so this is the only sign that a server answered at all
_SERVER_SAID = re.compile(r"\b(?:FATAL|ERROR|PANIC):  ")
#: the server's words for 57P03 "cannot connect now" (starting, stopping, recovering)
_NOT_NOW = ("database system is starting up", "database system is shutting down",
            "database system is in recovery mode", "accepting connections")
#: the server's words for 53300 "too many connections" (max_connections, a role's or a database's limit)
_NO_ROOM = ("too many connections", "too many clients", "connection slots are reserved")


def refused_by_server(exc: BaseException) -> bool:
    """A failed connection attempt that a running server answered (wrong password, no such
    database, too many clients): the server is up, only this attempt was refused."""
    state = getattr(exc, "sqlstate", None) or ""
    if state:
        return not state.startswith("08") and state not in _GONE_STATES
    text = str(exc)
    return bool(_SERVER_SAID.search(text)) and not any(words in text for words in _NOT_NOW)


#: a connection refused for lack of room (max_connections, a role's or database's CONNECTION LIMIT)
_TOO_MANY = "53300"
#: what libpq says when a listening socket's accept queue is full (EAGAIN): the server is swamped, not gone
_SWAMPED = "resource temporarily unavailable"


def server_answer(exc: BaseException | None) -> str:
    """What one direct connection attempt (``exc``: how it failed, None: it worked) says about
    the server: ``"up"`` (it answered, perhaps with "too many clients", or its socket is there
    but its queue is full), ``"refused"`` (it answered and refused us: password, database) or
    ``"down"`` (nothing answered). A busy server is never "down": that verdict restarts the
    embedded server and fails calls that would have succeeded by waiting."""
    if exc is None:
        return "up"
    text = str(exc)
    if getattr(exc, "sqlstate", None) == _TOO_MANY or _SWAMPED in text.lower():
        return "up"
    if refused_by_server(exc) and any(words in text for words in _NO_ROOM):
        return "up"
    return "refused" if refused_by_server(exc) else "down"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def server_down(where: str, exc: BaseException | None, *, restarted: bool = False) -> DatabaseUnavailableError:
    """The server at ``where`` does not accept connections (``exc``: what the attempt said)."""
    why = f" ({first_line(exc)})" if exc is not None else ""
    if restarted:
        todo = "it was restarted but no connection came back in time; try again in a moment"
    else:
        todo = "start it (or fix DATABASE_URL) and try again; nothing was written"
    return DatabaseUnavailableError(f"postgresql at {where} is down: it did not accept a connection{why}; {todo}")


def busy(where: str, waited: float, pool_max: int | None) -> DatabaseBusyError:
    """The server is up but every pooled connection stayed in use for ``waited`` seconds."""
    size = f"all {pool_max} pooled connections" if pool_max else "every pooled connection"
    return DatabaseBusyError(
        f"postgresql at {where} is up but {size} stayed in use for {waited:.0f}s; nothing was written; "
        "retry later, look for long transactions, or raise MEMORY_POOL_MAX_SIZE"
    )


def lost(exc: BaseException, *, maybe_applied: bool, passed_in: bool = False) -> DatabaseUnavailableError:
    """The session died during an operation. ``maybe_applied``: a commit was in flight or had
    already happened, so the writes may or may not be in the database."""
    if maybe_applied:
        outcome = (
            "the operation may or may not have been applied (the connection dropped during or after "
            "a commit); check before repeating it"
        )
    else:
        outcome = "nothing was written; repeat the call once the server is back"
    where = "; the connection you passed is closed now, so open a new one" if passed_in else ""
    return DatabaseUnavailableError(
        f"lost the connection to postgresql during the operation ({first_line(exc)}); {outcome}{where}",
        maybe_applied=maybe_applied,
    )


def database_error(exc: psycopg.Error, *, committed: bool = False) -> DatabaseError:
    """Any other psycopg error that escaped an operation. Its transaction was rolled back;
    ``committed``: an earlier transaction of the same operation had already been committed."""
    written = "an earlier part of the operation was already committed" if committed else "nothing was written"
    state = getattr(exc, "sqlstate", None)
    code = f" [{state}]" if state else ""
    said = f"{type(exc).__name__}{code}: {first_line(exc)}"
    if isinstance(exc, PoolClosed):
        return DatabaseError(f"the connection pool is closed ({said}); use a service whose pool is open")
    if isinstance(exc, (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)):
        todo = "another transaction got in the way; repeat the call"
    elif isinstance(exc, pg_errors.QueryCanceled):
        todo = "a statement was cancelled (statement_timeout or a cancel request); retry, or raise the timeout"
    elif isinstance(exc, pg_errors.InsufficientPrivilege):
        todo = "the database user lacks a privilege; grant it or connect as the schema's owner"
    elif isinstance(exc, (pg_errors.UndefinedTable, pg_errors.UndefinedColumn, pg_errors.UndefinedFunction)):
        todo = "the schema is missing or older than this library; create the service again to migrate it"
    elif isinstance(exc, (pg_errors.DiskFull, pg_errors.OutOfMemory, pg_errors.TooManyConnections)):
        todo = "the server is out of a resource; free it (disk, memory, connections) and retry"
    elif isinstance(exc, psycopg.IntegrityError):
        todo = "a database constraint refused the data; check the values passed"
    else:
        todo = "see the server log for the cause"
    return DatabaseError(f"postgresql failed the operation ({said}); it was rolled back and {written}; {todo}")


#: how PostgreSQL says an extension is not installed on the server: 0A000 "extension "x" is not
#: available" (PostgreSQL 15+), 58P01 "could not open extension control file" (before)
_NO_EXTENSION_STATES = ("0A000", "58P01")
_EXTENSION_NAMED = re.compile(r'extension (?:"([^"]+)"|control file "[^"]*/([^"/]+)\.control")')


def missing_extension(exc: BaseException) -> str:
    """What to do when ``CREATE EXTENSION`` failed because the server lacks the extension's files
    (PostgreSQL's own hint only says it "must first be installed"): for pgvector, how to install
    it and that the embedded server has it. Empty for any other failure."""
    if getattr(exc, "sqlstate", None) not in _NO_EXTENSION_STATES:
        return ""
    found = _EXTENSION_NAMED.search(str(exc))
    if found is None:
        return ""
    name = found.group(1) or found.group(2)
    if name != "vector":
        return (f"; the PostgreSQL server does not have the {name} extension installed: install it on the "
                "server, or unset DATABASE_URL to use the embedded PostgreSQL")
    return ("; the PostgreSQL server at DATABASE_URL does not have pgvector installed: install it on the "
            "server (Debian/Ubuntu: apt install postgresql-<major version>-pgvector; macOS: brew install "
            "pgvector; others: https://github.com/pgvector/pgvector#installation), or use an image that has it "
            "(pgvector/pgvector:pg17), then start again; or unset DATABASE_URL to use the embedded PostgreSQL, "
            "which includes pgvector")
