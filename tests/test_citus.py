"""On a real Citus cluster (issue 30): the layout is in place and stays so, the triggers run on the
shards, a single-scope search is one router task, a search of a few scopes reads only their
shards, and a single-server database moves into the cluster where it stands.

Runs when ``AGENT_MEMORY_TEST_CITUS_URL`` names a coordinator (``.ci/run`` starts a cluster with
``../shared/citus/cluster.sh`` and runs this with the cluster subset); skipped otherwise.
"""

from __future__ import annotations

import re
import uuid

import psycopg
import pytest
from psycopg.rows import dict_row

import citus_cluster
from agent_memory import MemoryConfig, MemoryService, queries, ranking
from agent_memory.db.distributed import DISTRIBUTED_TABLES, LOCAL_TABLES, REFERENCE_TABLES, distribute
from agent_memory.db.requests import run
from agent_memory.models import Identity, Scope

pytestmark = pytest.mark.skipif(
    citus_cluster.citus_url() is None,
    reason=f"no Citus cluster: set {citus_cluster.CITUS_URL_VAR} to a coordinator "
           "(.ci/run starts one with ../shared/citus/cluster.sh)")


def _layout(dsn: str) -> dict[str, dict]:
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        return {r["name"]: r for r in conn.execute(*queries.distributed_tables())}


def test_every_table_is_where_the_layout_says(dsn, memory):
    found = _layout(dsn)
    groups = {found[d.table]["colocation"] for d in DISTRIBUTED_TABLES}
    assert len(groups) == 1  # one colocation group: a scope's rows of every table on one node
    for d in DISTRIBUTED_TABLES:
        assert (found[d.table]["method"], found[d.table]["column"]) == ("h", d.column), d.table
    for table in REFERENCE_TABLES:
        assert found[table]["method"] == "n", table
    assert not set(LOCAL_TABLES) & set(found)


def test_distributing_again_changes_nothing(dsn, memory):
    with psycopg.connect(dsn) as conn:
        assert run(distribute(), conn, None) == []


def test_the_postings_and_profile_triggers_run_on_the_shards(dsn, memory, tenant):
    me = memory.for_user(tenant.user)
    item = me.add("I brew oolong tea every morning")
    with psycopg.connect(dsn) as conn:
        def lexemes() -> set[str]:
            return {r[0] for r in conn.execute(
                "SELECT lexeme FROM memory_terms WHERE scope_id = %s AND id = %s", (tenant.user, item.id))}
        assert {"oolong", "tea", "brew"} <= lexemes()
        me.edit(item.id, content="I brew matcha every morning")
        assert "matcha" in lexemes() and "oolong" not in lexemes()
        assert me.search("matcha")[0].item.id == item.id
        me.delete(item.id, hard=True)
        assert lexemes() == set()


def _plan(dsn: str, identity: Identity, scopes: tuple[Scope, ...]) -> str:
    """EXPLAIN of the indexed search as a cluster runs it, every task shown (parameters written in:
    Citus explains no parameterised subplan)."""
    config = MemoryConfig.defaults(distributed="citus")
    q, p = queries.indexed_search(identity, scopes=scopes, types=None, query_vector=[0.1] * 384, query_text="tea",
                                  pool=20, k=5, min_relevance=0.0, scoring=ranking.Scoring.from_config(config),
                                  distributed=True)
    with psycopg.connect(dsn) as conn:
        conn.execute("SET citus.explain_all_tasks = on")
        text = psycopg.ClientCursor(conn).mogrify(q, p)
        return "\n".join(r[0] for r in conn.execute("EXPLAIN (COSTS OFF) " + text))


def _shards(dsn: str, scope_ids: list[str]) -> set[str]:
    with psycopg.connect(dsn) as conn:
        return {f"{table}_{shard}" for table in ("memory_items", "memory_terms") for shard, in conn.execute(
            "SELECT DISTINCT get_shard_id_for_distribution_column(%s::regclass, s) FROM unnest(%s::text[]) AS s",
            (table, scope_ids))}


def test_a_single_scope_search_is_one_router_task(dsn, memory, tenant):
    memory.for_user(tenant.user).add("I drink green tea")
    plan = _plan(dsn, Identity(user_id=tenant.user), (Scope.USER,))
    assert re.findall(r"Task Count: (\d+)", plan) == ["1"]
    read = set(re.findall(r" on ((?:memory_items|memory_terms)_\d+)", plan))
    assert read and read <= _shards(dsn, [tenant.user])


def test_a_search_of_a_few_scopes_reads_only_their_shards(dsn, memory, tenant):
    ids = Identity(user_id=tenant.user, project_id=tenant.project, session_id=tenant.session)
    plan = _plan(dsn, ids, (Scope.USER, Scope.SESSION, Scope.PROJECT))
    read = set(re.findall(r" on ((?:memory_items|memory_terms)_\d+)", plan))
    assert read and read <= _shards(dsn, [tenant.user, tenant.session, tenant.project])


def test_a_single_server_database_is_distributed_where_it_stands(fresh_dsn, embeddings):
    """The documented move: the same database, first served as one server (the coordinator's
    plain tables), then started with ``distributed='citus'``: its rows move to the shards and
    every answer stays the same."""
    dsn = fresh_dsn()
    user, project = f"u-{uuid.uuid4().hex[:8]}", f"p-{uuid.uuid4().hex[:8]}"
    texts = ["I take the train to work", "The project deadline is in March", "I am allergic to peanuts"]
    with MemoryService(dsn, config=MemoryConfig.defaults(distributed=None), embeddings=embeddings) as single:
        me = single.for_user(user, project_id=project)
        for i, text in enumerate(texts):
            me.add(text, scope="project" if i == 1 else "user")
        before = [(r.item.id, r.item.content) for r in me.search("what do I eat", k=3)]
    assert _layout(dsn) == {}  # nothing distributed yet
    with MemoryService(dsn, config=MemoryConfig.defaults(distributed="citus"), embeddings=embeddings) as cluster:
        me = cluster.for_user(user, project_id=project)
        assert [(r.item.id, r.item.content) for r in me.search("what do I eat", k=3)] == before
        assert {i.content for i in me.list(limit=10)} == set(texts)
    assert {d.table for d in DISTRIBUTED_TABLES} <= set(_layout(dsn))
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM memory_items WHERE user_id = %s", (user,)).fetchone()[0] == 3
