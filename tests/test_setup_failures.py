"""Setup mistakes answered with what happened and what to do: a host name that can never be looked
up, a PostgreSQL without pgvector, a read-only data directory.

Nothing here connects to anything but the session's embedded server (the bad host names are
refused before any lookup).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from agent_memory import ConfigurationError, MemoryService, MigrationError
from agent_memory.db.embedded import _HINT, _hint
from agent_memory.db.failures import missing_extension
from agent_memory.db.migrations import Migration, apply_migrations
from agent_memory.db.requests import run


# --- a host name that can never be looked up -----------------------------------------------------

@pytest.mark.parametrize("url", ["postgresql://a..b/empty", "postgresql://.host/empty",
                                 "postgresql://" + "x" * 64 + ".example.com/db", "postgresql://ok,a..b/db"])
def test_a_host_name_that_cannot_exist_is_a_configuration_error_not_a_unicode_error(url: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        MemoryService(url)
    message = str(refused.value)
    assert "is not a valid host name" in message and "DATABASE_URL" in message and "embedded server" in message
    assert "UnicodeError" not in message and "idna" not in message


def test_the_cli_says_it_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from agent_memory.cli import main

    assert main(["list", "--user", "alice", "--database-url", "postgresql://a..b/empty"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a valid host name" in err[0] and "unexpected" not in err[0]


# --- a PostgreSQL without pgvector ----------------------------------------------------------------

def test_a_missing_extension_is_explained_from_the_servers_real_error(fresh_dsn) -> None:
    """The embedded server has pgvector, so a missing extension is made by another name: the real
    error class and wording PostgreSQL gives for an extension that is not installed."""
    migration = Migration("0001_absent_extension", "CREATE EXTENSION IF NOT EXISTS vector_absent_for_test")
    with psycopg.connect(fresh_dsn(), autocommit=True) as conn:
        with pytest.raises(MigrationError) as failed:
            run(apply_migrations([migration], 384), conn, None)
        real = failed.value.__cause__
    assert isinstance(real, psycopg.Error) and real.sqlstate in ("0A000", "58P01")
    message = str(failed.value)
    assert "does not have the vector_absent_for_test extension installed" in message
    assert "unset DATABASE_URL to use the embedded PostgreSQL" in message

    # the same error about pgvector: how to install it, and the embedded server that has it
    vector = type(real)(str(real).replace("vector_absent_for_test", "vector"))
    hint = missing_extension(vector)
    assert "does not have pgvector installed" in hint and "apt install postgresql-<major version>-pgvector" in hint
    assert "unset DATABASE_URL to use the embedded PostgreSQL, which includes pgvector" in hint


def test_older_servers_wording_and_other_errors() -> None:
    old = psycopg.errors.UndefinedFile(
        'could not open extension control file "/usr/share/postgresql/14/extension/vector.control": '
        "No such file or directory")
    assert "pgvector" in missing_extension(old)
    assert missing_extension(psycopg.errors.InsufficientPrivilege('permission denied to create extension "vector"')) == ""
    assert missing_extension(ValueError('extension "vector" is not available')) == ""


# --- a read-only data directory -------------------------------------------------------------------

def test_a_start_failure_that_says_read_only_or_permission_is_not_called_damage(tmp_path: Path) -> None:
    for said in ('FATAL:  could not create lock file "postmaster.pid": Read-only file system',
                 'FATAL:  could not open file "global/pg_control": Permission denied'):
        hint = _hint(tmp_path, said)
        assert "read-only or not writable" in hint and "its memories are intact" in hint
        assert "delete" not in hint and "MEMORY_DATA_DIR" in hint and "DATABASE_URL" in hint
    assert _hint(tmp_path, "FATAL:  invalid checkpoint record") == _HINT  # damage keeps its hint


@pytest.mark.skipif(shutil.which("unshare") is None or sys.platform != "linux", reason="needs unshare (Linux)")
def test_a_read_only_mount_is_recognised_without_the_servers_words(tmp_path: Path) -> None:
    """A real read-only bind mount (in a private mount namespace, so nothing else sees it):
    the data directory itself is found read-only, even as root."""
    data = tmp_path / "pgdata"
    data.mkdir()
    probe = (f"from pathlib import Path; from agent_memory.db.embedded import _hint; "
             f"print(_hint(Path({str(data)!r}), 'pg_ctl: could not start server'))")
    script = (f"mount --bind {data} {data} && mount -o remount,bind,ro {data} && "
              f"{sys.executable} -c {probe!r}")
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    if done.returncode != 0 and "mount" in done.stderr:
        pytest.skip(f"no private mounts here: {done.stderr.strip()[:200]}")
    assert done.returncode == 0, done.stderr
    assert "is read-only or not writable" in done.stdout and "delete" not in done.stdout
    assert "read-only or not writable" not in _hint(data, "pg_ctl: could not start server")  # writable outside
