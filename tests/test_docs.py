"""The docs tell the truth: every variable and its default, every public method, and the CI's
test command in the README. (The site itself, its examples and its API reference:
tests/test_site.py; the permission matrix: tests/test_permission_matrix.py; the command line:
tests/test_cli.py.)"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from agent_memory import MemoryService
from agent_memory.handles import MemoryHandle
from agent_memory.config import ENV_VARS, MemoryConfig

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONFIGURATION = (ROOT / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")
SERVICE = (ROOT / "docs" / "reference" / "service.md").read_text(encoding="utf-8")


def test_every_environment_variable_is_documented_with_its_default():
    table = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([A-Z_]+)` \| ([^|]+) \|", CONFIGURATION, re.M)}
    assert set(ENV_VARS) <= set(table), set(ENV_VARS) - set(table)
    defaults = MemoryConfig()
    for var, (field, _) in ENV_VARS.items():
        value = getattr(defaults, field)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert table[var].strip(" `") == f"{value:g}", var


def test_every_public_service_and_handle_method_is_documented():
    for cls in (MemoryService, MemoryHandle):
        public = [n for n, f in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")]
        missing = [n for n in public if f"`{n}(" not in SERVICE and f", {n}(" not in SERVICE and f" `{n}(" not in SERVICE]
        assert not missing, (cls.__name__, missing)


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    command = ".venv/bin/python -m pytest -q"
    assert command in README and ci.strip().splitlines()[-1] == command


def test_ci_installs_as_the_readme_says():
    """The README's first command installs the runtime only and runs the demo; the second adds
    the test extra. CI runs both in that order, so the runtime alone is proven enough for the demo."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/agent-memory demo" in README
    assert '.venv/bin/pip install -e ".[test]" && .venv/bin/python -m pytest -q' in README
    steps = [".venv/bin/pip install --quiet -e .\n", ".venv/bin/agent-memory demo",
             '.venv/bin/pip install --quiet -e ".[test]"', ".venv/bin/python -m pytest -q"]
    where = [ci.index(step) for step in steps]
    assert where == sorted(where)
