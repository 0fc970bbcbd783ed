"""Profiles without an LLM: a deterministic mapping from memory types to profile fields.

Pure: no I/O. Items are read oldest first (by ``valid_from``, else ``created_at``,
then ``created_at`` and id), so the result never depends on the order they are
passed in. A newer item wins a single-valued field; a list keeps each entry once,
newest first, at most :data:`RULES_MAX_ENTRIES` entries (the oldest are dropped).
List entries are whole sentences with surrounding space and a final period removed.

User profile (:func:`build_user_profile`):

- preference -> custom_instructions. When the sentence is about answers, replies,
  explanations, style or writing, also communication_style: concise (concise, brief,
  short, succinct, terse, to the point), detailed (detailed, thorough, in-depth,
  comprehensive, verbose, step by step) or technical; a negated word flips concise
  and detailed ("dislikes verbose answers" -> concise). response_format: markdown,
  plain (plain text, unformatted, "no markdown"), code (code examples / snippets /
  blocks). language_preference: a natural language named as "in German", "German
  answers", "answers German".
- constraint -> custom_instructions, and the same style / format / language reading.
- fact -> username for "Their name is X", "Is called X", "Goes by X" (and a preference
  "to be called X"); profession for "Is a/an <role>", "Works as (a) <role>", "Works
  at Acme as a <role>" when a role word (engineer, developer, scientist, designer,
  manager, student, researcher, analyst, teacher, doctor, ...) is among the first
  words, kept with a capitalised "at Acme" that follows; any other fact -> background.
- skill -> expertise_areas, without a leading "Is an expert in", "Knows", "Has
  experience with" ... and a trailing "well".
- habit -> characteristics.
- event, context, decision -> background.
- background is the newest of those sentences that fit in 500 characters, oldest first.

Project profile (:func:`build_project_profile`):

- decision -> key_decisions: the text before "because" / "since" / "so that" /
  "due to" / "given that" is the decision, the rest its rationale; timestamp is the
  item's ``valid_from`` (else ``created_at``) in ISO-8601. The same decision twice
  is kept once, with the newest rationale.
- constraint -> constraints. habit, preference -> team_conventions.
- context -> project_goal when it says goal / aim / objective / purpose / mission /
  vision, current_phase when it says phase / stage / sprint / milestone; failing both,
  project_goal for building / builds / developing / creating, current_phase for MVP / alpha / beta /
  prototype / launch / release / production / pilot. Other context is left out.
- event -> current_phase when it has any of those phase words; otherwise left out.
- fact, skill and the context and events left out contribute only technology names:
  a profile is a summary, and those memories remain available through search.

Technologies: a fixed catalog of programming languages and tools (editors, version
control, containers, clouds, databases, frameworks, services) is matched in every
item of every type. For a user, languages go to programming_languages and the rest to
frequently_used_tools; for a project, both go to tech_stack. A name is not listed when
all its mentions in an item are something left behind: "switched from Vim to VS Code"
(with a switching verb, or "from X to Y"), "away from", "instead of", "rather than",
"in place of", "replaced X", "prefers X over Y", "no longer uses", "stopped (using)",
"quit", "gave up", "dropped", "abandoned", "ditched", "retired", "used to use",
"not", "never", "avoids", "dislikes", "hates", "without", "doesn't use", "X was
replaced"; "from Vim and Emacs" covers both. Such an item also removes the name when an
older item listed it. Plain "C", "R" and "Julia" are not matched (too often something else).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from agent_memory.models import MemoryItem, MemoryType

from .fields import MAX_TEXT_CHARS, coerce_profile_fields, empty_fields

__all__ = ["RULES_MAX_ENTRIES", "build_project_profile", "build_user_profile", "chronological"]

RULES_MAX_ENTRIES = 20


def chronological(items: Iterable[MemoryItem]) -> list[MemoryItem]:
    """``items`` oldest first: by ``valid_from`` (else ``created_at``), then ``created_at``, then id."""
    return sorted(items, key=lambda m: (_aware(m.valid_from or m.created_at), _aware(m.created_at), str(m.id)))


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


# --- user profile ---------------------------------------------------------------------


def build_user_profile(items: Sequence[MemoryItem]) -> dict[str, Any]:
    """The user profile fields read from active user-scope ``items`` (see the module docstring)."""
    fields = empty_fields("user")
    lists = {name: _Recent() for name, value in fields.items() if isinstance(value, list)}
    background = _Recent()
    for item in chronological(items):
        text = _sentence(item.content)
        kind = item.memory_type
        found = _single_valued(kind, text)
        fields.update(found)
        if kind in (MemoryType.PREFERENCE, MemoryType.CONSTRAINT):
            lists["custom_instructions"].add(text)
        elif kind is MemoryType.FACT:
            if not found:  # neither a name nor a profession
                background.add(text)
        elif kind is MemoryType.SKILL:
            lists["expertise_areas"].add(_skill(text))
        elif kind is MemoryType.HABIT:
            lists["characteristics"].add(text)
        else:  # event, context, decision
            background.add(text)
        for name, language, behind in reversed(_mentions_by_name(item.content)):  # first mention ends up first
            target = lists["programming_languages" if language else "frequently_used_tools"]
            if behind:
                target.remove(name)
            else:
                target.add(name)
    for name, entries in lists.items():
        fields[name] = entries.newest(RULES_MAX_ENTRIES)
    fields["background"] = _paragraph(background.newest(RULES_MAX_ENTRIES), MAX_TEXT_CHARS)
    return coerce_profile_fields("user", fields)


def _single_valued(kind: MemoryType, text: str) -> dict[str, str]:
    found: dict[str, str | None] = {}
    if kind in (MemoryType.PREFERENCE, MemoryType.CONSTRAINT):
        found["communication_style"] = _communication_style(text)
        found["response_format"] = _response_format(text)
        found["language_preference"] = _language(text)
    if kind in (MemoryType.FACT, MemoryType.PREFERENCE):
        found["username"] = _username(text)
    if kind is MemoryType.FACT:
        found["profession"] = _profession(text)
    return {name: value for name, value in found.items() if value}


# Negation right before a word: "not", "no", "doesn't want", "dislikes", "without" ...
_NEGATED = re.compile(
    r"\b(?:(?:not|never|\w*n['’]t)"
    r"(?:\s+(?:want|like|need|use|give|write|send|prefer|enjoy|answer|respond|repl|speak|talk)\w*)?|no|without|less|"
    r"dislik\w*|avoid\w*|hat(?:e|es|ed)|instead\s+of|rather\s+than)(?:\s+(?:too|overly|very|so|a|an|the|any))?\s+$",
    re.IGNORECASE,
)
_STYLE_CONTEXT = re.compile(
    r"\b(?:answers?|responses?|respond\w*|repl(?:y|ies)|explanations?|explain\w*|communicat\w*|style|"
    r"messages?|summar\w*|writ\w*|tone|output|feedback|to\s+the\s+point|keep\s+(?:it|things))\b",
    re.IGNORECASE,
)
_STYLES = (
    ("concise", re.compile(r"\b(?:concise|brief|short|succinct|terse|to\s+the\s+point)\b", re.IGNORECASE)),
    ("detailed", re.compile(
        r"\b(?:detailed|thorough|in[\s-]depth|comprehensive|verbose|elaborate|step[\s-]by[\s-]step)\b", re.IGNORECASE
    )),
    ("technical", re.compile(r"\btechnical\b", re.IGNORECASE)),
)
_OPPOSITE = {"concise": "detailed", "detailed": "concise"}
_FORMATS = (
    ("markdown", re.compile(r"\bmarkdown\b", re.IGNORECASE)),
    ("plain", re.compile(
        r"\bplain[\s-]text\b|\bplain\s+(?:answers?|responses?|format\w*|prose)\b|\bunformatted\b", re.IGNORECASE
    )),
    ("code", re.compile(
        r"\bcode\s+(?:examples?|snippets?|samples?|blocks?)\b|\bexamples?\s+(?:in|with)\s+code\b|\bwith\s+code\b",
        re.IGNORECASE,
    )),
)
_OPPOSITE_FORMAT = {"markdown": "plain"}


def _first_match(
    text: str, patterns: Sequence[tuple[str, re.Pattern[str]]], opposite: dict[str, str]
) -> str | None:
    """The value of the earliest match in ``text``; a negated one counts as its opposite, if any."""
    hits = sorted((m.start(), value) for value, pattern in patterns for m in pattern.finditer(text))
    for start, value in hits:
        if not _NEGATED.search(text[max(0, start - 40):start]):
            return value
        if value in opposite:
            return opposite[value]
    return None


def _communication_style(text: str) -> str | None:
    return _first_match(text, _STYLES, _OPPOSITE) if _STYLE_CONTEXT.search(text) else None


def _response_format(text: str) -> str | None:
    return _first_match(text, _FORMATS, _OPPOSITE_FORMAT)


_LANGUAGES = (
    "English", "German", "French", "Spanish", "Italian", "Portuguese", "Dutch", "Polish", "Russian",
    "Ukrainian", "Chinese", "Mandarin", "Cantonese", "Japanese", "Korean", "Arabic", "Hindi", "Bengali",
    "Turkish", "Swedish", "Norwegian", "Danish", "Finnish", "Greek", "Hebrew", "Czech", "Slovak",
    "Hungarian", "Romanian", "Bulgarian", "Croatian", "Serbian", "Vietnamese", "Thai", "Indonesian",
    "Malay", "Persian", "Catalan", "Basque", "Galician", "Irish", "Welsh", "Estonian", "Latvian",
    "Lithuanian", "Slovenian", "Tagalog", "Swahili", "Urdu", "Tamil",
)
_LANGUAGE = "|".join(_LANGUAGES)
_LANGUAGE_PATTERNS = (
    re.compile(
        rf"\b(?:in|into)\s+(?:plain\s+|simple\s+|british\s+|american\s+)?(?P<lang>{_LANGUAGE})\b", re.IGNORECASE
    ),
    re.compile(rf"\b(?P<lang>{_LANGUAGE})\s+(?:answers?|responses?|replies|language|only)\b", re.IGNORECASE),
    re.compile(
        rf"\b(?:speak|speaks|write|writes|answer|answers|respond|responds|reply|replies)\s+(?P<lang>{_LANGUAGE})\b",
        re.IGNORECASE,
    ),
)


def _language(text: str) -> str | None:
    hits = sorted((m.start(), m.group("lang")) for p in _LANGUAGE_PATTERNS for m in p.finditer(text))
    for start, name in hits:
        if not _NEGATED.search(text[max(0, start - 40):start]):
            return name.capitalize()
    return None


_NAME = r"(?P<name>[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*){0,2})"
_USERNAME_PATTERNS = (
    re.compile(
        r"(?:^|\b(?i:their|his|her|my|the\s+user's|user's)\s+)(?i:(?:first|full|preferred|given)\s+)?"
        rf"(?i:name\s+is)\s+{_NAME}"
    ),
    re.compile(
        rf"^(?i:(?:the\s+)?user\s+|they\s+are\s+|he\s+|she\s+)?(?i:is\s+called|is\s+named|goes\s+by)\s+{_NAME}"
    ),
    re.compile(rf"\b(?i:(?:to\s+)?be\s+called|be\s+addressed\s+as|call\s+(?:them|him|her|me))\s+{_NAME}"),
)


def _username(text: str) -> str | None:
    for pattern in _USERNAME_PATTERNS:
        match = pattern.search(text)
        if match:
            return match.group("name")
    return None


_ROLES = frozenset({
    "engineer", "developer", "programmer", "scientist", "designer", "manager", "student", "researcher",
    "analyst", "teacher", "professor", "lecturer", "doctor", "physician", "nurse", "architect", "consultant",
    "founder", "co-founder", "cofounder", "cto", "ceo", "cfo", "coo", "vp", "director", "lead", "writer",
    "journalist", "lawyer", "accountant", "administrator", "admin", "sre", "devops", "tester", "intern",
    "freelancer", "entrepreneur", "editor", "marketer", "officer", "specialist", "technician", "artist",
    "mathematician", "physicist", "chemist", "biologist", "statistician", "economist", "coordinator",
    "instructor", "tutor", "maintainer", "contractor", "recruiter", "pharmacist", "dentist", "therapist",
    "psychologist", "veterinarian", "postdoc", "strategist", "advisor", "adviser", "coach",
})
_ROLE_START = (
    re.compile(
        r"\b(?i:works?|working|employed)\s+(?P<prep>(?i:at|for|in|with))\s+(?P<org>[^,;.]{1,60}?)\s+"
        r"(?i:as)\s+(?:(?i:an?|the)\s+)?(?P<rest>.+)"
    ),
    re.compile(r"^(?i:(?:the\s+)?user\s+|they\s+|he\s+|she\s+)?(?i:works?|working)\s+(?i:as)\s+"
               r"(?:(?i:an?|the)\s+)?(?P<rest>.+)"),
    re.compile(r"^(?i:(?:the\s+)?user\s+|they\s+|he\s+|she\s+)?(?i:is|are)\s+(?i:an?|the)\s+(?P<rest>.+)"),
)
_ORG_TAIL = re.compile(r"^\s+(?P<prep>(?i:at|for))\s+(?P<org>[A-Z][\w&.'-]*(?:\s+[A-Z][\w&.'-]*){0,3})")


def _profession(text: str) -> str | None:
    """The role a fact states, e.g. "senior backend engineer at Acme" from "Is a senior backend engineer at Acme"."""
    for pattern in _ROLE_START:
        match = pattern.search(text)
        if not match:
            continue
        rest = re.split(r"[,;:]|\.(?:\s|$)", match.group("rest"), maxsplit=1)[0]
        words = rest.split()
        roles = [i for i, w in enumerate(words[:5]) if w.strip("()'\"").lower() in _ROLES]
        if not roles:
            continue
        end = roles[0] + 1
        while end < len(words) and words[end].strip("()'\"").lower() in _ROLES:
            end += 1
        role = " ".join(words[:end])
        if match.groupdict().get("org"):
            return f"{role} {match.group('prep').lower()} {match.group('org').strip()}"
        tail = _ORG_TAIL.match(" " + " ".join(words[end:]))
        return f"{role} {tail.group('prep').lower()} {tail.group('org')}" if tail else role
    return None


_SKILL_PREFIX = re.compile(
    r"^(?:(?:the\s+)?user\s+)?(?:is\s+|are\s+)?(?:(?:very|highly|quite|really|extremely)\s+)?"
    r"(?:(?:an?\s+)?(?:expert|experienced|skilled|proficient|fluent|good|great|strong|knowledgeable|"
    r"(?:well[\s-])?versed|competent|specialist)\s+(?:in|at|with|on)"
    r"|(?:has|have)\s+(?:[\w-]+\s+){0,3}?(?:experience|expertise|knowledge|background)\s+(?:in|with|of)"
    r"|knows(?:\s+how\s+to)?|can|speciali[sz](?:e|es|ed)\s+in)\s+",
    re.IGNORECASE,
)
_SKILL_SUFFIX = re.compile(r"\s+(?:(?:very|really|quite)\s+)?well$", re.IGNORECASE)


def _skill(text: str) -> str:
    area = _SKILL_SUFFIX.sub("", _SKILL_PREFIX.sub("", text, count=1)).strip()
    return area[0].upper() + area[1:] if area else text


def _paragraph(sentences_newest_first: list[str], limit: int) -> str | None:
    """The newest sentences that fit in ``limit`` characters, oldest first, as one paragraph."""
    kept: list[str] = []
    used = 0
    for sentence in sentences_newest_first:
        sentence = sentence if sentence[-1] in ".!?" else sentence + "."
        cost = len(sentence) + (1 if kept else 0)
        if used + cost > limit:
            break
        kept.append(sentence)
        used += cost
    return " ".join(reversed(kept)) or None


# --- project profile ------------------------------------------------------------------


def build_project_profile(items: Sequence[MemoryItem]) -> dict[str, Any]:
    """The project profile fields read from active project-scope ``items`` (see the module docstring)."""
    fields = empty_fields("project")
    lists = {name: _Recent() for name in ("tech_stack", "constraints", "team_conventions")}
    decisions: dict[str, dict[str, str | None]] = {}  # casefolded decision -> entry, oldest first
    for item in chronological(items):
        text = _sentence(item.content)
        kind = item.memory_type
        if kind is MemoryType.DECISION:
            decision, rationale = _split_rationale(text)
            when = item.valid_from or item.created_at
            decisions.pop(decision.casefold(), None)
            decisions[decision.casefold()] = {
                "decision": decision, "rationale": rationale, "timestamp": when.isoformat(),
            }
        elif kind is MemoryType.CONSTRAINT:
            lists["constraints"].add(text)
        elif kind in (MemoryType.HABIT, MemoryType.PREFERENCE):
            lists["team_conventions"].add(text)
        elif kind in (MemoryType.CONTEXT, MemoryType.EVENT):
            field = _context_field(text, goal_allowed=kind is MemoryType.CONTEXT)
            if field:
                fields[field] = text
        for name, _language, behind in reversed(_mentions_by_name(item.content)):
            if behind:
                lists["tech_stack"].remove(name)
            else:
                lists["tech_stack"].add(name)
    for name, entries in lists.items():
        fields[name] = entries.newest(RULES_MAX_ENTRIES)
    fields["key_decisions"] = list(reversed(decisions.values()))[:RULES_MAX_ENTRIES]
    return coerce_profile_fields("project", fields)


_RATIONALE = re.compile(
    r"\s*,?\s*\b(?:because(?:\s+of)?|since(?!\s+(?:\d|then\b|last\b|the\s+(?:start|beginning)\b))"
    r"|so\s+that|due\s+to|given\s+that)\s+",
    re.IGNORECASE,
)


def _split_rationale(text: str) -> tuple[str, str | None]:
    match = _RATIONALE.search(text)
    if not match or match.start() == 0:
        return text, None
    rationale = text[match.end():].strip()
    return text[: match.start()].strip(), rationale or None


_STRONG_GOAL = re.compile(r"\b(?:goals?|aims?|objectives?|purpose|mission|vision)\b", re.IGNORECASE)
_STRONG_PHASE = re.compile(r"\b(?:phase|stage|sprint|milestone)s?\b", re.IGNORECASE)
_WEAK_GOAL = re.compile(r"\b(?:builds|building|develops|developing|creating)\b", re.IGNORECASE)
_WEAK_PHASE = re.compile(
    r"\b(?:mvp|alpha|beta|prototype|launch\w*|release[sd]?|production|pilot|general\s+availability)\b", re.IGNORECASE
)


def _context_field(text: str, *, goal_allowed: bool) -> str | None:
    if goal_allowed and _STRONG_GOAL.search(text):
        return "project_goal"
    if _STRONG_PHASE.search(text):
        return "current_phase"
    if goal_allowed and _WEAK_GOAL.search(text):
        return "project_goal"
    if _WEAK_PHASE.search(text):
        return "current_phase"
    return None


# --- shared helpers -------------------------------------------------------------------


class _Recent:
    """An ordered set of strings (case-insensitive), newest last; re-adding makes an entry newest."""

    def __init__(self) -> None:
        self._entries: dict[str, str] = {}

    def add(self, text: str) -> None:
        if text:
            self._entries.pop(text.casefold(), None)
            self._entries[text.casefold()] = text

    def remove(self, text: str) -> None:
        self._entries.pop(text.casefold(), None)

    def newest(self, n: int) -> list[str]:
        return list(reversed(self._entries.values()))[:n]


def _sentence(text: str) -> str:
    """``text`` on one line, without surrounding space or a final period."""
    text = " ".join(text.split())
    return text[:-1].rstrip() if text.endswith(".") and not text.endswith("..") else text


# --- technologies ---------------------------------------------------------------------


class _Tech(NamedTuple):
    name: str
    language: bool
    pattern: str  # a regular expression, case-insensitive unless the entry says otherwise


def _tech(name: str, regex: str | None = None, *, language: bool = False, case: bool = False) -> _Tech:
    body = regex or re.escape(name)
    return _Tech(name, language, body if case else f"(?i:{body})")


def _language_(name: str, regex: str | None = None, *, case: bool = False) -> _Tech:
    return _tech(name, regex, language=True, case=case)


_TECHS: tuple[_Tech, ...] = (
    # programming languages
    _language_("Python"), _language_("TypeScript"), _language_("JavaScript"),
    _language_("JavaScript", "JS", case=True), _language_("Rust", case=True),
    _language_("Go", r"Go(?!\s+ahead\b)|[Gg]olang", case=True), _language_("Java"), _language_("C#", r"C\#"),
    _language_("C++", r"C\+\+|cpp"), _language_("Kotlin"), _language_("Swift", case=True),
    _language_("Ruby", case=True), _language_("PHP"), _language_("SQL"), _language_("Scala", case=True),
    _language_("Haskell"), _language_("Elixir"), _language_("Erlang"), _language_("Clojure"),
    _language_("Lua"), _language_("Perl"), _language_("Dart", case=True), _language_("MATLAB"),
    _language_("Objective-C"), _language_("Zig", case=True), _language_("OCaml"), _language_("F#", r"F\#"),
    _language_("Bash"), _language_("PowerShell"), _language_("Fortran"), _language_("COBOL"),
    _language_("Solidity"), _language_("HTML"), _language_("CSS"),
    # editors and IDEs
    _tech("VS Code", r"VS\s?Code|VSCode|Visual\s+Studio\s+Code"), _tech("Visual Studio", r"Visual\s+Studio(?!\s+Code)"),
    _tech("Vim"), _tech("Neovim", r"Neovim|nvim"), _tech("Emacs"), _tech("PyCharm"),
    _tech("IntelliJ", r"IntelliJ(?:\s+IDEA)?"), _tech("WebStorm"), _tech("GoLand"), _tech("CLion"),
    _tech("Xcode"), _tech("Android Studio"), _tech("Eclipse", case=True),
    _tech("Sublime Text", r"Sublime(?:\s+Text)?"),
    _tech("Jupyter", r"Jupyter(?:\s?Lab)?"), _tech("Cursor", r"Cursor(?=\s+(?:IDE|editor)\b)", case=True),
    # version control and CI
    _tech("Git"), _tech("GitHub"), _tech("GitHub Actions", r"GitHub\s+Actions"), _tech("GitLab"),
    _tech("Bitbucket"), _tech("Jenkins"), _tech("CircleCI"),
    # containers, infrastructure, clouds
    _tech("Docker", r"Docker(?:\s+Compose)?"), _tech("Podman"), _tech("Kubernetes", r"Kubernetes|k8s"),
    _tech("Helm", case=True), _tech("Terraform"), _tech("Ansible"), _tech("AWS", r"AWS|Amazon\s+Web\s+Services"),
    _tech("Google Cloud", r"GCP|Google\s+Cloud(?:\s+Platform)?"), _tech("Azure", case=True),
    _tech("Vercel"), _tech("Heroku"), _tech("Netlify"), _tech("Cloudflare"), _tech("Nginx"),
    _tech("Linux", case=True), _tech("tmux"), _tech("zsh"), _tech("Homebrew"),
    # databases, queues, data
    _tech("PostgreSQL", r"Postgres(?:QL)?"), _tech("MySQL"), _tech("MariaDB"), _tech("SQLite"),
    _tech("MongoDB", r"Mongo(?:DB)?"), _tech("Redis"), _tech("Elasticsearch"), _tech("Kafka"),
    _tech("RabbitMQ"), _tech("DynamoDB"), _tech("BigQuery"), _tech("Snowflake", case=True),
    _tech("ClickHouse"), _tech("pgvector"), _tech("Supabase"), _tech("Firebase"), _tech("Airflow"),
    _tech("Spark", r"(?:Apache\s+)?Spark", case=True), _tech("dbt", case=True), _tech("pandas"),
    _tech("NumPy"), _tech("Excel", case=True), _tech("Tableau"), _tech("Power BI", r"Power\s?BI"),
    # frameworks and libraries
    _tech("React", case=True), _tech("React Native", r"React\s+Native"), _tech("Vue", r"Vue(?:\.js)?"),
    _tech("Angular", case=True), _tech("Svelte"), _tech("Next.js", r"Next\.js|NextJS"),
    _tech("Node.js", r"Node\.js|NodeJS"), _tech("Deno", case=True), _tech("Express", r"Express\.js|ExpressJS"),
    _tech("Django"), _tech("Flask", case=True), _tech("FastAPI"),
    _tech("Rails", r"(?:Ruby\s+on\s+)?Rails", case=True), _tech("Spring Boot", r"Spring\s+Boot"),
    _tech(".NET", r"\.NET", case=True), _tech("Tailwind", r"Tailwind(?:\s?CSS)?"),
    _tech("Flutter"), _tech("Electron", case=True), _tech("LangChain"), _tech("LangGraph"),
    _tech("LlamaIndex"), _tech("PyTorch"), _tech("TensorFlow"), _tech("Keras"),
    _tech("scikit-learn", r"scikit-learn|sklearn"), _tech("Hugging Face", r"Hugging\s?Face"),
    _tech("Pydantic"), _tech("SQLAlchemy"), _tech("Prisma", case=True), _tech("GraphQL"), _tech("gRPC"),
    _tech("Celery"), _tech("Streamlit"), _tech("OpenAI"), _tech("Ollama"),
    # testing and tooling
    _tech("pytest"), _tech("Jest", case=True), _tech("Playwright"), _tech("Cypress", case=True),
    _tech("Selenium"), _tech("Webpack"), _tech("Vite", case=True), _tech("ESLint"), _tech("mypy"),
    _tech("npm"), _tech("pnpm"), _tech("Yarn", case=True), _tech("Poetry", case=True),
    _tech("Conda", r"(?:Ana|Mini)?conda"),
    # collaboration and observability
    _tech("Jira"), _tech("Confluence"), _tech("Slack", case=True), _tech("Notion", case=True),
    _tech("Figma"), _tech("Postman"), _tech("Grafana"), _tech("Prometheus", case=True),
    _tech("Sentry", case=True), _tech("Datadog"),
)


class _Mention(NamedTuple):
    start: int
    end: int
    tech: _Tech


# One scan for the whole catalog. Longer names are tried first, so at one position
# "GitHub Actions" wins over "GitHub" and "Ruby on Rails" over "Ruby".
_BY_LENGTH = sorted(_TECHS, key=lambda t: -len(t.name))
_TECH_PATTERN = re.compile(
    r"(?<![\w.#+-])(?:" + "|".join(f"(?P<t{i}>{t.pattern})" for i, t in enumerate(_BY_LENGTH)) + r")(?![\w#+]|\.\w)"
)


def _mentions(text: str) -> list[_Mention]:
    """Known technologies in ``text``, in order, not overlapping."""
    return [
        _Mention(m.start(), m.end(), _BY_LENGTH[int(str(m.lastgroup)[1:])]) for m in _TECH_PATTERN.finditer(text)
    ]


_BEHIND_BEFORE = re.compile(
    r"\b(?P<trigger>from|away\s+from|over|instead\s+of|rather\s+than|in\s+place\s+of|replac(?:e|es|ed|ing)|"
    r"no\s+longer(?:\s+\w+)?|stop(?:s|ped|ping)?|quit(?:s|ting)?|(?:gave|give|gives|giving)\s+up(?:\s+on)?|"
    r"drop(?:s|ped|ping)|abandon(?:s|ed|ing)?|ditch(?:es|ed|ing)?|retir(?:e|es|ed|ing)|"
    r"phas(?:e|es|ed|ing)\s+out|used\s+to\s+use|(?:formerly|previously)\s+used|not|never(?:\s+\w+)?|"
    r"avoid(?:s|ed|ing)?|dislik(?:e|es|ed|ing)|hat(?:e|es|ed|ing)|without|"
    r"(?:does|do|did)(?:\s+not|n['’]t)\s+\w+)"
    r"(?:\s+(?:using|the|with|on))?\s+$",
    re.IGNORECASE,
)
_SWITCH_VERB = re.compile(
    r"\b(?:switch\w*|mov(?:e|es|ed|ing)|migrat\w*|chang\w*|transition\w*|went|go(?:es|ing)?|"
    r"port(?:s|ed|ing)|convert\w*|jump\w*)\b",
    re.IGNORECASE,
)
_TO_AFTER = re.compile(r"(?:\s+v?\d[\w.]*)?\s+(?:to|in\s+favou?r\s+of)\b", re.IGNORECASE)
_PREFER_VERB = re.compile(r"\b(?:prefer\w*|chose|choos\w*|pick\w*|favou?r\w*|likes?)\b", re.IGNORECASE)
_BEHIND_AFTER = re.compile(
    r"(?:\s+v?\d[\w.]*)?\s+(?:(?:is|are|was|were|has\s+been|have\s+been|got|gets)\s+(?:being\s+)?"
    r"(?:replaced|dropped|removed|retired|deprecated|abandoned|phased\s+out|no\s+longer\s+used)|is\s+no\s+longer)",
    re.IGNORECASE,
)
_COORDINATION = re.compile(r"^\s*(?:,\s*(?:and|or|nor)?|and|or|nor|&|/)\s*$", re.IGNORECASE)
_CLAUSE_END = re.compile(r"[.;!?](?=\s|$)|\n")


def _left_behind(text: str, mention: _Mention, clause_start: int) -> bool:
    """True when this mention names something given up, replaced or avoided.

    Only its own clause is read, and at most the 300 characters before it.
    """
    before = text[max(clause_start, mention.start - 300):mention.start]
    match = _BEHIND_BEFORE.search(before, max(0, len(before) - 120))
    if match:
        trigger = match.group("trigger").lower()
        context = before[: match.start()]
        if trigger == "from":
            return bool(_SWITCH_VERB.search(context) or _TO_AFTER.match(text, mention.end))
        if trigger == "over":
            return bool(_PREFER_VERB.search(context))
        return True
    return bool(_BEHIND_AFTER.match(text, mention.end))


def _mentions_by_name(text: str) -> list[tuple[str, bool, bool]]:
    """(name, is a language, left behind) per technology in ``text``, in order of first mention.

    A name is left behind only when every one of its mentions is; a mention joined to a
    left-behind one by "and", "or" or a comma ("from Vim and Emacs") is left behind too.
    """
    behind: dict[str, bool] = {}
    language: dict[str, bool] = {}
    previous: tuple[_Mention, bool] | None = None
    clause_starts = [0, *(m.end() for m in _CLAUSE_END.finditer(text))]
    for mention in _mentions(text):
        left = _left_behind(text, mention, clause_starts[bisect_right(clause_starts, mention.start) - 1])
        if not left and previous is not None and previous[1]:
            left = bool(_COORDINATION.match(text[previous[0].end:mention.start]))
        name = mention.tech.name
        behind[name] = behind.get(name, True) and left
        language[name] = mention.tech.language
        previous = (mention, left)
    return [(name, language[name], behind[name]) for name in behind]
