"""Split a test's keyword arguments into the identity (for ``for_user``) and the rest (for the call)."""

from __future__ import annotations

from typing import Any

IDS = ("user_id", "project_id", "session_id", "team_id", "org_id")


def split_ids(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(identity keywords, other keywords)`` of ``kwargs``."""
    return ({k: v for k, v in kwargs.items() if k in IDS}, {k: v for k, v in kwargs.items() if k not in IDS})
