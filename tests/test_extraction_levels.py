"""One fact, one memory, at the level it belongs to (issue 31).

- Extraction does not propose again what the agent saved with ``memory_save`` in the same turn,
  at any level (the issue's scenario: a project constraint saved by the model came back as a
  user fact "For the team: ...", shown in the user's profile as background).
- What is said of the team, the project or the organisation is kept at that level when the run
  has it and the caller may write it; else at the nearest such level; else as the user's own
  memory, flagged ``said_of`` (metadata, the run report), and left out of the user profile.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agent_memory.extraction import levels, saved
from agent_memory.extraction.transcript import turns_from_messages
from agent_memory.middleware import ExtractionMiddleware, MemoryMiddleware
from agent_memory.models import Identity, Proposal, Scope
from agent_memory.testing import ScriptedChatModel, tool_call

CONSTRAINT = "Remember for the team: all endpoints must return JSON errors with a code field."
SAVED = "All API endpoints must return errors as JSON with a code field"


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _saves_then_answers(messages: list[Any]) -> AIMessage:
    """A model that saves the team's rule at the project level with memory_save, then answers."""
    if isinstance(messages[-1], ToolMessage):
        return AIMessage("Noted for the project.")
    if "endpoints" in messages[-1].text:
        return AIMessage("", tool_calls=[tool_call("memory_save", content=SAVED, memory_type="constraint",
                                                   scope="project")])
    return AIMessage("ok")


def test_the_issues_scenario_a_fact_saved_by_the_tool_is_not_extracted_again(memory, tenant) -> None:
    """The model saves a project constraint with memory_save; the offline rules read the same
    turn afterwards and must not add it again, neither as a project memory nor as a user fact."""
    extraction = ExtractionMiddleware(memory, llm=None)
    agent = create_agent(ScriptedChatModel(script=_saves_then_answers), [],
                         middleware=[MemoryMiddleware(memory), extraction], checkpointer=InMemorySaver())
    config = {"configurable": {"user_id": tenant.user, "project_id": tenant.project, "thread_id": tenant.session}}
    agent.invoke({"messages": [("user", CONSTRAINT + " I prefer short answers.")]}, config)

    handle = memory.for_user(tenant.user, project_id=tenant.project)
    assert sorted((m.scope, m.content) for m in handle.list()) == [
        (Scope.PROJECT, SAVED), (Scope.USER, "Prefers short answers.")]  # one fact, one memory
    [report] = extraction.reports
    [skipped] = report.unchanged
    assert skipped.proposal.content == "All endpoints must return JSON errors with a code field."
    assert skipped.memory is None and skipped.reason.startswith("saved with memory_save in the same turn")
    assert [o.memory.content for o in report.added] == ["Prefers short answers."]  # the unsaved statement is learnt
    profile = handle.profiles().user
    assert "endpoints" not in str(profile.fields).lower() and "for the team" not in str(profile.fields).lower()


def test_a_save_the_tool_refused_does_not_count(memory, tenant) -> None:
    turn = HumanMessage("We deploy on Fridays.", id="h1")
    call = tool_call("memory_save", content="The team deploys on Fridays", scope="project")
    messages = [turn, AIMessage("", tool_calls=[call], id="a1"),
                ToolMessage("Not allowed: ...", tool_call_id=call["id"], status="error", id="t1"), AIMessage("ok", id="a2")]
    handle = memory.for_user(tenant.user, project_id=tenant.project, session_id=fresh("s"))
    report = handle.extract(messages, llm=None)
    [added] = report.added
    assert (added.memory.scope, added.memory.content) == (Scope.PROJECT, "The team deploys on Fridays.")


def test_a_save_in_another_turn_is_not_this_turns(memory, tenant) -> None:
    """Only the saves answering the turn a statement was said in are compared with it."""
    call = tool_call("memory_save", content="The team deploys on Fridays", scope="project")
    messages = [HumanMessage("Hello.", id="h1"), AIMessage("", tool_calls=[call], id="a1"),
                ToolMessage("Saved memory ...", tool_call_id=call["id"], id="t1"),
                HumanMessage("We deploy on Fridays.", id="h2"), AIMessage("ok", id="a2")]
    handle = memory.for_user(tenant.user, project_id=tenant.project, session_id=fresh("s"))
    report = handle.extract(messages, llm=None)
    # not skipped as "saved in the same turn"; consolidation finds nothing stored (the call was scripted)
    assert [o.memory.content for o in report.added] == ["The team deploys on Fridays."]


