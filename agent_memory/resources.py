"""Resources, layer 1 of long-term memory: the raw material memories come from.

A session's conversation, a knowledge-base document or a project resource is
one row of ``memory_resources`` with an owner, a scope and timestamps, and
every memory item made from it names it (``source``, ``source_id``), so
"where did this come from?" always has an answer. A conversation is one row
per (user, session); its content grows with each extraction run by the part
of the transcript that run read, and its ``cursor`` is the id of the last
message read, so the next run starts after it (whether or not the agent has a
checkpointer, and in whichever process it runs).

Reads are scoped like memory items: a user's own user and session
resources, and the resources of the caller's project.
"""

from __future__ import annotations

import uuid
from typing import Any

from psycopg.types.json import Jsonb

from . import access, queries
from .config import MemoryConfig
from .db.requests import Op, Sql
from .errors import InvalidInputError, MemoryNotFoundError
from .models import Identity, Resource, ResourceKind, Scope, Source
from .queries.rows import row_to_resource
from .validation import (
    check_enum,
    check_k,
    check_metadata,
    check_offset,
    check_optional_id,
    check_scope_id,
    check_text,
    check_uuid,
)
from .withheld import find_secret, redact, refuse_secret, refuse_secrets_in_json

__all__ = [
    "MAX_RESOURCE_CHARS",
    "RESOURCE_SOURCES",
    "add_resource",
    "append_to_conversation",
    "conversation",
    "get_resource",
    "list_resources",
    "row_to_resource",
    "source_of",
]

#: a resource holds raw text up to this size; a conversation's transcript keeps its newest part
MAX_RESOURCE_CHARS = 1_000_000

#: the memory source that points at each kind of resource
RESOURCE_SOURCES = {
    ResourceKind.CONVERSATION: Source.CONVERSATION,
    ResourceKind.DOCUMENT: Source.KNOWLEDGE_BASE,
    ResourceKind.PROJECT_RESOURCE: Source.PROJECT_RESOURCE,
}

def _upsert(identity: Identity, *, kind: ResourceKind, scope: Scope, external_id: str | None, title: str | None,
            content: str, metadata: dict[str, Any]) -> Sql:
    scope_id = check_scope_id(identity, scope, "resource")
    params = {
        "id": uuid.uuid4(), "kind": kind.value, "user_id": identity.user_id, "scope": scope.value,
        "scope_id": scope_id, "project_id": identity.project_id if scope is not Scope.USER else None,
        "session_id": identity.session_id if scope is Scope.SESSION else None, "external_id": external_id,
        "title": title, "content": content, "metadata": Jsonb(metadata),
    }
    return Sql(*queries.upsert_resource(params), fetch="one")


def add_resource(
    config: MemoryConfig, identity: Identity, content: Any, *, kind: Any = ResourceKind.DOCUMENT, scope: Any = Scope.USER,
    title: Any = None, external_id: Any = None, metadata: Any = None,
) -> Op[Resource]:
    """Record a document or project resource; with ``external_id`` (a path, a URL, your own id) a
    second call with the same one replaces the content instead of adding a row.

    A secret in the content or title is replaced by ``[withheld: <kind>]`` and the rest kept;
    one in ``external_id`` or ``metadata`` is refused (InvalidInputError), nothing written."""
    kind = check_enum("kind", kind, ResourceKind)
    if kind is ResourceKind.CONVERSATION:
        raise InvalidInputError("kind", "conversations are recorded by extraction; add documents or "
                                        "project resources here (kind='document' or 'project_resource')")
    content = check_text("content", content)
    if len(content) > MAX_RESOURCE_CHARS:
        raise InvalidInputError("content", f"is {len(content)} characters long; the limit is {MAX_RESOURCE_CHARS}, "
                                           "split the document")
    scope = check_enum("scope", scope, Scope)
    if scope not in (Scope.USER, Scope.SESSION, Scope.PROJECT):
        raise InvalidInputError("scope", f"a resource belongs to a user, a session or a project, got {scope.value!r}")
    title = None if title is None else check_text("title", title, max_length=500).strip()
    external_id = check_optional_id("external_id", external_id)
    refuse_secret("external_id", external_id)  # an id is matched as given: it can't be redacted
    metadata = check_metadata(metadata)
    refuse_secrets_in_json("metadata", metadata)
    check_scope_id(identity, scope, "resource")
    yield from access.require_write(config, identity, scope, "adding a resource")
    # a document keeps its text, each secret in it withheld (see agent_memory.withheld)
    row = yield _upsert(identity, kind=kind, scope=scope, external_id=external_id,
                        title=None if title is None else redact(title), content=redact(content), metadata=metadata)
    return row_to_resource(row)


def conversation(identity: Identity) -> Op[Resource]:
    """The caller's session conversation, created on first use (needs a ``session_id``)."""
    if identity.session_id is None:
        raise InvalidInputError("session_id", "a conversation belongs to a session; pass session_id=...")
    row = yield Sql(*queries.select_conversation(identity), fetch="one")
    if row is None:
        # two first uses at once: one inserts, the other's insert does nothing and it reads that row
        yield Sql(*queries.insert_conversation(uuid.uuid4(), identity), fetch="none")
        row = yield Sql(*queries.select_conversation(identity), fetch="one")
    return row_to_resource(row)


def append_to_conversation(resource_id: Any, transcript: str, cursor: str | None) -> Op[None]:
    """Add what an extraction run read to the conversation and move its cursor past it.
    The transcript comes redacted (:func:`agent_memory.extraction.transcript.transcript`);
    it is redacted again here, so that no caller can store a secret through this path."""
    transcript = redact(transcript)
    if cursor is not None and find_secret(cursor):
        cursor = None  # message ids are made secret-free when read; never keep one that is not
    yield Sql(*queries.append_transcript(resource_id, transcript, cursor, MAX_RESOURCE_CHARS), fetch="none")


def get_resource(identity: Identity, resource_id: Any) -> Op[Resource]:
    resource_id = check_uuid(resource_id, "resource_id")
    row = yield Sql(*queries.select_resource_by_id(identity, resource_id), fetch="one")
    if row is None:
        raise MemoryNotFoundError(f"no resource {resource_id} is visible to user {identity.user_id!r}; "
                                  "list_resources shows the ones you can read")
    return row_to_resource(row)


def list_resources(identity: Identity, *, kind: Any = None, limit: Any = 50, offset: Any = 0) -> Op[list[Resource]]:
    """The resources the caller may read, most recently updated first."""
    limit = check_k(limit, 10_000, field="limit")
    offset = check_offset(offset)
    kind = None if kind is None else check_enum("kind", kind, ResourceKind).value
    rows = yield Sql(*queries.select_resources(identity, kind=kind, limit=limit, offset=offset))
    return [row_to_resource(r) for r in rows]


def source_of(identity: Identity, memory_id: Any) -> Op[Resource | None]:
    """The resource a memory the caller can see was made from; None when it was stated directly."""
    memory_id = check_uuid(memory_id)
    memory = yield Sql(*queries.select_item_by_id(queries.item_filter(identity, statuses=None), memory_id),
                       fetch="one")
    if memory is None:
        raise MemoryNotFoundError(f"no memory {memory_id} is visible to user {identity.user_id!r}; "
                                  "search or list memories to find valid ids")
    if memory["source_id"] is None:
        return None
    try:
        resource_id = uuid.UUID(memory["source_id"])
    except ValueError:
        return None  # a source id of the caller's own making, not one of ours
    row = yield Sql(*queries.select_resource_by_id(identity, resource_id), fetch="one")
    return None if row is None else row_to_resource(row)
