"""``agent-memory``: the demo and a small command line over the memory service.

``agent-memory demo`` is the quickstart's main job: it runs offline on the
embedded PostgreSQL and the local embedding model. The other commands act on
the same database (``DATABASE_URL`` or the embedded one) for one user.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from .config import MemoryConfig
from .errors import AgentMemoryError
from .models import MemoryItem, MemoryType, Rejection, Scope, SearchResult, Visibility
from .service import MemoryService

__all__ = ["main"]

DEMO_USERS = ("demo-alice", "demo-bob")
DEMO_PROJECT = "demo-webshop"


def _line(item: MemoryItem | SearchResult) -> str:
    if isinstance(item, SearchResult):
        return (f"  {item.score:.3f}  [{item.item.scope}/{item.item.memory_type}] {item.content}"
                f"   (similarity {item.similarity:.2f}, keyword {item.keyword:.2f})")
    return f"  {item.id}  [{item.scope}/{item.memory_type}/{item.status}] {item.content}"


def _reset_demo(memory: MemoryService) -> None:
    """The demo is re-runnable: it removes what its own demo users saved last time."""
    for user in DEMO_USERS:
        for item in memory.list_memories(user_id=user, project_id=DEMO_PROJECT, status=None, limit=10_000):
            if item.user_id == user:
                memory.delete_memory(item.id, user_id=user, project_id=DEMO_PROJECT, hard=True)


def demo(memory: MemoryService, out: Any = sys.stdout) -> None:
    def say(text: str = "") -> None:
        print(text, file=out)

    alice, bob = DEMO_USERS
    _reset_demo(memory)
    say(f"agent-memory demo: {memory.config.database_url or 'embedded PostgreSQL'}, "
        f"embeddings {type(memory.embeddings).__name__} (offline, no API key)\n")

    say(f"1. {alice} and {bob} save memories (alice's first save loads the local model)")
    saves = [
        (alice, "I prefer concise answers with code examples in Python", "preference", "user"),
        (alice, "I am allergic to peanuts", "constraint", "user"),
        (alice, "My daughter Mia starts school in September", "event", "user"),
        (alice, "We decided to use PostgreSQL 16 with pgvector for the webshop", "decision", "project"),
        (bob, "I prefer answers in German", "preference", "user"),
        (bob, "I am training for the Berlin marathon", "habit", "user"),
        (bob, "The webshop front end is built with Vue 3", "context", "project"),
    ]
    for user, content, memory_type, scope in saves:
        started = time.perf_counter()
        result = memory.add_explicit_memory(content, user_id=user, project_id=DEMO_PROJECT,
                                            memory_type=memory_type, scope=scope)
        took = (time.perf_counter() - started) * 1000
        verdict = "saved" if isinstance(result, MemoryItem) else f"refused ({result.reason})"
        say(f"  {user:<10} {verdict} [{scope}/{memory_type}] {content!r} ({took:.0f} ms)")

    say("\n2. The gate: a repeated fact is not stored twice, a secret is never stored")
    again = memory.add_explicit_memory("i prefer concise answers, with python code examples", user_id=alice)
    if isinstance(again, MemoryItem):
        say(f"  duplicate -> returns the existing memory {again.id} (deduplicated={again.deduplicated})")
    secret = memory.add_explicit_memory("my github token is ghp_" + "a" * 12 + "B7x9Qz2Lm4Np6Rt8Vw0Y",
                                        user_id=alice)
    if isinstance(secret, Rejection):
        say(f"  secret    -> rejected ({secret.reason}): {secret.message}")

    say("\n3. Search: each user gets their own memories plus the shared project's")
    for user, query in ((alice, "what should I avoid eating?"), (alice, "which database do we use?"),
                        (bob, "which database do we use?"), (bob, "how should you answer me?")):
        say(f"  {user} asks {query!r}")
        for hit in memory.search_memories(query, user_id=user, project_id=DEMO_PROJECT, k=3, min_relevance=0.1):
            say(_line(hit))

    say("\n4. Isolation: bob searching for alice's allergy finds nothing of hers")
    hits = memory.search_memories("peanut allergy", user_id=bob, project_id=DEMO_PROJECT, k=5)
    leaked = [h for h in hits if h.item.user_id == alice and h.item.scope is Scope.USER]
    say(f"  {len(hits)} hits for bob, {len(leaked)} of them alice's private memories")

    say("\n5. What the middleware would inject into alice's system prompt")
    hits = memory.search_memories("suggest a lunch for me and my family", user_id=alice,
                                  project_id=DEMO_PROJECT, k=3, min_relevance=0.05)
    say(memory.format_memories_for_prompt(hits, budget_chars=800))

    stats = memory.stats(user_id=alice, project_id=DEMO_PROJECT)
    say(f"\n6. Stats for {alice}: {stats.total} memories by type {stats.by_type}, by scope {stats.by_scope}")
    say("\nDone. Run `agent-memory search \"...\" --user demo-alice --project demo-webshop` to explore.")


def _identity(args: argparse.Namespace) -> dict[str, Any]:
    return {"user_id": args.user, "project_id": args.project, "session_id": args.session}


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent-memory", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="embedded PostgreSQL data directory (default: per-user; "
                                           "ignored when DATABASE_URL is set)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="save and search memories for two users, offline")

    def with_identity(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--user", required=True, help="user id")
        p.add_argument("--project", help="project id")
        p.add_argument("--session", help="session id")
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


def _run(args: argparse.Namespace, memory: MemoryService) -> int:
    if args.command == "demo":
        demo(memory)
        return 0
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
