"""Rule-based extraction: the explicit, lasting statements in a user turn, without an LLM.

When no LLM is configured these rules stand in for one, and the offline demo model uses them
to decide what to save. They only catch what the user states outright ("remember that...",
"I prefer...", "we use...", "we decided... because...") and write it in the third person,
the way memories are stored ("Prefers concise answers.", "The team uses PostgreSQL."), keeping
its grammar and meaning: the subject left out and the verbs agreeing with it ("Lives in Lisbon
and works remotely."), "The user and ..." when the user is one of several subjects, quoted words
as said, the tense as said. A statement about a group is proposed at its level: "we" and "our
project / repo" the project's, "our team" the team's, "our org / company" the organisation's,
and so is what follows "for the team:" or "in this repo,". Questions (with or without "?"),
maybes and conditions ("should I...", "if I...", "I might..."), greetings and one-off requests
give nothing. ``benchmarks/rules_accuracy.py`` measures all this on a labelled set. Everything
here is pure; secrets are not looked for, the gate after extraction does that.
"""

from __future__ import annotations

import re
from collections.abc import Callable
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
_CONTRACTION = _rx(r"^(?P<who>we|i)'(?P<tail>re|ve|m|ll)\b")
_EXPANDED = {"re": "are", "ve": "have", "m": "am", "ll": "will"}


def _clean(sentence: str) -> str:
    """The sentence without lead-ins ("Hi!", "Also,", "btw"), with straight apostrophes and
    "we're", "I'm", "I've" at its start written out."""
    text = _LEAD_IN.sub("", sentence.replace("\u2019", "'").strip()).strip()
    return _CONTRACTION.sub(lambda m: f"{m['who']} {_EXPANDED[m['tail'].lower()]}", text)


# --- third person -----------------------------------------------------------------------------

_PRONOUNS = (
    (re.compile(r"\bI'm\b"), "they are"), (re.compile(r"\bI am\b"), "they are"),
    (re.compile(r"\bI was\b"), "they were"), (re.compile(r"\bI wasn't\b"), "they weren't"),
    (re.compile(r"\bI\b"), "they"),
    (_rx(r"\bmy\b"), "their"), (_rx(r"\bme\b"), "them"), (_rx(r"\bmine\b"), "theirs"),
    (_rx(r"\bmyself\b"), "themselves"),
)
_TEAM_PRONOUNS = (
    (_rx(r"\bwe\b"), "they"), (_rx(r"\bour\b"), "their"), (_rx(r"\bours\b"), "theirs"),
    (_rx(r"\bourselves\b"), "themselves"), (re.compile(r"\bus\b"), "them"),  # not "US"
)
_IRREGULAR = {"have": "has", "can't": "can't", "cannot": "cannot", "do": "does", "go": "goes", "are": "is",
              "don't": "doesn't", "am": "is"}
#: what the user said in quotes is kept as said ("Their motto is "I never give up"."); an
#: apostrophe inside a word ("don't", "dad's") does not open a quote
_QUOTED = re.compile(r"\"[^\"]*\"|\u201c[^\u201d]*\u201d|(?<![\w'])'[^']*'(?![\w'])")
#: "... and I work", "... but I don't": the subject said again after a conjunction, in a sentence
#: whose subject (the user) is left out ("Lives in Lisbon and works remotely.")
_AND_I = _rx(r"\b(?P<conj>and|but|or|so) I (?:(?P<adverb>also|often|usually|never|always|still|now|mostly|rarely"
             r"|sometimes) )?(?P<verb>[\w']+)")
#: "... and work remotely": a second verb that shares the left-out subject
_BASE_VERBS = frozenset(
    "work live use have speak study run own need like love prefer enjoy hate dislike write teach play drive cook "
    "travel read eat drink go do want build code commute walk lead manage test deploy maintain ship avoid "
    "volunteer train practise practice sing paint swim ride take keep spend care coach mentor review".split())
_AND_VERB = _rx(r"\b(?P<conj>and|but|or) (?:(?P<adverb>also|often|usually|never|always|still|now|mostly|rarely"
                r"|sometimes) )?(?P<verb>[a-z]+)\b(?=\s+\w)")  # with a complement: not "peace and love"


