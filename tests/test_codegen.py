"""One hand-written source, a generated twin: ``tools/codegen.py`` writes ``handles.py`` from
``principal.py`` and the blocking driver (``run``) from the asyncio one (``arun``), and these
tests fail while a checked-in file is not what it writes."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import codegen  # noqa: E402

REQUESTS = ROOT / "agent_memory" / "db" / "requests.py"


def test_the_blocking_driver_is_fresh():
    written = REQUESTS.read_text(encoding="utf-8")
    assert written == codegen.generate_driver(written), \
        "the blocking driver in agent_memory/db/requests.py is stale: run python tools/codegen.py"


def test_the_handles_are_fresh():
    written = (ROOT / "agent_memory" / "handles.py").read_text(encoding="utf-8")
    principal = (ROOT / "agent_memory" / "principal.py").read_text(encoding="utf-8")
    assert written == codegen.generate_handles(principal), "agent_memory/handles.py is stale: run python tools/codegen.py"


def test_the_check_says_which_file_is_stale(tmp_path: Path):
    """``--check`` answers 0 on the checked-in tree (and the old command still runs it)."""
    for script in ("tools/codegen.py", "tests/codegen_handles.py"):
        done = subprocess.run([sys.executable, script, "--check"], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def _functions(text: str) -> dict[str, str]:
    """Each top-level function and class of ``text``, as a normalised dump (no docstrings)."""
    tree = ast.parse(text)
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = ast.dump(node, annotate_fields=False)
    return out


def test_the_drivers_are_one_logic():
    """Every asyncio function and class has a blocking twin of the same name in the blocking
    vocabulary, and the module has no other driver code (what the hand-copied twins lacked)."""
    text = REQUESTS.read_text(encoding="utf-8")
    source = text[text.index(codegen.DRIVER_SOURCE):text.index(codegen.DRIVER_SOURCE_END)]
    generated = text[text.index(codegen.DRIVER_BANNER):]
    asyncio_side, blocking_side = _functions(source.split("\n\n\n", 1)[1]), _functions(generated.split("\n\n\n", 1)[1])
    assert {codegen.BLOCKING_NAMES.get(n, n) for n in asyncio_side} == set(blocking_side) == {
        "run", "_serve", "_Link", "_statement", "_result", "_copy", "_embed"}
    assert all(isinstance(node, ast.AsyncFunctionDef) for node in ast.parse(source.split("\n\n\n", 1)[1]).body
               if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef))


def test_to_blocking_drops_await_and_renames_whole_words():
    code = ("async def arun(conn: AsyncConn) -> None:\n"
            "    async with AsyncExitStack() as held:\n"
            "        await held.enter_async_context(aget_connection(conn))\n"
            "        await held.aclose()  # not: barun, aclosed\n")
    assert codegen.to_blocking(code) == ("def run(conn: Conn) -> None:\n"
                                         "    with ExitStack() as held:\n"
                                         "        held.enter_context(get_connection(conn))\n"
                                         "        held.close()  # not: barun, aclosed\n")


@pytest.mark.parametrize("code", ["await AsyncNewThing()\n", "x = asyncio.sleep\n", "cur.aset_async_mode()\n"])
def test_an_asyncio_name_without_a_blocking_one_stops_the_generator(code: str):
    """Rather than a blocking driver that awaits nothing but calls an asyncio API."""
    with pytest.raises(SystemExit, match="BLOCKING_NAMES"):
        codegen.to_blocking(code)
