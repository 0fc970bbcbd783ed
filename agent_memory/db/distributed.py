"""The distributed layout: how agent-memory's tables spread over a Citus cluster, and the
operation that puts them there (``MEMORY_DISTRIBUTED=citus``; ``agent-memory migrate`` and the
service's start run it after the migrations, and it is safe to run again).

Every read of memory is "the caller's scopes" and every write lands in one scope, so rows are
hashed by the id of the scope they live in (``scope_id``: ``scope_key`` is generated, and Citus
hashes no generated column). All of a scope's rows of every per-scope table share a node
(one colocation group), so a search of one scope is one query on one worker, and the triggers
that keep the postings and the profiles' dirtiness (which touch only the changed row's scope)
run on that worker in the writing transaction. The small shared tables (scopes, members, shares,
bookkeeping) are copied to every node (reference tables), so the access rule joins them anywhere.

Single-node PostgreSQL has the same schema (migration ``0022_distributable``); what differs is
only what this module does on a cluster:

- the links that may cross scopes (:data:`SINGLE_NODE_ONLY`: a memory's successor in another
  scope, an extraction run's resource) are dropped with the unique ``id`` they point at;
- the change stamps and scope resets that keep a process's copies of big scopes' vectors true
  (:mod:`agent_memory.vector_cache`) are dropped (:data:`CLUSTER_DROPPED_TRIGGERS`):
  ``pg_current_xact_id()`` is per node, so a stamp from one worker says nothing about another's,
  and the copies are off on a cluster (``MemoryConfig.distributed``); TRUNCATE of a distributed
  table is Citus's own;
- episodic memory (checkpoints, thread owners, session snapshots) stays in plain tables on the
  coordinator (:data:`LOCAL_TABLES`): a thread is read and written by one run at a time and never
  joins memories, and LangGraph's own statements for its tables are not ours to key by scope.

``tests/test_distributed_layout.py`` checks the layout against the migrated schema on one server
(every table classified, every key of a distributed table naming its column, every foreign key
one Citus holds), so a migration that breaks it fails there, cluster or not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .. import queries
from ..errors import ConfigurationError, MigrationError
from .migrations import MIGRATION_LOCK_KEY
from .requests import Commit, Op, Sql

__all__ = ["CLUSTER_DROPPED_TRIGGERS", "CLUSTER_SETTINGS", "CLUSTER_KEPT_TRIGGERS", "CLUSTER_ROW_TRIGGERS", "DISTRIBUTED_TABLES", "LOCAL_TABLES", "REFERENCE_TABLES",
           "SINGLE_NODE_ONLY", "Distributed", "distribute", "laid_out", "layout_problems", "on_cluster",
           "schema_problems"]


@dataclass(frozen=True, slots=True)
class Distributed:
    """A table hashed by ``column`` over the shards of :data:`DISTRIBUTED_TABLES`' first table."""

    table: str
    column: str


#: the per-scope tables, in the order they are distributed (a table after those its keys point
#: at); the first starts the colocation group, the others join it
DISTRIBUTED_TABLES: tuple[Distributed, ...] = (
    Distributed("memory_items", "scope_id"),
    Distributed("memory_item_history", "scope_id"),
    Distributed("memory_terms", "scope_id"),
    Distributed("memory_context_terms", "scope_id"),
    Distributed("memory_reembed", "scope_id"),
    Distributed("memory_resources", "scope_id"),
    Distributed("memory_passages", "scope_id"),
    # a profile's subject is its scope's id (kind user: the user; kind project: the project), so
    # the trigger that marks it dirty writes the changed memory's own shard
    Distributed("memory_profiles", "subject_id"),
    Distributed("graph_nodes", "scope_id"),
    Distributed("graph_mentions", "scope_id"),
    Distributed("graph_relations", "scope_id"),
    Distributed("graph_storylines", "scope_id"),
    Distributed("graph_storyline_members", "scope_id"),
    Distributed("store_vectors", "scope_id"),
)

#: small tables every node holds a copy of, in the order they are made so (a table after those
#: its keys point at): the access rule joins scopes, members and shares to every read; the
#: extraction runs and their decisions are few, keyed by user and session, and read by the
#: rate limit and the reports
REFERENCE_TABLES: tuple[str, ...] = (
    "agent_memory_migrations",
    "agent_memory_meta",
    "memory_scopes",
    "memory_members",
    "memory_project_shares",
    "memory_extraction_runs",
    "memory_decisions",
    "memory_scope_resets",
)

#: plain tables on the coordinator (episodic memory; see the module's docstring), with LangGraph's
#: own checkpoint tables when the checkpointer made them
LOCAL_TABLES: tuple[str, ...] = (
    "checkpoint_archive",
    "checkpoint_thread_owner",
    "session_state_snapshot",
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "checkpoint_migrations",
)

#: ``(table, constraint)``: what one server keeps and a cluster cannot (a key without the
#: distribution column, or a link that may cross scopes); dropped when distributing, in this order
SINGLE_NODE_ONLY: tuple[tuple[str, str], ...] = (
    ("memory_items", "memory_items_superseded_by_fkey"),
    ("memory_items", "memory_items_id_key"),
    ("memory_extraction_runs", "memory_extraction_runs_resource_id_fkey"),
    ("memory_resources", "memory_resources_id_key"),
)

