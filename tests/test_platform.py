"""LangGraph Platform: the store under ``langgraph dev``, driven by the ``langgraph-sdk`` client.

The server is the in-memory one from ``langgraph-cli[inmem]``, started once for the module on a
free 127.0.0.1 port with the app in ``tests/platform_app`` (a bearer-token auth handler for two
users, ``agent_memory.store.platform.make_store`` as its store, the local model named by
``index.embed``) over a fresh database. Nothing leaves the machine: no browser, no reload, no
version check, no analytics, no tracing.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_memory import MemoryService

pytestmark = pytest.mark.slow

APP = Path(__file__).parent / "platform_app"
TOKENS = {"alice": "token-alice", "bob": "token-bob"}
#: environment that keeps `langgraph dev` off the network
OFFLINE = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_API_KEY": "",
    "LANGSMITH_TRACING_V2": "false",
}


def _missing() -> str | None:
    for module in ("langgraph_cli", "langgraph_api", "langgraph_runtime_inmem", "langgraph_sdk"):
        try:
            __import__(module)
        except ImportError:
            return (f"{module} is not installed: install the test extra (pip install -e '.[test]'), which has "
                    "langgraph-cli[inmem] and langgraph-sdk")
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path, deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"langgraph dev exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"langgraph dev did not answer within the deadline:\n{log.read_text()[-4000:]}")


@pytest.fixture(scope="module")
def platform(fresh_dsn: Callable[[], str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``{"url": ..., "dsn": ...}`` of a running ``langgraph dev`` with the platform app."""
    reason = _missing()
    if reason:
        print(f"skipping the LangGraph Platform tests: {reason}")
        pytest.skip(reason)
    dsn = fresh_dsn()
    with MemoryService(dsn):  # migrate before the server starts, as a deployment would
        pass
    app = tmp_path_factory.mktemp("platform_app")
    for path in APP.iterdir():
        if path.is_file():
            shutil.copy(path, app / path.name)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = app / "server.log"
    env = {**os.environ, **OFFLINE, "DATABASE_URL": dsn, "PYTHONPATH": str(app)}
    command = [sys.executable, "-m", "langgraph_cli", "dev", "--host", "127.0.0.1", "--port", str(port),
               "--no-browser", "--no-reload", "--config", str(app / "langgraph.json")]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=app, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        _wait_until_up(url, process, log, time.monotonic() + 300)
        yield {"url": url, "dsn": dsn, "log": log}
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)


def _client(platform: dict[str, Any], user: str) -> Any:
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=platform["url"], headers={"Authorization": f"Bearer {TOKENS[user]}"})


def _run(platform: dict[str, Any], user: str, payload: dict[str, Any], **kwargs: Any) -> Any:
    client = _client(platform, user)
    thread = client.threads.create()
    return client.runs.wait(thread["thread_id"], "notes", input=payload, raise_error=False, **kwargs)


def _error(answer: Any) -> str | None:
    """The error class name a failed run answered with (``None``: the run succeeded)."""
    error = answer.get("__error__") if isinstance(answer, dict) else None
    return None if error is None else str(error["error"])


def test_two_authenticated_users_never_see_each_other(platform: dict[str, Any]) -> None:
    alice = _run(platform, "alice", {"remember": "my favourite editor is helix"})
    bob = _run(platform, "bob", {"remember": "my favourite editor is vim"})
    assert alice["user"] == "alice" and bob["user"] == "bob"  # the store acted for the token's user
    assert alice["embedder"] == "AppEmbeddings"  # the one langgraph.json's index.embed names

    found_by_alice = _run(platform, "alice", {"query": "which editor do I like?"})["found"]
    found_by_bob = _run(platform, "bob", {"query": "which editor do I like?"})["found"]
    assert found_by_alice == ["my favourite editor is helix"]
    assert found_by_bob == ["my favourite editor is vim"]

    # what the platform saved is each user's own memory, as the service sees it
    with MemoryService(platform["dsn"]) as memory:
        assert [m.content for m in memory.for_user("alice").list()] == ["my favourite editor is helix"]
        assert [m.content for m in memory.for_user("bob").list()] == ["my favourite editor is vim"]


