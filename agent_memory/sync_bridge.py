"""Blocking calls on an :class:`~agent_memory.AsyncMemoryService`, from threads that are not its loop's.

An AsyncMemoryService's connections belong to the event loop it was set up on (its *home*):
psycopg's async pool keeps tasks and locks there, and awaiting them from another loop breaks.
LangChain still calls ``invoke`` on whatever thread it likes (a sync test, a sync node in a
worker thread, ``asyncio.to_thread``), so a blocking call is sent home and waited for:

- home running in another thread: the call runs there and this thread waits for it;
- home idle (set up by ``loop.run_until_complete`` or a test runner's loop between tests):
  this thread drives that loop for the length of the call;
- no home yet (never used): the service is set up on one shared background loop
  (thread ``agent-memory-bridge``), which is its home from then on;
- on a running event loop: refused, since waiting there would stall the very loop the call needs.

:func:`run_async` is the other half: an async call made on a loop other than a running home
is sent home too, so a service set up by a blocking call also serves ``ainvoke``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from .db.requests import Op
from .errors import ConfigurationError
from .service import AsyncMemoryService

__all__ = ["home_loop", "run_async", "run_blocking"]

T = TypeVar("T")

_start_lock = threading.Lock()  # one shared loop, started once
_drive_lock = threading.Lock()  # one thread at a time drives an idle home loop
_bridge: asyncio.AbstractEventLoop | None = None


def home_loop(service: AsyncMemoryService) -> asyncio.AbstractEventLoop | None:
    """The loop ``service`` was set up on (its pool lives there), or ``None`` before its first use."""
    task = service._setup_task  # created by setup() on the loop that opened the pool
    return task.get_loop() if task is not None else None


def _bridge_loop() -> asyncio.AbstractEventLoop:
    """The shared background loop for services first used by a blocking call (started once)."""
    global _bridge
    with _start_lock:
        if _bridge is None or _bridge.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="agent-memory-bridge", daemon=True).start()
            _bridge = loop
        return _bridge


def _send(coro: Coroutine[Any, Any, T], op: Op[Any], loop: asyncio.AbstractEventLoop) -> Future[T]:
    """Schedule ``coro`` on ``loop`` (another thread's); if it can't be, close it and ``op``."""
    try:
        return asyncio.run_coroutine_threadsafe(coro, loop)
    except BaseException:  # the loop closed in between: nothing will run the call
        coro.close()
        op.close()
        raise


def run_blocking(service: AsyncMemoryService, op: Op[T]) -> T:
    """Run ``op`` on ``service`` and wait for its result, from any thread without a running loop.

    Raises :class:`~agent_memory.errors.ConfigurationError` on a running event loop (use the
    async call, or this from a worker thread) and when the service's home loop has closed.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        op.close()
        raise ConfigurationError(
            "a blocking call on an AsyncMemoryService was made on a running event loop, where waiting "
            "would stall the loop it needs: await the async method instead (ainvoke, ...), or make the "
            "call from a worker thread (await asyncio.to_thread(...))")
    home = home_loop(service)
    if home is None:
        return _send(service.execute(op), op, _bridge_loop()).result()
    if home.is_closed():
        op.close()
        raise ConfigurationError(
            "the event loop this AsyncMemoryService was set up on has closed, and its connections with it: "
            "create a new AsyncMemoryService, or use a MemoryService for blocking calls")
    if home.is_running():
        return _send(service.execute(op), op, home).result()
    with _drive_lock:  # an idle home: drive it for this call (one thread at a time)
        if not home.is_running():
            return home.run_until_complete(service.execute(op))
    return _send(service.execute(op), op, home).result()  # it started meanwhile: wait for it there


async def run_async(service: AsyncMemoryService, op: Op[T]) -> T:
    """Await ``op`` on ``service``: here when this loop is its home (or it has none yet, or its
    home is idle), else on its running home loop in another thread (e.g. the shared one)."""
    home = home_loop(service)
    if home is None or home is asyncio.get_running_loop() or not home.is_running():
        return await service.execute(op)
    return await asyncio.wrap_future(_send(service.execute(op), op, home))
