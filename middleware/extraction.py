"""``ExtractionMiddleware``: the agent learns from its conversations by itself.

After an agent run it hands the thread's messages to
:meth:`~agent_memory.handles.MemoryHandle.extract`, which reads only what
it has not read before (the session's conversation resource keeps the
cursor), proposes memories, gates and consolidates them, and rebuilds the
profiles that changed. ``mode="inline"`` does it before ``invoke`` returns;
``mode="background"`` hands it to one worker thread per middleware, so the
user's answer is not delayed (runs of one middleware stay in order, and the
interpreter waits for pending ones at exit; :meth:`flush` waits on demand).
``every=N`` waits until N user turns are new. A failure is logged and never
reaches the agent: extraction is bookkeeping, not part of the answer.

Each run reads every turn not read yet, and the window's last run
(``MEMORY_MAX_EXTRACTIONS``) is kept for the end of the conversation, so a
thread longer than the budget is read whole: turns the cadence defers wait on
the session's conversation (in the database), and are read when the thread
goes idle (``idle_seconds``, ``MEMORY_EXTRACT_IDLE_SECONDS``), at the latest
when this middleware first sees the thread again (resumed) or another session
of the same user starts, and by :meth:`close`. Turns beyond the budget wait
for the next run the limit allows (logged once per session).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, NamedTuple

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.embeddings import Embeddings
from langgraph.config import get_config
from langgraph.runtime import Runtime

from agent_memory.config import EXTRACTION_MODES, MemoryConfig
from agent_memory.db.requests import Op
from agent_memory.errors import AgentMemoryError, ConfigurationError
from agent_memory.extraction.pipeline import ExtractionReport
from agent_memory.models import Identity
from agent_memory.service import SERVICE_LLM

from .backend import MemoryBackend, MemoryLike
from .identity import identity_from

__all__ = ["ExtractionMiddleware"]

logger = logging.getLogger(__name__)


class _Job(NamedTuple):
    """One extraction to run: whose, over which messages (its operation is built when it runs).
    ``kind``: ``"turn"`` (after a run: the cadence decides), ``"idle"`` (the session went idle:
    read what waits, with the run kept for it) or ``"waiting"`` (first sight of a session: read
    whatever waits on the user's conversations)."""

    identity: Identity
    messages: list[Any]
    min_new_turns: int
    kind: str = "turn"
    injected: tuple[str, ...] | None = None  # the memories MemoryMiddleware put in this run's prompt


#: the sessions a middleware remembers having seen (a resumed thread is one it has not)
_SEEN_MAX = 10_000


class ExtractionMiddleware(AgentMiddleware[AgentState[Any], Any]):
    """Automatic memory extraction after each agent run: ``create_agent(..., middleware=[MemoryMiddleware(m),
    ExtractionMiddleware(m)])``.

    memory: the same kinds of value as :class:`MemoryMiddleware` (pass the same service).
    llm: the chat model that extracts and decides; by default the service's (``MemoryService(llm=...)`` or
        ``MEMORY_LLM``), else the offline rules. ``None`` forces the rules.
    mode: ``"inline"``, ``"background"`` or ``"off"`` (default ``config.extraction``, ``MEMORY_EXTRACTION``).
    every: extract once this many user turns are new (default ``config.extract_every``).
    idle_seconds: read the turns that wait once a thread had no new turn for this long (default
        ``config.extract_idle_seconds``).
    on_report: called with each :class:`~agent_memory.extraction.pipeline.ExtractionReport`
        (in the worker thread when in the background). The last 100 are in :attr:`reports`.
    enable_memory: ``False`` learns nothing and never opens the memory (as ``MemoryMiddleware``'s).
    """

    def __init__(
        self, memory: MemoryLike | MemoryBackend = None, *, config: MemoryConfig | None = None,
        embeddings: Embeddings | None = None, llm: Any = SERVICE_LLM, mode: str | None = None,
        every: int | None = None, on_report: Callable[[ExtractionReport], None] | None = None,
        enable_memory: bool = True,
        idle_seconds: float | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(enable_memory, bool):
            raise ConfigurationError(f"enable_memory must be True or False, got {enable_memory!r}")
        self.enable_memory = enable_memory
        if mode is not None and mode not in EXTRACTION_MODES:
            raise ConfigurationError(f"mode must be one of {', '.join(EXTRACTION_MODES)}, got {mode!r}")
        if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
            raise ConfigurationError(f"every must be a whole number >= 1, got {every!r}")
        if idle_seconds is not None and (isinstance(idle_seconds, bool) or not isinstance(idle_seconds, (int, float))
                                         or not 0 < idle_seconds < float("inf")):
            raise ConfigurationError(f"idle_seconds must be a positive number of seconds, got {idle_seconds!r}")
        if on_report is not None and not callable(on_report):
            raise ConfigurationError(f"on_report must be callable, got {type(on_report).__name__}")
        self.backend = MemoryBackend.of(memory, config=config, embeddings=embeddings)
        self._llm = llm
        self._mode = mode
        self._every = every
        self.on_report = on_report
        self.reports: deque[ExtractionReport] = deque(maxlen=100)
        self._executor: ThreadPoolExecutor | None = None
        self._pending: set[Future[Any] | asyncio.Task[Any]] = set()
        self._lock = threading.Lock()
        self._idle_seconds = idle_seconds
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._timers: dict[tuple[str, str], tuple[Any, _Job]] = {}

    @property
    def idle_seconds(self) -> float:
        return float(self._idle_seconds if self._idle_seconds is not None
                     else self.backend.config.extract_idle_seconds)

    @property
    def mode(self) -> str:
        return self._mode if self._mode is not None else self.backend.config.extraction

    @property
    def every(self) -> int:
        return self._every if self._every is not None else self.backend.config.extract_every

    # --- what to extract ----------------------------------------------------------------------

    def _identity(self, runtime: Runtime[Any]) -> Identity | None:
        if not self.enable_memory or self.mode == "off":
            return None
        try:
            config = get_config()
        except RuntimeError:
            config = {}
        identity: Identity | None = identity_from(config, runtime.context, required=False)
        if identity is None or identity.session_id is None:
            return None
        return identity

    def _job(self, state: AgentState[Any], runtime: Runtime[Any]) -> _Job | None:
        identity = self._identity(runtime)
        if identity is None:
            return None
        looked = state.get("memory_context")  # set by MemoryMiddleware in this run
        injected = tuple(str(i) for i in looked.get("memory_ids") or ()) if isinstance(looked, dict) else None
        return _Job(identity, list(state.get("messages", [])), self.every, injected=injected)

    def _first_sight(self, runtime: Runtime[Any]) -> _Job | None:
        """At the start of a run: the new turn ends the thread's idleness (its timer stops); a
        session this middleware has not seen (a new one, or a thread resumed) first has whatever
        waits on the user's conversations read."""
        identity = self._identity(runtime)
        if identity is None:
            return None
        key = (identity.user_id, str(identity.session_id))
        self._cancel_timer(key)
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                return None
            self._seen[key] = None
            if len(self._seen) > _SEEN_MAX:
                self._seen.popitem(last=False)
        return _Job(identity, [], 1, "waiting")

    def _extraction(self, job: _Job) -> Op[Any]:
        ops = self.backend.ops(job.identity)
        if job.kind == "waiting":
            return ops.extract_waiting(llm=self._llm)
        extraction = ops.extract(job.messages, llm=self._llm, min_new_turns=job.min_new_turns,
                                 keep_last_run=job.kind == "turn")

        def turn() -> Op[Any]:
            if job.injected is not None:  # what this turn's prompt held, for stats(): one small write
                yield from ops.record_injected(job.injected)
            return (yield from extraction)

        return turn()

    def _finished(self, job: _Job, result: Any) -> ExtractionReport | None:
        reports = result if isinstance(result, list) else [] if result is None else [result]
        for report in reports:
            self._done(report)
        if job.kind == "turn" and reports and reports[-1].status == "waiting":
            self._schedule(job)
        return reports[-1] if reports else None

    # --- idleness -------------------------------------------------------------------------------

    def _cancel_timer(self, key: tuple[str, str]) -> None:
        with self._lock:
            timer = self._timers.pop(key, None)
        if timer is not None:
            timer[0].cancel()

    def _schedule(self, job: _Job) -> None:
        """Read what waits once the thread stays idle for ``idle_seconds``."""
        key = (job.identity.user_id, str(job.identity.session_id))
        idle = _Job(job.identity, [], 1, "idle")
        self._cancel_timer(key)
        if self.backend.has_sync:
            timer: Any = threading.Timer(self.idle_seconds, self._on_idle, (key, idle))
            timer.daemon = True
            with self._lock:
                self._timers[key] = (timer, idle)
            timer.start()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to wait on: what waits is read when the thread is next seen
        handle = loop.call_later(self.idle_seconds, self._on_idle_async, key, idle)
        with self._lock:
            self._timers[key] = (handle, idle)

    def _on_idle(self, key: tuple[str, str], job: _Job) -> None:
        with self._lock:
            if self._timers.get(key, (None, None))[1] is not job:
                return
            del self._timers[key]
        try:
            self._submit(job)
        except RuntimeError:  # the interpreter is shutting down: what waits is read next time
            logger.debug("idle extraction for session %r not started: shutting down", key[1])

    def _on_idle_async(self, key: tuple[str, str], job: _Job) -> None:
        with self._lock:
            if self._timers.get(key, (None, None))[1] is not job:
                return
            del self._timers[key]
        self._track(asyncio.get_running_loop().create_task(self._arun(job)))

    def _done(self, report: ExtractionReport) -> ExtractionReport:
        self.reports.append(report)
        if report.status == "failed":
            logger.warning("memory extraction failed: %s", report.error)
        if self.on_report is not None:
            try:
                self.on_report(report)
            except Exception:  # a reporting hook must not break the agent
                logger.exception("on_report raised")
        return report

    def _run(self, job: _Job) -> ExtractionReport | None:
        try:
            return self._finished(job, self.backend.run(self._extraction(job)))
        except AgentMemoryError as exc:
            logger.warning("memory extraction skipped: %s", exc)
            return None

    async def _arun(self, job: _Job) -> ExtractionReport | None:
        try:
            return self._finished(job, await self.backend.arun(self._extraction(job)))
        except AgentMemoryError as exc:
            logger.warning("memory extraction skipped: %s", exc)
            return None

    def _track(self, pending: Future[Any] | asyncio.Task[Any]) -> None:
        with self._lock:
            self._pending.add(pending)
        pending.add_done_callback(self._forget)

    def _forget(self, pending: Any) -> None:
        with self._lock:
            self._pending.discard(pending)

    def _submit(self, job: _Job) -> None:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent-memory-extraction")
            executor = self._executor
        self._track(executor.submit(self._run, job))

    # --- hooks ----------------------------------------------------------------------------------

    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._dispatch(self._first_sight(runtime))
        return None

    async def abefore_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        await self._adispatch(self._first_sight(runtime))
        return None

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._dispatch(self._job(state, runtime))
        return None

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        await self._adispatch(self._job(state, runtime))
        return None

    def _dispatch(self, job: _Job | None) -> None:
        """Run ``job`` (if any) now, or hand it to the worker thread in background mode."""
        if job is None:
            return
        if self.mode == "background":
            self._submit(job)
        else:
            self._run(job)

    async def _adispatch(self, job: _Job | None) -> None:
        """:meth:`_dispatch` from an event loop: a blocking backend's background job goes to the
        worker thread (which outlives this loop: Jupyter, ``asyncio.run``), an async one's to a task."""
        if job is None:
            return
        if self.mode != "background":
            await self._arun(job)
        elif self.backend.has_sync:
            self._submit(job)
        else:
            self._track(asyncio.get_running_loop().create_task(self._arun(job)))

    # --- waiting --------------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for background extraction runs started so far (thread ones); True when all finished."""
        with self._lock:
            pending = [p for p in self._pending if isinstance(p, Future)]
        if not pending:
            return True
        _, not_done = wait(pending, timeout=timeout)
        return not not_done

    async def aflush(self, timeout: float | None = None) -> bool:
        """Wait for every pending background run, thread or asyncio task."""
        with self._lock:
            tasks = [p for p in self._pending if isinstance(p, asyncio.Task)]
        done = await asyncio.to_thread(self.flush, timeout)
        if tasks:
            _, not_done = await asyncio.wait(tasks, timeout=timeout)
            done = done and not not_done
        return done

    def close(self) -> None:
        """Read the turns of threads waiting to go idle now, wait for pending runs and stop the
        worker thread."""
        with self._lock:
            timers, self._timers = list(self._timers.values()), {}
        for timer, job in timers:
            timer.cancel()
            if self.backend.has_sync:
                self._run(job)
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
