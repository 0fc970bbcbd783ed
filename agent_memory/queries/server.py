"""Statements about the server and the session rather than about memory: liveness, databases,
session-level locks and ending a transaction."""

from __future__ import annotations

from psycopg import sql

from .types import Statement

__all__ = [
    "advisory_lock",
    "advisory_unlock",
    "advisory_xact_lock",
    "create_database",
    "create_extension",
    "create_schema",
    "database_exists",
    "extension_schema",
    "ping",
    "rollback",
]


def ping() -> Statement:
    """The cheapest statement: the server answers."""
    return "SELECT 1", None


def rollback() -> Statement:
    """Undo the open transaction."""
    return "ROLLBACK", None


def advisory_lock(key: int) -> Statement:
    """Take the session-level advisory lock ``key`` (held until :func:`advisory_unlock`)."""
    return "SELECT pg_advisory_lock(%s)", (key,)


def advisory_unlock(key: int) -> Statement:
    return "SELECT pg_advisory_unlock(%s)", (key,)


def advisory_xact_lock(key: int) -> Statement:
    """Take the advisory lock ``key`` until the transaction ends."""
    return "SELECT pg_advisory_xact_lock(%s)", (key,)


def database_exists(name: str) -> Statement:
    """A row if the database ``name`` exists."""
    return "SELECT 1 FROM pg_database WHERE datname = %s", (name,)


def create_database(name: str, template: str | None = None) -> Statement:
    """Create the database ``name`` (as a copy of ``template``, when given)."""
    if template is None:
        return sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)), None
    return sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template)), None


def create_schema(name: str) -> Statement:
    """Make the schema our tables live in (``MEMORY_DB_SCHEMA``), if it is not there yet."""
    return sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(name)), None


def extension_schema(name: str) -> Statement:
    """The schema an installed extension's objects live in (one row), or no row."""
    return ("SELECT n.nspname AS schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = %s", (name,))


def create_extension(name: str, schema: str) -> Statement:
    """Install an extension in ``schema`` unless it is installed (anywhere) already."""
    return sql.SQL("CREATE EXTENSION IF NOT EXISTS {} WITH SCHEMA {}").format(
        sql.Identifier(name), sql.Identifier(schema)), None
