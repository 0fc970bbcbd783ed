"""The memory_store plugin (agent_memory.servers.memory_store), driven as a real process over pipes.

Three server processes on the session's test database (each loads the embedding model): one
for the methods, one for the malformed messages, and a second reader for read-after-write
across processes. Ids are fresh per run, so the tests share the database with the rest.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_memory import MemoryService
from agent_memory.config import PLUGIN_PRINCIPAL, server_setting
from agent_memory.db.embedded import stop_embedded_server
from agent_memory.servers.memory_store import MANIFEST, main
from agent_memory.servers.memory_store_scopes import (
    ScopeRef,
    key_from,
    key_of,
    namespace_of,
    originals,
    project_of,
    scope_of,
)
from agent_memory.store.namespaces import MAX_KEY_LENGTH, encode_key
from server_processes import stops_its_postgres

TIMEOUT = 120.0


class Plugin:
    """One server process; :meth:`call` sends a request and reads its answer."""

    def __init__(self, dsn: str, user: str | None, **env: str) -> None:
        """``user=None`` starts the plugin as a daemon does: no arguments, settings in the environment."""
        args = [] if user is None else ["--user", user]
        base = {k: v for k, v in os.environ.items() if k != "MEMORY_STORE_USER"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent_memory.servers.memory_store", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=dict(base, DATABASE_URL=dsn, **env))
        self.next_id = 0

    def send_line(self, line: str | bytes) -> None:
        data = line.encode("utf-8") if isinstance(line, str) else line
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT)
        assert ready, "the server did not answer in time"
        line = self.proc.stdout.readline()
        assert line, f"the server closed its output (exit code {self.proc.poll()})"
        return json.loads(line)

    def raw(self, line: str | bytes) -> dict[str, Any]:
        self.send_line(line)
        return self.read()

    def request(self, method: str, params: Any = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        answer = self.raw(json.dumps(message))
        assert answer["id"] == self.next_id
        return answer

    def call(self, method: str, params: Any = None) -> Any:
        answer = self.request(method, params)
        assert "error" not in answer, answer
        return answer["result"]

    def error(self, method: str, params: Any = None) -> tuple[int, str]:
        answer = self.request(method, params)
        assert "error" in answer, answer
        return answer["error"]["code"], answer["error"]["message"]

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=60)
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()


@pytest.fixture(scope="module")
def user() -> str:
    return f"ms-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def plugin(dsn: str, memory: MemoryService, user: str) -> Iterator[Plugin]:
    server = Plugin(dsn, user)
    yield server
    assert server.close() == 0


def _uid(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


# --- no server ---------------------------------------------------------------------------------

def test_manifest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--manifest"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == MANIFEST
    assert printed["kind"] == "memory_store" and "memory/list_scopes" in printed["methods"]
    assert {"name", "version", "protocol_version"} <= set(printed)


def test_scope_mapping_round_trips_and_keeps_lookalike_ids_apart() -> None:
    ids = ["Acme Corp", "acme-corp", "acme corp", "ACME CORP", "a/b", "ünï code", "agent", "task", "x" * 256,
           "é" * 256, "日本" * 128, "#hash-looking", "#" + "0" * 32]
    namespaces = set()
    for project in ids:
        for scope in (ScopeRef(project), ScopeRef(project, project), ScopeRef(project, None, "t"),
                      ScopeRef(project, "agent", "task"), ScopeRef(project, project, project)):
            namespace = namespace_of(scope, "u")
            kept = originals(scope, project)
            assert scope_of(namespace, "u", kept) == scope
            assert key_from(key_of(project), kept) == project
            # every id of up to 256 characters fits the store's key, in any script (issue 28)
            assert len(encode_key(namespace, key_of(project))) <= MAX_KEY_LENGTH
            namespaces.add(namespace)
    assert len(namespaces) == 5 * len(ids)
    assert project_of("webshop", "u") == "webshop" and project_of("acme/web", "u") == "acme/web"
    assert project_of("Acme Corp", "u") != project_of("acme corp", "u") != project_of("acme-corp", "u")
    # a derived project is the user's own: another user's plugin maps the same label elsewhere
    assert project_of("Acme Corp", "u") != project_of("Acme Corp", "v")
    assert scope_of(("projects", "evil", "memory_store", "Acme Corp"), "u") is None  # the project id must match
    assert scope_of(namespace_of(ScopeRef("Acme Corp"), "u"), "v") is None  # and be the user's
    assert scope_of(namespace_of(ScopeRef("é" * 256), "u"), "u") is None  # a hashed id needs its originals


# --- the methods ---------------------------------------------------------------------------------

def test_initialize_put_get_query_and_history(plugin: Plugin, memory: MemoryService, user: str) -> None:
    project = _uid("Web Shop ü/α")
    info = plugin.call("initialize", {"project_id": project, "agent_id": "planner"})
    extra = info["capabilities"]["memory_store"]["extra"]
    assert extra == {"native_ttl": True, "native_key_get": True, "strong_consistency": True,
                     "max_query_top_k": memory.config.max_k}
    assert info["capabilities"]["memory_store"]["crate_version"] == MANIFEST["version"]
    assert info["server_info"]["name"] == "agent-memory"

    scope = {"project_id": project, "agent_id": "planner"}
    first = plugin.call("memory/put", {"scope": scope, "key": "db choice", "value": "The webshop uses PostgreSQL 16",
                                       "metadata": {"source": "meeting", "n": 3}})
    assert first["indexed_immediately"] is True
    got = plugin.call("memory/get", {"scope": scope, "key": "db choice"})
    assert got["found"] is True and got["value"] == "The webshop uses PostgreSQL 16"
    assert got["metadata"] == {"source": "meeting", "n": 3} and got["created_at"] and got["updated_at"]

    # idempotent per (scope, key): the same record, the old value in its history
    second = plugin.call("memory/put", {"scope": scope, "key": "db choice", "value": "The webshop moved to PostgreSQL 17"})
    assert second["record_id"] == first["record_id"]
    assert plugin.call("memory/get", {"scope": scope, "key": "db choice"})["value"] == "The webshop moved to PostgreSQL 17"
    handle = memory.for_user(user, project_id=project_of(project, user))
    wordings = [version.content for version in handle.history(first["record_id"])]
    assert any("PostgreSQL 16" in text for text in wordings) and any("PostgreSQL 17" in text for text in wordings)

    # a JSON value comes back as JSON; the same key in another scope is another record
    value = {"colour": "blue", "sizes": [1, 2.5], "nested": {"ok": True}}
    task_scope = {"project_id": project, "agent_id": "planner", "task_id": "t 1"}
    third = plugin.call("memory/put", {"scope": task_scope, "key": "db choice", "value": value})
    assert third["record_id"] != first["record_id"]
    assert plugin.call("memory/get", {"scope": task_scope, "key": "db choice"})["value"] == value
    long_text = "The style guide says: " + "prefer explicit names over clever ones. " * 250
    plugin.call("memory/put", {"scope": task_scope, "key": "style", "value": long_text})
    assert plugin.call("memory/get", {"scope": task_scope, "key": "style"})["value"] == long_text
    plugin.call("memory/delete_scope", {"scope": {**task_scope, "task_id": "nothing here"}})
    project_scope = {"project_id": project}
    assert plugin.call("memory/get", {"scope": project_scope, "key": "db choice"}) == {
        "found": False, "key": "db choice", "scope": project_scope}
    plugin.call("memory/put", {"scope": project_scope, "key": "hosting", "value": "We deploy the shop on Kubernetes"})

    # query: the scope and every scope below it, ranked
    hits = plugin.call("memory/query", {"scope": project_scope, "query": "which database version?", "top_k": 5})["hits"]
    assert hits and hits[0]["key"] == "db choice" and hits[0]["value"] == "The webshop moved to PostgreSQL 17"
    assert hits[0]["scope"] == scope and isinstance(hits[0]["score"], float)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert {h["key"] for h in hits} == {"db choice", "hosting", "style"} and len(hits) == 4
    below = plugin.call("memory/query", {"scope": task_scope, "query": "colour", "top_k": 5})["hits"]
    assert (below[0]["key"], below[0]["value"], below[0]["scope"]) == ("db choice", value, task_scope)
    assert {h["key"] for h in below} == {"db choice", "style"}  # only the task's
    one = plugin.call("memory/query", {"scope": project_scope, "query": "kubernetes deployment", "top_k": 1})["hits"]
    assert len(one) == 1 and one[0]["key"] == "hosting"


def test_ttl_expiry_and_maintenance(plugin: Plugin, memory: MemoryService, user: str) -> None:
    project = _uid("ttl project")
    plugin.call("initialize", {"project_id": project})
    scope = {"project_id": project, "agent_id": "a"}
    plugin.call("memory/put", {"scope": scope, "key": "short", "value": "The deploy token rotates hourly", "ttl_secs": 1})
    plugin.call("memory/put", {"scope": scope, "key": "long", "value": "The deploy runs every night", "ttl_secs": 3600})
    assert plugin.call("memory/get", {"scope": scope, "key": "short"})["found"] is True
    time.sleep(1.5)
    assert plugin.call("memory/get", {"scope": scope, "key": "short"})["found"] is False
    hits = plugin.call("memory/query", {"scope": scope, "query": "deploy token rotates", "top_k": 10})["hits"]
    assert [h["key"] for h in hits] == ["long"]
    handle = memory.for_user(user, project_id=project_of(project, user))
    assert len(handle.list(scope="project", status=["active", "archived"], limit=100)) == 1
    assert memory.maintain().expired >= 1  # the sweep deletes it for good
    assert plugin.call("memory/get", {"scope": scope, "key": "short"})["found"] is False
    assert plugin.call("memory/get", {"scope": scope, "key": "long"})["found"] is True


def test_list_scopes_pages_with_exact_ids_and_whole_segments(plugin: Plugin) -> None:
    project = _uid("List Project")
    plugin.call("initialize", {"project_id": project})
    agents = ["Acme Corp", "acme-corp", "acme corp", "ACME  CORP", "acme", "a/b", "ünï cödé", "日本", "x" * 200]
    expected = [{"project_id": project}]
    plugin.call("memory/put", {"scope": {"project_id": project}, "key": "k", "value": "project wide note here"})
    for agent in agents:
        plugin.call("memory/put", {"scope": {"project_id": project, "agent_id": agent}, "key": "k",
                                   "value": f"a note of the agent {agent}"})
        expected.append({"project_id": project, "agent_id": agent})
    for task in ("Task 1", "task-1"):
        scope = {"project_id": project, "agent_id": "acme", "task_id": task}
        plugin.call("memory/put", {"scope": scope, "key": "k", "value": f"a note of the task {task}"})
        expected.append(scope)
    plugin.call("memory/put", {"scope": {"project_id": project, "task_id": "solo"}, "key": "k",
                               "value": "a note of a task without agent"})
    expected.append({"project_id": project, "task_id": "solo"})

    seen: list[dict[str, str]] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"prefix": project, "limit": 4}
        if cursor is not None:
            params["cursor"] = cursor
        page = plugin.call("memory/list_scopes", params)
        assert len(page["scopes"]) <= 4
        seen.extend(page["scopes"])
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 4
    assert len(seen) == len(expected) and sorted(map(json.dumps, seen)) == sorted(map(json.dumps, expected))
    assert plugin.call("memory/list_scopes", {})["scopes"] == seen[:100]  # the same stable order without a prefix

    # whole segments: agent "acme" lists its tasks, never "acme-corp" or "acme corp"
    under = plugin.call("memory/list_scopes", {"prefix": {"project_id": project, "agent_id": "acme"}})["scopes"]
    assert sorted(map(json.dumps, under)) == sorted(map(json.dumps, [
        {"project_id": project, "agent_id": "acme"},
        {"project_id": project, "agent_id": "acme", "task_id": "Task 1"},
        {"project_id": project, "agent_id": "acme", "task_id": "task-1"}]))

    # projects whose ids share a prefix, or look alike, stay apart
    for other in ("acme", "acme-corp", "Acme Corp", "acme corp"):
        pid = f"{project}:{other}"
        plugin.call("initialize", {"project_id": pid})
        plugin.call("memory/put", {"scope": {"project_id": pid}, "key": "k", "value": f"the project {other} note"})
    for other in ("acme", "acme-corp", "Acme Corp", "acme corp"):
        pid = f"{project}:{other}"
        plugin.call("initialize", {"project_id": pid})
        assert plugin.call("memory/list_scopes", {"prefix": pid}) == {
            "scopes": [{"project_id": pid}], "next_cursor": None}
        assert plugin.call("memory/get", {"scope": {"project_id": pid}, "key": "k"})["value"] == \
            f"the project {other} note"
        code, message = plugin.error("memory/list_scopes", {"prefix": f"{project}:acme-corp" if other == "acme"
                                                            else f"{project}:acme"})
        assert code == -32307 and "bound" in message


def test_delete_scope_is_idempotent_and_covers_the_scopes_below(plugin: Plugin) -> None:
    project = _uid("delete me")
    plugin.call("initialize", {"project_id": project})
    keep = {"project_id": project, "agent_id": "keeper"}
    gone = {"project_id": project, "agent_id": "goner"}
    plugin.call("memory/put", {"scope": keep, "key": "k", "value": "the keeper keeps this note"})
    plugin.call("memory/put", {"scope": gone, "key": "k1", "value": "the goner wrote this note"})
    plugin.call("memory/put", {"scope": gone, "key": "k2", "value": "the goner wrote this too"})
    plugin.call("memory/put", {"scope": {**gone, "task_id": "t"}, "key": "k", "value": "a task note of the goner"})
    assert plugin.call("memory/delete_scope", {"scope": gone}) == {"deleted": 3}
    assert plugin.call("memory/delete_scope", {"scope": gone}) == {"deleted": 0}
    assert plugin.call("memory/delete_scope", {"scope": {"project_id": project, "agent_id": "never"}}) == {"deleted": 0}
    assert plugin.call("memory/get", {"scope": gone, "key": "k1"})["found"] is False
    assert plugin.call("memory/get", {"scope": keep, "key": "k"})["found"] is True
    assert plugin.call("memory/list_scopes", {})["scopes"] == [keep]
    assert plugin.call("memory/delete_scope", {"scope": {"project_id": project}}) == {"deleted": 1}
    assert plugin.call("memory/list_scopes", {}) == {"scopes": [], "next_cursor": None}


def test_read_after_write_across_processes(plugin: Plugin, dsn: str, user: str) -> None:
    project = _uid("shared")
    other = Plugin(dsn, user)
    try:
        other.call("initialize", {"project_id": project})
        plugin.call("initialize", {"project_id": project})
        scope = {"project_id": project, "agent_id": "writer"}
        for i in range(3):
            value = f"The release number {i} ships on Friday"
            plugin.call("memory/put", {"scope": scope, "key": "release", "value": value})
            assert other.call("memory/get", {"scope": scope, "key": "release"})["value"] == value
            hits = other.call("memory/query", {"scope": {"project_id": project}, "query": "release", "top_k": 3})["hits"]
            assert [h["value"] for h in hits] == [value]
        other.call("memory/put", {"scope": scope, "key": "back", "value": "Written by the other process"})
        assert plugin.call("memory/get", {"scope": scope, "key": "back"})["value"] == "Written by the other process"
        other.call("memory/delete_scope", {"scope": scope})
        assert plugin.call("memory/get", {"scope": scope, "key": "release"})["found"] is False
    finally:
        assert other.close() == 0


def test_a_derived_project_is_the_plugin_users_own(plugin: Plugin, memory: MemoryService, user: str) -> None:
    """Issue 28: a label that is not a project id of ours maps to a project anyone could compute.
    Another user who made it first and added the plugin's user as an editor read everything the
    plugin wrote there; now such a project is refused with -32307 and nothing reaches it."""
    mallory = _uid("mallory")
    secret = "The vault combination changes every Monday"

    def nothing_reached(pid: str) -> None:
        seen = memory.for_user(mallory, project_id=pid).list(scope="project", limit=100)
        assert not any("vault" in item.content for item in seen)

    # claimed before the plugin's first call
    label = _uid("Team Notes")
    pid = project_of(label, user)
    memory.create_project(pid, user_id=mallory)
    memory.add_member("project", pid, user, "editor", user_id=mallory)
    code, message = plugin.error("initialize", {"project_id": label})
    assert code == -32307 and "another user already owns" in message and pid in message
    assert plugin.error("memory/put", {"scope": {"project_id": label}, "key": "k", "value": secret})[0] == -32307
    nothing_reached(pid)

    # claimed by the plugin, then gone and claimed by someone else while the session is bound
    label = _uid("Ops Notes")
    pid = project_of(label, user)
    scope = {"project_id": label, "agent_id": "ops"}
    plugin.call("initialize", {"project_id": label})
    assert [(m.scope_id, m.role.value) for m in memory.memberships(user_id=user, scope="project", prefix=pid)] == [
        (pid, "owner")]
    plugin.call("memory/put", {"scope": scope, "key": "standup", "value": "The standup is at nine"})
    memory.delete_scope("project", pid, user_id=user)
    memory.create_project(pid, user_id=mallory)
    memory.add_member("project", pid, user, "editor", user_id=mallory)
    for method, params in [("memory/put", {"scope": scope, "key": "vault", "value": secret}),
                           ("memory/get", {"scope": scope, "key": "standup"}),
                           ("memory/query", {"scope": scope, "query": "standup"}),
                           ("memory/list_scopes", {}),
                           ("memory/delete_scope", {"scope": scope})]:
        assert plugin.error(method, params)[0] == -32307, method
    nothing_reached(pid)

    # the same label from another user's plugin is another project, of that user's own
    assert project_of(label, mallory) != pid
    project_of_valid = _uid("shared-web")  # a project id of ours still names that very project
    assert project_of(project_of_valid, user) == project_of_valid


def test_ids_of_256_characters_in_any_script(plugin: Plugin) -> None:
    """Issue 28: the 256-character limit was applied after the store escaped each non-ASCII
    character to six, so a 43-character Japanese project id was already too long."""
    long_ids = {"project_id": "プロジェクト" * 42 + "αβγδ", "agent_id": "é" * 256, "task_id": "#" + "т" * 255}
    key = "鍵" * 256
    plugin.call("initialize", {"project_id": long_ids["project_id"]})
    plugin.call("memory/put", {"scope": long_ids, "key": key, "value": "A note kept under very long ids"})
    plugin.call("memory/put", {"scope": {**long_ids, "task_id": "short"}, "key": "k", "value": "A note beside it"})
    got = plugin.call("memory/get", {"scope": long_ids, "key": key})
    assert got["found"] is True and got["value"] == "A note kept under very long ids" and got["scope"] == long_ids
    hits = plugin.call("memory/query", {"scope": {"project_id": long_ids["project_id"]}, "query": "long ids"})["hits"]
    assert {(h["key"], json.dumps(h["scope"])) for h in hits} == {
        (key, json.dumps(long_ids)), ("k", json.dumps({**long_ids, "task_id": "short"}))}
    listed = plugin.call("memory/list_scopes", {})["scopes"]
    assert sorted(map(json.dumps, listed)) == sorted(map(json.dumps, [
        {"project_id": long_ids["project_id"], "agent_id": long_ids["agent_id"], "task_id": task}
        for task in (long_ids["task_id"], "short")]))
    code, message = plugin.error("memory/put", {"scope": long_ids, "key": key + "x", "value": "too long a key"})
    assert code == -32602 and "at most 256" in message
    assert plugin.call("memory/delete_scope", {"scope": long_ids}) == {"deleted": 1}


def test_ttl_secs_is_checked_in_seconds(plugin: Plugin) -> None:
    project = _uid("ttl units")
    plugin.call("initialize", {"project_id": project})
    good = {"scope": {"project_id": project}, "key": "k", "value": "A value that expires"}
    for ttl in [1e-9, 0.0001, 0, -1, 1e12, float("inf")]:
        code, message = plugin.error("memory/put", {**good, "ttl_secs": ttl})
        assert code == -32602 and message.startswith("ttl_secs:") and "seconds" in message, message
        assert "minute" not in message
    assert plugin.call("memory/put", {**good, "ttl_secs": 0.5})["indexed_immediately"] is True


# --- malformed messages --------------------------------------------------------------------------

def test_malformed_messages_get_the_right_code_and_the_loop_goes_on(dsn: str, memory: MemoryService) -> None:
    server = Plugin(dsn, _uid("bad"))
    project = _uid("bad project")
    scope = {"project_id": project}
    checked = 0
    try:
        def expect(code: int, answer: dict[str, Any], rid: Any = "keep") -> None:
            nonlocal checked
            assert "error" in answer, answer
            assert answer["error"]["code"] == code, answer
            assert answer["jsonrpc"] == "2.0" and len(answer["error"]["message"]) > 10
            if rid != "keep":
                assert answer["id"] == rid
            checked += 1

        # before initialize
        for method, params in [("memory/put", {"scope": scope, "key": "k", "value": "v"}),
                               ("memory/get", {"scope": scope, "key": "k"}),
                               ("memory/query", {"scope": scope, "query": "q"}),
                               ("memory/list_scopes", {}),
                               ("memory/delete_scope", {"scope": scope})]:
            expect(-32307, server.request(method, params))

        # not JSON-RPC at all
        for line in ["{", "not json", "{'single': 'quotes'}", '{"jsonrpc": "2.0", "id": 1,', "[1, 2", "nul\x01l",
                     '"\\ud800 lone"x', "1e99999x"]:
            expect(-32700, server.raw(line), None)
        expect(-32700, server.raw(b"\xff\xfe not utf-8"), None)
        expect(-32700, server.raw("[" * 100_000 + "]" * 100_000), None)
        expect(-32600, server.raw("x" * (1 << 20) + "tail"), None)  # over the line limit: refused, then skipped

        # JSON but not a request
        for line in ["[]", "[{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"initialize\"}]", "42", '"text"', "null",
                     "true", '{"jsonrpc": "1.0", "id": 5, "method": "initialize"}', '{"id": 6, "method": "initialize"}',
                     '{"jsonrpc": "2.0", "id": 7}', '{"jsonrpc": "2.0", "id": 8, "method": 12}',
                     '{"jsonrpc": "2.0", "id": 9, "method": null}',
                     '{"jsonrpc": "2.0", "id": 10, "method": "initialize", "extra": 1}']:
            expect(-32600, server.raw(line))
        for bad_id in [True, 1.5, [1], {"a": 1}]:
            expect(-32600, server.raw(json.dumps({"jsonrpc": "2.0", "id": bad_id, "method": "initialize"})), None)

        # unknown methods
        for method in ["memory/nope", "", "Initialize", "memory/put ", "rpc.discover", "x" * 10_000]:
            expect(-32601, server.request(method, {}))

        # initialize badly
        for params in [{}, {"project_id": ""}, {"project_id": 5}, {"project_id": None}, {"project_id": ["p"]},
                       {"project_id": "p\x00"}, {"project_id": "x" * 1000}, {"project_id": "p", "agent_id": 3},
                       {"project_id": "p", "bogus": 1}]:
            expect(-32602, server.request("initialize", params))
        for params in [[project], "project", 7]:
            expect(-32602, server.request("initialize", params))

        server.call("initialize", {"project_id": project})

        # another project
        for method, params in [("memory/put", {"scope": {"project_id": "other"}, "key": "k", "value": "a value here"}),
                               ("memory/get", {"scope": {"project_id": project + " "}, "key": "k"}),
                               ("memory/query", {"scope": {"project_id": project.upper()}, "query": "q"}),
                               ("memory/list_scopes", {"prefix": "other"}),
                               ("memory/list_scopes", {"prefix": {"project_id": "other"}}),
                               ("memory/delete_scope", {"scope": {"project_id": "other"}})]:
            expect(-32307, server.request(method, params))

        # top_k
        limit = memory.config.max_k
        for top_k in [limit + 1, 10**6, 2**70]:
            expect(-32306, server.request("memory/query", {"scope": scope, "query": "q", "top_k": top_k}))
        for top_k in [0, -1, "5", 2.5, True, None]:
            expect(-32602, server.request("memory/query", {"scope": scope, "query": "q", "top_k": top_k}))

        # invalid params
        good = {"scope": scope, "key": "k", "value": "a perfectly fine value"}
        for params in [{}, {"scope": scope}, {"scope": scope, "key": "k"}, {**good, "scope": None},
                       {**good, "scope": "p"}, {**good, "scope": [project]}, {**good, "scope": {}},
                       {**good, "scope": {**scope, "agent_id": 1}}, {**good, "scope": {**scope, "team_id": "t"}},
                       {**good, "key": 1}, {**good, "key": ""}, {**good, "key": None}, {**good, "key": "k\x00"},
                       {**good, "key": "k" * 5000}, {**good, "value": ""}, {**good, "value": "  "}, {**good, "value": None},
                       {**good, "value": "x" * 200_000}, {**good, "value": {"big": "y" * 200_000}},
                       {**good, "value": "my password is hunter2 and AKIAIOSFODNN7EXAMPLE"},
                       {**good, "ttl_secs": 0}, {**good, "ttl_secs": -5}, {**good, "ttl_secs": "60"},
                       {**good, "ttl_secs": True}, {**good, "metadata": "m"}, {**good, "metadata": [1]},
                       {**good, "metadata": {"x": "z" * 100_000}}, {**good, "surprise": 1}]:
            expect(-32602, server.request("memory/put", params))
        for params in [{}, {"scope": scope}, {"key": "k"}, {"scope": scope, "key": 5}, {"scope": 5, "key": "k"}]:
            expect(-32602, server.request("memory/get", params))
        for params in [{"scope": scope}, {"scope": scope, "query": ""}, {"scope": scope, "query": 5},
                       {"scope": scope, "query": "x" * 10_000}, {"query": "q"}]:
            expect(-32602, server.request("memory/query", params))
        for params in [{"cursor": "abc"}, {"cursor": -1}, {"cursor": "-1"}, {"limit": 0}, {"limit": 10**6},
                       {"limit": "5"}, {"prefix": 5}, {"prefix": ""}, {"what": 1}]:
            expect(-32602, server.request("memory/list_scopes", params))
        for params in [{}, {"scope": "p"}, {"scope": {"agent_id": "a"}}]:
            expect(-32602, server.request("memory/delete_scope", params))
        for method in ["memory/put", "memory/get", "memory/query", "memory/delete_scope"]:
            expect(-32602, server.request(method, [scope, "k"]))

        # notifications get no answer, even bad ones; the next request is answered in order
        server.send_line(json.dumps({"jsonrpc": "2.0", "method": "memory/nope"}))
        server.send_line(json.dumps({"jsonrpc": "2.0", "method": "memory/put", "params": {"scope": 1}}))
        server.send_line(json.dumps({"jsonrpc": "2.0", "method": "memory/put",
                                     "params": {**good, "key": "from a notification"}}))
        server.send_line("")
        server.send_line("   ")
        rid = "string id ü"
        answer = server.raw(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "memory/get",
                                        "params": {"scope": scope, "key": "from a notification"}}))
        assert answer["id"] == rid and answer["result"]["found"] is True
        assert server.raw(json.dumps({"jsonrpc": "2.0", "id": None, "method": "memory/list_scopes"}))["id"] is None

        # a project of ours that the plugin's user is no member of
        owned = _uid("owned")
        memory.create_project(owned, user_id=_uid("owner"))
        server.call("initialize", {"project_id": owned})
        expect(-32307, server.request("memory/put", {**good, "scope": {"project_id": owned}}))
        server.call("initialize", {"project_id": project})

        assert checked >= 50, checked
        # and the loop still serves
        put = server.call("memory/put", good)
        assert put["indexed_immediately"] is True
        assert server.call("memory/get", {"scope": scope, "key": "k"})["value"] == "a perfectly fine value"
    finally:
        assert server.close() == 0


def test_an_unreachable_database_answers_minus_32304_and_the_loop_goes_on() -> None:
    server = Plugin("postgresql://nobody:secret@127.0.0.1:1/none", "alice")  # no model is loaded: fails fast
    try:
        for _ in range(2):
            code, message = server.error("initialize", {"project_id": "p"})
            assert code == -32304 and "could not connect" in message and "secret" not in message
        assert server.error("memory/get", {"scope": {"project_id": "p"}, "key": "k"})[0] == -32307
        assert server.error("memory/nope")[0] == -32601
    finally:
        assert server.close() == 0


def test_a_user_given_is_checked_and_the_flag_wins_over_the_environment(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for argv in (["--user", ""], ["--user", " alice"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        assert "--user" in capsys.readouterr().err
    monkeypatch.setenv("MEMORY_STORE_USER", " alice")
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2 and "MEMORY_STORE_USER" in capsys.readouterr().err
    assert server_setting("MEMORY_STORE_USER", {"MEMORY_STORE_USER": "bob"}) == "bob"
    assert server_setting("MEMORY_STORE_USER", {"MEMORY_STORE_USER": "  "}) is None  # blank is unset
    assert server_setting("MEMORY_STORE_USER", {}) is None


def test_started_bare_it_serves_the_plugin_principal_whose_data_nobody_else_reaches(
        dsn: str, memory: MemoryService) -> None:
    """The daemon starts plugins with no arguments: the plugin answers, acts for
    PLUGIN_PRINCIPAL, and what it stores is that principal's alone."""
    bare = Plugin(dsn, None)
    named = Plugin(dsn, None, MEMORY_STORE_USER=_uid("env-user"))
    try:
        label = _uid("Daemon Notes")
        info = bare.call("initialize", {"project_id": label})
        assert info["session"]["user_id"] == PLUGIN_PRINCIPAL
        scope = {"project_id": label, "agent_id": "worker"}
        put = bare.call("memory/put", {"scope": scope, "key": "vault", "value": "The vault code is 4711"})
        got = bare.call("memory/get", {"scope": scope, "key": "vault"})
        assert got["found"] is True and got["value"] == "The vault code is 4711"
        pid = project_of(label, PLUGIN_PRINCIPAL)
        mine = memory.for_user(PLUGIN_PRINCIPAL, project_id=pid).list(scope="project", limit=10)
        assert [str(item.id) for item in mine] == [put["record_id"]]

        # another principal: a user, the same project id, a plugin for another user
        other = _uid("someone")
        for handle in (memory.for_user(other, project_id=pid), memory.for_user(other)):
            assert not any("vault" in item.content for item in handle.search("vault code", k=20))
            assert not any("vault" in item.content for item in handle.list(limit=100))
        assert named.call("initialize", {"project_id": label})["session"]["user_id"].startswith("env-user-")
        assert named.call("memory/get", {"scope": scope, "key": "vault"})["found"] is False
        assert named.call("memory/query", {"scope": {"project_id": label}, "query": "vault code"})["hits"] == []
    finally:
        assert bare.close() == 0
        assert named.close() == 0


# --- the process ends: what it started stops ---------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_plugin_and_the_embedded_postgres_it_started(sig: int) -> None:
    """Without DATABASE_URL the plugin starts the embedded server; a stop signal while the daemon
    keeps the pipe open ends the plugin with status 0, and the server with it."""
    base = Path(tempfile.mkdtemp(prefix="am-ms-"))  # not under pytest's 0700 root: as root postgres is another user
    data_dir = base / "pgdata"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    proc = subprocess.Popen([sys.executable, "-m", "agent_memory.servers.memory_store", "--user", "alice"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=dict(env, MEMORY_DATA_DIR=str(data_dir)))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                     "params": {"project_id": "p"}}).encode() + b"\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], TIMEOUT)
        assert ready and "result" in json.loads(proc.stdout.readline())
        stops_its_postgres(proc, data_dir, sig)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()
        stop_embedded_server(data_dir)
        shutil.rmtree(base, ignore_errors=True)