def _outside_quotes(text: str, rewrite: Callable[[str], str]) -> str:
    """``rewrite`` applied to the parts of ``text`` that are not quoted."""
    out, at = [], 0
    for m in _QUOTED.finditer(text):
        out += [rewrite(text[at:m.start()]), m.group(0)]
        at = m.end()
    return "".join([*out, rewrite(text[at:])])


def _pronouns(text: str, table: tuple[tuple[re.Pattern[str], str], ...]) -> str:
    for pattern, replacement in table:
        text = pattern.sub(replacement, text)
    return text


def _third_person(text: str) -> str:
    """"I"/"my"/"me" written as "they"/"their"/"them", with the verb after "I" agreeing
    ("I was" -> "they were"); quoted words are kept as said."""
    return _outside_quotes(text, lambda part: _pronouns(part, _PRONOUNS))


def _team_voice(text: str) -> str:
    """``_third_person`` plus "we"/"our"/"us" said of the team ("they"/"their"/"them")."""
    return _outside_quotes(text, lambda part: _pronouns(_pronouns(part, _TEAM_PRONOUNS), _PRONOUNS))


def _agree(verb: str) -> str:
    """The verb after a left-out "I", said of the user: "am" -> "is", "work" -> "works"; a past
    form or a modal stays as it is."""
    low = verb.lower()
    if low in ("'m", "am"):
        return "is"
    if low in _IRREGULAR or low in _BASE_VERBS:
        return _verb_s(low)
    return verb


def _elided(text: str) -> str:
    """The rest of a sentence whose subject, the user, is left out ("Lives in Lisbon and works
    remotely."): a repeated "I" after a conjunction goes, and the verbs that share the subject
    agree with it; then :func:`_third_person`."""
    def again(m: re.Match[str]) -> str:
        return " ".join(w for w in (m["conj"], m["adverb"], _agree(m["verb"])) if w)

    def shared(m: re.Match[str]) -> str:
        if m["verb"].lower() not in _BASE_VERBS:
            return m.group(0)
        return " ".join(w for w in (m["conj"], m["adverb"], _verb_s(m["verb"])) if w)

    return _third_person(_outside_quotes(text, lambda part: _AND_VERB.sub(shared, _AND_I.sub(again, part))))


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


def _team(content: str, memory_type: str, scope: str = "project") -> Statement:
    """A statement about a group: "we" is the project's team ("project"), "our team" the team,
    "our org" the organisation; the run places it at the nearest level it has."""
    return Statement(content, memory_type, scope)


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
_WE_DONT = _rx(r"^we (?:don't|do not) (?P<verb>use|like|allow|accept|support|deploy|ship|merge|write|store|run|want"
               r"|need|have|do|work|test)\b\s*(?P<rest>.*)$")
_THE_TEAM = _rx(r"^(?:our|my|the) team(?P<pos>'s)? (?P<rest>.+)$")
_OUR_ORG = _rx(r"^(?:our|my|the) (?:org|organi[sz]ation|company)(?P<pos>'s)? (?P<rest>.+)$")
_OUR_PROJECT = _rx(r"^our (?P<what>project|repo|repository|codebase)(?P<pos>'s)? (?P<rest>.+)$")
#: "For the team: ...", "In this repo, ...", "Across the org, ...": a statement said of a level
_FOR_LEVEL = _rx(r"^(?:for|across|in|within|at) (?:the|our|this|my) (?P<level>team|project|repo|repository|codebase"
                 r"|org|organi[sz]ation|company)(?:\s*[:,\u2014-]\s*|\s+(?=we\b|our\b))(?P<rest>.+)$")
