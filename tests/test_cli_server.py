"""The command line answers fast: the embedded server outlives a command and is reused by the next,
an idle watchdog stops it, ``agent-memory server status|stop`` manage it, and a command that embeds
nothing never loads the embedding model.

The commands run as real processes (``python -m agent_memory.cli``) on an embedded server of their
own in a temporary data directory; nothing here measures time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from agent_memory.db.embedded import (
    embedded_server_status,
    ensure_embedded_server,
    stop_embedded_server,
    stop_embedded_server_if_unused,
)
from agent_memory.db.watchdog import watchdog_file, watchdog_status

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the watchdog needs fcntl")


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    """One data directory for the module (initdb once); every test leaves its server stopped.
    mkdtemp, not tmp_path: as root the server runs as another user (see conftest)."""
    base = Path(tempfile.mkdtemp(prefix="agent-memory-cli-server-"))
    try:
        yield base / "pgdata"
    finally:
        stop_embedded_server(base / "pgdata")
        shutil.rmtree(base, ignore_errors=True)


def _cli(data_dir: Path, *argv: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MEMORY_SERVER_IDLE_TIMEOUT")}
    environ.update(MEMORY_DATA_DIR=str(data_dir), **env)
    return subprocess.run([sys.executable, "-m", "agent_memory.cli", *argv], capture_output=True, text=True,
                          env=environ, timeout=timeout, check=False)


def _status(data_dir: Path, **env: str) -> dict:
    done = _cli(data_dir, "server", "status", "--json", **env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _until(predicate, what: str, deadline: float = 120.0) -> None:
    """Wait for something another process does (not a timing assertion: the deadline only ends a hang)."""
    end = time.monotonic() + deadline
    while not predicate():
        if time.monotonic() > end:
            pytest.fail(f"still waiting for {what}")
        time.sleep(0.1)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_server_outlives_a_command_and_the_next_reuses_it(data_dir: Path) -> None:
    assert not _status(data_dir)["running"]
    first = _cli(data_dir, "list", "--user", "u-reuse", "--json", MEMORY_SERVER_IDLE_TIMEOUT="600")
    assert first.returncode == 0, first.stderr
    after_first = _status(data_dir)
    assert after_first["running"] and after_first["pid"]
    assert after_first["users"] == []  # the command is gone; nothing but the watchdog keeps watch
    dog = after_first["watchdog"]
    assert dog is not None and dog["timeout"] == 600 and not _gone(dog["pid"])

    second = _cli(data_dir, "stats", "--user", "u-reuse", "--json", MEMORY_SERVER_IDLE_TIMEOUT="600")
    assert second.returncode == 0, second.stderr
    after_second = _status(data_dir)
    assert after_second["pid"] == after_first["pid"]  # the same postmaster: not started again
    assert after_second["watchdog"]["pid"] == dog["pid"]  # and one watchdog, not two
    assert after_second["watchdog"]["last_used"] >= dog["last_used"]  # the command told it

    stopped = _cli(data_dir, "server", "stop", "--json")
    assert stopped.returncode == 0 and json.loads(stopped.stdout)["stopped"] is True
    assert not _status(data_dir)["running"]
    _until(lambda: _gone(dog["pid"]), "the watchdog to exit once the server is stopped")
    again = _cli(data_dir, "server", "stop")
    assert again.returncode == 0 and "no embedded server runs" in again.stdout


def test_the_watchdog_stops_a_server_nobody_uses(data_dir: Path) -> None:
    done = _cli(data_dir, "list", "--user", "u-idle", MEMORY_SERVER_IDLE_TIMEOUT="1")
    assert done.returncode == 0, done.stderr
    _until(lambda: not embedded_server_status(data_dir)["running"], "the idle watchdog to stop the server")
    _until(lambda: watchdog_status(data_dir) is None, "the watchdog to exit")
    assert watchdog_file(data_dir).parent == data_dir.resolve().parent  # beside the data directory, not in it


def test_a_timeout_of_zero_stops_the_server_with_the_command(data_dir: Path) -> None:
    done = _cli(data_dir, "list", "--user", "u-zero", MEMORY_SERVER_IDLE_TIMEOUT="0")
    assert done.returncode == 0, done.stderr
    status = _status(data_dir)
    assert not status["running"] and status["watchdog"] is None


def test_a_server_in_use_is_never_stopped_for_idleness(data_dir: Path) -> None:
    """The watchdog's stop re-checks the registered users under the inter-process lock: a live
    process using the server keeps it up, and it stops once that process lets go."""
    server = ensure_embedded_server(data_dir, keep_running=True)
    try:
        assert os.getpid() in embedded_server_status(data_dir)["users"]
        assert stop_embedded_server_if_unused(data_dir) is False
        assert server.is_running()
    finally:
        server.release()
    assert embedded_server_status(data_dir)["users"] == []
    assert stop_embedded_server_if_unused(data_dir) is True
    assert not embedded_server_status(data_dir)["running"]
    assert stop_embedded_server_if_unused(data_dir) is False  # nothing left to stop


def test_server_status_with_a_database_url_says_the_embedded_server_is_not_used(data_dir: Path, dsn: str) -> None:
    done = _cli(data_dir, "server", "status", DATABASE_URL=dsn)
    assert done.returncode == 0 and "DATABASE_URL is set" in done.stdout
    assert _cli(data_dir, "server", "stop", DATABASE_URL=dsn).returncode == 1
    assert not embedded_server_status(data_dir)["running"]


_NO_MODEL = """
import json, sys
from agent_memory.cli import main
from agent_memory.embeddings import local
argv = json.loads(sys.argv[1])
codes = [main(a) for a in argv]
print(json.dumps({"codes": codes, "models": len(local._MODELS),
                  "onnxruntime": "onnxruntime" in sys.modules, "tokenizers": "tokenizers" in sys.modules,
                  "chat_models": "langchain_core.language_models.chat_models" in sys.modules}))
"""


def _run_commands(dsn: str, argv: list[list[str]]) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "MEMORY_SERVER_IDLE_TIMEOUT"}
    env["DATABASE_URL"] = dsn
    done = subprocess.run([sys.executable, "-c", _NO_MODEL, json.dumps(argv)], capture_output=True, text=True,
                          env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_commands_that_embed_nothing_never_load_the_model(dsn, memory, tenant) -> None:
    me = memory.for_user(tenant.user)
    item = me.add("Prefers tea to coffee", memory_type="preference")
    me.edit(item.id, content="Prefers green tea to coffee")
    user = ["--user", tenant.user, "--json"]
    ran = _run_commands(dsn, [["list", *user], ["show", str(item.id), *user], ["history", str(item.id), *user],
                              ["stats", *user], ["export", *user], ["delete", str(item.id), *user],
                              ["restore", str(item.id), *user]])
    # (not `maintain`: it embeds the knowledge graph's changed nodes again, issue 32, so it loads the
    # model whenever the database holds any, as the shared test database does)
    assert ran["codes"] == [0] * 7
    assert ran["models"] == 0 and not ran["onnxruntime"] and not ran["tokenizers"]
    assert not ran["chat_models"]  # nor LangChain's chat model classes (the slowest import on the way)
    searched = _run_commands(dsn, [["search", "tea", *user]])
    assert searched["codes"] == [0] and searched["models"] >= 1 and searched["onnxruntime"]  # the flag works
