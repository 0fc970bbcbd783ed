"""Erasure: forgetting a user, and deleting a project, team or org with everything in it.

Which tables hold a user's data, and in which order they are emptied, is
:data:`~.tables.USER_DATA_TABLES`; here is what each statement does to them. Forgetting
names the user ``%(u)s`` (and ``%(gone)s`` what replaces their name); deleting a scope
names it ``%(k)s`` (its kind) and ``%(s)s`` (its id).
"""

from __future__ import annotations

from collections.abc import Sequence

from .tables import user_tables
from .types import Statement

__all__ = [
    "DETACH_FROM_SCOPE_KEYS",
    "detach_from_scope",
    "detach_others",
    "forget_deletes",
    "forget_demo_learning",
    "lock_memberships",
    "rename_user",
    "scope_deletes",
    "scopes_left_behind",
]

#: the role a scope cannot be left without (as :mod:`agent_memory.access` keeps it)
_FOUNDER_ROLE = "CASE {kind} WHEN 'project' THEN 'owner' WHEN 'team' THEN 'lead' ELSE 'admin' END"

# --- forgetting a user ------------------------------------------------------------------------

#: rows of others that name the user: the name goes, the row stays (before the user's rows go)
_DETACH_OTHERS = (
    ("history.changed_by", ("UPDATE memory_item_history h SET changed_by = %(gone)s FROM memory_items m"
                            " WHERE m.scope_id = h.scope_id AND m.id = h.memory_id AND m.user_id <> %(u)s"
                            " AND h.changed_by = %(u)s")),
    ("memories.superseded_by", ("UPDATE memory_items SET superseded_by = NULL WHERE user_id <> %(u)s"
                                " AND superseded_by IN (SELECT id FROM memory_items WHERE user_id = %(u)s)")),
    ("memories.source_id", ("UPDATE memory_items SET source_id = NULL WHERE user_id <> %(u)s"
                            " AND source_id IN (SELECT id::text FROM memory_resources WHERE user_id = %(u)s)")),
)
#: what the user owns, per table whose ``forget`` is ``"delete"``
_FORGET_DELETES = {
    # the user's graph, and what they added to others' (a shared graph keeps what others added)
    "graph_storyline_members": ("DELETE FROM graph_storyline_members WHERE scope = 'user' AND scope_id = %(u)s"),
    "graph_storylines": ("DELETE FROM graph_storylines WHERE (scope = 'user' AND scope_id = %(u)s)"
                         " OR created_by = %(u)s"),
    "graph_mentions": ("DELETE FROM graph_mentions WHERE (scope = 'user' AND scope_id = %(u)s)"
                       " OR added_by = %(u)s"),
    "graph_relations": ("DELETE FROM graph_relations WHERE (scope = 'user' AND scope_id = %(u)s)"
                        " OR recorded_by = %(u)s"),
    "graph_nodes": "DELETE FROM graph_nodes WHERE (scope = 'user' AND scope_id = %(u)s) OR created_by = %(u)s",
    "memory_item_history": ("DELETE FROM memory_item_history WHERE memory_id IN"
                            " (SELECT id FROM memory_items WHERE user_id = %(u)s)"),
    "store_vectors": "DELETE FROM store_vectors WHERE user_id = %(u)s OR (scope = 'user' AND scope_id = %(u)s)",
    "memory_items": "DELETE FROM memory_items WHERE user_id = %(u)s",
    "memory_decisions": "DELETE FROM memory_decisions WHERE user_id = %(u)s",
    "memory_extraction_runs": "DELETE FROM memory_extraction_runs WHERE user_id = %(u)s",
    "memory_passages": "DELETE FROM memory_passages WHERE user_id = %(u)s",
    "memory_resources": "DELETE FROM memory_resources WHERE user_id = %(u)s",
    "memory_profiles": "DELETE FROM memory_profiles WHERE kind = 'user' AND subject_id = %(u)s",
    "memory_project_shares": "DELETE FROM memory_project_shares WHERE grantee_kind = 'user' AND grantee_id = %(u)s",
    "memory_members": "DELETE FROM memory_members WHERE user_id = %(u)s",
}
#: the user's name in rows that stay: scopes they created, members they added, shares they
#: made, profiles they edited (after the user's own rows went)
_RENAME_USER = (
    ("scopes.created_by", "UPDATE memory_scopes SET created_by = %(gone)s WHERE created_by = %(u)s"),
    ("members.added_by", "UPDATE memory_members SET added_by = %(gone)s WHERE added_by = %(u)s"),
    ("shares.shared_by", "UPDATE memory_project_shares SET shared_by = %(gone)s WHERE shared_by = %(u)s"),
    ("profiles.edited_by", "UPDATE memory_profiles SET edited_by = %(gone)s WHERE edited_by = %(u)s"),
)


