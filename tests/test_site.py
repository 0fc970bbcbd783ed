"""The docs site tells the truth: it builds with ``mkdocs build --strict``, its reference covers
every public name, and every example on it runs (python blocks and ``agent-memory`` commands,
section by section in reading order on one database, as a reader runs them), type-checks under ``mypy --strict``, parses (``agent-memory`` command lines) or
loads (JSON). How blocks are read and run: ``tests/doc_examples.py``."""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agent_memory
from agent_memory.config import ENV_VARS, MemoryConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_examples import (  # noqa: E402
    DOCS,
    Block,
    LANGUAGES,
    ROOT,
    blocks,
    command_lines,
    nav_sections,
    page_module,
    pages,
    python_blocks,
    run_page,
    typed_tree,
)

PAGES = pages()
RUNNABLE = [p for p in PAGES if any(not b.skip for b in python_blocks(p))]


def _id(page: Path) -> str:
    return str(page.relative_to(DOCS))


def test_every_page_is_in_the_nav_and_every_block_has_a_language_we_check():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in PAGES:
        assert f" {_id(page)}" in nav, f"{_id(page)} is not in mkdocs.yml's nav"
        for block in blocks(page):
            assert block.lang in LANGUAGES, f"{block.where}: a block needs one of {sorted(LANGUAGES)}"
    assert len(RUNNABLE) >= 20, [_id(p) for p in RUNNABLE]


def test_the_site_builds_strictly(tmp_path):
    """No broken link or anchor, no page outside the nav, every ``:::`` reference found."""
    pytest.importorskip("mkdocs")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-6000:]
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for name in agent_memory.__all__:
        assert re.search(rf'id="agent_memory\.[\w.]*\b{name}"', api), f"{name} is not rendered in the Python API"


def _references() -> dict[str, str]:
    """Every ``::: path`` of the reference pages: the last name -> the path."""
    found = {}
    for page in (DOCS / "reference").glob("*.md"):
        for line in page.read_text(encoding="utf-8").splitlines():
            if line.startswith("::: "):
                path = line[4:].strip()
                found[path.rsplit(".", 1)[1]] = path
    return found


def test_every_public_name_is_in_the_reference_pages():
    references = _references()
    missing = sorted(set(agent_memory.__all__) - set(references))
    assert not missing, f"add these to docs/reference/api.md: {missing}"
    for name in agent_memory.__all__:
        module, _, attr = references[name].rpartition(".")
        assert getattr(importlib.import_module(module), attr) is getattr(agent_memory, name), references[name]
    from agent_memory import middleware
    for name in ("create_memory_agent", "MemoryMiddleware", "ExtractionMiddleware", "memory_tools",
                 "memory_context_node", "WorkingMemoryMiddleware", "short_term_memory", "MemoryRetriever"):
        assert name in references and name in middleware.__all__, name


#: the site's sections in reading order, with the pages that have something to run
SECTIONS = [(title, pages_) for title, pages_ in nav_sections()
            if any(not b.skip and (b.lang == "python" or (b.lang == "bash" and command_lines(b.code)))
                   for page in pages_ for b in blocks(page))]


@pytest.fixture(scope="module")
def reader(fresh_dsn, tmp_path_factory) -> dict[str, Any]:
    """One reader: one database and one working directory for the whole site, as someone who
    reads it from the top and runs every example (sections run in nav order)."""
    return {"dsn": fresh_dsn(), "cwd": tmp_path_factory.mktemp("reader")}


def test_every_runnable_page_is_in_a_section():
    assert {p for _, pages_ in SECTIONS for p in pages_} >= set(RUNNABLE)


