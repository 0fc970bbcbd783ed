"""Profiles written by an LLM: the structured-output schemas, the messages, and the output check.

Pure: no I/O and no model call. The caller does
``model.with_structured_output(UserProfileUpdate).invoke(profile_messages("user", current, items))``
and passes the result to :func:`fields_from_update`, which never raises on what a model returns.
The model rewrites the whole profile from the memories each time: a field it leaves
empty is empty. Fields the user set by hand are kept by
:func:`~agent_memory.profiles.fields.merge_fields`, not by the model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_memory.formatting import escape
from agent_memory.models import MemoryItem
from agent_memory.prompts import render

from .fields import (
    MAX_ENTRY_CHARS,
    MAX_LIST_ENTRIES,
    MAX_TEXT_CHARS,
    PROJECT_FIELDS,
    USER_FIELDS,
    ProfileKind,
    coerce_profile_fields,
    fields_of,
)
from .rules import chronological

__all__ = [
    "KeyDecision",
    "ProjectProfileUpdate",
    "UserProfileUpdate",
    "fields_from_update",
    "profile_messages",
    "update_schema",
]

_LIMITS = f" At most {MAX_LIST_ENTRIES} entries of {MAX_ENTRY_CHARS} characters."


def _text(description: str) -> Any:
    return Field(default=None, description=f"{description} At most {MAX_TEXT_CHARS} characters; null if unknown.")


def _list(description: str) -> Any:
    return Field(default=None, description=f"{description}{_LIMITS} Empty or null if unknown.")


class KeyDecision(BaseModel):
    """A decision taken in the project."""

    model_config = ConfigDict(extra="ignore")

    decision: str = Field(description="What was decided, in one sentence.")
    rationale: str | None = Field(default=None, description="Why, if a memory says so; otherwise null.")
    timestamp: str | None = Field(
        default=None, description="When it was decided: the ISO-8601 date of the memory that records it, or null."
    )


class _ProfileUpdate(BaseModel):
    """Parses whatever a model sends: the JSON schema stays precise (enums, lists), but
    before validation the input goes through ``coerce_profile_fields``, so a bad choice or
    a string where a list belongs is dropped or fixed instead of failing the whole parse."""

    model_config = ConfigDict(extra="ignore")
    profile_kind: ClassVar[ProfileKind]

    @model_validator(mode="before")
    @classmethod
    def _tolerate(cls, data: Any) -> Any:
        return coerce_profile_fields(cls.profile_kind, data) if isinstance(data, Mapping) else data


class UserProfileUpdate(_ProfileUpdate):
    """The user profile, rewritten from the memories."""

    profile_kind: ClassVar[ProfileKind] = "user"

    username: str | None = _text(USER_FIELDS["username"].description)
    background: str | None = _text(USER_FIELDS["background"].description)
    profession: str | None = _text(USER_FIELDS["profession"].description)
    communication_style: Literal["concise", "detailed", "technical"] | None = Field(
        default=None, description=f"{USER_FIELDS['communication_style'].description} Null if unknown."
    )
    response_format: Literal["markdown", "plain", "code"] | None = Field(
        default=None, description=f"{USER_FIELDS['response_format'].description} Null if unknown."
    )
    language_preference: str | None = _text(USER_FIELDS["language_preference"].description)
    characteristics: list[str] | None = _list(USER_FIELDS["characteristics"].description)
    custom_instructions: list[str] | None = _list(USER_FIELDS["custom_instructions"].description)
    expertise_areas: list[str] | None = _list(USER_FIELDS["expertise_areas"].description)
    programming_languages: list[str] | None = _list(USER_FIELDS["programming_languages"].description)
    frequently_used_tools: list[str] | None = _list(USER_FIELDS["frequently_used_tools"].description)


class ProjectProfileUpdate(_ProfileUpdate):
    """The project profile, rewritten from the memories."""

    profile_kind: ClassVar[ProfileKind] = "project"

    project_goal: str | None = _text(PROJECT_FIELDS["project_goal"].description)
    tech_stack: list[str] | None = _list(PROJECT_FIELDS["tech_stack"].description)
    constraints: list[str] | None = _list(PROJECT_FIELDS["constraints"].description)
    key_decisions: list[KeyDecision] | None = Field(
        default=None, description=f"{PROJECT_FIELDS['key_decisions'].description} At most {MAX_LIST_ENTRIES}."
    )
    team_conventions: list[str] | None = _list(PROJECT_FIELDS["team_conventions"].description)
    current_phase: str | None = _text(PROJECT_FIELDS["current_phase"].description)


_SCHEMAS: Mapping[str, type[BaseModel]] = {"user": UserProfileUpdate, "project": ProjectProfileUpdate}


def update_schema(kind: ProfileKind) -> type[BaseModel]:
    """The structured-output schema for the ``kind`` profile."""
    fields_of(kind)  # rejects an unknown kind
    return _SCHEMAS[kind]


def profile_messages(
    kind: ProfileKind, current: Mapping[str, Any], items: Sequence[MemoryItem]
) -> list[BaseMessage]:
    """The system instructions and the data (current profile, memories oldest first) for one rewrite.

    Every memory sits in its own ``<memory>`` element with its content escaped, so no
    memory can close the ``<memories>`` block or forge another memory; the current
    profile's JSON is escaped the same way.
    """
    specs = fields_of(kind)
    described = "\n".join(
        f"- {name}: {spec.description}" + (f" One of: {', '.join(spec.choices)}." if spec.choices else "")
        for name, spec in specs.items()
    )
    subject = "the user: who they are and how they want to be answered" if kind == "user" else (
        "the project: its goal, stack, constraints, decisions, conventions and phase"
    )
    system = render("profile_update", kind=kind, subject=subject, fields=described)
    profile = json.dumps(coerce_profile_fields(kind, current), ensure_ascii=False, indent=2)
    memories = "\n".join(_memory(item) for item in chronological(items)) or "(none)"
    human = (
        f"<current_profile>\n{escape(profile)}\n</current_profile>\n\n"
        f"<memories>\n{memories}\n</memories>\n\n"
        f"Write the {kind} profile from these memories."
    )
    return [SystemMessage(content=system), HumanMessage(content=human)]


def _memory(item: MemoryItem) -> str:
    when = (item.valid_from or item.created_at).date().isoformat()
    attributes = f'id="{escape(str(item.id))}" type="{escape(str(item.memory_type))}" date="{when}"'
    return f"<memory {attributes}>{escape(' '.join(item.content.split()))}</memory>"


def fields_from_update(kind: ProfileKind, update: BaseModel | Mapping[str, Any] | Any) -> dict[str, Any]:
    """A full field dict of ``kind`` from what the model returned; never raises on model output.

    Accepts the pydantic object, a dict, or a JSON string. Invalid choices, wrong types
    and secrets are dropped, lists stripped and deduplicated, lengths capped.
    """
    fields_of(kind)  # an unknown kind is our caller's bug, not the model's
    if isinstance(update, BaseModel):
        values: Any = update.model_dump()
    elif isinstance(update, str):
        try:
            values = json.loads(update)
        except ValueError:
            values = None
    else:
        values = update
    return coerce_profile_fields(kind, values)
