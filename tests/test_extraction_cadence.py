"""When memory learns: every run reads all that waits, the last run of the window is kept for the
end of the thread (idle, resumed, the user's next session, close), nothing is ever dropped."""

from __future__ import annotations

import time
from typing import Any

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from agent_memory import MemoryService
from agent_memory.errors import ConfigurationError, InvalidInputError
from agent_memory.extraction import cadence
from agent_memory.extraction.pipeline import MAX_TRANSCRIPT_CHARS, _parts
from agent_memory.extraction.transcript import Turn
from agent_memory.middleware import ExtractionMiddleware, MemoryMiddleware
from agent_memory.middleware.tools import describe_stats
from agent_memory.testing import ScriptedChatModel

#: the six statements of the issue's thread (one a turn), and what the offline rules keep of each
SIX = [("I prefer Python for scripting tasks.", "Prefers Python for scripting tasks."),
       ("I live in Lisbon.", "Lives in Lisbon."),
       ("I use Neovim.", "Uses Neovim."),
       ("I am a nurse.", "Is a nurse."),
       ("I own a bicycle.", "Owns a bicycle."),
       ("I speak Portuguese.", "Speaks Portuguese.")]


def cfg(user: str, thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": user}}


def say(text: str) -> dict[str, Any]:
    return {"messages": [("user", text)]}


def agent_with(memory: Any, **extraction: Any) -> tuple[Any, ScriptedChatModel, ExtractionMiddleware]:
    model = ScriptedChatModel(script=lambda messages: "ok")
    mw = ExtractionMiddleware(memory, **{"llm": None, **extraction})
    agent = create_agent(model, [], middleware=[MemoryMiddleware(memory), mw], checkpointer=InMemorySaver())
    return agent, model, mw


def contents(memory: MemoryService, user: str) -> list[str]:
    return sorted(m.content for m in memory.for_user(user).list())


def wait_for(condition: Any, timeout: float = 60.0) -> None:
    """Poll until ``condition()`` holds (a background timer's work); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.05)


# --- pure ---------------------------------------------------------------------------------------


def test_due_keeps_the_last_run_for_the_end():
    assert cadence.due(0, every=1, runs_left=3, keep_last_run=True) == "wait"
    assert cadence.due(1, every=2, runs_left=3, keep_last_run=True) == "wait"
    assert cadence.due(2, every=2, runs_left=3, keep_last_run=True) == "now"
    assert cadence.due(5, every=1, runs_left=1, keep_last_run=True) == "keep_last_run"
    assert cadence.due(5, every=1, runs_left=1, keep_last_run=False) == "now"  # the end of the thread spends it
    assert cadence.due(5, every=1, runs_left=0, keep_last_run=True) == "now"  # the limit itself refuses it


def test_waiting_turns_round_trip_with_secrets_withheld():
    turns = [Turn("m1", "user", "I live in Lisbon."), Turn("m2", "assistant", "Noted."), Turn("m3", "user", "  "),
             Turn("m4", "user", "My key is sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2)]
    kept = cadence.turns_to_json(turns)
    assert [k["id"] for k in kept] == ["m1", "m2", "m4"]  # an empty turn says nothing
    back = cadence.turns_from_json(kept + [{"role": "system", "text": "x"}, "junk"])
    assert [(t.id, t.role) for t in back] == [("m1", "user"), ("m2", "assistant"), ("m4", "user")]
    assert back[0].text == "I live in Lisbon." and "sk-proj" not in back[2].text and cadence.WITHHELD in back[2].text
    assert cadence.waiting_turns({"waiting": kept}) == back and cadence.waiting_turns(None) == []


def test_a_long_conversation_is_read_in_parts_none_of_it_cut():
    turns = [Turn(f"m{i}", "user", f"I visited city number {i}. " + "x" * 500) for i in range(60)]
    parts = _parts(turns)
    assert len(parts) > 1 and [t for p in parts for t in p] == turns
    assert all(sum(len(t.text) + 12 for t in p) <= MAX_TRANSCRIPT_CHARS for p in parts)


# --- the thread -------------------------------------------------------------------------


def test_the_six_statement_thread_is_learned_whole_with_the_defaults(memory: MemoryService, tenant,
                                                                      caplog) -> None:
    """MEMORY_MAX_EXTRACTIONS=3, MEMORY_EXTRACT_EVERY=1, the offline rules: two runs as the thread
    goes, the third kept for its end, which reads the four turns that waited."""
    assert (memory.config.max_extractions, memory.config.extract_every) == (3, 1)
    agent, _, mw = agent_with(memory, idle_seconds=0.5)
    config = cfg(tenant.user, tenant.session)
    for said, _ in SIX:
        agent.invoke(say(said), config)
    assert [r.status for r in mw.reports] == ["done", "done", "waiting", "waiting", "waiting", "waiting"]
    assert not any(r.status == "rate_limited" for r in mw.reports)
    assert mw.reports[-1].waiting_turns == 8  # four user turns and their answers
    # the thread goes idle: the kept run reads everything that waited
    wait_for(lambda: len(mw.reports) == 7)
    assert mw.flush(timeout=60)
    last = mw.reports[-1]
    assert last.status == "done" and last.runs_left == 0 and len(last.added) == 4
    assert contents(memory, tenant.user) == sorted(fact for _, fact in SIX)
    stats = memory.for_user(tenant.user, session_id=tenant.session).stats()
    assert (stats.extraction_runs, stats.extractions_remaining, stats.turns_waiting, stats.extraction_waits) == (
        3, 0, 0, 0)
    source = memory.for_user(tenant.user).source(memory.for_user(tenant.user).list()[0].id)
    assert all(said in source.content for said, _ in SIX)  # the conversation kept all it read, once
    assert source.content.count("I speak Portuguese.") == 1

    # the user comes back to the thread: the window's budget is spent, the new turns wait (none
    # dropped), logged at WARNING once for the session, counted, and said in the run reports
    with caplog.at_level("WARNING", logger="agent_memory"):
        agent.invoke(say("I have a cat named Tom."), config)
        agent.invoke(say("I drink green tea."), config)
    assert [r.status for r in list(mw.reports)[7:9]] == ["rate_limited", "rate_limited"]
    assert "waiting" in mw.reports[8].summary() and "MEMORY_MAX_EXTRACTIONS" in (mw.reports[8].error or "")
    assert len([r for r in caplog.records if "MEMORY_MAX_EXTRACTIONS" in r.getMessage()]) == 1
    stats = memory.for_user(tenant.user, session_id=tenant.session).stats()
    assert stats.extraction_waits >= 2 and stats.turns_waiting == 4 and stats.extractions_remaining == 0
    mw.close()


def test_the_next_session_reads_what_the_last_one_left_before_its_first_answer(memory: MemoryService,
                                                                                 tenant) -> None:
    """The process ends before the thread goes idle: its waiting turns are in the database, and the
    user's next session (another process: a new middleware) reads them before answering."""
    agent, _, mw = agent_with(memory)
    for said, _ in SIX:
        agent.invoke(say(said), cfg(tenant.user, tenant.session))
    assert len(contents(memory, tenant.user)) == 2  # two runs so far; four turns wait
    mw._timers.clear()  # the process "ends": no timer will fire, nothing closes the middleware

    later, model, mw2 = agent_with(memory)
    later.invoke(say("Which editor do I use, and where do I live?"), cfg(tenant.user, tenant.other_session))
    assert mw2.reports[0].status == "done" and mw2.reports[0].resource_id == mw.reports[0].resource_id
    assert contents(memory, tenant.user) == sorted(fact for _, fact in SIX)
    prompt = model.system_prompts[0]  # the first answer of the new session already knows
    assert "Speaks Portuguese." in prompt or "Is a nurse." in prompt


def test_a_resumed_thread_reads_what_waited(memory: MemoryService, tenant) -> None:
    agent, _, mw = agent_with(memory, every=3)
    config = cfg(tenant.user, tenant.session)
    agent.invoke(say("I live in Lisbon."), config)
    agent.invoke(say("I use Neovim."), config)
    assert [r.status for r in mw.reports] == ["waiting", "waiting"] and contents(memory, tenant.user) == []
    mw._timers.clear()  # the process ends

    resumed, _, mw2 = agent_with(memory, every=3)  # the same thread, in a new process
    resumed.invoke(say("Thanks, that is all."), config)
    assert mw2.reports[0].status == "done"
    assert contents(memory, tenant.user) == ["Lives in Lisbon.", "Uses Neovim."]


def test_an_idle_thread_is_read_by_its_timer_and_a_new_turn_restarts_it(memory: MemoryService, tenant) -> None:
    agent, _, mw = agent_with(memory, every=5, idle_seconds=0.3)
    config = cfg(tenant.user, tenant.session)
    agent.invoke(say("I live in Lisbon."), config)
    assert mw.reports[-1].status == "waiting" and len(mw._timers) == 1
    wait_for(lambda: contents(memory, tenant.user) == ["Lives in Lisbon."])
    assert mw.flush(timeout=60) and mw.reports[-1].status == "done" and not mw._timers
    assert memory.for_user(tenant.user, session_id=tenant.session).extraction_budget() == 2


def test_idle_seconds_are_checked(memory: MemoryService) -> None:
    for bad in (0, -1, True, "5", float("inf")):
        with pytest.raises(ConfigurationError, match="idle_seconds"):
            ExtractionMiddleware(memory, idle_seconds=bad)
    with pytest.raises(InvalidInputError, match="idle_seconds"):
        memory.for_user("u").extract_waiting(idle_seconds=-1)
    with pytest.raises(InvalidInputError, match="keep_last_run"):
        memory.for_user("u", session_id="s").extract(["hi"], keep_last_run="yes")


# --- the handle ---------------------------------------------------------------------------------


def test_extract_waiting_reads_only_the_callers_own_conversations(memory: MemoryService, tenant) -> None:
    mine = memory.for_user(tenant.user, session_id=tenant.session)
    theirs = memory.for_user(tenant.other_user, session_id=tenant.session)  # the same session id
    assert mine.extract(["I live in Lisbon."], llm=None, min_new_turns=2).status == "waiting"
    assert theirs.extract(["I live in Porto."], llm=None, min_new_turns=2).status == "waiting"

    assert memory.for_user(tenant.user).extract_waiting(llm=None, idle_seconds=3600) == []  # not idle that long
    [report] = memory.for_user(tenant.user).extract_waiting(llm=None)
    assert report.status == "done" and [o.memory.content for o in report.added] == ["Lives in Lisbon."]
    assert contents(memory, tenant.user) == ["Lives in Lisbon."]
    # the other user's turn still waits, unread, for them alone
    assert contents(memory, tenant.other_user) == []
    assert theirs.stats().turns_waiting == 1
    [their_report] = memory.for_user(tenant.other_user).extract_waiting(llm=None)
    assert [o.memory.content for o in their_report.added] == ["Lives in Porto."]
    assert memory.for_user(tenant.user).extract_waiting(llm=None) == []  # nothing waits any more


def test_a_direct_extract_reads_the_turns_that_waited_first(memory: MemoryService, tenant) -> None:
    me = memory.for_user(tenant.user, session_id=tenant.session)
    assert me.extract(["I live in Lisbon."], llm=None, min_new_turns=3).status == "waiting"
    assert me.extract(["I live in Lisbon.", "I use Neovim."], llm=None, min_new_turns=3).waiting_turns == 2
    report = me.extract(["I live in Lisbon.", "I use Neovim.", "I am a nurse."], llm=None, min_new_turns=3)
    assert report.status == "done" and report.waiting_turns == 0
    assert [o.memory.content for o in report.added] == ["Lives in Lisbon.", "Uses Neovim.", "Is a nurse."]
    assert me.extraction_budget() == 2  # one run read all three


def test_a_run_reads_more_statements_than_one_model_part_holds(memory: MemoryService, tenant) -> None:
    """Thirty statements waited (a model's part holds 20 proposals): the rules' run keeps them all."""
    me = memory.for_user(tenant.user, session_id=tenant.session)
    said = [f"I have visited city number {i} of my list." for i in range(30)]
    for i in range(1, 30):
        assert me.extract(said[:i], llm=None, min_new_turns=31).status == "waiting"
    report = me.extract(said, llm=None)
    assert report.status == "done" and len(report.outcomes) == 30


# --- stats ----------------------------------------------------------------------------------------


def test_stats_say_what_memory_is_doing(memory: MemoryService, tenant) -> None:
    me = memory.for_user(tenant.user, session_id=tenant.session)
    tea = me.add("Drinks green tea every morning.", memory_type="habit")
    bike = me.add("Rides a bicycle to work.")
    never = me.add("Has a cat named Tom.")
    for _ in range(3):
        me.search("what does the user drink in the morning?", k=1)
    me.search("how does the user get to work?", k=1)
    stats = me.stats()
    assert stats.recalls == 4 and stats.last_used is not None
    assert [(r.memory_id, r.recalls) for r in stats.most_recalled] == [(tea.id, 3), (bike.id, 1)]
    assert stats.least_recalled[0].memory_id == never.id and stats.least_recalled[0].recalls == 0
    assert (stats.extraction_runs, stats.extractions_remaining, stats.turns_waiting) == (0, 3, 0)
    assert memory.for_user(tenant.user).stats().extraction_runs is None  # no session: no session figures

    # another user sees none of it
    other = memory.for_user(tenant.other_user, session_id=tenant.session).stats()
    assert other.recalls == 0 and not other.most_recalled and not other.least_recalled


def test_the_middleware_records_what_it_injected_and_the_tool_tells_the_model(memory: MemoryService,
                                                                                tenant) -> None:
    me = memory.for_user(tenant.user)
    tea = me.add("Drinks green tea every morning.", memory_type="habit")
    agent, _, mw = agent_with(memory, every=5)
    config = cfg(tenant.user, tenant.session)
    agent.invoke(say("What do I drink in the morning?"), config)
    agent.invoke(say("And what else?"), config)
    stats = memory.for_user(tenant.user, session_id=tenant.session).stats()
    assert len(stats.recently_injected) == 2
    assert all(tea.id in [m.memory_id for m in t.memories] for t in stats.recently_injected)
    text = describe_stats(stats)
    assert "Most recalled:" in text and str(tea.id) in text and "Drinks green tea every morning." in text
    assert "Memories given to you in the last 2 turns" in text and "1 run" not in text
    assert "messages waiting to be read" in text or "message waiting to be read" in text
    # what was injected stays what was injected: a memory archived since is still named
    me.delete(tea.id)
    stats = memory.for_user(tenant.user, session_id=tenant.session).stats()
    assert [(t.count, [m.memory_id for m in t.memories]) for t in stats.recently_injected] == [(1, [tea.id])] * 2
    # another user of the same session id sees none of it
    assert memory.for_user(tenant.other_user, session_id=tenant.session).stats().recently_injected == ()
    mw.close()


async def test_async_threads_end_and_start_the_same_way(amemory, memory: MemoryService, tenant) -> None:
    """ainvoke with an AsyncMemoryService: the idle timer runs on the event loop, and the user's
    next session reads what waited before its first answer."""
    import asyncio

    agent, _, mw = agent_with(amemory, idle_seconds=0.3)
    config = cfg(tenant.user, tenant.session)
    for said, _ in SIX:
        await agent.ainvoke(say(said), config)
    assert [r.status for r in mw.reports][:3] == ["done", "done", "waiting"]
    deadline = time.monotonic() + 60
    while len(mw.reports) < 7:  # the idle timer's task, on this loop
        assert time.monotonic() < deadline, "gave up waiting"
        await asyncio.sleep(0.05)
    assert await mw.aflush(timeout=60)
    assert contents(memory, tenant.user) == sorted(fact for _, fact in SIX)

    # a thread left waiting when its process ends, then another session of the user
    first, _, waiting = agent_with(amemory, every=2)
    await first.ainvoke(say("I work at Acme."), cfg(tenant.other_user, tenant.session))
    assert waiting.reports[-1].status == "waiting" and contents(memory, tenant.other_user) == []
    for handle, _ in waiting._timers.values():
        handle.cancel()
    later, model, _ = agent_with(amemory)
    await later.ainvoke(say("Where do I work?"), cfg(tenant.other_user, tenant.other_session))
    assert contents(memory, tenant.other_user) == ["Works at Acme."]
    assert "Works at Acme." in model.system_prompts[0]  # known before the new session's first answer


def test_waiting_messages_are_the_users_data_exported_and_forgotten(memory: MemoryService, tenant) -> None:
    me = memory.for_user(tenant.user, session_id=tenant.session)
    me.extract(["I live in Lisbon."], llm=None, min_new_turns=2)
    me.record_injected([str(me.add("Has a cat named Tom.").id)])
    [conversation] = [r for r in memory.export_data(user_id=tenant.user)["resources"] if r["kind"] == "conversation"]
    assert [t["text"] for t in conversation["metadata"]["waiting"]] == ["I live in Lisbon."]
    assert len(conversation["metadata"]["injected"]) == 1
    memory.forget_user(user_id=tenant.user)
    assert memory.for_user(tenant.user).extract_waiting(llm=None) == []
    after = memory.for_user(tenant.user, session_id=tenant.session).stats()
    assert (after.turns_waiting, after.recently_injected, after.total) == (0, (), 0)
