"""Profiles in the database: build when stale, read for the agent, edit by hand.

A profile row holds what the builder made from active memory items
(``fields``) and what a person set by hand (``manual``, which wins field by
field and which no rebuild touches). A trigger on ``memory_items`` marks a
profile ``dirty`` whenever one of its inputs changes (not when a search
merely uses an item), so a profile is rebuilt only then:

- by the deterministic mapping (:mod:`agent_memory.profiles.rules`) inside one
  transaction holding the profile row, cheap enough to run on read;
- by the LLM (:mod:`agent_memory.profiles.schemas`) outside any transaction:
  the row is claimed (``dirty = false``) with the items read, the model asked,
  and the result written; a change made meanwhile sets ``dirty`` again and the
  next refresh picks it up. A refresh with the model also takes over a profile
  the rules built (a reader without the model rebuilt it after a change), so
  each change costs at most one model call and the model has the last word.

Inputs: a user profile reads the user's active user-scope items (not those said of a group
and kept as the user's for want of that level, ``said_of``); a project
profile the project's active items except those their creator marked
``owner_only`` (a shared profile must not leak a private memory).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from .. import access, queries
from ..db.requests import Commit, Llm, Op, Sql
from ..errors import InvalidInputError
from ..models import Identity, MemoryItem, Scope
from ..queries.rows import row_to_item
from ..validation import shown
from . import render, rules, schemas
from .fields import check_profile_fields, empty_fields, fields_of, merge_fields

__all__ = ["AgentProfiles", "Profile", "get_profile", "get_profiles", "refresh_profiles", "reset_profile_fields",
           "update_profile"]

logger = logging.getLogger(__name__)

Kind = Literal["user", "project"]
_MAX_INPUT_ITEMS = 200  # the newest items a build reads; a profile is a summary, not an archive


@dataclass(frozen=True, slots=True)
class Profile:
    """A user or project profile as a reader sees it: ``fields`` = built fields with the
    hand-set ones (``manual``) on top. ``built_by`` is ``"llm"``, ``"rules"`` or None (never built)."""

    kind: Kind
    subject_id: str
    fields: dict[str, Any]
    built: dict[str, Any] = field(default_factory=dict)
    manual: dict[str, Any] = field(default_factory=dict)
    built_by: str | None = None
    built_at: datetime | None = None
    edited_at: datetime | None = None
    stale: bool = False

    def render(self, budget_chars: int | None = None) -> str:
        """The profile's section of the system prompt (``""`` when it has nothing to say)."""
        return _rendered(self.kind, json.dumps(self.fields, sort_keys=True, default=str), budget_chars)


@functools.lru_cache(maxsize=1024)
def _rendered(kind: Kind, fields_json: str, budget_chars: int | None) -> str:
    """Rendering (cleaning every value, fitting the budget) takes milliseconds for a full profile,
    and the same profile is rendered before every model call until it changes: keep the text."""
    return render.render_profile(kind, json.loads(fields_json), budget_chars=budget_chars)


@dataclass(frozen=True, slots=True)
class AgentProfiles:
    """What :meth:`~agent_memory.handles.MemoryHandle.profiles` returns: both profiles
    (``project`` is None without a project) and their rendered sections."""

    user: Profile
    project: Profile | None

    @property
    def user_text(self) -> str:
        return self.user.render()

    @property
    def project_text(self) -> str:
        return self.project.render() if self.project is not None else ""


def _subjects(identity: Identity, kinds: tuple[Kind, ...] = ("user", "project")) -> list[tuple[Kind, str]]:
    out: list[tuple[Kind, str]] = []
    if "user" in kinds:
        out.append(("user", identity.user_id))
    if "project" in kinds and identity.project_id is not None:
        out.append(("project", identity.project_id))
    return out


