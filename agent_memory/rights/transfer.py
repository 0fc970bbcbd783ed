"""Export and import: reading a user's rows into the export format, and writing an export back.

- :func:`export_data` reads everything a user may read (``"visible"``: across all their
  projects, sessions, teams and orgs, in every status) or everything they created
  (``"owned"``) as plain JSON values. Vectors are left out: the same embedding model makes
  them again on import.
- :func:`import_data` puts an export back (ids, timestamps, status, versions and history
  preserved) for the user or the operator the caller names (:mod:`.authority`); rows already
  present are skipped with everything that would hang on them, so importing twice is harmless
  and an import never adds to rows it did not write.

The format itself (sections, columns, checks) lives in :mod:`.format`, the SQL in
:mod:`agent_memory.queries.transfer`; here are the two ops. Every op validates its input
before its first query.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

from .. import access, queries
from ..config import MemoryConfig
from ..db.requests import Commit, Embed, Op, Sql
from ..documents.chunks import embedding_text
from ..errors import InvalidInputError
from ..models import Identity, Scope
from ..validation import shown
from .authority import check_authority, check_import_authority
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


# --- export ----------------------------------------------------------------------------------


def export_queries(user_id: str, what: What) -> dict[str, queries.Query]:
    """The statement that reads each section for ``user_id`` (``history`` reads the exported
    memories' rows: its params take ``ids``)."""
    return {section: queries.export_section(section, what, user_id, table=_SECTIONS[section].table,
                                            columns=_SECTIONS[section].names, order=_SECTIONS[section].order)
            for section in SECTIONS}


def _check_what(what: Any) -> What:
    if what not in ("visible", "owned"):
        raise InvalidInputError("what", f"must be 'visible' (everything the user may read) or 'owned' (everything "
                                        f"the user created), got {shown(what)}")
    return what


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
            params = {**params, "ids": [UUID(m["id"]) for m in rows["memories"]]}
        rows[section] = [_jsonable(row) for row in (yield Sql(query, params))]
    scopes = {(s["kind"], s["scope_id"]) for s in rows["scopes"]}  # read first: a scope deleted meanwhile
    rows["members"] = [m for m in rows["members"] if (m["kind"], m["scope_id"]) in scopes]  # took its rows
    rows["shares"] = [s for s in rows["shares"] if ("project", s["project_id"]) in scopes]
    return {"format": FORMAT, "version": VERSION, "exported_at": exported_at, "user_id": identity.user_id,
            "what": what, **{s: rows[s] for s in _SHOWN}}


# --- import ----------------------------------------------------------------------------------


def _columns(section: str) -> list[tuple[str, str]]:
    return [(c.name, c.type) for c in _SECTIONS[section].columns]


def import_data(data: Any, config: MemoryConfig | None = None, *, user_id: Any = None,
                as_operator: Any = False) -> Op[ImportReport]:
    """Write an export (as :func:`export_data` made it) into this database.

    Whom it acts for is said, never read from the file: ``user_id`` (the rows may name that
    user only: their memories, documents and profile, scopes they create) or ``as_operator``
    (any principal: ownership, memberships, shares and profiles as the file says, an
    operator's power). A file naming anyone else is refused (:mod:`.authority`).

    Everything is checked before anything is written, ids, keys and names by the API's own
    rules; then memory contents are embedded again (only those not in the database yet) and
    every section is written in one transaction, keeping ids, timestamps, status, versions
    and validity. Rows whose key is taken already are skipped, and counted so; so is every
    row that hangs on a row this import did not write itself (a version of a memory, a
    passage of a document, a membership or share of a scope, a project's profile): an import
    adds nothing to what was there. ``superseded_by`` is set once all memories exist, and only
    where the memory it names was written now or belongs to the same user. Without
    ``as_operator`` the user also needs the role a write needs in each project, team or org
    their memories, documents and profiles name (as ``add`` and ``add_resource`` do).

    Every row passes the gate (:func:`.format.screen_export`, with ``config``'s limits): a
    memory it refuses, or a row with a secret in it, is not written and is listed in the
    report's ``rejected``; secrets in a resource's text are withheld and the rest imported.
    """
    acting = check_import_authority(user_id, as_operator)  # None: an operator's import, or nobody's
    operator = bool(as_operator)
    checked = check_export(data)
    check_authority(checked, acting, operator)
    rows, rejected = screen_export(checked, config or MemoryConfig())
    memories, resources, passages = rows["memories"], rows["resources"], rows["passages"]
    present: set[str] = set()
    for section, existing in (("memories", queries.existing_memory_ids), ("resources", queries.existing_resource_ids),
                              ("passages", queries.existing_passage_ids)):
        if rows[section]:
            present |= {str(r["id"]) for r in (yield Sql(*existing([row["id"] for row in rows[section]])))}
    nodes = rows["graph_nodes"]
    if memories or resources or passages or nodes:
        yield Commit()  # no connection is held while the model embeds
    new = [m for m in memories if m["id"] not in present]
    new_passages = [p for p in passages if p["id"] not in present and p["resource_id"] not in present]
    passage_texts = {p["id"]: embedding_text(p["headings"], p["content"]) for p in new_passages}  # as add_document
    contexts = [m["context"] for m in new if m.get("context") is not None]  # embedded in the same batch
    node_texts = {n["id"]: _node_text(n) for n in nodes if not n["is_owner"]}
    texts = tuple(dict.fromkeys([m["content"] for m in new] + contexts + list(passage_texts.values())
                                + list(node_texts.values())))
    vectors = dict(zip(texts, (yield Embed(texts)))) if texts else {}

    written: dict[str, set[tuple[str, ...]]] = {}  # the keys of the parent rows this import wrote

    def write(section: str, payload: list[dict[str, Any]], *, returning: tuple[str, ...] = (),
              embedded: bool | tuple[str, ...] = False, requires: tuple[str, str, str] | None = None) -> Op[int]:
        if not payload:
            written[section] = set()
            return 0
        statement = queries.import_section(_SECTIONS[section].table, _columns(section), payload, vectors=embedded,
                                           returning=returning, requires=requires)
        if not returning:
            return (yield Sql(*statement, fetch="rowcount"))
        answer = yield Sql(*statement)
        written[section] = {tuple(str(r[c]) for c in returning) for r in answer}
        return len(answer)

    inserted: dict[str, int] = {}
    for section in SECTIONS:
        given = rows[section]
        if section == "scopes":
            inserted[section] = yield from write(section, given, returning=("kind", "scope_id"))
        elif section == "members":
            inserted[section] = yield from write(section, [m for m in given if (m["kind"], m["scope_id"])
                                                           in written["scopes"]])
        elif section == "shares":
            inserted[section] = yield from write(section, [s for s in given if ("project", s["project_id"])
                                                           in written["scopes"]])
            if not operator:  # the scopes and memberships this import creates now count
                yield from _require_roles(acting, rows, written["scopes"])
        elif section == "memories":
            payload = [{**m, "superseded_by": None, "embedding": queries.vector_literal(vectors[m["content"]]),
                        "context_embedding": None if m.get("context") is None
                        else queries.vector_literal(vectors[m["context"]])}
                       for m in new]
            inserted[section] = yield from write(section, payload, returning=("id",),
                                                 embedded=("embedding", "context_embedding"))
            ids = sorted(i for (i,) in written[section])
            links = [{"id": m["id"], "target": m["superseded_by"]} for m in new
                     if (m["id"],) in written[section] and m["superseded_by"] is not None]
            if links:
                yield Sql(*queries.link_superseded(links, ids), fetch="none")
        elif section == "history":  # versions only of the memories written now
            inserted[section] = yield from write(section, [h for h in given
                                                           if (h["memory_id"],) in written["memories"]])
        elif section == "resources":
            inserted[section] = yield from write(section, given, returning=("id",))
        elif section == "passages":  # only into the documents written now; embedded again, as memories are
            payload = [{**p, "embedding": queries.vector_literal(vectors[passage_texts[p["id"]]])}
                       for p in new_passages if (p["resource_id"],) in written["resources"]]
            inserted[section] = yield from write(section, payload, embedded=True,
                                                 requires=(_SECTIONS["resources"].table, "resource_id", "id"))
        elif section == "profiles":  # a project's profile only with the project, written now
            inserted[section] = yield from write(section, [p for p in given if p["kind"] == "user"
                                                           or ("project", p["subject_id"]) in written["scopes"]])
        elif section == "graph_nodes":  # a node's vector: its first note's, as saving gives it
            payload = [{**n, "embedding": None if n["is_owner"] else queries.vector_literal(vectors[node_texts[n["id"]]])}
                       for n in given]
            inserted[section] = yield from write(section, payload, returning=("scope", "scope_id", "id"),
                                                 embedded=True)
        elif section == "graph_relations":  # only between nodes written now
            inserted[section] = yield from write(section, [
                r for r in given if (r["scope"], r["scope_id"], r["from_node"]) in written["graph_nodes"]
                and (r["scope"], r["scope_id"], r["to_node"]) in written["graph_nodes"]])
        elif section == "graph_mentions":  # of nodes written now, of memories this file holds
            kept_memories = {m["id"] for m in memories}
            inserted[section] = yield from write(section, [
                m for m in given if (m["scope"], m["scope_id"], m["node_id"]) in written["graph_nodes"]
                and (m["source_kind"] != "memory" or m["source_id"] in kept_memories)])
    return ImportReport({s: inserted[s] for s in _SHOWN}, {s: len(rows[s]) - inserted[s] for s in _SHOWN},
                        {s: rejected[s] for s in _SHOWN})


def _node_text(node: dict[str, Any]) -> str:
    """What a node's vector is made from on import: its first (oldest kept) note, which saving
    took the vector of; else its description or name."""
    notes = node["notes"]
    return str(notes[0]["content"]) if notes else node["description"] or node["name"]


def _require_roles(user_id: str | None, rows: dict[str, list[dict[str, Any]]],
                   created: set[tuple[str, ...]]) -> Op[None]:
    """Refuse a user's import into a project, team or org where their role does not allow the
    write (checked once the scopes and memberships this import creates are written, inside its
    transaction: a refusal writes nothing). What the role must allow is what the API asks of
    ``add`` / ``add_resource`` (write) and ``update_profile`` (edit the project's profile)."""
    assert user_id is not None
    needed: dict[tuple[str, str], tuple[access.Action, str]] = {}
    for section, verb in (("memories", "importing memories"), ("resources", "importing documents")):
        for row in rows[section]:
            if row["scope"] in ("project", "team", "org"):
                needed.setdefault((row["scope"], row["scope_id"]), (access.Action.CREATE, verb))
    for row in rows["graph_nodes"]:
        if row["scope"] in ("project", "team", "org"):
            needed.setdefault((row["scope"], row["scope_id"]), (access.Action.CREATE, "importing a shared graph"))
    for row in rows["profiles"]:
        if row["kind"] == "project" and ("project", row["subject_id"]) in created:
            needed[("project", row["subject_id"])] = (access.Action.EDIT_PROFILE, "importing the project's profile")
    who = Identity(user_id)
    for (scope, scope_id), (action, verb) in sorted(needed.items()):
        yield from access.require(who, Scope(scope), scope_id, action, verb, lock="share")
