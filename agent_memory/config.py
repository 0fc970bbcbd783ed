"""Frozen, validated configuration; the only module that reads environment variables.

One rule of precedence, whichever way a config is built: an argument given in
code wins, then the environment variable (``MEMORY_*``, ``DATABASE_URL``), then
the documented default. So ``MemoryConfig(keyword_weight=0)`` still uses the
``DATABASE_URL`` a user has set: a config built in code never silently drops
back to the embedded database. ``MemoryConfig.defaults()`` ignores the
environment (for tests and reproducible benchmarks); ``from_env(environ)``
reads a mapping of your own instead of ``os.environ``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import ConfigurationError
from .memory_types import MAX_INSTRUCTIONS, custom_types_problem, memory_type_descriptions, normalized_custom_types
from .ranking import KEYWORD_NORMS

__all__ = ["ENV_VARS", "FROM_ENV", "PLUGIN_PRINCIPAL", "SERVER_ENV_VARS", "MemoryConfig", "default_data_dir",
           "server_setting"]

EMBEDDING_PROVIDERS = ("local", "openai")
EXTRACTION_MODES = ("inline", "background", "off")
#: ``inject_when``: how the middleware decides whether a turn needs memory (``agent_memory.relevance``)
INJECT_MODES = ("rules", "model", "always")

_DEFAULT_SCOPE_PRIORITY = MappingProxyType({"session": 1.0, "project": 0.8, "user": 0.6, "team": 0.4, "org": 0.2})
TEAM_WRITE_POLICIES = ("members", "leads")


def _read_env(env: Mapping[str, str], names: list[str]) -> dict[str, Any]:
    """The values ``env`` sets for the config fields ``names`` (parsed); unset or blank variables are left out."""
    values: dict[str, Any] = {}
    for var, (name, parse) in ENV_VARS.items():
        raw = env.get(var)
        if name not in names or raw is None or raw.strip() == "":
            continue
        try:
            values[name] = parse(raw.strip())
        except ValueError:
            raise ConfigurationError(
                f"environment variable {var}={raw!r} is not a valid {parse.__name__}; fix or unset it"
            ) from None
    return values


def boolean(raw: str) -> bool:
    """An environment flag: 1/true/yes/on or 0/false/no/off."""
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)

_SCOPES = ("user", "session", "project", "team", "org")
_TYPES = ("preference", "fact", "skill", "habit", "event", "context", "constraint", "decision")


#: ``distributed``: the clusters agent-memory distributes its tables over (agent_memory.db.distributed)
DISTRIBUTIONS = ("citus",)


def distribution(raw: str) -> str | None:
    """``MEMORY_DISTRIBUTED``: ``citus``, or ``off``/``none`` for a single server."""
    value = raw.strip().lower()
    return None if value in ("off", "none", "0", "false", "no") else value


def days_by_name(raw: str) -> dict[str, float]:
    """``"session=7,event=30"``: days to live by scope or memory type (an environment value)."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in raw.split(","))):
        name, sep, days = part.partition("=")
        if not sep:
            raise ValueError(raw)
        out[name.strip()] = float(days)
    return out