def _profile(kind: Kind, subject: str, row: Mapping[str, Any] | None) -> Profile:
    if row is None:
        return Profile(kind, subject, empty_fields(kind), stale=True)
    built = {**empty_fields(kind), **(row["fields"] or {})}
    manual = dict(row["manual"] or {})
    return Profile(kind, subject, merge_fields(kind, built, manual), built, manual, row["built_by"], row["built_at"],
                   row["edited_at"], bool(row["dirty"]))


def _read(kind: Kind, subject: str, *, lock: bool = False) -> Sql:
    return Sql(*queries.select_profile(kind, subject, lock=lock), fetch="one")


def _inputs(kind: Kind, subject: str) -> Sql:
    """The active items a profile is built from, newest first."""
    return Sql(*queries.profile_inputs(kind, subject, _MAX_INPUT_ITEMS))


def _ensure_row(kind: Kind, subject: str) -> Sql:
    return Sql(*queries.ensure_profile(kind, subject), fetch="none")


def _write_built(kind: Kind, subject: str, fields: Mapping[str, Any], built_by: str, *, clean: bool) -> Sql:
    return Sql(*queries.write_built_profile(kind, subject, fields, built_by, clean=clean), fetch="none")


def _items(rows: list[dict[str, Any]]) -> list[MemoryItem]:
    """A profile's inputs: its level's items, except those extraction kept at the user's level
    though they were said of a team, project or organisation (``said_of``, see
    :mod:`agent_memory.extraction.levels`): they are not the user's own background."""
    return [item for item in map(row_to_item, rows) if not (item.scope is Scope.USER and "said_of" in item.metadata)]


def _build_by_rules(kind: Kind, items: list[MemoryItem]) -> dict[str, Any]:
    return rules.build_user_profile(items) if kind == "user" else rules.build_project_profile(items)


def _rebuild_with_rules(kind: Kind, subject: str) -> Op[bool]:
    """Rebuild one profile by rules if it is stale, in one transaction holding its row."""
    yield _ensure_row(kind, subject)
    row = yield _read(kind, subject, lock=True)
    if not row["dirty"]:
        return False
    items = _items((yield _inputs(kind, subject)))
    yield _write_built(kind, subject, _build_by_rules(kind, items), "rules", clean=True)
    return True


def _rebuild_with_llm(kind: Kind, subject: str, model: Any) -> Op[bool]:
    """Rebuild one stale profile with ``model``; falls back to the rules if the model fails."""
    yield _ensure_row(kind, subject)
    # stale, or built by the rules in the meantime (a reader without the model rebuilt it)
    claimed = yield Sql(*queries.claim_profile(kind, subject), fetch="one")
    if claimed is None:
        return False
    items = _items((yield _inputs(kind, subject)))
    yield Commit()
    schema = schemas.UserProfileUpdate if kind == "user" else schemas.ProjectProfileUpdate
    current = {**empty_fields(kind), **(claimed["fields"] or {})}
    try:
        update = yield Llm(model, schema, tuple(schemas.profile_messages(kind, current, items)))
        fields, built_by = schemas.fields_from_update(kind, update), "llm"
    except Exception:  # a profile is still owed: the rules make one without the model
        logger.warning("profile %s/%s: the model failed, built by rules instead",
                                            kind, subject, exc_info=True)
        fields, built_by = _build_by_rules(kind, items), "rules"
    yield _write_built(kind, subject, fields, built_by, clean=False)
    return True


def refresh_profiles(identity: Identity, *, model: Any = None, kinds: tuple[Kind, ...] = ("user", "project"),
                     force: bool = False) -> Op[list[str]]:
    """Rebuild the caller's stale profiles (or all of them, ``force``); answers the kinds rebuilt."""
    rebuilt: list[str] = []
    if "project" in kinds and identity.project_id is not None:
        standing = yield from access.scope_access(identity.user_id, Scope.PROJECT, identity.project_id)
        if standing.role is None:
            kinds = tuple(k for k in kinds if k != "project")  # not a member: the project profile is not theirs
    for kind, subject in _subjects(identity, kinds):
        if force:
            yield _ensure_row(kind, subject)
            yield Sql(*queries.mark_profile_dirty(kind, subject), fetch="none")
            yield Commit()
        done = yield from (_rebuild_with_llm(kind, subject, model) if model is not None
                           else _rebuild_with_rules(kind, subject))
        yield Commit()
        if done:
            rebuilt.append(kind)
    return rebuilt


