"""The schema our tables live in (``MEMORY_DB_SCHEMA``), given to every connection by its URL.

With the default, ``public``, nothing changes: a URL is used as given, and databases made
before the setting existed keep their tables where they are. Any other schema is made once
(under the migrations' lock, so processes starting together agree), and the URL every
component connects with gets ``options=-c search_path=<schema>,<pgvector's schema>``: each
connection of the pool, the checkpointer's, the probes that watch the server, so every
unqualified name in our SQL and in LangGraph's checkpointer SQL finds ours, and the tables,
indexes, functions, triggers and sequences the migrations make go there too, with the
migrations' own record. pgvector is one extension per database: it is installed in ``public``
when no schema of ours has it yet, and whichever schema holds it is searched second, so every
schema's ``vector`` columns share it.
"""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import MigrationError
from ..queries import advisory_xact_lock, create_extension, create_schema, extension_schema
from .connection import connect_timeout, unreachable
from .failures import database_error, missing_extension
from .migrations import MIGRATION_LOCK_KEY

__all__ = ["DEFAULT_SCHEMA", "in_schema", "with_search_path"]

DEFAULT_SCHEMA = "public"
#: where pgvector is installed when no schema has it yet (the server's usual first schema)
_EXTENSION_HOME = "public"


def with_search_path(dsn: str, schemas: list[str]) -> str:
    """``dsn`` whose connections search ``schemas`` first (kept after any ``options`` it had)."""
    options = str(conninfo_to_dict(dsn).get("options") or "")
    path = ",".join(dict.fromkeys(schemas))
    return make_conninfo(dsn, options=f"{options} -c search_path={path}".strip())


def in_schema(dsn: str, schema: str) -> str:
    """The URL to use for ``schema``: ``dsn`` itself for ``public``; otherwise the schema is made
    if missing, pgvector installed if missing, and the URL searches the schema, then pgvector's."""
    if schema == DEFAULT_SCHEMA:
        return dsn
    try:
        with psycopg.connect(dsn, autocommit=True, **connect_timeout(dsn)) as conn:
            with conn.transaction():
                conn.execute(*advisory_xact_lock(MIGRATION_LOCK_KEY))
                conn.execute(*create_schema(schema))
                row = conn.execute(*extension_schema("vector")).fetchone()
                if row is None:
                    try:
                        conn.execute(*create_extension("vector", _EXTENSION_HOME))
                    except psycopg.Error as exc:
                        raise MigrationError(f"installing pgvector for schema {schema} failed: "
                                             f"{exc}{missing_extension(exc)}") from exc
                    row = conn.execute(*extension_schema("vector")).fetchone()
    except psycopg.OperationalError as exc:
        raise unreachable(dsn, exc) from exc
    except psycopg.Error as exc:
        raise database_error(exc) from exc
    return with_search_path(dsn, [schema, row[0]])
