"""``agent-memory``: the demo, a chat, and a command line over the memory service.

This package only parses arguments, calls :class:`~agent_memory.service.MemoryService` and
prints: :mod:`.parser` holds every command and its help (and imports nothing heavy, so
``--help`` is instant), :mod:`.output` the tables and JSON, and one module per command group
(:mod:`.memories`, :mod:`.profiles`, :mod:`.data`, :mod:`.agent`) the code that runs them,
imported only when its command runs. Every error ends in one line saying what to do and a
non-zero exit status; ``--debug`` (or ``AGENT_MEMORY_DEBUG=1``) shows the traceback instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _debug(flag: bool) -> bool:
    return flag or os.environ.get("AGENT_MEMORY_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


def _resident(args: object, given: list[str]) -> int | None:
    """Run a memory command in the resident process (:mod:`.resident`) when there is one to
    reach; None: run it here."""
    module = str(getattr(args, "runs", "")).split(":")[0]
    if module not in ("memories",) or "-" in given:
        return None
    from .context import config
    from .resident import ask

    try:
        cfg = config(args)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - a bad setting: the command itself says what is wrong
        return None
    if cfg.database_url or cfg.server_idle_timeout <= 0:
        return None
    from ..db.watchdog import supported

    if not supported():
        return None
    return ask(cfg.resolved_data_dir(), given, cfg.server_idle_timeout)


def main(argv: Sequence[str] | None = None, *, resident: bool = False) -> int:
    """Run one command; answers the exit status (0 done, 1 refused or failed, 2 bad input or
    configuration, 130 interrupted). Run as the program (``argv`` None), a memory command is
    handed to the resident command process when one runs (:mod:`.resident`); ``resident``: this
    is that process."""
    from importlib import import_module

    from .parser import build_parser
    from .servers import SERVERS, run_server

    given = list(sys.argv[1:] if argv is None else argv)
    if given and given[0] in SERVERS:  # a server parses its own arguments
        return run_server(given[0], given[1:])
    args = build_parser().parse_args(argv)
    if argv is None and not resident:
        answered = _resident(args, given)
        if answered is not None:
            return answered
    from .errors import report_error  # after the resident's turn: a warm command never imports these
    from .output import Output

    debug = _debug(args.debug)
    out = Output(json_mode=args.json)
    module, function = args.runs.split(":")
    try:
        return int(getattr(import_module(f".{module}", __name__), function)(args, out) or 0)
    except KeyboardInterrupt:
        if debug:
            raise
        hint = "; run it again to resume" if args.command == "reembed" else ""
        print(f"agent-memory: interrupted{hint}", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            raise
        return report_error(exc, out)