def get_profiles(identity: Identity) -> Op[AgentProfiles]:
    """Both of the caller's profiles, as the agent should see them now.

    A stale profile is rebuilt by rules on the spot (a few milliseconds, and only after a
    change), even one the model built: serving it stale could show a memory the user just
    deleted. With a model, the next :func:`refresh_profiles` (after the agent's run) takes
    the profile over again.
    """
    # one round trip: both profiles, and whether the caller is a member of the project at all
    found = yield Sql(*queries.select_agent_profiles(identity.user_id, identity.project_id))
    member = bool(found[0]["member"])
    subjects = _subjects(identity, ("user", "project") if member else ("user",))
    rows: dict[str, Any] = {kind: None for kind, _ in subjects} | {r["kind"]: r for r in found if r["kind"]}
    for kind, subject in subjects:
        row = rows[kind]
        if row is not None and not row["dirty"]:
            continue
        yield Commit()
        yield from _rebuild_with_rules(kind, subject)
        yield Commit()
        rows[kind] = yield _read(kind, subject)
    user = _profile("user", identity.user_id, rows["user"])
    project = _profile("project", identity.project_id, rows.get("project")) if member else None
    return AgentProfiles(user, project)


def _check_kind(identity: Identity, kind: Any, action: access.Action) -> Op[tuple[Kind, str]]:
    """The profile ``kind`` names, once the caller's project role allows ``action`` on it."""
    if kind not in ("user", "project"):
        raise InvalidInputError("kind", f"must be 'user' or 'project', got {shown(kind)}")
    if kind == "user":
        return "user", identity.user_id
    if identity.project_id is None:
        raise InvalidInputError("project_id", "a project profile needs project_id=...")
    what = "reading the project profile" if action is access.Action.READ else "editing the project profile"
    yield from access.require(identity, Scope.PROJECT, identity.project_id, action, what,
                              lock=None if action is access.Action.READ else "share")
    return "project", identity.project_id


def get_profile(identity: Identity, kind: Any = "user") -> Op[Profile]:
    """One profile as stored (not rebuilt)."""
    kind, subject = yield from _check_kind(identity, kind, access.Action.READ)
    return _profile(kind, subject, (yield _read(kind, subject)))


def update_profile(identity: Identity, kind: Any, values: Any) -> Op[Profile]:
    """Set profile fields by hand. They win over built values until reset; ``None``/``[]`` clears a field."""
    kind, subject = yield from _check_kind(identity, kind, access.Action.EDIT_PROFILE)
    if not isinstance(values, Mapping) or not values:
        raise InvalidInputError("fields", f"must be a non-empty dict of profile fields ({', '.join(fields_of(kind))})")
    cleaned = check_profile_fields(kind, values)
    yield _ensure_row(kind, subject)
    yield Sql(*queries.set_manual_fields(kind, subject, cleaned, identity.user_id), fetch="none")
    return _profile(kind, subject, (yield _read(kind, subject)))


def reset_profile_fields(identity: Identity, kind: Any, names: Any = None) -> Op[Profile]:
    """Drop hand-set values (all, or the fields named) so the built ones show again."""
    kind, subject = yield from _check_kind(identity, kind, access.Action.EDIT_PROFILE)
    known = list(fields_of(kind))
    if names is None:
        names = known
    elif isinstance(names, str) or not all(n in known for n in names):
        raise InvalidInputError("names", f"must be a list of profile fields ({', '.join(known)}), got {shown(names)}")
    yield Sql(*queries.reset_manual_fields(kind, subject, names, identity.user_id), fetch="none")
    return _profile(kind, subject, (yield _read(kind, subject)))
