"""A fresh database on a real Citus cluster, for the cluster subset (``AGENT_MEMORY_TEST_CITUS_URL``).

Citus keeps its cluster per database: a new database needs ``citus`` and ``vector`` on every node
and the workers registered with its coordinator, which is what :func:`create_database` does
(as ``../shared/citus/cluster.sh`` does for ``agent_memory``).
"""

from __future__ import annotations

import os

import psycopg

__all__ = ["CITUS_URL_VAR", "citus_url", "create_database", "drop_database", "nodes"]

#: the coordinator of a running cluster (``cluster.sh start DIR 2 PORT`` prints it as DATABASE_URL)
CITUS_URL_VAR = "AGENT_MEMORY_TEST_CITUS_URL"


def citus_url() -> str | None:
    return os.environ.get(CITUS_URL_VAR) or None


def _dsn(url: str, dbname: str, port: int | None = None) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = dbname
    if port is not None:
        info["port"] = str(port)
    return psycopg.conninfo.make_conninfo(**info)


def nodes(url: str) -> tuple[int, list[int]]:
    """The coordinator's port and the workers' (all on the coordinator's host)."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    with psycopg.connect(url, autocommit=True) as conn:
        workers = [r[0] for r in conn.execute(
            "SELECT nodeport FROM pg_dist_node WHERE groupid <> 0 AND isactive ORDER BY nodeport")]
    return int(info.get("port", 5432)), workers


def create_database(url: str, name: str) -> str:
    """``name`` on every node of ``url``'s cluster, with ``citus`` and ``vector``, its workers
    registered; answers its DSN on the coordinator."""
    coordinator, workers = nodes(url)
    host = psycopg.conninfo.conninfo_to_dict(url).get("host", "127.0.0.1")
    for port in [*workers, coordinator]:
        with psycopg.connect(_dsn(url, "postgres", port), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        with psycopg.connect(_dsn(url, name, port), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    with psycopg.connect(_dsn(url, name), autocommit=True) as conn:
        conn.execute("SELECT citus_set_coordinator_host(%s, %s)", (host, coordinator))
        for port in workers:
            conn.execute("SELECT citus_add_node(%s, %s)", (host, port))
    return _dsn(url, name)


def drop_database(url: str, name: str) -> None:
    coordinator, workers = nodes(url)
    for port in [coordinator, *workers]:
        with psycopg.connect(_dsn(url, "postgres", port), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
