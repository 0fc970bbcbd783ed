"""Every failure of a command as one line that says what to do, instead of a traceback.

Our own errors (:class:`~agent_memory.errors.AgentMemoryError`) already say it. A chat model
or embedding endpoint that fails (HTTP 500, a body that is not JSON, a refused connection)
raises whatever its SDK raises, from deep inside LangChain: those are recognised by the
modules the exception came through, and reported as the endpoint's failure.
"""

from __future__ import annotations

import json
import sys
from types import TracebackType

from ..errors import AgentMemoryError

__all__ = ["is_provider_error", "one_line", "report_error"]

#: modules of the model providers' clients and their HTTP stacks
_PROVIDER_MODULES = ("openai", "langchain_openai", "httpx", "httpcore", "anthropic", "langchain_anthropic",
                     "langchain_ollama", "ollama", "requests", "urllib3")
_MAX = 400


def one_line(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MAX else text[: _MAX - 3] + "..."


def _modules(exc: BaseException) -> set[str]:
    """Top-level packages of the exception's class and of every frame it passed through,
    including the exceptions it was raised from."""
    found: set[str] = set()
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found.add(type(current).__module__.split(".")[0])
        tb: TracebackType | None = current.__traceback__
        while tb is not None:
            found.add(str(tb.tb_frame.f_globals.get("__name__", "")).split(".")[0])
            tb = tb.tb_next
        current = current.__cause__ or current.__context__
    return found


def is_provider_error(exc: BaseException) -> bool:
    return not isinstance(exc, AgentMemoryError) and bool(_modules(exc) & set(_PROVIDER_MODULES))


def _describe(exc: BaseException) -> tuple[str, int]:
    if isinstance(exc, AgentMemoryError):
        return str(exc), 2
    if is_provider_error(exc):
        return (f"the model endpoint failed ({type(exc).__name__}: {exc}); check OPENAI_BASE_URL and "
                "OPENAI_API_KEY (the endpoint must speak the OpenAI API and answer with JSON), or run with "
                "--offline", 1)
    if type(exc).__module__.split(".")[0] == "psycopg":
        return (f"the database failed ({type(exc).__name__}: {exc}); check DATABASE_URL (or --database-url), "
                "or unset it to use the embedded server", 2)
    if isinstance(exc, OSError):
        return f"{exc}; check the path and its permissions", 2
    return f"unexpected {type(exc).__name__}: {exc}; run again with --debug to see where it happened", 1


def report_error(exc: BaseException, out: object) -> int:
    """Print ``exc`` as one line on stderr (a JSON object with ``--json``); answer the exit status."""
    message, status = _describe(exc)
    message = one_line(message)
    if getattr(out, "json", False):
        print(json.dumps({"error": message, "type": type(exc).__name__}), file=sys.stderr)
    else:
        print(f"agent-memory: error: {message}", file=sys.stderr)
    return status
