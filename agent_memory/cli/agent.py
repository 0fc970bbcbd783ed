"""``agent-memory demo`` and ``chat``: they load LangChain and an agent, which no other command needs.

A model endpoint that fails mid-run (HTTP 500, a body that is not JSON) raises from inside the
agent; :mod:`.errors` turns it into one line after the transcript printed so far."""

from __future__ import annotations

import argparse
import io
import sys

from .context import open_service
from .output import Output

__all__ = ["chat", "demo"]


def _transcript(out: Output, text: str) -> None:
    out.data({"transcript": text.splitlines()})


def demo(args: argparse.Namespace, out: Output) -> int:
    from ..demo import run_demo
    from ..demo_model import choose_chat_model

    choice = choose_chat_model(offline=args.offline)
    with open_service(args) as memory:
        sink = io.StringIO() if out.json else sys.stdout
        run_demo(memory, sink, choice=choice)
    if out.json:
        _transcript(out, sink.getvalue())
    return 0


def chat(args: argparse.Namespace, out: Output) -> int:
    from ..chat import Who, new_thread_id, run_chat
    from ..demo_model import choose_chat_model

    choice = choose_chat_model(offline=args.offline)
    who = Who(args.user, args.project, args.thread or new_thread_id())
    with open_service(args) as memory:
        sink = io.StringIO() if out.json else sys.stdout
        status = run_chat(memory, who, choice, inp=sys.stdin, out=sink)
    if out.json:
        _transcript(out, sink.getvalue())
    return status
