"""The distributed layout (issue 30) holds for the schema as migrated, on one server: every table
is in a part of the layout, every key of a distributed table names its distribution column, every
foreign key is one Citus holds, every trigger of a distributed table is one a cluster was shown to
run. A migration that breaks any of it fails here, with no cluster at hand (tests/test_citus.py
runs the layout on a real one)."""

from __future__ import annotations

import re

import psycopg
import pytest
from psycopg.rows import dict_row

from agent_memory.db import distributed
from agent_memory.db.distributed import (
    DISTRIBUTED_TABLES,
    LOCAL_TABLES,
    REFERENCE_TABLES,
    SINGLE_NODE_ONLY,
    layout_problems,
    schema_problems,
)
from agent_memory.db.requests import run
from agent_memory.errors import ConfigurationError
from agent_memory.models import Scope


def test_the_migrated_schema_has_no_layout_problem(dsn, memory):
    with psycopg.connect(dsn) as conn:
        assert run(schema_problems(), conn, None) == []


def test_every_table_of_the_schema_is_in_the_layout(dsn, memory):
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        tables = {r["relname"] for r in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'")}
    named = {d.table for d in DISTRIBUTED_TABLES} | set(REFERENCE_TABLES) | set(LOCAL_TABLES)
    assert tables - named == set()
    # and the layout names no table the schema lacks, but LangGraph's own (made by its checkpointer)
    assert {t for t in named - tables if not t.startswith("checkpoint")} == set()


def test_the_single_node_only_constraints_exist_on_one_server(dsn, memory):
    """What distributing drops is really there on one server (a rename would leave it behind)."""
    with psycopg.connect(dsn) as conn:
        found = set(conn.execute("SELECT conrelid::regclass::text, conname FROM pg_constraint").fetchall())
    assert set(SINGLE_NODE_ONLY) <= found


def _key(table, name, kind, columns, target=None, target_columns=()):
    return {"table": table, "name": name, "kind": kind, "columns": list(columns), "target": target,
            "target_columns": list(target_columns)}


def test_a_key_without_the_scope_is_a_problem():
    problems = layout_problems(["memory_items"], [_key("memory_items", "memory_items_pkey", "p", ["id"])], [])
    assert problems == ["memory_items.memory_items_pkey: a unique key of a distributed table must include scope_id"]


def test_a_unique_index_without_the_scope_is_a_problem():
    problems = layout_problems(["memory_terms"], [_key("memory_terms", "memory_terms_x", "u", ["id", "lexeme"])], [])
    assert len(problems) == 1 and "must include scope_id" in problems[0]


def test_an_unknown_table_is_a_problem():
    problems = layout_problems(["memory_new_things"], [], [])
    assert len(problems) == 1 and "memory_new_things is in no part of the layout" in problems[0]


def test_foreign_keys_citus_cannot_hold_are_problems():
    keys = [
        # between distributed tables, not on the scope
        _key("memory_passages", "p_fk", "f", ["resource_id"], "memory_resources", ["id"]),
        # on the scope, but to another column
        _key("memory_item_history", "h_fk", "f", ["scope_id", "memory_id"], "memory_items", ["id", "scope_id"]),
        # a reference table pointing at a distributed one
        _key("memory_decisions", "d_fk", "f", ["target_id"], "memory_items", ["id"]),
        # fine: colocated on the scope, and to a reference table
        _key("graph_mentions", "ok1", "f", ["scope_id", "node_id"], "graph_nodes", ["scope_id", "id"]),
        _key("memory_items", "ok2", "f", ["scope_id"], "memory_scopes", ["scope_id"]),
    ]
    problems = layout_problems(["memory_passages"], keys, [])
    assert [p.split(":")[0] for p in problems] == [
        "memory_passages.p_fk", "memory_item_history.h_fk", "memory_decisions.d_fk"]


def test_the_single_node_only_links_are_not_problems():
    keys = [_key(t, c, "f" if c.endswith("fkey") else "u", ["x"], "memory_items", ["id"]) for t, c in SINGLE_NODE_ONLY]
    assert layout_problems([], keys, []) == []


def test_an_unknown_trigger_on_a_distributed_table_is_a_problem():
    triggers = [{"table": "memory_items", "name": "memory_items_terms_update"},  # known: kept
                {"table": "memory_items", "name": "memory_items_changed"},  # known: dropped
                {"table": "memory_items", "name": "memory_items_something_new"},
                {"table": "memory_members", "name": "members_audit"}]
    problems = layout_problems([], [], triggers)
    assert len(problems) == 2
    assert "memory_items_something_new" in problems[0] and "reference table memory_members" in problems[1]


def test_distributing_a_database_without_citus_says_what_to_do(dsn, memory):
    with psycopg.connect(dsn) as conn, pytest.raises(ConfigurationError, match="no citus extension"):
        run(distributed.distribute(), conn, None)


def test_the_service_distributes_only_when_configured(dsn, memory):
    """One server (distributed unset): starting runs the migrations and nothing of Citus."""
    assert memory.config.distributed is None or memory.config.distributed == "citus"
    with psycopg.connect(dsn) as conn:
        citus = conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'citus'").fetchone()[0]
    assert citus == (1 if memory.config.distributed else 0)


def test_the_distributed_setting_reads_citus_or_nothing():
    from agent_memory import MemoryConfig

    assert MemoryConfig.defaults().distributed is None
    assert MemoryConfig.from_env({"MEMORY_DISTRIBUTED": "citus"}).distributed == "citus"
    assert MemoryConfig.from_env({"MEMORY_DISTRIBUTED": "off"}).distributed is None
    with pytest.raises(ConfigurationError, match="distributed"):
        MemoryConfig.defaults(distributed="spanner")
    with pytest.raises(ConfigurationError, match="distributed"):
        MemoryConfig.from_env({"MEMORY_DISTRIBUTED": "yes please"})


def test_a_cluster_searches_without_the_vector_copies():
    """Change stamps are per node on a cluster: the copies that read them are off there."""
    from agent_memory import MemoryConfig
    from agent_memory.ops import _copied

    assert _copied(MemoryConfig.defaults())
    assert not _copied(MemoryConfig.defaults(distributed="citus"))
    assert not _copied(MemoryConfig.defaults(vector_cache_rows=0))


def test_the_cluster_forms_of_statements_name_the_scope():
    """What a cluster runs instead (pure builders): the search's levels name their scope id (so
    each reads one shard), recording use takes no row locks ahead, the sweep takes no batch."""
    from agent_memory import queries
    from agent_memory.models import Identity

    ids = Identity(user_id="u1", project_id="p1", session_id="s1")
    named = re.compile(r"(?<![a-z])m\.scope_id = %\(vf_")
    cluster, _ = queries.visible_parts(ids, keyed=True, distributed=True)
    assert [bool(named.search(str(cluster[s]))) for s in (Scope.USER, Scope.SESSION, Scope.PROJECT)] == [True] * 3
    one_server, _ = queries.visible_parts(ids, keyed=True)
    assert not any(named.search(str(p)) for p in one_server.values())
    touch, _ = queries.touch_items(["x"], distributed=True)
    assert "SKIP LOCKED" not in str(touch) and "sequential" in str(touch)
    sweep, _ = queries.delete_expired("2026-01-01", 10, distributed=True)
    assert "LIMIT" not in str(sweep)
