"""The two shapes a builder answers: a statement with its parameters, and a filter to embed in one."""

from __future__ import annotations

from typing import Any

from psycopg import sql

__all__ = ["Query", "Statement"]

#: a statement (or a ``WHERE`` condition) built with :mod:`psycopg.sql`, with its named parameters
Query = tuple[sql.Composable, dict[str, Any]]

#: any statement and its parameters (named, positional or None), ready for ``Sql(*statement)``
#: or ``connection.execute(*statement)``
Statement = tuple[str | sql.SQL | sql.Composed, Any]
