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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import ConfigurationError

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

#: environment variable -> (config field, parser). The README's configuration table mirrors this.
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
        "MEMORY_KEYWORD_WEIGHT": ("keyword_weight", float),
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
    "keyword_weight": 0.5,
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
})


@dataclass(frozen=True, kw_only=True)
class MemoryConfig:
    """Every tunable of agent-memory, checked when built.

    database_url: a PostgreSQL URL; ``None`` starts the embedded server in ``data_dir``.
    embeddings: ``"local"`` (MiniLM, offline, 384 dims) or ``"openai"``
        (``embedding_model`` defaults to text-embedding-3-small, 1536 dims).
    min_confidence .. max_length: the memory gate.
    weight_*: ``final = similarity*w_sim + confidence*w_conf + scope_priority*w_scope``
        where *similarity* is the fused vector + keyword relevance (see ``keyword_weight``).
    keyword_weight: how much full-text (BM25) evidence adds to vector similarity; 0.5 is the
        middle of a flat optimum on the LoCoMo benchmark (Recall@10 0.707 vs 0.541 for 0; BENCHMARKS.md).
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
    scope_priority: Mapping[str, float] = field(default_factory=lambda: _DEFAULT_SCOPE_PRIORITY)
    keyword_weight: float = FROM_ENV
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


    def __post_init__(self) -> None:
        unset = [name for name in _DEFAULTS if getattr(self, name) is FROM_ENV]
        if unset:
            found = _read_env(os.environ, unset)
            for name in unset:
                object.__setattr__(self, name, found.get(name, _DEFAULTS[name]))
        self._check()

    def _check(self) -> None:
        def unit(name: str) -> None:
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not (0.0 <= v <= 1.0) or math.isnan(v):
                raise ConfigurationError(f"{name} must be a number between 0 and 1, got {v!r}")

        def positive_int(name: str, minimum: int = 1) -> None:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
                raise ConfigurationError(f"{name} must be a whole number >= {minimum}, got {v!r}")

        if self.database_url is not None and (
            not isinstance(self.database_url, str) or not self.database_url.strip()
        ):
            raise ConfigurationError(
                "database_url must be a non-empty postgresql:// URL, or None to use the embedded server"
            )
        if self.data_dir is not None:
            object.__setattr__(self, "data_dir", Path(self.data_dir).expanduser())
        if self.embeddings not in EMBEDDING_PROVIDERS:
            raise ConfigurationError(
                f"embeddings must be one of {', '.join(EMBEDDING_PROVIDERS)}, got {self.embeddings!r}; "
                "to use another model pass any LangChain Embeddings object as embeddings= to MemoryService"
            )
        for name in ("min_confidence", "duplicate_threshold", "weight_similarity", "weight_confidence",
                     "weight_scope", "keyword_weight", "min_relevance", "conflict_threshold"):
            unit(name)
        positive_int("embedding_threads")
        positive_int("extract_every")
        if self.extraction not in EXTRACTION_MODES:
            raise ConfigurationError(
                f"extraction must be one of {', '.join(EXTRACTION_MODES)}, got {self.extraction!r}"
            )
        if self.llm is not None and (not isinstance(self.llm, str) or ":" not in self.llm):
            raise ConfigurationError(
                f"llm must be 'provider:model' (e.g. 'openai:gpt-4o-mini') or None, got {self.llm!r}; "
                "to use a model object pass it as MemoryService(llm=...)"
            )
        positive_int("max_extractions", minimum=0)
        positive_int("min_length")
        positive_int("max_length")
        positive_int("candidate_pool")
        positive_int("max_k")
        positive_int("prompt_budget_chars", minimum=200)
        positive_int("pool_min_size", minimum=0)
        positive_int("pool_max_size")
        if self.min_length > self.max_length:
            raise ConfigurationError(
                f"min_length ({self.min_length}) must not exceed max_length ({self.max_length})"
            )
        if self.pool_min_size > self.pool_max_size:
            raise ConfigurationError(
                f"pool_min_size ({self.pool_min_size}) must not exceed pool_max_size ({self.pool_max_size})"
            )
        if not (isinstance(self.extraction_window_hours, (int, float)) and self.extraction_window_hours > 0):
            raise ConfigurationError(
                f"extraction_window_hours must be a positive number, got {self.extraction_window_hours!r}"
            )
        days = self.checkpoint_archive_days
        if isinstance(days, bool) or not isinstance(days, (int, float)) or not math.isfinite(days) or days <= 0:
            raise ConfigurationError(
                f"checkpoint_archive_days must be a positive number of days, got {days!r}"
            )
        if not isinstance(self.auto_create_projects, bool):
            raise ConfigurationError(f"auto_create_projects must be True or False, got {self.auto_create_projects!r}")
        if self.team_write not in TEAM_WRITE_POLICIES:
            raise ConfigurationError(
                f"team_write must be one of {', '.join(TEAM_WRITE_POLICIES)}, got {self.team_write!r}"
            )
        if not isinstance(self.scope_priority, Mapping):
            raise ConfigurationError(f"scope_priority must be a mapping of level -> weight, got {self.scope_priority!r}")
        given = dict(self.scope_priority)
        unknown = set(given) - set(_DEFAULT_SCOPE_PRIORITY)
        if unknown or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= v <= 1.0 for v in given.values()
        ):
            raise ConfigurationError(
                f"scope_priority must map levels ({', '.join(_DEFAULT_SCOPE_PRIORITY)}) to numbers between 0 and 1, "
                f"got {given!r}"
            )
        object.__setattr__(self, "scope_priority", MappingProxyType({**_DEFAULT_SCOPE_PRIORITY, **given}))

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
