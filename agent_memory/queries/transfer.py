"""Export and import: reading a user's rows section by section, and writing an export back.

The sections themselves (tables, columns, their types, the export's order) are declared in
:mod:`agent_memory.rights.format`; the builders here take them as arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from psycopg import sql
from psycopg.types.json import Jsonb

from .types import Query, Statement
from .visibility import granted_to, member_of, shared_with

__all__ = [
    "existing_memory_ids", "existing_passage_ids", "existing_resource_ids", "export_section", "import_section",
    "link_superseded",
]


def _member(kind: str, scope_id: str) -> str:
    """The user ``%(u)s`` is a member of the scope ``(kind, scope_id)`` (SQL expressions)."""
    return member_of(kind, scope_id, "%(u)s")


#: ``m`` rows the user may read, in all their sessions, projects, teams and orgs: the rule of
#: :func:`.visibility.visible_filter`, over every membership instead of the current ids
_READABLE_ITEMS = (
    "((m.scope = 'user' AND m.scope_id = %(u)s)"
    " OR (m.scope = 'session' AND m.user_id = %(u)s)"
    " OR (m.scope IN ('project', 'team', 'org') AND " + _member("m.scope", "m.scope_id")
    + " AND (m.visibility <> 'owner_only' OR m.user_id = %(u)s))"
    " OR (m.scope = 'project' AND m.visibility = 'public' AND " + shared_with("m.scope_id", "%(u)s") + "))"
)

#: the alias each section's table is read under
_ALIAS = {"scopes": "x", "members": "mm", "shares": "ps", "memories": "m", "history": "h", "resources": "x",
          "passages": "x", "profiles": "x", "graph_nodes": "x", "graph_relations": "x", "graph_mentions": "x"}

#: the knowledge graphs a user may read: their own, and those of the projects, teams and orgs
#: they are a member of (:mod:`agent_memory.graph`); the ones they own: their own
_OWN_GRAPH = "(x.scope = 'user' AND x.scope_id = %(u)s)"
_READABLE_GRAPHS = ("(" + _OWN_GRAPH + " OR (x.scope IN ('project', 'team', 'org') AND "
                    + _member("x.scope", "x.scope_id") + "))")

#: the resources (and so their passages) the user may read: :func:`.resources.resource_filter`'s
#: rule, over every project they are a member of
_READABLE_RESOURCES = ("((x.scope IN ('user', 'session') AND x.user_id = %(u)s) OR (x.scope = 'project' AND "
                       + _member("'project'", "x.scope_id") + "))")

#: the rows of each section that an export reads: everything the user may read, or created
_WHERE: dict[str, dict[str, str]] = {
    "visible": {
        "memories": _READABLE_ITEMS,
        "resources": _READABLE_RESOURCES,
        "passages": _READABLE_RESOURCES,  # a passage carries its document's owner and scope
        "profiles": "((x.kind = 'user' AND x.subject_id = %(u)s) OR (x.kind = 'project' AND "
                    + _member("'project'", "x.subject_id") + "))",
        "scopes": "(" + _member("x.kind", "x.scope_id") + " OR (x.kind = 'project' AND "
                  + shared_with("x.scope_id", "%(u)s") + "))",
        "shares": granted_to("%(u)s"),
        # the versions of the exported memories the user could read when they held, under the
        # scope and visibility of then (:func:`.visibility.version_visible`)
        **dict.fromkeys(("graph_nodes", "graph_relations", "graph_mentions"), _READABLE_GRAPHS),
        "history": "h.memory_id = ANY(%(ids)s::uuid[]) AND EXISTS (SELECT FROM (SELECT h.scope, h.scope_id,"
                   " h.visibility, o.user_id FROM memory_items o WHERE o.id = h.memory_id) m WHERE "
                   + _READABLE_ITEMS + ")",
    },
    "owned": {
        "memories": "m.user_id = %(u)s",
        "resources": "x.user_id = %(u)s",
        "passages": "x.user_id = %(u)s",
        "profiles": "(x.kind = 'user' AND x.subject_id = %(u)s)",
        "scopes": "(" + _member("x.kind", "x.scope_id") + " OR (x.kind = 'project' AND EXISTS (SELECT 1 FROM"
                  " memory_project_shares ps WHERE ps.project_id = x.scope_id AND ps.grantee_kind = 'user'"
                  " AND ps.grantee_id = %(u)s)))",
        "shares": "(ps.grantee_kind = 'user' AND ps.grantee_id = %(u)s)",
        "history": "h.memory_id = ANY(%(ids)s::uuid[])",  # their own memories' versions, all of them
        **dict.fromkeys(("graph_nodes", "graph_relations", "graph_mentions"), _OWN_GRAPH),
    },
}
#: the same in both: the user's memberships
_EITHER = {"members": "mm.user_id = %(u)s"}


def export_section(section: str, what: Literal["visible", "owned"], user_id: str, *, table: str,
                   columns: Sequence[str], order: str) -> Query:
    """The statement that reads one section of ``user_id``'s export, ordered by ``order`` (a
    column list). ``history`` reads the rows of the memories whose ids its params take as ``ids``
    (in a visible export, only the versions the user could read then)."""
    alias = _ALIAS[section]
    where = _EITHER.get(section) or _WHERE[what][section]
    return (
        sql.SQL("SELECT {cols} FROM {table} {alias} WHERE {where} ORDER BY {order}").format(
            cols=sql.SQL(", ").join(sql.SQL(alias + ".") + sql.Identifier(c) for c in columns),
            table=sql.Identifier(table), alias=sql.SQL(alias), where=sql.SQL(where),
            order=sql.SQL(", ").join(sql.SQL(f"{alias}.{c.strip()}") for c in order.split(","))),
        {"ids": [], "u": user_id} if section == "history" else {"u": user_id},
    )


def import_section(table: str, columns: Sequence[tuple[str, str]], rows: Sequence[Mapping[str, Any]], *,
                   vectors: bool | Sequence[str] = False, returning: Sequence[str] = (),
                   requires: tuple[str, str, str] | None = None) -> Statement:
    """Insert ``rows`` (``columns``: name and SQL type), passed as one JSON array; rows whose key
    is taken already are skipped. With ``vectors`` each row also has an ``embedding`` (pgvector's
    text form; a list of names: those vector columns, e.g. ``embedding`` and ``context_embedding``); ``returning`` names the columns to answer for each row written (an import hangs
    a row's children only on rows it wrote itself). ``requires``
    (``(table, column, its key)``): only rows whose ``column`` names a row of that table are
    written (a passage whose document was not imported is skipped, never a foreign-key error)."""
    embedded = (["embedding"] if vectors is True else list(vectors) if vectors else [])
    names = [name for name, _ in columns] + embedded
    defs: list[sql.Composable] = [sql.SQL("{} {}").format(sql.Identifier(name), sql.SQL(type_))
                                  for name, type_ in columns]
    values: list[sql.Composable] = [sql.SQL("r.") + sql.Identifier(name) for name, _ in columns]
    for name in embedded:
        defs.append(sql.SQL("{} text").format(sql.Identifier(name)))
        values.append(sql.SQL("r.{}::vector").format(sql.Identifier(name)))
    where = sql.SQL("") if requires is None else sql.SQL(" WHERE EXISTS (SELECT 1 FROM {t} t WHERE t.{k} = r.{c})").format(
        t=sql.Identifier(requires[0]), c=sql.Identifier(requires[1]), k=sql.Identifier(requires[2]))
    query = sql.SQL(
        "INSERT INTO {table} ({cols}) SELECT {values} FROM jsonb_to_recordset(%s) AS r({defs}){where}"
        " ON CONFLICT DO NOTHING{returning}"
    ).format(table=sql.Identifier(table), cols=sql.SQL(", ").join(sql.Identifier(c) for c in names),
             values=sql.SQL(", ").join(values), defs=sql.SQL(", ").join(defs), where=where,
             returning=sql.SQL(" RETURNING ") + sql.SQL(", ").join(map(sql.Identifier, returning)) if returning
             else sql.SQL(""))
    return query, (Jsonb(list(rows)),)


def link_superseded(links: Sequence[Mapping[str, Any]], written: Sequence[str]) -> Statement:
    """Point imported memories (``id``) at what replaced them (``target``), where that memory
    exists and is one this import ``written`` or one of the same user's: a file cannot tie its
    rows to another user's memory."""
    return (
        "UPDATE memory_items m SET superseded_by = l.target FROM jsonb_to_recordset(%s) AS l(id uuid, target uuid)"
        " WHERE m.id = l.id AND EXISTS (SELECT 1 FROM memory_items t WHERE t.id = l.target"
        " AND (t.id = ANY(%s::uuid[]) OR t.user_id = m.user_id))",
        (Jsonb(list(links)), list(written)),
    )


def existing_passage_ids(ids: Sequence[str]) -> Statement:
    """Which of ``ids`` (passages of an import) are in the database already."""
    return "SELECT id FROM memory_passages WHERE id = ANY(%s::uuid[])", (list(ids),)


def existing_resource_ids(ids: Sequence[str]) -> Statement:
    """Which of ``ids`` (resources of an import) are in the database already."""
    return "SELECT id FROM memory_resources WHERE id = ANY(%s::uuid[])", (list(ids),)


def existing_memory_ids(ids: Sequence[str]) -> Statement:
    """Which of ``ids`` are memories in the database already."""
    return "SELECT id FROM memory_items WHERE id = ANY(%s::uuid[])", (list(ids),)
