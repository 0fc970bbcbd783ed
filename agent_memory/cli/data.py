"""Commands on a whole database or a whole user: export, import, forget-user, reembed."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .context import config, identity, open_service
from .output import Output

__all__ = ["ProgressEmbeddings", "export", "forget_user", "import_", "maintain", "read_items", "reembed"]

_CHUNK = 64


class ProgressEmbeddings:
    """An embedder that passes texts to ``inner`` a chunk at a time and reports each chunk:
    embedding is what takes the time of an import, so this is what a progress bar follows."""

    def __init__(self, inner: Any, update: Callable[[int, int], None]) -> None:
        self.inner, self.update = inner, update

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), _CHUNK):
            vectors += self.inner.embed_documents(texts[start:start + _CHUNK])
            self.update(len(vectors), len(texts))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    return Path(path).expanduser().read_text(encoding="utf-8")


def read_items(text: str) -> Any:
    """A JSON document (an export, or an array of memories), else JSON lines (one memory a line)."""
    from ..errors import InvalidInputError

    try:
        return json.loads(text)
    except ValueError:
        pass
    items = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                items.append(json.loads(line))
            except ValueError as exc:
                raise InvalidInputError("file", f"line {number} is not JSON ({exc}); give an export, a JSON "
                                                "array of memories, or one JSON memory per line") from None
    return items


def export(args: argparse.Namespace, out: Output) -> int:
    with open_service(args) as memory:
        data = memory.export_data(user_id=args.user, what="owned" if args.owned else "visible")
    text = json.dumps(data, ensure_ascii=False, indent=None if out.json or not args.output else 1)
    counts = {k: len(v) for k, v in data.items() if isinstance(v, list)}
    if not args.output:
        print(text, file=out.out)
        return 0
    Path(args.output).expanduser().write_text(text + "\n", encoding="utf-8")
    if out.json:
        out.data({"file": args.output, "counts": counts})
    else:
        out.line(f"exported {', '.join(f'{n} {k}' for k, n in counts.items())} of {args.user} to {args.output}",
                 "green")
    return 0


def _import_export(memory: Any, data: Any, args: argparse.Namespace, out: Output) -> int:
    with out.progress("embedding memories") as update:
        memory.embeddings = ProgressEmbeddings(memory.embeddings, update)
        report = memory.import_data(data, user_id=args.user, as_operator=args.as_operator)
    if out.json:
        out.data(report)
    else:
        out.table(("section", "written", "skipped (already there)", "rejected (gate)"),
                  [(s, n, report.skipped.get(s, 0), len(report.rejected.get(s, ())))
                   for s, n in report.inserted.items()], title="imported")
        for section, refused in report.rejected.items():
            for _, rejection in refused:
                out.line(f"rejected: {rejection.message}", "yellow")
    return 0


def _import_list(memory: Any, items: list[Any], args: argparse.Namespace, out: Output) -> int:
    from ..errors import InvalidInputError

    if not args.user:
        raise InvalidInputError("--user", "is required to import a list of memories: say whose they become")
    if isinstance(args.batch_size, bool) or not 1 <= args.batch_size <= 10_000:
        raise InvalidInputError("--batch-size", f"must be from 1 to 10000, got {args.batch_size}")
    owner = memory.for_user(**identity(args))
    inserted, rejected, duplicates = 0, [], []
    with out.progress("importing memories", total=len(items)) as update:
        update(0, len(items))
        for start in range(0, len(items), args.batch_size):
            result = owner.add_many(items[start:start + args.batch_size], dedupe=args.dedupe)
            inserted += len(result.inserted)
            rejected += [(start + i, r) for i, r in result.rejected]
            duplicates += [(start + i, d) for i, d in result.duplicates]
            update(min(len(items), start + args.batch_size), len(items))
    if out.json:
        out.data({"inserted": inserted, "rejected": [{"index": i, "reason": r.reason.value, "message": r.message}
                                                     for i, r in rejected],
                  "duplicates": [{"index": i, "of": str(d)} for i, d in duplicates]})
        return 0
    out.line(f"imported {inserted} of {len(items)} memories for {args.user}"
             + (f", {len(duplicates)} duplicates skipped" if duplicates else "")
             + (f", {len(rejected)} rejected:" if rejected else ""), "green")
    out.table(("item", "reason", "message"), [(i + 1, r.reason.value, r.message) for i, r in rejected], empty="")
    return 0


def import_(args: argparse.Namespace, out: Output) -> int:
    from ..errors import InvalidInputError

    data = read_items(_read(args.file))
    if isinstance(data, dict) and "format" in data:
        with open_service(args) as memory:
            return _import_export(memory, data, args, out)
    if args.as_operator:
        raise InvalidInputError("--as-operator", "is for an export file; a list of memories is imported for --user")
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise InvalidInputError("file", "holds neither an export nor a list of memories")
    with open_service(args) as memory:
        return _import_list(memory, data, args, out)


def forget_user(args: argparse.Namespace, out: Output) -> int:
    from ..errors import InvalidInputError

    if not args.yes:
        if not sys.stdin.isatty():
            raise InvalidInputError("--yes", f"forget-user erases {args.user_id!r} for good; pass --yes to confirm")
        answer = input(f"erase every memory, resource, profile and thread of {args.user_id!r} for good? "
                       "type the user id to confirm: ")
        if answer.strip() != args.user_id:
            print("agent-memory: nothing erased", file=sys.stderr)
            return 1
    with open_service(args) as memory:
        report = memory.forget_user(user_id=args.user_id)
    if out.json:
        out.data(report)
        return 0
    removed = {k: v for k, v in report.removed.items() if v}
    out.table(("removed", "rows"), sorted(removed.items()), title=f"forgot {report.user_id}",
              empty=f"nothing of {report.user_id} was stored")
    for kind, scope_id in report.ownerless:
        out.line(f"{kind} {scope_id} has no owner now: give it one (add_member)", "yellow")
    return 0


def maintain(args: argparse.Namespace, out: Output) -> int:
    with open_service(args) as memory:
        report = memory.maintain()
    if out.json:
        out.data(report)
    else:
        out.line(report.summary())
    return 0


def reembed(args: argparse.Namespace, out: Output) -> int:
    from ..db.connection import open_pool, resolve_dsn
    from ..embeddings import resolve_embeddings
    from ..reembed import reembed as run_reembed

    cfg = config(args)
    embeddings = resolve_embeddings(cfg)
    pool = open_pool(resolve_dsn(cfg.database_url, cfg), min_size=1, max_size=2, name="agent-memory-reembed")
    try:
        with out.progress("re-embedding memories") as update:
            report = run_reembed(pool, embeddings, batch_size=args.batch_size, force=args.force, progress=update)
    finally:
        pool.close()
    if out.json:
        out.data(report)
    elif not report.switched:
        out.line(f"nothing to do: the {report.total} memories are embedded with {report.model} "
                 f"({report.dimensions} dimensions) already; --force re-embeds them anyway")
    else:
        was = f"{report.previous_model or 'an unrecorded model'} ({report.previous_dimensions} dimensions)"
        resumed = f", {report.resumed} kept from an interrupted run" if report.resumed else ""
        out.line(f"re-embedded {report.embedded} of {report.total} memories{resumed}; the database now uses "
                 f"{report.model} ({report.dimensions} dimensions) instead of {was}", "green")
    return 0
