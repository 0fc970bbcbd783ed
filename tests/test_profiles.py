"""Profiles in the database: built by rules or by a model, rebuilt only when their memories change,
edited by hand, and private to their subject. The pure parts are in test_profiles_pure.py."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from agent_memory import MemoryService
from agent_memory.errors import InvalidInputError
from agent_memory.testing import ScriptedChatModel


def _user(memory: MemoryService, user: str):
    return memory.for_user(user).profiles().user


def test_a_user_profile_is_built_by_rules_from_explicit_memories(memory: MemoryService, tenant) -> None:
    assert _user(memory, tenant.user).built_by in (None, "rules")
    assert memory.for_user(tenant.user).profiles().user_text == ""  # nothing known yet
    memory.for_user(tenant.user).add("Prefers concise answers.", memory_type="preference")
    memory.for_user(tenant.user).add("Writes Python and Rust, deploys with Docker.")
    memory.for_user(tenant.user).add("Is a senior backend engineer.")
    profiles = memory.for_user(tenant.user).profiles()
    assert profiles.project is None and profiles.project_text == ""
    user = profiles.user
    assert user.built_by == "rules" and user.built_at is not None and not user.stale
    assert user.fields["communication_style"] == "concise"
    assert user.fields["custom_instructions"] == ["Prefers concise answers"]
    assert set(user.fields["programming_languages"]) == {"Python", "Rust"}
    assert user.fields["frequently_used_tools"] == ["Docker"]
    assert user.fields["profession"] == "senior backend engineer"
    text = profiles.user_text
    assert text.startswith("<user_profile>") and "Communication style: concise" in text
    assert "Python" in text and "Docker" in text
    # get_profile reads what is stored, without building
    assert memory.for_user(tenant.user).profile().fields == user.fields


def test_a_project_decision_lands_in_the_project_profile(memory: MemoryService, tenant) -> None:
    memory.for_user(tenant.user, project_id=tenant.project).add("Use PostgreSQL because it has pgvector.", scope="project", memory_type="decision")
    memory.for_user(tenant.other_user, project_id=tenant.project).add("Never push directly to main.", scope="project", memory_type="constraint")
    profiles = memory.for_user(tenant.user, project_id=tenant.project).profiles()
    project = profiles.project
    assert project is not None and project.built_by == "rules" and project.subject_id == tenant.project
    [decision] = project.fields["key_decisions"]
    assert decision["decision"] == "Use PostgreSQL" and decision["rationale"] == "it has pgvector"
    assert decision["timestamp"] is not None
    assert project.fields["constraints"] == ["Never push directly to main"]
    assert set(project.fields["tech_stack"]) == {"PostgreSQL", "pgvector"}
    assert profiles.project_text.startswith("<project_profile>") and "Use PostgreSQL" in profiles.project_text
    # project memories are not part of the user profile
    assert profiles.user.fields["custom_instructions"] == [] and profiles.user_text == ""
    # every member reads the same project profile
    theirs = memory.for_user(tenant.other_user, project_id=tenant.project).profiles().project
    assert theirs.fields == project.fields and theirs.built_at == project.built_at


def test_a_profile_is_rebuilt_only_when_its_memories_change(memory: MemoryService, tenant) -> None:
    item = memory.for_user(tenant.user).add("Prefers detailed answers with examples.", memory_type="preference")
    first = _user(memory, tenant.user)
    assert first.fields["communication_style"] == "detailed"
    assert _user(memory, tenant.user).built_at == first.built_at  # nothing changed: not rebuilt

    # using the memory (search, injection, a repeated save) is not a change of what the user is
    assert memory.for_user(tenant.user).search("answers with examples")
    again = memory.for_user(tenant.user).add("Prefers detailed answers with examples.", memory_type="preference")
    assert again.deduplicated
    assert not memory.for_user(tenant.user).profile().stale
    assert _user(memory, tenant.user).built_at == first.built_at
    assert memory.for_user(tenant.user).refresh_profiles() == []

    # a memory of another user, or of another scope, does not touch this profile
    memory.for_user(tenant.other_user).add("Prefers concise answers.", memory_type="preference")
    memory.for_user(tenant.user, session_id=tenant.session).add("Keep answers in this chat short.", scope="session", memory_type="preference")
    assert _user(memory, tenant.user).built_at == first.built_at

    added = memory.for_user(tenant.user).add("Uses Neovim with tmux.")
    assert memory.for_user(tenant.user).profile().stale
    second = _user(memory, tenant.user)
    assert second.built_at > first.built_at and not second.stale
    assert set(second.fields["frequently_used_tools"]) == {"Neovim", "tmux"}

    memory.for_user(tenant.user).delete(added.id)
    third = _user(memory, tenant.user)
    assert third.built_at > second.built_at and third.fields["frequently_used_tools"] == []
    memory.for_user(tenant.user).edit(item.id, content="Prefers concise answers with examples.")
    fourth = _user(memory, tenant.user)
    assert fourth.built_at > third.built_at and fourth.fields["communication_style"] == "concise"
    memory.for_user(tenant.user).restore(added.id)
    assert _user(memory, tenant.user).fields["frequently_used_tools"] != []


def test_a_hand_set_field_wins_until_it_is_reset(memory: MemoryService, tenant) -> None:
    memory.for_user(tenant.user).add("Prefers concise answers.", memory_type="preference")
    edited = memory.for_user(tenant.user).update_profile({"communication_style": "Technical", "username": " Sam ",
                                    "programming_languages": ["Go", "go", " Elixir "]})
    assert edited.manual == {"communication_style": "technical", "username": "Sam",
                             "programming_languages": ["Go", "Elixir"]}
    assert edited.edited_at is not None

    # new memories and forced rebuilds (rules, then an extraction run) leave the hand-set fields alone
    memory.for_user(tenant.user).add("Writes mostly Kotlin these days.")
    assert memory.for_user(tenant.user).refresh_profiles(force=True) == ["user"]
    report = memory.for_user(tenant.user, session_id=tenant.session).extract(["I prefer detailed answers with diagrams."], llm=None)
    assert report.status == "done" and report.changed
    profile = _user(memory, tenant.user)
    assert profile.fields["communication_style"] == "technical"
    assert profile.fields["username"] == "Sam"
    assert profile.fields["programming_languages"] == ["Go", "Elixir"]
    assert profile.built["programming_languages"] == ["Kotlin"]
    assert profile.built["communication_style"] in ("concise", "detailed")
    assert "Communication style: technical" in memory.for_user(tenant.user).profiles().user_text

    # clearing by hand also wins: the built value does not come back
    cleared = memory.for_user(tenant.user).update_profile({"programming_languages": []})
    assert cleared.fields["programming_languages"] == []

    back = memory.for_user(tenant.user).reset_profile_fields(["communication_style", "programming_languages"])
    assert back.fields["communication_style"] == profile.built["communication_style"]
    assert back.fields["programming_languages"] == ["Kotlin"]
    assert back.fields["username"] == "Sam"
    everything = memory.for_user(tenant.user).reset_profile_fields()
    assert everything.manual == {} and everything.fields["username"] is None


def test_a_project_profile_can_be_edited_by_hand(memory: MemoryService, tenant) -> None:
    profile = memory.for_user(tenant.user, project_id=tenant.project).update_profile({"project_goal": "A memory layer for agents.", "key_decisions": [
            {"decision": "Ship on PostgreSQL only", "rationale": "one database", "timestamp": "2025-01-31"}]}, kind="project")
    assert profile.kind == "project" and profile.fields["project_goal"] == "A memory layer for agents."
    shown = memory.for_user(tenant.other_user, project_id=tenant.project).profiles()
    assert "2025-01-31: Ship on PostgreSQL only (rationale: one database)" in shown.project_text


@pytest.mark.parametrize(("fields", "kind", "field"), [
    ({"favourite_colour": "green"}, "user", "favourite_colour"),
    ({"communication_style": "chatty"}, "user", "communication_style"),
    ({"response_format": 3}, "user", "response_format"),
    ({"programming_languages": "Python"}, "user", "programming_languages"),
    ({"background": "x" * 501}, "user", "background"),
    ({"background": "My password is hunter2"}, "user", "background"),
    ({"tech_stack": ["Python"]}, "user", "tech_stack"),
    ({"key_decisions": [{"rationale": "no decision"}]}, "project", "key_decisions[0].decision"),
    ({"key_decisions": [{"decision": "Use Go", "timestamp": "last week"}]}, "project", "key_decisions[0].timestamp"),
    ({}, "user", "fields"),
    ({"username": "Sam"}, "team", "kind"),
])
def test_profile_edits_are_validated_naming_the_field(memory: MemoryService, tenant, fields, kind, field) -> None:
    with pytest.raises(InvalidInputError) as err:
        memory.for_user(tenant.user, project_id=tenant.project).update_profile(fields, kind=kind)
    assert err.value.field == field
    assert "hunter2" not in str(err.value)
    assert memory.for_user(tenant.user).profile().manual == {}


def test_profile_calls_check_kind_and_project(memory: MemoryService, tenant) -> None:
    with pytest.raises(InvalidInputError) as err:
        memory.for_user(tenant.user).update_profile({"project_goal": "Something."}, kind="project")
    assert err.value.field == "project_id"
    with pytest.raises(InvalidInputError) as err:
        memory.for_user(tenant.user).profile("project")
    assert err.value.field == "project_id"
    with pytest.raises(InvalidInputError) as err:
        memory.for_user(tenant.user).reset_profile_fields(["hobbies"])
    assert err.value.field == "names"
    with pytest.raises(InvalidInputError) as err:  # a bare string is not a list of names
        memory.for_user(tenant.user).reset_profile_fields("username")
    assert err.value.field == "names"


def test_a_profile_built_by_the_model_is_not_rebuilt_without_changes(memory: MemoryService, tenant) -> None:
    memory.for_user(tenant.user).add("Prefers concise answers.", memory_type="preference")
    model = ScriptedChatModel(structured={"UserProfileUpdate": [
        {"communication_style": "concise", "profession": "Data scientist", "programming_languages": ["Julia"]},
        {"communication_style": "detailed", "profession": "Data scientist"},
    ]})
    assert memory.for_user(tenant.user).refresh_profiles(llm=model) == ["user"]
    assert len(model.structured_requests) == 1
    [(schema, messages)] = model.structured_requests
    assert schema == "UserProfileUpdate" and "Prefers concise answers." in messages[-1].text
    profile = memory.for_user(tenant.user).profile()
    assert profile.built_by == "llm" and not profile.stale
    assert profile.fields["profession"] == "Data scientist" and profile.fields["programming_languages"] == ["Julia"]

    # nothing changed: no model call, and the agent is served the model's profile as it is
    assert memory.for_user(tenant.user).refresh_profiles(llm=model) == []
    assert memory.for_user(tenant.user).profiles().user.built_by == "llm"
    assert memory.for_user(tenant.user).search("answers")
    assert memory.for_user(tenant.user).refresh_profiles(llm=model) == []
    assert len(model.structured_requests) == 1

    # a change: the model is asked again and sees the new memory
    memory.for_user(tenant.user).add("Writes R and SQL at work.")
    assert memory.for_user(tenant.user).refresh_profiles(llm=model) == ["user"]
    assert len(model.structured_requests) == 2
    assert "Writes R and SQL at work." in model.structured_requests[-1][1][-1].text
    assert memory.for_user(tenant.user).profile().fields["communication_style"] == "detailed"


def _raise(messages):
    raise RuntimeError("the model is down")


@pytest.mark.parametrize("reply", [
    pytest.param(_raise, id="raises"),
    pytest.param(lambda messages: AIMessage("I would rather chat than call a tool."), id="no-structured-output"),
])
def test_when_the_model_fails_the_profile_is_built_by_rules(memory: MemoryService, tenant, reply) -> None:
    memory.for_user(tenant.user).add("Prefers concise answers.", memory_type="preference")
    llm = ScriptedChatModel(structured={"UserProfileUpdate": reply})
    assert memory.for_user(tenant.user).refresh_profiles(llm=llm) == ["user"]
    assert len(llm.requests) == 1
    profile = memory.for_user(tenant.user).profile()
    assert profile.built_by == "rules" and profile.fields["communication_style"] == "concise"
    assert not profile.stale


def test_invalid_values_from_the_model_are_dropped_not_fatal(memory: MemoryService, tenant) -> None:
    memory.for_user(tenant.user).add("Prefers concise answers.", memory_type="preference")
    llm = ScriptedChatModel(structured={"UserProfileUpdate": [
        {"communication_style": "chatty", "programming_languages": "Python", "username": 42,
         "background": "Their password is hunter2"}]})
    assert memory.for_user(tenant.user).refresh_profiles(llm=llm) == ["user"]
    profile = memory.for_user(tenant.user).profile()
    assert profile.built_by == "llm"
    assert profile.fields["communication_style"] is None and profile.fields["username"] is None
    assert profile.fields["programming_languages"] == ["Python"] and profile.fields["background"] is None


def test_a_model_that_failed_once_builds_the_next_profile(memory: MemoryService, tenant) -> None:
    memory.for_user(tenant.user).add("Prefers concise answers.", memory_type="preference")
    llm = ScriptedChatModel(structured={"UserProfileUpdate": [{"profession": "Pilot"}]}, fail_times=1)
    assert memory.for_user(tenant.user).refresh_profiles(llm=llm) == ["user"]
    assert memory.for_user(tenant.user).profile().built_by == "rules"
    memory.for_user(tenant.user).add("Flies for a regional airline.")
    assert memory.for_user(tenant.user).refresh_profiles(llm=llm) == ["user"]
    profile = memory.for_user(tenant.user).profile()
    assert profile.built_by == "llm" and profile.fields["profession"] == "Pilot"


def test_a_deleted_memory_leaves_a_model_built_profile_at_once(dsn, config, embeddings, tenant) -> None:
    llm = ScriptedChatModel(structured={"UserProfileUpdate": [{"background": "Is recovering from surgery."}]})
    with MemoryService(dsn, config=config, embeddings=embeddings, llm=llm) as service:
        item = service.for_user(tenant.user).add("Is recovering from surgery.")
        assert service.for_user(tenant.user).refresh_profiles() == ["user"]
        assert "surgery" in service.for_user(tenant.user).profiles().user_text
        service.for_user(tenant.user).delete(item.id)
        assert "surgery" not in service.for_user(tenant.user).profiles().user_text


def test_an_owner_only_item_stays_out_of_the_shared_project_profile(memory: MemoryService, tenant) -> None:
    memory.for_user(tenant.user, project_id=tenant.project).add("The team deploys on Kubernetes.", scope="project", memory_type="context")
    secret = memory.for_user(tenant.other_user, project_id=tenant.project).add("Plans to migrate the project to Elixir without telling anyone.", scope="project", memory_type="decision", visibility="owner_only")
    for who in (tenant.user, tenant.other_user):  # not even for its author: the profile is shared
        project = memory.for_user(who, project_id=tenant.project).profiles().project
        assert project.fields["tech_stack"] == ["Kubernetes"]
        assert project.fields["key_decisions"] == []
        assert "Elixir" not in memory.for_user(who, project_id=tenant.project).profiles().project_text
    assert memory.for_user(tenant.user, project_id=tenant.project).refresh_profiles(force=True) == ["user", "project"]
    assert memory.for_user(tenant.user, project_id=tenant.project).profile("project").fields["key_decisions"] == []
    # what another member shares with the project is in it
    memory.for_user(tenant.other_user, project_id=tenant.project).add("Adopt Elixir for the chat service.", scope="project", memory_type="decision")
    project = memory.for_user(tenant.user, project_id=tenant.project).profiles().project
    assert [d["decision"] for d in project.fields["key_decisions"]] == ["Adopt Elixir for the chat service"]
    assert "without telling anyone" not in str(project.fields)
    assert secret.visibility.value == "owner_only"


def test_user_profiles_are_private(memory: MemoryService, tenant) -> None:
    memory.for_user(tenant.other_user).add("Prefers detailed answers.", memory_type="preference")
    memory.for_user(tenant.other_user).add("Is fluent in Haskell and uses Emacs.")
    memory.for_user(tenant.other_user).update_profile({"username": "Bea"})
    memory.for_user(tenant.user).add("Uses VS Code.")
    mine = memory.for_user(tenant.user, project_id=tenant.project, session_id=tenant.other_session).profiles()
    assert mine.user.subject_id == tenant.user
    assert mine.user.fields["frequently_used_tools"] == ["VS Code"]
    assert mine.user.fields["username"] is None and mine.user.fields["communication_style"] is None
    assert mine.user.fields["programming_languages"] == []
    for word in ("Bea", "Haskell", "Emacs", "detailed"):
        assert word not in mine.user_text
    # nor do hand edits reach across: updating "my" profile never writes someone else's
    memory.for_user(tenant.user).update_profile({"username": "Al"})
    assert memory.for_user(tenant.other_user).profile().fields["username"] == "Bea"


async def test_async_profiles(amemory, tenant) -> None:
    await amemory.for_user(tenant.user).add("Prefers answers in German.", memory_type="preference")
    profiles = await amemory.for_user(tenant.user).profiles()
    assert profiles.user.built_by == "rules" and profiles.user.fields["language_preference"] == "German"
    again = await amemory.for_user(tenant.user).profiles()
    assert again.user.built_at == profiles.user.built_at
    edited = await amemory.for_user(tenant.user).update_profile({"language_preference": "French"})
    assert edited.fields["language_preference"] == "French"
    assert await amemory.for_user(tenant.user).refresh_profiles(force=True) == ["user"]
    assert (await amemory.for_user(tenant.user).profile()).fields["language_preference"] == "French"