_LEVEL_OF = {"team": "team", "org": "org", "organisation": "org", "organization": "org", "company": "org"}
_RULE_WORDS = _rx(r"\b(?:must|mustn't|have to|has to|need to|needs to|should|shall|required|not allowed|never"
                  r"|always|only)\b")
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
    if m := _WE_DONT.match(text):
        kind = "preference" if m["verb"].lower() in _WE_LIKE else "fact"
        return _team(_sentence("The team doesn't", m["verb"].lower(), _team_voice(m["rest"])), kind)
    if m := _THE_TEAM.match(text):
        if m["pos"]:
            kind = "context" if _OUR_CONTEXT.match(m["rest"]) else "fact"
            return _team(_sentence("The team's", _team_voice(m["rest"])), kind, "team")
        kind = next((k for pattern, k in _TEAM_KINDS if pattern.match(m["rest"])), "fact")
        return _team(_sentence("The team", _team_voice(m["rest"])), kind, "team")
    if m := _OUR_ORG.match(text):
        kind = next((k for pattern, k in _TEAM_KINDS if pattern.match(m["rest"])), "fact")
        return _team(_sentence("The organisation" + (m["pos"] or ""), _team_voice(m["rest"])), kind, "org")
    if m := _OUR_PROJECT.match(text):
        kind = next((k for pattern, k in _TEAM_KINDS if pattern.match(m["rest"])), "fact")
        return _team(_sentence(f"The {m['what'].lower()}{m['pos'] or ''}", _team_voice(m["rest"])), kind)
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
_DO = _rx(r"^i (?:(?P<adverb>also|now|currently|mostly|mainly|still|no longer) )?"
          r"(?P<verb>work|live|use|have|speak|study|run|own|need|can't|cannot)\b\s*(?P<rest>.*)$")
#: "I have lived here since 2019", "I've never used Java": a lasting state up to now
_PERFECT = _rx(r"^i have (?P<rest>(?:(?:never|always|long|already|recently|just|also) )?"
               r"(?:been|lived|worked|used|studied|owned|known|taught|led|run|written|built|spoken|played|had"
               r"|managed|maintained|coded|programmed|volunteered|trained|practi[sc]ed)\b.*)$")
#: "I worked at Google", "I grew up in Porto", "I was born in 1990": the user's past, which stays true
_PAST = _rx(r"^i (?P<rest>(?:(?:also|once|previously|originally) )?(?:worked|lived|studied|graduated|grew up"
            r"|was born|was raised|founded|co-founded|joined|started|taught|retired|served|learned|learnt"
            r"|got married|married|used to|was|were)\b.*)$")
_TRANSIENT_PAST = _rx(r"^i (?:was|were) (?:just |only |also )?(?:\w+ing|about to|going to|not sure|wrong"
                      r"|confused|asking|told)\b")
#: "I will start a new job in January": a plan the user states, not a maybe
_WILL = _rx(r"^i will (?P<rest>(?:be|start|move|join|leave|retire|graduate|begin|stay|work|travel|relocate)\b.+)$")
#: "My wife Sara and I ...", "Tom and I ...", "Me and my brother ...": the user among the subjects
_WITH_ME = re.compile(r"^(?:(?P<np>(?:[Mm]y [\w'-]+(?: [A-Z][\w'-]*)?|[A-Z][a-z]+)) and I|[Mm]e and "
                      r"(?P<np2>my [\w'-]+(?: [A-Z][\w'-]*)?))\s+(?P<rest>.+)$")
#: maybes, plans under a condition, wondering: not facts ("I might move to Berlin.")
_MAYBE = _rx(r"^i (?:might|may|could|should|would|wonder|guess|suppose|assume|think|believe|feel like|hope"
             r"|plan to|am planning|am thinking|am considering|am wondering|am not sure|am unsure)\b")
_MY = _rx(r"^my (?P<rest>.+)$")
_CALL_ME = _rx(r"^(?:you (?:can|may|should) )?call me\s+(?P<rest>.+)$")
_FROM_NOW_ON = _rx(r"^(?:from now on|going forward|in (?:the )?future),?\s+(?P<rest>.+)$|"
                   r"^(?P<rest2>.+?),?\s+(?:from now on|going forward|in (?:the )?future)[.!]*$")
_NOT_IMPERATIVE = _rx(r"^(?:i|we|you|they|he|she|it|my|our|your|the|this|that|there)\b")
_CONSTRAINT = _rx(r"\b(?:allergic|intolerant|can't|cannot|unable|vegan|vegetarian)\b")


def _kind(text: str, default: str = "fact") -> str:
    return "constraint" if _CONSTRAINT.search(text) else default


