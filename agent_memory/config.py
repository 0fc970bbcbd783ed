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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import ConfigurationError
from .ranking import KEYWORD_NORMS

__all__ = ["ENV_VARS", "FROM_ENV", "MemoryConfig", "default_data_dir"]

EMBEDDING_PROVIDERS = ("local", "openai")
EXTRACTION_MODES = ("inline", "background", "off")

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
        "MEMORY_MIN_RELEVANCE": ("min_relevance", float),
        "MEMORY_PROMPT_BUDGET": ("prompt_budget_chars", int),
        "MEMORY_POOL_MAX_SIZE": ("pool_max_size", int),
        "MEMORY_CHECKPOINT_ARCHIVE_DAYS": ("checkpoint_archive_days", float),
        "MEMORY_LLM": ("llm", str),
        "MEMORY_EXTRACTION": ("extraction", str),
        "MEMORY_EXTRACT_EVERY": ("extract_every", int),
        "MEMORY_AUTO_CREATE_PROJECTS": ("auto_create_projects", boolean),
        "MEMORY_TEAM_WRITE": ("team_write", str),
        "MEMORY_CONFLICT_THRESHOLD": ("conflict_threshold", float),
        "MEMORY_TTL_DAYS": ("ttl_days", days_by_name),
        "MEMORY_ARCHIVE_BELOW": ("archive_below", float),
        "MEMORY_ARCHIVE_IDLE_DAYS": ("archive_idle_days", float),
        "MEMORY_EPHEMERAL_DAYS": ("ephemeral_days", float),
        "MEMORY_MAX_DOCUMENT_PASSAGES": ("max_document_passages", int),
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
    "min_relevance": 0.0,
    "prompt_budget_chars": 4000,
    "pool_max_size": 10,
    "checkpoint_archive_days": 30.0,
    "llm": None,
    "extraction": "inline",
    "extract_every": 1,
    "auto_create_projects": True,
    "team_write": "members",
    "conflict_threshold": 0.4,
    "ttl_days": MappingProxyType({}),
    "archive_below": None,
    "archive_idle_days": 30.0,
    "ephemeral_days": 1.0,
    "max_document_passages": 2000,
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


def _ttl_days(value: Any) -> bool:
    return (isinstance(value, Mapping) and set(value) <= set(_SCOPES + _TYPES)
            and all(_number(v) and math.isfinite(v) and 0 < v <= 36_600 for v in value.values()))


#: config field -> the rule its value must follow; every field has one (tests/test_config_env.py checks)
_RULES: Mapping[str, _Rule] = MappingProxyType({
    "database_url": _Rule(lambda v: v is None or (isinstance(v, str) and v.strip() != ""),
                          "a non-empty postgresql:// URL, or None to use the embedded server", show_value=False),
    "data_dir": _Rule(lambda v: v is None or isinstance(v, (str, os.PathLike)),
                      "a directory path, or None for the per-user default"),
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
    "auto_create_projects": _Rule(lambda v: isinstance(v, bool), "True or False"),
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
})

#: (lower, upper): pairs of fields where the first must not exceed the second
_ORDERED = (("min_length", "max_length"), ("pool_min_size", "pool_max_size"))


def _validated(config: MemoryConfig) -> dict[str, Any]:
    """Check every field of ``config`` against :data:`_RULES` and :data:`_ORDERED`; the fields
    whose values are normalised (``data_dir`` expanded, ``scope_priority`` completed and frozen)."""
    for name, rule in _RULES.items():
        if (problem := rule.problem(name, getattr(config, name))) is not None:
            raise ConfigurationError(problem)
    for low, high in _ORDERED:
        if getattr(config, low) > getattr(config, high):
            raise ConfigurationError(
                f"{low} ({getattr(config, low)}) must not exceed {high} ({getattr(config, high)})"
            )
    normalised: dict[str, Any] = {
        "scope_priority": MappingProxyType({**_DEFAULT_SCOPE_PRIORITY, **config.scope_priority}),
        "ttl_days": MappingProxyType({k: float(v) for k, v in config.ttl_days.items()}),
    }
    if config.data_dir is not None:
        normalised["data_dir"] = Path(config.data_dir).expanduser()
    return normalised


@dataclass(frozen=True, kw_only=True)
class MemoryConfig:
    """Every tunable of agent-memory, checked when built.

    database_url: a PostgreSQL URL; ``None`` starts the embedded server in ``data_dir``.
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
    extract_every: extract after every N-th run of a session (its user turns since the last run
        are all read then).
    scope_priority: the precedence of each level (session, project, user, team, org) in ranking
        and in resolving conflicts between levels; a mapping of some levels overrides only those.
    auto_create_projects: the first write to a project nobody created yet creates it, with the
        writer as its owner; ``False`` requires ``create_project`` first.
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
        scope of 384-dimensional vectors takes about 48 MB, its keyword postings included); the least recently searched goes first.
    max_document_passages: ``add_document`` refuses a document cut into more passages than this
        (each is embedded, stored and read), before any of them is embedded.
    """

    database_url: str | None = FROM_ENV
    data_dir: Path | None = FROM_ENV
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
    auto_create_projects: bool = FROM_ENV
    team_write: str = FROM_ENV
    conflict_threshold: float = FROM_ENV
    ttl_days: Mapping[str, float] = FROM_ENV
    archive_below: float | None = FROM_ENV
    archive_idle_days: float = FROM_ENV
    ephemeral_days: float = FROM_ENV
    vector_cache_rows: int = 5000
    vector_cache_mb: int = 1024
    max_document_passages: int = FROM_ENV

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
