"""Whom an import's rows name, and the refusal of a file that names anyone the call may not act for.

An export holds more than one user's rows: a visible export carries the other members'
memories of a shared project, the memberships and shares that give access, profiles, and
who edited what. Writing those rows back is an operator's power (it hands out ownership,
memberships and shares, and writes other users' memories and profiles), so an import
names the authority it was given: ``user_id`` (the rows may name that user only) or
``as_operator=True`` (any principal). A file that names anyone else is refused whole,
before anything is read or written, with the rows and the principals it named.

Everything here is pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import InvalidInputError, PermissionDeniedError
from ..validation import check_bool, check_id
from .format import _SHOWN, FORGOTTEN_USER

__all__ = ["check_authority", "check_import_authority", "named_principals"]

#: per section, the columns that give a principal something (owner, member, grantee, subject)
_HOLDERS: dict[str, tuple[str, ...]] = {
    "members": ("user_id",), "memories": ("user_id",), "resources": ("user_id",), "passages": ("user_id",),
}
#: per section, the columns that say who did something (a forgotten user may stand there)
_ACTORS: dict[str, tuple[str, ...]] = {
    "scopes": ("created_by",), "members": ("added_by",), "shares": ("shared_by",), "history": ("changed_by",),
    "profiles": ("edited_by",), "graph_nodes": ("created_by",), "graph_relations": ("recorded_by",),
    "graph_mentions": ("added_by",),
}
#: how many rows a refusal lists before it says "and N more"
_LISTED = 3


def _principals(section: str, row: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(column, principal)`` for each principal ``row`` names; a user is ``"alice"``, a team
    or org grantee ``"team 'x'"``."""
    for column in _HOLDERS.get(section, ()):
        yield column, row[column]
    for column in _ACTORS.get(section, ()):
        if row[column] is not None and row[column] != FORGOTTEN_USER:
            yield column, row[column]
    if section == "shares":
        kind, grantee = row["grantee_kind"], row["grantee_id"]
        yield "grantee_id", grantee if kind == "user" else f"{kind} {grantee!r}"
    elif section == "profiles" and row["kind"] == "user":
        yield "subject_id", row["subject_id"]
    elif section.startswith("graph_") and row["scope"] == "user":  # whose own graph it is
        yield "scope_id", row["scope_id"]


def named_principals(rows: Mapping[str, list[dict[str, Any]]]) -> Iterator[tuple[str, str]]:
    """``(where, principal)`` for every principal the checked rows of an export name
    (``("memories[3].user_id", "bob")``), in file order."""
    for section in _SHOWN:
        for i, row in enumerate(rows.get(section, ())):
            for column, principal in _principals(section, row):
                yield f"{section}[{i}].{column}", principal


def check_import_authority(user_id: Any, as_operator: Any) -> str | None:
    """The user an import acts for (None: an operator's import), from its two switches."""
    as_operator = check_bool("as_operator", as_operator)
    if as_operator and user_id is not None:
        raise InvalidInputError("user_id", "pass user_id (an import of that user's own rows) or as_operator=True "
                                           "(an operator's import of anyone's rows), not both")
    if as_operator or user_id is None:
        return None
    return check_id("user_id", user_id)


def check_authority(rows: Mapping[str, list[dict[str, Any]]], user_id: str | None, as_operator: bool) -> None:
    """Refuse (:class:`PermissionDeniedError`) a file whose rows name a principal other than
    ``user_id`` unless ``as_operator``: which rows, whom they name, and how to proceed."""
    if as_operator:
        return
    foreign = [(where, who) for where, who in named_principals(rows) if who != user_id]
    if not foreign:
        return
    names = sorted({who for _, who in foreign})
    shown = ", ".join(f"{where} names {who!r}" for where, who in foreign[:_LISTED])
    more = f" and {len(foreign) - _LISTED} more" if len(foreign) > _LISTED else ""
    given = f"user {user_id!r} only" if user_id is not None else "no user"
    named = ", ".join(map(repr, names[:_LISTED]))
    named += f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    raise PermissionDeniedError(
        f"this import acts for {given} but its rows name {named}, so nothing was written: import a user's own "
        f"rows with user_id='<that user>' (--user), or, as this database's operator, pass as_operator=True "
        f"(--as-operator), which writes ownership, memberships, shares and profiles as the file says. "
        f"Rows: {shown}{more}")
