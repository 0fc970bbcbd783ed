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
    "database_exists",
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
