"""One precedence for every way of building a config: code, then the environment, then defaults.

A user with ``DATABASE_URL`` set who passes ``MemoryConfig(keyword_weight=0)`` used to get the
embedded database silently; these tests pin the rule down, with a real service on the test server.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import pytest

from agent_memory import MemoryConfig, MemoryService
from agent_memory.config import _RULES
from agent_memory.embeddings import LocalEmbeddings
from agent_memory.errors import ConfigurationError


def test_a_config_built_in_code_still_reads_unspecified_settings_from_the_environment(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://someone@db.example/memories")
    monkeypatch.setenv("MEMORY_DATA_DIR", "/srv/pgdata")
    monkeypatch.setenv("MEMORY_MIN_CONFIDENCE", "0.5")
    config = MemoryConfig(keyword_weight=0)
    assert config.keyword_weight == 0
    assert config.database_url == "postgresql://someone@db.example/memories"
    assert str(config.data_dir) == "/srv/pgdata" and config.min_confidence == 0.5
    # code wins over the environment, field by field
    assert MemoryConfig(min_confidence=0.8).min_confidence == 0.8
    assert MemoryConfig(database_url=None).database_url is None
    # and a copy keeps what it was built with
    assert config.replace(min_length=3).database_url == config.database_url


def test_defaults_and_a_given_environment_ignore_os_environ(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://someone@db.example/memories")
    monkeypatch.setenv("MEMORY_MIN_CONFIDENCE", "0.5")
    assert MemoryConfig.defaults().database_url is None
    assert MemoryConfig.defaults().min_confidence == 0.7
    given = MemoryConfig.from_env({"MEMORY_MIN_CONFIDENCE": "0.9"}, keyword_weight=0.2)
    assert (given.min_confidence, given.keyword_weight, given.database_url) == (0.9, 0.2, None)
    assert MemoryConfig.from_env().min_confidence == MemoryConfig().min_confidence == 0.5


def test_a_bad_variable_is_named_even_when_the_config_is_built_in_code(monkeypatch):
    monkeypatch.setenv("MEMORY_MAX_LENGTH", "lots")
    with pytest.raises(ConfigurationError, match="MEMORY_MAX_LENGTH='lots'"):
        MemoryConfig(keyword_weight=0)
    # a value given in code does not need the variable, so it is not read
    assert MemoryConfig(max_length=100).max_length == 100


def test_the_service_uses_database_url_when_given_a_config(
    monkeypatch, pg_server_dsn: Callable[[str], str], dsn: str, embeddings: LocalEmbeddings
):
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("MEMORY_DATA_DIR", "/nonexistent/never-started")  # the embedded server is not used
    with MemoryService(config=MemoryConfig(keyword_weight=0), embeddings=embeddings) as service:
        item = service.for_user("cfg-env-user").add("Config precedence test: I prefer tea.")
    with MemoryService(dsn, config=MemoryConfig.defaults(), embeddings=embeddings) as direct:
        assert direct.for_user("cfg-env-user").get(item.id).content.startswith("Config precedence")


# --- validation: every rule of the table refuses a bad value and names its field ------------------

#: one bad value per validated field
BAD_VALUES = {
    "database_url": "  ",
    "data_dir": 42,
    "server_idle_timeout": -1,
    "db_schema": "My-Schema",
    "embeddings": "cohere",
    "embedding_model": 3,
    "embedding_threads": 0,
    "min_confidence": 1.5,
    "duplicate_threshold": -0.1,
    "max_extractions": -1,
    "extraction_window_hours": 0,
    "min_length": 0,
    "max_length": True,
    "weight_similarity": math.nan,
    "weight_confidence": "0.3",
    "weight_scope": 2,
    "scope_priority": {"planet": 1.0},
    "keyword_weight": True,
    "context_weight": 1.5,
    "context_keyword_weight": -0.1,
    "keyword_norm": "bm25",
    "keyword_feedback": -1,
    "min_relevance": -1,
    "candidate_pool": 0,
    "max_k": 2.5,
    "prompt_budget_chars": 199,
    "pool_min_size": -1,
    "pool_max_size": 0,
    "checkpoint_archive_days": math.inf,
    "llm": "gpt-4o-mini",
    "extraction": "sometimes",
    "extract_every": 0,
    "extract_idle_seconds": 0,
    "auto_create_projects": "yes",
    "knowledge_graph": "yes",
    "team_write": "everyone",
    "conflict_threshold": 1.01,
    "ttl_days": {"session": 0},
    "weight_salience": -0.1,
    "archive_below": 1.0,
    "archive_idle_days": 0,
    "ephemeral_days": -1,
    "vector_cache_rows": -1,
    "vector_cache_mb": 0,
    "max_document_passages": 0,
    "custom_memory_types": {"fact": "clashes with a built-in type"},
    "extraction_instructions": "",
    "consolidation_floor": 1.5,
    "consolidation_candidates": 0,
    "inject_when": "sometimes",
    "inject_min_relevance": 1.5,
    "profile_budget_tokens": -1,
    "distributed": "mysql",
}


def test_every_field_has_a_rule_and_every_rule_a_bad_value():
    assert set(_RULES) == {f.name for f in dataclasses.fields(MemoryConfig)}
    assert set(BAD_VALUES) == set(_RULES)


@pytest.mark.parametrize("field", list(_RULES))
def test_each_rule_refuses_a_bad_value_naming_the_field(field):
    bad = BAD_VALUES[field]
    with pytest.raises(ConfigurationError) as caught:
        MemoryConfig.defaults(**{field: bad})
    message = str(caught.value)
    assert message.startswith(f"{field} must be "), message
    assert "\n" not in message
    if field != "database_url":  # a URL may carry a password: it is not echoed
        assert f"got {bad!r}" in message
    # the same rule holds for a copy, and the value that passed the rule is accepted
    with pytest.raises(ConfigurationError, match=f"^{field} must be "):
        MemoryConfig.defaults().replace(**{field: bad})


@pytest.mark.parametrize(("var", "raw", "field"), [
    ("MEMORY_MIN_CONFIDENCE", "1.5", "min_confidence"),
    ("MEMORY_TEAM_WRITE", "everyone", "team_write"),
    ("MEMORY_PROMPT_BUDGET", "10", "prompt_budget_chars"),
    ("MEMORY_LLM", "gpt-4o-mini", "llm"),
])
def test_a_parsed_environment_value_is_checked_by_the_same_rule(var, raw, field, monkeypatch):
    with pytest.raises(ConfigurationError, match=f"^{field} must be "):
        MemoryConfig.from_env({var: raw})
    monkeypatch.setenv(var, raw)
    with pytest.raises(ConfigurationError, match=f"^{field} must be "):
        MemoryConfig()


def test_normalised_values():
    config = MemoryConfig.defaults(data_dir="~/pgdata", scope_priority={"team": 0.5})
    assert config.data_dir.is_absolute() and config.data_dir.name == "pgdata"
    assert dict(config.scope_priority) == {"session": 1.0, "project": 0.8, "user": 0.6, "team": 0.5, "org": 0.2}
    with pytest.raises(TypeError):
        config.scope_priority["org"] = 1.0  # type: ignore[index]
