"""One precedence for every way of building a config: code, then the environment, then defaults.

A user with ``DATABASE_URL`` set who passes ``MemoryConfig(keyword_weight=0)`` used to get the
embedded database silently; these tests pin the rule down, with a real service on the test server.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent_memory import MemoryConfig, MemoryService
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
        item = service.add_explicit_memory("Config precedence test: I prefer tea.", user_id="cfg-env-user")
    with MemoryService(dsn, config=MemoryConfig.defaults(), embeddings=embeddings) as direct:
        assert direct.get_memory(item.id, user_id="cfg-env-user").content.startswith("Config precedence")
