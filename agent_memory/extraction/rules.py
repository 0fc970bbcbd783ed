"""Rule-based extraction: the explicit, lasting statements in a user turn, without an LLM.

When no LLM is configured these rules stand in for one, and the offline demo model uses them
to decide what to save. They only catch what the user states outright ("remember that...",
"I prefer...", "we use...", "we decided... because...") and write it in the third person,
the way memories are stored ("Prefers concise answers.", "The team uses PostgreSQL.").
Questions, greetings and one-off requests give nothing. Everything here is pure; secrets are
not looked for, the gate after extraction does that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from agent_memory.models import MemoryType, Proposal, Scope
from agent_memory.validation import check_confidence

from .when import anchor_when, resolve_when

__all__ = ["Statement", "extract_proposals", "statements_in"]


@dataclass(frozen=True)
class Statement:
    """One thing worth remembering, as ``memory_save`` arguments."""

    content: str
    memory_type: str
    scope: str


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# --- cleaning a sentence ----------------------------------------------------------------------

_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_LEAD_IN = _rx(r"^(?:(?:hi|hello|hey|ok|okay|oh|also|and|so|btw|by the way|fyi|just so you know|for the record"
               r"|for context|actually|thanks|thank you|great|cool|good (?:morning|afternoon|evening)|please)"
               r"\b[,!.:]?\s*)+")
_CONTRACTION = _rx(r"^(?P<who>we|i)'(?P<tail>re|ve|m)\b")
_EXPANDED = {"re": "are", "ve": "have", "m": "am"}
_TEAM_POSSESSIVE = _rx(r"^(?:our|my|the) team's\s+")


def _clean(sentence: str) -> str:
    """The sentence without lead-ins ("Hi!", "Also,", "btw"), with straight apostrophes and
    "we're", "I'm", "I've" at its start written out."""
    text = _LEAD_IN.sub("", sentence.replace("\u2019", "'").strip()).strip()
    text = _CONTRACTION.sub(lambda m: f"{m['who']} {_EXPANDED[m['tail'].lower()]}", text)
    return _TEAM_POSSESSIVE.sub("our ", text)


# --- third person -----------------------------------------------------------------------------

_PRONOUNS = (
    (re.compile(r"\bI'm\b"), "they are"), (re.compile(r"\bI am\b"), "they are"), (re.compile(r"\bI\b"), "they"),
    (_rx(r"\bmy\b"), "their"), (_rx(r"\bme\b"), "them"), (_rx(r"\bmine\b"), "theirs"),
    (_rx(r"\bmyself\b"), "themselves"),
)
_TEAM_PRONOUNS = (
    (_rx(r"\bwe\b"), "they"), (_rx(r"\bour\b"), "their"), (_rx(r"\bours\b"), "theirs"),
    (_rx(r"\bourselves\b"), "themselves"), (re.compile(r"\bus\b"), "them"),  # not "US"
)
_IRREGULAR = {"have": "has", "can't": "can't", "cannot": "cannot", "do": "does", "go": "goes", "are": "is"}


def _third_person(text: str) -> str:
    for pattern, replacement in _PRONOUNS:
        text = pattern.sub(replacement, text)
    return text


def _team_voice(text: str) -> str:
    """``_third_person`` plus "we"/"our"/"us" said of the team ("they"/"their"/"them")."""
    for pattern, replacement in _TEAM_PRONOUNS:
        text = pattern.sub(replacement, text)
    return _third_person(text)


def _verb_s(verb: str) -> str:
    """``prefer`` -> ``prefers``, ``study`` -> ``studies``: the verb after "I", said of someone else."""
    verb = verb.lower()
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    return verb + "s"


def _sentence(*parts: str | None) -> str:
    text = " ".join(p for p in parts if p).strip().rstrip(".!")
    return text[:1].upper() + text[1:] + "."


def _user(content: str, memory_type: str) -> Statement:
    return Statement(content, memory_type, "user")


def _team(content: str, memory_type: str) -> Statement:
    return Statement(content, memory_type, "project")


# --- what gives nothing -----------------------------------------------------------------------

_REQUEST = _rx(
    r"^(?:(?:can|could|would|will|won't) you|(?:can|could|may) i|let(?:'s| us| me)"
    r"|(?:write|show|help|give|tell|send|find|get|make|build|draft|generate|create|explain|fix|summari[sz]e"
    r"|translate|list|rewrite) (?:me|us)"
    r"|i (?:want|need|would like|'d like) you to|i need (?:some |your )?help"
    r"|i (?:want|would like|'d like) to (?:know|see|ask|check|understand))\b")
_CHIT_CHAT = _rx(
    r"^(?:(?:i|we) (?:have|got) (?:a|another|one more|some|a few)(?: quick)? (?:question|problem|issue|request)s?\b"
    r"|i am (?:fine|good|great|ok|okay|well|back|here|sorry|glad|not sure|unsure|wondering|curious|confused"
    r"|stuck|done|ready|just \w+ing|trying|looking|thinking|having|getting|about to|going to)\b)")
_TRANSIENT_ING = {"trying", "wondering", "thinking", "looking", "hoping", "having", "getting", "doing", "talking",
                  "asking", "waiting", "checking"}


# --- what the team states (project scope) -----------------------------------------------------

_WE_DECIDED = _rx(r"^we(?: have)? (?P<verb>decided|agreed|chose|picked|settled on|opted|went with|voted)\s+(?P<rest>.+)$")
_WE_SWITCHED = _rx(r"^we(?: have)?(?: (?P<adverb>recently|just|finally|now|already))? "
                   r"(?P<verb>switched|moved|changed|migrated)\s+(?P<rest>.*\bto\b.*)$")
_WE_HABIT = _rx(r"^we (?P<adverb>always|never|usually|often|normally|typically|generally|rarely|seldom) "
                r"(?P<verb>[\w'-]+)\b\s*(?P<rest>.*)$")
_WE_MUST = _rx(r"^we (?P<modal>must not|mustn't|must|have to|need to|can't|cannot|can not|may not|should never"
               r"|are not allowed to|aren't allowed to|are required to|are not permitted to|are obliged to)"
               r"\s+(?P<rest>.+)$")
_MODALS = {"have to": "has to", "need to": "needs to", "are not allowed to": "is not allowed to",
           "aren't allowed to": "isn't allowed to", "are required to": "is required to",
           "are not permitted to": "is not permitted to", "are obliged to": "is obliged to"}
_WE_USE = _rx(r"^we (?:are )?(?:(?P<adverb>also|now|currently|mostly|mainly|primarily|still|only) )?(?:use|using)"
              r"\s+(?P<rest>.+)$")
_WE_ARE_IN = _rx(r"^we are (?:(?P<adverb>currently|now|still) )?(?P<rest>in\s+.+)$")
_WE_ARE_ING = _rx(r"^we are (?:(?P<adverb>currently|now|still|actively) )?(?P<verb>\w+ing)\b\s*(?P<rest>.*)$")
_WE_ARE_A = _rx(r"^we are (?P<rest>(?:a|an)\s+.+)$")
_WE_DO = _rx(r"^we (?:(?P<adverb>also|now|currently|mostly|mainly|primarily|only|still) )?"
             r"(?P<verb>build|develop|make|sell|ship|deploy|host|run|write|maintain|follow|work|target|support"
             r"|store|test|release|serve|have|own|speak|prefer|like|love|hate|avoid|want|require)\b\s*(?P<rest>.+)$")
_WE_LIKE = {"prefer", "like", "love", "hate", "avoid", "want"}
_OUR = _rx(r"^our (?P<rest>.+)$")
_OUR_CONTEXT = _rx(r"^(?:(?:main|primary|current|top|big|biggest|ultimate|next) )?(?:goal|mission|aim|objective"
                   r"|priority|priorities|focus|deadline|target|plan|roadmap|milestone|vision|phase|stage)s?\b")
_THE_TEAM = _rx(r"^(?:our|my|the) team (?P<rest>.+)$")
_TEAM_KINDS = (
    (_rx(r"^(?:has |have )?(?:decided|agreed|chose|picked|settled on|opted|went with|voted)\b"), "decision"),
    (_rx(r"^(?:always|never|usually|often|normally|typically|generally|rarely|seldom)\b"), "habit"),
    (_rx(r"^(?:must|has to|needs to|can't|cannot|can not|may not|should never|is not allowed|isn't allowed"
         r"|is required|is not permitted)\b"), "constraint"),
    (_rx(r"^(?:is|are) (?:(?:currently|now|still) )?(?:in\b|(?!using\b)\w+ing\b)"), "context"),
)


def _adverb(m: re.Match[str]) -> str | None:
    adverb = m["adverb"]
    return None if adverb is None or adverb.lower() == "also" else adverb.lower()


def _team_statement(text: str) -> Statement | None:
    if m := _WE_DECIDED.match(text):
        return _team(_sentence("The team", m["verb"].lower(), _team_voice(m["rest"])), "decision")
    if m := _WE_SWITCHED.match(text):
        return _team(_sentence("The team", _adverb(m), m["verb"].lower(), _team_voice(m["rest"])), "fact")
    if m := _WE_HABIT.match(text):
        return _team(_sentence("The team", m["adverb"].lower(), _verb_s(m["verb"]), _team_voice(m["rest"])), "habit")
    if m := _WE_MUST.match(text):
        modal = m["modal"].lower()
        return _team(_sentence("The team", _MODALS.get(modal, modal), _team_voice(m["rest"])), "constraint")
    if m := _WE_USE.match(text):
        return _team(_sentence("The team", _adverb(m), "uses", _team_voice(m["rest"])), "fact")
    if m := _WE_ARE_IN.match(text):
        return _team(_sentence("The team is", _adverb(m), _team_voice(m["rest"])), "context")
    if m := _WE_ARE_ING.match(text):
        if m["verb"].lower() in _TRANSIENT_ING:
            return None
        return _team(_sentence("The team is", _adverb(m), m["verb"].lower(), _team_voice(m["rest"])), "context")
    if m := _WE_ARE_A.match(text):
        return _team(_sentence("The team is", _team_voice(m["rest"])), "fact")
    if m := _WE_DO.match(text):
        kind = "preference" if m["verb"].lower() in _WE_LIKE else "fact"
        return _team(_sentence("The team", _adverb(m), _verb_s(m["verb"]), _team_voice(m["rest"])), kind)
    if m := _THE_TEAM.match(text):
        kind = next((k for pattern, k in _TEAM_KINDS if pattern.match(m["rest"])), "fact")
        return _team(_sentence("The team", _team_voice(m["rest"])), kind)
    if m := _OUR.match(text):
        kind = "context" if _OUR_CONTEXT.match(m["rest"]) else "fact"
        return _team(_sentence("The team's", _team_voice(m["rest"])), kind)
    return None


# --- what the user states about themselves (user scope) ---------------------------------------

_WANT_YOU = _rx(r"^i (?:want|need|would like|'d like) you to (?P<verb>always|never)\s+(?P<rest>.+)$")
_PREFER = _rx(r"^i (?P<verb>prefer|like|love|want|enjoy|hate|dislike)\b\s*(?P<rest>.*)$")
_RULE = _rx(r"^(?P<verb>always|never)\b\s*(?P<rest>.+)$")
_SWITCHED = _rx(r"^i(?: have)?(?: (?P<adverb>recently|just|finally|now|already))? "
                r"(?P<verb>switched|moved|changed|migrated)\s+(?P<rest>.*\bto\b.*)$")
_HABIT = _rx(r"^i (?P<adverb>usually|often|always|never|normally) (?P<verb>\w+)\b\s*(?P<rest>.*)$")
_AM_USING = _rx(r"^i am (?:(?P<adverb>also|now|currently|mostly|mainly|still) )?using\s+(?P<rest>.+)$")
_AM = _rx(r"^i am\s+(?P<rest>.+)$")
_DONT = _rx(r"^i (?:don't|do not) (?P<verb>like|love|enjoy|want|use|eat|drink|drive|speak|work)\b\s*(?P<rest>.+)$")
_DONT_KINDS = {"like": "preference", "love": "preference", "enjoy": "preference", "want": "preference",
               "eat": "constraint", "drink": "constraint"}
_DO = _rx(r"^i (?:(?P<adverb>also|now|currently|mostly|mainly|still) )?(?P<verb>work|live|use|have|speak|study|run|own|need|can't|cannot)\b\s*(?P<rest>.*)$")
_MY = _rx(r"^my (?P<rest>.+)$")
_CALL_ME = _rx(r"^(?:you (?:can|may|should) )?call me\s+(?P<rest>.+)$")
_FROM_NOW_ON = _rx(r"^(?:from now on|going forward|in (?:the )?future),?\s+(?P<rest>.+)$|"
                   r"^(?P<rest2>.+?),?\s+(?:from now on|going forward|in (?:the )?future)[.!]*$")
_NOT_IMPERATIVE = _rx(r"^(?:i|we|you|they|he|she|it|my|our|your|the|this|that|there)\b")
_CONSTRAINT = _rx(r"\b(?:allergic|intolerant|can't|cannot|unable|vegan|vegetarian)\b")


def _user_statement(text: str) -> Statement | None:
    if m := _WANT_YOU.match(text):
        return _user(_sentence("Wants the assistant to", m["verb"].lower(), _third_person(m["rest"])), "preference")
    if _REQUEST.match(text):
        return None
    if m := _PREFER.match(text):
        return _user(_sentence(_verb_s(m["verb"]), _third_person(m["rest"])), "preference")
    if m := _RULE.match(text):
        return _user(_sentence("Wants the assistant to", m["verb"].lower(), _third_person(m["rest"])), "preference")
    if m := _SWITCHED.match(text):
        return _user(_sentence(_adverb(m), m["verb"].lower(), _third_person(m["rest"])), "fact")
    if m := _HABIT.match(text):
        return _user(_sentence(m["adverb"].capitalize(), _verb_s(m["verb"]), _third_person(m["rest"])), "habit")
    if m := _AM_USING.match(text):
        return _user(_sentence(_adverb(m), "uses", _third_person(m["rest"])), "fact")
    if m := _AM.match(text):
        kind = "constraint" if _CONSTRAINT.search(text) else "fact"
        return _user(_sentence("Is", _third_person(m["rest"])), kind)
    if m := _DONT.match(text):
        kind = _DONT_KINDS.get(m["verb"].lower(), "fact")
        return _user(_sentence("Doesn't", m["verb"].lower(), _third_person(m["rest"])), kind)
    if m := _DO.match(text):
        kind = "constraint" if m["verb"].lower() in ("can't", "cannot") else "fact"
        return _user(_sentence(_adverb(m), _verb_s(m["verb"]), _third_person(m["rest"])), kind)
    if m := _MY.match(text):
        return _user(_sentence("Their", _third_person(m["rest"])), "fact")
    if m := _CALL_ME.match(text):
        return _user(_sentence("Wants to be called", m["rest"]), "preference")
    return None


# --- putting it together ----------------------------------------------------------------------

_REMEMBER = _rx(r"^(?:(?:can|could|would|will) you (?:please )?)?(?:remember|note|keep in mind|don't forget"
                r"|do not forget)(?: that)?\s+(?P<rest>.+)$")
_TO = _rx(r"^to\s+(?!self\b)")
_TEAM_SUBJECT = _rx(r"^(?:we|our|(?:my|the) team)\b")


def _statement(sentence: str) -> Statement | None:
    """The memory in one sentence, or ``None`` when it states nothing lasting."""
    text = _clean(sentence)
    if not text or text.endswith("?") or _CHIT_CHAT.match(text):
        return None
    if m := _REMEMBER.match(text):
        rest = m["rest"]
        if _TO.match(rest):  # "remember to always ..." is an instruction to the assistant
            rest = _TO.sub("", rest)
            return _statement(rest) or _user(_sentence("Wants the assistant to remember to", _third_person(rest)),
                                             "preference")
        return _statement(rest) or _user(_sentence(_third_person(rest)), "fact")
    if m := _FROM_NOW_ON.match(text):  # "from now on, answer in French": an instruction to the assistant
        rest = _clean(m["rest"] or m["rest2"])
        if inner := _statement(rest):
            return inner
        rest = rest.rstrip(".! ")
        if rest and not rest.endswith("?") and not _NOT_IMPERATIVE.match(rest) and not _REQUEST.match(rest):
            instruction = rest[:1].lower() + rest[1:]
            return _user(_sentence("Wants the assistant to", _third_person(instruction), "from now on"), "preference")
        return None
    if _TEAM_SUBJECT.match(text):
        return _team_statement(text)
    return _user_statement(text)


def _sentences_with_statements(text: str) -> list[tuple[str, Statement]]:
    pairs = ((s.strip(), _statement(s)) for s in _SENTENCES.split(text))
    return [(sentence, statement) for sentence, statement in pairs if statement is not None]


def statements_in(text: str) -> list[Statement]:
    """Every explicit, lasting statement in a user turn, in order (questions are skipped)."""
    return [statement for _, statement in _sentences_with_statements(text)]


def extract_proposals(text: str, *, confidence: float = 0.9, said_at: datetime | None = None) -> list[Proposal]:
    """Every explicit, lasting statement in one user turn, as memory proposals, in order.

    Each proposal's ``evidence`` is the sentence it came from; every one gets ``confidence``,
    and ``valid_from`` when its sentence says when the fact began ("last month"), resolved
    against ``said_at`` (when the turn was said; default now, see :mod:`.when`); a relative
    expression in the memory's wording is written as the date it names ("Moved to Lisbon in
    October 2026.": the memory must stay true after the day it was said)."""
    confidence = check_confidence(confidence)
    said_at = datetime.now(UTC) if said_at is None else said_at
    return [Proposal(content=anchor_when(s.content, said_at), memory_type=MemoryType(s.memory_type),
                     scope=Scope(s.scope), confidence=confidence, evidence=evidence,
                     valid_from=resolve_when(evidence, said_at))
            for evidence, s in _sentences_with_statements(text)]
