"""Commands on one user's memories: add, search, list, show, delete, restore, edit, history, stats."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import InvalidInputError
from .context import identity, open_service, resolve_id
from .output import Output, jsonable, short_id

__all__ = ["add", "delete", "edit", "history", "list_", "restore", "search", "show", "stats"]



def _level(item: Any) -> str:
    scope = item.scope.value
    return f"{scope}:{item.scope_id}" if scope in ("project", "team", "org") else scope


def _item_row(item: Any) -> list[Any]:
    return [short_id(item.id), _level(item), item.memory_type.value, item.status.value, item.content]


_ITEM_HEADERS = ("id", "level", "type", "status", "content")


def _rejected(out: Output, result: Any) -> int:
    """A Rejection from the gate: nothing was stored (exit status 1)."""
    if out.json:
        out.data({"rejected": result.reason.value, "message": result.message})
    print(f"rejected ({result.reason.value}): {result.message}", file=sys.stderr)
    return 1


def add(args: argparse.Namespace, out: Output) -> int:
    from ..models import Rejection

    with open_service(args) as memory:
        result = memory.for_user(**identity(args)).add(args.content, memory_type=args.type, scope=args.scope,
                                                       visibility=args.visibility, confidence=args.confidence)
    if isinstance(result, Rejection):
        return _rejected(out, result)
    if out.json:
        out.data(result)
    else:
        verb = "already stored as" if result.deduplicated else "saved"
        out.line(f"{verb} {short_id(result.id)}  [{_level(result)}/{result.memory_type.value}] {result.content}",
                 "green")
    return 0


def search(args: argparse.Namespace, out: Output) -> int:
    with open_service(args) as memory:
        hits = memory.for_user(**identity(args)).search(
            args.query, k=args.k, memory_type=args.type, as_of=args.as_of, known_at=args.known_at,
            filter=_metadata_filter(args), subtree=args.subtree)
    if out.json:
        out.data([{**jsonable(h.item), "score": h.score, "similarity": h.similarity, "keyword": h.keyword}
                  for h in hits])
    else:
        out.table(("id", "score", "level", "type", "content"),
                  [[short_id(h.item.id), f"{h.score:.3f}", _level(h.item), h.item.memory_type.value, h.content]
                   for h in hits], empty="no memories found")
    return 0


def _metadata_filter(args: argparse.Namespace) -> Any:
    """``--filter``'s JSON, parsed; malformed JSON is an input error saying so."""
    if args.metadata_filter is None:
        return None
    try:
        return json.loads(args.metadata_filter)
    except json.JSONDecodeError as exc:
        raise InvalidInputError("--filter", f"is not JSON ({exc.msg}); quote it, e.g. "
                                            "--filter '{\"tags\": {\"$contains\": \"billing\"}}'") from None


def list_(args: argparse.Namespace, out: Output) -> int:
    with open_service(args) as memory:
        statuses = {"status": args.status} if args.status else {}
        items = memory.for_user(**identity(args)).list(limit=args.limit, memory_type=args.type,
                                                       filter=_metadata_filter(args), subtree=args.subtree, **statuses)
    if out.json:
        out.data(items)
    else:
        out.table(_ITEM_HEADERS, [_item_row(i) for i in items], empty="no memories")
    return 0


def _show_item(out: Output, item: Any, title: str | None = None) -> None:
    if out.json:
        out.data(item)
        return
    data = jsonable(item)
    data.pop("deduplicated", None)
    out.fields([(k, v) for k, v in data.items() if v not in (None, {}, "")], title=title)


def show(args: argparse.Namespace, out: Output) -> int:
    with open_service(args) as memory:
        me = memory.for_user(**identity(args))
        item = me.get(resolve_id(memory, me, args.memory_id))
    _show_item(out, item)
    return 0


