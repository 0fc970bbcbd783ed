"""Production code never imports ``agent_memory.testing``: that module is for tests and notebooks.

Every module of the installed package is read (``agent_memory`` and the ``middleware`` and
``prompts`` directories installed as ``agent_memory.middleware`` and ``agent_memory.prompts``),
parsed with ``ast`` and never imported, so a module that only misbehaves at import time is
checked too.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTING = "agent_memory.testing"
PACKAGES = ("agent_memory", "agent_memory.middleware", "agent_memory.prompts")


def package_modules() -> Iterator[tuple[str, Path]]:
    """``(module name, file)`` of every module of the installed package, each once."""
    seen: set[Path] = set()
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations, f"{package} is not an installed package"
        for location in spec.submodule_search_locations:
            root = Path(location).resolve()
            for path in sorted(root.rglob("*.py")):
                parts = path.relative_to(root).with_suffix("").parts
                if path in seen or "__pycache__" in parts or not all(p.isidentifier() for p in parts):
                    continue
                seen.add(path)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                yield ".".join((package, *parts)), path


def imported_modules(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """The modules ``source`` (the text of ``module``) imports, relative imports resolved:
    ``from agent_memory import testing`` counts as ``agent_memory.testing``."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) \
                if node.level else node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")):
            found.add(node.args[0].value)
    return found


def imports_testing(modules: set[str]) -> bool:
    return any(name == TESTING or name.startswith(TESTING + ".") for name in modules)


MODULES = dict(package_modules())


def test_the_walk_finds_the_core_and_the_installed_subpackages():
    for name in ("agent_memory.config", "agent_memory.scripted", "agent_memory.testing",
                 "agent_memory.middleware.short_term", "agent_memory.prompts"):
        assert name in MODULES, name


@pytest.mark.parametrize(("source", "module", "bad"), [
    ("import agent_memory.testing", "agent_memory.demo", True),
    ("import agent_memory.testing as t", "agent_memory.demo", True),
    ("from agent_memory.testing import ScriptedChatModel", "agent_memory.middleware.short_term", True),
    ("from agent_memory import testing", "agent_memory.demo", True),
    ("from .testing import tool_call", "agent_memory.demo_model", True),
    ("from . import testing", "agent_memory.demo_model", True),
    ("from ..testing import ScriptedChatModel", "agent_memory.middleware.short_term", True),
    ("from .. import testing", "agent_memory.middleware.short_term", True),
    ("from ..testing import x", "agent_memory.middleware.__init__", True),  # in a package's __init__
    ("from .testing import x", "agent_memory.middleware.__init__", False),  # agent_memory.middleware.testing
    ("def f():\n    from agent_memory.testing import tool_call", "agent_memory.cli.chat", True),
    ("importlib.import_module('agent_memory.testing')", "agent_memory.demo", True),
    ("from .scripted import ScriptedChatModel", "agent_memory.demo_model", False),
    ("from agent_memory.testingtools import x", "agent_memory.demo", False),
    ("from langchain_core import testing", "agent_memory.demo", False),
])
def test_the_checker_sees_every_form_of_the_import(source, module, bad):
    name, _, last = module.rpartition(".")
    is_package = last == "__init__"
    found = imported_modules(source, name if is_package else module, is_package=is_package)
    assert imports_testing(found) is bad


def test_production_code_does_not_import_the_testing_module():
    offenders = [
        str(path) for module, path in MODULES.items()
        if module != TESTING and imports_testing(
            imported_modules(path.read_text(encoding="utf-8"), module, is_package=path.name == "__init__.py"))
    ]
    assert not offenders, f"these modules import {TESTING} (production code should use agent_memory.scripted): " \
                          f"{offenders}"
