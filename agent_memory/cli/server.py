"""``agent-memory server status|stop``, and what lets the embedded server outlive a command.

A command that uses the embedded server (no ``DATABASE_URL``) leaves it running for the next one
and starts its idle watchdog (:mod:`agent_memory.db.watchdog`), which stops it once nothing has
used it for ``MEMORY_SERVER_IDLE_TIMEOUT`` seconds. ``server status`` says what runs and who
uses it; ``server stop`` stops it now (the watchdog then exits by itself).
"""

from __future__ import annotations

import argparse
import atexit
from typing import Any

from .output import Output

__all__ = ["keep_server", "server"]


def keep_server(cfg: Any) -> str | None:
    """Before a command opens the service: join (or start) the embedded server so that this
    command's exit does not stop it, and make sure its watchdog runs; answers the memory
    database's dsn, for the service to use as is (joining once: each join takes pixeltable's
    machine-wide lock, which a server starting anywhere holds for seconds). None (nothing done)
    with ``DATABASE_URL``, with ``MEMORY_SERVER_IDLE_TIMEOUT=0``, or where no watchdog can run."""
    if cfg.database_url or cfg.server_idle_timeout <= 0:
        return None
    from ..db import watchdog

    data_dir = cfg.resolved_data_dir()
    if not watchdog.can_watch(data_dir):
        return None
    from ..db.connection import DEFAULT_DATABASE
    from ..db.embedded import ensure_embedded_server

    server = ensure_embedded_server(data_dir, keep_running=True)
    watchdog.ensure_watchdog(data_dir, cfg.server_idle_timeout)
    atexit.register(watchdog.mark_used, data_dir)  # the idle time counts from this command's end
    return server.ensure_database(DEFAULT_DATABASE)


def _status(cfg: Any) -> dict[str, Any]:
    from ..db.embedded import embedded_server_status
    from ..db.watchdog import watchdog_status
    from .resident import resident_status

    data_dir = cfg.resolved_data_dir()
    status = dict(embedded_server_status(data_dir))
    status["watchdog"] = watchdog_status(data_dir) if status["running"] else None
    status["idle_timeout"] = cfg.server_idle_timeout
    status["resident"] = resident_status(data_dir) if status["running"] else None
    return status


def server(args: argparse.Namespace, out: Output) -> int:
    from .context import config

    cfg = config(args)
    if cfg.database_url:
        message = ("DATABASE_URL is set: commands use that PostgreSQL, not the embedded server; "
                   "unset it (or drop --database-url) to manage the embedded one")
        if out.json:
            out.data({"embedded": False, "message": message})
        else:
            out.line(message)
        return 0 if args.action == "status" else 1
    if args.action == "stop":
        from ..db.embedded import stop_embedded_server
        from .resident import stop_resident

        stop_resident(cfg.resolved_data_dir())  # it keeps connections to the server open
        stopped = stop_embedded_server(cfg.resolved_data_dir())
        if out.json:
            out.data({"stopped": stopped, "data_dir": str(cfg.resolved_data_dir())})
        else:
            out.line(f"stopped the embedded server in {cfg.resolved_data_dir()}" if stopped
                     else f"no embedded server runs in {cfg.resolved_data_dir()}")
        return 0
    status = _status(cfg)
    if out.json:
        out.data(status)
        return 0
    dog = status["watchdog"]
    out.fields([
        ("data directory", status["data_dir"]),
        ("running", "yes" if status["running"] else "no"),
        ("postmaster pid", status["pid"] or "-"),
        ("connect with", status["dsn"] or "-"),
        ("processes using it", ", ".join(map(str, status["users"])) or "none"),
        ("idle watchdog", f"pid {dog['pid']}, stops it after {dog['timeout']:g}s unused" if dog and "pid" in dog
         else ("none (the last process using it stops it)" if status["running"] else "-")),
        ("idle timeout", f"{status['idle_timeout']:g}s (MEMORY_SERVER_IDLE_TIMEOUT)"),
        ("resident command process", f"pid {status['resident']['pid']}" if status["resident"] else "none"),
    ])
    return 0
