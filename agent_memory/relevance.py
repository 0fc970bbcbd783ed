"""Whether a turn needs long-term memory at all, and which hits are close enough to show.

Pure: no I/O. Injecting every memory on every turn puts "Prefers Python for
scripting tasks" into "Explain quantum entanglement simply." and makes the
model weave it in. Two checks keep the prompt to what the turn is about:

1. :func:`needs_memory` decides per turn, from the user's words and their previous
   turn, in the spirit of the specification's "does this need a search?" rubric:
   references to the user themself or their circle ("my", "our", "we", "should I",
   "I'm ..."), to past events ("last time", "remember", "you said"), to people
   ("my wife", "email Bob"), to decisions and ongoing projects need memory; a
   question whose answer is the same for everyone ("how do I reverse a list?",
   "what is a monad?") does not. A short follow-up ("and for the backend?")
   inherits the decision of the turn before it. With a model configured and
   ``inject_when="model"``, :func:`ask_model` asks it instead (the rules answer
   when it fails).
   A turn the rules read as generic but that names something the user's memories know
   ("Plan Ida's birthday party.", "Write a runbook entry for the payments API alert.")
   is looked up anyway (:func:`worth_a_look`) and needs memory when a hit names what it
   names (:func:`grounded`): a name both share, a request whose object words are in a
   hit, or "the <thing>" it refers to as known ("When is the piano due for tuning?"). Knowledge questions ("What is MLflow used for?") and creative pieces ("a poem
   about data") are not, whatever they name.
2. :func:`keep_relevant` drops hits whose relevance (the fused similarity the search
   ranks by, before confidence and level are added) is under the floor
   (``MemoryConfig.inject_min_relevance``). The search applies the same floor; this
   keeps it true of hits found otherwise. On a turn that needs memory the best hit is
   kept even under the floor (``at_least_one``): a memory the turn needs can match its
   words weakly ("What's my role again?" against "Is a site reliability engineer on
   the payments team": 0.096).

Both were chosen on the labelled turns of ``benchmarks/data/relevance_turns.jsonl``
(dev split; the held-out split is reported separately in BENCHMARKS.md).
"""

from __future__ import annotations

import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

# ``MemoryConfig.inject_when``: "rules" decides per turn offline (default), "model" asks the
# service's chat model (the rules when there is none or it fails), "always" searches on every turn
# (the behaviour before issue 31; the floor still applies)
from agent_memory.config import INJECT_MODES
from agent_memory.db.requests import Llm
from agent_memory.formatting import escape
from agent_memory.models import SearchResult
from agent_memory.prompts import render

__all__ = [
    "INJECT_MODES",
    "Decision",
    "MemoryNeeded",
    "ask_model",
    "decision_messages",
    "grounded",
    "is_follow_up",
    "keep_relevant",
    "needs_memory",
    "relevance",
    "to_look_up",
    "worth_a_look",
]

#: a turn of fewer words than this, right after one that needed memory, is read as its follow-up
FOLLOW_UP_WORDS = 7

#: a turn of fewer words is a fragment, never looked up for what it names (:func:`worth_a_look`)
GROUNDED_WORDS = 4

_DAYS = r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?"

#: (reason, pattern): the first pattern found in the turn names why memory is needed
_SIGNALS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((reason, re.compile(pattern, re.IGNORECASE)) for reason, pattern in (
    # something the user told us, or we did together, before
    ("past event", r"\b(?:remember|remind me|(?:you|i) recall|forgot|last (?:time|week|month|year|session|night|sprint)"
                   r"|yesterday|earlier|previously|again|as usual|the usual"
                   r"|you (?:said|told|suggested|recommended|mentioned|know)"
                   r"|(?:i|we) (?:said|told you|mentioned|discussed|talked about|agreed|decided|chose|picked))\b"),
    # people in the user's life
    ("person", r"\b(?:my|our|the)\s+(?:\w+\s+)?(?:wife|husband|partner|kids?|children|son|daughter|mom|mum|mother|dad"
               r"|father|parents?|brother|sister|family|friends?|boss|manager|colleagues?|co-?workers?|teammates?"
               r"|clients?|customers?|dog|cat|neighbou?rs?|band|team)\b"
               r"|\b(?:email|call|text|message|invite|meet|ping|thank)\s+(?-i:[A-Z][a-z]+)\b"),
    # what the user, their team or their project have, do, or decided
    ("personal reference", r"\b(?:my|mine|myself|our|ours|ourselves|we|we're|we've|we'd|us)\b"),
    ("decision", r"\b(?:should|shall)\s+(?:i|we)\b"),
    # the user as the subject ("I keep mixing up", "did I", "for me"), outside how-to frames
    ("about the user", r"\b(?:i|i'm|i've|i'd|i'll)\b|\b(?:for|to|with|about|suit|help) me\b|\b(?:recommend|suggest)\b[^.?!]*\bme\b"
                       # how the assistant is to talk to the user ("how should you answer me?")
                       r"|\b(?:answer|address|call|treat|greet|reply to|respond to|talk to|speak to|write to)\s+me\b"),
    # the user's own calendar
    ("schedule", r"\b(?:today|tonight|tomorrow|this (?:week|week's|weekend|month|morning|evening)"
                 r"|next (?:week|month)|" + _DAYS + r")\b"),
))

