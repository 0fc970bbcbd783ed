"""The command line's grammar and help: every command, option, example and environment variable.

Nothing here imports more than :mod:`argparse`, so ``agent-memory --help`` answers at once;
each command names the function that runs it (``module:function`` in this package), imported
only when that command runs.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["COMMANDS", "ENVIRONMENT", "Command", "build_parser"]

# The choices are spelled out (not read from agent_memory.models) to keep --help import-free;
# tests/test_cli.py checks that they match the enums.
MEMORY_TYPES = ("preference", "fact", "skill", "habit", "event", "context", "constraint", "decision")
SCOPES = ("user", "project", "session", "team", "org")
VISIBILITIES = ("public", "members", "owner_only")
STATUSES = ("active", "archived", "superseded")
#: memory types are checked by the service, which knows the custom ones (MEMORY_CUSTOM_TYPES)
TYPE_HELP = f"{', '.join(MEMORY_TYPES)}, or a custom type of MEMORY_CUSTOM_TYPES"

DESCRIPTION = """\
agent-memory: long-term memory for LangGraph and LangChain agents, on PostgreSQL + pgvector.

Run the demo, chat with the memory agent, or read and change one user's memories.
Every command works on DATABASE_URL (or --database-url), else on the embedded PostgreSQL.
Memory ids may be shortened to any unambiguous prefix (the 8 characters tables show)."""

#: (variable, what it does), shown under every --help and in docs/reference/cli.md
ENVIRONMENT: tuple[tuple[str, str], ...] = (
    ("DATABASE_URL", "PostgreSQL to use (postgresql://user:pass@host/db); unset: the embedded server"),
    ("MEMORY_DATA_DIR", "the embedded server's data directory (default: per user)"),
    ("MEMORY_SERVER_IDLE_TIMEOUT", "seconds the embedded server stays up unused after a command (default: 600)"),
    ("MEMORY_EMBEDDINGS", "local (offline MiniLM, the default) or openai"),
    ("MEMORY_EMBEDDING_MODEL", "the OpenAI embedding model (with MEMORY_EMBEDDINGS=openai)"),
    ("OPENAI_API_KEY", "lets demo and chat use a real model"),
    ("OPENAI_BASE_URL", "an OpenAI-compatible endpoint (Ollama, vLLM, ...) for the model"),
    ("AGENT_MEMORY_CHAT_MODEL", "the chat model's name for demo and chat"),
    ("AGENT_MEMORY_DEBUG", "1: show the full traceback of an error (same as --debug)"),
    ("NO_COLOR", "1: no colour in tables"),
)


def _epilog(examples: Sequence[str], environment: bool = False) -> str:
    text = "examples:\n" + "\n".join(f"  {e}" for e in examples) if examples else ""
    if environment:
        text += "\n\nenvironment variables (MEMORY_* settings: see docs/reference/configuration.md):\n"
        text += "\n".join(f"  {name:<24} {what}" for name, what in ENVIRONMENT)
    return text


@dataclass(frozen=True)
class Command:
    """One command: what ``--help`` says, its examples, and the function that runs it."""

    name: str
    summary: str
    runs: str  # "module:function" in agent_memory.cli
    examples: tuple[str, ...]
    description: str = ""
    identity: bool = True  # takes --user/--project/--session/--team/--org
    args: tuple[tuple[tuple[str, ...], dict], ...] = field(default_factory=tuple)


def _a(*flags: str, **kwargs: object) -> tuple[tuple[str, ...], dict]:
    return flags, kwargs


_ID = _a("memory_id", help="the memory's id, or an unambiguous prefix of it (as tables show)")

COMMANDS: tuple[Command, ...] = (
    Command("demo", "an agent remembers a user across two sessions; a second user sees nothing", "agent:demo",
            ("agent-memory demo", "OPENAI_API_KEY=sk-... agent-memory demo", "agent-memory demo --offline"),
            description="Runs the quickstart's story on the database: what extraction learns after each turn, the "
                        "profiles built from it, what the model received in the next session, and a second user "
                        "who gets nothing. Offline unless OPENAI_API_KEY or OPENAI_BASE_URL is set.",
            identity=False,
            args=(_a("--offline", action="store_true",
                     help="use the offline scripted model even when OPENAI_API_KEY is set"),)),
    Command("chat", "talk to the memory agent as one user", "agent:chat",
            ("agent-memory chat --user alice", "agent-memory chat --user alice --project webshop --thread t1",
             "echo 'I prefer tea' | agent-memory chat --user alice --offline"),
            description="Reads your lines from standard input (type /help for the commands). A real model needs "
                        "OPENAI_API_KEY or OPENAI_BASE_URL; otherwise the offline scripted model answers.",
            identity=False,
            args=(_a("--user", required=True, help="whose memory the agent uses (required)"),
                  _a("--project", help="the project the conversation is about"),
                  _a("--thread", help="thread id to start or resume (default: a new one)"),
                  _a("--offline", action="store_true",
                     help="use the offline scripted model even when OPENAI_API_KEY is set"))),
    Command("add", "save one memory (through the gate that refuses secrets and junk)", "memories:add",
            ("agent-memory add 'I keep my notes in Obsidian' --user alice --type habit",
             "agent-memory add 'We deploy on Fridays' --user alice --project webshop --scope project"),
            args=(_a("content", help="what to remember, one statement"),
                  _a("--type", default="fact", metavar="TYPE",
                     help=f"the kind of memory (default: fact): {TYPE_HELP}"),
                  _a("--scope", default="user", choices=SCOPES,
                     help="who shares it: user (default), project/session/team/org (needs that id)"),
                  _a("--visibility", default="members", choices=VISIBILITIES,
                     help="in a shared scope, who may read it (default: members)"),
                  _a("--confidence", type=float, default=1.0,
                     help="how sure, 0 to 1 (default: 1; below MEMORY_MIN_CONFIDENCE is refused)"))),
    Command("search", "search memories by meaning and keywords, best first", "memories:search",
            ("agent-memory search 'which editor?' --user alice",
             "agent-memory search 'database' --user alice --project webshop -k 10 --type decision"),
            args=(_a("query", help="what to look for, in words"),
                  _a("-k", "--limit", dest="k", type=int, default=5, help="how many results at most (default: 5)"),
                  _a("--type", action="append", metavar="TYPE",
                     help=f"only this type (repeat for several): {TYPE_HELP}"),
                  _a("--as-of", help="what held in the world at this time (ISO 8601, e.g. 2026-01-31T12:00)"),
                  _a("--known-at", help="what the memory held at this time (ISO 8601)"),
                  _a("--filter", dest="metadata_filter", metavar="JSON",
                     help='only memories whose metadata passes, e.g. \'{"tags": {"$contains": "billing"}}\''),
                  _a("--subtree", action="store_true",
                     help="also read the projects, teams and orgs below the given ones (whole / segments)"))),
    Command("list", "list memories, most recently changed first", "memories:list_",
            ("agent-memory list --user alice", "agent-memory list --user alice --status archived --limit 20"),
            args=(_a("--limit", type=int, default=50, help="how many at most (default: 50)"),
                  _a("--type", action="append", metavar="TYPE",
                     help=f"only this type (repeat for several): {TYPE_HELP}"),
                  _a("--status", action="append", choices=STATUSES,
                     help="only this status (repeat for several; default: active)"),
                  _a("--filter", dest="metadata_filter", metavar="JSON",
                     help="only memories whose metadata passes (JSON, as for search)"),
                  _a("--subtree", action="store_true", help="also list the scopes below the given ones"))),
    Command("show", "one memory with all its fields", "memories:show",
            ("agent-memory show 3f2a9c1e --user alice",), args=(_ID,)),
    Command("delete", "archive a memory (restore brings it back), or delete it for good", "memories:delete",
            ("agent-memory delete 3f2a9c1e --user alice", "agent-memory delete 3f2a9c1e --user alice --hard"),
            args=(_ID, _a("--hard", action="store_true", help="delete for good instead of archiving"))),
    Command("restore", "make an archived memory active again", "memories:restore",
            ("agent-memory restore 3f2a9c1e --user alice",), args=(_ID,)),
    Command("edit", "revise one of your memories in place (the old wording stays in its history)",
            "memories:edit",
            ("agent-memory edit 3f2a9c1e --user alice --content 'I use VS Code'",
             "agent-memory edit 3f2a9c1e --user alice --type preference --confidence 0.8 --reason 'asked'"),
            args=(_ID, _a("--content", help="the new wording"),
                  _a("--type", metavar="TYPE", help=f"the new type: {TYPE_HELP}"),
                  _a("--confidence", type=float, help="the new confidence, 0 to 1"),
                  _a("--reason", help="why, kept in the history"))),
    Command("history", "a memory's story: earlier wordings and what it replaced or was replaced by",
            "memories:history", ("agent-memory history 3f2a9c1e --user alice",), args=(_ID,)),
    Command("stats", "counts of what the user may see, by type, scope and status", "memories:stats",
            ("agent-memory stats --user alice", "agent-memory stats --user alice --project webshop --json")),
    Command("document", "learn from a text or markdown file, or search documents by passage", "documents:document",
            ("agent-memory document add handbook.md --user alice --project webshop --scope project",
             "agent-memory document search 'when do we deploy?' --user alice --project webshop"),
            description="add: the file becomes a document whose passages are searchable and whose statements become "
                        "memories (the offline rules, or the configured model); adding the same file again updates "
                        "what came from it. search: the passages that best match, with their document and section.",
            args=(_a("action", choices=("add", "search"), help="add a file, or search the documents"),
                  _a("target", help="add: the file's path; search: what to look for, in words"),
                  _a("--scope", default="user", choices=("user", "project", "session"),
                     help="add: where the document and its memories go (default: user)"),
                  _a("--title", help="add: the document's title (default: the file name)"),
                  _a("--external-id", help="add: the id that names the document (default: the file's full path)"),
                  _a("-k", "--limit", dest="k", type=int, default=5,
                     help="search: how many passages at most (default: 5)"))),
    Command("profile", "show or edit the user's (or the project's) profile", "profiles:profile",
            ("agent-memory profile show --user alice",
             "agent-memory profile show --user alice --project webshop --kind project",
             "agent-memory profile edit --user alice --set preferred_language=Python --set 'tools=[\"Vim\"]'",
             "agent-memory profile edit --user alice --reset preferred_language"),
            description="A profile is built from the memories; a field set by hand wins until it is reset. "
                        "Values given to --set are read as JSON when they parse (lists, numbers), else as text.",
            args=(_a("action", choices=("show", "edit"), help="show the profile, or edit its fields"),
                  _a("--kind", choices=("user", "project"), default="user",
                     help="the user's profile (default) or the project's (needs --project)"),
                  _a("--set", action="append", default=[], metavar="FIELD=VALUE",
                     help="edit: set a field by hand (repeat for several; an empty value clears it)"),
                  _a("--reset", action="append", default=[], metavar="FIELD",
                     help="edit: forget a hand-set field so the built value shows again (repeat; 'all' for all)"))),
    Command("graph", "the user's knowledge graph: list, show, merge, split, export or build it", "graph:graph",
            ("agent-memory graph list --user alice", "agent-memory graph show Sarah --user alice",
             "agent-memory graph merge Bob Robert --user alice",
             "agent-memory graph split Bob --name Robert --memory 3f2a9c1e-... --user alice",
             "agent-memory graph export --user alice", "agent-memory graph build --user alice",
             "agent-memory graph show --html graph.html --user alice"),
            description="The people, organisations, places and tools the user's memories are about, and how they "
                        "relate. merge KEEP OTHER: two nodes are one; split NODE --name NEW --memory ID: those "
                        "memories are about someone else; build: add memories written before the graph (resumable); "
                        "show --html FILE [NODE]: draw the graph (or a node's neighbourhood) as a page that opens "
                        "offline (needs the graph-view extra).",
            args=(_a("action", choices=("list", "show", "merge", "split", "export", "build"),
                     help="what to do with the graph"),
                  _a("names", nargs="*", help="show/split: a node (name or id); merge: the node to keep, then the other"),
                  _a("--type", choices=("person", "concept", "entity"), help="list: only this kind of node"),
                  _a("--limit", type=int, default=100,
                     help="list, show --html: how many nodes at most (default: 100)"),
                  _a("--html", metavar="FILE", help="show: write the graph as a self-contained HTML page"),
                  _a("--name", help="split: the new node's name"),
                  _a("--memory", action="append", default=[], metavar="ID",
                     help="split: a memory (full id) about the new node (repeat for several)"),
                  _a("--batch-size", type=int, default=200,
                     help="build: memories read per transaction (default: 200)"))),
    Command("export", "write everything a user may see (or owns) as JSON, for a copy or a move",
            "data:export",
            ("agent-memory export --user alice -o alice.json", "agent-memory export --user alice --owned > mine.json"),
            description="The file holds memories, their history, resources and documents' passages, profiles, "
                        "memberships, shares and the knowledge graph; no vectors (import embeds again). Import it into another database with agent-memory import.",
            identity=False,
            args=(_a("--user", required=True, help="whose data to export (required)"),
                  _a("--owned", action="store_true", help="only what the user created (default: all they may see)"),
                  _a("-o", "--output", help="file to write (default: standard output)"))),
    Command("import", "read an export, or a list of memories, into the database (with a progress bar)",
            "data:import_",
            ("agent-memory import alice.json --user alice",
             "agent-memory import everyone.json --as-operator",
             "agent-memory import notes.jsonl --user alice --project webshop",
             "cat notes.json | agent-memory import - --user alice --dedupe"),
            description="An export file (from agent-memory export) is written back as it was: ids, history, "
                        "profiles, memberships; rows already present are skipped, and nothing is added to them. "
                        "Give --user for a file of that user's own rows, or --as-operator to write whatever "
                        "users, memberships, shares and profiles the file names (an operator's power). Any other "
                        "file is a list of memories for --user: a JSON array or JSON lines, each a string or an "
                        "object with 'content' and optionally memory_type, scope, confidence, visibility, metadata.",
            identity=False,
            args=(_a("file", help="the file to read, or - for standard input"),
                  _a("--user", help="an export: the user whose own rows it holds; a list of memories: whose they "
                                    "become (required for a list)"),
                  _a("--as-operator", action="store_true",
                     help="an export: import it as the database's operator, whatever users it names"),
                  _a("--project", help="project id, for project-scoped memories of a list"),
                  _a("--session", help="session id, for session-scoped memories of a list"),
                  _a("--team", help="team id, for team-scoped memories of a list"),
                  _a("--org", help="org id, for org-scoped memories of a list"),
                  _a("--dedupe", action="store_true", help="skip memories of a list that repeat stored ones"),
                  _a("--batch-size", type=int, default=200,
                     help="memories of a list written per transaction (default: 200)"))),
    Command("forget-user", "erase a user for good: their memories, resources, profile, runs, threads",
            "data:forget_user",
            ("agent-memory forget-user alice --yes",),
            description="For a deletion request. Others' memories stay; scopes left without an owner are "
                        "listed, give them one. Asks first unless --yes.",
            identity=False,
            args=(_a("user_id", help="the user to erase"),
                  _a("--yes", action="store_true", help="do not ask for confirmation"))),
    Command("maintain", "forget: delete expired memories, archive unused ephemeral and faded ones (cron-safe)",
            "data:maintain",
            ("agent-memory maintain", "MEMORY_ARCHIVE_BELOW=0.05 agent-memory maintain --json"),
            description="Expired memories (already invisible to every read) are deleted with their history; "
                        "ephemeral memories unused for MEMORY_EPHEMERAL_DAYS are archived, and with "
                        "MEMORY_ARCHIVE_BELOW set, faded ones unused for MEMORY_ARCHIVE_IDLE_DAYS. In batches; "
                        "several runs may overlap.",
            identity=False),
    Command("server", "the embedded PostgreSQL: whether it runs and who uses it, or stop it now", "server:server",
            ("agent-memory server status", "agent-memory server stop", "MEMORY_SERVER_IDLE_TIMEOUT=60 agent-memory list --user alice"),
            description="Without DATABASE_URL, commands use the embedded server and leave it running, so the next "
                        "command starts at once; a watchdog stops it once no process has used it for "
                        "MEMORY_SERVER_IDLE_TIMEOUT seconds (default 600; 0: each command stops it on exit). "
                        "status: whether it runs, its data directory, the processes using it and the watchdog. "
                        "stop: stop it now, even if processes use it (they start it again when they need it).",
            identity=False,
            args=(_a("action", choices=("status", "stop"), help="status: what runs; stop: stop it now"),)),
    Command("mcp", "serve memory to MCP clients (Claude Desktop, IDEs, agents) over stdio or streamable HTTP",
            "servers:mcp",
            ("agent-memory mcp --transport stdio --user alice --project webshop",
             "agent-memory mcp --transport http --port 8765 --tokens tokens.json",
             "echo \"$TOKEN\" | agent-memory mcp hash-token"),
            description="Every argument goes to the server: agent-memory mcp --help lists them. Over stdio the "
                        "identity is fixed by the flags; over HTTP each bearer token names its principal.",
            identity=False,
            args=(_a("server_args", nargs=argparse.REMAINDER, help="the server's own arguments"),)),
    Command("memory-store", "run the memory_store JSON-RPC plugin on stdin/stdout, for agent daemons",
            "servers:memory_store",
            ("agent-memory memory-store --manifest", "agent-memory memory-store --user daemon"),
            description="Every argument goes to the plugin: agent-memory memory-store --help lists them.",
            identity=False,
            args=(_a("server_args", nargs=argparse.REMAINDER, help="the plugin's own arguments"),)),
    Command("reembed", "re-embed every memory with the configured embedding model, then switch to it",
            "data:reembed",
            ("MEMORY_EMBEDDINGS=openai agent-memory reembed", "agent-memory reembed --batch-size 64"),
            description="After changing MEMORY_EMBEDDINGS / MEMORY_EMBEDDING_MODEL: makes the new model's vectors "
                        "in batches next to the old ones (the old model keeps serving meanwhile), then switches in "
                        "one transaction, vector size included. Interrupted? Run it again: it resumes.",
            identity=False,
            args=(_a("--batch-size", type=int, default=128, help="memories embedded per batch (default: 128)"),
                  _a("--force", action="store_true",
                     help="re-embed even when the database already uses this model"))),
)

_IDENTITY = (
    _a("--user", required=True, help="whose memory: every read and write is scoped to this user (required)"),
    _a("--project", help="project id: include (or write to) this project's memory"),
    _a("--session", help="session id: include (or write to) this session's memory"),
    _a("--team", help="team id (reads: only this team; writes: --scope team)"),
    _a("--org", help="org id (reads: only this org; writes: --scope org)"),
)


def _common(top: bool) -> argparse.ArgumentParser:
    """Options every command takes, before or after its name. Below the top level they default
    to SUPPRESS, so a value given before the command is not reset by the command's parser."""
    parser = argparse.ArgumentParser(add_help=False)
    default = (lambda value: value) if top else (lambda value: argparse.SUPPRESS)
    group = parser.add_argument_group("common options")
    group.add_argument("--database-url", default=default(None), metavar="URL",
                       help="PostgreSQL to use (default: DATABASE_URL, else the embedded server)")
    group.add_argument("--data-dir", default=default(None), metavar="DIR",
                       help="the embedded server's data directory (default: MEMORY_DATA_DIR, else per user)")
    group.add_argument("--json", action="store_true", default=default(False),
                       help="print JSON only (for scripts)")
    group.add_argument("--debug", action="store_true", default=default(False),
                       help="show the full traceback of an error (or AGENT_MEMORY_DEBUG=1)")
    return parser


def _paragraphs(*texts: str) -> str:
    return "\n\n".join(textwrap.fill(t, width=88) for t in texts if t)


def build_parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="agent-memory", description=DESCRIPTION, formatter_class=raw, parents=[_common(True)],
        epilog=_epilog(("agent-memory demo", "agent-memory add 'I prefer tea' --user alice",
                        "agent-memory list --user alice", "agent-memory <command> --help"), environment=True),
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="<command>")
    common = _common(False)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.summary, formatter_class=raw, parents=[common],
                           description=_paragraphs(command.summary[0].upper() + command.summary[1:] + ".",
                                                   command.description),
                           epilog=_epilog(command.examples, environment=True))
        for flags, kwargs in command.args:
            p.add_argument(*flags, **kwargs)
        if command.identity:
            group = p.add_argument_group("identity (whose memory)")
            for flags, kwargs in _IDENTITY:
                group.add_argument(*flags, **kwargs)
        p.set_defaults(runs=command.runs)
    return parser
