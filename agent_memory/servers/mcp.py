"""Agent memory as an MCP server (the official ``mcp`` SDK, agent-memory's ``mcp`` extra).

    agent-memory mcp --transport stdio --user alice --project webshop
    agent-memory mcp --transport http --port 8765 --tokens tokens.json
    agent-memory mcp hash-token        # reads a token, prints its sha256 for tokens.json

Tools: ``memory_save``, ``memory_search``, ``memory_delete``, ``memory_stats`` (the agent tools'
own descriptions, bodies and replies, :mod:`agent_memory.middleware.tools`; ``memory_explore`` and
``memory_traverse`` over the knowledge graph, :mod:`agent_memory.middleware.graph_tools`), ``memory_list``,
``memory_history`` and ``document_search`` (passages of the documents added with
``add_document``); resources ``memory://profile/user`` and ``memory://profile/project``. A
failure the model can act on is a tool result with ``isError`` and the agent tools' error text.

Whose memory it is never comes from a tool's arguments. Over stdio it is fixed when the server
starts (``--user`` and the other flags); over streamable HTTP every request carries a bearer
token that the token file maps to one principal (:mod:`.mcp_auth`), and a request without a
valid one is answered 401 by the SDK's bearer middleware. The HTTP transport is stateless: the
server holds nothing but its database pool, so several processes can serve one database.
SIGTERM, SIGHUP and SIGINT end either transport cleanly, closing the pool and stopping the
embedded PostgreSQL the process started (:mod:`.shutdown`).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import logging
import sys
from collections.abc import Callable, Generator
from typing import Any, Literal

try:
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError
    from mcp.types import CallToolResult, TextContent
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        f"the MCP server needs the mcp package, which this environment lacks ({exc}); agent-memory is installed "
        "from its checkout or a wheel, not from PyPI, so add its mcp extra the same way: "
        "`.venv/bin/pip install -e '.[mcp]'` in the checkout, or `pip install 'agent_memory-<version>-py3-none-any.whl[mcp]'`"
    ) from exc

from pydantic import AnyHttpUrl

from agent_memory.db.requests import Op
from agent_memory.errors import (
    AgentMemoryError,
    InvalidInputError,
    MissingIdentityError,
)
from agent_memory.middleware.backend import MemoryBackend
from agent_memory.middleware.plain import FixedRun
from agent_memory.middleware.graph_tools import EXPLORE_DESCRIPTION, TRAVERSE_DESCRIPTION, _GraphKit
from agent_memory.middleware.tools import (
    DELETE_DESCRIPTION,
    SEARCH_DESCRIPTION,
    STATS_DESCRIPTION,
    MemoryTypeArg,
    ScopeArg,
    Toolkit,
    bound_types,
    bound_k,
    describe_error,
    describe_item,
    one_line,
    save_description,
)
from agent_memory.documents import PassageHit
from agent_memory.models import Identity, MemoryItem, MemoryVersion
from agent_memory.validation import check_identity

from .mcp_auth import StaticTokenVerifier, hash_token, identity_of, load_tokens
from .shutdown import exit_on_signals

__all__ = ["build_server", "describe_history", "describe_list", "describe_passages", "main"]

logger = logging.getLogger(__name__)

SERVER_NAME = "agent-memory"
PROFILE_URIS = {"user": "memory://profile/user", "project": "memory://profile/project"}

_LIST = """List this user's long-term memories, most recently updated first, each with its id, type and level. \
Use it to review what is stored ("what do you know about me?") or to find ids, when there is no query to search \
by. Filter by memory_type or scope; page with offset."""

_HISTORY = """The history of one long-term memory by its id, oldest first: its earlier wordings and the \
memories it replaced or that replaced it, with when each held. Find the id with memory_search or memory_list."""

_DOCUMENTS = """Search the documents this user and project have added (handbooks, notes, specs) by passage: \
returns up to k passages, best first, each with its document's title, its section and its text. Use it for what \
a document says in detail; lasting facts learned from documents are also in memory_search."""

