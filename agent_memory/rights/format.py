"""The export format: what a file written by :func:`~agent_memory.rights.export_data` holds,
and the checks an import makes on it before anything is written.

An export is a JSON object: a few facts about it (``format``, ``version``, ``exported_at``,
``user_id``, ``what``) and one list of rows per section (:data:`SECTIONS`). Each section is one
table; its columns, their SQL types and the check each value must pass are declared once here
(``_SECTIONS``), so that reading the database, writing it back and validating a file all agree.
Everything here is pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from uuid import UUID

from ..config import MemoryConfig
from ..errors import InvalidInputError
from ..gate import check_content, normalize_content
from ..models import (
    MEMORY_TYPE_NAME, ROLES, MemoryType, Rejection, RejectionReason, ResourceKind, Scope, Source, Status, Visibility,
)
from ..profiles.fields import check_profile_fields
from ..queries.tables import table_of
from ..reports import DeleteReport, ForgetReport, ImportReport
from ..validation import (
    check_as_of,
    check_confidence,
    check_id,
    check_key,
    check_metadata,
    check_scope_name,
    check_text,
)
from ..withheld import redact, secret_in_json

__all__ = [
    "FORGOTTEN_USER",
    "FORMAT",
    "GRAPH_SECTIONS",
    "SECTIONS",
    "VERSION",
    "DeleteReport",
    "ForgetReport",
    "ImportReport",
    "check_export",
    "screen_export",
]

FORMAT = "agent-memory-export"
VERSION = 1
#: what replaces a forgotten user's id in rows that stay (others' history, scopes, shares)
FORGOTTEN_USER = "[forgotten user]"
#: the knowledge graph's tables (:mod:`agent_memory.graph`), in the order an import writes them:
#: the one place a new graph table (storylines, macros) joins the export, with its ``_SECTIONS``
#: entry below and its ``exported=True`` in ``USER_DATA_TABLES``
GRAPH_SECTIONS = ("graph_nodes", "graph_relations", "graph_mentions")
#: the export's tables, in the order an import writes them (rows point at earlier sections)
SECTIONS = ("scopes", "members", "shares", "memories", "history", "resources", "passages", "profiles",
            *GRAPH_SECTIONS)
_INFO_KEYS = ("format", "version", "exported_at", "user_id", "what")
_SHOWN = ("memories", "history", "resources", "passages", "profiles", "scopes", "members", "shares",
          *GRAPH_SECTIONS)  # file order


# --- the columns of each section, and the checks on what an import reads ---------------------

Check = Callable[[str, Any], Any]


def _uuid(path: str, value: Any) -> str:
    if isinstance(value, str):
        try:
            return str(UUID(value))
        except ValueError:
            pass
    raise InvalidInputError(path, f"must be a UUID string such as '0b5c9f1e-...', got {value!r}"[:200])


def _text(path: str, value: Any) -> str:
    return check_text(path, value)


def _text_or_empty(path: str, value: Any) -> str:
    return check_text(path, value, allow_empty=True)


# Ids, keys and names pass the API's own checks (:mod:`agent_memory.validation`): an import
# never stores a row the API would have refused, so nothing it writes is out of reach of the
# calls that read, edit or delete it.


def _id(path: str, value: Any) -> str:
    """A user, session, source or external id, as :func:`~agent_memory.validation.check_id`."""
    return check_id(path, value)


def _scope_name(path: str, value: Any) -> str:
    """A project, team or org id, as :func:`~agent_memory.validation.check_scope_name`."""
    return check_scope_name(path, value)


def _name(path: str, value: Any) -> str:
    """An id whose kind another column of the row says (see :data:`_ID_KIND`): checked as text
    here and by its kind's rule once the row is read (:func:`_check_row`)."""
    return check_text(path, value)


def _key(path: str, value: Any) -> str:
    return check_key(value, path)


def _title(path: str, value: Any) -> str:
    """A resource's title, as ``add_resource`` takes it (at most 500 characters, trimmed)."""
    return check_text(path, value, max_length=_MAX_TITLE).strip()


def _metadata(path: str, value: Any) -> dict[str, Any]:
    return check_metadata(value, path)


