"""PostgresCheckpointer against LangChain's checkpointer conformance suite, and the ownership
rules of the two calls it now implements on PostgreSQL (``copy_thread``, ``delete_for_runs``).

The suite builds configs with only a ``thread_id``; our checkpointer refuses owner-less access to
owned threads by default, so the suite runs through a thin subclass that puts an owner into every
config and passes it to the calls that take no config, as an application would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any
from uuid import uuid4

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate

from agent_memory import MemoryConfig
from agent_memory.episodic import PostgresCheckpointer
from agent_memory.errors import InvalidInputError, MissingIdentityError, PermissionDeniedError

OWNER = "conformance-owner"


def _owned(config: Any, user: str = OWNER) -> Any:
    if config is None:
        return config
    return {**config, "configurable": {**config.get("configurable", {}), "user_id": user}}


class OwnedCheckpointer(PostgresCheckpointer):
    """Every call made as ``OWNER``: what a multi-tenant app does for its signed-in user."""

    async def aget_tuple(self, config):
        return await super().aget_tuple(_owned(config))

    async def alist(self, config, **kwargs):
        async for item in super().alist(_owned(config), **kwargs):
            yield item

    async def aput(self, config, checkpoint, metadata, new_versions):
        return await super().aput(_owned(config), checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id, task_path=""):
        return await super().aput_writes(_owned(config), writes, task_id, task_path)

    async def adelete_thread(self, thread_id, *, user_id=None):
        return await super().adelete_thread(thread_id, user_id=OWNER)

    async def adelete_for_runs(self, run_ids, *, user_id=None):
        return await super().adelete_for_runs(run_ids, user_id=OWNER)

    async def acopy_thread(self, source_thread_id, target_thread_id, *, user_id=None):
        return await super().acopy_thread(source_thread_id, target_thread_id, user_id=OWNER)


async def test_the_conformance_suite_passes_with_an_owner(fresh_dsn: Callable[[], str]) -> None:
    dsn = fresh_dsn()

    @checkpointer_test(name="agent-memory PostgresCheckpointer")
    async def factory() -> AsyncIterator[PostgresCheckpointer]:
        async with OwnedCheckpointer(dsn, config=MemoryConfig.defaults()) as saver:
            yield saver

    report = await validate(factory)
    failures = {cap: r.failures for cap, r in report.results.items() if r.passed is False}
    assert failures == {}
    tested = {cap for cap, r in report.results.items() if r.passed}
    # every capability, copy_thread and delete_for_runs included, was detected and passed
    assert {"put", "put_writes", "get_tuple", "list", "delete_thread", "copy_thread", "delete_for_runs"} <= tested
    assert sum(r.tests_passed for r in report.results.values()) >= 60


def _put(cp: PostgresCheckpointer, thread: str, user: str, run_id: str | None = None) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": "", "user_id": user}}
    metadata = {"run_id": run_id} if run_id else {}
    return cp.put(config, empty_checkpoint(), metadata, {})


def _threads(cp: PostgresCheckpointer, thread: str, user: str) -> list[Any]:
    return list(cp.list({"configurable": {"thread_id": thread, "user_id": user}}))


def test_copy_thread_needs_the_source_owner_and_gives_the_copy_to_the_caller(fresh_dsn) -> None:
    with PostgresCheckpointer(fresh_dsn(), config=MemoryConfig.defaults()) as cp:
        alice_thread, copy, stolen = (str(uuid4()) for _ in range(3))
        _put(cp, alice_thread, "alice")
        with pytest.raises(PermissionDeniedError):
            cp.copy_thread(alice_thread, stolen, user_id="mallory")
        with pytest.raises(PermissionDeniedError, match="names none"):
            cp.copy_thread(alice_thread, stolen)
        assert _threads(cp, stolen, "mallory") == []
        cp.copy_thread(alice_thread, copy, user_id="alice")
        assert len(_threads(cp, copy, "alice")) == 1
        with pytest.raises(PermissionDeniedError):  # the copy is alice's too
            _threads(cp, copy, "mallory")
        with pytest.raises(InvalidInputError, match="already exists"):
            cp.copy_thread(alice_thread, copy, user_id="alice")


async def test_delete_for_runs_touches_only_the_callers_threads(fresh_dsn) -> None:
    async with PostgresCheckpointer(fresh_dsn(), config=MemoryConfig.defaults()) as cp:
        run = str(uuid4())
        mine, theirs = str(uuid4()), str(uuid4())
        _put(cp, mine, "alice", run)
        _put(cp, theirs, "bob", run)  # the same run id in another user's thread
        with pytest.raises(MissingIdentityError, match="require_user=False"):
            await cp.adelete_for_runs([run])
        await cp.adelete_for_runs([run], user_id="alice")
        assert _threads(cp, mine, "alice") == []
        assert len(_threads(cp, theirs, "bob")) == 1
    with PostgresCheckpointer(cp.config.database_url or fresh_dsn(), config=MemoryConfig.defaults(),
                              require_user=False) as plain:
        thread = str(uuid4())
        plain.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, empty_checkpoint(),
                  {"run_id": run}, {})
        plain.delete_for_runs([run])  # single-tenant: plain LangGraph behaviour
        assert list(plain.list({"configurable": {"thread_id": thread}})) == []
