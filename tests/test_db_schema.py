"""MEMORY_DB_SCHEMA: every object of ours in one schema; two schemas in one database are two
independent memories; a database made before the setting (everything in ``public``) keeps working
with it unset."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from agent_memory import AsyncMemoryService, ConfigurationError, MemoryConfig, MemoryService
from agent_memory.db.migrations import MIGRATIONS
from agent_memory.db.schema import with_search_path
from agent_memory.episodic import PostgresCheckpointer

OURS = {m.name for m in MIGRATIONS}


def _objects(dsn: str, schema: str) -> dict[str, int]:
    """Tables, indexes, sequences, views, functions and triggers in ``schema`` that are not an extension's."""
    with psycopg.connect(dsn) as conn:
        kinds = dict(conn.execute(
            "SELECT c.relkind::text, count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid"
            " AND d.deptype = 'e') GROUP BY 1", (schema,)).fetchall())
        kinds["functions"] = conn.execute(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %s"
            " AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')",
            (schema,)).fetchone()[0]
        kinds["triggers"] = conn.execute(
            "SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE n.nspname = %s AND NOT t.tgisinternal", (schema,)).fetchone()[0]
    return kinds


def _recorded(dsn: str, schema: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        return {r[0] for r in conn.execute(f"SELECT name FROM {schema}.agent_memory_migrations")}


def test_two_schemas_in_one_database_are_independent_and_hold_everything(fresh_dsn, embeddings) -> None:
    dsn = fresh_dsn()
    user = f"s-{uuid.uuid4().hex[:6]}"
    with MemoryService(dsn, config=MemoryConfig(db_schema="am_a"), embeddings=embeddings) as a, \
            MemoryService(dsn, config=MemoryConfig(db_schema="am_b"), embeddings=embeddings) as b:
        assert set(a.applied_migrations) == OURS and set(b.applied_migrations) == OURS
        a.for_user(user).add("Keeps bees on the roof of the office")
        b.for_user(user).add("Drinks green tea every morning")
        assert [i.content for i in a.for_user(user).list()] == ["Keeps bees on the roof of the office"]
        assert [i.content for i in b.for_user(user).list()] == ["Drinks green tea every morning"]
        assert [h.item.content for h in b.for_user(user).search("bees on the roof", k=5)] == [
            "Drinks green tea every morning"]
        a.forget_user(user_id=user)  # forget (every user-data table) acts in its own schema only
        assert a.for_user(user).list() == [] and len(b.for_user(user).list()) == 1

    for schema in ("am_a", "am_b"):
        assert _recorded(dsn, schema) == OURS  # each schema records its own migrations
        made = _objects(dsn, schema)
        assert made.get("r", 0) >= 15 and made.get("i", 0) >= 20 and made.get("S", 0) >= 1, made
        assert made["functions"] >= 1 and made["triggers"] >= 1, made
    public = _objects(dsn, "public")  # pgvector is there (an extension's objects); nothing of ours
    assert public.get("r", 0) == public.get("i", 0) == public.get("S", 0) == public["functions"] == 0, public

    # a second start finds its schema migrated: nothing to apply
    with MemoryService(dsn, config=MemoryConfig(db_schema="am_a"), embeddings=embeddings) as again:
        assert again.applied_migrations == [] and again.for_user(user).list() == []


def test_the_checkpointer_and_the_async_service_use_the_schema(fresh_dsn, embeddings) -> None:
    import asyncio

    dsn = fresh_dsn()
    config = MemoryConfig(db_schema="am_c")
    saver = PostgresCheckpointer(dsn, config=config, require_user=False)
    try:
        run = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:6]}", "checkpoint_ns": ""}}
        saved = saver.put(run, empty_checkpoint(), {"source": "input", "step": 0}, {})
        assert saver.get_tuple(saved) is not None
    finally:
        saver.close()
    with psycopg.connect(dsn) as conn:
        where = dict(conn.execute("SELECT table_name, table_schema FROM information_schema.tables"
                                  " WHERE table_name IN ('checkpoints', 'memory_items')").fetchall())
    assert where == {"checkpoints": "am_c", "memory_items": "am_c"}

    async def main() -> list[str]:
        async with AsyncMemoryService(dsn, config=config, embeddings=embeddings) as memory:
            await memory.for_user("alice").add("Prefers short answers with examples")
            return [i.content for i in await memory.for_user("alice").list()]

    assert asyncio.run(main()) == ["Prefers short answers with examples"]
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM am_c.memory_items").fetchone()[0] == 1