def delete(args: argparse.Namespace, out: Output) -> int:
    with open_service(args) as memory:
        me = memory.for_user(**identity(args))
        item = me.delete(resolve_id(memory, me, args.memory_id), hard=args.hard)
    if out.json:
        out.data({"id": str(item.id), "deleted": bool(args.hard), "archived": not args.hard, "content": item.content})
    else:
        out.line(f"{'deleted' if args.hard else 'archived'} {item.id}  {item.content}"
                 + ("" if args.hard else f"  (agent-memory restore {short_id(item.id)} brings it back)"))
    return 0


def restore(args: argparse.Namespace, out: Output) -> int:
    with open_service(args) as memory:
        me = memory.for_user(**identity(args))
        item = me.restore(resolve_id(memory, me, args.memory_id))
    if out.json:
        out.data(item)
    else:
        out.line(f"restored {item.id}  {item.content}", "green")
    return 0


def edit(args: argparse.Namespace, out: Output) -> int:
    from ..errors import InvalidInputError
    from ..models import Rejection

    if args.content is None and args.type is None and args.confidence is None:
        raise InvalidInputError("edit", "says nothing to change; give --content, --type and/or --confidence")
    with open_service(args) as memory:
        me = memory.for_user(**identity(args))
        result = me.edit(resolve_id(memory, me, args.memory_id), content=args.content, memory_type=args.type,
                         confidence=args.confidence, reason=args.reason)
    if isinstance(result, Rejection):
        return _rejected(out, result)
    if out.json:
        out.data(result)
    else:
        out.line(f"edited {result.id} (version {result.version})  [{result.memory_type.value}] {result.content}",
                 "green")
    return 0


def history(args: argparse.Namespace, out: Output) -> int:
    with open_service(args) as memory:
        me = memory.for_user(**identity(args))
        versions = me.history(resolve_id(memory, me, args.memory_id))
    if out.json:
        out.data(versions)
        return 0

    def when(value: Any) -> str:
        return value.strftime("%Y-%m-%d %H:%M:%S") if value else ""

    # each row: a wording, and the change that made it (who decided, whose call, why)
    rows = [[short_id(v.memory_id), str(v.version), v.status.value + (" (now)" if v.current else ""),
             when(v.valid_from), when(v.valid_to or v.recorded_until),
             " ".join(x for x in (v.change, v.decided_by and f"({v.decided_by})") if x), v.changed_by or "",
             v.reason or "", v.content] for v in versions]
    out.table(("id", "version", "status", "from", "until", "change", "by", "why", "content"), rows,
              empty="no history")
    return 0


def stats(args: argparse.Namespace, out: Output) -> int:
    with open_service(args) as memory:
        s = memory.for_user(**identity(args)).stats()
    if out.json:
        out.data(s)
        return 0
    pairs: list[tuple[str, Any]] = [("total", s.total)]
    for name, counts in (("type", s.by_type), ("scope", s.by_scope), ("status", s.by_status)):
        pairs += [(f"{name}: {k}", v) for k, v in sorted(counts.items())]
    def when(value: Any) -> str:
        return value.strftime("%Y-%m-%d %H:%M:%S %Z") if value else "never"

    pairs += [("last write", when(s.last_write)),
              ("recalls", s.recalls), ("last used", when(s.last_used))]
    pairs += [("most recalled", f"{r.recalls}x {short_id(r.memory_id)} {r.content}") for r in s.most_recalled]
    pairs += [("least recalled", f"{r.recalls}x {short_id(r.memory_id)} {r.content}") for r in s.least_recalled]
    pairs += [("extraction runs left", "n/a (no --session)" if s.extractions_remaining is None
               else s.extractions_remaining)]
    if s.extractions_remaining is not None:
        pairs += [("extraction runs used", s.extraction_runs), ("messages waiting", s.turns_waiting),
                  ("waits for the budget", s.extraction_waits)]
        pairs += [("injected", f"{when(t.at)}: {t.count} ({', '.join(short_id(m.memory_id) for m in t.memories)})")
                  for t in s.recently_injected]
    pairs += [("storage", f"{s.storage_bytes:,} bytes")]
    out.fields(pairs)
    return 0
