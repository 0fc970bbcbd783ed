"""Export and import: reading a user's rows into the export format, and writing an export back.

- :func:`export_data` reads everything a user may read (``"visible"``: across all their
  projects, sessions, teams and orgs, in every status) or everything they created
  (``"owned"``) as plain JSON values. Vectors are left out: the same embedding model makes
  them again on import.
- :func:`import_data` puts an export back (ids, timestamps, status, versions and history
  preserved); rows already present are skipped, so importing twice is harmless.

The format itself (sections, columns, checks) lives in :mod:`.format`, the SQL in
:mod:`agent_memory.queries.transfer`; here are the two ops. Every op validates its input
before its first query.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

from .. import queries
from ..config import MemoryConfig
from ..db.requests import Commit, Embed, Op, Sql
from ..documents.chunks import embedding_text
from ..errors import InvalidInputError
from ..models import Identity
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
            params = {"ids": [UUID(m["id"]) for m in rows["memories"]]}
        rows[section] = [_jsonable(row) for row in (yield Sql(query, params))]
    scopes = {(s["kind"], s["scope_id"]) for s in rows["scopes"]}  # read first: a scope deleted meanwhile
    rows["members"] = [m for m in rows["members"] if (m["kind"], m["scope_id"]) in scopes]  # took its rows
    rows["shares"] = [s for s in rows["shares"] if ("project", s["project_id"]) in scopes]
    return {"format": FORMAT, "version": VERSION, "exported_at": exported_at, "user_id": identity.user_id,
            "what": what, **{s: rows[s] for s in _SHOWN}}


# --- import ----------------------------------------------------------------------------------


def _columns(section: str) -> list[tuple[str, str]]:
    return [(c.name, c.type) for c in _SECTIONS[section].columns]


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
    memories, passages = rows["memories"], rows["passages"]
    present: set[str] = set()
    if memories:
        found = yield Sql(*queries.existing_memory_ids([m["id"] for m in memories]))
        present = {str(r["id"]) for r in found}
    if passages:
        found = yield Sql(*queries.existing_passage_ids([p["id"] for p in passages]))
        present |= {str(r["id"]) for r in found}
    if memories or passages:
        yield Commit()  # no connection is held while the model embeds
    new = [m for m in memories if m["id"] not in present]
    new_passages = [p for p in passages if p["id"] not in present]
    passage_texts = {p["id"]: embedding_text(p["headings"], p["content"]) for p in new_passages}  # as add_document
    texts = tuple(dict.fromkeys([m["content"] for m in new] + list(passage_texts.values())))
    vectors = dict(zip(texts, (yield Embed(texts)))) if texts else {}

    inserted: dict[str, int] = {}
    for section in SECTIONS:
        if section == "memories":
            payload = [{**m, "superseded_by": None, "embedding": queries.vector_literal(vectors[m["content"]])}
                       for m in new]
            table = _SECTIONS[section].table
            written = (yield Sql(*queries.import_section(table, _columns(section), payload, vectors=True,
                                                         returning="id"))) if new else []
            ids = {str(r["id"]) for r in written}
            links = [{"id": m["id"], "target": m["superseded_by"]} for m in new
                     if m["id"] in ids and m["superseded_by"] is not None]
            if links:
                yield Sql(*queries.link_superseded(links), fetch="none")
            inserted[section] = len(ids)
        elif section == "passages":  # embedded again, as memories are
            payload = [{**p, "embedding": queries.vector_literal(vectors[passage_texts[p["id"]]])}
                       for p in new_passages]
            inserted[section] = (yield Sql(*queries.import_section(
                _SECTIONS[section].table, _columns(section), payload, vectors=True,
                requires=(_SECTIONS["resources"].table, "resource_id", "id")), fetch="rowcount")) if payload else 0
        elif rows[section]:
            inserted[section] = yield Sql(*queries.import_section(_SECTIONS[section].table, _columns(section),
                                                                  rows[section]), fetch="rowcount")
        else:
            inserted[section] = 0
    return ImportReport({s: inserted[s] for s in _SHOWN}, {s: len(rows[s]) - inserted[s] for s in _SHOWN},
                        {s: rejected[s] for s in _SHOWN})
