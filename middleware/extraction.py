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
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
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
    """One extraction to run: whose, over which messages (its operation is built when it runs)."""

    identity: Identity
    messages: list[Any]
    min_new_turns: int


class ExtractionMiddleware(AgentMiddleware[AgentState[Any], Any]):
    """Automatic memory extraction after each agent run: ``create_agent(..., middleware=[MemoryMiddleware(m),
    ExtractionMiddleware(m)])``.

    memory: the same kinds of value as :class:`MemoryMiddleware` (pass the same service).
    llm: the chat model that extracts and decides; by default the service's (``MemoryService(llm=...)`` or
        ``MEMORY_LLM``), else the offline rules. ``None`` forces the rules.
    mode: ``"inline"``, ``"background"`` or ``"off"`` (default ``config.extraction``, ``MEMORY_EXTRACTION``).
    every: extract once this many user turns are new (default ``config.extract_every``).
    on_report: called with each :class:`~agent_memory.extraction.pipeline.ExtractionReport`
        (in the worker thread when in the background). The last 100 are in :attr:`reports`.
    enable_memory: ``False`` learns nothing and never opens the memory (as ``MemoryMiddleware``'s).
    """

    def __init__(
        self, memory: MemoryLike | MemoryBackend = None, *, config: MemoryConfig | None = None,
        embeddings: Embeddings | None = None, llm: Any = SERVICE_LLM, mode: str | None = None,
        every: int | None = None, on_report: Callable[[ExtractionReport], None] | None = None,
        enable_memory: bool = True,
    ) -> None:
        super().__init__()
        if not isinstance(enable_memory, bool):
            raise ConfigurationError(f"enable_memory must be True or False, got {enable_memory!r}")
        self.enable_memory = enable_memory
        if mode is not None and mode not in EXTRACTION_MODES:
            raise ConfigurationError(f"mode must be one of {', '.join(EXTRACTION_MODES)}, got {mode!r}")
        if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
            raise ConfigurationError(f"every must be a whole number >= 1, got {every!r}")
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

    @property
    def mode(self) -> str:
        return self._mode if self._mode is not None else self.backend.config.extraction

    @property
    def every(self) -> int:
        return self._every if self._every is not None else self.backend.config.extract_every

    # --- what to extract ----------------------------------------------------------------------

    def _job(self, state: AgentState[Any], runtime: Runtime[Any]) -> _Job | None:
        if not self.enable_memory or self.mode == "off":
            return None
        try:
            config = get_config()
        except RuntimeError:
            config = {}
        identity: Identity | None = identity_from(config, runtime.context, required=False)
        if identity is None or identity.session_id is None:
            return None
        return _Job(identity, list(state.get("messages", [])), self.every)

    def _extraction(self, job: _Job) -> Op[ExtractionReport]:
        return self.backend.ops(job.identity).extract(job.messages, llm=self._llm, min_new_turns=job.min_new_turns)

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
            return self._done(self.backend.run(self._extraction(job)))
        except AgentMemoryError as exc:
            logger.warning("memory extraction skipped: %s", exc)
            return None

    async def _arun(self, job: _Job) -> ExtractionReport | None:
        try:
            return self._done(await self.backend.arun(self._extraction(job)))
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

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        job = self._job(state, runtime)
        if job is not None:
            if self.mode == "background":
                self._submit(job)
            else:
                self._run(job)
        return None

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        job = self._job(state, runtime)
        if job is None:
            return None
        if self.mode != "background":
            await self._arun(job)
        elif self.backend.has_sync:
            self._submit(job)  # the worker thread outlives this event loop (Jupyter, asyncio.run)
        else:
            self._track(asyncio.get_running_loop().create_task(self._arun(job)))
        return None

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
        """Wait for pending runs and stop the worker thread."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
