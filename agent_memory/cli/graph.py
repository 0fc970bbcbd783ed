"""``agent-memory graph list|show|merge|split|export|build``: a user's knowledge graph, for people."""

from __future__ import annotations

import argparse
from typing import Any

from .context import identity, open_service
from .output import Output, short_id

__all__ = ["graph"]


def _node_rows(nodes: Any) -> list[tuple[str, ...]]:
    return [(short_id(n.id), n.name, n.node_type + (f"/{n.entity_type}" if n.entity_type else ""),
             str(n.source_count), n.state, ", ".join(n.aliases)) for n in nodes]


def _relation(r: Any) -> dict[str, Any]:
    return {"id": str(r.id), "from": str(r.from_id), "from_name": r.from_name, "to": str(r.to_id),
            "to_name": r.to_name, "kind": r.kind, "type": r.rel_type, "description": r.description,
            "attitude": r.attitude, "proximity": r.proximity, "valid_from": r.valid_from, "valid_to": r.valid_to}


def _node(n: Any) -> dict[str, Any]:
    return {"id": str(n.id), "name": n.name, "node_type": n.node_type, "entity_type": n.entity_type or None,
            "aliases": list(n.aliases), "description": n.description, "notes": list(n.notes_snippets),
            "is_owner": n.is_owner, "state": n.state, "salience": n.salience, "mentions": n.source_count}


def _write_html(me: Any, args: argparse.Namespace, around: str | None, out: Output) -> None:
    """``graph show --html FILE``: the graph as one self-contained page (:mod:`agent_memory.graph.html`)."""
    from pathlib import Path

    from ..graph import html

    library = html.vis_network()  # before reading anything: says how to install it when missing
    view = me.graph_view(around=around, limit=args.limit)
    title = f"knowledge graph of {args.user}" + (f" around {view.nodes[0].name}" if around and view.nodes else "")
    Path(args.html).write_text(html.render(view, title=title, library=library), encoding="utf-8")
    if out.json:
        out.data({"file": str(args.html), "nodes": len(view.nodes), "relations": len(view.relations)})
    else:
        nodes, relations = len(view.nodes), len(view.relations)
        out.line(f"wrote {args.html}: {nodes} node{'s' * (nodes != 1)}, {relations} relation{'s' * (relations != 1)} "
                 "(open it in a browser; it needs no network)")


def graph(args: argparse.Namespace, out: Output) -> int:
    from ..errors import InvalidInputError

    names: list[str] = args.names
    wanted = {"list": (0, 0), "show": (1, 1), "merge": (2, 2), "split": (1, 1), "export": (0, 0), "build": (0, 0)}
    if args.html and args.action != "show":
        raise InvalidInputError("graph " + args.action, "--html goes with show: agent-memory graph show --html FILE")
    if args.action == "show" and args.html:
        wanted["show"] = (0, 1)  # the whole graph, or around one node
    low, high = wanted[args.action]
    if not low <= len(names) <= high:
        raise InvalidInputError("graph " + args.action, f"takes {low if low == high else f'{low} to {high}'} "
                                f"node name(s) or id(s), got {len(names)}")
    if args.action == "split" and (not args.name or not args.memory):
        raise InvalidInputError("graph split", "needs --name NEW and at least one --memory ID")
    with open_service(args) as memory:
        me = memory.for_user(**identity(args))
        if args.action == "list":
            nodes = me.graph_nodes(node_type=args.type, limit=args.limit)
            if out.json:
                out.data([_node(n) for n in nodes])
            else:
                out.table(("id", "name", "type", "mentions", "state", "aliases"), _node_rows(nodes),
                          title=f"knowledge graph of {args.user}", empty=f"the graph of {args.user} is empty")
        elif args.action == "show" and args.html:
            _write_html(me, args, names[0] if names else None, out)
        elif args.action == "show":
            node, relations = me.graph_node(names[0])
            if out.json:
                out.data({**_node(node), "relations": [_relation(r) for r in relations]})
            else:
                out.fields([("id", str(node.id)), ("name", node.name), ("type", node.node_type),
                            ("aliases", ", ".join(node.aliases)), ("mentions", node.source_count),
                            ("state", node.state), ("description", node.description)], title=node.name)
                out.table(("from", "relation", "to", "attitude", "proximity", "until"),
                          [(r.from_name, f"{r.rel_type} ({r.kind})", r.to_name, str(r.attitude or ""),
                            str(r.proximity or ""), r.valid_to.date().isoformat() if r.valid_to else "now")
                           for r in relations], title="relations", empty="no relations")
        elif args.action == "merge":
            node = me.merge_nodes(names[0], names[1])
            out.data(_node(node)) if out.json else out.line(f"merged {names[1]!r} into {node.name} "
                                                             f"({short_id(node.id)})")
        elif args.action == "split":
            node = me.split_node(names[0], args.name, args.memory)
            out.data(_node(node)) if out.json else out.line(f"split {node.name} ({short_id(node.id)}) "
                                                             f"off {names[0]!r}")
        elif args.action == "export":
            nodes = me.graph_nodes(limit=10_000)
            every: dict[str, Any] = {}
            for n in nodes:
                for r in me.graph_node(str(n.id))[1]:
                    every[str(r.id)] = _relation(r)
            out.data({"user": args.user, "nodes": [_node(n) for n in nodes], "relations": list(every.values())})
        else:
            read = me.build_graph(batch=args.batch_size)
            out.data({"memories_read": read}) if out.json else out.line(f"read {read} memories into the graph")
    return 0
