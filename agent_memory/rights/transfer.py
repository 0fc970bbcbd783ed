"""Export and import: reading a user's rows into the export format, and writing an export back.

- :func:`export_data` reads everything a user may read (``"visible"``: across all their
  projects, sessions, teams and orgs, in every status) or everything they created
  (``"owned"``) as plain JSON values. Vectors are left out: the same embedding model makes
  them again on import.
- :func:`import_data` puts an export back (ids, timestamps, status, versions and history
  preserved); rows already present are skipped, so importing twice is harmless.

The format itself (sections, columns, checks) lives in :mod:`.format`; here are the SQL, built
by pure functions, and the two ops. Every op validates its input before its first query.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

from psycopg import sql
from psycopg.types.json import Jsonb

from ..config import MemoryConfig
from ..db.requests import Commit, Embed, Op, Sql
from ..errors import InvalidInputError
from ..models import Identity
from ..queries import granted_to, member_of, shared_with, vector_literal
from ..validation import shown
from .format import (
    _SECTIONS,
    _SHOWN,
    FORMAT,
    SECTIONS,
    VERSION,
    ImportReport,
    _jsonable,
    check_export,
    screen_export,
)

__all__ = ["export_data", "export_queries", "import_data"]

What = Literal["visible", "owned"]
Query = tuple[sql.Composable, dict[str, Any]]


# --- export: SQL (pure) -----------------------------------------------------------------------


def _member(kind: str, scope_id: str) -> str:
    """The user ``%(u)s`` is a member of the scope ``(kind, scope_id)`` (SQL expressions)."""
    return member_of(kind, scope_id, "%(u)s")


#: the share ``ps`` is granted to the user, or to a team or org the user is a member of
_SHARED_WITH_USER = granted_to("%(u)s")

#: ``m`` rows the user may read, in all their sessions, projects, teams and orgs: the rule of
#: :func:`agent_memory.queries.visible_filter`, over every membership instead of the current ids
_READABLE_ITEMS = (
    "((m.scope = 'user' AND m.scope_id = %(u)s)"
    " OR (m.scope = 'session' AND m.user_id = %(u)s)"
    " OR (m.scope IN ('project', 'team', 'org') AND " + _member("m.scope", "m.scope_id")
    + " AND (m.visibility <> 'owner_only' OR m.user_id = %(u)s))"
    " OR (m.scope = 'project' AND m.visibility = 'public' AND " + shared_with("m.scope_id", "%(u)s") + "))"
)

_WHERE: dict[str, dict[str, str]] = {
    "visible": {
        "memories": _READABLE_ITEMS,
        "resources": "((x.scope IN ('user', 'session') AND x.user_id = %(u)s) OR (x.scope = 'project' AND "
                     + _member("'project'", "x.scope_id") + "))",
        "profiles": "((x.kind = 'user' AND x.subject_id = %(u)s) OR (x.kind = 'project' AND "
                    + _member("'project'", "x.subject_id") + "))",
        "scopes": "(" + _member("x.kind", "x.scope_id") + " OR (x.kind = 'project' AND "
                  + shared_with("x.scope_id", "%(u)s") + "))",
        "shares": _SHARED_WITH_USER,
    },
    "owned": {
        "memories": "m.user_id = %(u)s",
        "resources": "x.user_id = %(u)s",
        "profiles": "(x.kind = 'user' AND x.subject_id = %(u)s)",
        "scopes": "(" + _member("x.kind", "x.scope_id") + " OR (x.kind = 'project' AND EXISTS (SELECT 1 FROM"
                  " memory_project_shares ps WHERE ps.project_id = x.scope_id AND ps.grantee_kind = 'user'"
                  " AND ps.grantee_id = %(u)s)))",
        "shares": "(ps.grantee_kind = 'user' AND ps.grantee_id = %(u)s)",
    },
}


def _select(section: str, alias: str, where: str, params: dict[str, Any]) -> Query:
    spec = _SECTIONS[section]
    return (
        sql.SQL("SELECT {cols} FROM {table} {alias} WHERE {where} ORDER BY {order}").format(
            cols=sql.SQL(", ").join(sql.SQL(alias + ".") + sql.Identifier(c) for c in spec.names),
            table=sql.Identifier(spec.table), alias=sql.SQL(alias), where=sql.SQL(where),
            order=sql.SQL(", ").join(sql.SQL(f"{alias}.{c.strip()}") for c in spec.order.split(","))),
        params,
    )


def export_queries(user_id: str, what: What) -> dict[str, Query]:
    """The statement that reads each section for ``user_id`` (``history`` reads the exported
    memories' rows: its params take ``ids``)."""
    where, p = _WHERE[what], {"u": user_id}
    return {
        "scopes": _select("scopes", "x", where["scopes"], p),
        "members": _select("members", "mm", "mm.user_id = %(u)s", p),
        "shares": _select("shares", "ps", where["shares"], p),
        "memories": _select("memories", "m", where["memories"], p),
        "history": _select("history", "h", "h.memory_id = ANY(%(ids)s::uuid[])", {"ids": []}),
        "resources": _select("resources", "x", where["resources"], p),
        "profiles": _select("profiles", "x", where["profiles"], p),
    }


def _check_what(what: Any) -> What:
    if what not in ("visible", "owned"):
        raise InvalidInputError("what", f"must be 'visible' (everything the user may read) or 'owned' (everything "
                                        f"the user created), got {shown(what)}")
    return what


# --- export: op -------------------------------------------------------------------------------


def export_data(identity: Identity, what: Any = "visible") -> Op[dict[str, Any]]:
    """Everything ``identity.user_id`` may read (``"visible"``) or created (``"owned"``), as a
    dict of plain JSON values; see the module docstring.

    A visible export carries what the user needs to read the same memories after an import
    into an empty database: their memberships, the scopes they name, and the shares of other
    projects that let them read those projects' public memories. Memberships and shares are
    kept only with the scope rows they belong to.
    """
    what = _check_what(what)
    statements = export_queries(identity.user_id, what)
    exported_at = datetime.now(UTC).isoformat()
    rows: dict[str, list[dict[str, Any]]] = {}
    for section in SECTIONS:
        query, params = statements[section]
        if section == "history":
            params = {"ids": [UUID(m["id"]) for m in rows["memories"]]}
        rows[section] = [_jsonable(row) for row in (yield Sql(query, params))]
    scopes = {(s["kind"], s["scope_id"]) for s in rows["scopes"]}  # read first: a scope deleted meanwhile
    rows["members"] = [m for m in rows["members"] if (m["kind"], m["scope_id"]) in scopes]  # took its rows
    rows["shares"] = [s for s in rows["shares"] if ("project", s["project_id"]) in scopes]
    return {"format": FORMAT, "version": VERSION, "exported_at": exported_at, "user_id": identity.user_id,
            "what": what, **{s: rows[s] for s in _SHOWN}}


# --- import: SQL (pure) and op ----------------------------------------------------------------


def _insert(section: str, *, vectors: bool = False, returning: str | None = None) -> sql.Composable:
    """Insert the rows of one section, passed as one JSON array; rows already there are skipped."""
    spec = _SECTIONS[section]
    names = list(spec.names) + (["embedding"] if vectors else [])
    defs = [sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(c.type)) for c in spec.columns]
    values = [sql.SQL("r.") + sql.Identifier(c) for c in spec.names]
    if vectors:
        defs.append(sql.SQL("embedding text"))
        values.append(sql.SQL("r.embedding::vector"))
    return sql.SQL(
        "INSERT INTO {table} ({cols}) SELECT {values} FROM jsonb_to_recordset(%s) AS r({defs})"
        " ON CONFLICT DO NOTHING{returning}"
    ).format(table=sql.Identifier(spec.table), cols=sql.SQL(", ").join(sql.Identifier(c) for c in names),
             values=sql.SQL(", ").join(values), defs=sql.SQL(", ").join(defs),
             returning=sql.SQL("") if returning is None else sql.SQL(" RETURNING ") + sql.Identifier(returning))


