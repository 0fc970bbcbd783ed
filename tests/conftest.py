"""Shared fixtures: one real PostgreSQL for the session, one database per run, a tenant per test.

``AGENT_MEMORY_TEST_DSN`` points the suite at your own PostgreSQL (with
pgvector); otherwise the embedded server is started in a temporary directory
and stopped at the end. Tests stay independent by using fresh tenant ids
rather than fresh databases; the few that need an empty database ask
``fresh_dsn`` for one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from agent_memory import AsyncMemoryService, MemoryConfig, MemoryService
from agent_memory.embeddings import LocalEmbeddings

import citus_cluster

# The knowledge graph learns on save only when MEMORY_KNOWLEDGE_GRAPH is on (off by default); the
# suite runs with it on, so every write path is tested with it (test_graph.py checks the off path).
os.environ.setdefault("MEMORY_KNOWLEDGE_GRAPH", "1")

# The cluster subset (tests/test_citus.py, .ci/run): AGENT_MEMORY_TEST_CITUS_URL names a Citus
# coordinator; every database is then made on the whole cluster and distributed by the service.
CITUS = citus_cluster.citus_url()
if CITUS:
    os.environ["MEMORY_DISTRIBUTED"] = "citus"


@pytest.fixture(scope="session")
def pg_server_dsn() -> Iterator[Callable[[str], str]]:
    """A function: database name -> DSN on the test server.

    The embedded server's directory is made with mkdtemp rather than pytest's
    tmp_path: as root the server runs as another user, and pytest re-closes
    its own temp root (0700) whenever another pytest session starts.
    """
    given = os.environ.get("AGENT_MEMORY_TEST_DSN")
    if given:
        info = psycopg.conninfo.conninfo_to_dict(given)

        def dsn(name: str) -> str:
            return psycopg.conninfo.make_conninfo(**dict(info, dbname=name))

        yield dsn
        return
    from agent_memory.db.embedded import ensure_embedded_server

    base = Path(tempfile.mkdtemp(prefix="agent-memory-tests-"))
    server = ensure_embedded_server(base / "data")
    try:
        yield server.dsn
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def fresh_dsn(pg_server_dsn: Callable[[str], str]) -> Iterator[Callable[[], str]]:
    """A function that creates an empty database and returns its DSN (dropped at session end)."""
    created: list[str] = []
    admin = pg_server_dsn("postgres")

    if CITUS:
        def on_cluster() -> str:
            name = f"am_test_{uuid.uuid4().hex[:12]}"
            created.append(name)
            return citus_cluster.create_database(CITUS, name)

        yield on_cluster
        for name in created:
            citus_cluster.drop_database(CITUS, name)
        return

    def make() -> str:
        name = f"am_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        return pg_server_dsn(name)

    yield make
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in created:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def dsn(fresh_dsn: Callable[[], str]) -> str:
    """The session's database (migrated by the ``memory`` fixture)."""
    return fresh_dsn()


@pytest.fixture(scope="session")
def embeddings() -> LocalEmbeddings:
    return LocalEmbeddings()


@pytest.fixture(scope="session")
def config() -> MemoryConfig:
    # see MEMORY_KNOWLEDGE_GRAPH above; on a cluster, distributed (see CITUS)
    return MemoryConfig.defaults(knowledge_graph=True, distributed="citus" if CITUS else None)


@pytest.fixture(scope="session")
def memory(dsn: str, config: MemoryConfig, embeddings: LocalEmbeddings) -> Iterator[MemoryService]:
    with MemoryService(dsn, config=config, embeddings=embeddings) as service:
        yield service


@pytest.fixture(scope="session")
async def amemory(dsn: str, config: MemoryConfig, embeddings: LocalEmbeddings, memory: MemoryService):
    async with AsyncMemoryService(dsn, config=config, embeddings=embeddings) as service:
        yield service


@dataclass(frozen=True)
class Tenant:
    """Fresh ids for one test: two users sharing a project, their sessions, and an outsider."""

    user: str
    other_user: str
    project: str
    other_project: str
    session: str
    other_session: str

    def ids(self, user: str | None = None, *, project: bool = True, session: bool = True) -> dict[str, str | None]:
        return {
            "user_id": user or self.user,
            "project_id": self.project if project else None,
            "session_id": self.session if session else None,
        }


@pytest.fixture
def tenant(memory: MemoryService) -> Tenant:
    """``user`` owns ``project`` and ``other_user`` is an editor of it (in the session's
    database); ``other_project`` does not exist yet."""
    tag = uuid.uuid4().hex[:10]
    t = Tenant(
        user=f"user-{tag}", other_user=f"other-{tag}", project=f"proj-{tag}",
        other_project=f"otherproj-{tag}", session=f"sess-{tag}", other_session=f"othersess-{tag}",
    )
    memory.create_project(t.project, user_id=t.user)
    memory.add_member("project", t.project, t.other_user, "editor", user_id=t.user)
    return t
