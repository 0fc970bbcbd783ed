"""A graph as one self-contained HTML page (``agent-memory graph show --html FILE``): nodes,
relations with their attitude and proximity, ended relations, storylines when there are any,
drawn by vis-network (https://visjs.github.io/vis-network/, Apache-2.0 or MIT).

The library's JavaScript comes from a Python package, pyvis (which ships vis-network 9.1.2 as a
file; we read the file and never import pyvis), and is inlined in the page with the graph, so
the page opens offline and fetches nothing when viewed. Install it with the ``graph-view``
extra (``pip install 'agent-memory[graph-view]'``). Everything the memory holds (names,
descriptions) goes into the page as JSON in a ``<script type="application/json">`` block with
``<``, ``>`` and ``&`` escaped, and is shown with ``textContent`` or drawn on the canvas, never
parsed as HTML. Pure apart from reading the library's files.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from .view import GraphView

__all__ = ["VIS_NETWORK_VERSION", "graph_data", "render", "vis_network"]

VIS_NETWORK_VERSION = "9.1.2"
_INSTALL = ("pip install 'agent-memory[graph-view]' (or pip install pyvis, which ships it), "
            "then run the command again")
#: attitude 1..5 as an edge colour, hostile red to warm green (unknown: grey)
_ATTITUDE = {1: "#c0392b", 2: "#e67e22", 3: "#95a5a6", 4: "#7dbb5a", 5: "#27ae60"}
_TYPES = {"person": ("dot", "#4a90d9"), "concept": ("diamond", "#9b59b6"), "entity": ("box", "#f0ad4e")}


@cache
def vis_network() -> tuple[str, str]:
    """vis-network's JavaScript and CSS, read from the installed pyvis package's files.
    :class:`ConfigurationError` with the install command when it is not installed."""
    spec = importlib.util.find_spec("pyvis")  # finds the package without running it
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in folders:
        lib = Path(folder) / "lib" / f"vis-{VIS_NETWORK_VERSION}"
        if (lib / "vis-network.min.js").is_file():
            return ((lib / "vis-network.min.js").read_text(encoding="utf-8"),
                    (lib / "vis-network.css").read_text(encoding="utf-8"))
    raise ConfigurationError(f"drawing a graph needs vis-network {VIS_NETWORK_VERSION}, which comes with the "
                             f"pyvis package and is not installed here: {_INSTALL}")


def graph_data(view: GraphView, title: str) -> dict[str, Any]:
    """The page's data: vis-network's nodes and edges, and the storylines (pure)."""
    nodes = []
    for n in view.nodes:
        shape, colour = ("star", "#e74c3c") if n.is_owner else _TYPES.get(n.node_type, ("dot", "#777"))
        kind = n.node_type + (f" / {n.entity_type}" if n.entity_type else "")
        nodes.append({"id": str(n.id), "label": "me" if n.is_owner else n.name, "shape": shape, "color": colour,
                      "value": max(1, n.source_count), "group": n.node_type,
                      "title": "\n".join(x for x in (f"{n.name} ({kind})", n.description,
                                                      f"mentioned by {n.source_count} memories, {n.state}") if x),
                      "details": {"name": n.name, "type": kind, "aliases": list(n.aliases),
                                  "description": n.description, "notes": list(n.notes_snippets[:5]),
                                  "state": n.state, "mentions": n.source_count}})
    edges = []
    for r in view.relations:
        ended = r.valid_to is not None or r.known_to is not None
        levels = ", ".join(f"{k} {v}/5" for k, v in (("attitude", r.attitude), ("proximity", r.proximity))
                           if v is not None)
        when = f"{r.valid_from:%Y-%m-%d} to {r.valid_to:%Y-%m-%d}" if r.valid_to else f"since {r.valid_from:%Y-%m-%d}"
        edges.append({"id": str(r.id), "from": str(r.from_id), "to": str(r.to_id), "label": r.rel_type,
                      "arrows": "to", "dashes": ended,
                      "color": {"color": _ATTITUDE.get(r.attitude or 0, "#b0b0b0"), "opacity": 0.45 if ended else 1},
                      "width": 1 + (r.proximity or 1), "length": 320 - 40 * (r.proximity or 1),
                      "title": "\n".join(x for x in (f"{r.from_name} {r.rel_type} {r.to_name} ({r.kind})",
                                                      r.description, levels, when + (" (ended)" if ended else ""))
                                         if x),
                      "ended": ended, "attitude": r.attitude, "proximity": r.proximity})
    storylines = [{"title": str(s.get("title", "")), "summary": str(s.get("summary", "")),
                   "node_ids": [str(i) for i in s.get("node_ids", ())]} for s in view.storylines]
    return {"title": title, "nodes": nodes, "edges": edges, "storylines": storylines}


def _script_json(data: Mapping[str, Any]) -> str:
    """JSON that cannot close the script block it sits in, nor open a comment or a tag."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def render(view: GraphView, *, title: str, library: tuple[str, str] | None = None) -> str:
    """The page: ``view`` drawn by vis-network, with a legend, the storylines and a panel that
    shows a clicked node's details. Once drawn, the page writes on ``<body>`` what vis-network
    holds (``data-nodes``, ``data-edges``) and whether the canvas was painted
    (``data-painted``), which tests read in a headless browser. ``library``: vis-network's
    (JavaScript, CSS); the installed one by default."""
    js, css = library if library is not None else vis_network()
    data = graph_data(view, title)
    return _PAGE.format(title=_html_text(title), css=css, js=js.replace("</script", "<\\/script"),
                        data=_script_json(data), page_js=_PAGE_JS,
                        legend=_legend(), counts=f"{len(data['nodes'])} nodes, {len(data['edges'])} relations")