#: point imported memories at what replaced them, where that memory exists
_LINK_SUPERSEDED = (
    "UPDATE memory_items m SET superseded_by = l.target FROM jsonb_to_recordset(%s) AS l(id uuid, target uuid)"
    " WHERE m.id = l.id AND EXISTS (SELECT 1 FROM memory_items t WHERE t.id = l.target)"
)


def import_data(data: Any, config: MemoryConfig | None = None) -> Op[ImportReport]:
    """Write an export (as :func:`export_data` made it) into this database, an operator's action.

    Everything is checked before anything is written; then memory contents are embedded
    again (only those not in the database yet) and every section is written in one
    transaction, keeping ids, timestamps, status, versions and validity. ``superseded_by``
    is set once all memories exist, and only where the memory it names exists. Rows whose
    key is taken already are skipped, and counted so.

    Every row passes the gate (:func:`.format.screen_export`, with ``config``'s limits): a
    memory it refuses, or a row with a secret in it, is not written and is listed in the
    report's ``rejected``; secrets in a resource's text are withheld and the rest imported.
    """
    rows, rejected = screen_export(check_export(data), config or MemoryConfig())
    memories = rows["memories"]
    present: set[str] = set()
    if memories:
        found = yield Sql("SELECT id FROM memory_items WHERE id = ANY(%s::uuid[])", ([m["id"] for m in memories],))
        present = {str(r["id"]) for r in found}
        yield Commit()  # no connection is held while the model embeds
    new = [m for m in memories if m["id"] not in present]
    texts = tuple(dict.fromkeys(m["content"] for m in new))
    vectors = dict(zip(texts, (yield Embed(texts)))) if texts else {}

    inserted: dict[str, int] = {}
    for section in SECTIONS:
        if section == "memories":
            payload = [{**m, "superseded_by": None, "embedding": vector_literal(vectors[m["content"]])} for m in new]
            written = (yield Sql(_insert(section, vectors=True, returning="id"), (Jsonb(payload),))) if new else []
            ids = {str(r["id"]) for r in written}
            links = [{"id": m["id"], "target": m["superseded_by"]} for m in new
                     if m["id"] in ids and m["superseded_by"] is not None]
            if links:
                yield Sql(_LINK_SUPERSEDED, (Jsonb(links),), fetch="none")
            inserted[section] = len(ids)
        elif rows[section]:
            inserted[section] = yield Sql(_insert(section), (Jsonb(rows[section]),), fetch="rowcount")
        else:
            inserted[section] = 0
    return ImportReport({s: inserted[s] for s in _SHOWN}, {s: len(rows[s]) - inserted[s] for s in _SHOWN},
                        {s: rejected[s] for s in _SHOWN})
