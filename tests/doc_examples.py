"""The code blocks of the README and of the docs pages, as the suite runs and type-checks them.

A page's blocks are read in order (:func:`blocks`). Its ``python`` blocks run one after another in
one namespace, as a reader would run them (:func:`run_page`); its ``bash`` command lines of
``agent-memory`` must parse, and its ``json`` blocks must load (``tests/test_site.py``). A block
that cannot run offline (it needs an API key, or starts a server) says so on the line before it::

    <!-- docs-test: skip (needs an OpenAI key) -->

and is then only compiled and type-checked. What a page takes as given, a chat model and tools of
the reader's and an open service, is :data:`GIVEN`: declared for mypy, and at run time a scripted
chat model, no tools and a service on a fresh database.
"""

from __future__ import annotations

import ast
import asyncio
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: the languages a fenced block may have; ``text`` is output or a diagram, never run
LANGUAGES = {"python", "bash", "json", "text", "mermaid"}

#: a placeholder DSN in the examples; each one becomes a fresh database when run
PLACEHOLDER_DSN = "postgresql://.../empty"

#: what a fragment takes as given (a model and tools of the reader's, the service opened above)
GIVEN = {
    "json": "import json",
    "create_agent": "from langchain.agents import create_agent",
    "MemoryService": "from agent_memory import MemoryService",
    "MemoryMiddleware": "from agent_memory.middleware import MemoryMiddleware",
    "model": "from langchain_core.language_models import BaseChatModel\nmodel: BaseChatModel",
    "tools": "from langchain_core.tools import BaseTool\ntools: list[BaseTool]",
    "memory": "memory: MemoryService",
}

_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
_SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\(([^)]+)\)\s*-->\s*\Z")


@dataclass(frozen=True)
class Block:
    """One fenced block: its page, the line its code starts on, its language, its code, and why
    it may not run offline (``None``: it runs)."""

    page: Path
    line: int
    lang: str
    code: str
    skip: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """Every Markdown page of the docs site (the hooks folder holds no pages)."""
    return sorted(p for p in DOCS.rglob("*.md"))


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, in order."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        before = text[:match.start()].rstrip("\n")
        skip = _SKIP.search(before)
        found.append(Block(page, text.count("\n", 0, match.start(2)) + 1, match.group(1).split()[0]
                           if match.group(1).strip() else "", match.group(2), skip.group(1) if skip else None))
    return found


def python_blocks(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang == "python"]


def awaits(code: str) -> bool:
    return re.search(r"^\s*(await |async with |async for )", code, re.M) is not None


def _indent(code: str) -> str:
    return "".join(f"    {line}" if line.strip() else line for line in code.splitlines(keepends=True))


def bound_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def as_module(code: str, given: dict[str, str] = GIVEN) -> str:
    """Code as a module for mypy: top-level ``await`` inside an ``async def``, and what it takes
    as given declared first (only the names it does not bind itself)."""
    body = "async def _example() -> None:\n" + _indent(code) if awaits(code) else code
    tree = ast.parse(body)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    head = [given[name] for name in given if name in used and name not in bound_names(tree)]
    if "memory: MemoryService" in head and "MemoryService" not in bound_names(tree):
        head.insert(0, given["MemoryService"])
    return "\n".join(dict.fromkeys(head)) + "\n\n" + body


def page_module(page: Path) -> str:
    """A page's python blocks, skipped ones included, as one module in reading order."""
    return as_module("\n\n".join(b.code for b in python_blocks(page)))


def nav_sections(mkdocs_yml: Path = ROOT / "mkdocs.yml") -> list[tuple[str, list[Path]]]:
    """The site's sections in reading order, each with its pages in nav order (a page at the top
    level of the nav is a section of its own)."""
    sections: list[tuple[str, list[Path]]] = []
    text = mkdocs_yml.read_text(encoding="utf-8").split("\nnav:\n", 1)[1]
    for line in text.splitlines():
        if line and not line.startswith(" "):
            break  # the next top-level key
        top = re.fullmatch(r"  - (?:\"([^\"]+)\"|([^:]+)):\s*(\S+\.md)?\s*", line)
        if top:
            title = top.group(1) or top.group(2)
            sections.append((title, [DOCS / top.group(3)] if top.group(3) else []))
            continue
        page = re.fullmatch(r"\s+- (?:\"[^\"]+\"|[^:]+):\s*(\S+\.md)\s*", line)
        if page and sections:
            sections[-1][1].append(DOCS / page.group(1))
    return sections


def command_lines(text: str) -> list[str]:
    """The ``agent-memory ...`` commands of a bash block (after ``&&`` or ``|`` too), comments
    dropped; a synopsis line with ``[optional]`` or ``<placeholder>`` parts is not a command."""
    found = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        for part in re.split(r"&&|\|", line):
            words = shlex.split(part)
            if words and Path(words[0]).name == "agent-memory" and not re.search(r"[\[<]", part):
                found.append(part.strip())
    return found


def run_page(page_blocks: Sequence[Block], namespace: dict[str, Any], fresh_dsn: Callable[[], str],
             run_command: Callable[[Block, str], None] | None = None) -> int:
    """Run the blocks that can run offline, in order, in ``namespace``; answers how many ran.
    ``run_command``: how a ``bash`` block's ``agent-memory`` commands run (None: they don't).
    A traceback names the page and the line of the Markdown file."""
    ran = 0
    for block in page_blocks:
        if block.skip:
            continue
        if block.lang == "bash" and run_command is not None:
            for command in command_lines(block.code):
                run_command(block, command)
            continue
        if block.lang != "python":
            continue
        code = block.code
        while PLACEHOLDER_DSN in code:
            code = code.replace(PLACEHOLDER_DSN, fresh_dsn(), 1)
        if awaits(code):
            wrapped = "async def _example():\n" + _indent(code) + "\n    return locals()\n"
            exec(compile("\n" * (block.line - 2) + wrapped, str(block.page), "exec"), namespace)  # noqa: S102
            namespace.update(asyncio.run(namespace.pop("_example")()))
        else:
            exec(compile("\n" * (block.line - 1) + code, str(block.page), "exec"), namespace)  # noqa: S102
        ran += 1
    return ran


def typed_tree(tmp: Path) -> Path:
    """The package as mypy must see it: ``agent_memory.middleware`` and ``.prompts`` are the
    top-level folders, mapped at install time; an editable install's import hook is invisible to mypy."""
    package = tmp / "typed" / "agent_memory"
    package.mkdir(parents=True)
    for entry in (ROOT / "agent_memory").iterdir():
        (package / entry.name).symlink_to(entry)
    (package / "middleware").symlink_to(ROOT / "middleware")
    (package / "prompts").symlink_to(ROOT / "prompts")
    return package.parent