#: environment variable -> (config field, parser). ``docs/reference/configuration.md``'s table mirrors this.
ENV_VARS: Mapping[str, tuple[str, Any]] = MappingProxyType(
    {
        "DATABASE_URL": ("database_url", str),
        "MEMORY_DATA_DIR": ("data_dir", Path),
        "MEMORY_SERVER_IDLE_TIMEOUT": ("server_idle_timeout", float),
        "MEMORY_DB_SCHEMA": ("db_schema", str),
        "MEMORY_EMBEDDINGS": ("embeddings", str),
        "MEMORY_EMBEDDING_MODEL": ("embedding_model", str),
        "MEMORY_EMBEDDING_THREADS": ("embedding_threads", int),
        "MEMORY_MIN_CONFIDENCE": ("min_confidence", float),
        "MEMORY_DUPLICATE_THRESHOLD": ("duplicate_threshold", float),
        "MEMORY_MAX_EXTRACTIONS": ("max_extractions", int),
        "MEMORY_EXTRACTION_WINDOW_HOURS": ("extraction_window_hours", float),
        "MEMORY_MIN_LENGTH": ("min_length", int),
        "MEMORY_MAX_LENGTH": ("max_length", int),
        "MEMORY_WEIGHT_SIMILARITY": ("weight_similarity", float),
        "MEMORY_WEIGHT_CONFIDENCE": ("weight_confidence", float),
        "MEMORY_WEIGHT_SCOPE": ("weight_scope", float),
        "MEMORY_WEIGHT_SALIENCE": ("weight_salience", float),
        "MEMORY_KEYWORD_WEIGHT": ("keyword_weight", float),
        "MEMORY_CONTEXT_WEIGHT": ("context_weight", float),
        "MEMORY_CONTEXT_KEYWORD_WEIGHT": ("context_keyword_weight", float),
        "MEMORY_MIN_RELEVANCE": ("min_relevance", float),
        "MEMORY_PROMPT_BUDGET": ("prompt_budget_chars", int),
        "MEMORY_POOL_MAX_SIZE": ("pool_max_size", int),
        "MEMORY_CHECKPOINT_ARCHIVE_DAYS": ("checkpoint_archive_days", float),
        "MEMORY_LLM": ("llm", str),
        "MEMORY_EXTRACTION": ("extraction", str),
        "MEMORY_EXTRACT_EVERY": ("extract_every", int),
        "MEMORY_EXTRACT_IDLE_SECONDS": ("extract_idle_seconds", float),
        "MEMORY_AUTO_CREATE_PROJECTS": ("auto_create_projects", boolean),
        "MEMORY_KNOWLEDGE_GRAPH": ("knowledge_graph", boolean),
        "MEMORY_TEAM_WRITE": ("team_write", str),
        "MEMORY_CONFLICT_THRESHOLD": ("conflict_threshold", float),
        "MEMORY_TTL_DAYS": ("ttl_days", days_by_name),
        "MEMORY_ARCHIVE_BELOW": ("archive_below", float),
        "MEMORY_ARCHIVE_IDLE_DAYS": ("archive_idle_days", float),
        "MEMORY_EPHEMERAL_DAYS": ("ephemeral_days", float),
        "MEMORY_MAX_DOCUMENT_PASSAGES": ("max_document_passages", int),
        "MEMORY_CUSTOM_TYPES": ("custom_memory_types", memory_type_descriptions),
        "MEMORY_EXTRACTION_INSTRUCTIONS": ("extraction_instructions", str),
        "MEMORY_CONSOLIDATION_FLOOR": ("consolidation_floor", float),
        "MEMORY_CONSOLIDATION_CANDIDATES": ("consolidation_candidates", int),
        "MEMORY_INJECT_WHEN": ("inject_when", str),
        "MEMORY_INJECT_MIN_RELEVANCE": ("inject_min_relevance", float),
        "MEMORY_PROFILE_BUDGET_TOKENS": ("profile_budget_tokens", int),
        "MEMORY_DISTRIBUTED": ("distributed", distribution),
    }
)


class _FromEnv:
    """The default of a field the environment may set: filled in when the config is built."""

    def __repr__(self) -> str:
        return "<from environment or default>"


#: the value of a field nobody gave in code; typed Any so each field keeps its true type
FROM_ENV: Any = _FromEnv()


def default_data_dir() -> Path:
    """Per-user directory of the embedded PostgreSQL (``~/.local/share/agent-memory/pgdata`` on Linux).

    As root it is ``/var/lib/agent-memory/pgdata``: the server then runs as a
    ``pgserver`` user that must be able to reach the directory, and opening
    ``/root`` to other users for that would be a poor trade.
    """
    import platformdirs

    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/agent-memory/pgdata")
    return Path(platformdirs.user_data_dir("agent-memory", appauthor=False)) / "pgdata"


