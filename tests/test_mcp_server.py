"""The MCP server (agent_memory.servers.mcp), driven by the mcp SDK's own client.

One stdio server process and one HTTP server process (each loads the embedding model), both on
the session's test database; everything stays on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

mcp = pytest.importorskip("mcp")

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from agent_memory.db.embedded import stop_embedded_server
from server_processes import postmaster, stops_its_postgres
from agent_memory.errors import ConfigurationError, InvalidInputError
from agent_memory.middleware.tools import SAVE_DESCRIPTION, SEARCH_DESCRIPTION
from agent_memory.models import Identity
from agent_memory.servers.mcp import main
from agent_memory.servers.mcp_auth import (
    StaticTokenVerifier,
    hash_token,
    load_tokens,
    parse_tokens,
)

TOOLS = {"memory_save", "memory_search", "memory_delete", "memory_stats", "memory_list", "memory_history",
         "document_search", "memory_explore", "memory_traverse"}
IDENTITY_ARGS = {"user_id", "project_id", "session_id", "team_id", "org_id", "user", "identity"}


def _env(dsn: str) -> dict[str, str]:
    return dict(os.environ, DATABASE_URL=dsn)


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", None) == "text")


# --- tokens (no server) -----------------------------------------------------------------------

def test_tokens_are_stored_hashed_and_checked(tmp_path: Path) -> None:
    digest = hash_token("s3cret")
    assert len(digest) == 64 and digest != "s3cret"
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({f"sha256:{digest}": {"user_id": "alice", "project_id": "web"}}))
    tokens = load_tokens(path)
    assert tokens == {digest: Identity(user_id="alice", project_id="web")}
    verifier = StaticTokenVerifier(tokens)
    assert verifier.lookup("s3cret") == Identity(user_id="alice", project_id="web")
    assert verifier.lookup("s3cre") is None and verifier.lookup(digest) is None  # the hash is not a token
    with pytest.raises(ConfigurationError, match="not a sha256 hash"):
        parse_tokens({"s3cret": {"user_id": "alice"}})  # a raw token in the file is refused
    with pytest.raises(ConfigurationError, match="unknown keys"):
        parse_tokens({digest: {"user_id": "alice", "session_id": "s"}})
    with pytest.raises(ConfigurationError, match="user_id"):
        parse_tokens({digest: {"project_id": "web"}})


def test_hash_token_command(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("s3cret\n"))
    assert main(["hash-token"]) == 0
    assert capsys.readouterr().out.strip() == hash_token("s3cret")
    assert main(["hash-token", "s3cret"]) == 2  # never from argv (shell history, ps)


def test_hash_token_refuses_what_http_cannot_carry(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 28: hash-token hashed non-ASCII tokens as UTF-8, but the server reads a header as
    Latin-1, so such a token never authenticated. hash-token refuses it now, and every token it
    accepts is found when presented the way the server decodes it."""
    import io
    import random
    import string

    for token in ["pässwörd-1234", "токен-секрет", "two words", "tab\there", "trailing "]:
        with pytest.raises(InvalidInputError, match="printable ASCII"):
            hash_token(token)
        monkeypatch.setattr(sys, "stdin", io.StringIO(token + "\n"))
        assert main(["hash-token"]) == 2
        error = capsys.readouterr().err
        assert "printable ASCII" in error and token.strip() not in error  # the secret is not echoed
    rng = random.Random(28)
    visible = "".join(c for c in string.printable if "!" <= c <= "~")
    tokens = ["".join(rng.choice(visible) for _ in range(40)) for _ in range(50)]
    verifier = StaticTokenVerifier({hash_token(t): Identity(user_id=f"u{i}") for i, t in enumerate(tokens)})
    for i, token in enumerate(tokens):
        assert verifier.lookup(token.encode("utf-8").decode("latin-1")) == Identity(user_id=f"u{i}")


def test_bad_flags_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--transport", "stdio"]) == 2  # no --user
    assert "user_id" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--transport", "http", "--user", "alice"])  # over http tokens name the principal
    with pytest.raises(SystemExit):
        main(["--transport", "http"])  # no --tokens


# --- stdio ------------------------------------------------------------------------------------

