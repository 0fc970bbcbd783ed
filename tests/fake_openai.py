"""A fake OpenAI-compatible server on 127.0.0.1, for tests of the OpenAI path with no network.

It speaks just enough of the API for LangChain's ``ChatOpenAI`` and ``OpenAIEmbeddings``:
``/v1/embeddings`` (deterministic vectors, as floats or base64 like the real service), and
``/v1/chat/completions`` answering tool calls and structured output (``response_format`` with a
JSON schema) from scripts the test sets. ``fail`` makes the next answers an HTTP 500 or a body
that is not JSON. Every request's JSON is kept in ``requests``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DIMENSIONS = 32


def vector(text: str) -> list[float]:
    """A unit vector from the text's words, so texts sharing words are similar."""
    v = [0.0] * DIMENSIONS
    for word in text.lower().split():
        digest = hashlib.sha256(word.strip(".,!?").encode()).digest()
        v[digest[0] % DIMENSIONS] += 1.0
        v[digest[1] % DIMENSIONS] += 0.5
    norm = sum(x * x for x in v) ** 0.5 or 1.0
    return [x / norm for x in v]


@dataclass
class FakeOpenAI:
    """State of one server: what it was asked and what it should answer."""

    url: str = ""
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: ``messages -> dict``: the reply to a chat request with tools (a tool call or a text)
    chat: Callable[[list[dict[str, Any]]], dict[str, Any]] = lambda messages: {"content": "ok"}
    #: schema name -> the object a structured-output request answers
    structured: dict[str, Any] = field(default_factory=dict)
    #: "500" or "html": how the next answers fail; None answers normally
    fail: str | None = None

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]


def _completion(message: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": None, **message}
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake-chat",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def tool_call(name: str, **args: Any) -> dict[str, Any]:
    """A chat reply that calls ``name`` with ``args``."""
    return {"tool_calls": [{"id": f"call_{name}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)}}]}


def _handler(state: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            state.requests.append((self.path, body))
            if state.fail == "500":
                return self._send(500, b'{"error": {"message": "the fake server is down", "type": "server_error"}}')
            if state.fail == "html":
                return self._send(200, b"<html><body>Bad gateway</body></html>", "text/html")
            if self.path.endswith("/embeddings"):
                return self._send(200, json.dumps(self._embeddings(body)).encode())
            if self.path.endswith("/chat/completions"):
                return self._send(200, json.dumps(self._chat(body)).encode())
            return self._send(404, b'{"error": {"message": "not found"}}')

        def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            data = []
            for i, text in enumerate(texts):
                v = vector(text if isinstance(text, str) else " ".join(map(str, text)))
                if body.get("encoding_format") == "base64":
                    emb: Any = base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode()
                else:
                    emb = v
                data.append({"object": "embedding", "index": i, "embedding": emb})
            return {"object": "list", "data": data, "model": body.get("model", "fake-embed"),
                    "usage": {"prompt_tokens": 1, "total_tokens": 1}}

        def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
            fmt = body.get("response_format") or {}
            if fmt.get("type") == "json_schema":
                name = fmt["json_schema"]["name"]
                return _completion({"content": json.dumps(state.structured[name])})
            forced = body.get("tool_choice")
            if isinstance(forced, dict):  # structured output through a forced tool call
                name = forced["function"]["name"]
                return _completion(tool_call(name, **state.structured[name]))
            return _completion(state.chat(body["messages"]))

    return Handler


@contextmanager
def fake_openai() -> Iterator[FakeOpenAI]:
    """Run a fake server on a free port of 127.0.0.1 for the ``with`` block; ``.url`` ends in ``/v1``."""
    state = FakeOpenAI()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
