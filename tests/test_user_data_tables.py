"""One list of the tables that hold a user's data: ``agent_memory.queries.USER_DATA_TABLES``.

Forgetting a user, deleting a scope and exporting read it, and so do their tests. Here:

- the schema test: every table of a migrated database (with LangGraph's checkpoint tables) that
  has a column naming a user is in the list, and every table of the list exists with the
  columns it names. A new table with a ``user_id``, an ``..._by`` or an owner column fails
  here until it is listed, and once listed, forget / delete-scope / export must handle it;
- the statements of forget, delete-scope and export cover the tables of the list;
- a user with a row in every such table is forgotten: afterwards no column of the list names them.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from agent_memory import MemoryConfig, MemoryService, access, documents, ops, queries, resources
from agent_memory.db.requests import run
from agent_memory.episodic import forget as episodic_forget
from agent_memory.episodic.owners import claim_thread
from agent_memory.episodic.schema import setup_database
from agent_memory.episodic.snapshots import save_snapshot
from agent_memory.extraction.pipeline import extract_memories
from agent_memory.graph.maintenance import maintain_graph
from agent_memory.models import Scope
from agent_memory.profiles.store import update_profile
from agent_memory.queries import USER_DATA_TABLES, user_tables
from agent_memory.rights import SECTIONS, forget_user
from agent_memory.rights.erase import DELETE_KEYS
from agent_memory.rights.format import _SECTIONS
from agent_memory.validation import check_identity

#: tables of the schema that hold nothing of anyone: bookkeeping of the database itself, and the
#: re-embedding staging table (keyed by memory id, its rows go with their memory: ON DELETE CASCADE)
#: (``memory_scope_resets`` holds a scope's 64-bit key and the id of the transaction that last deleted
#: rows from it, so that copies of the scope's vectors are made again; no id and no content)
NOBODYS = {"agent_memory_migrations", "agent_memory_meta", "checkpoint_migrations", "memory_reembed",
           "memory_scope_resets"}


def names_a_user(column: str) -> bool:
    """A column that (may) name a user: ``user_id``, ``owner_key``, a ``..._by``, a subject or grantee."""
    return ("user" in column or "owner" in column or column.endswith("_by")
            or column in ("subject_id", "grantee_id"))


def schema(dsn: str) -> dict[str, set[str]]:
    """Every table of the database's schema, with its columns."""
    with psycopg.connect(dsn) as conn:
        found: dict[str, set[str]] = {}
        for table, column in conn.execute(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c"
            " JOIN information_schema.tables t USING (table_schema, table_name)"
            " WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'"
        ):
            found.setdefault(table, set()).add(column)
        return found


@pytest.fixture(scope="module")
def full_schema(fresh_dsn: Callable[[], str], config: MemoryConfig, embeddings) -> dict[str, set[str]]:
    """The schema of a new database after every migration and LangGraph's own setup."""
    dsn = fresh_dsn()
    with MemoryService(dsn, config=config, embeddings=embeddings):
        pass
    with psycopg.connect(dsn, autocommit=True) as conn:
        setup_database(conn)
    return schema(dsn)


# --- the list against the schema --------------------------------------------------------------


def test_every_table_that_names_a_user_is_listed(full_schema):
    listed = {t.name for t in USER_DATA_TABLES}
    naming = {table: sorted(c for c in columns if names_a_user(c)) for table, columns in full_schema.items()}
    missing = {table: columns for table, columns in naming.items() if columns and table not in listed}
    assert not missing, (f"tables with a column naming a user are missing from queries.USER_DATA_TABLES: {missing}; "
                         "list them, then make forget_user, delete_scope and export handle them")
    unlisted = set(full_schema) - listed - NOBODYS
    assert not unlisted, f"tables neither listed nor known to hold nothing of anyone: {sorted(unlisted)}"


def test_every_listed_table_exists_with_the_columns_it_names(full_schema):
    for table in USER_DATA_TABLES:
        assert table.name in full_schema, f"{table.name} is listed but not in the schema"
        assert set(table.user_columns) <= full_schema[table.name], table
        assert all(names_a_user(c) for c in table.user_columns), table


def test_keys_and_names_are_unique():
    assert len({t.name for t in USER_DATA_TABLES}) == len({t.key for t in USER_DATA_TABLES}) == len(USER_DATA_TABLES)


# --- the list against the statements ----------------------------------------------------------


def written(statements) -> set[str]:
    """The tables the statements delete from or update."""
    found: set[str] = set()
    for _, (query, _) in statements:
        found.update(re.findall(r"(?:DELETE FROM|UPDATE)\s+(\w+)", str(query)))
    return found


def test_forgetting_a_user_touches_every_listed_table():
    statements = (queries.detach_others("u", "gone") + queries.forget_deletes("u") + queries.rename_user("u", "gone"))
    own = {t.name for t in USER_DATA_TABLES if t.forget in ("delete", "rename")}
    assert written(statements) == own
    assert {t.name for t in USER_DATA_TABLES if t.forget == "delete"} == written(queries.forget_deletes("u"))
    # the episodic tables are forgotten by the episodic layer, in the list's order
    assert episodic_forget.FORGET_TABLES == tuple(t.name for t in user_tables(forget="episodic"))
    assert set(episodic_forget.THREAD_TABLES) | {episodic_forget.OWNER_TABLE, episodic_forget.SNAPSHOT_TABLE} \
        == set(episodic_forget.FORGET_TABLES)
    # a table kept by triggers follows memory_items, which forget deletes
    assert {t.name for t in user_tables(forget="trigger")} == {"memory_terms", "memory_context_terms"}