async def test_stdio_server(dsn: str, memory: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agent_memory.servers.mcp", "--transport", "stdio", "--user", f"mcp-{tag}",
              "--project", f"mcpproj-{tag}"],
        env=_env(dsn),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        assert tools["memory_save"].description == SAVE_DESCRIPTION and tools["memory_search"].description == SEARCH_DESCRIPTION
        for tool in tools.values():
            assert not IDENTITY_ARGS & set(tool.input_schema.get("properties", {})), tool.name

        saved = await session.call_tool("memory_save", {"content": "Prefers concise answers with Python examples",
                                                        "memory_type": "preference"})
        assert not saved.is_error and _text(saved).startswith("Saved memory "), _text(saved)
        memory_id = _text(saved).split()[2]
        await session.call_tool("memory_save", {"content": "The webshop runs on PostgreSQL 16",
                                                "scope": "project", "memory_type": "decision"})

        found = await session.call_tool("memory_search", {"query": "which database does the webshop use?"})
        assert not found.is_error and "PostgreSQL 16" in _text(found)
        listed = await session.call_tool("memory_list", {})
        assert memory_id in _text(listed) and "PostgreSQL 16" in _text(listed)
        history = await session.call_tool("memory_history", {"memory_id": memory_id})
        assert not history.is_error and "concise answers" in _text(history)
        stats = await session.call_tool("memory_stats", {})
        assert not stats.is_error and "active memories" in _text(stats)

        # the knowledge graph: the principal's own, and errors the model can act on
        sister = await session.call_tool("memory_save", {"content": "My sister Sarah works at Acme."})
        explored = await session.call_tool("memory_explore", {"text_matches": ["Sarah"]})
        assert not explored.is_error and '"relationship_type":"sister"' in _text(explored), _text(explored)
        walked = await session.call_tool("memory_traverse", {"seed_nodes": ["Sarah"], "top_k": 5})
        assert not walked.is_error and '"name":"Sarah"' in _text(walked)
        unknown = await session.call_tool("memory_traverse", {"seed_nodes": ["Nobody Known"]})
        assert unknown.is_error and "no node named" in _text(unknown)
        await session.call_tool("memory_delete", {"memory_id": _text(sister).split()[2]})

        # documents: the principal's project's passages, never another user's
        memory.for_user(f"mcp-{tag}", project_id=f"mcpproj-{tag}").add_document(
            "# Runbook\n\n## Deploys\n\nDeploys go out on Tuesdays after the review.", scope="project",
            title="Runbook", llm=None)
        memory.for_user(f"other-{tag}").add_document("Deploys of the hidden project go out on Fridays.",
                                                     title="Hidden", llm=None)
        passages = _text(await session.call_tool("document_search", {"query": "when do deploys go out?", "k": 50}))
        assert "[Runbook, section Runbook / Deploys]" in passages and "Tuesdays" in passages, passages
        assert "Fridays" not in passages and "Hidden" not in passages
        bad_k = await session.call_tool("document_search", {"query": "deploys", "k": 0})
        assert bad_k.is_error and "k" in _text(bad_k)

        uris = {str(r.uri) for r in (await session.list_resources()).resources}
        assert {"memory://profile/user", "memory://profile/project"} <= uris
        profile = await session.read_resource("memory://profile/user")
        assert "concise" in profile.contents[0].text
        project = await session.read_resource("memory://profile/project")
        assert "PostgreSQL" in project.contents[0].text

        # errors are tool results with isError and the agent tools' texts, and the session goes on
        refused = await session.call_tool("memory_save", {"content": "my password is hunter2hunter2!"})
        assert refused.is_error and _text(refused).startswith("Not saved:")
        missing = await session.call_tool("memory_delete", {"memory_id": str(uuid.uuid4())})
        assert missing.is_error and "No memory with that id is visible to you" in _text(missing)
        bad = await session.call_tool("memory_delete", {"memory_id": "not-a-uuid"})
        assert bad.is_error and _text(bad).startswith("Invalid argument")
        deleted = await session.call_tool("memory_delete", {"memory_id": memory_id})
        assert not deleted.is_error and _text(deleted).startswith("Deleted (archived) memory")

    assert [i.content for i in memory.for_user(f"mcp-{tag}").list()] == []  # the user memory is archived


