"""``agent-memory``: the demo, a chat, and a small command line over the memory service.

``agent-memory demo`` is the quickstart's main job (:mod:`agent_memory.demo`):
an agent with memory, two sessions of one user and a second user, offline
unless ``OPENAI_API_KEY`` is set. ``agent-memory chat`` (:mod:`agent_memory.chat`)
talks to the same agent. The other commands act on the same database
(``DATABASE_URL`` or the embedded one) for one user. This module only parses
arguments and prints results.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from .config import MemoryConfig
from .errors import AgentMemoryError
from .models import (
    SHARED_SCOPES,
    MemoryItem,
    MemoryType,
    Rejection,
    Scope,
    SearchResult,
    Visibility,
)
from .service import MemoryService

__all__ = ["main"]


def _level(item: MemoryItem) -> str:
    return f"{item.scope}:{item.scope_id}" if item.scope in SHARED_SCOPES else item.scope.value


def _line(item: MemoryItem | SearchResult) -> str:
    if isinstance(item, SearchResult):
        return (f"  {item.score:.3f}  [{_level(item.item)}/{item.item.memory_type}] {item.content}"
                f"   (similarity {item.similarity:.2f}, keyword {item.keyword:.2f})")
    return f"  {item.id}  [{_level(item)}/{item.memory_type}/{item.status}] {item.content}"


def _identity(args: argparse.Namespace) -> dict[str, Any]:
    return {"user_id": args.user, "project_id": args.project, "session_id": args.session, "team_id": args.team,
            "org_id": args.org}


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent-memory", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="embedded PostgreSQL data directory (default: per-user; "
                                           "ignored when DATABASE_URL is set)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="an agent remembers a user across two sessions; a second user sees nothing")
    p.add_argument("--offline", action="store_true",
                   help="use the offline scripted model even when OPENAI_API_KEY is set")
    p = sub.add_parser("chat", help="talk to the memory agent as one user (a real model needs OPENAI_API_KEY)")
    p.add_argument("--user", required=True, help="user id")
    p.add_argument("--project", help="project id")
    p.add_argument("--thread", help="thread id to start or resume (default: a new one)")
    p.add_argument("--offline", action="store_true",
                   help="use the offline scripted model even when OPENAI_API_KEY is set")

    def with_identity(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--user", required=True, help="user id")
        p.add_argument("--project", help="project id")
        p.add_argument("--session", help="session id")
        p.add_argument("--team", help="team id (reads: only this team; writes: --scope team)")
        p.add_argument("--org", help="org id (reads: only this org; writes: --scope org)")
        p.add_argument("--json", action="store_true", help="print JSON")
        return p

    p = with_identity(sub.add_parser("add", help="save one memory"))
    p.add_argument("content")
    p.add_argument("--type", default="fact", choices=MemoryType.values())
    p.add_argument("--scope", default="user", choices=Scope.values())
    p.add_argument("--visibility", default="members", choices=Visibility.values())
    p.add_argument("--confidence", type=float, default=1.0)
    p = with_identity(sub.add_parser("search", help="search memories"))
    p.add_argument("query")
    p.add_argument("-k", type=int, default=5)
    p.add_argument("--type", action="append", choices=MemoryType.values())
    p = with_identity(sub.add_parser("list", help="list memories, newest first"))
    p.add_argument("--limit", type=int, default=50)
    p = with_identity(sub.add_parser("delete", help="archive a memory (or --hard delete it)"))
    p.add_argument("memory_id")
    p.add_argument("--hard", action="store_true")
    with_identity(sub.add_parser("stats", help="counts of a user's memories"))
    return parser


def _item_json(item: MemoryItem) -> dict[str, Any]:
    return {"id": str(item.id), "content": item.content, "memory_type": item.memory_type.value,
            "scope": item.scope.value, "scope_id": item.scope_id, "status": item.status.value,
            "confidence": item.confidence, "created_at": item.created_at.isoformat(),
            "deduplicated": item.deduplicated}


def _run_agent(args: argparse.Namespace, memory: MemoryService) -> int:
    """``demo`` and ``chat``, imported only here: they load LangChain, which the other commands don't need."""
    from .chat import Who, new_thread_id, run_chat
    from .demo import run_demo
    from .demo_model import choose_chat_model

    choice = choose_chat_model(offline=args.offline)
    if args.command == "demo":
        run_demo(memory, sys.stdout, choice=choice)
        return 0
    who = Who(args.user, args.project, args.thread or new_thread_id())
    return run_chat(memory, who, choice, inp=sys.stdin, out=sys.stdout)


def _run(args: argparse.Namespace, memory: MemoryService) -> int:
    if args.command in ("demo", "chat"):
        return _run_agent(args, memory)
    ids = _identity(args)
    if args.command == "add":
        result = memory.add_explicit_memory(args.content, memory_type=args.type, scope=args.scope,
                                            visibility=args.visibility, confidence=args.confidence, **ids)
        if isinstance(result, Rejection):
            print(f"rejected ({result.reason}): {result.message}", file=sys.stderr)
            return 1
        print(json.dumps(_item_json(result)) if args.json else _line(result))
    elif args.command == "search":
        hits = memory.search_memories(args.query, k=args.k, memory_type=args.type, **ids)
        if args.json:
            print(json.dumps([dict(_item_json(h.item), score=h.score) for h in hits]))
        else:
            print("\n".join(_line(h) for h in hits) or "no memories found")
    elif args.command == "list":
        items = memory.list_memories(limit=args.limit, **ids)
        if args.json:
            print(json.dumps([_item_json(i) for i in items]))
        else:
            print("\n".join(_line(i) for i in items) or "no memories")
    elif args.command == "delete":
        item = memory.delete_memory(args.memory_id, hard=args.hard, **ids)
        print(f"{'deleted' if args.hard else 'archived'} {item.id}")
    elif args.command == "stats":
        s = memory.stats(**ids)
        data = {"total": s.total, "by_type": s.by_type, "by_scope": s.by_scope, "by_status": s.by_status,
                "last_write": s.last_write.isoformat() if s.last_write else None,
                "extractions_remaining": s.extractions_remaining, "storage_bytes": s.storage_bytes}
        print(json.dumps(data, indent=None if args.json else 2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        config = MemoryConfig.from_env(**({"data_dir": args.data_dir} if args.data_dir else {}))
        with MemoryService(config=config) as memory:
            return _run(args, memory)
    except AgentMemoryError as exc:
        print(f"agent-memory: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # python -m agent_memory.cli
    raise SystemExit(main())