#: ``(table, trigger)``: the triggers that serve only the copies of big scopes' vectors (off on a
#: cluster: change stamps are per node) or TRUNCATE (a distributed table's is Citus's); dropped
CLUSTER_DROPPED_TRIGGERS: frozenset[tuple[str, str]] = frozenset({
    ("memory_items", "memory_items_changed"),
    ("memory_items", "memory_items_reset_delete"),
    ("memory_items", "memory_items_reset_move"),
    ("memory_items", "memory_items_reset_truncate"),
    ("memory_items", "memory_items_terms_truncate"),
    ("memory_items", "memory_items_context_terms_truncate"),
})


#: ``(table, trigger)`` -> ``(event, function)``: a trigger one server fires per statement over a
#: transition table (which Citus keeps none of on a shard) and a cluster fires per row; its
#: function serves both (``TG_LEVEL``)
CLUSTER_ROW_TRIGGERS: dict[tuple[str, str], tuple[str, str]] = {
    ("memory_items", "memory_items_terms_insert"): ("INSERT", "agent_memory_terms_added"),
    ("memory_items", "memory_items_terms_delete"): ("DELETE", "agent_memory_terms_removed"),
    ("memory_items", "memory_items_context_terms_insert"): ("INSERT", "agent_memory_context_terms_added"),
    ("memory_items", "memory_items_context_terms_delete"): ("DELETE", "agent_memory_context_terms_removed"),
}


#: ``(table, trigger)``: row triggers a cluster keeps as they are, each touching only rows of the
#: changed row's own scope (on the same node): the postings of an edited memory, its profile's
#: dirtiness, a kept wording's scope (tests/test_citus.py proves them on a cluster)
CLUSTER_KEPT_TRIGGERS: frozenset[tuple[str, str]] = frozenset({
    ("memory_items", "memory_items_terms_update"),
    ("memory_items", "memory_items_context_terms_update"),
    ("memory_items", "memory_items_profile_inputs"),
    ("memory_item_history", "memory_item_history_level"),
})


def layout_problems(tables: Sequence[str], constraints: Sequence[Mapping[str, Any]],
                    triggers: Sequence[Mapping[str, Any]]) -> list[str]:
    """What keeps the schema (``tables``; ``constraints`` and ``triggers`` as
    :func:`queries.constraints_of_schema` and :func:`queries.triggers_of_schema` answer them) from
    the layout: a table the layout does not name, a key of a distributed table without its
    distribution column, a foreign key Citus cannot hold, a trigger nobody said a cluster runs.
    Empty when a cluster can take it. :data:`SINGLE_NODE_ONLY` is what distributing drops."""
    column = {d.table: d.column for d in DISTRIBUTED_TABLES}
    reference, local = set(REFERENCE_TABLES), set(LOCAL_TABLES)
    dropped = set(SINGLE_NODE_ONLY)
    problems = [f"table {t} is in no part of the layout: add it to DISTRIBUTED_TABLES (keyed by its scope), "
                "REFERENCE_TABLES or LOCAL_TABLES in agent_memory/db/distributed.py"
                for t in tables if t not in column and t not in reference and t not in local]
    for c in constraints:
        table, name = c["table"], c["name"]
        if (table, name) in dropped or table not in column:
            if table in reference and c["kind"] == "f" and c["target"] not in reference:
                if (table, name) not in dropped:
                    problems.append(f"{table}.{name}: a reference table's foreign key may point only at reference "
                                    f"tables, not {c['target']}")
            continue
        if c["kind"] in ("p", "u") and column[table] not in c["columns"]:
            problems.append(f"{table}.{name}: a unique key of a distributed table must include {column[table]}")
        if c["kind"] == "f":
            target = c["target"]
            if target in reference:
                continue
            if target not in column:
                problems.append(f"{table}.{name}: points at {target}, neither distributed nor a reference table")
                continue
            pairs = dict(zip(c["columns"], c["target_columns"], strict=True))
            if pairs.get(column[table]) != column[target]:
                problems.append(f"{table}.{name}: a foreign key between distributed tables must join "
                                f"{table}.{column[table]} to {target}.{column[target]}")
    known = CLUSTER_KEPT_TRIGGERS | CLUSTER_DROPPED_TRIGGERS | set(CLUSTER_ROW_TRIGGERS)
    for t in triggers:
        key = (t["table"], t["name"])
        if t["table"] in column and key not in known:
            problems.append(f"trigger {t['name']} on {t['table']}: say in agent_memory/db/distributed.py whether a "
                            "cluster keeps it (it may touch only rows of the changed row's scope), fires it per row "
                            "or drops it, and prove it in tests/test_citus.py")
        elif t["table"] in reference:
            problems.append(f"trigger {t['name']} on reference table {t['table']}: Citus runs none")
    return problems


