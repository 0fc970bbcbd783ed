"""Stop signals end a server the way a normal exit does, so what it started stops.

A server may have started the embedded PostgreSQL (:mod:`agent_memory.db.embedded`), which an
``atexit`` hook stops when the last process using it exits. Two things kept that hook from
running. Python's default answer to SIGTERM or SIGHUP kills the process outright (no
``finally``, no ``atexit``), and uvicorn, which catches SIGTERM for its graceful shutdown,
raises it again afterwards with the handler it found: that default. And a process leaving by
a signal while its peer keeps stdin open (the MCP SDK reads stdin in a worker thread) waited
for that thread, before any ``atexit`` hook, until the peer closed the pipe.

So inside :func:`exit_on_signals` SIGTERM and SIGHUP raise ``SystemExit(0)`` and SIGINT raises
``KeyboardInterrupt`` as usual (the servers' ``finally`` blocks close their services); when the
block is left after such a signal, the ``atexit`` hooks run at once and the process exits with
status 0, the server having stopped as asked. A repeated signal during that shutdown is ignored
rather than cutting the cleanup short.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["SIGNALS", "exit_on_signals"]

#: the signals that ask a server to stop
SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, name))


@contextmanager
def exit_on_signals() -> Iterator[None]:
    """Run a server's main loop and cleanup in here (see the module's docstring).

    Without a signal, leaving the block puts the handlers found back and changes nothing else.
    Outside the main thread (a server run from a test's worker thread) signals cannot be
    handled, and nothing changes at all.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:
            return  # already shutting down: let the cleanup finish
        stopping = True
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(0)

    previous = {sig: signal.signal(sig, stop) for sig in SIGNALS}
    try:
        yield
    finally:
        if stopping:
            _exit_now()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _exit_now() -> None:
    """Run the ``atexit`` hooks (the embedded server's among them) and end the process, without
    waiting for threads still blocked on a read that only the peer can end."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # the peer is gone or the stream closed: nothing to flush into
    try:
        atexit._run_exitfuncs()
    finally:
        os._exit(0)
