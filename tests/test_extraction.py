"""Extraction and consolidation against the real database, driven by scripted structured outputs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_memory import Decision, DecisionMethod, MemoryService, Status
from agent_memory.testing import ScriptedChatModel


def memories(*items: tuple[str, str, str] | tuple[str, str, str, float]) -> dict:
    out = []
    for item in items:
        content, memory_type, scope, *rest = item
        out.append({"content": content, "memory_type": memory_type, "scope": scope,
                    "confidence": rest[0] if rest else 0.95})
    return {"memories": out}


def decisions(*items: tuple) -> dict:
    return {"decisions": [dict(zip(("proposal", "decision", "target", "content", "reason"), d)) for d in items]}


def model(extracted: list[dict], decided: list[dict] | None = None) -> ScriptedChatModel:
    structured = {"ExtractedMemories": extracted}
    if decided is not None:
        structured["ConsolidationDecisions"] = decided
    structured["UserProfileUpdate"] = [{"frequently_used_tools": []}]
    structured["ProjectProfileUpdate"] = [{}]
    return ScriptedChatModel(structured=structured)


def test_vim_to_vscode_over_three_sessions(memory: MemoryService, tenant) -> None:
    user = tenant.user
    llm = model(
        [memories(("Uses Vim as their code editor.", "fact", "user")),
         memories(("Uses Vim as their editor for Python.", "fact", "user")),
         memories(("Switched from Vim to VS Code.", "fact", "user"))],
        [decisions((1, "NONE", "M1", None, "same editor")),
         decisions((1, "SUPERSEDE", "M1", None, "changed editor"))],
    )
    first = memory.for_user(user, session_id="s1").extract(["I use Vim for everything."], llm=llm)
    assert first.status == "done", first.summary()
    [added] = first.added
    assert added.decided_by is DecisionMethod.SIMILARITY  # nothing similar: no model call needed to add
    second = memory.for_user(user, session_id="s2").extract(["Still on Vim, mostly Python."], llm=llm)
    assert [o.decision for o in second.outcomes] == [Decision.NONE]
    assert second.outcomes[0].decided_by is DecisionMethod.LLM
    before_switch = datetime.now(UTC)
    third = memory.for_user(user, session_id="s3").extract(["I switched to VS Code last week."], llm=llm)
    [sup] = third.superseded
    assert sup.replaced.id == added.memory.id and sup.replaced.status is Status.SUPERSEDED
    active = memory.for_user(user).list()
    assert [m.content for m in active] == ["Switched from Vim to VS Code."]
    history = memory.for_user(user).history(sup.memory.id)
    assert [v.content for v in history] == ["Uses Vim as their code editor.", "Switched from Vim to VS Code."]
    then = memory.for_user(user).search("which editor?", as_of=before_switch)
    assert [r.content for r in then] == ["Uses Vim as their code editor."]
    now = memory.for_user(user).search("which editor?")
    assert [r.content for r in now] == ["Switched from Vim to VS Code."]


def _decision_rows(dsn: str, user: str) -> list[dict]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        return conn.execute("SELECT decision, decided_by, reason FROM memory_decisions WHERE user_id = %s ORDER BY id",
                            (user,)).fetchall()


def test_each_decision_by_the_model(memory: MemoryService, tenant, dsn: str) -> None:
    user, ids = tenant.user, {"user_id": tenant.user}
    memory.for_user(**ids).add("Prefers concise answers.", memory_type="preference")
    memory.for_user(**ids).add("Lives in Berlin.")
    memory.for_user(**ids).add("Works as a data engineer.")
    llm = model(
        [memories(("Prefers concise answers with Python examples.", "preference", "user"),
                  ("Lives in Munich now.", "fact", "user"),
                  ("Works as a data engineer at Acme.", "fact", "user"),
                  ("Plays the cello.", "fact", "user"))],
        [decisions((1, "UPDATE", "M1", "Prefers concise answers with Python code examples.", "more detail"),
                   (2, "SUPERSEDE", "M1", None, "moved"),
                   (3, "NONE", "M1", None, "known"),
                   (4, "ADD", None, None, "new"))],
    )
    report = memory.for_user(session_id="d1", **ids).extract(["..."], llm=llm)
    assert [o.decision for o in report.outcomes] == [Decision.UPDATE, Decision.SUPERSEDE, Decision.NONE, Decision.ADD]
    assert {o.decided_by for o in report.outcomes[:3]} == {DecisionMethod.LLM}
    updated = report.updated[0]
    assert updated.memory.id == updated.replaced.id and updated.memory.version == 2
    assert updated.memory.content == "Prefers concise answers with Python code examples."
    history = memory.for_user(**ids).history(updated.memory.id)
    assert [(v.content, v.current) for v in history] == [
        ("Prefers concise answers.", False), ("Prefers concise answers with Python code examples.", True)]
    # the first wording was stated directly (add); the second is the model's update, with its reason
    assert (history[0].change, history[0].changed_by) == ("add", ids["user_id"])
    assert history[1].decided_by is DecisionMethod.LLM and history[1].change == "update"
    assert history[1].reason and history[1].changed_by == ids["user_id"]
    moved = report.superseded[0]
    assert moved.replaced.content == "Lives in Berlin." and moved.replaced.superseded_by == moved.memory.id
    assert moved.replaced.valid_to == moved.memory.valid_from
    assert report.unchanged[0].memory.content == "Works as a data engineer."
    active = {m.content for m in memory.for_user(**ids).list()}
    assert active == {"Prefers concise answers with Python code examples.", "Lives in Munich now.",
                      "Works as a data engineer.", "Plays the cello."}
    rows = _decision_rows(dsn, user)
    assert [(r["decision"], r["decided_by"]) for r in rows] == [
        ("update", "llm"), ("supersede", "llm"), ("none", "llm"), ("add", "llm")]
    # what is injected / searched by default never shows the superseded item
    assert "Berlin" not in " ".join(r.content for r in memory.for_user(**ids).search("where does the user live"))


def test_decisions_without_a_model_use_thresholds_and_say_so(memory: MemoryService, tenant, dsn: str) -> None:
    ids = {"user_id": tenant.user}
    first = memory.for_user(session_id="t1", **ids).extract(["I use Vim.", "I prefer dark mode."], llm=None)
    assert [o.decision for o in first.outcomes] == [Decision.ADD, Decision.ADD]
    again = memory.for_user(session_id="t2", **ids).extract(["I prefer dark mode."], llm=None)
    assert [o.decision for o in again.outcomes] == [Decision.NONE]
    switched = memory.for_user(session_id="t3", **ids).extract(["I switched from Vim to VS Code."], llm=None)
    [outcome] = switched.outcomes
    assert outcome.decision is Decision.SUPERSEDE and outcome.replaced.content == "Uses Vim."
    assert all(o.decided_by is DecisionMethod.SIMILARITY for r in (first, again, switched) for o in r.outcomes)
    assert {r["decided_by"] for r in _decision_rows(dsn, tenant.user)} == {"similarity"}
    assert outcome.memory.metadata["consolidation"]["decided_by"] == "similarity"


def test_the_gate_rejects_a_secret_inside_a_good_proposal(memory: MemoryService, tenant, dsn: str) -> None:
    ids = {"user_id": tenant.user}
    llm = model([memories(("Deploys with the key sk-proj-9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e.", "fact", "user"),
                          ("Deploys the webshop every Friday.", "habit", "user"),
                          ("Maybe likes tea.", "preference", "user", 0.4))])
    report = memory.for_user(session_id="g1", **ids).extract(["my key is ..."], llm=llm)
    assert [o.rejection.reason.value if o.rejection else o.decision.value for o in report.outcomes] == [
        "sensitive", "add", "low_confidence"]
    stored = [m.content for m in memory.for_user(**ids).list(status=None)]
    assert stored == ["Deploys the webshop every Friday."]
    rows = _decision_rows(dsn, tenant.user)
    assert all("sk-proj" not in (r["reason"] or "") for r in rows)
    import psycopg

    with psycopg.connect(dsn) as conn:
        kept = conn.execute("SELECT proposal FROM memory_decisions WHERE user_id = %s AND decision = 'rejected'",
                            (tenant.user,)).fetchall()
    assert all("sk-proj" not in p for (p,) in kept)


def test_rate_limit_per_session_across_sessions_and_the_window(memory: MemoryService, tenant, dsn: str) -> None:
    import psycopg

    ids = {"user_id": tenant.user}
    turns: list[str] = []
    for n in range(3):
        turns.append(f"I prefer tool number {n} for task {n}.")
        assert memory.for_user(session_id="r1", **ids).extract(turns, llm=None).status == "done"
    turns.append("I prefer green tea in the afternoon.")
    limited = memory.for_user(session_id="r1", **ids).extract(turns, llm=None)
    assert limited.status == "rate_limited" and limited.runs_left == 0 and "MEMORY_MAX_EXTRACTIONS" in limited.error
    assert memory.for_user(session_id="r1", **ids).extraction_budget() == 0
    # another session of the same user has its own budget
    assert memory.for_user(session_id="r2", **ids).extract(["I prefer black coffee in the morning."], llm=None).status == "done"
    assert not [m for m in memory.for_user(**ids).list() if "green tea" in m.content]
    with psycopg.connect(dsn) as conn:  # a day passes for session r1
        conn.execute("UPDATE memory_extraction_runs SET created_at = now() - interval '25 hours'"
                     " WHERE user_id = %s AND session_id = 'r1'", (tenant.user,))
    later = memory.for_user(session_id="r1", **ids).extract(turns, llm=None)
    assert later.status == "done"
    assert [o.proposal.content for o in later.outcomes] == ["Prefers green tea in the afternoon."]


def test_read_once_and_a_failed_model_keeps_the_messages(memory: MemoryService, tenant) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    ids = {"user_id": tenant.user}
    conversation = [HumanMessage("I prefer tabs over spaces.", id="h1"), AIMessage("Noted.", id="a1")]
    assert memory.for_user(session_id="c1", **ids).extract(conversation, llm=None).status == "done"
    assert memory.for_user(session_id="c1", **ids).extract(conversation, llm=None).status == "nothing_new"

    def boom(messages):
        raise RuntimeError("provider down")

    conversation += [HumanMessage("I am a backend developer.", id="h2")]
    failed = memory.for_user(session_id="c1", **ids).extract(conversation, llm=ScriptedChatModel(
        structured={"ExtractedMemories": boom}))
    assert failed.status == "failed" and "provider down" in failed.error
    retried = memory.for_user(session_id="c1", **ids).extract(conversation, llm=None)
    assert [o.proposal.content for o in retried.outcomes] == ["Is a backend developer."]


def test_consolidation_falls_back_when_the_model_fails(memory: MemoryService, tenant) -> None:
    ids = {"user_id": tenant.user}
    memory.for_user(**ids).add("Prefers dark mode.", memory_type="preference")

    def boom(messages):
        raise RuntimeError("timeout")

    llm = ScriptedChatModel(structured={
        "ExtractedMemories": [memories(("Prefers dark mode.", "preference", "user"))],
        "ConsolidationDecisions": boom, "UserProfileUpdate": [{}]})
    [outcome] = memory.for_user(session_id="f1", **ids).extract(["..."], llm=llm).outcomes
    assert outcome.decision is Decision.NONE and outcome.decided_by is DecisionMethod.SIMILARITY
    assert outcome.reason.startswith("the model failed")


def test_a_bad_target_from_the_model_falls_back(memory: MemoryService, tenant) -> None:
    ids = {"user_id": tenant.user}
    memory.for_user(**ids).add("Prefers dark mode.", memory_type="preference")
    memory.for_user(**ids).add("Prefers dark terminals.", memory_type="preference")
    llm = model([memories(("Prefers dark mode.", "preference", "user"))],
                [decisions((1, "SUPERSEDE", "M9", None, "no such target"), (7, "ADD", None, None, "no such proposal"))])
    [outcome] = memory.for_user(session_id="b1", **ids).extract(["..."], llm=llm).outcomes
    assert outcome.decided_by is DecisionMethod.SIMILARITY and outcome.decision is Decision.NONE
    assert "no usable decision" in outcome.reason


def test_consolidation_never_reads_another_users_memories(memory: MemoryService, tenant) -> None:
    memory.for_user(tenant.other_user).add("Prefers dark mode.", memory_type="preference")
    report = memory.for_user(tenant.user, session_id="i1").extract(["I prefer dark mode."], llm=None)
    [outcome] = report.outcomes
    assert outcome.decision is Decision.ADD and outcome.memory.user_id == tenant.user
    theirs = memory.for_user(tenant.other_user).list()
    assert [m.content for m in theirs] == ["Prefers dark mode."] and theirs[0].version == 1


def test_project_memories_and_no_project(memory: MemoryService, tenant) -> None:
    report = memory.for_user(tenant.user, session_id="p1", project_id=tenant.project).extract(["We decided to use PostgreSQL because it has pgvector."], llm=None)
    [outcome] = report.outcomes
    assert outcome.memory.scope.value == "project" and outcome.memory.project_id == tenant.project
    alone = memory.for_user(tenant.user, session_id="p2").extract(["We decided to use Redis because it is fast."], llm=None)
    [outcome] = alone.outcomes
    assert outcome.memory.scope.value == "user" and "no project" in outcome.reason


async def test_async_extraction(amemory, tenant) -> None:
    report = await amemory.for_user(tenant.user, session_id="a1").extract(["I prefer short commit messages."], llm=None)
    assert report.status == "done" and report.added
    profiles = await amemory.for_user(tenant.user).profiles()
    assert "short commit messages" in profiles.user_text


@pytest.mark.parametrize("messages, field", [
    (42, "messages"), ([{"role": "user"}], "messages"), ([object()], "messages")])
def test_bad_input_is_refused_before_anything_happens(memory: MemoryService, tenant, messages, field) -> None:
    from agent_memory import InvalidInputError

    with pytest.raises(InvalidInputError) as err:
        memory.for_user(tenant.user, session_id="x1").extract(messages, llm=None)
    assert err.value.field == field
    with pytest.raises(InvalidInputError):
        memory.for_user(tenant.user, session_id=None).extract(["hi"], llm=None)