def test_deleting_a_scope_empties_every_scoped_table():
    assert written(queries.scope_deletes("project", "p")) == {t.name for t in user_tables(scoped=True)}
    assert DELETE_KEYS == tuple(t.key for t in user_tables(scoped=True))


def test_the_export_has_one_section_per_exported_table():
    exported = user_tables(exported=True)
    assert set(SECTIONS) == {t.key for t in exported}
    assert {s: _SECTIONS[s].table for s in SECTIONS} == {t.key: t.name for t in exported}


# --- a user with a row in every table, forgotten ----------------------------------------------


def naming(dsn: str, user: str) -> dict[str, int]:
    """Rows that name ``user``, per ``table.column`` of the list (tables that exist)."""
    key = queries.scope_key(user)
    counts: dict[str, int] = {}
    with psycopg.connect(dsn) as conn:
        for table in USER_DATA_TABLES:
            if conn.execute("SELECT to_regclass(%s)", (table.name,)).fetchone()[0] is None:
                continue
            for column in table.user_columns:
                value = key if column == "owner_key" else user
                counts[f"{table.name}.{column}"] = conn.execute(
                    f"SELECT count(*) FROM {table.name} WHERE {column} = %s", (value,)).fetchone()[0]
    return counts


def test_a_forgotten_user_is_named_by_no_row_of_any_listed_table(memory: MemoryService, dsn, config):
    tag = uuid.uuid4().hex[:10]
    user, other, project, theirs = f"u-{tag}", f"o-{tag}", f"p-{tag}", f"q-{tag}"
    session, thread = f"s-{tag}", f"t-{tag}"

    def do(op):
        return run(op, memory.conn, memory.embeddings)

    me, in_project = check_identity(user), check_identity(user, project_id=project)
    them = check_identity(other, project_id=project)
    # scopes, members and shares: ones the user made, and one shared with them
    do(access.create_scope(config, me, Scope.PROJECT, project))
    do(access.add_member(me, "project", project, other, "editor"))
    do(access.share_project(me, project, with_user=other))
    do(access.create_scope(config, check_identity(other), Scope.PROJECT, theirs))
    do(access.share_project(check_identity(other), theirs, with_user=user))
    # memories (and their terms), an edit of their own and one of another member's
    mine = do(ops.add_memory(config, me, ops.make_new_memory("Prefers dark roast coffee in the morning.")))
    do(ops.edit_memory(config, me, mine.id, content="Prefers light roast coffee in the morning."))
    do(ops.add_memory(config, me, ops.make_new_memory("My sister Sarah works at Acme.")))  # the knowledge graph
    # a memory that keeps its context (and its context's terms)
    do(ops.add_memory(config, me, ops.make_new_memory("Yes, the one by the lake.",
                                                      context="Which cabin did we book?\nYes, the one by the lake.")))
    # ... and a storyline (five memories about Sarah over three days, then the graph's maintenance)
    for days, text in ((3, "Sarah called about the weekend."), (3, "Sarah booked the train."),
                       (2, "Sarah arrived late at night."), (1, "Sarah cooked dinner for everyone."),
                       (1, "Sarah left on Sunday morning.")):
        do(ops.add_memory(config, me, ops.make_new_memory(text, valid_from=datetime.now(UTC) - timedelta(days=days))))
    do(maintain_graph(at=datetime.now(UTC)))
    do(ops.add_memory(config, in_project, ops.make_new_memory("The API is versioned by date.", scope="project")))
    other_note = do(ops.add_memory(config, them, ops.make_new_memory("Deploys go out on Tuesdays.", scope="project")))
    do(ops.edit_memory(config, in_project, other_note.id, content="Deploys go out on Tuesdays and Thursdays."))
    # a resource, profiles (their own, and an edit of the project's), an extraction run and its decisions
    do(resources.add_resource(config, me, "Reading list: Designing Data-Intensive Applications."))
    do(documents.add_document(config, me, "# Notes\n\nWe use PostgreSQL for the ledger."))  # passages
    do(update_profile(me, "user", {"username": "U"}))
    do(update_profile(in_project, "project", {"project_goal": "Ship the API."}))
    report = do(extract_memories(config, check_identity(user, session_id=session),
                                 ["I prefer tea over coffee in the afternoon."]))
    assert report.status == "done", report
    # episodic memory: a thread they own and its snapshot
    do(claim_thread(thread, user))
    do(save_snapshot({"messages": []}, user_id=user, thread_id=thread))
    # a LangGraph store item with an index config: its field vectors (store_vectors)
    from agent_memory.store import AgentMemoryStore

    AgentMemoryStore(memory, caller=me, index={"fields": ["text"]}).put(("notes",), "k", {"text": "Likes plums."})

    before = naming(dsn, user)
    for table in USER_DATA_TABLES:
        columns = [f"{table.name}.{c}" for c in table.user_columns]
        if columns and columns[0] in before:
            assert any(before[c] for c in columns), f"the test made no row of {table.name} naming the user"

    do(forget_user(user))
    after = naming(dsn, user)
    assert after == dict.fromkeys(before, 0), {k: v for k, v in after.items() if v}
    # others' rows stay, without the user's name
    assert naming(dsn, other)["memory_items.user_id"] >= 1
