"""Descriptions of nodes and summaries of storylines and macros: extractive offline (pure
functions here), written by a chat model when ``maintain()`` is given one (:func:`prompt`).

Extractive means chosen sentences of what the user's memories said, never words of our own
beyond the anchor's name: a summary can be wrong by omission, not by invention.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

__all__ = ["Summary", "describe_node", "prompt", "summarise_macro", "summarise_storyline"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
#: a description: one or two sentences; a storyline's: two or three
_DESCRIPTION_CHARS = 300
_SUMMARY_CHARS = 600


class Summary(BaseModel):
    """What the model answers: the text only."""

    text: str = Field(description="the description or summary, plain text, at most three sentences")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text.strip()) if s.strip()]


def _names(name: str, aliases: Sequence[str] = ()) -> list[str]:
    return [n.lower() for n in (name, *aliases) if n]


def _pick(texts: Sequence[str], names: Sequence[str], most: int, chars: int, *, ends: bool = True) -> list[str]:
    """Sentences of ``texts`` (in order) that name one of ``names``, each once, at most ``most``
    and ``chars`` characters; when too many, the first ones and the last one (how it began,
    where it stands), or with ``ends=False`` the first ones only."""
    seen: set[str] = set()
    found: list[str] = []
    for text in texts:
        for sentence in _sentences(text):
            key = sentence.lower()
            if key in seen or not any(n in key for n in names):
                continue
            seen.add(key)
            found.append(sentence)
    if len(found) > most:
        found = found[: most - 1] + found[-1:] if ends else found[:most]
    out: list[str] = []
    left = chars
    for sentence in found:
        if len(sentence) > left:
            break
        out.append(sentence)
        left -= len(sentence) + 1
    return out


def describe_node(name: str, aliases: Sequence[str], notes: Sequence[Mapping[str, Any]]) -> str:
    """A node's description from its notes (newest first): up to two sentences that name it,
    the newest; none names it: the newest note's first sentence."""
    texts = [str(n.get("content", "")) for n in sorted(notes, key=lambda n: str(n.get("added_at") or ""),
                                                       reverse=True)]
    picked = _pick(texts, _names(name, aliases), 2, _DESCRIPTION_CHARS, ends=False)
    if not picked:
        first = next((s for t in texts for s in _sentences(t)), "")
        picked = [first[:_DESCRIPTION_CHARS]] if first else []
    return " ".join(picked)


def summarise_storyline(name: str, texts: Sequence[str]) -> str:
    """A storyline's summary from its memories (oldest first): up to three sentences that name
    its anchor, how it began and where it stands."""
    picked = _pick(texts, _names(name), 3, _SUMMARY_CHARS) or [s for t in texts[:1] for s in _sentences(t)][:1]
    return " ".join(picked)


def summarise_macro(name: str, children: Sequence[str]) -> str:
    """A macro's summary from its storylines (``name: description``, oldest first): what each
    is about, in order, within the summary's length."""
    parts: list[str] = []
    left = _SUMMARY_CHARS
    for child in children:
        head = _sentences(child)[:1]
        if not head or len(head[0]) > left:
            break
        parts.append(head[0])
        left -= len(head[0]) + 1
    return f"{name}, over time: " + " ".join(parts) if parts else name


def prompt(kind: str, name: str, texts: Sequence[str]) -> list[Any]:
    """The messages that ask a model for a node's description (``kind`` ``"node"``) or a
    storyline's or macro's summary, from ``texts`` (notes, memories or storylines), each
    delimited so none can close the block it sits in."""
    from langchain_core.messages import HumanMessage

    from ..prompts import render

    def fence(text: str) -> str:
        return text.replace("<", "&lt;").replace(">", "&gt;")

    items = "\n".join(f"<item>{fence(t)}</item>" for t in texts)
    return [HumanMessage(render("graph_summary", kind={"node": "a short description (one or two sentences) of",
                                                         "storyline": "a summary (two or three sentences) of what "
                                                                      "happened around",
                                                         "macro": "a summary (two or three sentences) of the "
                                                                  "long-running theme around"}[kind],
                                 subject=fence(name), items=items))]