#: the default of each field an environment variable may set
_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "database_url": None,
    "data_dir": None,
    "server_idle_timeout": 600.0,
    "db_schema": "public",
    "embeddings": "local",
    "embedding_model": None,
    "embedding_threads": 1,
    "min_confidence": 0.7,
    "duplicate_threshold": 0.85,
    "max_extractions": 3,
    "extraction_window_hours": 24.0,
    "min_length": 5,
    "max_length": 2000,
    "weight_similarity": 0.5,
    "weight_confidence": 0.3,
    "weight_scope": 0.2,
    "weight_salience": 0.0,
    "keyword_weight": 0.4,
    "context_weight": 0.7,
    "context_keyword_weight": 0.5,
    "min_relevance": 0.0,
    "prompt_budget_chars": 4000,
    "pool_max_size": 10,
    "checkpoint_archive_days": 30.0,
    "llm": None,
    "extraction": "inline",
    "extract_every": 1,
    "extract_idle_seconds": 120.0,
    "auto_create_projects": True,
    "knowledge_graph": False,
    "team_write": "members",
    "conflict_threshold": 0.4,
    "ttl_days": MappingProxyType({}),
    "archive_below": None,
    "archive_idle_days": 30.0,
    "ephemeral_days": 1.0,
    "max_document_passages": 2000,
    "custom_memory_types": MappingProxyType({}),
    "extraction_instructions": None,
    "consolidation_floor": 0.3,
    "consolidation_candidates": 5,
    "inject_when": "rules",
    "inject_min_relevance": 0.1,
    "profile_budget_tokens": 300,
    "distributed": None,
})


# --- validation: one rule per field, one message shape ------------------------------------------


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class _Rule:
    """What a field's value must be: ``check(value)`` holds, or the config is refused with
    ``"{field} must be {expected}, got {value!r}{hint}"``."""

    check: Callable[[Any], bool]
    expected: str
    hint: str = ""
    show_value: bool = True  # False where the value may hold a secret (a URL's password)

    def problem(self, name: str, value: Any) -> str | None:
        if self.check(value):
            return None
        got = f", got {value!r}" if self.show_value else ""
        return f"{name} must be {self.expected}{got}{self.hint}"


def _between_0_and_1() -> _Rule:
    return _Rule(lambda v: _number(v) and 0.0 <= v <= 1.0, "a number between 0 and 1")  # NaN fails both


def _whole(minimum: int = 1) -> _Rule:
    return _Rule(lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
                 f"a whole number >= {minimum}")


def _positive(unit: str) -> _Rule:
    return _Rule(lambda v: _number(v) and math.isfinite(v) and v > 0, f"a positive number of {unit}")


def _one_of(choices: tuple[str, ...], hint: str = "") -> _Rule:
    return _Rule(lambda v: v in choices, f"one of {', '.join(choices)}", hint)


def _scope_weights(value: Any) -> bool:
    return (isinstance(value, Mapping) and set(value) <= set(_DEFAULT_SCOPE_PRIORITY)
            and all(_number(v) and 0.0 <= v <= 1.0 for v in value.values()))


def _ttl_days(value: Any) -> bool:  # custom types' names are checked against the config in _validated
    return (isinstance(value, Mapping) and all(isinstance(k, str) for k in value)
            and all(_number(v) and math.isfinite(v) and 0 < v <= 36_600 for v in value.values()))


#: the schema names we accept: never quoted, so the same name in SQL, in a URL's options and in psql
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

