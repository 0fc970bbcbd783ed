"""Rows to models and models to rows: what the statements of this package read and write."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from psycopg.types.json import Jsonb

from ..models import (
    Identity,
    Retention,
    Membership,
    MemoryItem,
    MemoryType,
    NewMemory,
    Resource,
    ResourceKind,
    Role,
    Scope,
    Source,
    Status,
    Visibility,
)
from ..validation import check_scope_id
from .items import vector_literal

__all__ = ["new_item_row", "row_to_item", "row_to_membership", "row_to_resource"]


def row_to_item(row: Mapping[str, Any], *, deduplicated: bool = False) -> MemoryItem:
    """A row of :data:`.items.ITEM_COLUMNS` as a MemoryItem."""
    return MemoryItem(
        id=row["id"],
        content=row["content"],
        memory_type=MemoryType(row["memory_type"]),
        scope=Scope(row["scope"]),
        scope_id=row["scope_id"],
        user_id=row["user_id"],
        project_id=row["project_id"],
        session_id=row["session_id"],
        source=Source(row["source"]),
        source_id=row["source_id"],
        confidence=float(row["confidence"]),
        visibility=Visibility(row["visibility"]),
        status=Status(row["status"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        last_used_at=row["last_used_at"],
        access_count=int(row["access_count"]),
        metadata=dict(row["metadata"] or {}),
        deduplicated=deduplicated,
        valid_from=row.get("valid_from"),
        valid_to=row.get("valid_to"),
        superseded_by=row.get("superseded_by"),
        version=int(row.get("version") or 1),
        key=row.get("key"),
        expires_at=row.get("expires_at"),
        retention=Retention(row.get("retention") or "decay"),
        recorded_at=row.get("recorded_at") or row["created_at"],
        known_to=row.get("known_to"),
        context=row.get("context"),
        position=row.get("context_position"),
    )


def new_item_row(identity: Identity, new: NewMemory, content: str, vector: Sequence[float], *,
                 binary: bool = False, context_vector: Sequence[float] | None = None) -> dict[str, Any]:
    """A row for :func:`.items.insert_item`, or with ``binary`` for the binary COPY of
    :func:`.items.copy_items` (the vectors as float32 arrays), with a new id; ``context_vector``:
    the vector of ``new.context`` (None without one). An empty ``vector``: the row has none (a
    store without an index, migration ``0020``; found by its words only)."""
    def as_vector(v: Sequence[float]) -> Any:
        return np.asarray(v, dtype=np.float32) if binary else vector_literal(v)

    return {
        "id": uuid.uuid4(),
        "content": content,
        "memory_type": new.memory_type.value,
        "scope": new.scope.value,
        "scope_id": check_scope_id(identity, new.scope),
        "user_id": identity.user_id,
        "project_id": identity.project_id if new.scope in (Scope.PROJECT, Scope.SESSION) else None,
        "session_id": identity.session_id if new.scope is Scope.SESSION else None,
        "source": new.source.value,
        "source_id": new.source_id,
        "confidence": new.confidence,
        "visibility": new.visibility.value,
        "metadata": Jsonb(new.metadata),
        "key": new.key,
        "expires_at": new.expires_at,
        "retention": new.retention.value,
        "valid_from": new.valid_from,
        "context": new.context,
        "context_position": new.position,
        "context_embedding": None if context_vector is None or new.context is None else as_vector(context_vector),
        "embedding": None if not len(vector) else as_vector(vector),
    }


def row_to_resource(row: Mapping[str, Any]) -> Resource:
    """A row of :data:`.resources.RESOURCE_COLUMNS` as a Resource."""
    return Resource(
        id=row["id"], kind=ResourceKind(row["kind"]), user_id=row["user_id"], scope=Scope(row["scope"]),
        scope_id=row["scope_id"], project_id=row["project_id"], session_id=row["session_id"],
        external_id=row["external_id"], title=row["title"], content=row["content"],
        metadata=dict(row["metadata"] or {}), cursor=row["cursor"], created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def row_to_membership(row: Mapping[str, Any]) -> Membership:
    """A row of :func:`.access.select_members` / :func:`.access.select_memberships` as a Membership."""
    return Membership(scope=Scope(row["kind"]), scope_id=row["scope_id"], user_id=row["user_id"],
                      role=Role(row["role"]), added_by=row["added_by"], added_at=row["added_at"])