def _named(statements: Sequence[tuple[str, str]], params: dict[str, str]) -> list[tuple[str, Statement]]:
    return [(key, (query, params)) for key, query in statements]


def detach_others(user_id: str, gone: str) -> list[tuple[str, Statement]]:
    """``(table.column, statement)``: clear the user's name and links from others' rows."""
    return _named(_DETACH_OTHERS, {"u": user_id, "gone": gone})


def forget_deletes(user_id: str) -> list[tuple[str, Statement]]:
    """``(key, statement)`` per table the user's rows are deleted from, in the order of
    :data:`~.tables.USER_DATA_TABLES`."""
    params = {"u": user_id}
    return [(t.key, (_FORGET_DELETES[t.name], params)) for t in user_tables(forget="delete")]


def rename_user(user_id: str, gone: str) -> list[tuple[str, Statement]]:
    """``(table.column, statement)``: replace the user's name by ``gone`` in rows that stay."""
    return _named(_RENAME_USER, {"u": user_id, "gone": gone})


def lock_memberships(user_id: str) -> Statement:
    """Hold the scopes the user belongs to (as a change of members does), answering the user's
    role in each (``founder``: the role a scope cannot be left without)."""
    return (
        "SELECT s.kind, s.scope_id, mm.role = " + _FOUNDER_ROLE.format(kind="s.kind") + " AS founder"
        " FROM memory_scopes s JOIN memory_members mm ON mm.kind = s.kind AND mm.scope_id = s.scope_id"
        " WHERE mm.user_id = %(u)s ORDER BY s.kind, s.scope_id FOR UPDATE OF s",
        {"u": user_id},
    )


def scopes_left_behind(scopes: Sequence[tuple[str, str]]) -> Statement:
    """For each ``(kind, scope_id)``, once the user is out: does anyone remain, does an
    owner/lead/admin, and does it hold anything (memories, resources)?"""
    return (
        "SELECT s.kind, s.scope_id,"
        " EXISTS (SELECT 1 FROM memory_members o WHERE o.kind = s.kind AND o.scope_id = s.scope_id) AS members,"
        " EXISTS (SELECT 1 FROM memory_members o WHERE o.kind = s.kind AND o.scope_id = s.scope_id"
        " AND o.role = " + _FOUNDER_ROLE.format(kind="s.kind") + ") AS founder,"
        " EXISTS (SELECT 1 FROM memory_items i WHERE i.scope = s.kind AND i.scope_id = s.scope_id)"
        " OR EXISTS (SELECT 1 FROM memory_resources r WHERE r.scope = s.kind AND r.scope_id = s.scope_id) AS data"
        " FROM memory_scopes s JOIN unnest(%(kinds)s::text[], %(ids)s::text[]) AS g(kind, scope_id)"
        " ON g.kind = s.kind AND g.scope_id = s.scope_id ORDER BY s.kind, s.scope_id",
        {"kinds": [k for k, _ in scopes], "ids": [i for _, i in scopes]},
    )


# --- deleting a project, team or org ----------------------------------------------------------