#: config field -> the rule its value must follow; every field has one (tests/test_config_env.py checks)
_RULES: Mapping[str, _Rule] = MappingProxyType({
    "database_url": _Rule(lambda v: v is None or (isinstance(v, str) and v.strip() != ""),
                          "a non-empty postgresql:// URL, or None to use the embedded server", show_value=False),
    "data_dir": _Rule(lambda v: v is None or isinstance(v, (str, os.PathLike)),
                      "a directory path, or None for the per-user default"),
    "server_idle_timeout": _Rule(lambda v: _number(v) and math.isfinite(v) and v >= 0,
                                 "a number of seconds >= 0 (0: each command stops the server it started)"),
    "db_schema": _Rule(lambda v: isinstance(v, str) and _SCHEMA_NAME.fullmatch(v) is not None
                       and not v.startswith("pg_"),
                       "a PostgreSQL schema name of lowercase letters, digits and _ (at most 63, not "
                       "starting with a digit or pg_)", "; e.g. MEMORY_DB_SCHEMA=agent_memory"),
    "embeddings": _one_of(EMBEDDING_PROVIDERS, "; to use another model pass any LangChain Embeddings object "
                                               "as embeddings= to MemoryService"),
    "embedding_model": _Rule(lambda v: v is None or isinstance(v, str),
                             "a model name, or None for the provider's default"),
    "embedding_threads": _whole(),
    "min_confidence": _between_0_and_1(),
    "duplicate_threshold": _between_0_and_1(),
    "max_extractions": _whole(minimum=0),
    "extraction_window_hours": _positive("hours"),
    "min_length": _whole(),
    "max_length": _whole(),
    "weight_similarity": _between_0_and_1(),
    "weight_confidence": _between_0_and_1(),
    "weight_scope": _between_0_and_1(),
    "weight_salience": _between_0_and_1(),
    "scope_priority": _Rule(_scope_weights, f"a mapping of levels ({', '.join(_DEFAULT_SCOPE_PRIORITY)}) "
                                            "to numbers between 0 and 1"),
    "keyword_weight": _between_0_and_1(),
    "context_weight": _between_0_and_1(),
    "context_keyword_weight": _between_0_and_1(),
    "keyword_norm": _one_of(KEYWORD_NORMS, "; 'coverage' scores the share of the question's IDF mass a memory "
                                           "matches, 'squash' is bm25 / (bm25 + 5), the former default"),
    "min_relevance": _between_0_and_1(),
    "keyword_feedback": _whole(minimum=0),
    "candidate_pool": _whole(),
    "max_k": _whole(),
    "prompt_budget_chars": _whole(minimum=200),
    "pool_min_size": _whole(minimum=0),
    "pool_max_size": _whole(),
    "checkpoint_archive_days": _positive("days"),
    "llm": _Rule(lambda v: v is None or (isinstance(v, str) and ":" in v),
                 "'provider:model' (e.g. 'openai:gpt-4o-mini') or None",
                 "; to use a model object pass it as MemoryService(llm=...)"),
    "extraction": _one_of(EXTRACTION_MODES),
    "extract_every": _whole(),
    "extract_idle_seconds": _positive("seconds"),
    "auto_create_projects": _Rule(lambda v: isinstance(v, bool), "True or False"),
    "knowledge_graph": _Rule(lambda v: isinstance(v, bool), "True or False"),
    "team_write": _one_of(TEAM_WRITE_POLICIES),
    "conflict_threshold": _between_0_and_1(),
    "ttl_days": _Rule(_ttl_days, f"a mapping of levels ({', '.join(_SCOPES)}) or memory types "
                                 f"({', '.join(_TYPES)}) to days between 0 and 36600",
                      "; e.g. {'session': 7, 'event': 30} or MEMORY_TTL_DAYS='session=7,event=30'"),
    "archive_below": _Rule(lambda v: v is None or (_number(v) and 0.0 < v < 1.0),
                           "a salience between 0 and 1 (exclusive), or None to never archive faded memories"),
    "archive_idle_days": _positive("days"),
    "ephemeral_days": _positive("days"),
    "vector_cache_rows": _whole(minimum=0),
    "vector_cache_mb": _whole(),
    "max_document_passages": _whole(),
    "custom_memory_types": _Rule(lambda v: custom_types_problem(v) is None, "a mapping of new type names to "
                                 "descriptions (e.g. {'incident': 'An outage and its cause'}, or "
                                 "MEMORY_CUSTOM_TYPES='incident=An outage and its cause')"),
    "extraction_instructions": _Rule(lambda v: v is None or (isinstance(v, str) and 0 < len(v.strip())
                                                             and len(v) <= MAX_INSTRUCTIONS and "\x00" not in v),
                                     f"None or text of 1 to {MAX_INSTRUCTIONS} characters"),
    "consolidation_floor": _between_0_and_1(),
    "consolidation_candidates": _Rule(lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 50,
                                      "a whole number from 1 to 50"),
    "inject_when": _one_of(INJECT_MODES, "; 'rules' decides per turn offline, 'model' asks the chat model "
                                         "(MEMORY_LLM), 'always' searches on every turn"),
    "inject_min_relevance": _between_0_and_1(),
    "profile_budget_tokens": _whole(minimum=0),
    "distributed": _Rule(lambda v: v is None or v in DISTRIBUTIONS, "None or 'citus'",
                         "; 'citus' distributes the tables over a Citus cluster (MEMORY_DISTRIBUTED=citus)"),
})