def test_a_database_made_in_public_keeps_working_with_the_setting_unset(fresh_dsn, embeddings, monkeypatch) -> None:
    monkeypatch.delenv("MEMORY_DB_SCHEMA", raising=False)
    dsn = fresh_dsn()
    with MemoryService(dsn, embeddings=embeddings) as before:  # as every database was made so far
        assert before.config.db_schema == "public"
        before.for_user("alice").add("Works on the billing service")
    assert _recorded(dsn, "public") == OURS
    with MemoryService(dsn, embeddings=embeddings) as after:
        assert after.applied_migrations == []
        assert [i.content for i in after.for_user("alice").list()] == ["Works on the billing service"]
    # a schema added to that database later is a memory of its own, and public's is untouched
    monkeypatch.setenv("MEMORY_DB_SCHEMA", "tenant_two")
    with MemoryService(dsn, embeddings=embeddings) as other:
        assert other.config.db_schema == "tenant_two" and set(other.applied_migrations) == OURS
        assert other.for_user("alice").list() == []
    monkeypatch.delenv("MEMORY_DB_SCHEMA")
    with MemoryService(dsn, embeddings=embeddings) as again:
        assert [i.content for i in again.for_user("alice").list()] == ["Works on the billing service"]


@pytest.mark.parametrize("name", ["", "Agent", "my-schema", "1st", "pg_mine", "a" * 64, "x; drop", 7])
def test_a_schema_name_that_would_need_quoting_is_refused(name: object) -> None:
    with pytest.raises(ConfigurationError, match="db_schema must be a PostgreSQL schema name"):
        MemoryConfig(db_schema=name)  # type: ignore[arg-type]
    assert MemoryConfig.from_env({"MEMORY_DB_SCHEMA": "agent_memory"}).db_schema == "agent_memory"


def test_the_search_path_keeps_the_urls_own_options() -> None:
    given = "postgresql://u@127.0.0.1:5432/db?options=-c%20statement_timeout%3D5000"
    options = psycopg.conninfo.conninfo_to_dict(with_search_path(given, ["am_a", "public", "am_a"]))["options"]
    assert options == "-c statement_timeout=5000 -c search_path=am_a,public"


def test_a_connection_of_your_own_must_search_the_schema(fresh_dsn, embeddings) -> None:
    """A connection or pool passed in is used as it is: without the schema first in its search
    path it is refused before anything is made, rather than filling another schema."""
    dsn = fresh_dsn()
    config = MemoryConfig(db_schema="am_d")
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(ConfigurationError, match="db_schema is 'am_d' but this connection's first schema is"):
            MemoryService(conn, config=config, embeddings=embeddings)
        with pytest.raises(ConfigurationError, match="search_path=am_d"):
            PostgresCheckpointer(conn, config=config)
        assert conn.execute("SELECT to_regclass('public.memory_items')").fetchone() == (None,)  # nothing made
        conn.execute("CREATE SCHEMA am_d")
    with psycopg.connect(with_search_path(dsn, ["am_d", "public"]), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
        with MemoryService(conn, config=config, embeddings=embeddings) as memory:
            memory.for_user("alice").add("Keeps her notes in Markdown files")
        assert conn.execute("SELECT count(*) FROM am_d.memory_items").fetchone() == (1,)
