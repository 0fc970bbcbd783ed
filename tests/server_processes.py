"""Checks on a server process and the embedded PostgreSQL it started, shared by the MCP and
memory_store server tests (a signal must stop both)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import psutil


def postmaster(data_dir: Path) -> int | None:
    """The pid of the live postgres serving data_dir (None: none runs), read as an outsider would."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().splitlines()[0])
        process = psutil.Process(pid)
        return pid if process.name() == "postgres" and process.status() != psutil.STATUS_ZOMBIE else None
    except (OSError, IndexError, ValueError, psutil.NoSuchProcess):
        return None


def stops_its_postgres(proc: subprocess.Popen[bytes], data_dir: Path, sig: int) -> None:
    """Signal a server that is answering; it exits cleanly and no postgres runs in data_dir after it."""
    running = postmaster(data_dir)
    assert running is not None, "the server did not start the embedded postgres"
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == 0
    deadline = time.monotonic() + 10  # a stopped postmaster may take a moment to be reaped
    while postmaster(data_dir) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert postmaster(data_dir) is None, f"postgres {running} still runs in {data_dir} after {sig!r}"
    assert not (data_dir / "postmaster.pid").exists()
