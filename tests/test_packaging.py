"""The distribution installs one import namespace, agent_memory, built from three top-level folders."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True, capture_output=True, cwd=out,
    )
    [whl] = out.glob("agent_memory-*.whl")
    return whl


def test_wheel_contains_exactly_the_agent_memory_tree(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"agent_memory", next(t for t in top if t.endswith(".dist-info"))}
    for required in ("agent_memory/__init__.py", "agent_memory/service.py", "agent_memory/db/migrations.py",
                     "agent_memory/embeddings/local.py", "agent_memory/middleware/__init__.py",
                     "agent_memory/prompts/__init__.py", "agent_memory/prompts/memory_block.txt",
                     "agent_memory/py.typed", "agent_memory/handles.py", "agent_memory/principal.py"):
        assert required in names
    assert not any(n.startswith(("middleware/", "prompts/", "tests/", "benchmarks/")) for n in names)


def test_wheel_holds_every_module_and_template_of_the_tree(wheel):
    """A subpackage missing from pyproject's package list would work in an editable install
    and vanish from the wheel; compare the wheel with the source folders file by file."""
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {"agent_memory": ROOT / "agent_memory", "agent_memory/middleware": ROOT / "middleware",
               "agent_memory/prompts": ROOT / "prompts"}
    expected = {
        f"{prefix}/{path.relative_to(folder).as_posix()}"
        for prefix, folder in sources.items()
        for path in folder.rglob("*")
        if path.suffix in {".py", ".txt"} and "__pycache__" not in path.parts
    }
    assert expected - names == set()


def test_the_folders_import_only_under_agent_memory(tmp_path):
    code = (
        "import importlib.util, agent_memory.middleware, agent_memory.prompts;"
        "print(importlib.util.find_spec('middleware'), importlib.util.find_spec('prompts'));"
        "print(agent_memory.prompts.template_names())"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, capture_output=True, text=True)
    assert out.stdout.splitlines()[0] == "None None"
    assert "memory_block" in out.stdout
    failed = subprocess.run([sys.executable, "-c", "import middleware"], cwd=tmp_path, capture_output=True,
                            text=True)
    assert failed.returncode != 0 and "ModuleNotFoundError" in failed.stderr
