"""The shape of the package, read from its source (nothing is imported but the queries package):

- no import cycle between the modules of ``agent_memory`` (imports at module level);
- no SQL statement written outside the queries package (and the few modules that are SQL by
  nature: the migrations, and the checkpointer's own statements);
- each module of the queries package exports (``__all__``) exactly what it defines in public.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the import namespace ``agent_memory`` and the folders it is built from (pyproject.toml)
PACKAGES = {"agent_memory": ROOT / "agent_memory", "agent_memory.middleware": ROOT / "middleware",
            "agent_memory.prompts": ROOT / "prompts"}


def package_modules() -> dict[str, Path]:
    """``module name -> file`` for every module of the package."""
    modules: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


MODULES = package_modules()


# --- (a) no import cycle ----------------------------------------------------------------------

#: import cycles known and left alone, each as the set of its modules; every entry says why.
#: (None today.)
KNOWN_CYCLES: set[frozenset[str]] = set()


def _module_level_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports run when the module is imported: at its top level, also inside a top-level
    ``if``/``try``, but not under ``if TYPE_CHECKING:``."""
    def walk(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node
            elif isinstance(node, ast.If):
                test = node.test
                if not (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
                        or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
                    yield from walk(node.body)
                yield from walk(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                    yield from walk(block)
            elif isinstance(node, ast.With):
                yield from walk(node.body)
    yield from walk(tree.body)


def _known(name: str) -> str | None:
    """``name`` or the innermost package module it lies in (``a.b.func`` -> ``a.b``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """``module -> modules it imports at module level`` within the package. Importing
    ``a.b.c`` also runs the package ``a.b`` (unless the importer lies inside it)."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        is_package = path.name == "__init__.py"
        here = name if is_package else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in _module_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
                continue
            base = node.module or ""
            if node.level:
                anchor = here
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            targets.add(base)
            targets.update(f"{base}.{a.name}" for a in node.names)
        ancestors = {name.rsplit(".", k)[0] for k in range(1, name.count(".") + 1)} | {name}
        deps: set[str] = set()
        for target in targets:
            found = _known(target) if target.startswith("agent_memory") else None
            if found is None:
                continue
            parts = found.split(".")
            deps.update(p for p in (".".join(parts[:k]) for k in range(1, len(parts) + 1))
                        if p in MODULES and p not in ancestors)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module, as a path that
    returns to its start (Tarjan's algorithm, then a walk inside the component)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    found = []
    for component in components:
        start = min(component)
        path, seen = [start], {start}
        while True:  # follow edges inside the component until a module comes round again
            step = min(w for w in graph[path[-1]] if w in component)
            if step in seen:
                found.append(path[path.index(step):] + [step])
                break
            path.append(step)
            seen.add(step)
    return found


def test_the_graph_sees_relative_and_absolute_imports():
    graph = import_graph()
    assert "agent_memory.queries" in graph["agent_memory.ops"]  # from . import queries
    assert "agent_memory.queries.rows" in graph["agent_memory.ops"]  # from .queries.rows import ...
    assert "agent_memory.service" in graph["agent_memory.middleware.backend"]  # from agent_memory.service import
    assert "agent_memory.episodic" in graph["agent_memory.rights.erase"]  # the package runs first
    assert "agent_memory.rights" not in graph["agent_memory.rights.erase"]  # its own package is running already


def test_the_cycle_finder_names_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back():
    found = [c for c in cycles(import_graph()) if frozenset(c) not in KNOWN_CYCLES]
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


#: the modules of the memory operations: they import each other at the top, never inside a
#: function (an import there is how a cycle hides from the test above)
OPERATIONS = ("agent_memory.ops", "agent_memory.resources", "agent_memory.access", "agent_memory.history",
              "agent_memory.reembed", "agent_memory.extraction", "agent_memory.profiles", "agent_memory.rights",
              "agent_memory.queries", "agent_memory.episodic.forget", "agent_memory.episodic.copy")


def test_operations_import_nothing_of_the_package_inside_functions():
    late = []
    for name, path in MODULES.items():
        if not any(name == m or name.startswith(m + ".") for m in OPERATIONS):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and (inner.level or (inner.module or "").startswith(
                            "agent_memory")):
                        late.append(f"{name}:{inner.lineno}")
    assert not late, f"imports inside functions: {late}"


# --- (b) no SQL outside the queries package ---------------------------------------------------

#: modules allowed to hold SQL text: the queries package, and the modules that are SQL by nature
SQL_HOMES = ("agent_memory.queries", "agent_memory.db.migrations", "agent_memory.episodic.checkpointer",
             "agent_memory.episodic.sql")

#: a statement: one of these keywords in capitals, first in the string, followed by more
STATEMENT = re.compile(r"\A\s*(?:(?:SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP|TRUNCATE|COPY|SET|LOCK)"
                       r"\s+\S|ROLLBACK\s*\Z)")


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def sql_literals(source: str) -> list[tuple[int, str]]:
    """``(line, start of the text)`` of every string in ``source`` that begins with a statement
    (plain strings and the leading text of f-strings; docstrings left out)."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            first = node.values[0] if node.values else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and STATEMENT.match(first.value):
                found.append((node.lineno, first.value.strip()[:60]))
            skip.update(id(v) for v in node.values)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
              and STATEMENT.match(node.value)):
            found.append((node.lineno, node.value.strip()[:60]))
    return found


@pytest.mark.parametrize(("source", "statements"), [
    ('q = "SELECT id FROM memory_items WHERE id = %s"', 1),
    ('q = ("DELETE FROM memory_items"\n     " WHERE id = %s")', 1),
    ('q = f"DELETE FROM {table} WHERE thread_id = ANY(%(ids)s)"', 1),
    ('q = """\n    WITH RECURSIVE back AS (SELECT 1) SELECT * FROM back"""', 1),
    ('q = sql.SQL("CREATE DATABASE {}")', 1),
    ('q = "ROLLBACK"', 1),
    ('q = "LOCK TABLE memory_items IN SHARE ROW EXCLUSIVE MODE"', 1),
    ('def f():\n    """SELECT the rows: a docstring is prose."""', 0),
    ('m = "Select a memory to delete, or update it with --content"', 0),
    ('m = f"with {n} memories: delete some first"', 0),
    ('m = "WITHHELD"', 0),
    ('m = "SET"', 0),
    ('m = "[withheld: password]"', 0),
])
def test_the_detector_finds_statements_and_no_prose(source, statements):
    assert len(sql_literals(source)) == statements


def test_no_sql_statement_lives_outside_the_queries_package():
    found = {}
    for name, path in MODULES.items():
        if any(name == home or name.startswith(home + ".") for home in SQL_HOMES):
            continue
        literals = sql_literals(path.read_text(encoding="utf-8"))
        if literals:
            found[name] = literals
    assert not found, ("SQL outside agent_memory.queries (write a builder there and call it): "
                       + "; ".join(f"{name}: {', '.join(f'line {n}: {t!r}' for n, t in lits)}"
                                   for name, lits in sorted(found.items())))


def test_the_queries_package_holds_sql():
    """The exemption is not what makes the test above pass: the builders are where they belong."""
    assert len(sql_literals((ROOT / "agent_memory/queries/erase.py").read_text(encoding="utf-8"))) > 10


# --- (c) the queries package exports exactly what it defines ----------------------------------

QUERY_MODULES = sorted(name for name in MODULES if name.startswith("agent_memory.queries."))


def public_definitions(source: str) -> set[str]:
    """Names a module defines at its top level (functions, classes, constants, aliases) that
    do not start with ``_``."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")} - {"__all__"}


def test_there_are_query_modules():
    assert {"agent_memory.queries.items", "agent_memory.queries.erase", "agent_memory.queries.rows",
            "agent_memory.queries.tables"} <= set(QUERY_MODULES)


@pytest.mark.parametrize("module", QUERY_MODULES)
def test_a_query_modules_all_is_what_it_defines(module):
    defined = public_definitions(MODULES[module].read_text(encoding="utf-8"))
    exported = importlib.import_module(module).__all__
    assert len(exported) == len(set(exported)), f"{module}.__all__ names something twice"
    assert set(exported) == defined, (f"{module}.__all__ lacks {sorted(defined - set(exported))}, "
                                      f"names {sorted(set(exported) - defined)} it does not define")


def test_the_package_re_exports_every_module():
    queries = importlib.import_module("agent_memory.queries")
    each = [name for module in QUERY_MODULES for name in importlib.import_module(module).__all__]
    assert len(each) == len(set(each)), "two query modules export the same name"
    assert sorted(queries.__all__) == sorted(each)
    for module in QUERY_MODULES:
        for name in importlib.import_module(module).__all__:
            assert getattr(queries, name) is getattr(importlib.import_module(module), name), name