def schema_problems() -> Op[list[str]]:
    """:func:`layout_problems` of the connection's schema."""
    tables = [r["name"] for r in (yield Sql(*queries.our_tables()))]
    constraints = yield Sql(*queries.constraints_of_schema())
    triggers = yield Sql(*queries.triggers_of_schema())
    return layout_problems(tables, constraints, triggers)


#: what every connection to a cluster sets: a transaction that changed many shards in parallel may
#: not write a reference table after (the extraction runs beside their memories), so each
#: transaction takes one connection per worker
CLUSTER_SETTINGS = {"citus.multi_shard_modify_mode": "sequential"}


def on_cluster(dsn: str) -> str:
    """``dsn`` whose connections have :data:`CLUSTER_SETTINGS` (kept after any ``options`` it had)."""
    options = str(conninfo_to_dict(dsn).get("options") or "")
    settings = " ".join(f"-c {name}={value}" for name, value in CLUSTER_SETTINGS.items())
    return make_conninfo(dsn, options=f"{options} {settings}".strip())


def laid_out(migrated: Op[list[str]], distributed: str | None) -> Op[list[str]]:
    """``migrated`` (the migrations), then on a cluster (``MemoryConfig.distributed``) :func:`distribute`:
    what a service runs at start. Answers the migrations applied now."""
    applied = yield from migrated
    if distributed == "citus":
        yield Commit()
        yield from distribute()
    return applied


def distribute(*, shard_count: int | None = None) -> Op[list[str]]:
    """Distribute the tables of :data:`DISTRIBUTED_TABLES` and make :data:`REFERENCE_TABLES`
    reference tables, each in its own transaction under the migrations' lock; answer the tables
    changed now (empty when the layout is in place already). Rows a table holds move to the
    shards (a single-node database distributed where it stands). ``shard_count``: the shards of
    the colocation group when it is made (Citus's ``citus.shard_count``, 32, by default)."""
    found = yield Sql(*queries.citus_installed(), fetch="one")
    if not found["citus"]:
        raise ConfigurationError(
            "distributed is 'citus' but this database has no citus extension; connect DATABASE_URL to a Citus "
            "coordinator (CREATE EXTENSION citus there), or unset MEMORY_DISTRIBUTED for a single server")
    lock = Sql(*queries.migration_lock(MIGRATION_LOCK_KEY), fetch="none")
    changed: list[str] = []
    yield lock
    present = {r["name"] for r in (yield Sql(*queries.our_tables()))}
    done = {r["name"] for r in (yield Sql(*queries.distributed_tables()))}
    if all(t in done or t in LOCAL_TABLES for t in present):  # in place: one round of reads a start
        return changed
    problems = yield from schema_problems()  # a new database, or a table a migration added
    if problems:
        raise MigrationError("the schema cannot be distributed as it stands: " + "; ".join(problems))
    yield Commit()

    for table in REFERENCE_TABLES:
        if table not in present:
            continue
        yield lock
        done = {r["name"] for r in (yield Sql(*queries.distributed_tables()))}
        if table not in done:
            for owner, constraint in SINGLE_NODE_ONLY:
                if owner == table:
                    yield Sql(*queries.drop_constraint(owner, constraint), fetch="none")
            yield Sql(*queries.create_reference_table(table), fetch="none")
            changed.append(table)
        yield Commit()

    first = DISTRIBUTED_TABLES[0].table
    for spec in DISTRIBUTED_TABLES:
        if spec.table not in present:
            continue
        yield lock
        done = {r["name"] for r in (yield Sql(*queries.distributed_tables()))}
        if spec.table not in done:
            yield from _distribute_one(spec, "none" if spec.table == first else first, shard_count)
            changed.append(spec.table)
        yield Commit()
    # the rows a table held before stay on the coordinator, unseen, until every table that points
    # at it is distributed too; then they go
    for table in changed:
        yield Sql(*queries.forget_local_copy(table), fetch="none")
        yield Commit()
    return changed


def _distribute_one(spec: Distributed, colocate_with: str, shard_count: int | None) -> Op[None]:
    """Citus distributes no table that has triggers: they are dropped, the table distributed and
    those a cluster keeps made again (on every shard), in one transaction."""
    triggers = yield Sql(*queries.triggers_of(spec.table))
    if triggers:
        yield Sql(*queries.allow_shard_triggers(), fetch="none")
    for trigger in triggers:
        yield Sql(*queries.drop_trigger(spec.table, trigger["name"]), fetch="none")
    for owner, constraint in SINGLE_NODE_ONLY:
        if owner == spec.table:
            yield Sql(*queries.drop_constraint(owner, constraint), fetch="none")
    yield Sql(*queries.create_distributed_table(spec.table, spec.column, colocate_with, shard_count), fetch="none")
    for trigger in [t for t in triggers if (spec.table, t["name"]) not in CLUSTER_DROPPED_TRIGGERS]:
        row = CLUSTER_ROW_TRIGGERS.get((spec.table, trigger["name"]))
        if row is not None:
            yield Sql(*queries.row_trigger(spec.table, trigger["name"], *row), fetch="none")
        else:
            yield Sql(trigger["definition"], fetch="none")