def test_a_client_cannot_name_another_user(platform: dict[str, Any]) -> None:
    _run(platform, "alice", {"remember": "alice's private note about the merger"})
    # bob names alice in configurable: refused, not obeyed
    answer = _run(platform, "bob", {"query": "merger"}, config={"configurable": {"user_id": "alice"}})
    assert _error(answer) == "IdentityConflictError" and "merger" not in str(answer)
    # ... nor in the run's context
    answer = _run(platform, "bob", {"query": "merger"}, context={"user_id": "alice"})
    assert _error(answer) == "IdentityConflictError" and "merger" not in str(answer)
    # ... nor by asking the graph to read alice's namespace
    answer = _run(platform, "bob", {"query": "merger", "owner": "alice"})
    assert _error(answer) == "PermissionDeniedError" and "merger" not in str(answer)
    # the same run with alice's token reads it
    assert _run(platform, "alice", {"query": "merger", "owner": "alice"})["found"][0].startswith("alice's private")


def test_the_authenticated_users_claims_are_its_ids(platform: dict[str, Any]) -> None:
    # alice's token carries project_id "apollo": a run may repeat it, not change it
    ok = _run(platform, "alice", {"query": "anything"}, config={"configurable": {"project_id": "apollo"}})
    assert _error(ok) is None and ok["user"] == "alice"
    refused = _run(platform, "alice", {"query": "anything"}, config={"configurable": {"project_id": "zeus"}})
    assert _error(refused) == "IdentityConflictError" and "project_id" in refused["__error__"]["message"]


def test_an_unknown_token_is_turned_away(platform: dict[str, Any]) -> None:
    from langgraph_sdk import get_sync_client
    from langgraph_sdk.errors import AuthenticationError

    client = get_sync_client(url=platform["url"], headers={"Authorization": "Bearer token-mallory"})
    with pytest.raises(AuthenticationError, match="unknown bearer token"):
        client.threads.create()


def test_the_store_endpoints_act_for_the_requests_user(platform: dict[str, Any]) -> None:
    """``client.store.*`` runs outside any run: the store acts for the user the platform
    authenticated for the request, so each reaches their own namespace and nobody else's."""
    alice, bob = _client(platform, "alice"), _client(platform, "bob")
    alice.store.put_item(["memories", "alice", "lists"], "groceries", {"text": "oat milk and lemons"})
    item = alice.store.get_item(["memories", "alice", "lists"], "groceries")
    assert item is not None and item["value"] == {"text": "oat milk and lemons"}
    found = alice.store.search_items(["memories", "alice", "lists"], query="what do I need to buy?")
    assert [i["value"]["text"] for i in found["items"]] == ["oat milk and lemons"]
    assert ["memories", "alice", "lists"] in [list(n) for n in alice.store.list_namespaces()["namespaces"]]
    # bob reaches none of it: not by reading, searching or listing alice's namespace, nor by writing there
    from langgraph_sdk.errors import PermissionDeniedError as Forbidden

    for attempt in (lambda: bob.store.get_item(["memories", "alice", "lists"], "groceries"),
                    lambda: bob.store.search_items(["memories", "alice"], query="buy"),
                    lambda: bob.store.put_item(["memories", "alice", "lists"], "x", {"text": "from bob"}),
                    lambda: bob.store.delete_item(["memories", "alice", "lists"], "groceries")):
        with pytest.raises(Forbidden, match="another user's memory") as refused:
            attempt()
        assert "lemons" not in str(refused.value)
    assert "alice" not in str(bob.store.list_namespaces())
    bobs = bob.store.search_items(["memories", "bob"], query="what do I need to buy?")["items"]
    assert bobs and all(i["namespace"][:2] == ["memories", "bob"] for i in bobs) and "lemons" not in str(bobs)
    with MemoryService(platform["dsn"]) as memory:
        assert "oat milk and lemons" in [m.content for m in memory.for_user("alice").list()]
        assert "from bob" not in str(memory.for_user("alice").list())
