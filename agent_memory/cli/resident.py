"""The resident command process: why ``agent-memory list`` answers in a fraction of a second.

A command's own work is a few milliseconds; what a fresh Python process pays is its imports
(LangChain, psycopg, numpy: about 0.8 s of CPU) and, for ``search`` and ``add``, loading the
embedding model (1-8 s). So the first memory command on the embedded server also starts one
small resident process per data directory, which keeps the imports, an open service and the
loaded model; the next memory commands (``list``, ``search``, ``show``, ``add``, ``edit``,
``delete``, ``restore``, ``history``, ``stats``) send their arguments to it over a Unix socket
beside the data directory (``<pgdata>.cli.sock``, mode 0600, answering only processes of the
same user) and print what it answers. A command that cannot reach it runs as before, in its
own process; nothing about a command's result depends on where it ran.

The resident runs each command with the caller's environment and working directory, one at a
time. It leaves after half of ``MEMORY_SERVER_IDLE_TIMEOUT`` unused (the embedded server's
watchdog then stops the server once the whole timeout has passed since the last command), when
the server stops, or on ``agent-memory server stop``. ``MEMORY_SERVER_IDLE_TIMEOUT=0`` (no
server left running) means no resident either; ``DATABASE_URL`` too (there is no embedded
server to live beside).

This module imports nothing heavy at the top: the client side is what a warm command runs.
"""

from __future__ import annotations

import io
import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["RESIDENT_GROUPS", "ask", "main", "resident_status", "serve", "socket_path", "stop_resident"]

#: the command modules whose commands a resident runs (those of one user's memories)
RESIDENT_GROUPS = ("memories",)
#: a Unix socket's path must fit ``sun_path`` (108 bytes on Linux, 104 on macOS)
_MAX_SOCKET_PATH = 100
_HEADER = struct.Struct("!I")


def socket_path(data_dir: Path | str) -> Path:
    """``<pgdata>.cli.sock``, beside the data directory (as the watchdog's file)."""
    pgdata = Path(data_dir).expanduser().resolve()
    return pgdata.with_name(pgdata.name + ".cli.sock")


def _send(sock: socket.socket, value: Any) -> None:
    data = json.dumps(value).encode()
    sock.sendall(_HEADER.pack(len(data)) + data)


def _receive(sock: socket.socket) -> Any:
    def exactly(n: int) -> bytes:
        chunks = b""
        while len(chunks) < n:
            chunk = sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("the resident closed the connection")
            chunks += chunk
        return chunks

    (size,) = _HEADER.unpack(exactly(_HEADER.size))
    return json.loads(exactly(size))


def _connect(path: Path, timeout: float | None) -> socket.socket | None:
    if len(str(path)) > _MAX_SOCKET_PATH or not path.exists():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def ask(data_dir: Path | str, argv: list[str], idle_timeout: float) -> int | None:
    """Run ``argv`` in the resident of ``data_dir`` and print what it printed; answers the exit
    status, or None when no resident answered (one is started for the next command, and the
    caller runs this one itself)."""
    path = socket_path(data_dir)
    sock = _connect(path, 5.0)
    if sock is None:
        _start(data_dir, idle_timeout)
        return None
    try:
        with sock:
            _send(sock, {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(),
                         "tty": [sys.stdout.isatty(), sys.stderr.isatty()]})
            sock.settimeout(None)  # a command takes the time it takes (a big search, an export)
            answer = _receive(sock)
    except (OSError, ConnectionError, ValueError):
        return None  # it went away before answering: run the command here (nothing was printed yet)
    if not isinstance(answer, dict) or "status" not in answer:
        if isinstance(answer, dict) and answer.get("leaving"):
            _start(data_dir, idle_timeout)  # it waits for the leaving one's lock
        return None
    sys.stdout.write(answer.get("stdout", ""))
    sys.stdout.flush()
    sys.stderr.write(answer.get("stderr", ""))
    return int(answer["status"])