#: a body yields the one operation it needs and returns (reply, is_error)
Body = Generator[Op[Any], Any, tuple[str, bool]]


def describe_list(items: list[MemoryItem]) -> str:
    if not items:
        return "No memories stored."
    lines = [f"{len(items)} memor{'y' if len(items) == 1 else 'ies'}, most recently updated first:"]
    lines += [f"{i}. {describe_item(item)}" for i, item in enumerate(items, 1)]
    return "\n".join(lines)


def describe_passages(query: str, hits: list[PassageHit]) -> str:
    if not hits:
        return f"No document passage matches {one_line(query, 200)!r}."
    lines = [f"{len(hits)} passage{'' if len(hits) == 1 else 's'}, best first:"]
    for i, h in enumerate(hits, 1):
        where = f", section {one_line(' / '.join(h.headings), 200)}" if h.headings else ""
        lines.append(f"{i}. [{one_line(h.title or h.external_id or str(h.resource_id), 120)}{where}]"
                     f" (relevance {h.score:.2f}) {one_line(h.content)}")
    return "\n".join(lines)


def describe_history(versions: list[MemoryVersion]) -> str:
    if not versions:
        return "This memory has no history."
    lines = [f"{len(versions)} version{'' if len(versions) == 1 else 's'}, oldest first:"]
    for v in versions:
        held = f"{v.valid_from:%Y-%m-%d}" if v.valid_from else "?"
        held += f" to {v.valid_to:%Y-%m-%d}" if v.valid_to else " on"
        made = f"{v.change} by {v.changed_by}" if v.change and v.changed_by else v.change
        parts = [p for p in ("current" if v.current else None, made) if p]
        note = f" ({'; '.join(parts)})" if parts else ""
        lines.append(f"- {v.memory_id} v{v.version} [{v.status.value}, {held}]{note}: {one_line(v.content)}")
    return "\n".join(lines)


class _Tools:
    """The tools' bodies for one server. ``principal`` says whose memory a call acts on: the
    fixed identity (stdio) or the one the request's bearer token stands for (HTTP)."""

    def __init__(self, backend: MemoryBackend, principal: Callable[[], Identity], *, max_k: int = 20) -> None:
        self.backend = backend
        self.principal = principal
        self.kit = Toolkit(backend, max_k=max_k)

    def run_info(self) -> FixedRun:
        return FixedRun(self.principal())

    def list(self, memory_type: str | None, scope: str | None, limit: int, offset: int) -> Body:
        items = yield self.backend.ops(self.principal()).list(
            memory_type=memory_type, scope=scope, limit=limit, offset=offset)
        return describe_list(items), False

    def history(self, memory_id: str) -> Body:
        versions = yield self.backend.ops(self.principal()).history(memory_id)
        return describe_history(versions), False

    def documents(self, query: str, k: int) -> Body:
        if isinstance(k, int) and not isinstance(k, bool) and k > self.kit.max_k:
            k = self.kit.max_k  # the model asked for a lot: the most we allow rather than an error
        hits = yield self.backend.ops(self.principal()).search_documents(query, k=k)
        return describe_passages(query, hits), False

    async def call(self, name: str, make: Callable[[], Body]) -> CallToolResult:
        """Run a body on the database; any failure becomes an ``isError`` result, not a crash."""
        try:
            body = make()
            op = next(body)
            body.send(await self.backend.arun(op))
        except StopIteration as done:
            text, error = done.value
        except Exception as exc:  # noqa: BLE001 - a tool answers the model, it does not break the session
            if not isinstance(exc, AgentMemoryError):
                logger.exception("%s failed unexpectedly", name)
            text, error = describe_error(exc), True
        else:  # pragma: no cover
            raise AssertionError("a tool body makes exactly one call")
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)


