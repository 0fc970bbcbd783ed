"""Consolidation without a model: ADD, UPDATE, SUPERSEDE or NONE from similarity and wording.

Pure functions. Cosine similarity alone cannot tell the four apart: with the
local MiniLM model "Prefers concise answers." and "Prefers detailed answers."
are 0.84 alike (a contradiction), while "Prefers concise answers." and
"Prefers concise answers with Python code examples." are 0.66 (the same fact
with more detail). So similarity only decides whether two memories are about
the same thing (``related_threshold``), and the words decide the rest:

- NONE: the proposal adds no word the stored memory lacks (or is near-identical).
- SUPERSEDE: the proposal announces a change ("switched", "no longer", "now",
  "instead"...), or it has the stored memory's frame (same type, same leading
  words: "Lives in Berlin." / "Lives in Munich.") with a different value.
- UPDATE: the proposal keeps every word of the stored memory and adds some.
- ADD: anything else, including everything below ``related_threshold``.

A change cue makes a weaker match count when the two share a word that
matters: "Switched from Vim to VS Code." replaces "Uses Vim." (0.68 alike,
and "vim" in both). "Switched to VS Code." alone is 0.40 like "Uses Vim."
and 0.37 like "Uses Emacs.": nothing in it says which one it replaces, so
without a model it is added and both stay. A real LLM does this better; these
rules are the offline fallback, and every decision records which made it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..models import Decision, MemoryItem, Proposal

__all__ = ["CHANGE_CUES", "Verdict", "decide_by_similarity", "words"]

#: words that say a fact changed
CHANGE_CUES = re.compile(
    r"\b(switched|switching|moved|changed|migrated|replaced|stopped|quit|no longer|anymore|any more|instead|"
    r"now uses|now prefers|now works|now lives|from now on|these days|not any longer)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9][a-z0-9+#.\-]*", re.IGNORECASE)
_VERBS = frozenset(["uses", "use", "used", "prefers", "prefer", "likes", "works", "lives", "has", "is", "switched", "moved", "changed", "migrated", "now", "no", "longer", "instead"])
_STOP = frozenset(["a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "with", "by", "is", "are", "was", "be", "their", "they", "them", "it", "its", "as", "that", "this", "user", "prefers"]) - {"prefers"}


def words(text: str) -> list[str]:
    """Lower-case content words, trailing dots removed, stop words out."""
    out = []
    for w in _WORD.findall(text.lower()):
        w = w.rstrip(".")
        if w and w not in _STOP:
            out.append(w)
    return out


@dataclass(frozen=True, slots=True)
class Verdict:
    """A consolidation decision: ``target`` indexes the candidates; ``content`` is the text to store
    (the merged wording for UPDATE); ``reason`` says why, for the record."""

    decision: Decision
    target: int | None
    content: str | None
    reason: str
    similarity: float | None = None


def _frame(text: str, n: int = 2) -> tuple[str, ...]:
    return tuple(words(text)[:n])


def decide_by_similarity(
    proposal: Proposal, candidates: Sequence[tuple[MemoryItem, float]], *, duplicate_threshold: float,
    related_threshold: float = 0.55, change_threshold: float = 0.3,
) -> Verdict:
    """The decision for ``proposal`` given the stored items most like it (best first, with cosine)."""
    if not candidates:
        return Verdict(Decision.ADD, None, proposal.content, "nothing similar is stored")
    new_words = set(words(proposal.content))
    cue = CHANGE_CUES.search(proposal.content)
    for i, (item, sim) in enumerate(candidates):
        old_words = set(words(item.content))
        if sim >= 0.97 or (sim >= related_threshold and new_words <= old_words):
            return Verdict(Decision.NONE, i, None, f"already stored (cosine {sim:.2f}, nothing new)", sim)
        shared = (new_words & old_words) - _VERBS
        if cue and item.memory_type is proposal.memory_type and (sim >= 0.6 or (sim >= change_threshold and shared)):
            return Verdict(Decision.SUPERSEDE, i, proposal.content,
                           f"announces a change ({cue.group(0)!r}) to a stored {item.memory_type.value} "
                           f"(cosine {sim:.2f})", sim)
        if sim < related_threshold:
            continue
        if old_words < new_words:
            return Verdict(Decision.UPDATE, i, proposal.content,
                           f"same fact with more detail (cosine {sim:.2f}, keeps every stored word)", sim)
        frame = _frame(item.content)
        if (item.memory_type is proposal.memory_type and len(frame) == 2 and frame == _frame(proposal.content)
                and sim >= 0.7):
            return Verdict(Decision.SUPERSEDE, i, proposal.content,
                           f"same subject ({' '.join(frame)!r}) with a different value (cosine {sim:.2f})", sim)
        if sim >= duplicate_threshold:
            return Verdict(Decision.NONE, i, None, f"near-duplicate of a stored memory (cosine {sim:.2f})", sim)
    best = candidates[0][1]
    return Verdict(Decision.ADD, None, proposal.content, f"no stored memory says this (best cosine {best:.2f})")