#: "how do I ...", "how can I ...": a how-to question anyone could ask, however it is worded
_HOW_TO = re.compile(r"\bhow (?:do|can|could|would|should|might|to|will) i\b", re.IGNORECASE)
#: text the user quotes, or gives to translate, proofread or rewrite, is not about them
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|‘[^’]*’|(?<!\w)'[^']*'(?!\w)|```.*?```"
                     r"|^\s*(?:translate|proofread|rewrite|paraphrase|summari[sz]e)\b[^:]*:.*", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether a turn needs long-term memory, and why (for logs, the run reports and tests)."""

    needed: bool
    reason: str


#: words that point back at the turn before ("how do I do that?", "is it safe?")
_ANAPHORA = re.compile(r"\b(?:it|its|that|this|these|those|them|there|one|ones|same|else|instead)\b", re.IGNORECASE)


def _standalone(text: str) -> bool:
    """A short turn that is a whole question about the world ("Explain quantum entanglement
    simply." right after "How should our API format its errors?"): not a follow-up."""
    return (len(text.split()) >= GROUNDED_WORDS and _KNOWLEDGE.match(text) is not None
            and _ANAPHORA.search(text) is None)


def _signal(text: str) -> str | None:
    text = _HOW_TO.sub(" ", _QUOTED.sub(" ", text))
    for reason, pattern in _SIGNALS:
        if pattern.search(text):
            return reason
    return None


def needs_memory(turn: str, previous: Sequence[str] = ()) -> Decision:
    """Whether the user's ``turn`` needs long-term memory, given their ``previous`` turns (oldest first).

    A turn that refers to the user, their people, their past or their project needs it; a
    question anyone could ask does not; a short turn right after one that needed memory is
    its follow-up ("and for the backend?", "why?") and needs it too.
    """
    text = " ".join(turn.split())
    if not text:
        return Decision(False, "no user turn")
    if (reason := _signal(text)) is not None:
        return Decision(True, reason)
    if is_follow_up(text, previous):
        last = " ".join(previous[-1].split())
        if last and _signal(last) is not None:
            return Decision(True, "follow-up")
    return Decision(False, "generic")


def is_follow_up(turn: str, previous: Sequence[str]) -> bool:
    """Whether ``turn`` reads as a follow-up of the last of ``previous``: short, after a turn,
    and not a whole question about the world of its own."""
    text = " ".join(turn.split())
    return bool(text) and len(text.split()) < FOLLOW_UP_WORDS and bool(previous) and not _standalone(text)


def to_look_up(turn: str, previous: Sequence[str] = ()) -> list[str]:
    """The turns a generic-looking ``turn`` should be checked by (:func:`grounded`), in order:
    the turn itself when it is :func:`worth_a_look`, and, for a follow-up, the turn before it
    ("and how much would it cost?" after "Plan a weekend trip from Utrecht."); empty when there
    is nothing to check."""
    out = [turn] if worth_a_look(turn) else []
    if is_follow_up(turn, previous) and worth_a_look(previous[-1]):
        out.append(previous[-1])
    return out


#: questions about the world, whoever asks ("What is MLflow used for?", "Who founded Substack?",
#: "How does DNS work?"), and requests to work on given text: what they name is their topic
_WORLD = (r"^\s*(?:(?:what|who|which)(?:'s|\s+(?:is|are|was|were|does|do|did)\b)"
          r"|who\s+(?:invented|designed|founded|wrote|painted|won|discovered|composed|built|created|named)\b"
          r"|how\s+(?:do|does|did|can|could|to|many|much|long|often|far|tall|big|old|would|should)\b"
          r"|why\b|(?:explain|define|translate|proofread|convert|paraphrase)\b")
_ABOUT_WORLD = re.compile(_WORLD + ")", re.IGNORECASE)
_KNOWLEDGE = re.compile(_WORLD + r"|(?:describe|summari[sz]e|tell me about)\b)", re.IGNORECASE)
#: the first thing a turn refers to as known ("the piano", "the figures", "this project"): with
#: up to two words before its head
_DEFINITE = re.compile(r"\b(?:the|this|that|these|those)\s+((?:[A-Za-z][\w'-]*\s+){0,2}?[A-Za-z][\w'-]*)\b",
                       re.IGNORECASE)
#: a piece of writing about a topic ("a haiku about servers"): the topic is not the user's
_CREATIVE = re.compile(r"\b(?:poem|haiku|limerick|riddle|joke|song|story|tweet|sonnet|rhyme|facts?)\b", re.IGNORECASE)
#: words that open a question, a statement or a greeting; any other first word opens a request
_NOT_A_REQUEST = frozenset("""what who whom whose which when where why how is are was were am be do does did can could
would should will shall may might must i i'm i've i'd you we they he she it this that these those the a an my our your
his her their there here hi hello hey thanks thank ok okay good yes no please sure and but or so if any some""".split())
#: words too common to tie a request to a memory
_COMMON = frozenset("""a an the and or but if then so of to in on at by for with from into onto about as is are was were
be been being do does did doing have has had having i me my we our you your he she it they them his her its their this
that these those there here what which who whom whose when where why how can could would should will shall may might
must not no yes some any all each every more most other such only own same than too very just also up down out over
again new next last one two three four five first second week weeks month day days time year good best please thanks
thank""".split())
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]*")
_FIRST_PERSON_NAMES = frozenset({"I", "I'm", "I've", "I'd", "I'll"})


