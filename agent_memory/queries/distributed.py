"""Distributing the tables over a Citus cluster (:mod:`agent_memory.db.distributed`): what is
distributed already, the triggers a table carries, and the calls that distribute it."""

from __future__ import annotations

from psycopg import sql

from .types import Statement

__all__ = ["allow_shard_triggers", "citus_installed", "constraints_of_schema", "create_distributed_table",
           "create_reference_table", "distributed_tables", "drop_constraint", "drop_trigger",
           "forget_local_copy", "migration_lock", "our_tables", "row_trigger", "sequential_modifications",
           "shards_of_scopes", "triggers_of", "triggers_of_schema"]


def migration_lock(key: int) -> Statement:
    """The migrations' transaction-level advisory lock (``db.migrations.MIGRATION_LOCK_KEY``)."""
    return "SELECT pg_advisory_xact_lock(%s)", (key,)


def citus_installed() -> Statement:
    """Whether this database is a Citus node (``citus`` is ``true``)."""
    return "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus", None


def our_tables() -> Statement:
    """The tables of the connection's first schema (``name``)."""
    return ("SELECT c.relname AS name FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace"
            " AND c.relkind IN ('r', 'p') ORDER BY 1", None)


def distributed_tables() -> Statement:
    """The tables Citus knows of this schema: ``name``, ``method`` (``h`` distributed by hash, ``n``
    reference), ``column`` (the distribution column, None for a reference table) and ``colocation``."""
    return ("SELECT c.relname AS name, p.partmethod AS method, p.colocationid AS colocation,"
            " CASE WHEN p.partmethod = 'h' THEN column_to_column_name(p.logicalrelid, p.partkey) END AS column"
            " FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid"
            " WHERE c.relnamespace = current_schema()::regnamespace ORDER BY 1", None)


def triggers_of(table: str) -> Statement:
    """The triggers of ``table`` (``name``, ``definition``: a statement that makes it again)."""
    return ("SELECT t.tgname AS name, pg_get_triggerdef(t.oid) AS definition FROM pg_trigger t"
            " WHERE t.tgrelid = to_regclass(quote_ident(current_schema()) || '.' || quote_ident(%s))"
            " AND NOT t.tgisinternal ORDER BY t.tgname", (table,))


def triggers_of_schema() -> Statement:
    """Every trigger of the schema's tables (``table``, ``name``)."""
    return ("SELECT c.relname AS table, t.tgname AS name FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
            " WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal ORDER BY 1, 2", None)


def constraints_of_schema() -> Statement:
    """Every primary key, unique constraint or index, and foreign key of the schema's tables:
    ``table``, ``name``, ``kind`` (``p``, ``u``, ``f``), ``columns`` (in order), ``target`` (a foreign
    key's table) and ``target_columns``. A unique index that is not a constraint counts as ``u``."""
    return (
        "SELECT c.relname AS table, k.conname AS name, k.contype::text AS kind,"
        " ARRAY(SELECT a.attname::text FROM unnest(k.conkey) WITH ORDINALITY AS u(n, i)"
        "       JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.n ORDER BY u.i) AS columns,"
        " f.relname AS target,"
        " ARRAY(SELECT a.attname::text FROM unnest(k.confkey) WITH ORDINALITY AS u(n, i)"
        "       JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.n ORDER BY u.i) AS target_columns"
        " FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid LEFT JOIN pg_class f ON f.oid = k.confrelid"
        " WHERE c.relnamespace = current_schema()::regnamespace AND k.contype IN ('p', 'u', 'f')"
        " UNION ALL"
        " SELECT c.relname, i.relname, 'u',"
        " ARRAY(SELECT coalesce(a.attname::text, '(expression)') FROM unnest(x.indkey) WITH ORDINALITY AS u(n, o)"
        "       LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = u.n AND u.n > 0"
        "       WHERE u.o <= x.indnkeyatts ORDER BY u.o),"
        " NULL, NULL"
        " FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid"
        " WHERE c.relnamespace = current_schema()::regnamespace AND x.indisunique"
        " AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid)"
        " ORDER BY 1, 2", None)


def drop_trigger(table: str, name: str) -> Statement:
    return sql.SQL("DROP TRIGGER IF EXISTS {} ON {}").format(sql.Identifier(name), sql.Identifier(table)), None


def drop_constraint(table: str, name: str) -> Statement:
    return (sql.SQL("ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}").format(sql.Identifier(table), sql.Identifier(name)),
            None)


def row_trigger(table: str, name: str, when: str, function: str) -> Statement:
    """``name`` on ``table`` fired ``when`` (``INSERT``, ``DELETE``) once per row, with ``function``:
    how a cluster runs a trigger one server runs per statement over a transition table, which
    Citus keeps none of on a shard."""
    if when not in ("INSERT", "DELETE"):
        raise ValueError(f"when must be INSERT or DELETE, not {when!r}")
    return (sql.SQL("CREATE TRIGGER {} AFTER " + when + " ON {} FOR EACH ROW EXECUTE FUNCTION {}()").format(
        sql.Identifier(name), sql.Identifier(table), sql.Identifier(function)), None)


def allow_shard_triggers() -> Statement:
    """Citus makes a trigger on a distributed table only when told the trigger is safe: ours touch
    rows of the changed row's own scope, which live on the same node (colocated shards)."""
    return "SET LOCAL citus.enable_unsafe_triggers = on", None


def sequential_modifications() -> Statement:
    """One connection per worker for the rest of the transaction, so a statement over many shards
    and the reference tables written in the same transaction never wait on each other."""
    return "SET LOCAL citus.multi_shard_modify_mode = 'sequential'", None


def create_reference_table(table: str) -> Statement:
    return "SELECT create_reference_table(%s)", (table,)


def create_distributed_table(table: str, column: str, colocate_with: str, shard_count: int | None) -> Statement:
    """Distribute ``table`` by hash of ``column`` (its rows move to the shards), colocated with
    ``colocate_with`` (``'none'``: a new group, of ``shard_count`` shards or Citus's default)."""
    if shard_count is None:
        return "SELECT create_distributed_table(%s, %s, colocate_with => %s)", (table, column, colocate_with)
    return ("SELECT create_distributed_table(%s, %s, colocate_with => %s, shard_count => %s)",
            (table, column, colocate_with, int(shard_count)))


def forget_local_copy(table: str) -> Statement:
    """Distributing a table that held rows copies them to the shards and leaves the originals on the
    coordinator, unseen; this removes them."""
    return "SELECT truncate_local_data_after_distributing_table(%s)", (table,)


def shards_of_scopes(table: str, scope_ids: list[str]) -> Statement:
    """The shards that hold ``table``'s rows of ``scope_ids`` (``shard``), for the plans' tests and docs."""
    return ("SELECT DISTINCT get_shard_id_for_distribution_column(%s::regclass, s) AS shard"
            " FROM unnest(%s::text[]) AS s"
            " ORDER BY 1", (table, scope_ids))