# --- streamable HTTP --------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def http_server(dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An HTTP server subprocess with two tokens, for two users of one project."""
    tag = uuid.uuid4().hex[:8]
    users = {"alice": f"alice-{tag}", "bob": f"bob-{tag}"}
    tokens = {name: f"token-{name}-{uuid.uuid4().hex}" for name in users}
    path = tmp_path_factory.mktemp("mcp") / "tokens.json"
    path.write_text(json.dumps({hash_token(tokens[n]): {"user_id": users[n]} for n in users}))
    port = _free_port()
    log = (path.parent / "server.log").open("w+b")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_memory.servers.mcp", "--transport", "http", "--port", str(port),
         "--tokens", str(path)],
        env=_env(dsn), stdout=subprocess.DEVNULL, stderr=log,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 90
    try:
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise AssertionError(f"the server exited: {log.read().decode(errors='replace')}")
            try:
                httpx2.get(url, timeout=2)
                break
            except httpx2.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        yield {"url": url, "tokens": tokens, "users": users}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@asynccontextmanager
async def _client(url: str, token: str):
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_http_needs_a_valid_token(http_server: dict[str, Any]) -> None:
    url = http_server["url"]
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx2.AsyncClient() as http:
        missing = await http.post(url, json=init, headers=headers)
        wrong = await http.post(url, json=init, headers=dict(headers, Authorization="Bearer not-a-token"))
        hashed = await http.post(url, json=init, headers=dict(
            headers, Authorization=f"Bearer {hash_token(http_server['tokens']['alice'])}"))
        good = await http.post(url, json=init, headers=dict(
            headers, Authorization=f"Bearer {http_server['tokens']['alice']}"))
    assert missing.status_code == 401 and wrong.status_code == 401
    assert hashed.status_code == 401  # the stored hash is no token
    assert good.status_code == 200


async def test_http_principals_see_only_their_own_memories(http_server: dict[str, Any]) -> None:
    url, tokens, users = http_server["url"], http_server["tokens"], http_server["users"]
    async with _client(url, tokens["alice"]) as alice:
        saved = await alice.call_tool("memory_save", {"content": "Alice keeps her bees in Lisbon",
                                                      "memory_type": "fact"})
        assert not saved.is_error, _text(saved)
        alice_id = _text(saved).split()[2]
        # identity through the arguments: not in the schema, and ignored or refused, never obeyed
        forged = await alice.call_tool("memory_save", {"content": "Alice also keeps goats near Porto",
                                                       "user_id": users["bob"]})
        forged_search = await alice.call_tool("memory_search", {"query": "bees", "user_id": users["bob"]})
        assert forged_search.is_error or "bees in Lisbon" in _text(forged_search)

    async with _client(url, tokens["bob"]) as bob:
        tools = (await bob.list_tools()).tools
        assert {t.name for t in tools} == TOOLS
        assert all(not IDENTITY_ARGS & set(t.input_schema.get("properties", {})) for t in tools)
        found = await bob.call_tool("memory_search", {"query": "where does Alice keep bees and goats?"})
        assert not found.is_error
        assert "Lisbon" not in _text(found) and "Porto" not in _text(found)
        assert "No memories" in _text(await bob.call_tool("memory_list", {}))
        stolen = await bob.call_tool("memory_delete", {"memory_id": alice_id})
        assert stolen.is_error and "No memory with that id is visible to you" in _text(stolen)
        history = await bob.call_tool("memory_history", {"memory_id": alice_id})
        assert history.is_error
        await bob.call_tool("memory_save", {"content": "Bob drinks his coffee black", "memory_type": "preference"})
        profile = await bob.read_resource("memory://profile/user")
        assert "bees" not in profile.contents[0].text

    async with _client(url, tokens["alice"]) as alice:
        listed = _text(await alice.call_tool("memory_list", {}))
        assert "bees in Lisbon" in listed and "coffee" not in listed
        if not forged.is_error:  # an ignored user_id: the memory is alice's
            assert "goats near Porto" in listed
        assert "black" not in _text(await alice.call_tool("memory_search", {"query": "coffee"}))


# --- the process ends: what it started stops ---------------------------------------------------

@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    """An embedded PostgreSQL data directory of this module's own (no DATABASE_URL): made with
    mkdtemp, not under pytest's 0700 temp root, because as root the server runs as another user."""
    base = Path(tempfile.mkdtemp(prefix="am-mcp-"))
    try:
        yield base / "pgdata"
    finally:
        stop_embedded_server(base / "pgdata")
        shutil.rmtree(base, ignore_errors=True)


