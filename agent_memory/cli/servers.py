"""``agent-memory mcp`` and ``agent-memory memory-store``: the servers, with their own arguments.

:func:`agent_memory.cli.main` hands every argument after the command to the server's own
``main`` (so ``agent-memory mcp --help`` is the server's help); these run when the command was
parsed here instead (its arguments in ``server_args``).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time only the commands need it: a warm command imports no output code
    from .output import Output

__all__ = ["SERVERS", "mcp", "memory_store", "run_server"]

#: command -> the module whose ``main(argv)`` runs it
SERVERS = {"mcp": "agent_memory.servers.mcp", "memory-store": "agent_memory.servers.memory_store"}


def run_server(command: str, argv: list[str]) -> int:
    """Run a server's ``main``; a server whose optional dependency is missing says so in one line
    (its import error holds how to install it), not a traceback."""
    import sys
    from importlib import import_module

    try:
        server = import_module(SERVERS[command])
    except ImportError as exc:
        if exc.name is not None and exc.name.startswith("agent_memory"):
            raise  # our own code is broken: the traceback is what helps
        print(f"agent-memory {command}: error: {exc}", file=sys.stderr)
        return 2
    return int(server.main(argv) or 0)


def mcp(args: argparse.Namespace, out: Output) -> int:
    return run_server("mcp", list(args.server_args))


def memory_store(args: argparse.Namespace, out: Output) -> int:
    return run_server("memory-store", list(args.server_args))
