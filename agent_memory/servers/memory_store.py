"""The ``memory_store`` plugin: JSON-RPC 2.0 over stdio, one message per line.

``agent-memory memory-store [--user U] [--database-url URL]`` serves the ``memory_store``
plugin protocol until stdin closes; ``--manifest`` prints the plugin manifest and exits. Answers
go to stdout (one line each, flushed), logs to stderr. A daemon starts plugins with no arguments,
so every flag has an environment variable (``MEMORY_STORE_USER``, ``DATABASE_URL``; the flag wins).

The process acts for one principal, fixed at start (``--user``, else ``MEMORY_STORE_USER``, else
the plugin principal :data:`~agent_memory.config.PLUGIN_PRINCIPAL`): no message can name
another. ``initialize`` binds the session to one project (a later ``initialize`` rebinds it);
calls for another project answer -32307, as do calls the user may not make there (a project of
ours they are no member of). Scopes map to one of our projects' memory as store
namespaces (:mod:`.memory_store_scopes`); every call is a thin adapter over
:class:`~agent_memory.store.AgentMemoryStore` and the principal's handle, so the process keeps
no state but the binding: two processes on one database see each other's writes at once.

A protocol project id that is not one of ours gets a *derived* project, named after the user
and the id. Its name can be computed, so anyone could create it first and make the plugin's
user a member, then read what the plugin writes there: ``initialize`` claims it for the user
(creating it as theirs), every call checks it is still theirs, and one owned by anyone else
answers -32307 without a read or a write.

``memory/put`` is the store's put (a keyed memory revised in place, its earlier value kept in
its history, passing the gate); ``ttl_secs`` is the memory's expiry in seconds (checked and
explained in seconds, from a millisecond to 100 years), never renewed by reads (expired values
are filtered at read time, and ``maintain`` / ``purge_expired`` delete them). A stop signal
ends the process cleanly, closing the service and whatever it started (:mod:`.shutdown`).
``memory/query`` and ``memory/delete_scope`` cover the scope and every scope below it (a
project's agents and tasks, an agent's tasks). ``memory/list_scopes`` pages with an opaque
``cursor`` in a stable order (ids by code point). No rate limit is applied here, so -32305 is
never answered.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import IO, Any

from langgraph.store.base import PutOp

from .. import __version__
from ..config import PLUGIN_PRINCIPAL, server_setting
from ..errors import (
    AgentMemoryError,
    ConfigurationError,
    DatabaseError,
    EmbeddingError,
    InvalidInputError,
    PermissionDeniedError,
)
from ..models import Identity
from ..service import MemoryService
from ..store import AgentMemoryStore
from ..store.namespaces import encode_key
from ..validation import check_id, check_metadata, shown
from .memory_store_scopes import (
    ScopeRef,
    check_scope,
    check_scope_id,
    is_derived,
    key_from,
    key_of,
    namespace_of,
    originals,
    project_of,
    scope_of,
)
from .shutdown import exit_on_signals

__all__ = ["MANIFEST", "Server", "main"]

logger = logging.getLogger("agent_memory.servers.memory_store")

PROTOCOL_VERSION = "1.0"
METHODS = ("initialize", "memory/put", "memory/get", "memory/query", "memory/list_scopes", "memory/delete_scope")
MANIFEST: dict[str, Any] = {
    "name": "agent-memory", "version": __version__, "kind": "memory_store", "protocol_version": PROTOCOL_VERSION,
    "methods": list(METHODS),
}

#: the longest message line, in bytes (a longer one is refused, and the loop goes on)
MAX_LINE_BYTES = 1 << 20
#: the most scopes one list_scopes page holds
MAX_LIST_LIMIT = 1000
#: the shortest and longest ttl_secs (expiry times are kept to the microsecond; a TTL shorter than
#: a millisecond expires before its put answers)
MIN_TTL_SECS, MAX_TTL_SECS = 0.001, 100 * 366 * 86400
#: items deleted per transaction by delete_scope
_DELETE_BATCH = 500

# JSON-RPC error codes (the protocol's table)
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
UNAVAILABLE, RATE_LIMITED, TOP_K_TOO_LARGE, NOT_BOUND = -32304, -32305, -32306, -32307


class RpcError(Exception):
    """An answer with a JSON-RPC error ``code`` and a message that says what was wrong."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _params(params: Mapping[str, Any], allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> None:
    unknown = set(params) - set(allowed)
    if unknown:
        raise RpcError(INVALID_PARAMS, f"unknown params {sorted(unknown)}; allowed: {', '.join(allowed)}")
    missing = [name for name in required if name not in params]
    if missing:
        raise RpcError(INVALID_PARAMS, f"missing params: {', '.join(missing)}")


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _check_ttl_secs(value: Any) -> float | None:
    """``ttl_secs`` in seconds, checked and explained in seconds (the store counts minutes)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RpcError(INVALID_PARAMS, f"ttl_secs: must be a number of seconds, got {shown(value)}")
    if not MIN_TTL_SECS <= value <= MAX_TTL_SECS:  # NaN fails both
        raise RpcError(INVALID_PARAMS, f"ttl_secs: must be between {MIN_TTL_SECS:g} (a millisecond) and "
                                       f"{MAX_TTL_SECS} seconds (100 years), got {shown(value)}")
    return float(value)


def _check_int(field: str, value: Any, low: int, high: int, *, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise RpcError(INVALID_PARAMS, f"{field}: must be a whole number, got {shown(value)}")
    if not low <= value <= high:
        raise RpcError(INVALID_PARAMS, f"{field}: must be between {low} and {high}, got {value}")
    return value


class Server:
    """One session of the protocol: the principal, the service (opened on first use) and the bound project."""

    def __init__(self, user_id: str, open_memory: Callable[[], MemoryService]) -> None:
        self.user_id = check_id("user", user_id)
        self._open_memory = open_memory
        self._memory: MemoryService | None = None
        self._store: AgentMemoryStore | None = None
        self.project_id: str | None = None
        self.agent_id: str | None = None

    # --- plumbing ------------------------------------------------------------------------------

    @property
    def memory(self) -> MemoryService:
        if self._memory is None:
            try:
                self._memory = self._open_memory()
            except (AgentMemoryError, OSError) as error:  # the database, the embedder or their setup
                logger.warning("could not open memory: %s", error)
                raise RpcError(UNAVAILABLE, f"the memory service could not be opened: {error}") from error
        return self._memory

    @property
    def store(self) -> AgentMemoryStore:
        if self._store is None:
            self._store = AgentMemoryStore(self.memory, caller=Identity(user_id=self.user_id),
                                           ttl={"refresh_on_read": False})
        return self._store

    @property
    def max_top_k(self) -> int:
        return self._memory.config.max_k if self._memory is not None else 100

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()

    def _bound(self, project_id: str) -> None:
        if self.project_id is None:
            raise RpcError(NOT_BOUND, "the session is not initialized: call initialize with a project_id first")
        if project_id != self.project_id:
            raise RpcError(NOT_BOUND, f"project {project_id!r} is not the one this session is bound to "
                                      f"({self.project_id!r}); call initialize to bind another")

    def _scope(self, params: Mapping[str, Any], field: str = "scope") -> ScopeRef:
        if self.project_id is None:
            self._bound("")
        scope = check_scope(field, params.get(field))
        self._bound(scope.project_id)
        self._owned(scope.project_id)
        return scope

    def _namespace(self, scope: ScopeRef) -> tuple[str, ...]:
        return namespace_of(scope, self.user_id)

    def _claim(self, project: str) -> None:
        """Make the derived project of ``project`` this user's (idempotent for them); -32307 when
        someone else made it first, so nothing is written where another user can read it."""
        pid = project_of(project, self.user_id)
        try:
            self.memory.create_project(pid, user_id=self.user_id)
        except PermissionDeniedError as error:
            raise RpcError(NOT_BOUND, f"project_id {project!r} is kept in the project {pid!r}, which another "
                                      f"user already owns, so this plugin will not read or write there; use "
                                      f"another project_id, or have {pid!r} deleted") from error

    def _owned(self, project: str) -> None:
        """Before every call in a derived project: it is still this user's (claimed again if it is gone)."""
        if not is_derived(project):
            return  # one of our projects: its members and roles decide, as everywhere
        pid = project_of(project, self.user_id)
        mine = self.memory.memberships(user_id=self.user_id, scope="project", prefix=pid)
        if not any(m.scope_id == pid and m.role.value == "owner" for m in mine):
            self._claim(project)

    # --- dispatch ------------------------------------------------------------------------------

    def handle(self, message: Any) -> dict[str, Any] | None:
        """The answer to one decoded message (``None`` for a notification)."""
        if isinstance(message, list):
            return _error(None, INVALID_REQUEST, "batch requests are not supported: send one request object per line")
        if not isinstance(message, dict):
            return _error(None, INVALID_REQUEST, f"a request must be a JSON object, got {type(message).__name__}")
        notification = "id" not in message
        rid = message.get("id")
        if isinstance(rid, bool) or not (rid is None or isinstance(rid, (str, int))):
            return _error(None, INVALID_REQUEST, f"id must be a string, an integer or null, got {shown(rid)}")
        try:
            if message.get("jsonrpc") != "2.0":
                raise RpcError(INVALID_REQUEST, f"jsonrpc must be \"2.0\", got {shown(message.get('jsonrpc'))}")
            method = message.get("method")
            if not isinstance(method, str):
                raise RpcError(INVALID_REQUEST, f"method must be a string, got {shown(method)}")
            extra = set(message) - {"jsonrpc", "id", "method", "params"}
            if extra:
                raise RpcError(INVALID_REQUEST, f"unknown members {sorted(extra)} in the request")
            call = self._methods().get(method)
            if call is None:
                raise RpcError(METHOD_NOT_FOUND, f"unknown method {method!r}; this server has: {', '.join(METHODS)}")
            params = message.get("params", {})
            if params is None:
                params = {}
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, f"params must be an object, got {type(params).__name__}")
            result = call(params)
        except RpcError as error:
            return None if notification else _error(rid, error.code, error.message)
        except (InvalidInputError, ConfigurationError) as error:
            return None if notification else _error(rid, INVALID_PARAMS, str(error))
        except PermissionDeniedError as error:
            return None if notification else _error(rid, NOT_BOUND, f"permission denied: {error}")
        except (DatabaseError, EmbeddingError) as error:
            logger.warning("the memory service is unavailable: %s", error)
            return None if notification else _error(rid, UNAVAILABLE, f"the memory service is unavailable: {error}")
        except Exception as error:  # a bug must not kill the loop
            logger.exception("internal error")
            return None if notification else _error(rid, INTERNAL_ERROR, f"internal error: {type(error).__name__}")
        return None if notification else {"jsonrpc": "2.0", "id": rid, "result": result}

    def _methods(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        return {"initialize": self.initialize, "memory/put": self.put, "memory/get": self.get,
                "memory/query": self.query, "memory/list_scopes": self.list_scopes,
                "memory/delete_scope": self.delete_scope}

    # --- methods -------------------------------------------------------------------------------

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        _params(params, ("project_id", "agent_id", "protocol_version", "client_info", "capabilities"), ("project_id",))
        project = check_scope_id("project_id", params["project_id"])
        agent = None if params.get("agent_id") is None else check_scope_id("agent_id", params["agent_id"])
        top_k = self.memory.config.max_k
        if is_derived(project):
            self._claim(project)
        self.project_id, self.agent_id = project, agent
        return {
            "protocol_version": PROTOCOL_VERSION,
            "server_info": {"name": MANIFEST["name"], "version": __version__},
            "session": {"project_id": project, "agent_id": agent, "user_id": self.user_id},
            "capabilities": {"memory_store": {"crate_version": __version__, "extra": {
                "native_ttl": True, "native_key_get": True, "strong_consistency": True, "max_query_top_k": top_k}}},
        }

    def put(self, params: dict[str, Any]) -> dict[str, Any]:
        _params(params, ("scope", "key", "value", "ttl_secs", "metadata"), ("scope", "key", "value"))
        scope = self._scope(params)
        key = check_scope_id("key", params["key"])
        value = params["value"]
        if value is None or (isinstance(value, str) and not value.strip()):
            raise RpcError(INVALID_PARAMS, f"value: must be a non-empty string or a JSON value other than null, "
                                           f"got {shown(value)}")
        ttl = _check_ttl_secs(params.get("ttl_secs"))
        metadata = params.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise RpcError(INVALID_PARAMS, f"metadata: must be an object, got {type(metadata).__name__}")
        metadata = dict(check_metadata(metadata or {}, "metadata"))
        namespace = self._namespace(scope)
        field = "text" if isinstance(value, str) else "json"  # what is embedded: the text, or the JSON
        stored: dict[str, Any] = {field: value, "metadata": metadata}
        ids = originals(scope, key)
        if ids is not None:
            stored["ids"] = ids
        self.store.put(namespace, key_of(key), stored, index=[field], ttl=None if ttl is None else ttl / 60)
        handle = self.memory.for_user(self.user_id, project_id=project_of(scope.project_id, self.user_id))
        item = handle.get_by_key(encode_key(namespace, key_of(key)), scope="project")
        return {"record_id": str(item.id), "indexed_immediately": True}

    def get(self, params: dict[str, Any]) -> dict[str, Any]:
        _params(params, ("scope", "key"), ("scope", "key"))
        scope = self._scope(params)
        key = check_scope_id("key", params["key"])
        item = self.store.get(self._namespace(scope), key_of(key), refresh_ttl=False)
        if item is None:
            return {"found": False, "key": key, "scope": scope.to_json()}
        return {"found": True, "key": key, "scope": scope.to_json(), "value": _value(item.value),
                "metadata": item.value.get("metadata") or {}, "created_at": _time(item.created_at),
                "updated_at": _time(item.updated_at)}

    def query(self, params: dict[str, Any]) -> dict[str, Any]:
        _params(params, ("scope", "query", "top_k"), ("scope", "query"))
        scope = self._scope(params)
        query = params["query"]
        if not isinstance(query, str) or not query.strip():
            raise RpcError(INVALID_PARAMS, f"query: must be a non-empty string, got {shown(query)}")
        top_k = params.get("top_k", 10)
        if isinstance(top_k, bool) or not isinstance(top_k, int):
            raise RpcError(INVALID_PARAMS, f"top_k: must be a whole number, got {shown(top_k)}")
        if top_k > self.max_top_k:
            raise RpcError(TOP_K_TOO_LARGE, f"top_k {top_k} is above max_query_top_k ({self.max_top_k})")
        if top_k < 1:
            raise RpcError(INVALID_PARAMS, f"top_k: must be at least 1, got {top_k}")
        hits = []
        for found in self.store.search(self._namespace(scope), query=query, limit=top_k, refresh_ttl=False):
            ids = found.value.get("ids")
            where, key = scope_of(found.namespace, self.user_id, ids), key_from(found.key, ids)
            if where is None or key is None:
                continue
            hits.append({"key": key, "value": _value(found.value), "score": found.score,
                         "scope": where.to_json(), "metadata": found.value.get("metadata") or {},
                         "updated_at": _time(found.updated_at)})
        return {"hits": hits}

    def list_scopes(self, params: dict[str, Any]) -> dict[str, Any]:
        _params(params, ("prefix", "cursor", "limit"))
        if self.project_id is None:
            self._bound("")
        prefix = params.get("prefix")
        if prefix is None:
            assert self.project_id is not None
            scope = ScopeRef(self.project_id)
            self._owned(scope.project_id)
        elif isinstance(prefix, str):
            scope = ScopeRef(check_scope_id("prefix", prefix))
            self._bound(scope.project_id)
            self._owned(scope.project_id)
        else:
            scope = self._scope(params, "prefix")
        limit = _check_int("limit", params.get("limit"), 1, MAX_LIST_LIMIT, default=100)
        cursor = params.get("cursor")
        if cursor is None:
            offset = 0
        elif isinstance(cursor, str) and cursor.isdigit() and cursor.isascii() and len(cursor) < 19:
            offset = int(cursor)
        else:
            raise RpcError(INVALID_PARAMS, f"cursor: must be a next_cursor this server returned, got {shown(cursor)}")
        found = self.store.list_namespaces(prefix=self._namespace(scope), limit=limit + 1, offset=offset)
        scopes = [where.to_json() for where in map(self._listed, found[:limit]) if where is not None]
        return {"scopes": scopes, "next_cursor": str(offset + limit) if len(found) > limit else None}

    def _listed(self, namespace: tuple[str, ...]) -> ScopeRef | None:
        """The scope of a listed namespace; one that keeps an id as its hash is read from an item in it."""
        if not any(segment.startswith("#") for segment in namespace[3:]):
            return scope_of(namespace, self.user_id)
        items = self.store.search(namespace, limit=1, refresh_ttl=False)
        return scope_of(namespace, self.user_id, items[0].value.get("ids")) if items else None

    def delete_scope(self, params: dict[str, Any]) -> dict[str, Any]:
        _params(params, ("scope",), ("scope",))
        namespace = self._namespace(self._scope(params))
        deleted = 0
        while True:
            items = self.store.search(namespace, limit=_DELETE_BATCH, refresh_ttl=False)
            if not items:
                return {"deleted": deleted}
            self.store.batch([PutOp(item.namespace, item.key, None) for item in items])
            deleted += len(items)


def _value(stored: Mapping[str, Any]) -> Any:
    """The value a put sent, from the store value it was kept as."""
    return stored["text"] if "text" in stored else stored.get("json")


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def _read_line(stream: IO[bytes]) -> bytes | None:
    """The next line (without its end), ``b""`` for one over :data:`MAX_LINE_BYTES`, ``None`` at the end."""
    line = stream.readline(MAX_LINE_BYTES + 1)
    if not line:
        return None
    if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
        while True:  # skip the rest of the line
            rest = stream.readline(MAX_LINE_BYTES)
            if not rest or rest.endswith(b"\n"):
                return b""
    return line.rstrip(b"\r\n") or b" "


def serve(server: Server, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """Answer each line of ``stdin`` on ``stdout`` until ``stdin`` closes."""
    while (line := _read_line(stdin)) is not None:
        if not line.strip():
            if line == b"":
                answer: dict[str, Any] | None = _error(
                    None, INVALID_REQUEST, f"the message is longer than {MAX_LINE_BYTES} bytes")
            else:
                continue
        else:
            try:
                message = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError:
                answer = _error(None, PARSE_ERROR, "the message is not UTF-8 text")
            except ValueError as error:
                answer = _error(None, PARSE_ERROR, f"the message is not valid JSON: {error}")
            except RecursionError:
                answer = _error(None, PARSE_ERROR, "the message is nested too deeply")
            else:
                answer = server.handle(message)
        if answer is not None:
            stdout.write(json.dumps(answer, ensure_ascii=True, default=str).encode("ascii") + b"\n")
            stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="agent-memory memory-store",
        description="agent-memory as a memory_store plugin: JSON-RPC 2.0 over stdio, one message per line. "
                    "Started with no arguments (as a daemon starts plugins) it reads its settings from the "
                    "environment and acts for the plugin principal.")
    parser.add_argument("--manifest", action="store_true", help="print the plugin manifest as JSON and exit")
    parser.add_argument("--user", help=f"the user the plugin acts for (default: MEMORY_STORE_USER, else the "
                                       f"plugin principal {PLUGIN_PRINCIPAL!r})")
    parser.add_argument("--database-url", help="PostgreSQL URL (default: DATABASE_URL, else the embedded server)")
    args = parser.parse_args(argv)
    if args.manifest:
        print(json.dumps(MANIFEST))
        return 0
    user = args.user if args.user is not None else (server_setting("MEMORY_STORE_USER") or PLUGIN_PRINCIPAL)
    source = "--user" if args.user is not None else "MEMORY_STORE_USER"
    try:
        server = Server(user, lambda: MemoryService(args.database_url))
    except InvalidInputError as error:
        parser.error(f"{source} {error}")
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but answers may reach the peer
    with exit_on_signals():  # SIGTERM too ends with close() and the atexit hooks (the embedded server)
        try:
            serve(server, sys.stdin.buffer, out)
        except KeyboardInterrupt:
            pass
        finally:
            server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
