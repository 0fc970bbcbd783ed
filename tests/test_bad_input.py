"""Bad input: a clear error naming the field and what is allowed, and nothing written."""

from __future__ import annotations

import dataclasses
import math

import pytest

from agent_memory import ConfigurationError, InvalidInputError, MemoryConfig

GOOD = "I prefer tabs over spaces"

SAVE_CASES = [
    # (kwargs overriding a valid save, field named, words in the message)
    ({"content": None}, "content", "must be a string"),
    ({"content": 42}, "content", "must be a string"),
    ({"content": "nul\x00byte in here"}, "content", "NUL"),
    ({"content": "lone \ud800 surrogate"}, "content", "surrogate"),
    ({"memory_type": "opinion"}, "memory_type", "preference, fact, skill, habit, event, context, constraint, decision"),
    ({"memory_type": 3}, "memory_type", "must be one of"),
    ({"scope": "global"}, "scope", "session, project, user"),
    ({"visibility": "secret"}, "visibility", "public, members, owner_only"),
    ({"source": "web"}, "source", "user, ai, knowledge_base, project_resource"),
    ({"confidence": 1.5}, "confidence", "between 0 and 1"),
    ({"confidence": -0.1}, "confidence", "between 0 and 1"),
    ({"confidence": math.nan}, "confidence", "between 0 and 1"),
    ({"confidence": "high"}, "confidence", "number"),
    ({"confidence": True}, "confidence", "number"),
    ({"user_id": ""}, "user_id", "empty"),
    ({"user_id": "   "}, "user_id", "empty"),
    ({"user_id": None}, "user_id", "required"),
    ({"user_id": "u" * 300}, "user_id", "limit is 256"),
    ({"user_id": "bad\x00id"}, "user_id", "NUL"),
    ({"user_id": ["alice"]}, "user_id", "string id"),
    ({"project_id": "p\ud800"}, "project_id", "surrogate"),
    ({"session_id": "s\n1"}, "session_id", "control characters"),
    ({"source_id": "x" * 1000}, "source_id", "limit"),
    ({"metadata": "not a dict"}, "metadata", "JSON object"),
    ({"metadata": {"x": object()}}, "metadata", "JSON-serialisable"),
    ({"metadata": {"x": math.inf}}, "metadata", "NaN"),
    ({"metadata": {"big": "x" * 20_000}}, "metadata", "16384 bytes"),
    ({"scope": "project", "project_id": None}, "scope", "project_id"),
]


@pytest.mark.parametrize(("override", "field", "words"), SAVE_CASES, ids=[c[1] + str(i) for i, c in enumerate(SAVE_CASES)])
def test_save_rejects_malformed_arguments(memory, tenant, override, field, words):
    kwargs = dict(content=GOOD, user_id=tenant.user, project_id=tenant.project, session_id=tenant.session)
    kwargs.update(override)
    content = kwargs.pop("content")
    with pytest.raises(InvalidInputError) as info:
        memory.add_explicit_memory(content, **kwargs)
    assert info.value.field == field
    assert words in str(info.value)
    assert memory.list_memories(user_id=tenant.user, status=None) == []


SEARCH_CASES = [
    ({"query": ""}, "query", "empty"),
    ({"query": "   "}, "query", "empty"),
    ({"query": 5}, "query", "string"),
    ({"query": "x" * 5000}, "query", "limit is 4000"),
    ({"k": 0}, "k", "between 1 and 100"),
    ({"k": -3}, "k", "between 1 and 100"),
    ({"k": 10**9}, "k", "between 1 and 100"),
    ({"k": 2.5}, "k", "whole number"),
    ({"k": "5"}, "k", "whole number"),
    ({"memory_type": ["fact", "nope"]}, "memory_type", "must be one of"),
    ({"memory_type": []}, "memory_type", "empty list"),
    ({"scope": 7}, "scope", "must be"),
    ({"status": "deleted"}, "status", "active, archived, superseded"),
]


@pytest.mark.parametrize(("override", "field", "words"), SEARCH_CASES, ids=[c[1] + str(i) for i, c in enumerate(SEARCH_CASES)])
async def test_search_rejects_malformed_arguments(memory, amemory, tenant, override, field, words):
    kwargs = dict(query="tabs", user_id=tenant.user)
    kwargs.update(override)
    query = kwargs.pop("query")
    with pytest.raises(InvalidInputError) as info:
        memory.search_memories(query, **kwargs)
    assert info.value.field == field and words in str(info.value)
    with pytest.raises(InvalidInputError) as ainfo:
        await amemory.search_memories(query, **kwargs)
    assert str(ainfo.value) == str(info.value)


@pytest.mark.parametrize("bad_id", ["", "not-a-uuid", 12, None, "x" * 10_000, "a3f1" * 9])
def test_id_taking_calls_reject_malformed_ids(memory, tenant, bad_id):
    for call in (memory.get_memory, memory.delete_memory, memory.restore_memory):
        with pytest.raises(InvalidInputError, match="memory_id") as info:
            call(bad_id, user_id=tenant.user)
        assert len(str(info.value)) < 200  # a huge id is described, not echoed


async def test_async_service_raises_the_same_errors_when_awaited(amemory, tenant):
    pending = amemory.add_explicit_memory(GOOD, user_id=None)  # building the call raises nothing yet
    with pytest.raises(InvalidInputError, match="user_id"):
        await pending
    assert await amemory.list_memories(user_id=tenant.user) == []


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"min_confidence": 2}, "min_confidence must be a number between 0 and 1"),
        ({"duplicate_threshold": -1}, "duplicate_threshold"),
        ({"max_extractions": -1}, "max_extractions must be a whole number >= 0"),
        ({"min_length": 10, "max_length": 5}, "must not exceed"),
        ({"embeddings": "cohere"}, "embeddings must be one of local, openai"),
        ({"database_url": "  "}, "database_url"),
        ({"scope_priority": {"planet": 1.0}}, "scope_priority"),
        ({"prompt_budget_chars": 10}, "prompt_budget_chars"),
        ({"pool_min_size": 5, "pool_max_size": 2}, "pool_min_size"),
    ],
)
def test_config_is_validated_at_construction(kwargs, words):
    with pytest.raises(ConfigurationError, match=words):
        MemoryConfig(**kwargs)


def test_config_reads_documented_environment_variables():
    env = {"MEMORY_MIN_CONFIDENCE": "0.5", "MEMORY_DUPLICATE_THRESHOLD": "0.9", "MEMORY_MAX_EXTRACTIONS": "7",
           "MEMORY_MIN_LENGTH": "3", "MEMORY_MAX_LENGTH": "500", "DATABASE_URL": "postgresql://x@h/db",
           "MEMORY_EMBEDDINGS": "openai"}
    config = MemoryConfig.from_env(env)
    assert (config.min_confidence, config.duplicate_threshold, config.max_extractions) == (0.5, 0.9, 7)
    assert (config.min_length, config.max_length) == (3, 500)
    assert config.database_url == "postgresql://x@h/db" and config.embeddings == "openai"
    # code beats the environment
    assert MemoryConfig.from_env(env, min_confidence=0.8).min_confidence == 0.8
    with pytest.raises(ConfigurationError, match="MEMORY_MAX_EXTRACTIONS='lots'"):
        MemoryConfig.from_env({"MEMORY_MAX_EXTRACTIONS": "lots"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        MemoryConfig().min_confidence = 0.1
