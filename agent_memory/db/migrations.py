"""Named, transactional schema migrations.

Each migration is applied in its own transaction together with the row that
records it, under a transaction-level advisory lock, so two processes starting
against a new database at once apply each migration exactly once (one that
PostgreSQL refuses in a transaction says so: ``transactional=False``). A start
first reads the applied names, without the lock: on an up-to-date database that
is all it does. Applied migrations are never edited: a change is a new, later
migration. Each text is written out literally (none is built from a function
that could change later) and ``tests/migration_hashes.py`` pins its sha256.

The embedding dimension is part of the schema (``vector(N)``). It is fixed
when ``0002_memory_items`` is applied and recorded in ``agent_memory_meta``;
starting later with an embedder of another size is refused with
:class:`~agent_memory.errors.EmbeddingDimensionMismatchError` instead of
failing on the first insert.

Every entry point (``MemoryService``, the episodic checkpointer, ``reembed``)
applies :data:`MIGRATIONS` through :func:`migrate` / :func:`apply_migrations`,
so every database has them applied in one order, whichever starts first.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import ConfigurationError, EmbeddingDimensionMismatchError, MigrationError
from .failures import missing_extension
from .requests import Autocommit, Commit, Op, Sql

__all__ = ["MIGRATIONS", "MIGRATION_LOCK_KEY", "SEARCH_INDEX_MAX_CONTEXT_DIMENSIONS", "SEARCH_INDEX_MAX_DIMENSIONS",
           "SEARCH_INDEX_NAME", "Dimensions",
           "Migration", "apply_migrations", "migrate", "recorded_dimensions", "search_index"]

# An arbitrary constant: "agent-memory migrations". Only migrations take it.
MIGRATION_LOCK_KEY = 7_236_105_818_453_790_123


@dataclass(frozen=True, slots=True)
class Migration:
    """One named change of the schema, applied once per database, in its own transaction with
    the row that records it.

    ``transactional=False``: for what PostgreSQL refuses inside a transaction (``CREATE INDEX
    CONCURRENTLY``, which builds an index without blocking writes). Its statements (``sql``, one
    per ``;`` that ends a line, no ``$$`` bodies) then run one by one, each committed on its own,
    under the migrations' lock held for the session, and the record is written after the last
    (other processes wait for the lock between short transactions, so the index build, which
    waits for every transaction older than it, never waits on them).
    A failure leaves the statements before it applied and the migration unrecorded, so it runs
    again from its first statement: write it to be re-run (``DROP INDEX CONCURRENTLY IF EXISTS``
    before ``CREATE INDEX CONCURRENTLY``, which leaves an invalid index behind when it fails).
    """

    name: str
    sql: str  # may contain {dimensions}
    transactional: bool = True

    def __post_init__(self) -> None:
        if not self.transactional and "$" in self.sql:
            raise MigrationError(f"migration {self.name} is not transactional, so its statements are split at "
                                 "each ';' that ends a line, which a $$ body would break; make it transactional "
                                 "or write it without dollar quoting")

    @property
    def sized(self) -> bool:
        """Whether the statement depends on the embedding size."""
        return "{dimensions}" in self.sql

    def statement(self, dimensions: int) -> str:
        return self.sql.replace("{dimensions}", str(int(dimensions)))

    def statements(self, dimensions: int | None) -> list[str]:
        """The statements of a migration that is not transactional, one by one (comments and
        blank lines between them left out)."""
        text = self.sql if dimensions is None else self.statement(dimensions)
        found = (s.strip() for s in _STATEMENT_END.split(text))
        return [s for s in found if _COMMENT_LINE.sub("", s).strip()]


#: the end of a statement in a migration that is not transactional: a ``;`` that ends a line (or
#: that only a comment follows)
_STATEMENT_END = re.compile(r";[ \t]*(?:--[^\n]*)?(?:\n|\Z)")
_COMMENT_LINE = re.compile(r"^\s*--.*$", re.MULTILINE)


#: The embedding size, or for a caller with no embedder (the checkpointer) a function answering
#: the size a new database gets; see :func:`migrate`.
Dimensions = int | Callable[[], int]


#: A btree row holds at most 2,704 bytes: the search index carries the vector (as ``halfvec``,
#: 2 bytes a dimension) up to this size; a bigger model's search reads it from the table.
SEARCH_INDEX_MAX_DIMENSIONS = 1024
#: ... and both the vector and the context's vector (issue 29) up to this size (2 x 2 bytes a
#: dimension and the other columns); a bigger model's search reads the context's from the table
SEARCH_INDEX_MAX_CONTEXT_DIMENSIONS = 600


SEARCH_INDEX_NAME = "memory_items_search_idx"
_SEARCH_INDEX = f"CREATE INDEX {SEARCH_INDEX_NAME} ON memory_items (scope, scope_key, status)"


def search_index(dimensions: int, *, context: bool = True) -> str:
    """``memory_items_search_idx`` for vectors of ``dimensions``, as a re-embedding that changes
    the size makes it again (``0018_memory_context`` wrote out the same statement for each size
    class; migrations hold their text literally, so a change here never edits an applied one).
    With ``context`` the index also carries the context's ``halfvec`` up to
    :data:`SEARCH_INDEX_MAX_CONTEXT_DIMENSIONS` (both vectors must fit in one index row)."""
    vector = ", embedding_half" if int(dimensions) <= SEARCH_INDEX_MAX_DIMENSIONS else ""
    if context and int(dimensions) <= SEARCH_INDEX_MAX_CONTEXT_DIMENSIONS:
        vector += ", context_half"
    return f"{_SEARCH_INDEX} INCLUDE (owner_key, visibility, memory_type, confidence, expires_at, id{vector})"


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
    Migration(
        "0007_resources_history_profiles",
        """
        -- Layer 1: the raw material memories come from. A conversation is one row per
        -- (user, session), its content the transcript extraction has read, its cursor the id of
        -- the last message read; documents and project resources are rows of their own.
        CREATE TABLE memory_resources (
            id           uuid PRIMARY KEY,
            kind         text NOT NULL CHECK (kind IN ('conversation', 'document', 'project_resource')),
            user_id      text NOT NULL,
            scope        text NOT NULL CHECK (scope IN ('user', 'project', 'session')),
            scope_id     text NOT NULL,
            project_id   text,
            session_id   text,
            external_id  text,
            title        text,
            content      text NOT NULL DEFAULT '',
            metadata     jsonb NOT NULL DEFAULT '{}'::jsonb,
            cursor       text,
            created_at   timestamptz NOT NULL DEFAULT now(),
            updated_at   timestamptz NOT NULL DEFAULT now(),
            CHECK (scope <> 'user' OR scope_id = user_id),
            CHECK (scope <> 'project' OR scope_id = project_id),
            CHECK (scope <> 'session' OR scope_id = session_id)
        );
        CREATE UNIQUE INDEX memory_resources_external_idx
            ON memory_resources (user_id, kind, scope, scope_id, external_id) WHERE external_id IS NOT NULL;
        CREATE INDEX memory_resources_scope_idx ON memory_resources (scope, scope_id);

        ALTER TABLE memory_items DROP CONSTRAINT memory_items_source_check;
        ALTER TABLE memory_items ADD CONSTRAINT memory_items_source_check CHECK (source IN
            ('user', 'ai', 'knowledge_base', 'project_resource', 'conversation'));

        -- Layer 2 history: when a fact held (valid_from/valid_to), what replaced it, and every
        -- earlier wording of an item revised in place.
        ALTER TABLE memory_items
            ADD COLUMN valid_from    timestamptz NOT NULL DEFAULT now(),
            ADD COLUMN valid_to      timestamptz,
            ADD COLUMN superseded_by uuid REFERENCES memory_items (id) ON DELETE SET NULL,
            ADD COLUMN version       integer NOT NULL DEFAULT 1;
        UPDATE memory_items SET valid_from = created_at;
        CREATE INDEX memory_items_superseded_by_idx ON memory_items (superseded_by) WHERE superseded_by IS NOT NULL;

        CREATE TABLE memory_item_history (
            memory_id    uuid NOT NULL REFERENCES memory_items (id) ON DELETE CASCADE,
            version      integer NOT NULL,
            content      text NOT NULL,
            memory_type  text NOT NULL,
            confidence   double precision NOT NULL,
            metadata     jsonb NOT NULL DEFAULT '{}'::jsonb,
            recorded_at  timestamptz NOT NULL,
            replaced_at  timestamptz NOT NULL DEFAULT now(),
            change       text NOT NULL CHECK (change IN ('update', 'edit')),
            decided_by   text CHECK (decided_by IN ('llm', 'similarity', 'user')),
            reason       text,
            changed_by   text NOT NULL,
            PRIMARY KEY (memory_id, version)
        );

        -- One row per automatic extraction run (the rate limit counts them), now with its outcome.
        ALTER TABLE memory_extraction_runs
            ADD COLUMN project_id   text,
            ADD COLUMN resource_id  uuid REFERENCES memory_resources (id) ON DELETE SET NULL,
            ADD COLUMN extractor    text,
            ADD COLUMN status       text NOT NULL DEFAULT 'done'
                                    CHECK (status IN ('running', 'done', 'failed')),
            ADD COLUMN counts       jsonb NOT NULL DEFAULT '{}'::jsonb,
            ADD COLUMN error        text,
            ADD COLUMN finished_at  timestamptz;

        -- Every consolidation decision, with who made it (the LLM or the similarity thresholds).
        CREATE TABLE memory_decisions (
            id           bigserial PRIMARY KEY,
            run_id       bigint REFERENCES memory_extraction_runs (id) ON DELETE CASCADE,
            user_id      text NOT NULL,
            scope        text NOT NULL,
            scope_id     text NOT NULL,
            proposal     text NOT NULL,
            memory_type  text NOT NULL,
            decision     text NOT NULL CHECK (decision IN ('add', 'update', 'supersede', 'none', 'rejected')),
            decided_by   text NOT NULL CHECK (decided_by IN ('llm', 'similarity', 'user', 'gate')),
            target_id    uuid,
            result_id    uuid,
            similarity   double precision,
            reason       text,
            created_at   timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX memory_decisions_user_idx ON memory_decisions (user_id, created_at);
        CREATE INDEX memory_decisions_run_idx ON memory_decisions (run_id);

        -- Layer 3: profiles. `fields` is what the builder made from active items, `manual` what
        -- a person set by hand (it wins, and no rebuild touches it). `dirty` is set by a trigger
        -- whenever an item the profile reads changes, so a profile is rebuilt only then.
        CREATE TABLE memory_profiles (
            kind        text NOT NULL CHECK (kind IN ('user', 'project')),
            subject_id  text NOT NULL,
            fields      jsonb NOT NULL DEFAULT '{}'::jsonb,
            manual      jsonb NOT NULL DEFAULT '{}'::jsonb,
            dirty       boolean NOT NULL DEFAULT true,
            built_by    text CHECK (built_by IN ('llm', 'rules')),
            built_at    timestamptz,
            edited_by   text,
            edited_at   timestamptz,
            updated_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (kind, subject_id)
        );
        CREATE FUNCTION agent_memory_profile_inputs_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            IF TG_OP <> 'INSERT' AND OLD.scope IN ('user', 'project') THEN
                UPDATE memory_profiles SET dirty = true
                WHERE kind = OLD.scope AND subject_id = OLD.scope_id AND NOT dirty;
            END IF;
            IF TG_OP <> 'DELETE' AND NEW.scope IN ('user', 'project') THEN
                UPDATE memory_profiles SET dirty = true
                WHERE kind = NEW.scope AND subject_id = NEW.scope_id AND NOT dirty;
            END IF;
            RETURN NULL;
        END
        $fn$;
        -- Not on last_used_at/access_count: a search is not a change of what the user is.
        CREATE TRIGGER memory_items_profile_inputs
            AFTER INSERT OR DELETE OR UPDATE OF content, memory_type, status, scope, scope_id, visibility, version
            ON memory_items FOR EACH ROW EXECUTE FUNCTION agent_memory_profile_inputs_changed();
        """,
    ),
    Migration(
        "0008_access_control",
        """
        -- Projects, teams and orgs, each with members in roles. A project is created by its first
        -- writer (or create_project); a team or an org by create_team / create_org.
        CREATE TABLE memory_scopes (
            kind        text NOT NULL CHECK (kind IN ('project', 'team', 'org')),
            scope_id    text NOT NULL,
            created_by  text NOT NULL,
            created_at  timestamptz NOT NULL DEFAULT now(),
            settings    jsonb NOT NULL DEFAULT '{}'::jsonb,
            PRIMARY KEY (kind, scope_id)
        );
        CREATE TABLE memory_members (
            kind      text NOT NULL,
            scope_id  text NOT NULL,
            user_id   text NOT NULL,
            role      text NOT NULL,
            added_by  text,
            added_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (kind, scope_id, user_id),
            FOREIGN KEY (kind, scope_id) REFERENCES memory_scopes (kind, scope_id) ON DELETE CASCADE,
            CHECK ((kind = 'project' AND role IN ('owner', 'admin', 'editor', 'viewer'))
                OR (kind = 'team' AND role IN ('lead', 'member'))
                OR (kind = 'org' AND role IN ('admin', 'member')))
        );
        -- every read asks "which teams/orgs is this user in?" and "is this user in the project?"
        CREATE INDEX memory_members_user_idx ON memory_members (user_id, kind, scope_id);
        -- a project shared with a user, a team or an org: they read its public memories
        CREATE TABLE memory_project_shares (
            kind          text NOT NULL DEFAULT 'project' CHECK (kind = 'project'),
            project_id    text NOT NULL,
            grantee_kind  text NOT NULL CHECK (grantee_kind IN ('user', 'team', 'org')),
            grantee_id    text NOT NULL,
            shared_by     text,
            shared_at     timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (project_id, grantee_kind, grantee_id),
            FOREIGN KEY (kind, project_id) REFERENCES memory_scopes (kind, scope_id) ON DELETE CASCADE
        );
        CREATE INDEX memory_project_shares_grantee_idx ON memory_project_shares (grantee_kind, grantee_id);

        ALTER TABLE memory_items DROP CONSTRAINT memory_items_scope_check;
        ALTER TABLE memory_items ADD CONSTRAINT memory_items_scope_check
            CHECK (scope IN ('user', 'project', 'session', 'team', 'org'));

        -- Projects used before access control keep working for the people who used them: the
        -- first writer becomes the owner, everyone else who wrote to it an editor.
        INSERT INTO memory_scopes (kind, scope_id, created_by, created_at)
        SELECT DISTINCT ON (scope_id) 'project', scope_id, user_id, created_at
        FROM (SELECT scope_id, user_id, created_at FROM memory_items WHERE scope = 'project'
              UNION ALL
              SELECT scope_id, user_id, created_at FROM memory_resources WHERE scope = 'project') used
        ORDER BY scope_id, created_at, user_id;
        INSERT INTO memory_members (kind, scope_id, user_id, role, added_by)
        SELECT 'project', scope_id, created_by, 'owner', created_by FROM memory_scopes;
        INSERT INTO memory_members (kind, scope_id, user_id, role)
        SELECT DISTINCT 'project', scope_id, user_id, 'editor'
        FROM (SELECT scope_id, user_id FROM memory_items WHERE scope = 'project'
              UNION SELECT scope_id, user_id FROM memory_resources WHERE scope = 'project') used
        ON CONFLICT DO NOTHING;
        """,
    ),
    # ``agent-memory reembed`` (agent_memory.reembed): the next embedding model's vectors, made
    # in batches beside the live ones and swapped in at the end in one transaction. The column
    # is unsized so any model fits; ``content_md5`` tells a vector made from an older wording.
    Migration(
        "0009_reembed_staging",
        """
        CREATE TABLE memory_reembed (
            id           uuid PRIMARY KEY REFERENCES memory_items (id) ON DELETE CASCADE,
            content_md5  text NOT NULL,
            embedding    vector NOT NULL
        );
        """,
    ),
    # Search at scale (BENCHMARKS.md, "Search at scale"). A search reads only index pages:
    # ``memory_items_search_idx`` holds, per scope, everything the vector ranking and the tenancy
    # test need, the vector as ``halfvec`` (half the bytes: a scan costs what it reads), so a
    # 20,000-memory project is one contiguous index range read without touching the table; and
    # ``memory_terms`` is a per-scope inverted index of the active memories' lexemes that gives
    # BM25 its document frequencies and term counts. Ids enter both as 64-bit keys (md5, so no
    # caller can aim a collision at someone else's scope): index rows stay small whatever
    # characters an id holds, and every result is re-checked against the ids themselves, and
    # re-scored with the full vector, before it leaves the database.
    Migration(
        "0010_search_at_scale",
        """
        CREATE FUNCTION agent_memory_key(value text) RETURNS bigint
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            RETURN ('x' || left(md5(value), 16))::bit(64)::bigint;
        ALTER TABLE memory_items
            ADD COLUMN scope_key bigint GENERATED ALWAYS AS (agent_memory_key(scope_id)) STORED,
            ADD COLUMN owner_key bigint GENERATED ALWAYS AS (agent_memory_key(user_id)) STORED,
            ADD COLUMN embedding_half halfvec GENERATED ALWAYS AS (embedding::halfvec) STORED;
        DO $do$ BEGIN
            IF {dimensions} <= 1024 THEN
                CREATE INDEX memory_items_search_idx ON memory_items (scope, scope_key, status) INCLUDE (owner_key, visibility, memory_type, confidence, id, embedding_half);
            ELSE
                CREATE INDEX memory_items_search_idx ON memory_items (scope, scope_key, status) INCLUDE (owner_key, visibility, memory_type, confidence, id);
            END IF;
        END $do$;

        -- A search records its hits' use (last_used_at, access_count), which takes their heap
        -- pages out of the visibility map until VACUUM runs again; until then an index-only
        -- read must visit those pages (a 10,000-memory scope after 300 searches: 2,601 of
        -- 10,000 rows). Vacuum after 2 % of the rows changed instead of the default 20 %.
        ALTER TABLE memory_items SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 200);

        -- The number of rows a caller sees (BM25's ``n``) from an index of small keys that
        -- deduplicates: a 20,000-memory project is a few dozen pages here.
        CREATE INDEX memory_items_count_idx ON memory_items (scope, scope_key, status, memory_type, visibility, owner_key);

        CREATE TABLE memory_terms (
            scope        text NOT NULL,
            scope_key    bigint NOT NULL,
            lexeme       text NOT NULL,
            id           uuid NOT NULL,
            tf           integer NOT NULL,
            owner_key    bigint NOT NULL,
            visibility   text NOT NULL,
            memory_type  text NOT NULL
        );
        CREATE INDEX memory_terms_lookup_idx ON memory_terms (scope, scope_key, lexeme)
            INCLUDE (id, tf, owner_key, visibility, memory_type);
        CREATE INDEX memory_terms_id_idx ON memory_terms (id);

        -- Kept by triggers, so every write path (saves, imports, edits, status changes, erasure,
        -- id replacement) keeps it true. Only active memories are indexed: a search with another
        -- status filter or ``as_of`` scans the table instead.
        CREATE FUNCTION agent_memory_terms_added() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            INSERT INTO memory_terms (scope, scope_key, lexeme, id, tf, owner_key, visibility, memory_type)
            SELECT n.scope, n.scope_key, u.lexeme, n.id, coalesce(cardinality(u.positions), 1),
                   n.owner_key, n.visibility, n.memory_type
            FROM added n CROSS JOIN LATERAL unnest(n.content_tsv) AS u
            WHERE n.status = 'active';
            RETURN NULL;
        END
        $fn$;
        CREATE FUNCTION agent_memory_terms_removed() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            DELETE FROM memory_terms t USING removed o WHERE t.id = o.id;
            RETURN NULL;
        END
        $fn$;
        CREATE FUNCTION agent_memory_terms_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            DELETE FROM memory_terms WHERE id = OLD.id;
            IF NEW.status = 'active' THEN
                INSERT INTO memory_terms (scope, scope_key, lexeme, id, tf, owner_key, visibility, memory_type)
                SELECT NEW.scope, NEW.scope_key, u.lexeme, NEW.id, coalesce(cardinality(u.positions), 1),
                       NEW.owner_key, NEW.visibility, NEW.memory_type
                FROM unnest(NEW.content_tsv) AS u;
            END IF;
            RETURN NULL;
        END
        $fn$;
        CREATE FUNCTION agent_memory_terms_truncated() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            TRUNCATE memory_terms;
            RETURN NULL;
        END
        $fn$;
        CREATE TRIGGER memory_items_terms_insert AFTER INSERT ON memory_items
            REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION agent_memory_terms_added();
        CREATE TRIGGER memory_items_terms_delete AFTER DELETE ON memory_items
            REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION agent_memory_terms_removed();
        -- Row by row and only when an indexed column changes, so recording a search hit's use
        -- (last_used_at, access_count) costs nothing here.
        CREATE TRIGGER memory_items_terms_update
            AFTER UPDATE OF id, content, status, scope, scope_id, user_id, visibility, memory_type ON memory_items
            FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id
                               OR OLD.content IS DISTINCT FROM NEW.content OR OLD.status IS DISTINCT FROM NEW.status
                               OR OLD.scope IS DISTINCT FROM NEW.scope OR OLD.scope_id IS DISTINCT FROM NEW.scope_id
                               OR OLD.user_id IS DISTINCT FROM NEW.user_id
                               OR OLD.visibility IS DISTINCT FROM NEW.visibility
                               OR OLD.memory_type IS DISTINCT FROM NEW.memory_type)
            EXECUTE FUNCTION agent_memory_terms_changed();
        CREATE TRIGGER memory_items_terms_truncate AFTER TRUNCATE ON memory_items
            FOR EACH STATEMENT EXECUTE FUNCTION agent_memory_terms_truncated();

        INSERT INTO memory_terms (scope, scope_key, lexeme, id, tf, owner_key, visibility, memory_type)
        SELECT m.scope, m.scope_key, u.lexeme, m.id, coalesce(cardinality(u.positions), 1),
               m.owner_key, m.visibility, m.memory_type
        FROM memory_items m CROSS JOIN LATERAL unnest(m.content_tsv) AS u
        WHERE m.status = 'active';
        """,
    ),
    Migration(
        "0011_keys_and_expiry",
        # A memory may be addressed by a key, unique in its scope (a session's keys are its
        # user's), and may expire. Expired memories are filtered out by every read until a sweep
        # deletes them, so the search index, the count index and the keyword postings carry
        # ``expires_at`` too: the indexed search stays index-only and exact. Profiles record when
        # their earliest input expires (``stale_at``) and are rebuilt from then on.
        """
        ALTER TABLE memory_items
            ADD COLUMN key text CHECK (key IS NULL OR length(key) BETWEEN 1 AND 1024),
            ADD COLUMN expires_at timestamptz;
        CREATE UNIQUE INDEX memory_items_key_idx ON memory_items
            (scope, scope_id, (CASE WHEN scope = 'session' THEN user_id ELSE '' END), key)
            WHERE key IS NOT NULL AND status <> 'superseded';
        CREATE INDEX memory_items_expiry_idx ON memory_items (expires_at) WHERE expires_at IS NOT NULL;

        DROP INDEX memory_items_search_idx;
        DO $do$ BEGIN
            IF {dimensions} <= 1024 THEN
                CREATE INDEX memory_items_search_idx ON memory_items (scope, scope_key, status) INCLUDE (owner_key, visibility, memory_type, confidence, expires_at, id, embedding_half);
            ELSE
                CREATE INDEX memory_items_search_idx ON memory_items (scope, scope_key, status) INCLUDE (owner_key, visibility, memory_type, confidence, expires_at, id);
            END IF;
        END $do$;
        DROP INDEX memory_items_count_idx;
        CREATE INDEX memory_items_count_idx ON memory_items
            (scope, scope_key, status, memory_type, visibility, owner_key) INCLUDE (expires_at);

        ALTER TABLE memory_terms ADD COLUMN expires_at timestamptz;
        DROP INDEX memory_terms_lookup_idx;
        CREATE INDEX memory_terms_lookup_idx ON memory_terms (scope, scope_key, lexeme)
            INCLUDE (id, tf, owner_key, visibility, memory_type, expires_at);
        CREATE OR REPLACE FUNCTION agent_memory_terms_added() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            INSERT INTO memory_terms (scope, scope_key, lexeme, id, tf, owner_key, visibility, memory_type, expires_at)
            SELECT n.scope, n.scope_key, u.lexeme, n.id, coalesce(cardinality(u.positions), 1),
                   n.owner_key, n.visibility, n.memory_type, n.expires_at
            FROM added n CROSS JOIN LATERAL unnest(n.content_tsv) AS u
            WHERE n.status = 'active';
            RETURN NULL;
        END
        $fn$;
        CREATE OR REPLACE FUNCTION agent_memory_terms_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            IF (OLD.id, OLD.content, OLD.status, OLD.scope, OLD.scope_id, OLD.user_id, OLD.visibility,
                OLD.memory_type) IS NOT DISTINCT FROM (NEW.id, NEW.content, NEW.status, NEW.scope, NEW.scope_id,
                NEW.user_id, NEW.visibility, NEW.memory_type) THEN
                -- only the expiry moved (a store's refresh on read): the postings keep their words
                UPDATE memory_terms SET expires_at = NEW.expires_at WHERE id = NEW.id;
                RETURN NULL;
            END IF;
            DELETE FROM memory_terms WHERE id = OLD.id;
            IF NEW.status = 'active' THEN
                INSERT INTO memory_terms (scope, scope_key, lexeme, id, tf, owner_key, visibility, memory_type,
                                          expires_at)
                SELECT NEW.scope, NEW.scope_key, u.lexeme, NEW.id, coalesce(cardinality(u.positions), 1),
                       NEW.owner_key, NEW.visibility, NEW.memory_type, NEW.expires_at
                FROM unnest(NEW.content_tsv) AS u;
            END IF;
            RETURN NULL;
        END
        $fn$;
        DROP TRIGGER memory_items_terms_update ON memory_items;
        CREATE TRIGGER memory_items_terms_update
            AFTER UPDATE OF id, content, status, scope, scope_id, user_id, visibility, memory_type, expires_at
            ON memory_items
            FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id
                               OR OLD.content IS DISTINCT FROM NEW.content OR OLD.status IS DISTINCT FROM NEW.status
                               OR OLD.scope IS DISTINCT FROM NEW.scope OR OLD.scope_id IS DISTINCT FROM NEW.scope_id
                               OR OLD.user_id IS DISTINCT FROM NEW.user_id
                               OR OLD.visibility IS DISTINCT FROM NEW.visibility
                               OR OLD.memory_type IS DISTINCT FROM NEW.memory_type
                               OR OLD.expires_at IS DISTINCT FROM NEW.expires_at)
            EXECUTE FUNCTION agent_memory_terms_changed();

        ALTER TABLE memory_profiles ADD COLUMN stale_at timestamptz;
        DROP TRIGGER memory_items_profile_inputs ON memory_items;
        CREATE TRIGGER memory_items_profile_inputs
            AFTER INSERT OR DELETE OR UPDATE OF content, memory_type, status, scope, scope_id, visibility, version,
                                                expires_at
            ON memory_items FOR EACH ROW EXECUTE FUNCTION agent_memory_profile_inputs_changed();
        """,
    ),
    Migration(
        "0012_salience",
        # How much a memory still matters: ``salience`` (0..1) as of ``salience_at``, halving every
        # ``stability`` days; a recall raises it and, the longer the memory went unrecalled, the
        # more it lengthens ``stability`` (spaced repetition). ``retention`` says what maintenance
        # may do: ``keep`` (never archive), ``decay`` (archive once faded and unused, when the
        # operator turns that on), ``ephemeral`` (archive once unused for a short while).
        # None of these columns is indexed, so recording a recall stays a HOT update.
        """
        ALTER TABLE memory_items
            ADD COLUMN retention text NOT NULL DEFAULT 'decay' CHECK (retention IN ('keep', 'decay', 'ephemeral')),
            ADD COLUMN salience real NOT NULL DEFAULT 1 CHECK (salience >= 0 AND salience <= 1),
            ADD COLUMN salience_at timestamptz NOT NULL DEFAULT now(),
            ADD COLUMN stability real NOT NULL DEFAULT 7 CHECK (stability > 0);
        """,
    ),
    Migration(
        "0013_document_passages",
        # A document cut into passages (agent_memory.documents): each embedded (sized like
        # memory_items' vectors) and indexed for keywords, so documents are searched by passage.
        # Owner and scope are copied from the resource (forgetting a user and deleting a scope
        # find them without a join); reads go through the resource's own visibility. A passage
        # goes with its resource. ``content_hash`` identifies a passage across versions of its
        # document, ``extracted_at`` says extraction has read it. No ANN index: a caller's
        # passages are scanned exactly, as memories are. ``embedding`` is NULL only between a
        # re-embedding's switch of models and its passes over the passages (found by words meanwhile).
        """
        CREATE TABLE memory_passages (
            id            uuid PRIMARY KEY,
            resource_id   uuid NOT NULL REFERENCES memory_resources (id) ON DELETE CASCADE,
            user_id       text NOT NULL,
            scope         text NOT NULL CHECK (scope IN ('user', 'project', 'session')),
            scope_id      text NOT NULL,
            position      integer NOT NULL CHECK (position >= 0),
            char_start    integer NOT NULL CHECK (char_start >= 0),
            char_end      integer NOT NULL CHECK (char_end >= char_start),
            headings      text[] NOT NULL DEFAULT '{}',
            content       text NOT NULL,
            content_hash  text NOT NULL,
            embedding     vector({dimensions}),
            content_tsv   tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED,
            extracted_at  timestamptz,
            created_at    timestamptz NOT NULL DEFAULT now(),
            updated_at    timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX memory_passages_resource_idx ON memory_passages (resource_id, position);
        CREATE INDEX memory_passages_scope_idx ON memory_passages (scope, scope_id);
        CREATE INDEX memory_passages_owner_idx ON memory_passages (user_id);
        CREATE INDEX memory_passages_tsv_idx ON memory_passages USING gin (content_tsv);
        """,
    ),
    Migration(
        "0014_bitemporal",
        # Two timelines. ``valid_from``/``valid_to`` become event time: when the fact held in the
        # world ("moved to Lisbon last month" holds from a month ago). ``recorded_at``/``known_to``
        # are record time: when the memory learned the fact and when it stopped holding it (a
        # supersession). Existing rows keep today's answers: they were recorded when they were
        # created, and a superseded one stopped being held when its successor took over.
        # ``memory_item_history.embedding`` keeps the vector of each earlier wording, so a search
        # of the past ranks an item by what it said then (NULL for wordings kept before this:
        # such a search falls back to the current vector). Nothing new is indexed: past reads
        # scan the caller's rows, as they did. ``recorded_at`` stays nullable so that an export
        # made before it imports; reads take a NULL as ``created_at``.
        """
        ALTER TABLE memory_items
            ADD COLUMN recorded_at timestamptz,
            ADD COLUMN known_to    timestamptz;
        UPDATE memory_items SET recorded_at = created_at,
                                known_to = CASE WHEN status = 'superseded' THEN coalesce(valid_to, updated_at) END;
        ALTER TABLE memory_items ALTER COLUMN recorded_at SET DEFAULT now();
        ALTER TABLE memory_item_history ADD COLUMN embedding vector;
        """,
    ),
    Migration(
        "0015_metadata_filters",
        # Filters compare ISO dates held in metadata as times (``{"due": {"$lt": "2026-12-01"}}``):
        # this reads a string as a time, or NULL when it is not one, so a malformed value never
        # makes a whole search fail. No zone means UTC, whatever the session's TimeZone. (About
        # 2.5 us a value on the benchmark machine; a plain-SQL version with ``pg_input_is_valid``,
        # PostgreSQL 16+ only, measured the same.)
        r"""
        CREATE OR REPLACE FUNCTION agent_memory_timestamp(value text) RETURNS timestamptz
        LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
        BEGIN
            IF value IS NULL OR value !~ '^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|z|[+-]\d{2}(:?\d{2})?)?$' THEN
                RETURN NULL;
            END IF;
            IF length(value) > 10 AND value ~ '(Z|z|[+-]\d{2}(:?\d{2})?)$' THEN
                RETURN value::timestamptz;
            END IF;
            RETURN value::timestamp AT TIME ZONE 'UTC';
        EXCEPTION WHEN others THEN
            RETURN NULL;
        END $$;
        """,
    ),
    Migration(
        "0016_scope_vector_cache",
        # What a process's copy of a big scope's vectors (:mod:`agent_memory.vector_cache`) needs to
        # stay true without re-reading the scope: ``changed_xid``, the transaction that last changed
        # anything a search's candidate list depends on (set on insert by the default, on update by
        # the trigger; recording a hit's use changes none of it, so HOT updates stay HOT), indexed
        # per scope; and per scope the last transaction that deleted rows from it or moved rows out
        # of it (a copy older than that is read again in full). Existing rows keep a NULL: they
        # are older than any copy. The column is added without a default first: a volatile
        # default would rewrite the table.
        """
        ALTER TABLE memory_items ADD COLUMN changed_xid xid8;
        ALTER TABLE memory_items ALTER COLUMN changed_xid SET DEFAULT pg_current_xact_id();
        CREATE INDEX memory_items_changed_idx ON memory_items (scope, scope_key, changed_xid);
        CREATE TABLE memory_scope_resets (
            scope      text NOT NULL,
            scope_key  bigint NOT NULL,
            xid        xid8 NOT NULL,
            PRIMARY KEY (scope, scope_key)
        );
        -- Only for updates that set one of these columns, so recording a hit's use (which sets
        -- none) does not even test it. It names no vector: a column a trigger's definition names
        -- cannot change type, and re-embedding with another model changes ``embedding``'s; an
        -- edit changes the content with the vector, and re-embedding stamps the rows itself
        -- (queries/reembed.py).
        CREATE FUNCTION agent_memory_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            NEW.changed_xid := pg_current_xact_id();
            RETURN NEW;
        END
        $fn$;
        CREATE TRIGGER memory_items_changed
            BEFORE UPDATE OF content, confidence, status, visibility, user_id, expires_at, memory_type, scope,
                             scope_id, id ON memory_items
            FOR EACH ROW WHEN (OLD.content IS DISTINCT FROM NEW.content
                               OR OLD.confidence IS DISTINCT FROM NEW.confidence
                               OR OLD.status IS DISTINCT FROM NEW.status
                               OR OLD.visibility IS DISTINCT FROM NEW.visibility
                               OR OLD.user_id IS DISTINCT FROM NEW.user_id
                               OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
                               OR OLD.memory_type IS DISTINCT FROM NEW.memory_type
                               OR OLD.scope IS DISTINCT FROM NEW.scope
                               OR OLD.scope_id IS DISTINCT FROM NEW.scope_id
                               OR OLD.id IS DISTINCT FROM NEW.id)
            EXECUTE FUNCTION agent_memory_changed();
        -- in key order, so two statements resetting the same scopes lock them in one order
        CREATE FUNCTION agent_memory_scopes_reset() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            INSERT INTO memory_scope_resets (scope, scope_key, xid)
            SELECT DISTINCT o.scope, o.scope_key, pg_current_xact_id() FROM removed o ORDER BY 1, 2
            ON CONFLICT (scope, scope_key) DO UPDATE SET xid = excluded.xid;
            RETURN NULL;
        END
        $fn$;
        CREATE TRIGGER memory_items_reset_delete AFTER DELETE ON memory_items
            REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION agent_memory_scopes_reset();
        CREATE FUNCTION agent_memory_scope_left() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            INSERT INTO memory_scope_resets (scope, scope_key, xid) VALUES (OLD.scope, OLD.scope_key, pg_current_xact_id())
            ON CONFLICT (scope, scope_key) DO UPDATE SET xid = excluded.xid;
            RETURN NULL;
        END
        $fn$;
        CREATE TRIGGER memory_items_reset_move AFTER UPDATE OF id, scope, scope_id ON memory_items
            FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.scope IS DISTINCT FROM NEW.scope
                               OR OLD.scope_id IS DISTINCT FROM NEW.scope_id)
            EXECUTE FUNCTION agent_memory_scope_left();
        -- ('*', 0): every scope
        CREATE FUNCTION agent_memory_scopes_truncated() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            INSERT INTO memory_scope_resets (scope, scope_key, xid) VALUES ('*', 0, pg_current_xact_id())
            ON CONFLICT (scope, scope_key) DO UPDATE SET xid = excluded.xid;
            RETURN NULL;
        END
        $fn$;
        CREATE TRIGGER memory_items_reset_truncate AFTER TRUNCATE ON memory_items
            FOR EACH STATEMENT EXECUTE FUNCTION agent_memory_scopes_truncated();
        """,
    ),
    Migration(
        "0017_history_visibility",
        # The past is read under the rules of then: each kept wording keeps the scope and the
        # visibility its memory had while it held, so a reader sees an earlier version only if they
        # could read it then (and can read the memory now). A put by key that widens a memory
        # (owner_only -> members -> public) would otherwise show its earlier, narrower wordings to
        # every new reader. Versions kept before this get their memory's current scope and
        # visibility (nothing better is known). An insert that names none of them (an import of an
        # older export) gets its memory's too, from the trigger; a revision names them itself.
        """
        ALTER TABLE memory_item_history
            ADD COLUMN scope      text CHECK (scope IN ('user', 'session', 'project', 'team', 'org')),
            ADD COLUMN scope_id   text,
            ADD COLUMN visibility text CHECK (visibility IN ('public', 'members', 'owner_only'));
        UPDATE memory_item_history h SET scope = m.scope, scope_id = m.scope_id, visibility = m.visibility
            FROM memory_items m WHERE m.id = h.memory_id;
        ALTER TABLE memory_item_history
            ALTER COLUMN scope SET NOT NULL,
            ALTER COLUMN scope_id SET NOT NULL,
            ALTER COLUMN visibility SET NOT NULL;
        CREATE FUNCTION agent_memory_history_level() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            SELECT coalesce(NEW.scope, m.scope), coalesce(NEW.scope_id, m.scope_id),
                   coalesce(NEW.visibility, m.visibility)
              INTO NEW.scope, NEW.scope_id, NEW.visibility
              FROM memory_items m WHERE m.id = NEW.memory_id;
            RETURN NEW;
        END
        $fn$;
        CREATE TRIGGER memory_item_history_level BEFORE INSERT ON memory_item_history
            FOR EACH ROW WHEN (NEW.scope IS NULL OR NEW.scope_id IS NULL OR NEW.visibility IS NULL)
            EXECUTE FUNCTION agent_memory_history_level();
        """,
    ),
    Migration(
        "0018_memory_context",
        # A memory keeps the context it was written in (issue 29): the text around it (the turns
        # before a conversation's turn, the turns a memory was extracted from, a passage's
        # neighbours and headings), its position in its source (``source_id`` names the source;
        # one add_many gives every turn the same created_at, so order needs its own column) and
        # the context's vector, made in the same embedding batch as the memory's own. All NULL
        # for a memory added by hand. Plain columns of memory_items: forget, delete-scope and the
        # export cover them with the rows they belong to.
        """
        ALTER TABLE memory_items
            ADD COLUMN context           text CHECK (context IS NULL OR length(context) > 0),
            ADD COLUMN context_position  integer CHECK (context_position IS NULL OR context_position >= 0),
            ADD COLUMN context_embedding vector({dimensions}),
            ADD CONSTRAINT memory_items_context_vector CHECK (context_embedding IS NULL OR context IS NOT NULL);
        -- a re-embedding stages the context's vector beside the memory's own (agent_memory.reembed)
        ALTER TABLE memory_reembed ADD COLUMN context_embedding vector;
        -- the search reads the context's vector from the search index, as it reads the memory's
        -- own: its halfvec copy (within HALF_ERROR), NULL (no bytes) for a memory without context
        ALTER TABLE memory_items
            ADD COLUMN context_half halfvec GENERATED ALWAYS AS (context_embedding::halfvec) STORED;
        DROP INDEX memory_items_search_idx;
        DO $do$ BEGIN
            IF {dimensions} <= 600 THEN
                CREATE INDEX memory_items_search_idx ON memory_items (scope, scope_key, status) INCLUDE (owner_key, visibility, memory_type, confidence, expires_at, id, embedding_half, context_half);
            ELSIF {dimensions} <= 1024 THEN
                CREATE INDEX memory_items_search_idx ON memory_items (scope, scope_key, status) INCLUDE (owner_key, visibility, memory_type, confidence, expires_at, id, embedding_half);
            ELSE
                CREATE INDEX memory_items_search_idx ON memory_items (scope, scope_key, status) INCLUDE (owner_key, visibility, memory_type, confidence, expires_at, id);
            END IF;
        END $do$;
        """,
    ),
    Migration(
        "0019_custom_memory_types",
        # A deployment may add its own memory types (MemoryConfig.custom_memory_types): the type
        # is no longer one of eight names but any name shaped like them (models.MEMORY_TYPE_NAME).
        # Which types a caller may write is the config's to say; the database keeps the shape.
        """
        ALTER TABLE memory_items DROP CONSTRAINT memory_items_memory_type_check;
        ALTER TABLE memory_items ADD CONSTRAINT memory_items_memory_type_check
            CHECK (memory_type ~ '^[a-z][a-z0-9_]{1,31}$');
        """,
    ),
    Migration(
        "0020_optional_embedding",
        # A LangGraph store built without an index embeds nothing (as LangGraph's own stores): its
        # memories have no vector. Every search scores a row without one at vector similarity 0 (it
        # is found by its words); duplicate checks, which compare vectors, pass it by; the vector
        # indexes leave it out. ``agent-memory reembed`` gives it one.
        """
        ALTER TABLE memory_items ALTER COLUMN embedding DROP NOT NULL;
        """,
    ),
    Migration(
        "0021_knowledge_graph",
        # The knowledge graph (agent_memory.graph): the people, things and ideas memories are
        # about, which memories mention them, and how they relate. Born distributable: every table
        # carries the scope key (scope, scope_id) and every primary or unique key begins with it;
        # foreign keys join rows of one scope only; no triggers. Notes are a jsonb array of
        # {content, added_by, added_at, source_id, expires_at}; a relation has two timelines like a
        # memory (valid_from/valid_to: the world; recorded_at/known_to: what memory believed).
        """
        CREATE TABLE graph_nodes (
            scope           text NOT NULL CHECK (scope IN ('user', 'project', 'team', 'org')),
            scope_id        text NOT NULL,
            id              uuid NOT NULL,
            node_type       text NOT NULL CHECK (node_type IN ('person', 'concept', 'entity')),
            entity_type     text NOT NULL DEFAULT '',
            name            text NOT NULL,
            canonical_name  text NOT NULL,
            aliases         text[] NOT NULL DEFAULT '{}',
            description     text NOT NULL DEFAULT '',
            notes           jsonb NOT NULL DEFAULT '[]'::jsonb,
            embedding       vector({dimensions}),
            is_owner        boolean NOT NULL DEFAULT false,
            confidence      real NOT NULL DEFAULT 0.5 CHECK (confidence BETWEEN 0 AND 1),
            salience        real NOT NULL DEFAULT 0.1 CHECK (salience BETWEEN 0 AND 1),
            recall_count    integer NOT NULL DEFAULT 0,
            last_recall_interval_days real,
            decay_gradient  real NOT NULL DEFAULT 1.0,
            access_count    integer NOT NULL DEFAULT 0,
            last_accessed_at timestamptz,
            state           text NOT NULL DEFAULT 'candidate'
                            CHECK (state IN ('candidate', 'active', 'core', 'archived')),
            retention       text NOT NULL DEFAULT 'decay' CHECK (retention IN ('keep', 'decay', 'ephemeral')),
            is_dirty        boolean NOT NULL DEFAULT false,
            source_count    integer NOT NULL DEFAULT 0,
            first_mentioned_at timestamptz,
            last_mentioned_at  timestamptz,
            distinct_days   date[] NOT NULL DEFAULT '{}',
            created_by      text NOT NULL,
            created_at      timestamptz NOT NULL DEFAULT now(),
            updated_at      timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (scope, scope_id, id),
            UNIQUE (scope, scope_id, node_type, entity_type, canonical_name)
        );
        CREATE UNIQUE INDEX graph_nodes_owner_idx ON graph_nodes (scope, scope_id) WHERE is_owner;
        -- resolution by name, and by a spelling of the same first letter (a byte range: COLLATE "C")
        CREATE INDEX graph_nodes_name_idx ON graph_nodes (scope, scope_id, canonical_name COLLATE "C");
        CREATE INDEX graph_nodes_aliases_idx ON graph_nodes USING gin (aliases);
        CREATE INDEX graph_nodes_creator_idx ON graph_nodes (created_by);
        CREATE TABLE graph_mentions (
            scope        text NOT NULL,
            scope_id     text NOT NULL,
            node_id      uuid NOT NULL,
            source_kind  text NOT NULL CHECK (source_kind IN ('memory', 'resource', 'passage')),
            source_id    uuid NOT NULL,
            mentioned_at timestamptz NOT NULL DEFAULT now(),
            added_by     text NOT NULL,
            PRIMARY KEY (scope, scope_id, node_id, source_kind, source_id),
            FOREIGN KEY (scope, scope_id, node_id) REFERENCES graph_nodes (scope, scope_id, id) ON DELETE CASCADE
        );
        CREATE INDEX graph_mentions_source_idx ON graph_mentions (scope, scope_id, source_kind, source_id);
        CREATE INDEX graph_mentions_adder_idx ON graph_mentions (added_by);
        CREATE TABLE graph_relations (
            scope        text NOT NULL,
            scope_id     text NOT NULL,
            id           uuid NOT NULL,
            from_node    uuid NOT NULL,
            to_node      uuid NOT NULL,
            kind         text NOT NULL CHECK (kind IN ('has_relationship_with', 'engages_with', 'associated_with',
                                                       'relates_to', 'involves', 'connected_to')),
            rel_type     text NOT NULL,
            description  text NOT NULL DEFAULT '',
            attitude     smallint CHECK (attitude BETWEEN 1 AND 5),
            proximity    smallint CHECK (proximity BETWEEN 1 AND 5),
            notes        jsonb NOT NULL DEFAULT '[]'::jsonb,
            confidence   real NOT NULL DEFAULT 0.5 CHECK (confidence BETWEEN 0 AND 1),
            salience     real NOT NULL DEFAULT 0.1 CHECK (salience BETWEEN 0 AND 1),
            recall_count integer NOT NULL DEFAULT 0,
            access_count integer NOT NULL DEFAULT 0,
            last_accessed_at timestamptz,
            state        text NOT NULL DEFAULT 'candidate'
                         CHECK (state IN ('candidate', 'active', 'core', 'archived')),
            source_memory uuid,
            recorded_by  text NOT NULL,
            valid_from   timestamptz NOT NULL DEFAULT now(),
            valid_to     timestamptz,
            recorded_at  timestamptz NOT NULL DEFAULT now(),
            known_to     timestamptz,
            created_at   timestamptz NOT NULL DEFAULT now(),
            updated_at   timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (scope, scope_id, id),
            CHECK (valid_to IS NULL OR valid_to >= valid_from),
            FOREIGN KEY (scope, scope_id, from_node) REFERENCES graph_nodes (scope, scope_id, id) ON DELETE CASCADE,
            FOREIGN KEY (scope, scope_id, to_node) REFERENCES graph_nodes (scope, scope_id, id) ON DELETE CASCADE
        );
        -- one current relation of a type between two nodes (a closed one stays beside its successor)
        CREATE UNIQUE INDEX graph_relations_current_idx ON graph_relations (scope, scope_id, from_node, to_node, rel_type)
            WHERE valid_to IS NULL AND known_to IS NULL;
        CREATE INDEX graph_relations_to_idx ON graph_relations (scope, scope_id, to_node);
        CREATE INDEX graph_relations_recorder_idx ON graph_relations (recorded_by);
        """,
    ),
    Migration(
        "0022_distributable",
        # Born distributable (issue 30, agent_memory.db.distributed): every per-scope table is keyed
        # by the scope it lives in, ``scope_id``, which Citus can hash rows by (``scope_key`` is
        # generated, which a distribution column may not be), so every primary key names it, and
        # the keyword postings and a re-embedding's staged vectors carry it too. Foreign keys between
        # per-scope tables join on it (a history, a staged vector and a passage live in their memory's
        # or resource's scope). Two links may cross scopes and keep a unique ``id`` to point at on one
        # server (a successor in another scope; an extraction run's resource): a cluster cannot hold
        # them, and distributing drops them (distributed.SINGLE_NODE_ONLY). The postings' triggers
        # touch the rows of the changed memory's own scope only, so Citus runs them on its shard.
        """
        ALTER TABLE memory_item_history DROP CONSTRAINT memory_item_history_memory_id_fkey;
        ALTER TABLE memory_reembed DROP CONSTRAINT memory_reembed_id_fkey;
        ALTER TABLE memory_items DROP CONSTRAINT memory_items_superseded_by_fkey;
        ALTER TABLE memory_items DROP CONSTRAINT memory_items_pkey;
        ALTER TABLE memory_items ADD CONSTRAINT memory_items_pkey PRIMARY KEY (scope_id, id);
        ALTER TABLE memory_items ADD CONSTRAINT memory_items_id_key UNIQUE (id);
        ALTER TABLE memory_items ADD CONSTRAINT memory_items_superseded_by_fkey
            FOREIGN KEY (superseded_by) REFERENCES memory_items (id) ON DELETE SET NULL;

        ALTER TABLE memory_item_history DROP CONSTRAINT memory_item_history_pkey;
        ALTER TABLE memory_item_history ADD CONSTRAINT memory_item_history_pkey
            PRIMARY KEY (scope_id, memory_id, version);
        ALTER TABLE memory_item_history ADD CONSTRAINT memory_item_history_memory_id_fkey
            FOREIGN KEY (scope_id, memory_id) REFERENCES memory_items (scope_id, id) ON DELETE CASCADE;
        CREATE INDEX memory_item_history_memory_idx ON memory_item_history (memory_id, version);

        ALTER TABLE memory_reembed ADD COLUMN scope_id text;
        UPDATE memory_reembed r SET scope_id = m.scope_id FROM memory_items m WHERE m.id = r.id;
        DELETE FROM memory_reembed WHERE scope_id IS NULL;
        ALTER TABLE memory_reembed ALTER COLUMN scope_id SET NOT NULL;
        ALTER TABLE memory_reembed DROP CONSTRAINT memory_reembed_pkey;
        ALTER TABLE memory_reembed ADD CONSTRAINT memory_reembed_pkey PRIMARY KEY (scope_id, id);
        ALTER TABLE memory_reembed ADD CONSTRAINT memory_reembed_id_fkey
            FOREIGN KEY (scope_id, id) REFERENCES memory_items (scope_id, id) ON DELETE CASCADE;

        ALTER TABLE memory_passages DROP CONSTRAINT memory_passages_resource_id_fkey;
        ALTER TABLE memory_extraction_runs DROP CONSTRAINT memory_extraction_runs_resource_id_fkey;
        ALTER TABLE memory_resources DROP CONSTRAINT memory_resources_pkey;
        ALTER TABLE memory_resources ADD CONSTRAINT memory_resources_pkey PRIMARY KEY (scope_id, id);
        ALTER TABLE memory_resources ADD CONSTRAINT memory_resources_id_key UNIQUE (id);
        ALTER TABLE memory_extraction_runs ADD CONSTRAINT memory_extraction_runs_resource_id_fkey
            FOREIGN KEY (resource_id) REFERENCES memory_resources (id) ON DELETE SET NULL;
        ALTER TABLE memory_passages DROP CONSTRAINT memory_passages_pkey;
        ALTER TABLE memory_passages ADD CONSTRAINT memory_passages_pkey PRIMARY KEY (scope_id, id);
        ALTER TABLE memory_passages ADD CONSTRAINT memory_passages_resource_id_fkey
            FOREIGN KEY (scope_id, resource_id) REFERENCES memory_resources (scope_id, id) ON DELETE CASCADE;
        CREATE INDEX memory_passages_id_idx ON memory_passages (id);

        -- the postings carry their memory's scope id (the distribution column), and the triggers
        -- address a memory's postings by it, so each statement stays on the memory's shard
        ALTER TABLE memory_terms ADD COLUMN scope_id text;
        UPDATE memory_terms t SET scope_id = m.scope_id FROM memory_items m WHERE m.id = t.id;
        DELETE FROM memory_terms WHERE scope_id IS NULL;
        ALTER TABLE memory_terms ALTER COLUMN scope_id SET NOT NULL;
        -- One server fires these once per statement, over its transition table; Citus keeps no
        -- transition tables on a shard, so a cluster fires them once per row (db.distributed).
        CREATE OR REPLACE FUNCTION agent_memory_terms_added() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            IF TG_LEVEL = 'ROW' THEN
                IF NEW.status = 'active' THEN
                    INSERT INTO memory_terms (scope, scope_key, scope_id, lexeme, id, tf, owner_key, visibility,
                                              memory_type, expires_at)
                    SELECT NEW.scope, NEW.scope_key, NEW.scope_id, u.lexeme, NEW.id,
                           coalesce(cardinality(u.positions), 1), NEW.owner_key, NEW.visibility, NEW.memory_type,
                           NEW.expires_at
                    FROM unnest(NEW.content_tsv) AS u;
                END IF;
                RETURN NULL;
            END IF;
            INSERT INTO memory_terms (scope, scope_key, scope_id, lexeme, id, tf, owner_key, visibility, memory_type,
                                      expires_at)
            SELECT n.scope, n.scope_key, n.scope_id, u.lexeme, n.id, coalesce(cardinality(u.positions), 1),
                   n.owner_key, n.visibility, n.memory_type, n.expires_at
            FROM added n CROSS JOIN LATERAL unnest(n.content_tsv) AS u
            WHERE n.status = 'active';
            RETURN NULL;
        END
        $fn$;
        CREATE OR REPLACE FUNCTION agent_memory_terms_removed() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            IF TG_LEVEL = 'ROW' THEN
                DELETE FROM memory_terms WHERE scope_id = OLD.scope_id AND id = OLD.id;
                RETURN NULL;
            END IF;
            DELETE FROM memory_terms t USING removed o WHERE t.scope_id = o.scope_id AND t.id = o.id;
            RETURN NULL;
        END
        $fn$;
        CREATE OR REPLACE FUNCTION agent_memory_terms_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            IF (OLD.id, OLD.content, OLD.status, OLD.scope, OLD.scope_id, OLD.user_id, OLD.visibility,
                OLD.memory_type) IS NOT DISTINCT FROM (NEW.id, NEW.content, NEW.status, NEW.scope, NEW.scope_id,
                NEW.user_id, NEW.visibility, NEW.memory_type) THEN
                -- only the expiry moved (a store's refresh on read): the postings keep their words
                UPDATE memory_terms SET expires_at = NEW.expires_at WHERE scope_id = NEW.scope_id AND id = NEW.id;
                RETURN NULL;
            END IF;
            DELETE FROM memory_terms WHERE scope_id = OLD.scope_id AND id = OLD.id;
            IF NEW.status = 'active' THEN
                INSERT INTO memory_terms (scope, scope_key, scope_id, lexeme, id, tf, owner_key, visibility,
                                          memory_type, expires_at)
                SELECT NEW.scope, NEW.scope_key, NEW.scope_id, u.lexeme, NEW.id, coalesce(cardinality(u.positions), 1),
                       NEW.owner_key, NEW.visibility, NEW.memory_type, NEW.expires_at
                FROM unnest(NEW.content_tsv) AS u;
            END IF;
            RETURN NULL;
        END
        $fn$;
        DROP INDEX memory_terms_id_idx;
        CREATE INDEX memory_terms_id_idx ON memory_terms (scope_id, id);

        -- a kept wording that names its scope is looked up on that scope's shard
        CREATE OR REPLACE FUNCTION agent_memory_history_level() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            IF NEW.scope_id IS NOT NULL THEN
                SELECT coalesce(NEW.scope, m.scope), coalesce(NEW.visibility, m.visibility)
                  INTO NEW.scope, NEW.visibility
                  FROM memory_items m WHERE m.scope_id = NEW.scope_id AND m.id = NEW.memory_id;
                RETURN NEW;
            END IF;
            SELECT coalesce(NEW.scope, m.scope), coalesce(NEW.scope_id, m.scope_id),
                   coalesce(NEW.visibility, m.visibility)
              INTO NEW.scope, NEW.scope_id, NEW.visibility
              FROM memory_items m WHERE m.id = NEW.memory_id;
            RETURN NEW;
        END
        $fn$;
        """,
    ),
    Migration(
        "0023_context_keywords",
        # Keyword evidence over a memory's context (issue 29): the context's lexemes as a generated
        # column (NULL without context) and, for the indexed search, their postings per scope in
        # ``memory_context_terms``, kept as ``memory_terms`` is (0010/0011, 0022): by triggers of
        # their own, active memories only, carrying the memory's ``scope_id`` (the distribution
        # column, 0022) so every statement stays on the memory's shard; one server fires the
        # insert and delete triggers per statement over a transition table, a cluster per row
        # (``TG_LEVEL``, db.distributed). A search then finds a memory through the words of the
        # turns around it, and stays exact.
        """
        ALTER TABLE memory_items
            ADD COLUMN context_tsv tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, context)) STORED;
        CREATE TABLE memory_context_terms (
            scope        text NOT NULL,
            scope_key    bigint NOT NULL,
            scope_id     text NOT NULL,
            lexeme       text NOT NULL,
            id           uuid NOT NULL,
            tf           integer NOT NULL,
            owner_key    bigint NOT NULL,
            visibility   text NOT NULL,
            memory_type  text NOT NULL,
            expires_at   timestamptz,
            PRIMARY KEY (scope, scope_key, lexeme, id, scope_id) INCLUDE (tf, owner_key, visibility, memory_type, expires_at)
        );
        CREATE INDEX memory_context_terms_id_idx ON memory_context_terms (scope_id, id);

        CREATE FUNCTION agent_memory_context_terms_added() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            IF TG_LEVEL = 'ROW' THEN
                IF NEW.status = 'active' AND NEW.context_tsv IS NOT NULL THEN
                    INSERT INTO memory_context_terms (scope, scope_key, scope_id, lexeme, id, tf, owner_key,
                                                      visibility, memory_type, expires_at)
                    SELECT NEW.scope, NEW.scope_key, NEW.scope_id, u.lexeme, NEW.id,
                           coalesce(cardinality(u.positions), 1), NEW.owner_key, NEW.visibility, NEW.memory_type,
                           NEW.expires_at
                    FROM unnest(NEW.context_tsv) AS u;
                END IF;
                RETURN NULL;
            END IF;
            INSERT INTO memory_context_terms (scope, scope_key, scope_id, lexeme, id, tf, owner_key, visibility,
                                              memory_type, expires_at)
            SELECT n.scope, n.scope_key, n.scope_id, u.lexeme, n.id, coalesce(cardinality(u.positions), 1),
                   n.owner_key, n.visibility, n.memory_type, n.expires_at
            FROM added n CROSS JOIN LATERAL unnest(n.context_tsv) AS u
            WHERE n.status = 'active' AND n.context_tsv IS NOT NULL;
            RETURN NULL;
        END
        $fn$;
        CREATE FUNCTION agent_memory_context_terms_removed() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            IF TG_LEVEL = 'ROW' THEN
                DELETE FROM memory_context_terms WHERE scope_id = OLD.scope_id AND id = OLD.id;
                RETURN NULL;
            END IF;
            DELETE FROM memory_context_terms t USING removed o WHERE t.scope_id = o.scope_id AND t.id = o.id;
            RETURN NULL;
        END
        $fn$;
        CREATE FUNCTION agent_memory_context_terms_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            IF (OLD.id, OLD.context, OLD.status, OLD.scope, OLD.scope_id, OLD.user_id, OLD.visibility,
                OLD.memory_type) IS NOT DISTINCT FROM (NEW.id, NEW.context, NEW.status, NEW.scope, NEW.scope_id,
                NEW.user_id, NEW.visibility, NEW.memory_type) THEN
                -- only the expiry moved: the postings keep their words
                UPDATE memory_context_terms SET expires_at = NEW.expires_at
                WHERE scope_id = NEW.scope_id AND id = NEW.id;
                RETURN NULL;
            END IF;
            DELETE FROM memory_context_terms WHERE scope_id = OLD.scope_id AND id = OLD.id;
            IF NEW.status = 'active' AND NEW.context_tsv IS NOT NULL THEN
                INSERT INTO memory_context_terms (scope, scope_key, scope_id, lexeme, id, tf, owner_key, visibility,
                                                  memory_type, expires_at)
                SELECT NEW.scope, NEW.scope_key, NEW.scope_id, u.lexeme, NEW.id, coalesce(cardinality(u.positions), 1),
                       NEW.owner_key, NEW.visibility, NEW.memory_type, NEW.expires_at
                FROM unnest(NEW.context_tsv) AS u;
            END IF;
            RETURN NULL;
        END
        $fn$;
        CREATE FUNCTION agent_memory_context_terms_truncated() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            TRUNCATE memory_context_terms;
            RETURN NULL;
        END
        $fn$;
        CREATE TRIGGER memory_items_context_terms_insert AFTER INSERT ON memory_items
            REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION agent_memory_context_terms_added();
        CREATE TRIGGER memory_items_context_terms_delete AFTER DELETE ON memory_items
            REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION agent_memory_context_terms_removed();
        CREATE TRIGGER memory_items_context_terms_update
            AFTER UPDATE OF id, context, status, scope, scope_id, user_id, visibility, memory_type, expires_at
            ON memory_items
            FOR EACH ROW WHEN ((OLD.context IS NOT NULL OR NEW.context IS NOT NULL)
                               AND (OLD.id IS DISTINCT FROM NEW.id
                               OR OLD.context IS DISTINCT FROM NEW.context OR OLD.status IS DISTINCT FROM NEW.status
                               OR OLD.scope IS DISTINCT FROM NEW.scope OR OLD.scope_id IS DISTINCT FROM NEW.scope_id
                               OR OLD.user_id IS DISTINCT FROM NEW.user_id
                               OR OLD.visibility IS DISTINCT FROM NEW.visibility
                               OR OLD.memory_type IS DISTINCT FROM NEW.memory_type
                               OR OLD.expires_at IS DISTINCT FROM NEW.expires_at))
            EXECUTE FUNCTION agent_memory_context_terms_changed();
        CREATE TRIGGER memory_items_context_terms_truncate AFTER TRUNCATE ON memory_items
            FOR EACH STATEMENT EXECUTE FUNCTION agent_memory_context_terms_truncated();

        INSERT INTO memory_context_terms (scope, scope_key, scope_id, lexeme, id, tf, owner_key, visibility,
                                          memory_type, expires_at)
        SELECT m.scope, m.scope_key, m.scope_id, u.lexeme, m.id, coalesce(cardinality(u.positions), 1),
               m.owner_key, m.visibility, m.memory_type, m.expires_at
        FROM memory_items m CROSS JOIN LATERAL unnest(m.context_tsv) AS u
        WHERE m.status = 'active' AND m.context_tsv IS NOT NULL;
        """,
    ),
    Migration(
        "0024_graph_lifecycle_storylines",
        # Issue 32, part two. Memories: ``recall_count`` counts recalls at least an hour apart (a
        # spaced recall; ``access_count`` counts every use), so a memory recalled over days becomes
        # ``core`` and is never faded (not indexed: a recall stays a HOT update). The graph: a walk
        # (traverse) reads each node's heaviest current relations and newest mentions by index, so
        # a hub costs what any node costs. Storylines (a node mentioned by 5+ memories over 3+
        # days) and macros (2+ storylines over 30+ days rooted in one node), the design's meso and
        # macro layers, one table with ``level``; their members (memories, or storylines of a
        # macro) in another. Distributable like 0021: scope key first in every key, foreign keys
        # within one scope, no triggers. graph_nodes gets room on its pages for HOT updates.
        """
        ALTER TABLE memory_items ADD COLUMN recall_count integer NOT NULL DEFAULT 0;
        -- a node is updated by every memory that names it: room on its page keeps that update HOT
        -- (no index entry written, its GIN of aliases included) when no indexed column changes
        ALTER TABLE graph_nodes SET (fillfactor = 70);
        CREATE INDEX graph_relations_from_walk_idx ON graph_relations (scope, scope_id, from_node, salience DESC)
            WHERE valid_to IS NULL AND known_to IS NULL;
        CREATE INDEX graph_relations_to_walk_idx ON graph_relations (scope, scope_id, to_node, salience DESC)
            WHERE valid_to IS NULL AND known_to IS NULL;
        CREATE INDEX graph_mentions_newest_idx ON graph_mentions (scope, scope_id, node_id, mentioned_at DESC);
        CREATE TABLE graph_storylines (
            scope           text NOT NULL,
            scope_id        text NOT NULL,
            id              uuid NOT NULL,
            level           text NOT NULL CHECK (level IN ('storyline', 'macro')),
            anchor_node     uuid NOT NULL,
            name            text NOT NULL,
            description     text NOT NULL DEFAULT '',
            embedding       vector({dimensions}),
            is_dirty        boolean NOT NULL DEFAULT true,
            source_count    integer NOT NULL DEFAULT 0,
            storyline_count integer NOT NULL DEFAULT 0,
            started_at      timestamptz NOT NULL,
            last_source_at  timestamptz NOT NULL,
            salience        real NOT NULL DEFAULT 0.1 CHECK (salience BETWEEN 0 AND 1),
            state           text NOT NULL DEFAULT 'candidate'
                            CHECK (state IN ('candidate', 'active', 'core', 'archived')),
            retention       text NOT NULL DEFAULT 'decay' CHECK (retention IN ('keep', 'decay', 'ephemeral')),
            access_count    integer NOT NULL DEFAULT 0,
            recall_count    integer NOT NULL DEFAULT 0,
            last_accessed_at timestamptz,
            created_by      text NOT NULL,
            created_at      timestamptz NOT NULL DEFAULT now(),
            updated_at      timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (scope, scope_id, id),
            UNIQUE (scope, scope_id, level, anchor_node),
            FOREIGN KEY (scope, scope_id, anchor_node) REFERENCES graph_nodes (scope, scope_id, id) ON DELETE CASCADE
        );
        CREATE INDEX graph_storylines_creator_idx ON graph_storylines (created_by);
        CREATE TABLE graph_storyline_members (
            scope        text NOT NULL,
            scope_id     text NOT NULL,
            storyline_id uuid NOT NULL,
            member_kind  text NOT NULL CHECK (member_kind IN ('memory', 'storyline')),
            member_id    uuid NOT NULL,
            member_at    timestamptz NOT NULL,
            PRIMARY KEY (scope, scope_id, storyline_id, member_kind, member_id),
            FOREIGN KEY (scope, scope_id, storyline_id) REFERENCES graph_storylines (scope, scope_id, id)
                ON DELETE CASCADE
        );
        CREATE INDEX graph_storyline_members_member_idx ON graph_storyline_members (scope, scope_id, member_kind, member_id);
        """,
    ),
    Migration(
        "0025_store_vectors",
        # One vector per indexed field path of a LangGraph store item (agent_memory.store: an
        # index config's ``fields``, a put's ``index=[...]``), made by the store's embedder, which
        # may be the index config's own ``embed`` of any size: so ``embedding`` has no fixed
        # dimensions, and ``space`` names the embedder (a query is compared only with vectors of
        # its own space and size, by an exact scan of the item's few rows). The memory keeps its
        # own vector of its content (``memory_search`` finds it as before). Born distributable:
        # the scope key (scope, scope_id) begins the primary key; no triggers, no foreign keys
        # (a store write replaces its rows; forget and delete-scope delete them by ``user_id``
        # and scope; a read joins the live memory, so rows of a deleted one are never seen).
        """
        CREATE TABLE store_vectors (
            scope      text NOT NULL,
            scope_id   text NOT NULL,
            memory_id  uuid NOT NULL,
            ord        integer NOT NULL,
            user_id    text NOT NULL,
            space      text NOT NULL,
            path       text NOT NULL,
            embedding  vector NOT NULL,
            PRIMARY KEY (scope, scope_id, memory_id, ord)
        );
        CREATE INDEX store_vectors_user_idx ON store_vectors (user_id);
        """,
    ),
)


def recorded_dimensions() -> Op[int | None]:
    """The embedding size the database was made for, or None before ``0002_memory_items``."""
    # in our schema only: another schema's table (public's, searched for pgvector) is not ours
    made = yield Sql("SELECT to_regclass(quote_ident(current_schema()) || '.agent_memory_meta') IS NOT NULL AS made",
                     fetch="one")
    if not made["made"]:
        return None
    row = yield Sql("SELECT value FROM agent_memory_meta WHERE key = 'embedding_dimensions'", fetch="one")
    return None if row is None else int(row["value"])


#: How long a process waiting for the migrations' lock sleeps between tries (seconds)
LOCK_POLL_SECONDS = 0.05


def _take_lock(*, session: bool = False) -> Op[None]:
    """Take the migrations' lock: until the transaction the next statements run in ends, or
    with ``session`` until it is unlocked (by statements that run outside transactions).

    Waited for between short transactions, never inside one: ``CREATE INDEX CONCURRENTLY`` (a
    migration that is not transactional) waits for every transaction older than it, so a
    process waiting inside one for the lock that build's migration holds would deadlock with it
    (and PostgreSQL would end one of them)."""
    while True:
        if session:
            got = yield Autocommit("SELECT pg_try_advisory_lock(%s) AS got", (MIGRATION_LOCK_KEY,), fetch="one")
        else:
            got = yield Sql("SELECT pg_try_advisory_xact_lock(%s) AS got", (MIGRATION_LOCK_KEY,), fetch="one")
        if got["got"]:
            return
        yield Commit()
        yield Autocommit("SELECT pg_sleep(%s)", (LOCK_POLL_SECONDS,))


@dataclass(frozen=True, slots=True)
class _Applied:
    """What a start finds: the connection's first schema and the migrations recorded there
    (``made``: whether the record table exists yet)."""

    schema: str | None
    made: bool
    names: frozenset[str]


def _applied() -> Op[_Applied]:
    """Read, without waiting for any lock, which migrations the connection's first schema has.

    Migrations are only ever added, so names read here stay applied: an up-to-date start needs
    nothing more (and so never waits behind another process's migration); a start that finds
    one missing takes the lock and checks again (see :func:`apply_migrations`)."""
    where = yield Sql("SELECT current_schema() AS schema,"
                      " to_regclass(quote_ident(current_schema()) || '.agent_memory_migrations') IS NOT NULL AS made",
                      fetch="one")
    if not where["made"]:
        return _Applied(where["schema"], False, frozenset())
    rows = yield Sql("SELECT name FROM agent_memory_migrations")
    return _Applied(where["schema"], True, frozenset(r["name"] for r in rows))


def apply_migrations(migrations: Sequence[Migration], dimensions: Dimensions) -> Op[list[str]]:
    """Apply those of ``migrations`` not recorded yet, in order, each in its own transaction
    with its record and under the migrations' advisory lock; answer the names applied now.
    A function as ``dimensions`` is asked only for a new database (see :func:`migrate`).

    On an up-to-date database this is two reads in the caller's transaction, and no lock."""
    return (yield from _apply(migrations, dimensions, (yield from _applied())))


def _apply(migrations: Sequence[Migration], dimensions: Dimensions, found: _Applied) -> Op[list[str]]:
    names = [m.name for m in migrations]
    if len(set(names)) != len(names):
        raise MigrationError(f"migration names must be unique: {names}")
    pending = [m for m in migrations if m.name not in found.names]
    if not pending:
        return []
    size = None if callable(dimensions) else dimensions

    yield Commit()  # the lock is taken in transactions of its own
    if not found.made:
        yield from _take_lock()
        yield Sql(
            "CREATE TABLE IF NOT EXISTS agent_memory_migrations ("
            " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
            fetch="none",
        )
        yield Commit()

    applied_now: list[str] = []
    for migration in pending:
        if not migration.transactional:
            if (yield from _apply_outside_a_transaction(migration, dimensions, size)):
                applied_now.append(migration.name)
            continue
        yield from _take_lock()
        done = yield Sql("SELECT 1 FROM agent_memory_migrations WHERE name = %s", (migration.name,), fetch="one")
        if done is None:  # not applied by another process meanwhile
            if size is None and migration.sized:  # a function's: read under the lock, so no
                # other process sizes a new database meanwhile
                size = (yield from recorded_dimensions()) or (dimensions() if callable(dimensions) else dimensions)
            try:
                yield Sql(migration.sql if size is None else migration.statement(size), fetch="none")
            except Exception as exc:
                raise MigrationError(
                    f"migration {migration.name} failed and was rolled back: {exc}{missing_extension(exc)}"
                ) from exc
            yield Sql("INSERT INTO agent_memory_migrations (name) VALUES (%s)", (migration.name,), fetch="none")
            applied_now.append(migration.name)
        yield Commit()
    return applied_now


def _apply_outside_a_transaction(migration: Migration, dimensions: Dimensions, size: int | None) -> Op[bool]:
    """Apply a migration that is not transactional (see :class:`Migration`) unless another
    process did: under the migrations' lock held for the session (every statement here commits
    on its own), given back however it ends. Answers whether it was applied now."""
    if size is None and migration.sized:  # recorded by 0002 long before (read now: no transaction
        # may be open while the session lock is held)
        size = (yield from recorded_dimensions()) or (dimensions() if callable(dimensions) else dimensions)
        yield Commit()
    yield from _take_lock(session=True)
    try:
        done = yield Autocommit("SELECT 1 FROM agent_memory_migrations WHERE name = %s", (migration.name,),
                                fetch="one")
        if done is not None:
            applied = False
        else:
            for number, statement in enumerate(migration.statements(size), 1):
                try:
                    yield Autocommit(statement)
                except Exception as exc:
                    raise MigrationError(
                        f"migration {migration.name} failed at its statement {number} and is not transactional: "
                        f"the statements before it stay applied, and it runs again from its first statement at "
                        f"the next start: {exc}{missing_extension(exc)}") from exc
            yield Autocommit("INSERT INTO agent_memory_migrations (name) VALUES (%s)", (migration.name,))
            applied = True
    except GeneratorExit:
        raise  # the driver gave up: the connection was lost (and the lock with it), or is discarded
    except BaseException:
        yield Autocommit("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
        raise
    yield Autocommit("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    return applied


def migrate(dimensions: Dimensions, model_name: str | None,
            migrations: tuple[Migration, ...] = MIGRATIONS, *, schema: str = "public") -> Op[list[str]]:
    """Apply pending migrations, then check the embedding size against the database's;
    answer the names applied now (empty when up to date).

    A caller that stores no vectors (the episodic checkpointer, which may be the first to
    touch a database) passes ``model_name=None`` and, as ``dimensions``, a function answering
    the size its configuration's embedder makes. It is asked only while the database has no
    size recorded; a database that has one is migrated at that size, and nothing about the
    embedder is checked or recorded: the first ``MemoryService`` does that.

    ``schema`` (``MEMORY_DB_SCHEMA``) other than ``public``: the connection must search it first
    (ours do, :mod:`.schema`; a connection or pool of the caller's may not), or nothing is
    created or read, rather than everything landing in another schema.

    An up-to-date start is one transaction of three reads (where we are, the applied names, the
    recorded embedder) and waits for no lock.
    """
    found = yield from _applied()
    if schema != "public" and found.schema != schema:
        raise ConfigurationError(
            f"db_schema is {schema!r} but this connection's first schema is "
            f"{found.schema!r}, so agent-memory's tables would be made or read there; "
            f"give the connection or pool you pass the search path (options='-c search_path={schema},public'), "
            "or pass a DSN instead")
    applied_now = yield from _apply(migrations, dimensions, found)
    if model_name is None or callable(dimensions):  # no embedder: nothing to check or record
        return applied_now
    # read without the lock: a re-embedding changes the size and the model in one transaction
    rows = yield Sql("SELECT key, value FROM agent_memory_meta")
    meta = {r["key"]: r["value"] for r in rows}
    stored = int(meta["embedding_dimensions"])
    if stored != dimensions:
        raise EmbeddingDimensionMismatchError(
            f"the database was created for {stored}-dimensional embeddings "
            f"({meta.get('embedding_model', 'unknown model')}), but the configured embedder "
            f"({model_name}) makes {dimensions}-dimensional ones; use the same embedding model, "
            "run `agent-memory reembed` to re-embed every memory with it, or point DATABASE_URL / "
            "MEMORY_DATA_DIR at a new database"
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
            "are not comparable and search quality will suffer; run `agent-memory reembed` to re-embed them",
            stacklevel=2,
        )
    return applied_now
