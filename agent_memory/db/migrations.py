"""Named, transactional schema migrations.

Each migration is applied in its own transaction together with the row that
records it, under a transaction-level advisory lock, so two processes starting
against a new database at once apply each migration exactly once. Applied
migrations are never edited: a change is a new, later migration.

The embedding dimension is part of the schema (``vector(N)``). It is fixed
when ``0002_memory_items`` is applied and recorded in ``agent_memory_meta``;
starting later with an embedder of another size is refused with
:class:`~agent_memory.errors.EmbeddingDimensionMismatchError` instead of
failing on the first insert.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import EmbeddingDimensionMismatchError, MigrationError
from .requests import Commit, Op, Sql

__all__ = ["MIGRATIONS", "MIGRATION_LOCK_KEY", "Migration", "apply_migrations", "migrate"]

# An arbitrary constant: "agent-memory migrations". Only migrations take it.
MIGRATION_LOCK_KEY = 7_236_105_818_453_790_123


@dataclass(frozen=True, slots=True)
class Migration:
    name: str
    sql: str  # may contain {dimensions}

    def statement(self, dimensions: int) -> str:
        return self.sql.replace("{dimensions}", str(int(dimensions)))


MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_vector_extension", "CREATE EXTENSION IF NOT EXISTS vector"),
    Migration(
        "0002_memory_items",
        """
        CREATE TABLE agent_memory_meta (
            key   text PRIMARY KEY,
            value text NOT NULL
        );
        INSERT INTO agent_memory_meta (key, value) VALUES ('embedding_dimensions', '{dimensions}');

        CREATE TABLE memory_items (
            id            uuid PRIMARY KEY,
            content       text NOT NULL,
            memory_type   text NOT NULL CHECK (memory_type IN
                ('preference', 'fact', 'skill', 'habit', 'event', 'context', 'constraint', 'decision')),
            scope         text NOT NULL CHECK (scope IN ('user', 'project', 'session')),
            scope_id      text NOT NULL,
            user_id       text NOT NULL,
            project_id    text,
            session_id    text,
            source        text NOT NULL CHECK (source IN ('user', 'ai', 'knowledge_base', 'project_resource')),
            source_id     text,
            confidence    double precision NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
            visibility    text NOT NULL DEFAULT 'members'
                          CHECK (visibility IN ('public', 'members', 'owner_only')),
            status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived', 'superseded')),
            created_at    timestamptz NOT NULL DEFAULT now(),
            updated_at    timestamptz NOT NULL DEFAULT now(),
            last_used_at  timestamptz,
            access_count  integer NOT NULL DEFAULT 0,
            metadata      jsonb NOT NULL DEFAULT '{}'::jsonb,
            embedding     vector({dimensions}) NOT NULL,
            content_tsv   tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED,
            CHECK (scope <> 'user' OR scope_id = user_id),
            CHECK (scope <> 'project' OR scope_id = project_id),
            CHECK (scope <> 'session' OR scope_id = session_id)
        );
        -- Every read is "the caller's scopes": an exact scan of a few hundred rows per scope beats
        -- an ANN index on both speed and correctness at these sizes (BENCHMARKS.md). No HNSW index.
        CREATE INDEX memory_items_scope_idx ON memory_items (scope, scope_id, status);
        CREATE INDEX memory_items_owner_idx ON memory_items (user_id, status);
        CREATE INDEX memory_items_tsv_idx ON memory_items USING gin (content_tsv);
        """,
    ),
    Migration(
        "0003_extraction_runs",
        """
        CREATE TABLE memory_extraction_runs (
            id          bigserial PRIMARY KEY,
            user_id     text NOT NULL,
            session_id  text NOT NULL,
            created_at  timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX memory_extraction_runs_idx ON memory_extraction_runs (user_id, session_id, created_at);
        """,
    ),
    # Every search hit gets last_used_at/access_count updated; room on the page keeps those
    # updates HOT (no new index entries). Applies to pages written from now on.
    Migration("0004_memory_items_fillfactor", "ALTER TABLE memory_items SET (fillfactor = 90)"),
    # Episodic memory (agent_memory.episodic). Independent of the embedding dimension, so the
    # checkpointer can apply it on its own before any MemoryService has run.
    Migration(
        "0005_episodic",
        """
        -- One compact row per (user, thread): what a UI needs to list and reopen sessions
        -- without loading LangGraph checkpoints. Keyed by user first: thread ids are global
        -- in LangGraph, and no read ever crosses users.
        CREATE TABLE session_state_snapshot (
            user_id        text NOT NULL,
            thread_id      text NOT NULL,
            project_id     text,
            title          text,
            message_count  integer NOT NULL DEFAULT 0 CHECK (message_count >= 0),
            checkpoint_id  text,
            snapshot       jsonb NOT NULL DEFAULT '{}'::jsonb,
            created_at     timestamptz NOT NULL DEFAULT now(),
            updated_at     timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (user_id, thread_id)
        );
        CREATE INDEX session_state_snapshot_recent_idx ON session_state_snapshot (user_id, updated_at DESC);
        CREATE INDEX session_state_snapshot_thread_idx ON session_state_snapshot (thread_id);

        -- Checkpoints moved out of LangGraph's checkpoints/checkpoint_blobs/checkpoint_writes,
        -- one row each, with the writes stored against it and the blobs no hot checkpoint
        -- still uses (bytea as base64 in jsonb), so a restore puts back exactly what left.
        CREATE TABLE checkpoint_archive (
            thread_id             text NOT NULL,
            checkpoint_ns         text NOT NULL DEFAULT '',
            checkpoint_id         text NOT NULL,
            parent_checkpoint_id  text,
            type                  text,
            checkpoint            jsonb NOT NULL,
            metadata              jsonb NOT NULL DEFAULT '{}'::jsonb,
            checkpoint_ts         timestamptz,
            blobs                 jsonb NOT NULL DEFAULT '[]'::jsonb,
            writes                jsonb NOT NULL DEFAULT '[]'::jsonb,
            archived_at           timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
        );
        """,
    ),
    Migration(
        "0006_thread_owners",
        """
        -- LangGraph's thread ids are global: the first user to run a thread owns it, and the
        -- checkpointer refuses that thread to every other user.
        CREATE TABLE checkpoint_thread_owner (
            thread_id   text PRIMARY KEY,
            user_id     text NOT NULL,
            claimed_at  timestamptz NOT NULL DEFAULT now()
        );
        """,
    ),
)


def apply_migrations(migrations: Sequence[Migration], dimensions: int) -> Op[list[str]]:
    """Apply those of ``migrations`` not recorded yet, in order, each in its own transaction
    with its record and under the migrations' advisory lock; answer the names applied now."""
    names = [m.name for m in migrations]
    if len(set(names)) != len(names):
        raise MigrationError(f"migration names must be unique: {names}")
    lock = Sql("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,), fetch="none")

    yield lock
    yield Sql(
        "CREATE TABLE IF NOT EXISTS agent_memory_migrations ("
        " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
        fetch="none",
    )
    yield Commit()

    applied_now: list[str] = []
    for migration in migrations:
        yield lock
        done = yield Sql("SELECT 1 FROM agent_memory_migrations WHERE name = %s", (migration.name,), fetch="one")
        if done is None:
            try:
                yield Sql(migration.statement(dimensions), fetch="none")
            except Exception as exc:
                raise MigrationError(
                    f"migration {migration.name} failed and was rolled back: {exc}"
                ) from exc
            yield Sql("INSERT INTO agent_memory_migrations (name) VALUES (%s)", (migration.name,), fetch="none")
            applied_now.append(migration.name)
        yield Commit()
    return applied_now


def migrate(dimensions: int, model_name: str, migrations: tuple[Migration, ...] = MIGRATIONS) -> Op[list[str]]:
    """Apply pending migrations, then check the embedding size against the database's;
    answer the names applied now (empty when up to date)."""
    applied_now = yield from apply_migrations(migrations, dimensions)
    lock = Sql("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,), fetch="none")

    yield lock
    rows = yield Sql("SELECT key, value FROM agent_memory_meta")
    meta = {r["key"]: r["value"] for r in rows}
    stored = int(meta["embedding_dimensions"])
    if stored != dimensions:
        raise EmbeddingDimensionMismatchError(
            f"the database was created for {stored}-dimensional embeddings "
            f"({meta.get('embedding_model', 'unknown model')}), but the configured embedder "
            f"({model_name}) makes {dimensions}-dimensional ones; use the same embedding model, "
            "or point DATABASE_URL / MEMORY_DATA_DIR at a new database"
        )
    recorded_model = meta.get("embedding_model")
    if recorded_model is None:
        yield Sql(
            "INSERT INTO agent_memory_meta (key, value) VALUES ('embedding_model', %s) ON CONFLICT DO NOTHING",
            (model_name,),
            fetch="none",
        )
    elif recorded_model != model_name:
        warnings.warn(
            f"memories in this database were embedded with {recorded_model}, the configured embedder is "
            f"{model_name}; both make {dimensions}-dimensional vectors, but vectors of different models "
            "are not comparable and search quality will suffer",
            stacklevel=2,
        )
    return applied_now