#: rows outside the scope that point into it: the link is cleared
_DETACH_FROM_SCOPE = (
    ("memories.superseded_by", ("UPDATE memory_items SET superseded_by = NULL WHERE NOT (scope = %(k)s AND"
                                " scope_id = %(s)s) AND superseded_by IN (SELECT id FROM memory_items"
                                " WHERE scope = %(k)s AND scope_id = %(s)s)")),
    ("memories.source_id", ("UPDATE memory_items SET source_id = NULL WHERE NOT (scope = %(k)s AND scope_id = %(s)s)"
                            " AND source_id IN (SELECT id::text FROM memory_resources"
                            " WHERE scope = %(k)s AND scope_id = %(s)s)")),
)
#: the keys of :func:`detach_from_scope`'s statements
DETACH_FROM_SCOPE_KEYS = tuple(key for key, _ in _DETACH_FROM_SCOPE)
#: everything in the scope, per table whose ``scoped`` is set; the scope row last (its members
#: and shares first, so they are counted rather than cascaded)
_SCOPE_DELETES = {
    "graph_storyline_members": "DELETE FROM graph_storyline_members WHERE scope = %(k)s AND scope_id = %(s)s",
    "graph_storylines": "DELETE FROM graph_storylines WHERE scope = %(k)s AND scope_id = %(s)s",
    "graph_mentions": "DELETE FROM graph_mentions WHERE scope = %(k)s AND scope_id = %(s)s",
    "graph_relations": "DELETE FROM graph_relations WHERE scope = %(k)s AND scope_id = %(s)s",
    "graph_nodes": "DELETE FROM graph_nodes WHERE scope = %(k)s AND scope_id = %(s)s",
    "memory_item_history": ("DELETE FROM memory_item_history WHERE memory_id IN"
                            " (SELECT id FROM memory_items WHERE scope = %(k)s AND scope_id = %(s)s)"),
    "store_vectors": "DELETE FROM store_vectors WHERE scope = %(k)s AND scope_id = %(s)s",
    "memory_items": "DELETE FROM memory_items WHERE scope = %(k)s AND scope_id = %(s)s",
    "memory_decisions": "DELETE FROM memory_decisions WHERE scope = %(k)s AND scope_id = %(s)s",
    "memory_passages": "DELETE FROM memory_passages WHERE scope = %(k)s AND scope_id = %(s)s",
    "memory_resources": "DELETE FROM memory_resources WHERE scope = %(k)s AND scope_id = %(s)s",
    "memory_profiles": "DELETE FROM memory_profiles WHERE kind = %(k)s AND subject_id = %(s)s",
    "memory_project_shares": ("DELETE FROM memory_project_shares WHERE (%(k)s = 'project' AND project_id = %(s)s)"
                              " OR (grantee_kind = %(k)s AND grantee_id = %(s)s)"),
    "memory_members": "DELETE FROM memory_members WHERE kind = %(k)s AND scope_id = %(s)s",
    "memory_scopes": "DELETE FROM memory_scopes WHERE kind = %(k)s AND scope_id = %(s)s",
}


def detach_from_scope(kind: str, scope_id: str) -> list[tuple[str, Statement]]:
    """``(table.column, statement)``: clear the links of rows outside the scope into it."""
    return _named(_DETACH_FROM_SCOPE, {"k": kind, "s": scope_id})


def scope_deletes(kind: str, scope_id: str) -> list[tuple[str, Statement]]:
    """``(key, statement)`` per table that holds rows of the scope, in the order of
    :data:`~.tables.USER_DATA_TABLES`."""
    params = {"k": kind, "s": scope_id}
    return [(t.key, (_SCOPE_DELETES[t.name], params)) for t in user_tables(scoped=True)]


# --- the demo, run again ----------------------------------------------------------------------


def forget_demo_learning(users: Sequence[str], threads: Sequence[str], projects: Sequence[str]) -> list[Statement]:
    """What the demo's users learned in its threads, so the demo can run again: their extraction
    runs there (with their decisions, ``ON DELETE CASCADE``), the conversations that hold what
    extraction read, the users' and projects' profiles, and the projects (with their members:
    the first save of the demo makes the project again)."""
    params = {"users": list(users), "threads": list(threads), "projects": list(projects)}
    return [(query, params) for query in (
        "DELETE FROM memory_extraction_runs WHERE user_id = ANY(%(users)s) AND session_id = ANY(%(threads)s)",
        ("DELETE FROM memory_resources WHERE kind = 'conversation' AND user_id = ANY(%(users)s)"
         " AND session_id = ANY(%(threads)s)"),
        ("DELETE FROM memory_profiles WHERE (kind = 'user' AND subject_id = ANY(%(users)s))"
         " OR (kind = 'project' AND subject_id = ANY(%(projects)s))"),
        "DELETE FROM memory_scopes WHERE kind = 'project' AND scope_id = ANY(%(projects)s)",
    )]