#: (lower, upper): pairs of fields where the first must not exceed the second
_ORDERED = (("min_length", "max_length"), ("pool_min_size", "pool_max_size"))


def _validated(config: MemoryConfig) -> dict[str, Any]:
    """Check every field of ``config`` against :data:`_RULES` and :data:`_ORDERED`; the fields
    whose values are normalised (``data_dir`` expanded, ``scope_priority`` completed and frozen)."""
    for name, rule in _RULES.items():
        if (problem := rule.problem(name, getattr(config, name))) is not None:
            if name == "custom_memory_types":  # say which rule the mapping breaks
                problem += f"; it needs {custom_types_problem(config.custom_memory_types)}"
            raise ConfigurationError(problem)
    unknown = set(config.ttl_days) - set(_SCOPES + _TYPES) - set(config.custom_memory_types)
    if unknown:
        raise ConfigurationError(
            f"ttl_days must be a mapping of levels ({', '.join(_SCOPES)}) or memory types ({', '.join(_TYPES)}, "
            f"or a custom type) to days between 0 and 36600, got unknown names {sorted(unknown)}")
    for low, high in _ORDERED:
        if getattr(config, low) > getattr(config, high):
            raise ConfigurationError(
                f"{low} ({getattr(config, low)}) must not exceed {high} ({getattr(config, high)})"
            )
    normalised: dict[str, Any] = {
        "scope_priority": MappingProxyType({**_DEFAULT_SCOPE_PRIORITY, **config.scope_priority}),
        "ttl_days": MappingProxyType({k: float(v) for k, v in config.ttl_days.items()}),
        "custom_memory_types": MappingProxyType(normalized_custom_types(config.custom_memory_types)),
    }
    if config.data_dir is not None:
        normalised["data_dir"] = Path(config.data_dir).expanduser()
    return normalised


