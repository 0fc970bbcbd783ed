"""The tables that hold a user's data: one list, which forgetting a user, deleting a scope,
exporting and their tests all read, so a new table cannot be left out of any of them
(``tests/test_user_data_tables.py`` fails when a table of the schema that names a user is
missing here, or when forget, delete-scope or export leave a listed table out).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["USER_DATA_TABLES", "ForgetMode", "UserTable", "table_of", "user_tables"]

ForgetMode = Literal["delete", "rename", "episodic", "trigger"]


@dataclass(frozen=True, slots=True)
class UserTable:
    """A table that holds a user's data.

    ``key`` is its name in :class:`~agent_memory.rights.ForgetReport` /
    :class:`~agent_memory.rights.DeleteReport` and in an export. ``user_columns`` are the
    columns that name a user (none: the rows belong to a thread, whose owner is named in
    ``checkpoint_thread_owner``). ``forget`` is what forgetting a user does to it:

    - ``"delete"``: the user's rows go (others' rows that name them keep the row, not the name);
    - ``"rename"``: rows stay and the user's name in them is replaced (a scope they made);
    - ``"episodic"``: :func:`agent_memory.episodic.forget.forget_user_threads` deletes the rows of
      the threads they own and their snapshots, where the table exists;
    - ``"trigger"``: kept in step with ``memory_items`` by triggers, so it goes with the memories.

    ``scoped``: it holds rows of projects, teams or orgs, which deleting the scope removes.
    ``exported``: a section of an export.
    """

    name: str
    key: str
    user_columns: tuple[str, ...]
    forget: ForgetMode = "delete"
    scoped: bool = False
    exported: bool = False


#: every table that holds a user's data, in the order erasure deletes from them (rows that point
#: at others first: a history before its memories, decisions before their runs, members before
#: their scope; LangGraph's delete order for the checkpoint tables)
USER_DATA_TABLES: tuple[UserTable, ...] = (
    # the knowledge graph (a user's own graph: scope 'user'; mentions and relations before their nodes)
    # storylines and macros (issue 32): members before their storyline, storylines before their anchor;
    # not exported: maintain() builds them again from the imported memories and graph
    UserTable("graph_storyline_members", "graph_storyline_members", (), scoped=True),
    UserTable("graph_storylines", "graph_storylines", ("created_by",), scoped=True),
    # (exported: their sections are agent_memory.rights.format.GRAPH_SECTIONS)
    UserTable("graph_mentions", "graph_mentions", ("added_by",), scoped=True, exported=True),
    UserTable("graph_relations", "graph_relations", ("recorded_by",), scoped=True, exported=True),
    UserTable("graph_nodes", "graph_nodes", ("created_by",), scoped=True, exported=True),
    UserTable("memory_item_history", "history", ("changed_by",), scoped=True, exported=True),
    # a store item's field vectors (migration 0025): made again when the item is put again
    UserTable("store_vectors", "store_vectors", ("user_id",), scoped=True),
    UserTable("memory_items", "memories", ("user_id",), scoped=True, exported=True),
    UserTable("memory_terms", "terms", ("owner_key",), forget="trigger"),
    UserTable("memory_context_terms", "context_terms", ("owner_key",), forget="trigger"),
    UserTable("memory_decisions", "decisions", ("user_id",), scoped=True),
    UserTable("memory_extraction_runs", "extraction_runs", ("user_id",)),
    # a document's passages travel with their resource (an import embeds them again)
    UserTable("memory_passages", "passages", ("user_id",), scoped=True, exported=True),
    UserTable("memory_resources", "resources", ("user_id",), scoped=True, exported=True),
    UserTable("memory_profiles", "profiles", ("subject_id", "edited_by"), scoped=True, exported=True),
    UserTable("memory_project_shares", "shares", ("grantee_id", "shared_by"), scoped=True, exported=True),
    UserTable("memory_members", "members", ("user_id", "added_by"), scoped=True, exported=True),
    UserTable("memory_scopes", "scopes", ("created_by",), forget="rename", scoped=True, exported=True),
    UserTable("checkpoint_thread_owner", "checkpoint_thread_owner", ("user_id",), forget="episodic"),
    UserTable("checkpoints", "checkpoints", (), forget="episodic"),
    UserTable("checkpoint_blobs", "checkpoint_blobs", (), forget="episodic"),
    UserTable("checkpoint_writes", "checkpoint_writes", (), forget="episodic"),
    UserTable("checkpoint_archive", "checkpoint_archive", (), forget="episodic"),
    UserTable("session_state_snapshot", "session_state_snapshot", ("user_id",), forget="episodic"),
)


def user_tables(*, forget: ForgetMode | None = None, scoped: bool | None = None,
                exported: bool | None = None) -> tuple[UserTable, ...]:
    """The entries of :data:`USER_DATA_TABLES` that match every condition given, in its order."""
    return tuple(t for t in USER_DATA_TABLES
                 if (forget is None or t.forget == forget) and (scoped is None or t.scoped == scoped)
                 and (exported is None or t.exported == exported))


def table_of(key: str) -> str:
    """The table whose report / export key is ``key``."""
    for t in USER_DATA_TABLES:
        if t.key == key:
            return t.name
    raise KeyError(f"no table of USER_DATA_TABLES has the key {key!r}")
