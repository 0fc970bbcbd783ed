"""``agent-memory graph show --html FILE`` (issue 32): a self-contained page that draws a user's
graph with vis-network, opened in headless Chromium (Debian's, no network) to check what it
draws: as many nodes and relations as the graph has, ended relations dashed, pixels painted.
Skipped, saying why, only when Chromium is not installed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from agent_memory.cli import main
from agent_memory.errors import ConfigurationError
from agent_memory.graph import html
from agent_memory.graph.view import GraphView

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _drawn(page: Path) -> dict[str, int]:
    """What the page wrote on <body> once vis-network drew it, in headless Chromium."""
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium): the page cannot be drawn here")
    # vis-network writes the counts once it has laid the graph out and painted it; on a busy machine
    # that can come after Chromium's time budget, so a page not drawn yet is loaded once more
    for budget in (15000, 60000):
        dom = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions", f"--virtual-time-budget={budget}",
             "--dump-dom", page.resolve().as_uri()],
            capture_output=True, text=True, timeout=180, check=True).stdout
        body = re.search(r"<body([^>]*)>", dom)
        assert body is not None, dom[:500]
        if "data-nodes=" in body.group(1):
            break
    return {k: int(v) for k, v in re.findall(r'data-(\w+)="(\d+)"', body.group(1))}


def _user() -> str:
    return f"gh-{uuid.uuid4().hex[:10]}"


def test_the_page_draws_every_node_and_relation_of_the_users_graph(memory, dsn, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("DATABASE_URL", dsn)
    user = _user()
    h = memory.for_user(user)
    for text in ("My sister Sarah is visiting next month.", "Sarah is worried about my job offer from Google.",
                 "I work at Acme as a data engineer.", "I left Acme in May.",
                 "Had dinner with my friend Tom; Tom thinks I should take the Google offer.",
                 "Sarah and I talked about moving to Lisbon </script><script>alert(1)</script>."):
        h.add(text, dedupe=False)
    view = h.graph_view()
    ended = sum(r.valid_to is not None for r in view.relations)
    assert len(view.nodes) >= 6 and len(view.relations) >= 5 and ended == 1
    page = tmp_path / "graph.html"
    assert main(["graph", "show", "--html", str(page), "--json", "--user", user]) == 0
    assert json.loads(capsys.readouterr().out) == {"file": str(page), "nodes": len(view.nodes),
                                                    "relations": len(view.relations)}
    text = page.read_text()
    assert "<script src" not in text and "<link" not in text  # nothing to fetch: the library is inlined
    assert text.count("</script>") == 3  # the data, the library, the page's own: a memory closes none
    drawn = _drawn(page)
    assert drawn["nodes"] == len(view.nodes) and drawn["edges"] == len(view.relations)
    assert drawn["dashed"] == ended and drawn["painted"] > 1000

    around = tmp_path / "sarah.html"  # a node's neighbourhood: Sarah and who she is related to
    assert main(["graph", "show", "Sarah", "--html", str(around), "--user", user]) == 0
    assert "wrote" in capsys.readouterr().out
    near = h.graph_view(around="Sarah")
    assert [n.name for n in near.nodes] == ["Sarah", user]  # her sister, the user; not Google, Acme or Tom
    assert [(r.from_name, r.rel_type, r.to_name) for r in near.relations] == [(user, "sister", "Sarah")]
    assert _drawn(around)["nodes"] == len(near.nodes)


def test_another_users_page_draws_nothing_of_this_graph(memory, dsn, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("DATABASE_URL", dsn)
    memory.for_user(_user()).add("My brother Luis lives in Porto.")
    page = tmp_path / "other.html"
    assert main(["graph", "show", "--html", str(page), "--user", _user()]) == 0
    assert "0 nodes, 0 relations" in capsys.readouterr().out
    assert "Luis" not in page.read_text()
    assert _drawn(page)["nodes"] == 0
    assert main(["graph", "list", "--html", str(page), "--user", _user()]) == 2  # a mistake says what to do
    assert "--html goes with show" in capsys.readouterr().err


def test_the_data_cannot_break_out_of_the_page_and_a_missing_library_says_how_to_install_it(monkeypatch):
    js_css = ("window.vis = {};", "")
    page = html.render(GraphView((), ()), title="a <b>title</b> & more", library=js_css)
    assert "<b>title</b>" not in page and "a &lt;b&gt;title&lt;/b&gt; &amp; more" in page
    assert "default-src 'none'" in page  # the page may fetch nothing
    data = html.graph_data(GraphView((), (), ({"title": "</script>", "node_ids": []},)), "t")
    assert "</" not in html._script_json(data) and json.loads(html._script_json(data)) == data
    html.vis_network.cache_clear()
    monkeypatch.setattr(html.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigurationError, match=r"pip install 'agent-memory\[graph-view\]'"):
        html.vis_network()
    html.vis_network.cache_clear()
