"""Offline extraction: the people, places, organisations and tools a memory is about, and how
the owner relates to them, by rules and without a model.

Memories are short and written either in the first person ("my sister Sarah called") or, after
extraction, in the third ("Has a sister named Sarah.", "Works at Acme."); the rules read both.
They are written for precision: a capitalised word becomes a node only where something says
what it is (a relation word, a verb of work or place, a person cue, a known tool), or when it
is a capitalised name inside a sentence that is not a common word. Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime

__all__ = ["OWNER", "Extracted", "Found", "Link", "canonical", "extract"]

#: the name the owner's own node goes by in a :class:`Link`
OWNER = "@me"


@dataclass(frozen=True, slots=True)
class Found:
    """A node a memory mentions: its name as written, what it is, and how sure the rule is."""

    name: str
    node_type: str  # person | concept | entity
    entity_type: str = ""  # for entities: organisation, location, tool, project, event
    confidence: float = 0.5
    known_only: bool = False  # a capitalised word at a sentence start: a node only if already known


@dataclass(frozen=True, slots=True)
class Link:
    """A relation the memory states: ``source`` -> ``target`` (names, or :data:`OWNER`)."""

    source: str
    target: str
    kind: str
    rel_type: str
    attitude: int | None = None
    proximity: int | None = None
    ended: bool = False  # "used to work at", "left": the relation is closed, not deleted
    # said by a model (:mod:`.model_extract`): its sentence, and when it began or ended in the world
    description: str = ""
    valid_from: datetime | None = None
    valid_to: datetime | None = None


@dataclass(frozen=True, slots=True)
class Extracted:
    found: tuple[Found, ...]
    links: tuple[Link, ...]


def canonical(name: str) -> str:
    """The name a node is unique under within its graph: case-folded, accents and a trailing
    possessive dropped, spaces collapsed."""
    text = unicodedata.normalize("NFKD", name)
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = re.sub(r"['\u2019]s\b", "", text.casefold())
    text = re.sub(r"[^\w\s&.+-]", " ", text)
    return " ".join(text.split()).strip(" .")


# relation words: (rel_type, attitude, proximity)
_PEOPLE: dict[str, tuple[str, int, int]] = {
    **{w: ("family", 4, 5) for w in ("sister", "brother", "mother", "mom", "mum", "father", "dad", "son",
                                      "daughter", "wife", "husband", "grandmother", "grandfather", "grandma",
                                      "grandpa", "cousin", "aunt", "uncle", "niece", "nephew", "sibling")},
    **{w: ("partner", 5, 5) for w in ("partner", "girlfriend", "boyfriend", "fiancee", "fiancé", "fiance")},
    "best friend": ("friend", 5, 5), "friend": ("friend", 4, 4), "roommate": ("roommate", 3, 4),
    "neighbor": ("neighbour", 3, 3), "neighbour": ("neighbour", 3, 3), "boss": ("manager", 3, 3),
    "manager": ("manager", 3, 3), "colleague": ("colleague", 3, 3), "coworker": ("colleague", 3, 3),
    "co-worker": ("colleague", 3, 3), "mentor": ("mentor", 4, 3), "therapist": ("therapist", 4, 3),
    "doctor": ("doctor", 3, 2), "teacher": ("teacher", 3, 3), "coach": ("coach", 4, 3),
}
_FAMILY_TYPES = {"sister", "brother", "mother", "father", "son", "daughter", "wife", "husband", "cousin",
                 "aunt", "uncle", "niece", "nephew", "grandmother", "grandfather"}
_NAME = r"([A-Z][a-zA-Z'\u2019-]+(?:\s+[A-Z][a-zA-Z'\u2019-]+)?)"
_REL = "|".join(sorted((re.escape(w) for w in _PEOPLE), key=len, reverse=True))
_OWNERS = r"(?:\bmy|\bMy|\b[Uu]ser['\u2019]s|\b[Hh]is|\b[Hh]er|\b[Tt]heir)"
_REL_NAME = [
    re.compile(rf"{_OWNERS}\s+(?:older\s+|younger\s+|little\s+|big\s+|new\s+|old\s+)?({_REL}),?\s+(?:named\s+|called\s+)?{_NAME}"),
    re.compile(rf"\b(?:[Hh]as|[Hh]ave)\s+an?\s+(?:older\s+|younger\s+)?({_REL})\s+(?:named|called)\s+{_NAME}"),
]
_NAME_REL = re.compile(rf"{_NAME}\s*(?:,|\bis|\bwas|\bis\s+also)\s+(?:my|[Uu]ser['\u2019]s|the\s+user['\u2019]s)\s+"
                       rf"(?:older\s+|younger\s+|best\s+|close\s+|old\s+)?({_REL})\b")

_ORG = r"([A-Z][\w&.'-]*(?:\s+(?:[A-Z][\w&.'-]*|of|&))*)"
_WORK = [
    (re.compile(rf"\b(?:[Ii]\s+(?:work|worked|am working|'m working)|[Ww]orks|[Ww]orking|[Jj]oined|[Ii]\s+joined|"
                rf"[Ii]s employed|[Ii]\s+am employed)\s+(?:at|for|with)?\s*{_ORG}"), "works-at", False),
    (re.compile(rf"\b(?:[Uu]sed to work|[Ll]eft|[Qq]uit|[Nn]o longer works?)\s+(?:at|for)?\s*{_ORG}"), "works-at", True),
    (re.compile(rf"\b(?:job|role|position)\s+offer\s+(?:from|at)\s+{_ORG}"), "job-offer-from", False),
    (re.compile(rf"\b{_ORG}\s+(?:offered|has offered)\s+(?:me|the user|them|him|her)\s+(?:a\s+)?(?:job|role|position)"),
     "job-offer-from", False),
    (re.compile(rf"\b(?:[Ss]tudies|[Ss]tudy|[Ss]tudying|[Ee]nrolled)\s+at\s+{_ORG}"), "studies-at", False),
]
_PLACE = [
    (re.compile(rf"\b(?:[Ll]ives?|[Ll]iving|[Bb]ased|[Gg]rew up)\s+in\s+{_ORG}"), "lives-in", False),
    (re.compile(rf"\b(?:[Mm]oved|[Mm]oving|[Rr]elocat\w+)\s+(?:to|back to)\s+{_ORG}"), "lives-in", False),
    (re.compile(rf"\b(?:[Uu]sed to live|[Mm]oved away from|[Mm]oved out of)\s+(?:in\s+)?{_ORG}"), "lives-in", True),
    (re.compile(rf"\b(?:[Vv]isit\w*|[Tt]rip to|[Tt]ravel\w* to|[Ff]ly\w* to|[Ff]lew to|[Vv]acation in)\s+{_ORG}"),
     "visits", False),
]
_USE = re.compile(rf"\b(?:[Uu]ses?|[Uu]sing|[Pp]refers?|[Ss]witched to|[Ww]rites? in|[Cc]odes? in)\s+{_ORG}")
#: tools recognised wherever they are written (a capitalised word is not a tool by itself)
_TOOLS = frozenset(canonical(t) for t in (
    "Python", "JavaScript", "TypeScript", "Rust", "Go", "Java", "Kotlin", "Swift", "PostgreSQL", "Postgres",
    "MySQL", "SQLite", "Redis", "Docker", "Kubernetes", "Slack", "Notion", "Figma", "Excel", "GitHub",
    "GitLab", "Jira", "VS Code", "Vim", "Emacs", "Linux", "macOS", "Windows", "iPhone", "Android", "Zoom",
    "Obsidian", "Trello", "Airtable", "Photoshop", "LangChain", "LangGraph", "React", "Django", "FastAPI",
))
_ORGS = frozenset(canonical(t) for t in (
    "Google", "Microsoft", "Apple", "Amazon", "Meta", "Facebook", "Netflix", "OpenAI", "Anthropic", "IBM",
    "Stripe", "Uber", "Airbnb", "Spotify", "Tesla", "Intel", "Nvidia", "Oracle", "Salesforce", "Acme",
    "YouTube", "TikTok", "Instagram", "Twitter", "LinkedIn", "Reddit", "WhatsApp", "Nintendo", "Sony", "Samsung",
    "Nike", "Adidas", "Puma", "Gatorade", "Starbucks", "Walmart", "Target", "Costco", "IKEA", "Disney", "Pixar",
    "Marvel", "Lego", "Toyota", "Honda", "Ford", "BMW", "Boeing", "Airbus", "NASA", "NBA", "NFL", "FIFA",
))
#: countries and big cities, recognised wherever they are written
_PLACES = frozenset(canonical(t) for t in (
    "Afghanistan Argentina Australia Austria Belgium Brazil Canada Chile China Colombia Croatia Cuba Denmark Egypt "
    "England Ethiopia Finland France Germany Greece Iceland India Indonesia Iran Iraq Ireland Israel Italy Jamaica "
    "Japan Kenya Korea Mexico Morocco Nepal Netherlands Nigeria Norway Pakistan Peru Philippines Poland Portugal "
    "Romania Russia Scotland Singapore Spain Sweden Switzerland Thailand Turkey Ukraine Vietnam Wales Europe Asia "
    "Africa America Antarctica London Paris Berlin Madrid Rome Lisbon Porto Amsterdam Dublin Edinburgh Galway Prague "
    "Vienna Budapest Barcelona Tokyo Kyoto Seoul Beijing Shanghai Delhi Mumbai Sydney Melbourne Toronto Vancouver "
    "Montreal Chicago Boston Seattle Denver Austin Dallas Houston Miami Atlanta Phoenix Portland Oakland Tampa "
    "Orlando Brooklyn Manhattan California Texas Florida Oregon Michigan Minnesota Ohio Hawaii Alaska Colorado "
    "Arizona Nevada Utah Washington".split()))
#: capitalised words that are not names (sentence starts, days, months, pronouns, titles)
_COMMON = frozenset("""
a an the i i'm i've i'd i'll me my we our you your he she it they them his her their this that these those
there here what when where why how who which yes no not and or but so if then also just very really
monday tuesday wednesday thursday friday saturday sunday january february march april may june july
august september october november december today tomorrow yesterday tonight morning evening
user users mr mrs ms dr prefers likes loves wants needs has had have is was were are be been being
said says told asked thanks thank hi hello hey okay ok oh wow sure great good nice well sorry please
remember note after before during since until while because although though however maybe perhaps
last next every each all some many most much more few both other another one two three first second
new old big small long short high low left right up down in on at to for from with without about over
under between into onto of by as is isn't don't doesn't didn't can can't could would should will won't
working works worked lives lived moved moving visiting visited uses using used studies studying
christmas easter halloween thanksgiving english french german spanish chinese japanese italian
do does did go went get got make made take took see saw know knew think thought feel felt let lets
met had called talked spoke saw went came lunch dinner note notes save plain
meanwhile anyway besides still yet already again once soon later now never always often sometimes
mon tue tues wed weds thu thur thurs fri sat congrats congratulations cheers woohoo yay awesome cool wow
thankfully hopefully honestly totally definitely winning finals
american british canadian european irish scottish welsh african asian australian mexican brazilian indian
""".split())
_PERSON_CUES = re.compile(
    r"\b(?:with|and|told|asked|met|called|texted|visited|helped|thanked|hugged|invited|like|by)\s+{n}\b|"
    r"\b{n}\s+(?:said|says|told|asked|called|texted|thinks|thought|wants|feels|felt|is coming|and I|and me)\b|"
    r"\b{n}['\u2019]s\s+(?:birthday|wedding|kids?|husband|wife|partner|mom|dad|house|place|party)\b")
#: :data:`_PERSON_CUES` in two halves compiled once (a pattern per name cost a compile, ~2 ms,
#: for every new name on every save): a cue word just before the name, or one just after it
_CUE_BEFORE = re.compile(r"\b(?:with|and|told|asked|met|called|texted|visited|helped|thanked|hugged|invited|like)\s+$")
_CUE_AFTER = re.compile(
    r"\s+(?:said|says|told|asked|called|texted|thinks|thought|wants|feels|felt|is coming|and I|and me)\b|"
    r"['\u2019]s\s+(?:birthday|wedding|kids?|husband|wife|partner|mom|dad|house|place|party)\b")
_CAPS = re.compile(r"(?<![\w'\u2019@#/.-])([A-Z][a-z][a-zA-Z'\u2019-]*)")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*|[\"\u201c(]\s*)$")
#: initials before a surname ("J.K. Rowling"): their dot does not end a sentence
_INITIALS = re.compile(r"\b[A-Z]\.(?:\s?[A-Z]\.)*\s+$")
#: a transcript's speaker label ("[9 May] Tim: ...", "Sarah: ..."): a person
_SPEAKER = re.compile(r"(?:^|\]\s*|\n\s*)([A-Z][a-zA-Z'\u2019-]+(?:\s[A-Z][a-zA-Z'\u2019-]+)?):\s")
#: what is quoted is a title ("The Name of the Wind", 'Becoming Nicole'), not a name of someone
_QUOTED = re.compile(r"\"[^\"\n]{1,150}\"|\u201c[^\u201d\n]{1,150}\u201d|(?<![\w'\u2019])'[^'\n]{1,100}'(?![\w'])")
#: where a place is named: "in Paris", "went to Seattle", "from Galway", "near the Rocky Mountains"
_LOCATIVE = re.compile(r"(?:\b(?:in|near|around|across|through|throughout)|\b(?:went|go|going|gone|been|trip|travel\w*|"
                       r"moved?|moving|flew|fly|flying|drove|drive|driving|head\w*|back|road trip|vacation|holiday)\s+to|"
                       r"\b(?:am|is|are|was|were|come|comes|came|originally|back|'m|\u2019m)\s+from)\s+(?:the\s+)?$",
                       re.IGNORECASE)
#: the last word of a place's name ("York City", "Rocky Mountains", "Eiffel Tower")
_PLACE_WORDS = frozenset("""city town village county state province country island islands mountain mountains
hills valley canyon lake river falls beach coast bay park tower bridge street avenue square station airport
museum studios stadium arena center centre mall university college school""".split())
#: "the Wolves", "the Hobbit": a thing's name, not someone's; "Lord of the Rings": a title
_THE = re.compile(r"\bthe\s+$", re.IGNORECASE)
_OF_THE = re.compile(r"^\s+of\s+(?:the\s+)?[A-Z]")
_OF_THE_BEFORE = re.compile(r"[A-Z][\w'-]*\s+of\s+(?:the\s+)?$")


def _clean(name: str) -> str:
    name = re.sub(r"['\u2019]s$", "", name.strip(" .,;:!?\"'"))
    words = name.split()
    while words and canonical(words[-1]) in _COMMON:
        words.pop()
    if any(w.endswith((".", ",", ";", ":")) for w in words[:-1]):  # a name ends where a sentence does
        words = words[:next(i for i, w in enumerate(words) if w.endswith((".", ",", ";", ":"))) + 1]
    return " ".join(words).strip(" .,;:!?\"'")


def _person_name(raw: str) -> str:
    words = [w for w in _clean(raw).split() if canonical(w) not in _COMMON]
    return " ".join(words[:2])


def _common(key: str) -> bool:
    """A common word, or the plural of one ("Tuesdays")."""
    return key in _COMMON or (len(key) > 4 and key.endswith("s") and key[:-1] in _COMMON)


def _names(text: str) -> list[tuple[int, str]]:
    """Runs of up to three adjacent capitalised words that are not common words ("Cleo Baker"),
    with where each starts."""
    out: list[tuple[int, str]] = []
    run: list[tuple[int, int, str]] = []

    def flush() -> None:
        if run:
            name = re.sub(r"(?:['\u2019]s|-+)$", "", " ".join(w for _, _, w in run[:3]))  # "Max-", "Ed Sheeran's"
            out.append((run[0][0], name))
            run.clear()

    for m in _CAPS.finditer(text):
        word = m.group(1)
        key = canonical(word)
        if _common(key):
            flush()
            continue
        if run and not (m.start() == run[-1][1] + 1 and text[run[-1][1]] == " "):
            flush()
        run.append((m.start(), m.end(), word))
    flush()
    return out


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _cued(word: str, text: str) -> bool:
    """``_PERSON_CUES`` with ``word`` as the name matches ``text`` (without compiling a pattern
    for it): some whole occurrence of the word has a cue before or after it."""
    start = text.find(word)
    while start >= 0:
        end = start + len(word)
        whole_start = start == 0 or not _word_char(text[start - 1])
        whole_end = end == len(text) or not _word_char(text[end])
        if whole_end and _CUE_BEFORE.search(text, 0, start):
            return True
        if whole_start and _CUE_AFTER.match(text, end):
            return True
        start = text.find(word, start + 1)
    return False


def extract(text: str) -> Extracted:
    """Nodes and relations one memory states (deduplicated by canonical name, first wins)."""
    found: dict[str, Found] = {}
    links: list[Link] = []

    def add(f: Found) -> None:
        key = canonical(f.name)
        if key and key not in _COMMON and len(key) >= 2:
            held = found.get(key)
            if held is None or f.confidence > held.confidence:
                found[key] = f

    for rx in _REL_NAME:
        for m in rx.finditer(text):
            word, name = m.group(1).lower(), _person_name(m.group(2))
            if name:
                rel = _PEOPLE[word]
                add(Found(name, "person", confidence=0.9))
                links.append(Link(OWNER, name, "has_relationship_with",
                                  word if word in _FAMILY_TYPES else rel[0], rel[1], rel[2]))
    for m in _NAME_REL.finditer(text):
        name, word = _person_name(m.group(1)), m.group(2).lower()
        if name:
            rel = _PEOPLE[word]
            add(Found(name, "person", confidence=0.9))
            links.append(Link(OWNER, name, "has_relationship_with",
                              word if word in _FAMILY_TYPES else rel[0], rel[1], rel[2]))
    for rules, entity_type in ((_WORK, "organisation"), (_PLACE, "location")):
        for rx, rel_type, ended in rules:
            for m in rx.finditer(text):
                name = _clean(m.group(1))
                if name and canonical(name) not in _COMMON:
                    add(Found(name, "entity", entity_type, 0.8))
                    links.append(Link(OWNER, name, "associated_with", rel_type, ended=ended))
    for m in _USE.finditer(text):
        name = _clean(m.group(1))
        if canonical(name) in _TOOLS:
            add(Found(name, "entity", "tool", 0.8))
            links.append(Link(OWNER, name, "associated_with", "uses"))
    for m in _SPEAKER.finditer(text):
        name = _person_name(m.group(1))
        if name and not _common(canonical(name)):
            add(Found(name, "person", confidence=0.9))
    quoted = [q.span() for q in _QUOTED.finditer(text)]
    for start, word in _names(text):
        if any(a < start < b for a, b in quoted):  # a title's words are nobody
            continue
        after = text[start + len(word):]
        if _OF_THE.search(after) or _OF_THE_BEFORE.search(text[:start]) or re.match(r"\s+\d", after):
            continue  # a title ("Lord of the Rings"), "Game 7", "Chapter 3"
        key = canonical(word)
        if any(key in k.split() or key == k for k in found) or any(k in key.split() for k in found):
            continue
        if key in _TOOLS:
            add(Found(word, "entity", "tool", 0.7))
        elif key in _PLACES:
            add(Found(word, "entity", "location", 0.7))
        elif key in _ORGS:
            add(Found(word, "entity", "organisation", 0.7))
        elif _cued(word, text):
            add(Found(word, "person", confidence=0.7))
        elif len(key) > 2 and (_LOCATIVE.search(text[:start]) or key.split()[-1] in _PLACE_WORDS):
            add(Found(word, "entity", "location", 0.4))
        elif len(key) > 2 and _THE.search(text[:start]):
            add(Found(word, "entity", "other", 0.4))
        elif len(key) > 2:
            opening = bool(_SENTENCE_START.search(text[:start])) and not _INITIALS.search(text[:start])
            add(Found(word, "person", confidence=0.3 if opening else 0.4, known_only=opening))
    return Extracted(tuple(found.values()), tuple(links))