def _time(path: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(path, f"must be an ISO-8601 time string such as '2026-01-31T12:00:00+00:00', "
                                      f"got {type(value).__name__}")
    moment = check_as_of(value, path)
    assert moment is not None
    return moment.isoformat()


def _whole(minimum: int) -> Check:
    def check(path: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InvalidInputError(path, f"must be a whole number >= {minimum}, got {value!r}")
        return value
    return check


def _unit(path: str, value: Any) -> float:
    return check_confidence(value, path)


def _strings(path: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInputError(path, f"must be a list of strings, got {value!r}"[:200])
    return [check_text(f"{path}[{i}]", v) for i, v in enumerate(value)]


def _flag(path: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidInputError(path, f"must be true or false, got {value!r}")
    return value


def _object(path: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInputError(path, f"must be a JSON object, got {type(value).__name__}")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(path, f"must hold only JSON values: {exc}") from None
    return dict(value)


def _memory_type(path: str, value: Any) -> str:
    """A built-in or a custom type's name: a restore keeps the types a memory was saved with,
    whatever this service's ``custom_memory_types`` says (every read accepts them)."""
    if not isinstance(value, str) or MEMORY_TYPE_NAME.fullmatch(value) is None:
        raise InvalidInputError(path, f"must be a memory type (built-in: {', '.join(MemoryType.values())}, or a "
                                      f"custom type's name of lowercase letters, digits and '_'); got {value!r}"[:300])
    return value


def _one_of(values: Iterable[str]) -> Check:
    allowed = tuple(values)

    def check(path: str, value: Any) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise InvalidInputError(path, f"must be one of {', '.join(allowed)}; got {value!r}")
        return value
    return check


def _number(path: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) > 1e9:
        raise InvalidInputError(path, f"must be a number, got {value!r}"[:200])
    return float(value)


def _level(path: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise InvalidInputError(path, f"must be a whole number from 1 to 5, got {value!r}"[:200])
    return value


def _dates(path: str, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise InvalidInputError(path, f"must be a list of dates such as '2026-01-31', got {value!r}"[:200])
    out = []
    for i, v in enumerate(value):
        try:
            out.append(date.fromisoformat(v).isoformat())
        except (TypeError, ValueError):
            raise InvalidInputError(f"{path}[{i}]", f"must be a date such as '2026-01-31', got {v!r}"[:200]) from None
    return out


def _notes(path: str, value: Any) -> list[dict[str, Any]]:
    """A node's or relation's notes: a list of objects, each with its ``content``."""
    if not isinstance(value, list):
        raise InvalidInputError(path, f"must be a list of notes, got {type(value).__name__}")
    for i, note in enumerate(value):
        _object(f"{path}[{i}]", note)
        check_text(f"{path}[{i}].content", note.get("content"))
    return [dict(n) for n in value]


@dataclass(frozen=True, slots=True)
class _Col:
    name: str
    type: str  # the SQL type an import reads it as
    check: Check
    nullable: bool = False
    default: Any = None  # what a row without it gets (an export made before the column existed)


@dataclass(frozen=True, slots=True)
class _Section:
    table: str  # the table, as :data:`agent_memory.queries.USER_DATA_TABLES` names it for the section
    columns: tuple[_Col, ...]
    key: tuple[str, ...]  # unique within the section (the table's primary key)
    order: str  # ORDER BY of the export

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


_SHARED = tuple(s.value for s in (Scope.PROJECT, Scope.TEAM, Scope.ORG))
_OWN_SCOPES = ("user", "project", "session")  # where a resource or a profile lives

_GRAPHS = ("user", *_SHARED)  # whose graph: a user's own, or a project's, team's or org's
_GRAPH_STATES = ("candidate", "active", "core", "archived")

_SECTIONS: dict[str, _Section] = {
    "scopes": _Section(table_of("scopes"), (
        _Col("kind", "text", _one_of(_SHARED)), _Col("scope_id", "text", _scope_name),
        _Col("created_by", "text", _id), _Col("created_at", "timestamptz", _time),
        _Col("settings", "jsonb", _object),
    ), ("kind", "scope_id"), "kind, scope_id"),
    "members": _Section(table_of("members"), (
        _Col("kind", "text", _one_of(_SHARED)), _Col("scope_id", "text", _scope_name), _Col("user_id", "text", _id),
        _Col("role", "text", _text), _Col("added_by", "text", _id, True), _Col("added_at", "timestamptz", _time),
    ), ("kind", "scope_id", "user_id"), "kind, scope_id, user_id"),
    "shares": _Section(table_of("shares"), (
        _Col("project_id", "text", _scope_name), _Col("grantee_kind", "text", _one_of(("user", "team", "org"))),
        _Col("grantee_id", "text", _name), _Col("shared_by", "text", _id, True),
        _Col("shared_at", "timestamptz", _time),
    ), ("project_id", "grantee_kind", "grantee_id"), "project_id, grantee_kind, grantee_id"),
    "memories": _Section(table_of("memories"), (
        _Col("id", "uuid", _uuid), _Col("content", "text", _text),
        _Col("memory_type", "text", _memory_type), _Col("scope", "text", _one_of(Scope.values())),
        _Col("scope_id", "text", _name), _Col("user_id", "text", _id), _Col("project_id", "text", _scope_name, True),
        _Col("session_id", "text", _id, True), _Col("source", "text", _one_of(Source.values())),
        _Col("source_id", "text", _id, True), _Col("confidence", "double precision", _unit),
        _Col("visibility", "text", _one_of(Visibility.values())), _Col("status", "text", _one_of(Status.values())),
        _Col("created_at", "timestamptz", _time), _Col("updated_at", "timestamptz", _time),
        _Col("last_used_at", "timestamptz", _time, True), _Col("access_count", "integer", _whole(0)),
        _Col("metadata", "jsonb", _metadata), _Col("valid_from", "timestamptz", _time),
        _Col("valid_to", "timestamptz", _time, True), _Col("superseded_by", "uuid", _uuid, True),
        _Col("version", "integer", _whole(1)), _Col("key", "text", _key, True),
        _Col("expires_at", "timestamptz", _time, True),
        _Col("retention", "text", _one_of(("keep", "decay", "ephemeral")), default="decay"),
        _Col("recorded_at", "timestamptz", _time, True), _Col("known_to", "timestamptz", _time, True),
        # what was around the memory where it was learned (issue 29; absent in older exports: none);
        # an import embeds it again, as it does the content
        _Col("context", "text", _text, True), _Col("context_position", "integer", _whole(0), True),
    ), ("id",), "created_at, id"),
    "history": _Section(table_of("history"), (
        _Col("memory_id", "uuid", _uuid), _Col("version", "integer", _whole(1)), _Col("content", "text", _text),
        _Col("memory_type", "text", _memory_type), _Col("confidence", "double precision", _unit),
        _Col("metadata", "jsonb", _metadata), _Col("recorded_at", "timestamptz", _time),
        _Col("replaced_at", "timestamptz", _time), _Col("change", "text", _one_of(("update", "edit"))),
        _Col("decided_by", "text", _one_of(("llm", "similarity", "user")), True),
        _Col("reason", "text", _text_or_empty, True), _Col("changed_by", "text", _id),
        # who could read the version while it held (absent in older exports: the memory's own)
        _Col("visibility", "text", _one_of(Visibility.values()), True),
    ), ("memory_id", "version"), "memory_id, version"),
    "resources": _Section(table_of("resources"), (
        _Col("id", "uuid", _uuid), _Col("kind", "text", _one_of(ResourceKind.values())),
        _Col("user_id", "text", _id), _Col("scope", "text", _one_of(_OWN_SCOPES)),
        _Col("scope_id", "text", _name), _Col("project_id", "text", _scope_name, True),
        _Col("session_id", "text", _id, True), _Col("external_id", "text", _id, True),
        _Col("title", "text", _title, True), _Col("content", "text", _text_or_empty),
        _Col("metadata", "jsonb", _metadata), _Col("cursor", "text", _text_or_empty, True),
        _Col("created_at", "timestamptz", _time), _Col("updated_at", "timestamptz", _time),
    ), ("id",), "created_at, id"),
    "passages": _Section(table_of("passages"), (
        _Col("id", "uuid", _uuid), _Col("resource_id", "uuid", _uuid), _Col("user_id", "text", _id),
        _Col("scope", "text", _one_of(_OWN_SCOPES)), _Col("scope_id", "text", _name),
        _Col("position", "integer", _whole(0)), _Col("char_start", "integer", _whole(0)),
        _Col("char_end", "integer", _whole(0)), _Col("headings", "text[]", _strings),
        _Col("content", "text", _text_or_empty), _Col("content_hash", "text", _text),
        _Col("extracted_at", "timestamptz", _time, True), _Col("created_at", "timestamptz", _time),
        _Col("updated_at", "timestamptz", _time),
    ), ("id",), "resource_id, position"),
    "profiles": _Section(table_of("profiles"), (
        _Col("kind", "text", _one_of(("user", "project"))), _Col("subject_id", "text", _name),
        _Col("fields", "jsonb", _object), _Col("manual", "jsonb", _object), _Col("dirty", "boolean", _flag),
        _Col("built_by", "text", _one_of(("llm", "rules")), True), _Col("built_at", "timestamptz", _time, True),
        _Col("edited_by", "text", _id, True), _Col("edited_at", "timestamptz", _time, True),
        _Col("updated_at", "timestamptz", _time),
    ), ("kind", "subject_id"), "kind, subject_id"),
    # the knowledge graph: a graph is (scope, scope_id), a user's own or a shared level's; vectors
    # are left out and made again on import (a node's from its first note, as saving does)
    "graph_nodes": _Section(table_of("graph_nodes"), (
        _Col("scope", "text", _one_of(_GRAPHS)), _Col("scope_id", "text", _name), _Col("id", "uuid", _uuid),
        _Col("node_type", "text", _one_of(("person", "concept", "entity"))),
        _Col("entity_type", "text", _text_or_empty), _Col("name", "text", _text),
        _Col("canonical_name", "text", _text), _Col("aliases", "text[]", _strings),
        _Col("description", "text", _text_or_empty), _Col("notes", "jsonb", _notes),
        _Col("is_owner", "boolean", _flag), _Col("confidence", "real", _unit), _Col("salience", "real", _unit),
        _Col("recall_count", "integer", _whole(0)), _Col("last_recall_interval_days", "real", _number, True),
        _Col("decay_gradient", "real", _number), _Col("access_count", "integer", _whole(0)),
        _Col("last_accessed_at", "timestamptz", _time, True), _Col("state", "text", _one_of(_GRAPH_STATES)),
        _Col("retention", "text", _one_of(("keep", "decay", "ephemeral"))), _Col("is_dirty", "boolean", _flag),
        _Col("source_count", "integer", _whole(0)), _Col("first_mentioned_at", "timestamptz", _time, True),
        _Col("last_mentioned_at", "timestamptz", _time, True), _Col("distinct_days", "date[]", _dates),
        _Col("created_by", "text", _id), _Col("created_at", "timestamptz", _time),
        _Col("updated_at", "timestamptz", _time),
    ), ("scope", "scope_id", "id"), "scope, scope_id, created_at, id"),
    "graph_relations": _Section(table_of("graph_relations"), (
        _Col("scope", "text", _one_of(_GRAPHS)), _Col("scope_id", "text", _name), _Col("id", "uuid", _uuid),
        _Col("from_node", "uuid", _uuid), _Col("to_node", "uuid", _uuid),
        _Col("kind", "text", _one_of(("has_relationship_with", "engages_with", "associated_with", "relates_to",
                                      "involves", "connected_to"))),
        _Col("rel_type", "text", _text), _Col("description", "text", _text_or_empty),
        _Col("attitude", "smallint", _level, True), _Col("proximity", "smallint", _level, True),
        _Col("notes", "jsonb", _notes), _Col("confidence", "real", _unit), _Col("salience", "real", _unit),
        _Col("recall_count", "integer", _whole(0)), _Col("access_count", "integer", _whole(0)),
        _Col("last_accessed_at", "timestamptz", _time, True), _Col("state", "text", _one_of(_GRAPH_STATES)),
        _Col("source_memory", "uuid", _uuid, True), _Col("recorded_by", "text", _id),
        _Col("valid_from", "timestamptz", _time), _Col("valid_to", "timestamptz", _time, True),
        _Col("recorded_at", "timestamptz", _time), _Col("known_to", "timestamptz", _time, True),
        _Col("created_at", "timestamptz", _time), _Col("updated_at", "timestamptz", _time),
    ), ("scope", "scope_id", "id"), "scope, scope_id, created_at, id"),
    "graph_mentions": _Section(table_of("graph_mentions"), (
        _Col("scope", "text", _one_of(_GRAPHS)), _Col("scope_id", "text", _name), _Col("node_id", "uuid", _uuid),
        _Col("source_kind", "text", _one_of(("memory", "resource", "passage"))), _Col("source_id", "uuid", _uuid),
        _Col("mentioned_at", "timestamptz", _time), _Col("added_by", "text", _id),
    ), ("scope", "scope_id", "node_id", "source_kind", "source_id"), "scope, scope_id, node_id, source_kind, source_id"),
}

#: ids whose rule another column of the row decides: a shared scope's id is a scope path
#: (``check_scope_name``), a user's or a session's an id (``check_id``)
_ID_KIND = {
    "memories": ("scope_id", "scope"), "resources": ("scope_id", "scope"), "passages": ("scope_id", "scope"),
    "shares": ("grantee_id", "grantee_kind"), "profiles": ("subject_id", "kind"),
    **{section: ("scope_id", "scope") for section in GRAPH_SECTIONS},
}
#: a resource's title is at most this long (as ``add_resource`` takes it)
_MAX_TITLE = 500


# --- export: rows as plain JSON values --------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, date):  # a datetime too
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value




# --- import: validation (pure) ----------------------------------------------------------------


def _check_row(section: str, index: int, row: Any) -> dict[str, Any]:
    spec, where = _SECTIONS[section], f"{section}[{index}]"
    if not isinstance(row, Mapping):
        raise InvalidInputError(where, f"must be an object, got {type(row).__name__}")
    unknown = sorted(str(k) for k in row if k not in spec.names)
    if unknown:
        raise InvalidInputError(where, f"has unknown keys {unknown}; a row of {section} has the keys "
                                       f"{', '.join(spec.names)}")
    out: dict[str, Any] = {}
    for col in spec.columns:
        path, value = f"{where}.{col.name}", row.get(col.name)
        if value is None and col.default is not None:
            out[col.name] = col.default
        elif value is None:
            if not col.nullable:
                raise InvalidInputError(path, "is missing or null; every exported row has it (was the file edited?)")
            out[col.name] = None
        else:
            out[col.name] = col.check(path, value)
    if section in _ID_KIND:
        column, kind = _ID_KIND[section]
        check = _scope_name if out[kind] in _SHARED else _id
        out[column] = check(f"{where}.{column}", out[column])
    if section == "profiles":  # fields set by hand: names update_profile takes (values meet the gate later)
        try:
            check_profile_fields(out["kind"], dict.fromkeys(out["manual"]))
        except InvalidInputError as exc:
            raise InvalidInputError(f"{where}.manual.{exc.field}", str(exc)[len(exc.field) + 2:]) from None
    return out


_LEVEL_IDS = {"user": "user_id", "project": "project_id", "session": "session_id"}


def _check_links(rows: dict[str, list[dict[str, Any]]]) -> None:
    """What must hold between rows: each table's constraints, and rows pointing at rows."""
    for section in ("memories", "resources"):
        for i, row in enumerate(rows[section]):
            own = _LEVEL_IDS.get(row["scope"])
            if own is not None and row["scope_id"] != row[own]:
                raise InvalidInputError(f"{section}[{i}].scope_id", f"a {row['scope']} row's scope_id must equal its "
                                        f"{own} ({row['scope_id']!r} != {row[own]!r})")
    memories = {m["id"] for m in rows["memories"]}
    for i, h in enumerate(rows["history"]):
        if h["memory_id"] not in memories:
            raise InvalidInputError(f"history[{i}].memory_id", f"{h['memory_id']} is not in memories; a memory's "
                                                                "history is imported with the memory")
    resources = {r["id"]: r for r in rows["resources"]}
    for i, p in enumerate(rows["passages"]):
        resource = resources.get(p["resource_id"])
        if resource is None:
            raise InvalidInputError(f"passages[{i}].resource_id", f"{p['resource_id']} is not in resources; a "
                                                                   "passage is imported with its document")
        if (p["user_id"], p["scope"], p["scope_id"]) != (resource["user_id"], resource["scope"], resource["scope_id"]):
            raise InvalidInputError(f"passages[{i}]", "must have its document's user_id, scope and scope_id")
    scopes = {(s["kind"], s["scope_id"]) for s in rows["scopes"]}
    for i, m in enumerate(rows["members"]):
        if (m["kind"], m["scope_id"]) not in scopes:
            raise InvalidInputError(f"members[{i}].scope_id", f"{m['kind']} {m['scope_id']!r} is not in scopes; "
                                                               "a membership is imported with its scope")
        roles = [r.value for r in ROLES[Scope(m["kind"])]]
        if m["role"] not in roles:
            raise InvalidInputError(f"members[{i}].role", f"a {m['kind']} role is one of {', '.join(roles)}; "
                                                           f"got {m['role']!r}")
    for i, s in enumerate(rows["shares"]):
        if ("project", s["project_id"]) not in scopes:
            raise InvalidInputError(f"shares[{i}].project_id", f"project {s['project_id']!r} is not in scopes; a "
                                                                "share is imported with its project")
    nodes = {(n["scope"], n["scope_id"], n["id"]) for n in rows["graph_nodes"]}
    for section, columns in (("graph_relations", ("from_node", "to_node")), ("graph_mentions", ("node_id",))):
        for i, row in enumerate(rows[section]):
            for column in columns:
                if (row["scope"], row["scope_id"], row[column]) not in nodes:
                    raise InvalidInputError(f"{section}[{i}].{column}", f"{row[column]} is not a node of the same "
                                            "graph in graph_nodes; a relation or mention is imported with its nodes")


def check_export(data: Any) -> dict[str, list[dict[str, Any]]]:
    """The rows of an export, checked and normalised per section; :class:`InvalidInputError`
    naming the first bad field (``memories[3].scope``) otherwise."""
    if not isinstance(data, Mapping):
        raise InvalidInputError("data", f"must be the dict export_data returned (json.load the file), "
                                        f"got {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise InvalidInputError("format", f"must be {FORMAT!r}, got {data.get('format')!r}; this is not an "
                                          "agent-memory export")
    if data.get("version") != VERSION:
        raise InvalidInputError("version", f"this agent-memory reads export version {VERSION}, got "
                                           f"{data.get('version')!r}; import it with the version that wrote it")
    unknown = sorted(str(k) for k in data if k not in SECTIONS and k not in _INFO_KEYS)
    if unknown:
        raise InvalidInputError("data", f"has unknown keys {unknown}; an export has {', '.join(_INFO_KEYS)} "
                                        f"and the sections {', '.join(_SHOWN)}")
    rows: dict[str, list[dict[str, Any]]] = {}
    for section in SECTIONS:
        given = data.get(section, [])
        if not isinstance(given, Sequence) or isinstance(given, (str, bytes)):
            raise InvalidInputError(section, f"must be a list of rows, got {type(given).__name__}")
        rows[section] = [_check_row(section, i, row) for i, row in enumerate(given)]
        seen: dict[tuple[Any, ...], int] = {}
        for i, row in enumerate(rows[section]):
            key = tuple(row[k] for k in _SECTIONS[section].key)
            if key in seen:
                raise InvalidInputError(f"{section}[{i}]", f"repeats {section}[{seen[key]}] "
                                                           f"(same {', '.join(_SECTIONS[section].key)})")
            seen[key] = i
    _check_links(rows)
    return rows


# --- import: the gate over every row (pure) ---------------------------------------------------

#: a resource holds at most this many characters (as :data:`agent_memory.resources.MAX_RESOURCE_CHARS`)
_MAX_RESOURCE_CHARS = 1_000_000


def _secret_rejection(where: str, row: Mapping[str, Any], skip: tuple[str, ...] = ()) -> Rejection | None:
    """A SENSITIVE rejection naming the first column of ``row`` (ids, metadata, profile
    fields: anything stored as given) whose value or key holds a secret."""
    for name, value in row.items():
        if name in skip or value is None or isinstance(value, (bool, int, float)):
            continue
        found = secret_in_json(value)
        if found is not None:
            place = "" if found[0] == "the top" else f" ({found[0]})"
            return Rejection(RejectionReason.SENSITIVE, f"{where}.{name}{place} looks like it contains {found[1]}; "
                                                        "secrets are never stored, so the row was not imported",
                             kind=found[1])
    return None


def _gated(where: str, content: str, confidence: float, config: MemoryConfig) -> Rejection | None:
    rejection = check_content(content, confidence=confidence, config=config)
    if rejection is None:
        return None
    return Rejection(rejection.reason, f"{where}.content: {rejection.message}", rejection.kind)


def screen_export(
    rows: dict[str, list[dict[str, Any]]], config: MemoryConfig,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[tuple[int, Rejection]]]]:
    """The rows of a checked export that may be stored, and the ones refused, by section.

    An import is a write like any other, so it passes the same gate: each memory's content
    (normalised as the gate stores it) and confidence go through
    :func:`~agent_memory.gate.check_content`, each history wording through its content
    checks; a resource's content and title have their secrets withheld; every other value
    of every row (ids, metadata, settings, profile fields) is refused with its row when it
    holds a secret. Rows that hang on a refused row go with it (the history of a refused
    memory; the members and shares of a refused scope).
    """
    kept: dict[str, list[dict[str, Any]]] = {}
    rejected: dict[str, list[tuple[int, Rejection]]] = {section: [] for section in _SHOWN}
    refused_scopes: set[tuple[str, str]] = set()
    refused_memories: dict[str, str] = {}  # id -> where
    refused_resources: dict[str, str] = {}  # id -> where
    refused_nodes: dict[tuple[str, str, str], str] = {}  # (scope, scope_id, id) -> where
    for section in SECTIONS:
        kept[section] = []
        for i, row in enumerate(rows[section]):
            where = f"{section}[{i}]"
            row = dict(row)
            rejection: Rejection | None = None
            if section in ("members", "shares"):
                scope = (row["kind"], row["scope_id"]) if section == "members" else ("project", row["project_id"])
                if scope in refused_scopes:
                    rejection = Rejection(RejectionReason.SENSITIVE, f"{where}: its scope was not imported")
            elif section == "memories":
                row["content"] = normalize_content(row["content"])
                rejection = _gated(where, row["content"], row["confidence"], config)
                if row.get("context") is not None:  # the turns around it: secrets withheld, as the API does
                    row["context"] = redact(row["context"])
            elif section == "history":
                if row["memory_id"] in refused_memories:
                    rejection = Rejection(RejectionReason.SENSITIVE, f"{where}: its memory, "
                                          f"{refused_memories[row['memory_id']]}, was not imported")
                else:  # a past wording: held to the content rules, not to today's confidence floor
                    row["content"] = normalize_content(row["content"])
                    rejection = _gated(where, row["content"], 1.0, config)
            elif section in ("graph_relations", "graph_mentions"):
                ends = [(row["scope"], row["scope_id"], row[c]) for c in ("from_node", "to_node", "node_id") if c in row]
                gone = next((refused_nodes[e] for e in ends if e in refused_nodes), None)
                if gone is not None:
                    rejection = Rejection(RejectionReason.SENSITIVE, f"{where}: its node, {gone}, was not imported")
                elif section == "graph_mentions" and row["source_id"] in refused_memories:
                    rejection = Rejection(RejectionReason.SENSITIVE, f"{where}: its memory, "
                                          f"{refused_memories[row['source_id']]}, was not imported")
            elif section == "passages":
                if row["resource_id"] in refused_resources:
                    rejection = Rejection(RejectionReason.SENSITIVE, f"{where}: its document, "
                                          f"{refused_resources[row['resource_id']]}, was not imported")
                else:
                    row["content"] = redact(row["content"])
            elif section == "resources":
                if len(row["content"]) > _MAX_RESOURCE_CHARS:
                    rejection = Rejection(RejectionReason.TOO_LONG, f"{where}.content is {len(row['content'])} "
                                          f"characters long; a resource holds at most {_MAX_RESOURCE_CHARS}")
                else:
                    row["content"] = redact(row["content"])
                    row["title"] = None if row["title"] is None else redact(row["title"])
            if rejection is None:
                rejection = _secret_rejection(where, row, {"resources": ("content", "title"),
                                                           "passages": ("content",),
                                                           "memories": ("context",)}.get(section, ()))
            if rejection is None:
                kept[section].append(row)
                continue
            rejected[section].append((i, rejection))
            if section == "scopes":
                refused_scopes.add((row["kind"], row["scope_id"]))
            elif section == "memories":
                refused_memories[row["id"]] = where
            elif section == "resources":
                refused_resources[row["id"]] = where
            elif section == "graph_nodes":
                refused_nodes[(row["scope"], row["scope_id"], row["id"])] = where
    return kept, rejected