@dataclass(frozen=True, kw_only=True)
class MemoryConfig:
    """Every tunable of agent-memory, checked when built.

    database_url: a PostgreSQL URL; ``None`` starts the embedded server in ``data_dir``.
    server_idle_timeout: seconds the embedded server started by ``agent-memory`` commands keeps
        running once no process uses it (a watchdog then stops it), so the next command does not
        pay for a start; 0: each command stops the server it started, as a Python process does.
    db_schema: the PostgreSQL schema that holds every table, index, function and sequence of ours
        (``"public"`` by default, where databases made before it was a setting have theirs);
        another name gives one database several independent memories, or keeps ours apart from
        an application's own tables.
    embeddings: ``"local"`` (MiniLM, offline, 384 dims) or ``"openai"``
        (``embedding_model`` defaults to text-embedding-3-small, 1536 dims).
    min_confidence .. max_length: the memory gate.
    weight_*: ``final = similarity*w_sim + confidence*w_conf + scope_priority*w_scope
        + salience*w_salience`` where *similarity* is the fused vector + keyword relevance (see
        ``keyword_weight``) and *salience* how much a memory is recalled, and lately (0 by
        default: on the LoCoMo dev split, with no history of use, it cannot change an answer).
    keyword_weight: how much full-text (BM25) evidence adds to vector similarity: ``relevance =
        (1 - keyword_weight) * cosine + keyword_weight * keyword``; 0.4 with ``keyword_norm``
        ``"coverage"`` was chosen by leave-one-conversation-out on LoCoMo (Recall@10 0.719 held
        out, 0.707 before; BENCHMARKS.md, issue 14).
    context_weight: for a memory that keeps its context (a transcript's turn, ``add_transcript``),
        the share of the cosine of the question and the context in its similarity:
        ``(1 - context_weight) * cosine + context_weight * context cosine``; memories without
        context rank as before. 0.7 was chosen by leave-one-conversation-out on LoCoMo (every
        fold's choice; Recall@10 0.750 held out against 0.719 without; BENCHMARKS.md, issue 29).
    context_keyword_weight: for a memory that keeps its context, the share of the keyword
        evidence over the context (BM25 of the context's words, IDF as for the memory's own) in its
        keyword evidence: ``(1 - context_keyword_weight) * keyword + context_keyword_weight *
        context keyword``; memories without context rank as before. 0.5 (with ``context_weight``
        0.7) was chosen by leave-one-conversation-out on LoCoMo (three folds of five chose it;
        Recall@10 0.780 held out against 0.750 without; BENCHMARKS.md, issue 29).
    keyword_norm: how BM25 becomes *keyword* in [0, 1]: ``"coverage"`` (the share of the
        question's IDF mass a memory matches, at most 1) or ``"squash"`` (``bm25 / (bm25 + 5)``,
        the former default, with ``keyword_weight`` 0.5).
    keyword_feedback: how many words the question's best memories share (``ranking.feedback_lexemes``)
        join it for a second search (pseudo-relevance feedback; one more statement); 0 (the
        default) turns it off. On LoCoMo 5 lifts Recall@10 to 0.744 held out, but only through the
        dates every memory there starts with (memories of one session share them): without those
        words it scores 0.708, below coverage alone. Worth it where memories carry such shared words.
    candidate_pool: rows fetched by each of the vector and keyword candidate lists before ranking;
        on LoCoMo 50 does as well as 1000 (20 loses a little).
    min_relevance: search leaves out hits whose relevance (the fused similarity, before
        confidence and scope are added) is below this; 0 returns the top k whatever they are.
    prompt_budget_chars: how many characters of memories ``format_memories_for_prompt`` may emit.
    checkpoint_archive_days: checkpoints older than this many days are what
        ``PostgresCheckpointer.archive()`` moves out of LangGraph's hot tables by default.
    llm: the chat model for extraction, consolidation and profiles, as ``"provider:model"``
        for LangChain's ``init_chat_model`` (``"openai:gpt-4o-mini"``); ``None`` uses the
        deterministic rules and similarity thresholds (offline). A model object passed to
        ``MemoryService(llm=...)`` wins over this.
    extraction: when the agent middleware extracts memories after a run: ``"inline"`` (before
        the run returns), ``"background"`` (in a worker thread; the answer is not delayed) or ``"off"``.
    extract_every: the agent middleware extracts once N user turns of a session wait (all the
        turns not read yet are read then). The window's last run (``max_extractions``) is kept for
        the end of the conversation, so a thread longer than the budget is still read whole.
    extract_idle_seconds: a session whose turns wait and that had no new turn for this long is
        read by the agent middleware (with the run kept for it); turns still waiting when the
        process ends are read when the thread is resumed or the user's next session starts.
    scope_priority: the precedence of each level (session, project, user, team, org) in ranking
        and in resolving conflicts between levels; a mapping of some levels overrides only those.
    auto_create_projects: the first write to a project nobody created yet creates it, with the
        writer as its owner; ``False`` requires ``create_project`` first.
    knowledge_graph: the knowledge graph (people, things and the relations between them) learns from
        every memory saved, in the save's transaction; off by default: the extra cost of a save
        is above its target on big graphs (BENCHMARKS.md). ``build_graph`` fills it in later.
    team_write: who may write a new team's memory: ``"members"`` or ``"leads"`` (only its leads);
        each team can change it (``set_team_write``).
    conflict_threshold: memories at different levels at least this similar (and not duplicates)
        are shown to the agent together as a conflict.
    ttl_days: how long memories of a level or type live unless a save says otherwise, in days
        (``{"session": 7, "event": 30}``; where both apply, the shorter); none expire by default.
    archive_below: ``maintain()`` archives a ``decay`` memory whose salience (raised by each
        recall, halving every ``stability`` days) fell below this and that went unused for
        ``archive_idle_days``; ``None`` (the default) never archives by salience.
    ephemeral_days: ``maintain()`` archives an ``ephemeral`` memory unused for this many days.
    vector_cache_rows: a scope with at least this many active memories is searched from a copy of
        its vectors held by the process (``agent_memory.vector_cache``; still exact, every answer
        read again from the database); 0 turns the copies off.
    vector_cache_mb: the most memory the copies of one service may take, in MB (a 20,000-memory
        scope of 384-dimensional vectors takes about 48 MB, its keyword postings included, and about 106 MB
        when its memories keep their context: their context vectors and mixed vectors too); the least
        recently searched goes first.
    max_document_passages: ``add_document`` refuses a document cut into more passages than this
        (each is embedded, stored and read), before any of them is embedded.
    custom_memory_types: a deployment's own memory types next to the eight built-in ones, each
        with a description the extraction model and the ``memory_save`` tool are shown
        (``{"incident": "An outage or production incident and its cause"}``); see
        :mod:`agent_memory.memory_types` for the rules on names.
    extraction_instructions: text added to the extraction model's instructions (what this
        deployment wants remembered or left out); the offline rules do not read it.
    consolidation_floor: a stored memory less similar than this (cosine) to a proposal is not a
        candidate when deciding ADD / UPDATE / SUPERSEDE / NONE.
    consolidation_candidates: how many stored memories (the most similar) each proposal is
        compared with when deciding.
    inject_when: whether the middleware looks for memories on a turn: ``"rules"`` (default) when the
        turn refers to the user, their people, past, decisions or projects (``agent_memory.relevance``,
        offline), ``"model"`` when the chat model says so (the rules without one), ``"always"`` on
        every turn. Profiles are injected either way.
    inject_min_relevance: the middleware injects a memory only when its relevance (as for
        ``min_relevance``) is at least this; 0.1 was chosen on the labelled turns of
        ``benchmarks/data/relevance_turns.jsonl`` (the highest floor that still serves 95% of the
        turns that need a memory; BENCHMARKS.md, issue 31).
    profile_budget_tokens: the most each injected profile may take, in tokens (about 4 characters
        each); fields are dropped or shortened to fit and empty ones are never shown; 0 leaves profiles out.
    distributed: ``"citus"``: the database is a Citus coordinator, and starting (or ``agent-memory
        migrate``) distributes the tables by the scope they hold (``agent_memory.db.distributed``,
        idempotent); the copies of big scopes' vectors are off there (change stamps are per node).
        ``None`` (the default): one PostgreSQL server.
    """

    database_url: str | None = FROM_ENV
    data_dir: Path | None = FROM_ENV
    server_idle_timeout: float = FROM_ENV
    db_schema: str = FROM_ENV
    embeddings: str = FROM_ENV
    embedding_model: str | None = FROM_ENV
    embedding_threads: int = FROM_ENV
    min_confidence: float = FROM_ENV
    duplicate_threshold: float = FROM_ENV
    max_extractions: int = FROM_ENV
    extraction_window_hours: float = FROM_ENV
    min_length: int = FROM_ENV
    max_length: int = FROM_ENV
    weight_similarity: float = FROM_ENV
    weight_confidence: float = FROM_ENV
    weight_scope: float = FROM_ENV
    weight_salience: float = FROM_ENV
    scope_priority: Mapping[str, float] = field(default_factory=lambda: _DEFAULT_SCOPE_PRIORITY)
    keyword_weight: float = FROM_ENV
    context_weight: float = FROM_ENV
    context_keyword_weight: float = FROM_ENV
    keyword_norm: str = "coverage"
    keyword_feedback: int = 0
    min_relevance: float = FROM_ENV
    candidate_pool: int = 50
    max_k: int = 100
    prompt_budget_chars: int = FROM_ENV
    pool_min_size: int = 1
    pool_max_size: int = FROM_ENV
    checkpoint_archive_days: float = FROM_ENV
    llm: str | None = FROM_ENV
    extraction: str = FROM_ENV
    extract_every: int = FROM_ENV
    extract_idle_seconds: float = FROM_ENV
    auto_create_projects: bool = FROM_ENV
    knowledge_graph: bool = FROM_ENV
    team_write: str = FROM_ENV
    conflict_threshold: float = FROM_ENV
    ttl_days: Mapping[str, float] = FROM_ENV
    archive_below: float | None = FROM_ENV
    archive_idle_days: float = FROM_ENV
    ephemeral_days: float = FROM_ENV
    vector_cache_rows: int = 5000
    vector_cache_mb: int = 1024
    max_document_passages: int = FROM_ENV
    custom_memory_types: Mapping[str, str] = FROM_ENV
    extraction_instructions: str | None = FROM_ENV
    consolidation_floor: float = FROM_ENV
    consolidation_candidates: int = FROM_ENV
    inject_when: str = FROM_ENV
    inject_min_relevance: float = FROM_ENV
    profile_budget_tokens: int = FROM_ENV
    distributed: str | None = FROM_ENV

    def __post_init__(self) -> None:
        unset = [name for name in _DEFAULTS if getattr(self, name) is FROM_ENV]
        found = _read_env(os.environ, unset) if unset else {}
        for name in unset:
            object.__setattr__(self, name, found.get(name, _DEFAULTS[name]))
        for name, value in _validated(self).items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> MemoryConfig:
        """``overrides``, then the variables of ``environ`` (default ``os.environ``; see
        :data:`ENV_VARS`), then the defaults. ``MemoryConfig(**overrides)`` is the same with
        ``os.environ``."""
        if environ is None:
            return cls(**overrides)
        found = _read_env(environ, [name for name in _DEFAULTS if name not in overrides])
        return cls(**{**_DEFAULTS, **found, **overrides})

    @classmethod
    def defaults(cls, **overrides: Any) -> MemoryConfig:
        """The documented defaults and ``overrides``, whatever the environment says."""
        return cls.from_env({}, **overrides)

    def replace(self, **changes: Any) -> MemoryConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def resolved_data_dir(self) -> Path:
        return self.data_dir if self.data_dir is not None else default_data_dir()


# --- the servers' own settings --------------------------------------------------------------------

#: the user the ``memory_store`` plugin acts for when neither ``--user`` nor ``MEMORY_STORE_USER``
#: names one (a daemon starts plugins with no arguments); like any user, its user-level memories
#: and its derived projects are its own, and no other principal reads them
PLUGIN_PRINCIPAL = "memory-store-plugin"

#: environment variable -> the server flag it stands for (a flag given on the command line wins);
#: ``docs/reference/configuration.md`` lists them
SERVER_ENV_VARS: Mapping[str, str] = MappingProxyType({
    "MEMORY_STORE_USER": "agent-memory memory-store --user",
})


def server_setting(var: str, environ: Mapping[str, str] | None = None) -> str | None:
    """A server flag's environment variable (:data:`SERVER_ENV_VARS`); unset or blank is None."""
    if var not in SERVER_ENV_VARS:
        raise KeyError(f"{var} is not a server setting; add it to SERVER_ENV_VARS")
    value = (os.environ if environ is None else environ).get(var, "")
    return value if value.strip() else None
