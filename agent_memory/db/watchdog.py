"""The embedded server's idle watchdog: why a command line can be fast and still leave nothing behind.

Each ``agent-memory`` command used to start the embedded PostgreSQL and stop it again when it
exited, so every command paid for a start (0.5-5 s on a busy machine). The command line now
leaves the server running and makes sure one small watchdog process watches it: when no live
process has been registered as using the server for ``MEMORY_SERVER_IDLE_TIMEOUT`` seconds (600
by default), the watchdog stops it and exits. It also exits as soon as the server is stopped by
anyone else (``agent-memory server stop``, the last Python process that used it).

One watchdog per data directory: it holds an exclusive ``flock`` on ``<pgdata>.watchdog``, a file
beside the data directory that also says who it is (pid, timeout, start time) for
``agent-memory server status``. A command touches that file when it ends, so a command that came
and went between two looks still counts as use. The watchdog never registers as a user itself.

Run as ``python -m agent_memory.db.watchdog DATA_DIR TIMEOUT``; :func:`ensure_watchdog` does that,
detached from the command's session and terminal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["can_watch", "ensure_watchdog", "main", "mark_used", "supported", "watchdog_file", "watchdog_status"]

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no watchdog; commands stop the server as before
    fcntl = None  # type: ignore[assignment]


def watchdog_file(data_dir: Path | str) -> Path:
    """``<pgdata>.watchdog``: the lock the watchdog holds and its description (beside the data
    directory, not in it: PostgreSQL owns what is inside)."""
    pgdata = Path(data_dir).expanduser().resolve()
    return pgdata.with_name(pgdata.name + ".watchdog")


def supported() -> bool:
    """Whether this platform runs a watchdog (it needs ``fcntl``)."""
    return fcntl is not None


def can_watch(data_dir: Path | str) -> bool:
    """Whether a watchdog can run for ``data_dir`` here: ``fcntl`` exists and its file can be
    made. Without one, a server left running would never stop, so commands then stop it on exit."""
    if not supported():
        return False
    path = watchdog_file(data_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    except OSError:
        return False
    return True


def _locked_by_other(path: Path) -> bool:
    """Whether another process holds the watchdog's lock on ``path`` right now."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def watchdog_status(data_dir: Path | str) -> dict[str, Any] | None:
    """The running watchdog of ``data_dir`` (``pid``, ``timeout``, ``started``, ``last_used``), or None."""
    if not supported():
        return None
    path = watchdog_file(data_dir)
    if not path.exists() or not _locked_by_other(path):
        return None
    try:
        about = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        about = {}
    if not isinstance(about, dict):
        about = {}
    try:
        about["last_used"] = path.stat().st_mtime
    except OSError:
        pass
    return about


def mark_used(data_dir: Path | str) -> None:
    """Tell the watchdog the server was just used (a command is ending)."""
    try:
        os.utime(watchdog_file(data_dir))
    except OSError:
        pass  # no watchdog file: nothing watches, nothing to tell


def ensure_watchdog(data_dir: Path | str, timeout: float) -> bool:
    """Start the watchdog of ``data_dir`` unless one runs; True if one runs (or was started).

    The child is a new session with no terminal and no inherited files, so it outlives the
    command; it checks the lock itself, so two commands starting one at once leave one."""
    if not supported():
        return False
    path = watchdog_file(data_dir)
    if path.exists() and _locked_by_other(path):
        mark_used(data_dir)
        return True
    subprocess.Popen(
        [sys.executable, "-m", "agent_memory.db.watchdog", str(Path(data_dir).expanduser().resolve()), f"{timeout:g}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True, cwd="/",
    )
    return True


def watch(data_dir: Path, timeout: float, *, poll: float | None = None) -> str:
    """Watch until the server is gone or idle for ``timeout`` seconds; says why it returned."""
    from .embedded import embedded_server_status, stop_embedded_server_if_unused

    path = watchdog_file(data_dir)
    poll = poll if poll is not None else min(5.0, max(0.2, timeout / 4))
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return "another watchdog watches this data directory"
    try:
        about = {"pid": os.getpid(), "timeout": timeout, "started": time.time(), "data_dir": str(data_dir)}
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(about).encode())
        last_busy = time.time()
        while True:
            status = embedded_server_status(data_dir)
            if not status["running"]:
                return "the server is not running"
            now = time.time()
            if status["users"]:
                last_busy = now
            try:
                last_busy = max(last_busy, path.stat().st_mtime)
            except OSError:
                pass
            if now - last_busy >= timeout and stop_embedded_server_if_unused(data_dir):
                return f"stopped the server after {timeout:g}s unused"
            time.sleep(poll)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or not supported():
        print("usage: python -m agent_memory.db.watchdog DATA_DIR TIMEOUT_SECONDS", file=sys.stderr)
        return 2
    watch(Path(args[0]), float(args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
