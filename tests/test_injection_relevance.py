"""Only relevant memory in the prompt: the issue's scenarios with the real database and embedding model.

"Explain quantum entanglement simply." gets no "Prefers Python for scripting tasks"; a team's
unrelated memories stay out of a "which Python?" turn; profiles are always there, within their
token budget; with ``inject_when="model"`` the model decides.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from agent_memory import AsyncMemoryService, MemoryConfig, MemoryService
from agent_memory.middleware import MemoryBackend, MemoryMiddleware
from agent_memory.middleware.context import ContextBuilder
from agent_memory.models import Identity
from agent_memory.testing import ScriptedChatModel

PYTHON = "Prefers Python for scripting tasks."


def cfg(user: str, thread: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"configurable": {"user_id": user, "thread_id": thread or uuid.uuid4().hex, **extra}}


def ask(*turns: str) -> dict[str, Any]:
    messages: list[Any] = []
    for text in turns[:-1]:
        messages += [HumanMessage(text), AIMessage("Sure.")]
    return {"messages": [*messages, HumanMessage(turns[-1])]}


@pytest.fixture
def coder(memory: MemoryService, tenant) -> str:
    """A user with a scripting preference, a dog and a city; and a team with three memories."""
    me = memory.for_user(tenant.user)
    for text, kind in ((PYTHON, "preference"), ("Has a dog named Rex.", "fact"), ("Lives in Lisbon.", "fact")):
        me.add(text, memory_type=kind)
    team = f"team-{tenant.user}"
    memory.create_team(team, user_id=tenant.user)
    mine = memory.for_user(tenant.user, team_id=team)
    for text in ("The team holds standup at 10:00 every weekday.", "The team tracks work in Linear.",
                 "The team standardised on Python 3.12 for all services."):
        mine.add(text, scope="team", memory_type="fact")
    return tenant.user


def memories(prompt: str) -> str:
    """The injected memory block of a system prompt (not the profiles, which are always there)."""
    start = prompt.find("<long_term_memory>")
    return "" if start < 0 else prompt[start:prompt.index("</long_term_memory>")]


def _agent(memory: MemoryService | AsyncMemoryService, model: ScriptedChatModel, **options: Any) -> Any:
    return create_agent(model, [], middleware=[MemoryMiddleware(memory, tools=False, **options)],
                        checkpointer=InMemorySaver())


def test_a_generic_turn_gets_no_memory_and_a_personal_one_gets_the_relevant_ones(memory, coder) -> None:
    model = ScriptedChatModel(script=["ok"])
    agent = _agent(memory, model)
    agent.invoke(ask("Explain quantum entanglement simply."), cfg(coder))
    assert memories(model.system_prompts[-1]) == ""
    agent.invoke(ask("How do I reverse a list in Python?"), cfg(coder))
    assert memories(model.system_prompts[-1]) == ""

    agent.invoke(ask("Which Python should I use for my scripts?"), cfg(coder))
    prompt = memories(model.system_prompts[-1])
    assert PYTHON in prompt and "Python 3.12" in prompt
    for unrelated in ("standup", "Linear", "Rex", "Lisbon"):
        assert unrelated not in prompt


def test_unrelated_team_memories_stay_out_of_a_which_python_turn(memory, coder) -> None:
    model = ScriptedChatModel(script=["ok"])
    agent = _agent(memory, model)
    agent.invoke(ask("which Python?"), cfg(coder))  # alone it is a question anyone could ask
    assert memories(model.system_prompts[-1]) == ""

    agent.invoke(ask("I'm setting up our new billing service.", "which Python?"), cfg(coder))  # its follow-up
    prompt = memories(model.system_prompts[-1])
    assert "Python 3.12" in prompt
    assert "standup" not in prompt and "Linear" not in prompt and "Rex" not in prompt


def test_always_keeps_the_old_behaviour_but_the_floor_still_applies(memory, coder) -> None:
    model = ScriptedChatModel(script=["ok"])
    _agent(memory, model, inject_when="always", min_relevance=0.0).invoke(
        ask("Explain quantum entanglement simply."), cfg(coder))
    assert "<memory " in memories(model.system_prompts[-1])  # every turn searched, nothing held back: the complaint

    _agent(memory, model, inject_when="always").invoke(ask("Explain quantum entanglement simply."), cfg(coder))
    assert memories(model.system_prompts[-1]) == ""  # the floor alone keeps these out


def test_the_decision_is_recorded_with_its_reason(memory, coder, caplog) -> None:
    builder = ContextBuilder(MemoryBackend(memory))
    who = Identity(user_id=coder)
    with caplog.at_level(logging.DEBUG, logger="agent_memory.middleware.context"):
        generic = builder.build(who, ask("What is a monad?")["messages"])
    assert "memory not needed for this turn (generic)" in caplog.text
    personal = builder.build(who, ask("Remind me what my dog is called.")["messages"])
    assert generic is not None and generic.decision is not None and not generic.decision.needed
    assert generic.memory_ids == () and memories(generic.text) == "" and "<user_profile>" in generic.text
    assert personal is not None and personal.decision is not None and personal.decision.reason == "past event"
    assert "Has a dog named Rex." in memories(personal.text) and "Lisbon" not in memories(personal.text)


def test_another_users_matching_memory_is_never_injected(memory, coder, tenant) -> None:
    memory.for_user(tenant.other_user).add("Prefers Perl for scripting tasks.", memory_type="preference")
    model = ScriptedChatModel(script=["ok"])
    _agent(memory, model).invoke(ask("Which scripting language do I prefer?"), cfg(coder))
    assert PYTHON in memories(model.system_prompts[-1]) and "Perl" not in model.system_prompts[-1]


def test_profiles_come_on_every_turn_with_only_their_filled_fields_within_their_budget(memory, tenant, dsn) -> None:
    me = memory.for_user(tenant.user)
    me.update_profile({"background": "Backend engineer at a logistics startup. " * 8,
                       "programming_languages": ["Python", "Rust"]})
    model = ScriptedChatModel(script=["ok"])
    _agent(memory, model).invoke(ask("Explain quantum entanglement simply."), cfg(tenant.user))
    prompt = model.system_prompts[-1]
    assert "<user_profile>" in prompt and "Programming languages: Python; Rust" in prompt
    assert "Communication" not in prompt and "Expertise" not in prompt  # empty fields are not shown

    whole = prompt[prompt.index("<user_profile>"):prompt.index("</user_profile>") + len("</user_profile>")]
    with MemoryService(dsn, config=MemoryConfig.defaults(profile_budget_tokens=100),
                       embeddings=memory.embeddings) as service:
        _agent(service, model).invoke(ask("Explain quantum entanglement simply."), cfg(tenant.user))
        prompt = model.system_prompts[-1]
        block = prompt[prompt.index("<user_profile>"):prompt.index("</user_profile>") + len("</user_profile>")]
        assert len(block) <= 100 * 4 < len(whole) and "Background: Backend engineer" in block

    with MemoryService(dsn, config=MemoryConfig.defaults(profile_budget_tokens=0),
                       embeddings=memory.embeddings) as service:
        _agent(service, model).invoke(ask("Explain quantum entanglement simply."), cfg(tenant.user))
        assert "<user_profile>" not in model.system_prompts[-1]


def test_the_model_decides_when_configured(memory, coder, dsn) -> None:
    def verdict(needed: bool) -> ScriptedChatModel:
        return ScriptedChatModel(script=["ok"], structured={"MemoryNeeded": [{"needed": needed}]})

    model = ScriptedChatModel(script=["ok"])
    config = MemoryConfig.defaults(inject_when="model")
    with MemoryService(dsn, config=config, embeddings=memory.embeddings, llm=verdict(False)) as service:
        _agent(service, model).invoke(ask("Which Python should I use for my scripts?"), cfg(coder))
        assert memories(model.system_prompts[-1]) == ""  # the model said no
        assert service.llm.requests  # it was asked
    with MemoryService(dsn, config=config, embeddings=memory.embeddings, llm=verdict(True)) as service:
        _agent(service, model).invoke(ask("scripting language, quickly"), cfg(coder))  # the rules would say no
        assert PYTHON in memories(model.system_prompts[-1])
    with MemoryService(dsn, config=config, embeddings=memory.embeddings) as service:  # no model: the rules
        _agent(service, model).invoke(ask("Which Python should I use for my scripts?"), cfg(coder))
        assert PYTHON in memories(model.system_prompts[-1])


async def test_the_async_path_decides_the_same(amemory, coder) -> None:
    model = ScriptedChatModel(script=["ok"])
    agent = _agent(amemory, model)
    await agent.ainvoke(ask("Explain quantum entanglement simply."), cfg(coder))
    assert memories(model.system_prompts[-1]) == ""
    await agent.ainvoke(ask("Which Python should I use for my scripts?"), cfg(coder))
    prompt = memories(model.system_prompts[-1])
    assert PYTHON in prompt and "standup" not in prompt


# --- turns that name what the user's memories know (issue 31, the blind split's lesson) ------------


@pytest.fixture
def oncall(memory: MemoryService, tenant) -> str:
    """An SRE with a daughter: memories a request or a name can point at without "my"."""
    me = memory.for_user(tenant.user)
    for text, kind in (("Prefers Grafana dashboards over raw PromQL.", "preference"),
                       ("Has a three-year-old daughter named Ida.", "fact"),
                       ("Is a site reliability engineer on the payments team.", "fact"),
                       ("Lives in Lisbon.", "fact")):
        me.add(text, memory_type=kind)
    return tenant.user


def test_a_request_or_a_name_the_users_memories_know_gets_them(memory, oncall) -> None:
    builder = ContextBuilder(MemoryBackend(memory))
    who = Identity(user_id=oncall)
    dashboard = builder.build(who, ask("Build me a dashboard query for error rates.")["messages"])
    assert dashboard is not None and dashboard.decision is not None and dashboard.decision.needed
    assert "dashboard" in dashboard.decision.reason and "Grafana" in memories(dashboard.text)
    role = builder.build(who, ask("Is the reliability review ready yet?")["messages"])
    assert role is not None and role.decision is not None and "refers to the reliability" in role.decision.reason
    assert "site reliability engineer" in memories(role.text)
    party = builder.build(who, ask("Plan Ida's birthday party at home.")["messages"])
    assert party is not None and party.decision is not None and "Ida" in party.decision.reason
    assert "named Ida" in memories(party.text)
    # the same kinds of turn, about nothing the user has: no memory, and a knowledge question stays generic
    for turn in ("Write me a summary of the French revolution in bullet points.", "What is Grafana used for?",
                 "Write a short poem about dashboards."):
        built = builder.build(who, ask(turn)["messages"])
        assert built is not None and built.decision is not None and not built.decision.needed, turn
        assert built.memory_ids == () and memories(built.text) == ""


def test_a_follow_up_of_a_turn_memory_knows_gets_memory(memory, oncall) -> None:
    builder = ContextBuilder(MemoryBackend(memory))
    who = Identity(user_id=oncall)
    follow = builder.build(who, ask("Plan Ida's birthday party at home.", "and the cake?")["messages"])
    assert follow is not None and follow.decision is not None and follow.decision.needed
    assert follow.decision.reason.startswith("follow-up of a turn that names Ida")
    assert "named Ida" in memories(follow.text)
    after_generic = builder.build(who, ask("What is a birthday cake?", "and the cake?")["messages"])
    assert after_generic is not None and after_generic.memory_ids == ()


def test_looking_a_generic_turn_up_counts_no_recall(memory, oncall, tenant) -> None:
    """The look that checks a request against the memories is not a recall: only what is shown is."""
    me = memory.for_user(oncall, session_id=tenant.session)
    before = me.stats().recalls
    builder = ContextBuilder(MemoryBackend(memory))
    built = builder.build(Identity(user_id=oncall), ask("Write me a summary of the French revolution.")["messages"])
    assert built is not None and built.memory_ids == ()
    assert me.stats().recalls == before
    shown = builder.build(Identity(user_id=oncall), ask("Build me a dashboard query for error rates.")["messages"])
    assert shown is not None and me.stats().recalls == before + len(shown.memory_ids) > before


def test_another_users_names_and_systems_never_ground_a_turn(memory, oncall, tenant) -> None:
    """The look is the caller's own: a stranger's "Ida" or dashboards neither decide nor show."""
    builder = ContextBuilder(MemoryBackend(memory))
    stranger = Identity(user_id=tenant.other_user)
    for turn in ("Build me a dashboard query for error rates.", "Plan Ida's birthday party at home."):
        built = builder.build(stranger, ask(turn)["messages"])
        assert built is not None and built.decision is not None and not built.decision.needed
        assert built.memory_ids == () and "Ida" not in built.text and "Grafana" not in built.text


def test_a_turn_that_needs_memory_gets_its_best_hit_even_under_the_floor(memory, oncall) -> None:
    model = ScriptedChatModel(script=["ok"])
    agent = _agent(memory, model, min_relevance=0.95)  # nothing clears a floor this high
    agent.invoke(ask("What's my role again?"), cfg(oncall))
    prompt = memories(model.system_prompts[-1])
    assert prompt.count("<memory ") == 1 and "site reliability engineer" in prompt
    agent.invoke(ask("Explain exponential backoff."), cfg(oncall))
    assert memories(model.system_prompts[-1]) == ""  # a generic turn still gets none
    _agent(memory, model, min_relevance=0.95, inject_when="always").invoke(ask("What's my role again?"), cfg(oncall))
    assert memories(model.system_prompts[-1]) == ""  # "always" decides nothing: the floor alone filters


async def test_the_async_path_looks_turns_up_the_same(amemory, oncall) -> None:
    model = ScriptedChatModel(script=["ok"])
    agent = _agent(amemory, model)
    await agent.ainvoke(ask("Plan Ida's birthday party at home."), cfg(oncall))
    assert "named Ida" in memories(model.system_prompts[-1])
    await agent.ainvoke(ask("Write me a summary of the French revolution."), cfg(oncall))
    assert memories(model.system_prompts[-1]) == ""