def build_server(backend: MemoryBackend, identity: Identity | None = None, *,
                 token_verifier: StaticTokenVerifier | None = None, issuer_url: str = "http://127.0.0.1") -> MCPServer:
    """The MCP server on ``backend``: acting for ``identity`` (stdio), or with ``token_verifier``
    for the principal of each request's bearer token (HTTP)."""
    if (identity is None) == (token_verifier is None):
        raise ValueError("give exactly one of identity (stdio) and token_verifier (http)")

    def principal() -> Identity:
        if identity is not None:
            return identity
        found = identity_of(get_access_token())
        if found is None:
            raise MissingIdentityError("no authenticated principal for this request")
        return found

    settings = None
    if token_verifier is not None:
        # static tokens are our own resource server's; no OAuth routes are served (no auth_server_provider)
        settings = AuthSettings(issuer_url=AnyHttpUrl(issuer_url), resource_server_url=None)
    server: MCPServer = MCPServer(
        SERVER_NAME, instructions="Long-term memory of this user and project: save, search, list and delete.",
        token_verifier=token_verifier, auth=settings,
    )
    tools = _Tools(backend, principal)
    kit = tools.kit

    async def memory_save(content: str, memory_type: MemoryTypeArg = "fact", scope: ScopeArg = "user",
                          tags: list[str] | str | None = None) -> CallToolResult:
        return await tools.call("memory_save", lambda: kit.save(tools.run_info(), content, memory_type, scope, tags))

    async def memory_search(query: str, k: int = 5, memory_type: MemoryTypeArg | None = None,
                            scope: ScopeArg | None = None, include_history: bool = False,
                            tags: list[str] | str | None = None) -> CallToolResult:
        return await tools.call("memory_search", lambda: kit.search(
            tools.run_info(), query, k, memory_type, scope, include_history, tags))

    async def memory_delete(memory_id: str) -> CallToolResult:
        return await tools.call("memory_delete", lambda: kit.delete(tools.run_info(), memory_id))

    async def memory_stats() -> CallToolResult:
        return await tools.call("memory_stats", lambda: kit.stats(tools.run_info()))

    async def memory_list(memory_type: MemoryTypeArg | None = None, scope: ScopeArg | None = None,
                          limit: int = 20, offset: int = 0) -> CallToolResult:
        return await tools.call("memory_list", lambda: tools.list(memory_type, scope, limit, offset))

    async def memory_history(memory_id: str) -> CallToolResult:
        return await tools.call("memory_history", lambda: tools.history(memory_id))

    async def document_search(query: str, k: int = 5) -> CallToolResult:
        return await tools.call("document_search", lambda: tools.documents(query, k))

    graph = _GraphKit(backend, max_k=20)  # the knowledge graph's tools, as the agent's

    async def memory_explore(queries: list[str] | str | None = None, text_matches: list[str] | str | None = None,
                             relationship_filters: dict[str, Any] | None = None,
                             granularity: Literal[1, 2, 3] = 1) -> CallToolResult:
        return await tools.call("memory_explore", lambda: graph.explore(
            tools.run_info(), queries, text_matches, relationship_filters, granularity))

    async def memory_traverse(seed_nodes: list[str], mode: Literal["ppr", "pattern"] = "ppr", top_k: int = 20,
                              relationship_types: list[str] | None = None,
                              direction: Literal["out", "in", "both"] = "both", min_proximity: int | None = None,
                              min_attitude: int | None = None, since: str | None = None,
                              until: str | None = None) -> CallToolResult:
        return await tools.call("memory_traverse", lambda: graph.traverse(
            tools.run_info(), seed_nodes, mode, min(top_k, 50) if isinstance(top_k, int) else top_k,
            relationship_types, direction, min_proximity, min_attitude, since, until))

    config = backend.known_config  # its custom memory types go into the schemas
    bound_types(config, memory_save, memory_search, memory_list)
    bound_k(kit.max_k, memory_search)  # the schema says 1..max_k; the SDK refuses a k outside with isError
    for fn, description in ((memory_save, save_description(config)), (memory_search, SEARCH_DESCRIPTION),
                            (memory_delete, DELETE_DESCRIPTION),
                            (memory_stats, STATS_DESCRIPTION), (memory_list, _LIST), (memory_history, _HISTORY),
                            (document_search, _DOCUMENTS), (memory_explore, EXPLORE_DESCRIPTION),
                            (memory_traverse, TRAVERSE_DESCRIPTION)):
        server.add_tool(fn, name=fn.__name__, description=description, structured_output=False)

    async def profile_text(kind: str) -> str:
        try:
            profiles = await backend.arun(backend.ops(principal()).profiles())
        except Exception as exc:  # noqa: BLE001 - a read answers with the error text, not a traceback
            if not isinstance(exc, AgentMemoryError):
                logger.exception("reading the %s profile failed unexpectedly", kind)
            raise ResourceError(describe_error(exc)) from exc
        text = profiles.user_text if kind == "user" else profiles.project_text
        if text:
            return text
        if kind == "project" and principal().project_id is None:
            return "No project profile: this session has no project."
        return f"The {kind} profile is empty so far."  # a project with no profile yet (nothing saved there)

    @server.resource(PROFILE_URIS["user"], name="user_profile", mime_type="text/markdown",
                     description="What is known about the user, built from their memories.")
    async def user_profile() -> str:
        return await profile_text("user")

    @server.resource(PROFILE_URIS["project"], name="project_profile", mime_type="text/markdown",
                     description="What is known about the current project, built from its memories.")
    async def project_profile() -> str:
        return await profile_text("project")

    return server


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-memory mcp",
        description="Serve agent memory over MCP. 'hash-token' as the only argument prints the hash of a "
                    "token (read from stdin) for the --tokens file.")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--database-url", metavar="DSN", help="PostgreSQL to use (default: DATABASE_URL, else "
                                                              "the embedded server)")
    who = parser.add_argument_group("identity (stdio only: over http each token names its principal)")
    who.add_argument("--user", help="the user whose memory this is (required for stdio)")
    who.add_argument("--project")
    who.add_argument("--session")
    who.add_argument("--team")
    who.add_argument("--org")
    http = parser.add_argument_group("http")
    http.add_argument("--host", default="127.0.0.1")
    http.add_argument("--port", type=int, default=8765)
    http.add_argument("--tokens", metavar="FILE",
                      help="JSON: sha256 of a token -> {user_id, project_id?, team_id?, org_id?} (required for http)")
    return parser