def _user_statement(text: str) -> Statement | None:
    if m := _WANT_YOU.match(text):
        return _user(_sentence("Wants the assistant to", m["verb"].lower(), _third_person(m["rest"])), "preference")
    if _REQUEST.match(text) or _MAYBE.match(text):
        return None
    if m := _WITH_ME.match(text):
        return _user(_sentence("The user and", _third_person(m["np"] or m["np2"]), _team_voice(m["rest"])),
                     _kind(text))
    if m := _PREFER.match(text):
        return _user(_sentence(_verb_s(m["verb"]), _elided(m["rest"])), "preference")
    if m := _RULE.match(text):
        return _user(_sentence("Wants the assistant to", m["verb"].lower(), _third_person(m["rest"])), "preference")
    if m := _SWITCHED.match(text):
        return _user(_sentence(_adverb(m), m["verb"].lower(), _elided(m["rest"])), "fact")
    if m := _HABIT.match(text):
        return _user(_sentence(m["adverb"].capitalize(), _verb_s(m["verb"]), _elided(m["rest"])), "habit")
    if m := _AM_USING.match(text):
        return _user(_sentence(_adverb(m), "uses", _elided(m["rest"])), "fact")
    if m := _AM.match(text):
        return _user(_sentence("Is", _elided(m["rest"])), _kind(text))
    if m := _DONT.match(text):
        kind = _DONT_KINDS.get(m["verb"].lower(), "fact")
        return _user(_sentence("Doesn't", m["verb"].lower(), _elided(m["rest"])), kind)
    if m := _PERFECT.match(text):
        return _user(_sentence("Has", _elided(m["rest"])), "fact")
    if m := _DO.match(text):
        kind = "constraint" if m["verb"].lower() in ("can't", "cannot") else "fact"
        return _user(_sentence(_adverb(m), _verb_s(m["verb"]), _elided(m["rest"])), kind)
    if (m := _PAST.match(text)) and not _TRANSIENT_PAST.match(text):
        return _user(_sentence(_elided(m["rest"])), "fact")
    if m := _WILL.match(text):
        return _user(_sentence("Will", _elided(m["rest"])), "fact")
    if m := _MY.match(text):
        return _user(_sentence("Their", _third_person(m["rest"])), _kind(text))
    if m := _CALL_ME.match(text):
        return _user(_sentence("Wants to be called", m["rest"]), "preference")
    return None


# --- putting it together ----------------------------------------------------------------------

_REMEMBER = _rx(r"^(?:(?:can|could|would|will) you (?:please )?)?(?:remember|note|keep in mind|don't forget"
                r"|do not forget)(?: that)?\s+(?P<rest>.+)$")
_TO = _rx(r"^to\s+(?!self\b)")
_TEAM_SUBJECT = _rx(r"^(?:we|our|(?:my|the) (?:team|org|organi[sz]ation|company)\b)")
_QUESTION = _rx(r"^(?:should|shall|would|could|can|do|does|did|is|are|am|was|were|will|what|which|who|whom|whose"
                r"|when|where|why|how|have|has)\b")
_HYPOTHETICAL = _rx(r"^(?:if|suppose|supposing|imagine|assuming|assume|let's say|let us say|what if|maybe|perhaps"
                    r"|hypothetically|in theory|in case)\b")


_DETERMINER = _rx(r"^(?:the|this|that|there)\b")


def _said_of_level(level: str, rest: str) -> Statement | None:
    """What follows "For the team:" / "In this repo," at that level ("the project" for a repo)."""
    scope = _LEVEL_OF.get(level.lower(), "project")
    if _TEAM_SUBJECT.match(rest):
        inner = _team_statement(rest)
        return None if inner is None else Statement(inner.content, inner.memory_type, scope)
    if rest.endswith("?") or (_NOT_IMPERATIVE.match(rest) and not _DETERMINER.match(rest)):
        return None  # a question, or "In this repo, I prefer tabs": the user's own
    return _team(_sentence(_team_voice(rest)), "constraint" if _RULE_WORDS.search(rest) else "fact", scope)


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
    if _QUESTION.match(text) or _HYPOTHETICAL.match(text):
        return None  # "should I switch to Rust", "if I had more time, ...": not facts
    if m := _FOR_LEVEL.match(text):
        return _said_of_level(m["level"], _clean(m["rest"]))
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