@pytest.mark.parametrize(("title", "section"), SECTIONS, ids=[t for t, _ in SECTIONS])
def test_every_docs_example_runs_in_reading_order(title, section, reader, fresh_dsn, monkeypatch):
    """A section's pages run in nav order on the reader's one database (``DATABASE_URL``) and in
    one working directory: each page's python blocks in order, in a namespace of its own (a page
    is a script of its own), and its ``agent-memory`` command lines as written, in process. A page
    takes as given a scripted chat model, no tools and a service. Where a page of the section
    made the virtual environment without activating it, its commands say ``.venv/bin/``."""
    monkeypatch.setenv("DATABASE_URL", reader["dsn"])
    monkeypatch.chdir(reader["cwd"])  # an example may write a file (alice.json) that a later one reads
    from langchain.agents import create_agent

    from agent_memory import MemoryService
    from agent_memory.cli import main as cli
    from agent_memory.middleware import MemoryMiddleware
    from agent_memory.testing import ScriptedChatModel

    venv_made = False

    def run_command(block: Block, command: str) -> None:
        argv = shlex.split(command)
        if venv_made:
            assert argv[0] == ".venv/bin/agent-memory", (
                f"{block.where}: `{command}`: the page made .venv without activating it; write .venv/bin/agent-memory")
        if argv[0] == ".venv/bin/agent-memory":
            assert (Path(sys.executable).parent / "agent-memory").exists(), "the venv has no agent-memory script"
        assert cli(argv[1:]) == 0, f"{block.where}: `{command}` failed"

    for page in section:
        venv_made = venv_made or any(
            b.lang == "bash" and "-m venv .venv" in b.code and "activate" not in b.code for b in blocks(page))
        namespace: dict[str, Any] = {"memory": MemoryService(), "model": ScriptedChatModel(script=["Noted."]),
                                     "tools": [], "create_agent": create_agent, "MemoryMiddleware": MemoryMiddleware}
        try:
            ran = run_page(blocks(page), namespace, fresh_dsn, run_command)
        finally:
            for value in list(namespace.values()):
                if isinstance(value, MemoryService):
                    value.close()
        assert ran == len([b for b in python_blocks(page) if not b.skip])


def test_every_docs_example_type_checks(tmp_path):
    """Each page's python blocks, those that can't run offline too, as one module under
    ``mypy --strict`` (a later block may rebind a name with another type, as readers do)."""
    pytest.importorskip("mypy")
    tree = typed_tree(tmp_path)
    modules = []
    for page in PAGES:
        if python_blocks(page):
            path = tmp_path / (re.sub(r"\W", "_", _id(page)[:-3]) + ".py")
            path.write_text(page_module(page), encoding="utf-8")
            modules.append(str(path))
    command = [sys.executable, "-m", "mypy", "--strict", "--allow-redefinition", "--follow-imports=silent",
               "--no-incremental", "--cache-dir", str(tmp_path / "cache"), *modules]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=600,
                          env={"MYPYPATH": str(tree), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"no issues found in {len(modules)} source files" in done.stdout


def test_every_command_line_in_the_docs_and_readme_parses():
    from agent_memory.cli.parser import build_parser
    from agent_memory.cli.servers import SERVERS

    checked = 0
    for page in [*PAGES, ROOT / "README.md"]:
        for block in blocks(page):
            if block.lang != "bash":
                continue
            for command in command_lines(block.code):
                argv = shlex.split(command)[1:]
                if argv and argv[0] in SERVERS:  # a server parses its own arguments
                    continue
                try:
                    build_parser().parse_args(argv)
                except SystemExit:
                    pytest.fail(f"{block.where}: `{command}` does not parse")
                checked += 1
    assert checked >= 10


def test_every_json_block_loads():
    for page in PAGES:
        for block in blocks(page):
            if block.lang == "json":
                json.loads(block.code)


def test_the_ranking_table_matches_the_configuration():
    """docs/how-to/tune-ranking.md names fields, variables and defaults: the ones in the code."""
    text = (DOCS / "how-to" / "tune-ranking.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| [^|]+ \| `(\w+)` \| `(\w+)` \| ([\d.]+) \|$", text, re.M)
    assert len(rows) >= 6
    defaults = MemoryConfig.defaults()
    for field, variable, default in rows:
        assert ENV_VARS[variable][0] == field and float(getattr(defaults, field)) == float(default), field


def test_the_readmes_links_lead_somewhere():
    """The README is the front page of the repository: each relative link is a file there."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 20
    for link in local:
        assert (ROOT / link).is_file(), link
