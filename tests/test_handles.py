"""The typed front door: handles generated from one source, true async types, and README examples
that type-check under ``mypy --strict`` and run against the embedded database."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_memory import AsyncMemoryService, Identity, InvalidInputError, MemoryService
from agent_memory.handles import AsyncMemoryHandle, AsyncServiceMethods, MemoryHandle, ServiceMethods
from agent_memory.principal import AdminOps, PrincipalOps

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import codegen_handles  # noqa: E402

from doc_examples import GIVEN, as_module, blocks, python_blocks, run_page, typed_tree  # noqa: E402 - shared with tests/test_site.py

BLOCKS = [block.code for block in python_blocks(ROOT / "README.md")]

#: the modules whose types are the public API: mypy --strict must pass on them
PUBLIC_MODULES = [
    "agent_memory/__init__.py", "agent_memory/service.py", "agent_memory/principal.py", "agent_memory/handles.py",
    "agent_memory/specification.py",
    "agent_memory/models.py", "agent_memory/errors.py", "agent_memory/config.py",
    "agent_memory/middleware/__init__.py", "agent_memory/middleware/memory.py", "agent_memory/middleware/agent.py",
    "agent_memory/middleware/tools.py", "agent_memory/middleware/backend.py", "agent_memory/middleware/plain.py",
    "agent_memory/middleware/extraction.py", "agent_memory/middleware/context.py",
    "agent_memory/middleware/episodic.py",
    "agent_memory/store/__init__.py", "agent_memory/store/store.py", "agent_memory/store/namespaces.py",
    "agent_memory/store/values.py", "agent_memory/store/ops.py", "agent_memory/store/gathering.py",
    "agent_memory/filters.py", "agent_memory/queries/filters.py", "agent_memory/queries/narrowed.py",
    "agent_memory/documents/__init__.py", "agent_memory/documents/chunks.py", "agent_memory/documents/search.py",
    "agent_memory/documents/learn.py", "agent_memory/extraction/when.py",
    "agent_memory/vector_cache.py", "agent_memory/queries/cached.py",
]


def test_the_generated_handles_are_fresh():
    """handles.py is what tests/codegen_handles.py writes from principal.py (run it after a change)."""
    written = (ROOT / "agent_memory" / "handles.py").read_text(encoding="utf-8")
    assert written == codegen_handles.generate((ROOT / "agent_memory" / "principal.py").read_text(encoding="utf-8")), \
        "agent_memory/handles.py is stale: run python tests/codegen_handles.py"


@pytest.mark.parametrize(("source", "sync", "asynchronous"), [(PrincipalOps, MemoryHandle, AsyncMemoryHandle),
                                                              (AdminOps, ServiceMethods, AsyncServiceMethods)])
def test_sync_and_async_doors_have_one_signature_per_operation(source, sync, asynchronous):
    operations = {n for n, f in inspect.getmembers(source, inspect.isfunction) if not n.startswith("_")}
    for cls in (sync, asynchronous):
        methods = {n for n, f in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}
        assert methods - {"execute"} == operations, cls
    for name in operations:
        want = inspect.signature(getattr(source, name))
        s, a = getattr(sync, name), getattr(asynchronous, name)
        assert inspect.signature(s).parameters == want.parameters == inspect.signature(a).parameters, name
        assert inspect.iscoroutinefunction(a) and not inspect.iscoroutinefunction(s), name
        assert inspect.getdoc(s) == inspect.getdoc(a) == inspect.getdoc(getattr(source, name)), name
        # the operation says Op[T]; both doors say T
        op_result = want.return_annotation
        assert op_result.startswith("Op[") and op_result[3:-1] == inspect.signature(s).return_annotation
        assert inspect.signature(s).return_annotation == inspect.signature(a).return_annotation


def test_service_methods_are_the_admin_ones_and_handles_the_rest():
    for service in (MemoryService, AsyncMemoryService):
        public = {n for n, _ in inspect.getmembers(service, inspect.isfunction) if not n.startswith("_")}
        assert not public & {"add", "search", "list", "get", "delete"}
        # the specification's methods are there for ported code, each one call of the handle
        spec = {n for n in public if getattr(service, n).__module__ == "agent_memory.specification"}
        assert spec == {"add_explicit_memory", "search_memories", "check_duplicate", "check_rate_limit",
                        "get_profile_for_agent"}
        assert {"for_user", "create_project", "forget_user", "execute", "close"} <= public


def test_for_user_checks_the_identity_now_and_takes_an_identity(memory, tenant):
    with pytest.raises(InvalidInputError, match="user_id"):
        memory.for_user("")
    with pytest.raises(InvalidInputError, match="project_id"):
        memory.for_user(tenant.user, project_id="a" * 1000)
    with pytest.raises(InvalidInputError, match="not both"):
        memory.for_user(Identity(tenant.user), project_id=tenant.project)
    me = memory.for_user(Identity(tenant.user, project_id=tenant.project))
    assert me.identity == Identity(tenant.user, project_id=tenant.project)
    item = me.add("Prefers green tea in the afternoon")
    assert memory.for_user(tenant.user).get(item.id).content == item.content
    # nothing on a handle can act for someone else: the identity is not a parameter of any call
    for name, fn in inspect.getmembers(MemoryHandle, inspect.isfunction):
        assert not {"user_id", "project_id", "session_id", "team_id", "org_id"} & set(inspect.signature(fn).parameters)


def test_a_handle_only_sees_its_principal(memory, tenant):
    mine = memory.for_user(tenant.user).add("Keeps bees on the roof of the office")
    theirs = memory.for_user(tenant.other_user)
    assert theirs.search("bees on the roof") == [] and theirs.list() == []
    with pytest.raises(Exception, match="No memory|not found|no memory"):
        theirs.get(mine.id)


async def test_the_async_handle_awaits_what_the_sync_one_returns(memory, amemory, tenant):
    me = amemory.for_user(tenant.user)
    pending = me.add("Plays the cello on Sundays")
    assert inspect.iscoroutine(pending)
    item = await pending
    assert [r.item.id for r in await me.search("cello")] == [r.item.id for r in
                                                              memory.for_user(tenant.user).search("cello")]
    assert (await me.get(item.id)).content == item.content


def test_mypy_strict_passes_on_the_public_api_and_the_readme_examples(tmp_path):
    pytest.importorskip("mypy")
    tree = typed_tree(tmp_path)
    examples = []
    for i, block in enumerate(BLOCKS):
        path = tmp_path / f"readme_example_{i:02d}.py"
        path.write_text(as_module(block, GIVEN), encoding="utf-8")
        examples.append(str(path))
    command = [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental",
               "--cache-dir", str(tmp_path / "cache"), *PUBLIC_MODULES, *examples]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True, env={"MYPYPATH": str(tree),
                          "PATH": "/usr/bin:/bin"}, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"no issues found in {len(PUBLIC_MODULES) + len(examples)} source files" in done.stdout


def test_every_readme_example_runs(fresh_dsn, monkeypatch, tmp_path):
    """Every README block runs as written against the embedded database (``DATABASE_URL`` names a
    fresh one), each after the ones before it, as a reader would run them; what a fragment takes
    as given (``doc_examples.GIVEN``) is a scripted chat model, no tools of the reader's, and the
    service. The docs pages' blocks run the same way in tests/test_site.py."""
    monkeypatch.setenv("DATABASE_URL", fresh_dsn())
    monkeypatch.chdir(tmp_path)  # an example may write a file
    from langchain.agents import create_agent

    from agent_memory.middleware import MemoryMiddleware
    from agent_memory.testing import ScriptedChatModel

    namespace: dict[str, Any] = {"memory": MemoryService(), "model": ScriptedChatModel(script=["Noted."]),
                                 "tools": [], "create_agent": create_agent, "MemoryMiddleware": MemoryMiddleware}
    ran = run_page(blocks(ROOT / "README.md"), namespace, fresh_dsn)
    assert ran == len(BLOCKS)
    memory = namespace["memory"]
    assert isinstance(memory, MemoryService)
    assert memory.for_user("alice", project_id="webshop").search("which editor?")
    memory.close()