def _embedded_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    return dict(env, MEMORY_DATA_DIR=str(data_dir))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_http_server_stops_its_embedded_postgres_when_signalled(sig: int, data_dir: Path, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({hash_token("t0ken"): {"user_id": "alice"}}))
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_memory", "mcp", "--transport", "http", "--port", str(port),  # agent-memory mcp
         "--tokens", str(tokens)], env=_embedded_env(data_dir), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, "the server exited before answering"
            try:
                assert httpx2.get(f"http://127.0.0.1:{port}/mcp", timeout=2).status_code == 401
                break
            except httpx2.TransportError:
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.3)
        stops_its_postgres(proc, data_dir, sig)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_stdio_server_stops_its_embedded_postgres_on_sigterm(data_dir: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_memory.servers.mcp", "--transport", "stdio", "--user", "alice"],
        env=_embedded_env(data_dir), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        proc.stdin.write(json.dumps(init).encode() + b"\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 90)
        assert ready and json.loads(proc.stdout.readline())["id"] == 1
        stops_its_postgres(proc, data_dir, signal.SIGTERM)  # stdin still open: the signal ends it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()


# --- in process: the schema, the profile resource, the command's help ---------------------------

async def test_memory_search_k_is_bounded_in_the_schema_and_out_of_bounds_is_an_error_to_act_on(memory: Any) -> None:
    from agent_memory.middleware.backend import MemoryBackend
    from agent_memory.servers.mcp import build_server

    from mcp.client.client import Client

    tag = uuid.uuid4().hex[:8]
    server = build_server(MemoryBackend.of(memory), Identity(user_id=f"k-{tag}"))
    async with Client(server) as client:  # in process, through the protocol as a model's client sees it
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        k = tools["memory_search"].input_schema["properties"]["k"]
        assert (k["minimum"], k["maximum"]) == (1, 20) and "1 to 20" in k["description"]
        await client.call_tool("memory_save", {"content": "Keeps bees on the roof of the office"})
        for bad, bound in ((0, "greater than or equal to 1"), (-3, "greater than or equal to 1"),
                           (21, "less than or equal to 20"), (1000, "less than or equal to 20")):
            result = await client.call_tool("memory_search", {"query": "bees", "k": bad})
            assert result.is_error and "memory_search" in _text(result) and bound in _text(result), _text(result)
        for good in (1, 20):
            result = await client.call_tool("memory_search", {"query": "bees", "k": good})
            assert not result.is_error and "bees" in _text(result)


async def test_the_project_profile_is_the_projects_from_the_start(memory: Any) -> None:
    """A session with a project reads that project's (empty) profile before anything is saved
    there; only a session without a project says it has none."""
    from agent_memory.middleware.backend import MemoryBackend
    from agent_memory.servers.mcp import build_server

    tag = uuid.uuid4().hex[:8]
    backend = MemoryBackend.of(memory)

    async def project_text(identity: Identity) -> str:
        from mcp.client.client import Client

        async with Client(build_server(backend, identity)) as client:
            return str((await client.read_resource("memory://profile/project")).contents[0].text)

    with_project = Identity(user_id=f"pp-{tag}", project_id=f"proj-{tag}")
    assert "empty so far" in await project_text(with_project)
    assert "no project" in await project_text(Identity(user_id=f"pp-{tag}"))
    memory.for_user(f"pp-{tag}", project_id=f"proj-{tag}").add(
        "The project deploys with Helm charts", scope="project", memory_type="decision")
    assert "Helm" in await project_text(with_project)


def test_the_servers_help_names_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    from agent_memory.servers import memory_store

    for server_main, command in ((main, "agent-memory mcp"), (memory_store.main, "agent-memory memory-store")):
        with pytest.raises(SystemExit):
            server_main(["--help"])
        out = capsys.readouterr().out
        assert out.startswith(f"usage: {command}") and "python -m" not in out


def test_without_the_mcp_package_the_command_says_how_to_install_it_in_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from agent_memory.cli import main as cli_main

    for name in [n for n in sys.modules if n == "mcp" or n.startswith("mcp.")]:
        monkeypatch.setitem(sys.modules, name, None)  # importing mcp now fails as if it were not installed
    monkeypatch.delitem(sys.modules, "agent_memory.servers.mcp")
    assert cli_main(["mcp", "--transport", "stdio", "--user", "alice"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and captured.out == "", captured.err
    assert lines[0].startswith("agent-memory mcp: error: the MCP server needs the mcp package")
    assert "pip install -e '.[mcp]'" in lines[0] and ".whl[mcp]" in lines[0] and "not from PyPI" in lines[0]
    assert "agent-memory[mcp]" not in lines[0]