def test_statements_about_each_group_go_to_its_level(memory) -> None:
    user, project, team, org = fresh("u"), fresh("p"), fresh("t"), fresh("o")
    memory.create_project(project, user_id=user)
    memory.create_team(team, user_id=user)
    memory.create_org(org, user_id=user)
    handle = memory.for_user(user, project_id=project, team_id=team, org_id=org, session_id=fresh("s"))
    report = handle.extract(["Our team always squash-merges pull requests. We deploy on Fridays. "
                             "Our org requires SSO for every tool. For the team: endpoints return JSON errors. "
                             "My wife Sara and I have two kids."], llm=None)
    placed = {(o.memory.scope, o.memory.content) for o in report.added}
    assert placed == {
        (Scope.TEAM, "The team always squash-merges pull requests."),
        (Scope.PROJECT, "The team deploys on Fridays."),
        (Scope.ORG, "The organisation requires SSO for every tool."),
        (Scope.TEAM, "Endpoints return JSON errors."),
        (Scope.USER, "The user and their wife Sara have two kids."),
    }
    assert report.kept_as_user == [] and all(o.said_of is None for o in report.outcomes)


def test_without_a_team_a_teams_statement_goes_to_the_project(memory, tenant) -> None:
    handle = memory.for_user(tenant.user, project_id=tenant.project, session_id=fresh("s"))
    report = handle.extract(["Our team uses Go. Our org requires SSO."], llm=None)
    assert {(o.memory.scope, o.said_of) for o in report.added} == {(Scope.PROJECT, Scope.TEAM),
                                                                   (Scope.PROJECT, Scope.ORG)}
    assert {o.memory.metadata["said_of"] for o in report.added} == {"team", "org"}
    assert all("kept at the project level" in o.reason and "this run has no" in o.reason for o in report.added)
    assert report.kept_as_user == []
    # each profile from its own level: Go is the project's stack, not the user's tool
    profiles = memory.for_user(tenant.user, project_id=tenant.project).profiles()
    assert "Go" in profiles.project.fields["tech_stack"]
    assert "Go" not in str(profiles.user.fields) and "SSO" not in str(profiles.user.fields)


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_without_any_group_it_is_the_users_flagged_and_not_their_background(memory, amemory, use_async) -> None:
    user = fresh("u")
    said = ["For the team: all endpoints must return JSON errors. We use FastAPI. I live in Lisbon."]
    if use_async:
        report = await amemory.for_user(user, session_id=fresh("s")).extract(said, llm=None)
    else:
        report = memory.for_user(user, session_id=fresh("s")).extract(said, llm=None)
    flagged = report.kept_as_user
    assert {(o.memory.content, o.said_of) for o in flagged} == {
        ("All endpoints must return JSON errors.", Scope.TEAM), ("The team uses FastAPI.", Scope.PROJECT)}
    assert all(o.memory.scope is Scope.USER and o.memory.metadata["said_of"] == o.said_of.value for o in flagged)
    assert all("kept as a user memory, flagged" in o.reason for o in flagged)
    fields = memory.for_user(user).profiles().user.fields
    assert fields["background"] == "Lives in Lisbon."  # the flagged ones are not the user's background
    assert "FastAPI" not in str(fields)


# --- pure: which saves count, and where a proposal is placed --------------------------------------


def test_saves_in_keeps_the_fresh_turns_successful_saves_with_their_turn() -> None:
    ok, refused, old = (tool_call("memory_save", content=c, scope="project") for c in ("kept", "refused", "old"))
    refused["id"], old["id"] = "call_refused", "call_old"
    messages = [HumanMessage("first", id="h1"), AIMessage("", tool_calls=[old], id="a0"),
                HumanMessage("second", id="h2"), AIMessage("", tool_calls=[ok, refused], id="a1"),
                ToolMessage("Saved", tool_call_id=ok["id"], id="t1"),
                ToolMessage("Not saved", tool_call_id="call_refused", status="error", id="t2"),
                AIMessage("", tool_calls=[tool_call("memory_search", query="x")], id="a2")]
    fresh_turns = turns_from_messages(messages)[1:]  # "first" was read by an earlier run
    assert saved.saves_in(messages, fresh_turns) == [saved.Save("h2", "kept", "project")]
    assert saved.saves_in("just a string", fresh_turns) == []


def test_same_words_ignores_who_and_counts_what() -> None:
    assert saved.same_words("The team uses Poetry.", "Project uses Poetry for packaging") == 1.0
    assert saved.same_words("Is allergic to peanuts.", "Is allergic to shellfish") == 0.5
    assert saved.same_words("", "anything") == 0.0


def _drive(op: Any) -> Any:
    """Run an operation that must not need the database (it yields nothing)."""
    try:
        next(op)
    except StopIteration as done:
        return done.value
    raise AssertionError("the operation asked for I/O")


@pytest.mark.parametrize("scope", [Scope.PROJECT, Scope.TEAM, Scope.ORG])
def test_a_group_statement_in_a_run_without_groups_is_placed_as_the_users_flagged(scope) -> None:
    from agent_memory.config import MemoryConfig

    proposal = Proposal("The team uses Go.", scope=scope)
    placed = _drive(levels.place(MemoryConfig(), Identity("u1"), proposal))
    assert placed.proposal.scope is Scope.USER and placed.said_of is scope and placed.flagged
    assert f"this run has no {scope.value}" in placed.note
    user = Proposal("Prefers tea.")
    assert _drive(levels.place(MemoryConfig(), Identity("u1"), user)) == levels.Placement(user)