def _hash_token_command(args: list[str]) -> int:
    if args:
        print("usage: agent-memory mcp hash-token  (the token is read from stdin, not argv)",
              file=sys.stderr)
        return 2
    token = getpass.getpass("token: ") if sys.stdin.isatty() else sys.stdin.readline().rstrip("\r\n")
    try:
        print(hash_token(token))
    except InvalidInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["hash-token"]:
        return _hash_token_command(argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)  # stdout is the stdio transport's
    flags = (args.user, args.project, args.session, args.team, args.org)
    try:
        if args.transport == "stdio":
            if args.tokens:
                parser.error("--tokens is for --transport http")
            identity = check_identity(*flags)
            verifier = None
        else:
            if any(flag is not None for flag in flags):
                parser.error("over http each token names its principal: drop --user/--project/--session/--team/--org")
            if not args.tokens:
                parser.error("--transport http needs --tokens FILE (see hash-token)")
            identity = None
            verifier = StaticTokenVerifier(load_tokens(args.tokens))
    except AgentMemoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with exit_on_signals():  # SIGTERM too ends with backend.close() and the atexit hooks (the embedded server)
        backend = MemoryBackend(args.database_url)
        try:
            backend.sync_service()  # open the pool and migrate now: fail at start, not at the first call
            if verifier is None:
                server = build_server(backend, identity)
                asyncio.run(server.run_stdio_async())
            else:
                asyncio.run(_serve_http(backend, verifier, args.host, args.port))
        except KeyboardInterrupt:
            pass
        except AgentMemoryError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            backend.close()
    return 0


async def _serve_http(backend: MemoryBackend, verifier: StaticTokenVerifier, host: str, port: int) -> None:
    import uvicorn

    server = build_server(backend, token_verifier=verifier, issuer_url=f"http://{host}:{port}")
    app = server.streamable_http_app(stateless_http=True, json_response=True, host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    await uvicorn.Server(config).serve()


if __name__ == "__main__":
    sys.exit(main())