def _start(data_dir: Path | str, idle_timeout: float) -> None:
    if len(str(socket_path(data_dir))) > _MAX_SOCKET_PATH:
        return
    subprocess.Popen(
        [sys.executable, "-m", "agent_memory.cli.resident", str(Path(data_dir).expanduser().resolve()),
         f"{idle_timeout:g}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True, cwd="/",
    )


def stop_resident(data_dir: Path | str) -> bool:
    """Ask the resident of ``data_dir`` to leave now; answers whether one was there."""
    sock = _connect(socket_path(data_dir), 5.0)
    if sock is None:
        return False
    try:
        with sock:
            _send(sock, {"stop": True})
            _receive(sock)
    except (OSError, ConnectionError, ValueError):
        pass
    return True


def resident_status(data_dir: Path | str) -> dict[str, Any] | None:
    """The resident of ``data_dir`` (``pid``, ``socket``) when one answers, else None."""
    sock = _connect(socket_path(data_dir), 2.0)
    if sock is None:
        return None
    try:
        with sock:
            _send(sock, {"status": True})
            answer = _receive(sock)
    except (OSError, ConnectionError, ValueError):
        return None
    return answer if isinstance(answer, dict) else None


class _Terminal(io.StringIO):
    """Captured output that says whether the caller's stream was a terminal (for colour)."""

    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def _same_user(conn: socket.socket) -> bool:
    """Whether the process at the other end is of this user (Linux: ``SO_PEERCRED``; elsewhere
    the socket's mode 0600 in a directory of the user is the guard)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True
    creds = conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


def _run(request: dict[str, Any]) -> dict[str, Any]:
    """One command as the caller would have run it: their environment, directory and arguments."""
    import contextlib
    import traceback

    from . import main

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    tty = request.get("tty") or [False, False]
    out, err = _Terminal(bool(tty[0])), _Terminal(bool(tty[1]))
    try:
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in dict(request.get("env") or {}).items()})
        os.chdir(str(request.get("cwd") or "/"))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main([str(a) for a in request["argv"]], resident=True)
            except SystemExit as exit_:  # argparse's own errors and --help
                status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 2)
            except BaseException:  # --debug re-raises: the traceback is what the caller asked for
                traceback.print_exc()
                status = 1
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        with contextlib.suppress(OSError):
            os.chdir(saved_cwd)
    return {"status": status, "stdout": out.getvalue(), "stderr": err.getvalue()}


def _warm(data_dir: Path) -> None:
    """Load the embedding model ahead of the first command that embeds (a ``search``); the
    local model is kept per process, so every service made here later finds it loaded. It
    opens no service: the server is left to the commands (and its watchdog)."""
    import contextlib

    with contextlib.suppress(Exception):
        from ..config import MemoryConfig
        from ..embeddings import resolve_embeddings

        resolve_embeddings(MemoryConfig.from_env()).embed_query("warm")


def serve(data_dir: Path, idle_timeout: float) -> str:
    """Answer commands on the socket until idle for half of ``idle_timeout`` or the server is
    gone; says why it returned. Only one resident serves a data directory."""
    import fcntl
    import threading

    from ..db.embedded import embedded_server_status

    path = socket_path(data_dir)
    lock = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    for attempt in range(20):  # one that is leaving lets go within a few seconds
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if attempt == 19 or resident_status(data_dir) is not None:  # another one serves
                os.close(lock)
                return "another resident serves this data directory"
            time.sleep(0.5)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with __import__("contextlib").suppress(FileNotFoundError):
            path.unlink()
        old = os.umask(0o177)
        try:
            listener.bind(str(path))
        finally:
            os.umask(old)
        listener.listen(8)
        listener.settimeout(1.0)
        from .context import enter_resident

        enter_resident()
        threading.Thread(target=_warm, args=(data_dir,), daemon=True).start()
        last_used = last_check = time.monotonic()
        served = 0
        seen_running = False
        while True:
            now = time.monotonic()
            if now - last_used >= idle_timeout / 2:
                return "idle"
            if now - last_check >= 5:
                last_check = now
                running = bool(embedded_server_status(data_dir)["running"])
                if seen_running and not running:  # (the first command may still be starting it)
                    return "the server is not running"
                seen_running = seen_running or running
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(30)
                try:
                    if not _same_user(conn):
                        continue
                    request = _receive(conn)
                    if request.get("stop"):
                        _send(conn, {"stopped": True})
                        return "asked to stop"
                    if request.get("status"):
                        _send(conn, {"pid": os.getpid(), "socket": str(path), "idle_timeout": idle_timeout / 2,
                                     "served": served})
                        continue
                    if not embedded_server_status(data_dir)["running"]:
                        # stopped since (server stop, a command with MEMORY_SERVER_IDLE_TIMEOUT=0):
                        # the caller runs the command itself, which starts it again
                        _send(conn, {"leaving": True})
                        return "the server is not running"
                    conn.settimeout(None)
                    served += 1
                    _send(conn, _run(request))
                except (OSError, ConnectionError, ValueError, KeyError):
                    continue
                finally:
                    last_used = time.monotonic()
    finally:
        listener.close()
        with __import__("contextlib").suppress(OSError):
            path.unlink()
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m agent_memory.cli.resident DATA_DIR IDLE_TIMEOUT_SECONDS", file=sys.stderr)
        return 2
    serve(Path(args[0]), float(args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
