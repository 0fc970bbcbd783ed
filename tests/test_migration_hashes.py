"""Migrations that cannot drift: every migration's text is pinned by its sha256
(``tests/migration_hashes.py``), and no migration is built from code that can change later."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from agent_memory.db.migrations import MIGRATIONS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from migration_hashes import MIGRATION_HASHES, text_hash  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def test_every_migration_is_pinned_and_unchanged():
    changed = [m.name for m in MIGRATIONS if m.name in MIGRATION_HASHES and text_hash(m.sql) != MIGRATION_HASHES[m.name]]
    assert not changed, (
        f"the text of applied migration(s) {changed} changed: an applied migration never changes (a database "
        "that ran it will not run it again, so it would silently differ from a new one); undo the edit and "
        "add a new migration at the end of MIGRATIONS in agent_memory/db/migrations.py instead")
    new = [m for m in MIGRATIONS if m.name not in MIGRATION_HASHES]
    assert not new, (
        "migration(s) not pinned yet: add these lines to MIGRATION_HASHES in tests/migration_hashes.py "
        "(once pinned, a migration's text never changes):\n"
        + "\n".join(f'    "{m.name}": "{text_hash(m.sql)}",' for m in new))


def test_every_pinned_migration_still_exists():
    """A migration is never removed or renamed either: databases have recorded it by name."""
    names = {m.name for m in MIGRATIONS}
    assert set(MIGRATION_HASHES) <= names, sorted(set(MIGRATION_HASHES) - names)


def test_a_sized_migration_is_pinned_as_its_template():
    """The text that depends on the embedding size is pinned before the size is filled in."""
    sized = [m for m in MIGRATIONS if m.sized]
    assert {m.name for m in sized} >= {"0002_memory_items", "0010_search_at_scale", "0018_memory_context"}
    for migration in sized:
        assert "{dimensions}" in migration.sql and text_hash(migration.sql) == MIGRATION_HASHES[migration.name]
        assert migration.statement(384) != migration.sql


def _migration_texts(tree: ast.Module) -> list[ast.expr]:
    """The ``sql`` argument of every ``Migration(...)`` in the module."""
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Migration":
            given = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "sql")]
            texts += given
    return texts


def test_every_migration_is_a_literal():
    """Built from a live function (as 0010, 0011 and 0018 once were from ``search_index()``), a
    change to the function would edit an applied migration unnoticed: each text is a string literal."""
    tree = ast.parse((ROOT / "agent_memory/db/migrations.py").read_text(encoding="utf-8"))
    texts = _migration_texts(tree)
    assert len(texts) == len(MIGRATIONS)
    built = [ast.unparse(t)[:80] for t in texts if not (isinstance(t, ast.Constant) and isinstance(t.value, str))]
    assert not built, f"migration text built by code, not written out: {built}; write the statement out literally"


def test_a_reembedding_makes_the_search_index_the_migrations_made():
    """``search_index()`` (what a re-embedding to another size runs) and 0018's literal text agree
    for each size class, so a re-embedded database has the index a new one gets."""
    from agent_memory.db.migrations import SEARCH_INDEX_MAX_CONTEXT_DIMENSIONS, SEARCH_INDEX_MAX_DIMENSIONS, search_index

    context = next(m for m in MIGRATIONS if m.name == "0018_memory_context")
    for dimensions in (SEARCH_INDEX_MAX_CONTEXT_DIMENSIONS, SEARCH_INDEX_MAX_DIMENSIONS, SEARCH_INDEX_MAX_DIMENSIONS + 1):
        assert search_index(dimensions) + ";" in context.sql
