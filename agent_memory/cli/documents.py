"""``agent-memory document add|search``: learn from a text or markdown file, search documents by passage."""

from __future__ import annotations

import argparse
from pathlib import Path

from .context import identity, open_service
from .output import Output

__all__ = ["document"]

#: how much of a passage a search result shows
_SHOWN = 160


def document(args: argparse.Namespace, out: Output) -> int:
    from ..errors import InvalidInputError

    if args.action == "add":
        path = Path(args.target)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInputError("PATH", f"cannot read {str(path)!r} as UTF-8 text ({exc}); give a text or "
                                            "markdown file") from None
        # the file's resolved path names the document, so adding the file again updates what came from it
        external_id = args.external_id or str(path.resolve())
        with open_service(args) as memory:
            report = memory.for_user(**identity(args)).add_document(
                text, title=args.title or path.name, external_id=external_id, scope=args.scope)
        if out.json:
            out.data(report)
        else:
            out.line(report.summary(), "green" if report.status == "done" else "yellow")
            for o in report.added + report.updated + report.superseded:
                out.line(f"  {o.decision.value.upper() if o.decision else '':9} {o.proposal.content}")
        return 0 if report.status == "done" else 1
    with open_service(args) as memory:
        hits = memory.for_user(**identity(args)).search_documents(args.target, k=args.k)
    if out.json:
        out.data(hits)
    else:
        rows = [(f"{h.score:.3f}", h.title or h.external_id or str(h.resource_id)[:8], " > ".join(h.headings),
                 " ".join(h.content.split())[:_SHOWN]) for h in hits]
        out.table(("score", "document", "section", "passage"), rows, empty="no passage matches")
    return 0