def _legend() -> str:
    items: Iterable[str] = [f'<span class="key" style="color:{c}">&#9679;</span> {t}' for t, (_, c) in _TYPES.items()]
    items = [*items, '<span class="key" style="color:#e74c3c">&#9733;</span> the user',
             "edge colour: attitude (red 1 &rarr; green 5), thickness: proximity, dashed: ended"]
    return " &nbsp; ".join(items)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>{title}</title>
<style>{css}</style>
<style>
body {{ margin: 0; font: 14px system-ui, sans-serif; display: grid; grid-template-columns: 1fr 320px; height: 100vh; }}
header {{ grid-column: 1 / 3; padding: 8px 12px; border-bottom: 1px solid #ddd; }}
header h1 {{ font-size: 16px; margin: 0 0 4px 0; }}
#graph {{ height: calc(100vh - 64px); }}
aside {{ border-left: 1px solid #ddd; padding: 8px 12px; overflow: auto; height: calc(100vh - 80px); }}
aside h2 {{ font-size: 14px; }}
.key {{ font-size: 16px; }}
#details p {{ margin: 4px 0; white-space: pre-wrap; }}
</style></head>
<body>
<header><h1>{title}</h1><div>{counts} &middot; {legend}</div></header>
<div id="graph"></div>
<aside><h2>Details</h2><div id="details">Click a node or a relation.</div>
<h2>Storylines</h2><ul id="storylines"></ul></aside>
<script type="application/json" id="graph-data">{data}</script>
<script>{js}</script>
<script>{page_js}</script>
</body></html>
"""

_PAGE_JS = r"""
(function () {
  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var nodes = new vis.DataSet(data.nodes), edges = new vis.DataSet(data.edges);
  var network = new vis.Network(document.getElementById("graph"), {nodes: nodes, edges: edges}, {
    nodes: {font: {size: 14}, scaling: {min: 10, max: 40}},
    edges: {font: {size: 11, align: "middle"}, smooth: {type: "continuous"}},
    physics: {solver: "forceAtlas2Based", stabilization: {iterations: 150}},
    interaction: {hover: true, tooltipDelay: 150}
  });
  function line(parent, text) {
    var p = document.createElement("p"); p.textContent = text; parent.appendChild(p);
  }
  function show(title, lines) {
    var box = document.getElementById("details"); box.textContent = "";
    var h = document.createElement("strong"); h.textContent = title; box.appendChild(h);
    lines.forEach(function (t) { if (t) { line(box, t); } });
  }
  network.on("click", function (params) {
    if (params.nodes.length) {
      var d = nodes.get(params.nodes[0]).details;
      show(d.name, [d.type, d.aliases.length ? "also: " + d.aliases.join(", ") : "", d.description,
                    "mentioned by " + d.mentions + " memories (" + d.state + ")"].concat(d.notes));
    } else if (params.edges.length) {
      var e = edges.get(params.edges[0]);
      show(e.label, e.title.split("\n"));
    }
  });
  var list = document.getElementById("storylines");
  data.storylines.forEach(function (s) {
    var li = document.createElement("li"); li.textContent = s.title + (s.summary ? ": " + s.summary : "");
    li.style.cursor = "pointer";
    li.addEventListener("click", function () { network.selectNodes(s.node_ids); network.fit({nodes: s.node_ids}); });
    list.appendChild(li);
  });
  if (!data.storylines.length) { line(list, "none yet"); }
  network.once("afterDrawing", function (ctx) {
    var canvas = ctx.canvas, pixels = ctx.getImageData(0, 0, canvas.width, canvas.height).data, painted = 0;
    for (var i = 3; i < pixels.length; i += 4) { if (pixels[i] > 0) { painted++; } }
    document.body.dataset.nodes = String(network.body.nodeIndices.length);
    document.body.dataset.edges = String(network.body.edgeIndices.length);
    document.body.dataset.dashed = String(network.body.edgeIndices.filter(function (id) {
      return network.body.edges[id].options.dashes; }).length);
    document.body.dataset.painted = String(painted);
  });
})();
"""
