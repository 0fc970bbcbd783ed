"""``agent-memory profile show|edit``: the user's or the project's profile, and hand-set fields."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .context import identity, open_service
from .output import Output

__all__ = ["parse_assignments", "profile"]


def _value(text: str) -> Any:
    """JSON when it parses (``["Vim", "Emacs"]``, ``3``), else the text itself; empty clears."""
    if text.strip() == "":
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_assignments(items: list[str]) -> dict[str, Any]:
    from ..errors import InvalidInputError

    fields: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidInputError("--set", f"expects FIELD=VALUE, got {item!r}")
        fields[name.strip()] = _value(value)
    return fields


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return "; ".join(_shown(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    return str(value)


def _print(out: Output, prof: Any) -> None:
    if out.json:
        out.data(prof)
        return
    built = f"built by {prof.built_by}" if prof.built_by else "never built"
    rows = [(name, _shown(value), "by hand" if name in prof.manual else "built")
            for name, value in sorted(prof.fields.items()) if value not in (None, [], "", {})]
    out.table(("field", "value", "source"), rows, title=f"{prof.kind} profile of {prof.subject_id} ({built})",
              empty=f"the {prof.kind} profile of {prof.subject_id} is empty")


def profile(args: argparse.Namespace, out: Output) -> int:
    from ..errors import InvalidInputError

    ids = identity(args)
    if args.action == "show":
        if args.set or args.reset:
            raise InvalidInputError("--set", "belongs to 'profile edit', not 'profile show'")
        with open_service(args) as memory:
            profiles = memory.for_user(**ids).profiles()  # rebuilt first when its memories changed
            prof = profiles.user if args.kind == "user" else profiles.project
            if prof is None:
                prof = memory.for_user(**ids).profile(args.kind)
        _print(out, prof)
        return 0
    fields = parse_assignments(args.set)
    if not fields and not args.reset:
        raise InvalidInputError("profile edit", "says nothing to change; give --set FIELD=VALUE and/or --reset FIELD")
    with open_service(args) as memory:
        if fields:
            prof = memory.for_user(**ids).update_profile(fields, kind=args.kind)
        if args.reset:
            names = None if "all" in args.reset else args.reset
            prof = memory.for_user(**ids).reset_profile_fields(names, kind=args.kind)
    _print(out, prof)
    return 0
