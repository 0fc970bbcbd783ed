"""The resident command process (agent_memory.cli.resident): a warm memory command is answered by
a process that keeps the imports, the service and the model, with the caller's environment, and
gives the same output and exit status as a command run on its own.

Commands run as real processes (``python -m agent_memory.cli``) on an embedded server of their
own; nothing here measures time (BENCHMARKS.md, "The command line between commands", does).
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

import pytest

from agent_memory.cli.resident import resident_status, socket_path, stop_resident
from agent_memory.db.embedded import stop_embedded_server

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the resident needs Unix sockets")


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="am-res-"))  # short: a Unix socket's path is limited
    try:
        yield base / "pgdata"
    finally:
        stop_resident(base / "pgdata")
        stop_embedded_server(base / "pgdata")
        shutil.rmtree(base, ignore_errors=True)


def _cli(data_dir: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MEMORY_SERVER_IDLE_TIMEOUT")}
    environ.update(MEMORY_DATA_DIR=str(data_dir), **env)
    return subprocess.run([sys.executable, "-m", "agent_memory.cli", *argv], capture_output=True, text=True,
                          env=environ, timeout=600, check=False)


def _resident_up(data_dir: Path, deadline: float = 180.0) -> dict:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        status = resident_status(data_dir)
        if status is not None:
            return status
        time.sleep(0.5)
    raise AssertionError("no resident answered")


def test_a_warm_command_is_answered_by_the_resident_as_it_would_be_alone(data_dir: Path) -> None:
    added = _cli(data_dir, "add", "--user", "rita", "Rita keeps her bicycle in the hallway", "--json")
    assert added.returncode == 0, added.stderr
    memory_id = json.loads(added.stdout)["id"]
    first = _resident_up(data_dir)
    assert socket_path(data_dir).exists() and oct(socket_path(data_dir).stat().st_mode & 0o777) == "0o600"

    listed = _cli(data_dir, "list", "--user", "rita", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [m["id"] for m in json.loads(listed.stdout)] == [memory_id]
    found = _cli(data_dir, "search", "--user", "rita", "where is the bike?", "--json")
    assert found.returncode == 0 and json.loads(found.stdout)[0]["id"] == memory_id
    assert _cli(data_dir, "list", "--user", "someone-else", "--json").stdout.strip() == "[]"  # still per user
    after = resident_status(data_dir)
    assert after is not None and after["pid"] == first["pid"] and after["served"] >= first["served"] + 3

    status = _cli(data_dir, "server", "status", "--json")
    assert json.loads(status.stdout)["resident"]["pid"] == first["pid"]

    missing = _cli(data_dir, "show", "--user", "rita", "ffffffff")  # an error: one line, the status it has alone
    # alone: with no server left running (this one stops it at its exit, and the resident leaves with it)
    alone = _cli(data_dir, "show", "--user", "rita", "ffffffff", MEMORY_SERVER_IDLE_TIMEOUT="0")
    assert missing.returncode == alone.returncode != 0
    assert missing.stderr == alone.stderr and len(missing.stderr.strip().splitlines()) == 1
    assert _cli(data_dir, "list", "--user", "rita").returncode == 0  # starts both again


def test_the_callers_environment_is_the_commands(data_dir: Path) -> None:
    _resident_up(data_dir)
    before = resident_status(data_dir)["served"]  # type: ignore[index]
    refused = _cli(data_dir, "add", "--user", "rita", "Rita waters the fern on Sundays", MEMORY_MIN_LENGTH="200")
    assert refused.returncode == 1 and "rejected" in refused.stderr  # this caller's setting, in the resident
    assert resident_status(data_dir)["served"] == before + 1  # type: ignore[index]
    saved = _cli(data_dir, "add", "--user", "rita", "Rita waters the fern on Sundays")
    assert saved.returncode == 0, saved.stderr  # the next caller's own settings again
    bad = _cli(data_dir, "list", "--user", "rita", MEMORY_MIN_LENGTH="lots")  # refused before it is sent
    assert bad.returncode == 2 and "MEMORY_MIN_LENGTH" in bad.stderr


def test_server_stop_stops_the_resident_and_a_command_still_runs(data_dir: Path) -> None:
    _resident_up(data_dir)
    assert _cli(data_dir, "server", "stop").returncode == 0
    assert resident_status(data_dir) is None and not socket_path(data_dir).exists()
    again = _cli(data_dir, "list", "--user", "rita", "--json")  # runs on its own, and starts one again
    assert again.returncode == 0 and len(json.loads(again.stdout)) == 2
    _resident_up(data_dir)


def test_no_resident_with_database_url_or_without_an_idle_timeout(data_dir: Path, dsn: str) -> None:
    stop_resident(data_dir)
    assert _cli(data_dir, "list", "--user", "rita", MEMORY_SERVER_IDLE_TIMEOUT="0").returncode == 0
    assert _cli(data_dir, "list", "--user", "rita", DATABASE_URL=dsn).returncode == 0
    time.sleep(2)
    assert resident_status(data_dir) is None
