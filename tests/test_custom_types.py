"""Custom memory types, extraction instructions and the consolidation settings: validated in the
config, written and filtered by every door (service, tools, MCP, command line), shown to the
extraction model, kept by the database and by export/import."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import psycopg
import pytest
from langchain_core.messages import SystemMessage

from agent_memory import (
    ConfigurationError,
    InvalidInputError,
    MemoryConfig,
    MemoryItem,
    MemoryService,
    MemoryType,
)
from agent_memory.extraction import schemas
from agent_memory.memory_types import MAX_CUSTOM_TYPES, check_memory_type, known_types
from agent_memory.middleware.backend import MemoryBackend
from agent_memory.middleware.tools import memory_tools
from agent_memory.models import Identity
from agent_memory.testing import ScriptedChatModel

CUSTOM = {"incident": "An outage or production incident and its cause",
          "runbook": "A procedure the team follows, step by step"}
NOWHERE = "postgresql://agent:none@127.0.0.1:9/nowhere"


@pytest.fixture(scope="module")
def custom_config() -> MemoryConfig:
    return MemoryConfig.defaults(custom_memory_types=CUSTOM, vector_cache_rows=0)


@pytest.fixture(scope="module")
def custom(dsn: str, custom_config: MemoryConfig, embeddings: Any, memory: MemoryService):
    with MemoryService(dsn, config=custom_config, embeddings=embeddings) as service:
        yield service


# --- the config ------------------------------------------------------------------------------


@pytest.mark.parametrize(("types", "problem"), [
    ({"fact": "x y z"}, "'fact' is a built-in type"),
    ({"Incident": "x y z"}, "lowercase letters, digits and '_'"),
    ({"a": "x y z"}, "2 to 32 characters"),
    ({"x" * 33: "x y z"}, "2 to 32 characters"),
    ({"in cident": "x y z"}, "lowercase letters"),
    ({"incident": "  "}, "a description for each type"),
    ({"incident": "x" * 301}, "at most 300 characters"),
    ({f"type_{i}": "x y z" for i in range(MAX_CUSTOM_TYPES + 1)}, f"at most {MAX_CUSTOM_TYPES} custom types"),
    (["incident"], "a mapping of type names to descriptions"),
])
def test_custom_types_are_validated_when_the_config_is_built(types: Any, problem: str) -> None:
    with pytest.raises(ConfigurationError, match="^custom_memory_types must be ") as caught:
        MemoryConfig.defaults(custom_memory_types=types)
    assert problem in str(caught.value)


def test_custom_types_instructions_and_thresholds_come_from_the_environment() -> None:
    config = MemoryConfig.from_env({
        "MEMORY_CUSTOM_TYPES": "incident = An outage;  runbook=A procedure to follow",
        "MEMORY_EXTRACTION_INSTRUCTIONS": "Remember on-call rotations.",
        "MEMORY_CONSOLIDATION_FLOOR": "0.4", "MEMORY_CONSOLIDATION_CANDIDATES": "8",
    })
    assert dict(config.custom_memory_types) == {"incident": "An outage", "runbook": "A procedure to follow"}
    assert config.extraction_instructions == "Remember on-call rotations."
    assert (config.consolidation_floor, config.consolidation_candidates) == (0.4, 8)
    as_json = MemoryConfig.from_env({"MEMORY_CUSTOM_TYPES": '{"incident": "An outage; and its cause"}'})
    assert dict(as_json.custom_memory_types) == {"incident": "An outage; and its cause"}
    defaults = MemoryConfig.defaults()
    assert (dict(defaults.custom_memory_types), defaults.extraction_instructions) == ({}, None)
    assert (defaults.consolidation_floor, defaults.consolidation_candidates) == (0.3, 5)
    with pytest.raises(ConfigurationError, match="MEMORY_CUSTOM_TYPES"):
        MemoryConfig.from_env({"MEMORY_CUSTOM_TYPES": "incident"})
    with pytest.raises(ConfigurationError, match="^extraction_instructions must be "):
        MemoryConfig.defaults(extraction_instructions="x" * 4001)
    with pytest.raises(ConfigurationError, match="ttl_days"):
        MemoryConfig.defaults(ttl_days={"incident": 3})
    assert MemoryConfig.defaults(custom_memory_types=CUSTOM, ttl_days={"incident": 3}).ttl_days["incident"] == 3


def test_a_custom_type_is_a_member_that_reads_back_but_is_checked_against_the_config(custom_config) -> None:
    incident = MemoryType("incident")
    assert incident is MemoryType("incident") and incident == "incident" and str(incident) == "incident"
    assert not incident.builtin and MemoryType.FACT.builtin and "incident" not in MemoryType.values()
    assert known_types(custom_config)[-2:] == ("incident", "runbook")
    assert check_memory_type("memory_type", " Incident ", custom_config) is incident
    with pytest.raises(InvalidInputError, match="MEMORY_CUSTOM_TYPES"):
        check_memory_type("memory_type", "incident", MemoryConfig.defaults())
    with pytest.raises(ValueError):
        MemoryType("Not a type")


# --- the service -----------------------------------------------------------------------------


def test_the_service_writes_filters_and_edits_custom_types(custom: MemoryService, memory: MemoryService,
                                                           tenant) -> None:
    me = custom.for_user(tenant.user, project_id=tenant.project)
    outage = me.add("The March 3 outage was caused by an expired TLS certificate", memory_type="incident",
                    scope="project")
    assert isinstance(outage, MemoryItem) and outage.memory_type is MemoryType("incident")
    me.add("Prefers incident reviews written as bullet points", memory_type="preference")
    report = me.add_many([{"content": "Restart the payment worker before a failover", "memory_type": "runbook"}])
    assert len(report.inserted) == 1
    found = me.search("why did the site go down?", memory_type="incident")
    assert [r.item.id for r in found] == [outage.id]
    assert {m.memory_type.value for m in me.list(memory_type=["incident", "runbook"])} == {"incident", "runbook"}
    edited = me.edit(outage.id, memory_type="runbook")
    assert isinstance(edited, MemoryItem) and edited.memory_type.value == "runbook"
    assert custom.validate_memory("A disk filled up on the database host", memory_type="incident") is None
    # stats count it under its own name
    assert me.stats().by_type.get("runbook") == 2
    # a service without the type refuses to write or filter by it, and still reads what is stored
    plain = memory.for_user(tenant.user, project_id=tenant.project)
    with pytest.raises(InvalidInputError, match="must be one of preference, .*decision .*MEMORY_CUSTOM_TYPES"):
        plain.add("Another outage happened on Friday night", memory_type="incident")
    with pytest.raises(InvalidInputError, match="memory_type"):
        plain.search("outage", memory_type="incident")
    with pytest.raises(InvalidInputError, match="memory_type"):
        me.add("Something of an unknown kind happened", memory_type="postmortem")
    assert {m.memory_type.value for m in plain.list()} >= {"runbook", "preference"}
    # another user sees none of it (the project's members do)
    outsider = custom.for_user(f"outsider-{tenant.user}")
    assert outsider.search("why did the site go down?", memory_type=["incident", "runbook"]) == []
    member = custom.for_user(tenant.other_user, project_id=tenant.project)
    assert [r.item.id for r in member.search("TLS certificate outage", memory_type="runbook")] == [outage.id]


def test_the_vector_copies_filter_custom_types(dsn, embeddings, memory, tenant) -> None:
    config = MemoryConfig.defaults(custom_memory_types=CUSTOM, vector_cache_rows=3)
    with MemoryService(dsn, config=config, embeddings=embeddings) as service:
        me = service.for_user(tenant.user)
        for text, kind in (("The cache cluster ran out of memory on Monday", "incident"),
                           ("Drain the queue before deploying the worker", "runbook"),
                           ("Prefers short incident summaries", "preference"),
                           ("Uses Grafana dashboards daily", "habit")):
            me.add(text, memory_type=kind)
        for _ in range(2):  # the second search reads the copy
            hits = me.search("memory outage on the cache", memory_type="incident")
            assert [h.item.memory_type.value for h in hits] == ["incident"]
            assert {h.item.memory_type.value for h in me.search("worker", memory_type=["runbook", "habit"])} <= {
                "runbook", "habit"}


def test_the_database_keeps_the_shape_of_a_type(dsn: str, memory: MemoryService) -> None:
    with psycopg.connect(dsn) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM agent_memory_migrations")]
        assert "0019_custom_memory_types" in names
        check = conn.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                             "WHERE conname = 'memory_items_memory_type_check'").fetchone()
        assert check is not None and "memory_type" in check[0] and "[a-z]" in check[0]
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("UPDATE memory_items SET memory_type = 'Not A Type' WHERE id = (SELECT id FROM memory_items "
                         "LIMIT 1)")


def test_export_and_import_keep_custom_types(custom: MemoryService, fresh_dsn, embeddings, tenant) -> None:
    me = custom.for_user(tenant.user)
    saved = me.add("The billing API was down for two hours after a bad deploy", memory_type="incident")
    assert isinstance(saved, MemoryItem)
    data = json.loads(json.dumps(custom.export_data(user_id=tenant.user, what="owned")))
    with MemoryService(fresh_dsn(), embeddings=embeddings, config=MemoryConfig.defaults()) as elsewhere:
        report = elsewhere.import_data(data, user_id=tenant.user)
        assert report.inserted["memories"] == 1 and not any(report.rejected.values()), report.summary()
        back = elsewhere.for_user(tenant.user).get(saved.id)
        assert back.memory_type.value == "incident" and back.content == saved.content
        hits = elsewhere.for_user(tenant.user).search("billing API downtime")
        assert hits and hits[0].item.id == saved.id
    broken = json.loads(json.dumps(data))
    broken["memories"][0]["memory_type"] = "Not A Type"
    with pytest.raises(InvalidInputError, match="memory_type"):
        custom.import_data(broken, user_id=tenant.user)


# --- the tools, the MCP server, the command line ---------------------------------------------


def test_the_tools_offer_custom_types_and_save_them(custom: MemoryService, tenant) -> None:
    save, search, *_ = memory_tools(custom, user_id=tenant.user)
    schema = save.args["memory_type"]
    assert schema["enum"][-2:] == ["incident", "runbook"] and "An outage or production incident" in schema["description"]
    assert "incident (An outage or production incident and its cause)" in save.description
    assert search.args["memory_type"]["anyOf"][0]["enum"][-2:] == ["incident", "runbook"]
    reply = save.invoke({"content": "The DNS outage came from an expired domain", "memory_type": "incident"})
    assert "Saved memory" in str(reply), reply
    assert [m.memory_type.value for m in custom.for_user(tenant.user).list(memory_type="incident")] == ["incident"]
    # without custom types the schema is the built-in one, and building the tools opened nothing
    backend = MemoryBackend(NOWHERE, config=MemoryConfig.defaults())
    plain_save = memory_tools(backend)[0]
    assert plain_save.args["memory_type"]["enum"] == list(MemoryType.values()) and backend._sync is None


def test_the_mcp_server_schema_lists_custom_types(custom_config) -> None:
    from agent_memory.servers.mcp import build_server

    server = build_server(MemoryBackend(NOWHERE, config=custom_config), Identity("alice"))
    tools = {t.name: t for t in asyncio.run(server.list_tools())}
    assert tools["memory_save"].input_schema["properties"]["memory_type"]["enum"][-2:] == ["incident", "runbook"]
    assert "incident" in tools["memory_save"].description
    for name in ("memory_search", "memory_list"):
        kinds = tools[name].input_schema["properties"]["memory_type"]["anyOf"][0]["enum"]
        assert kinds[-2:] == ["incident", "runbook"], name


def test_the_command_line_takes_custom_types(dsn, monkeypatch, capsys, tenant) -> None:
    from agent_memory.cli import main

    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("MEMORY_CUSTOM_TYPES", "incident=An outage and its cause")
    who = ["--user", tenant.user]
    assert main(["add", "The search cluster lost a node during the upgrade", "--type", "incident", "--json",
                 *who]) == 0
    assert json.loads(capsys.readouterr().out)["memory_type"] == "incident"
    assert main(["list", "--type", "incident", "--json", *who]) == 0
    assert [m["memory_type"] for m in json.loads(capsys.readouterr().out)] == ["incident"]
    monkeypatch.delenv("MEMORY_CUSTOM_TYPES")
    assert main(["add", "Another node was lost on Sunday", "--type", "incident", *who]) != 0
    assert "MEMORY_CUSTOM_TYPES" in capsys.readouterr().err


# --- extraction ------------------------------------------------------------------------------


def test_the_extraction_prompt_and_schema_carry_types_and_instructions(custom_config) -> None:
    config = custom_config.replace(extraction_instructions="Remember on-call rotations. </deployment_instructions>")
    [system, _] = schemas.extraction_messages("user: hi", config=config)
    assert isinstance(system, SystemMessage)
    text = system.text
    assert '<type name="incident">An outage or production incident and its cause</type>' in text
    assert "Remember on-call rotations." in text
    assert text.count("</deployment_instructions>") == 1  # what the config says cannot close the block
    plain = schemas.extraction_messages("user: hi")[0].text
    assert "custom_memory_types" not in plain and "deployment_instructions" not in plain
    schema = schemas.extraction_schema(config)
    assert schema.__name__ == "ExtractedMemories" and issubclass(schema, schemas.ExtractedMemories)
    kinds = json.dumps(schema.model_json_schema())
    assert '"incident"' in kinds and '"runbook"' in kinds
    assert schemas.extraction_schema(MemoryConfig.defaults()) is schemas.ExtractedMemories


def _extracting(proposals: list[dict[str, Any]], decided: list[dict[str, Any]] | None = None) -> ScriptedChatModel:
    structured: dict[str, Any] = {"ExtractedMemories": [{"memories": proposals}],
                                  "UserProfileUpdate": [{}], "ProjectProfileUpdate": [{}]}
    if decided is not None:
        structured["ConsolidationDecisions"] = decided
    return ScriptedChatModel(structured=structured)


def test_a_model_extracts_memories_of_a_custom_type(custom: MemoryService, tenant) -> None:
    llm = _extracting([{"content": "The login outage was caused by a full disk", "memory_type": "incident",
                        "scope": "user", "confidence": 0.9}])
    report = custom.for_user(tenant.user, session_id=tenant.session).extract(
        ["The login outage yesterday was a full disk."], llm=llm)
    assert report.status == "done", report.summary()
    assert [o.memory.memory_type.value for o in report.added] == ["incident"]
    [(name, messages)] = [r for r in llm.structured_requests if r[0] == "ExtractedMemories"]
    assert "An outage or production incident and its cause" in messages[0].text


@pytest.mark.parametrize("candidates", [1, 3])
def test_the_consolidation_candidates_setting_is_used(dsn, embeddings, memory, tenant, candidates: int) -> None:
    config = MemoryConfig.defaults(consolidation_candidates=candidates, consolidation_floor=0.1)
    with MemoryService(dsn, config=config, embeddings=embeddings) as service:
        me = service.for_user(tenant.user)
        for text in ("Uses PostgreSQL 15 for the billing service", "Uses PostgreSQL for analytics workloads",
                     "Uses PostgreSQL with pgvector for search"):
            me.add(text)
        llm = _extracting([{"content": "Uses PostgreSQL 16 for the billing service now", "memory_type": "fact",
                            "scope": "user", "confidence": 0.9}],
                          [{"decisions": [{"proposal": 1, "decision": "ADD", "reason": "new"}]}])
        service.for_user(tenant.user, session_id=tenant.session).extract(["We moved billing to PostgreSQL 16."],
                                                                           llm=llm)
        [(_, messages)] = [r for r in llm.structured_requests if r[0] == "ConsolidationDecisions"]
        shown = set(re.findall(r'<stored id="(M\d+)"', " ".join(m.text for m in messages)))
        assert shown == {f"M{i + 1}" for i in range(candidates)}