def _stem(word: str) -> str:
    """A crude stem, enough to match "dashboard" with "dashboards" and "payment" with "payments"."""
    word = word.lower().removesuffix("'s")
    for suffix in ("ing", "es", "ed", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    return word[:7]


def _names(text: str) -> list[str]:
    """Capitalised words that are not the first of a sentence (unless possessive: "Ida's party")."""
    found = []
    for m in _WORD.finditer(text):
        word = m.group(0)
        i = m.start() - 1
        while i >= 0 and text[i].isspace():  # the character before the word (linear in the text overall)
            i -= 1
        first = i < 0 or text[i] in ".!?:"
        if word[0].isupper() and word not in _FIRST_PERSON_NAMES and (not first or word.endswith("'s")):
            found.append(word.removesuffix("'s"))
    return found


#: how much of a turn is read for names and a request (a pasted document names too much)
LOOK_CHARS = 2000


def _words_of(turn: str) -> str:
    """The turn's own words: spaces folded, quoted text out, its first ``LOOK_CHARS`` characters."""
    return _QUOTED.sub(" ", " ".join(turn[: LOOK_CHARS * 2].split())[:LOOK_CHARS]).strip()


def _is_request(text: str) -> bool:
    first = _WORD.match(text)
    return (first is not None and first.group(0).lower() not in _NOT_A_REQUEST and not text.rstrip().endswith("?")
            and _CREATIVE.search(text) is None)


def worth_a_look(turn: str) -> bool:
    """Whether a turn the rules read as generic could still be about something the user's
    memories know: it names someone or something, or asks for work, and is not a question
    about the world. Only such turns are searched to check (:func:`grounded`)."""
    text = _words_of(turn)
    if len(text.split()) < GROUNDED_WORDS:
        return False  # a fragment ("which Python?") means what the turn before it means (follow-up)
    return _definite(text) is not None or (not _KNOWLEDGE.match(text) and (bool(_names(text)) or _is_request(text)))


def _definite(text: str) -> list[str] | None:
    """The words of the first thing ``text`` refers to as known ("When is the piano due for
    tuning?"), outside questions about the world ("What is the boiling point of water?")."""
    if _ABOUT_WORLD.match(text) or (m := _DEFINITE.search(text)) is None:
        return None
    words = [w for w in m.group(1).split() if w.lower() not in _COMMON and len(w) > 2]
    return words or None


def grounded(turn: str, memories: Sequence[str]) -> str | None:
    """Why ``turn`` needs memory given the user's ``memories`` found for it, or ``None``.

    A name in the turn that is in one of them ("Plan Ida's birthday party." and "Has a
    daughter named Ida."), a request whose words, past its verb, are in one ("Build me a
    dashboard query for error rates." and "Prefers Grafana dashboards"), or the first thing the
    turn refers to as known ("When is the piano due for tuning?" and "Owns an upright piano"),
    outside questions about the world. A general signal,
    checked against what this user has stored, so it does not fire for someone else's turn
    ("Write a runbook entry" names nothing of a user with no runbooks)."""
    if not worth_a_look(turn):
        return None
    text = _words_of(turn)
    words = _WORD.findall(" ".join(memories))
    known = set(words)
    stems = {_stem(w) for w in words if w.lower() not in _COMMON and len(w) > 2}
    if not _KNOWLEDGE.match(text):
        for name in _names(text):
            if name in known:
                return f"names {name}, which memory knows"
        if _is_request(text):
            for word in _WORD.findall(text)[1:]:
                if word.lower() not in _COMMON and len(word) > 2 and _stem(word) in stems:
                    return f"asks for work on {word.lower().removesuffix(chr(39) + 's')}, which memory knows"
    for word in _definite(text) or ():
        if _stem(word) in stems:
            return f"refers to the {word.lower().removesuffix(chr(39) + 's')}, which memory knows"
    return None


def relevance(result: SearchResult, keyword_weight: float) -> float:
    """The fused similarity the search ranks by (what ``min_relevance`` compares with)."""
    return (1.0 - keyword_weight) * result.similarity + keyword_weight * result.keyword


def keep_relevant(results: Sequence[SearchResult], *, floor: float, keyword_weight: float,
                  at_least_one: bool = False) -> list[SearchResult]:
    """The hits worth showing, in their order: those whose relevance is at least ``floor``;
    with ``at_least_one`` (a turn that needs memory) and none over it, the most relevant hit.

    (A cut relative to the best hit, tried too, lost turns: the best-ranked hit is often not
    the relevant one, so the relevant one sits well under it; BENCHMARKS.md, issue 31.)"""
    kept = [r for r in results if relevance(r, keyword_weight) >= floor]
    if not kept and at_least_one and results:
        kept = [max(results, key=lambda r: relevance(r, keyword_weight))]
    return kept


class MemoryNeeded(BaseModel):
    """The model's answer to "does this turn need what you remember about the user?"."""

    needed: bool = Field(description="true when the answer depends on the user's own facts, preferences, "
                                      "people, past conversations, decisions or projects")


def decision_messages(turn: str, previous: Sequence[str] = ()) -> list[Any]:
    """The prompt asking a model whether ``turn`` needs memory (user text escaped and delimited)."""
    from langchain_core.messages import HumanMessage, SystemMessage

    context = "\n".join(f"<turn>{escape(' '.join(p.split())[-300:])}</turn>" for p in previous[-2:])
    return [SystemMessage(render("memory_needed")),
            HumanMessage(render("memory_needed_input", previous=context or "(none)",
                                turn=escape(" ".join(turn.split())[-2000:])))]


def ask_model(model: Any, turn: str, previous: Sequence[str] = ()) -> Generator[Any, Any, Decision]:
    """An operation asking ``model`` whether ``turn`` needs memory; the rules answer when it fails."""
    if not " ".join(turn.split()):
        return Decision(False, "no user turn")
    try:
        answer = yield Llm(model, MemoryNeeded, tuple(decision_messages(turn, previous)))
    except Exception:  # noqa: BLE001 - a model that fails must not cost the user their answer
        rules = needs_memory(turn, previous)
        return Decision(rules.needed, f"{rules.reason} (rules: the model failed)")
    needed = bool(getattr(answer, "needed", False))
    return Decision(needed, "the model says so" if needed else "the model says not")
