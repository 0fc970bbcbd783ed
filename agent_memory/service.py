"""The memory service: the Python API that middleware, tools and CLIs call.

``MemoryService`` (blocking) and ``AsyncMemoryService`` (asyncio) share every
public method: each method turns its arguments into an operation from
:mod:`agent_memory.ops`, and the class decides only how to run it. Identity
(``user_id``, ``project_id``, ``session_id``) is a keyword argument of every
call and scopes everything the call reads or writes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import psycopg
from langchain_core.embeddings import Embeddings
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from . import access, ops, resources, rights
from .config import MemoryConfig
from .db.connection import (  # noqa: F401 - DEFAULT_DATABASE is re-exported
    DEFAULT_DATABASE, aopen_pool, embedded_restarter, open_pool, resolve_dsn,
)
from .db.migrations import migrate
from .db.requests import Op, arun, run
from .embeddings import embedding_dimensions, embedding_model_name, resolve_embeddings
from .errors import ConfigurationError, InvalidInputError
from .extraction.pipeline import ExtractionReport, extract_memories
from .formatting import format_memories_for_prompt
from .gate import check_content, normalize_content
from .llm import LlmSlot
from .models import (
    Conflict,
    Membership,
    MemoryItem,
    MemoryStats,
    MemoryVersion,
    NewMemory,
    Rejection,
    Resource,
    Scope,
    SearchResult,
)
from .profiles import store as profiles
from .validation import check_bool, check_identity, check_int, check_list

__all__ = ["AsyncMemoryService", "MemoryService"]

def _coerce_new(item: Any, index: int) -> NewMemory:
    if isinstance(item, NewMemory):
        return ops.make_new_memory(
            item.content, memory_type=item.memory_type, scope=item.scope, confidence=item.confidence,
            source=item.source, source_id=item.source_id, visibility=item.visibility, metadata=item.metadata,
        )
    if isinstance(item, str):
        return ops.make_new_memory(item)
    if isinstance(item, Mapping):
        fields = dict(item)
        if "content" not in fields:
            raise InvalidInputError(f"items[{index}]", "needs a 'content' key")
        unknown = set(fields) - set(NewMemory.__dataclass_fields__)
        if unknown:
            raise InvalidInputError(f"items[{index}]", f"has unknown keys {sorted(unknown)}; allowed: "
                                                       f"{', '.join(NewMemory.__dataclass_fields__)}")
        return ops.make_new_memory(fields.pop("content"), **fields)
    raise InvalidInputError(f"items[{index}]", f"must be a NewMemory, a dict or a string, got {type(item).__name__}")


#: "the service's own chat model" where a method also accepts a model, or None for none
SERVICE_LLM: Any = object()


class _MemoryAPI:
    """The public methods, written once. ``_execute`` runs an operation (sync) or returns
    a coroutine that runs it (async), so in ``AsyncMemoryService`` every method is awaited."""

    config: MemoryConfig
    embeddings: Embeddings
    _llm: LlmSlot

    @property
    def llm(self) -> Any:
        """The chat model used for extraction, consolidation and profiles (None: rules, offline)."""
        return self._llm.get()

    def _model(self, llm: Any) -> Any:
        if llm is SERVICE_LLM:
            return self.llm
        return LlmSlot(llm, self.config.replace(llm=None)).get()

    def _execute(self, op: Op[Any]) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _as(self, ids: tuple[Any, Any, Any, Any, Any], fn: Callable[..., Op[Any]], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(identity, ...)``; the identity is checked when the op runs, like all other input."""

        def op() -> Op[Any]:
            identity = check_identity(*ids)
            return (yield from fn(identity, *args, **kwargs))

        return self._execute(op())

    # --- writing ---------------------------------------------------------------------------

    def add_explicit_memory(
        self, content: str, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
        memory_type: str = "fact", scope: str = "user", confidence: float = 1.0, source: str = "user",
        source_id: str | None = None, visibility: str = "members", metadata: Mapping[str, Any] | None = None,
        dedupe: bool = True,
    ) -> MemoryItem | Rejection:
        """Save one memory through the gate.

        Returns the stored :class:`MemoryItem`; the *existing* item (with
        ``deduplicated=True`` and a fresh ``last_used_at``) when an active memory
        in the same scope says the same thing; or a :class:`Rejection` saying why
        nothing was stored (too short/long, low confidence, a secret). Malformed
        arguments raise :class:`InvalidInputError`.
        """
        def op(identity: Any) -> Op[Any]:
            new = ops.make_new_memory(
                content, memory_type=memory_type, scope=scope, confidence=confidence, source=source,
                source_id=source_id, visibility=visibility, metadata=metadata,
            )
            return (yield from ops.add_memory(self.config, identity, new, dedupe=check_bool("dedupe", dedupe)))

        return self._as((user_id, project_id, session_id, team_id, org_id), op)

    def import_memories(
        self, items: Iterable[NewMemory | Mapping[str, Any] | str], *, user_id: str,
        project_id: str | None = None, session_id: str | None = None, team_id: str | None = None,
        org_id: str | None = None, dedupe: bool = False,
    ) -> ops.ImportResult:
        """Bulk import for importers and benchmarks: one batched embedding and one COPY.

        Each item passes the gate's content checks (rejections are reported by
        position, the rest are written); ``dedupe`` also skips duplicates of
        active memories and of earlier items. Malformed items raise before
        anything is written.
        """
        def op(identity: Any) -> Op[Any]:
            news = [_coerce_new(item, i) for i, item in enumerate(check_list("items", items))]
            return (yield from ops.import_memories(self.config, identity, news, dedupe=check_bool("dedupe", dedupe)))

        return self._as((user_id, project_id, session_id, team_id, org_id), op)

    def delete_memory(
        self, memory_id: Any, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
        hard: bool = False,
    ) -> MemoryItem:
        """Archive a memory (it never surfaces again, and can be restored), or with ``hard=True``
        delete it for good. Only its creator may; returns the item as it was."""
        return self._as((user_id, project_id, session_id, team_id, org_id), lambda ident: ops.delete_memory(
            ident, memory_id, hard=check_bool("hard", hard)))

    def restore_memory(
        self, memory_id: Any, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> MemoryItem:
        """Make an archived memory active again."""
        return self._as((user_id, project_id, session_id, team_id, org_id), ops.restore_memory, memory_id)

    def purge_archived(
        self, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> int:
        """Permanently delete every archived memory the caller created; returns how many."""
        return self._as((user_id, project_id, session_id, team_id, org_id), ops.purge_archived)

    def record_extraction_run(
        self, *, user_id: str, session_id: str, project_id: str | None = None, team_id: str | None = None,
        org_id: str | None = None,
    ) -> int | Rejection:
        """Count one automatic extraction run against the session's budget
        (``MEMORY_MAX_EXTRACTIONS`` per ``MEMORY_EXTRACTION_WINDOW_HOURS``): runs left, or RATE_LIMITED."""
        return self._as((user_id, project_id, session_id, team_id, org_id),
                        lambda ident: ops.record_extraction_run(self.config, ident))

    def edit_memory(
        self, memory_id: Any, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
        content: str | None = None, memory_type: str | None = None, confidence: float | None = None,
        reason: str | None = None,
    ) -> MemoryItem | Rejection:
        """Revise one of your active memories in place; its earlier wording stays in
        :meth:`memory_history`. New content passes the gate (a :class:`Rejection` otherwise)."""
        return self._as((user_id, project_id, session_id, team_id, org_id), lambda ident: ops.edit_memory(
            self.config, ident, memory_id, content=content, memory_type=memory_type, confidence=confidence,
            reason=reason))

    # --- projects, teams, orgs and their members -------------------------------------------

    def _by(self, user_id: str, fn: Callable[..., Op[Any]], *args: Any, **kwargs: Any) -> Any:
        return self._as((user_id, None, None, None, None), fn, *args, **kwargs)

    def create_project(self, project_id: str, *, user_id: str) -> Membership:
        """Create a project with ``user_id`` as its owner (idempotent for its owner). Projects
        are also created by their first write unless ``auto_create_projects`` is off."""
        return self._by(user_id, lambda ident: access.create_scope(self.config, ident, Scope.PROJECT, project_id))

    def create_team(self, team_id: str, *, user_id: str, write: str | None = None) -> Membership:
        """Create a team with ``user_id`` as its lead. ``write``: ``"members"`` (any member may
        write the team's memory) or ``"leads"``; default ``config.team_write``."""
        return self._by(user_id, lambda ident: access.create_scope(self.config, ident, Scope.TEAM, team_id, write))

    def create_org(self, org_id: str, *, user_id: str) -> Membership:
        """Create an organization with ``user_id`` as its admin; only org admins write org memory."""
        return self._by(user_id, lambda ident: access.create_scope(self.config, ident, Scope.ORG, org_id))

    def add_member(self, scope: str, scope_id: str, member: str, role: str, *, user_id: str) -> Membership:
        """Give ``member`` a ``role`` in a project (owner, admin, editor, viewer), team (lead,
        member) or org (admin, member), or change it. Project admins manage editors and viewers;
        owners, team leads and org admins manage everyone. The last owner/lead/admin stays."""
        return self._by(user_id, access.add_member, scope, scope_id, member, role)

    def remove_member(self, scope: str, scope_id: str, member: str, *, user_id: str) -> bool:
        """Take ``member`` out of a project, team or org (or leave it, ``member=user_id``); what
        they wrote stays theirs. Returns whether they were a member."""
        return self._by(user_id, access.remove_member, scope, scope_id, member)

    def list_members(self, scope: str, scope_id: str, *, user_id: str) -> list[Membership]:
        """The members of a project, team or org you belong to, with their roles."""
        return self._by(user_id, access.list_members, scope, scope_id)

    def memberships(self, *, user_id: str, scope: str | None = None, prefix: str | None = None) -> list[Membership]:
        """Your projects, teams and orgs with your role in each; ``prefix`` (``"acme"``) keeps the
        ids equal to it or below it by whole ``/`` segments (``acme/web``, never ``acme-corp``)."""
        return self._by(user_id, access.memberships, scope, prefix)

    def set_team_write(self, team_id: str, write: str, *, user_id: str) -> str:
        """Let every member (``"members"``) or only the leads (``"leads"``) write the team's memory."""
        return self._by(user_id, access.set_team_write, team_id, write)

    def share_project(
        self, project_id: str, *, user_id: str, with_user: str | None = None, with_team: str | None = None,
        with_org: str | None = None,
    ) -> None:
        """Let a user, or every member of a team or org, read the project's ``public`` memories."""
        return self._by(user_id, lambda ident: access.share_project(
            ident, project_id, with_user=with_user, with_team=with_team, with_org=with_org))

    def unshare_project(
        self, project_id: str, *, user_id: str, with_user: str | None = None, with_team: str | None = None,
        with_org: str | None = None,
    ) -> bool:
        """Undo :meth:`share_project`; returns whether it was shared."""
        return self._by(user_id, lambda ident: access.unshare_project(
            ident, project_id, with_user=with_user, with_team=with_team, with_org=with_org))

    # --- learning: resources -> memories -> profiles ----------------------------------------

    def extract_memories(
        self, messages: Any, *, user_id: str, session_id: str, project_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None, llm: Any = SERVICE_LLM, min_new_turns: int = 1,
    ) -> ExtractionReport:
        """Learn from a session's conversation: propose memory items from its new messages, pass
        them through the gate, consolidate each against what is stored (ADD / UPDATE / SUPERSEDE /
        NONE), then rebuild the profiles that changed.

        ``messages`` are LangChain messages, ``{"role", "content"}`` dicts or strings (user turns);
        pass the whole conversation: the session remembers what it read. At most
        ``MEMORY_MAX_EXTRACTIONS`` runs per session per window. ``llm``: the service's model by
        default, another chat model, or ``None`` for the offline rules. A model failure never
        raises: the report says ``failed`` and the messages wait for the next run.
        ``min_new_turns``: do nothing (status ``waiting``) until that many user turns are new.
        """
        model = self._model(llm)
        return self._as((user_id, project_id, session_id, team_id, org_id), lambda ident: extract_memories(
            self.config, ident, messages, model=model, profile_model=model, min_new_turns=min_new_turns))

    def add_resource(
        self, content: str, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
        kind: str = "document", scope: str = "user", title: str | None = None, external_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Resource:
        """Record a document (``kind="document"``) or project resource: the raw material memories
        can cite as their source (``source_id=str(resource.id)``). With ``external_id`` a second
        call replaces the content of the same resource."""
        return self._as((user_id, project_id, session_id, team_id, org_id), lambda ident: resources.add_resource(
            self.config, ident, content, kind=kind, scope=scope, title=title, external_id=external_id,
            metadata=metadata))

    def get_resource(
        self, resource_id: Any, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> Resource:
        """One resource you may read (yours, or your project's)."""
        return self._as((user_id, project_id, session_id, team_id, org_id), resources.get_resource, resource_id)

    def list_resources(
        self, *, user_id: str, project_id: str | None = None, session_id: str | None = None, team_id: str | None = None,
        org_id: str | None = None, kind: str | None = None,
        limit: int = 50, offset: int = 0,
    ) -> list[Resource]:
        """Your resources (conversations of all your sessions, documents) and your project's."""
        return self._as((user_id, project_id, session_id, team_id, org_id), lambda ident: resources.list_resources(
            ident, kind=kind, limit=limit, offset=offset))

    def get_memory_source(
        self, memory_id: Any, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> Resource | None:
        """Where a memory came from: the conversation, document or project resource it was made
        from, or None when it was stated directly without a session."""
        return self._as((user_id, project_id, session_id, team_id, org_id), resources.source_of, memory_id)

    def get_profile_for_agent(
        self, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> profiles.AgentProfiles:
        """The user profile and (with ``project_id``) the project profile, as the agent should see
        them now; ``.user_text`` / ``.project_text`` are the prompt sections. A profile whose
        memories changed is rebuilt first, by rules (milliseconds); with a model, the refresh after
        the agent's run (or :meth:`refresh_profiles`) then rebuilds it with the model."""
        return self._as((user_id, project_id, session_id, team_id, org_id), profiles.get_profiles)

    def get_profile(
        self, kind: str = "user", *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> profiles.Profile:
        """One profile as stored (``kind`` ``"user"`` or ``"project"``), without rebuilding it."""
        return self._as((user_id, project_id, session_id, team_id, org_id), profiles.get_profile, kind)

    def update_profile(
        self, fields: Mapping[str, Any], *, kind: str = "user", user_id: str, project_id: str | None = None,
        session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> profiles.Profile:
        """Set profile fields by hand. A field set here wins over what extraction builds, until
        :meth:`reset_profile_fields`; ``None`` or ``[]`` clears it."""
        return self._as((user_id, project_id, session_id, team_id, org_id), profiles.update_profile, kind, fields)

    def reset_profile_fields(
        self, names: Iterable[str] | None = None, *, kind: str = "user", user_id: str, project_id: str | None = None,
        session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> profiles.Profile:
        """Forget hand-set profile values (all, or the fields named) so built values show again."""
        return self._as((user_id, project_id, session_id, team_id, org_id), lambda ident: profiles.reset_profile_fields(
            ident, kind, names if names is None or isinstance(names, str) else check_list("names", names)))

    def refresh_profiles(
        self, *, user_id: str, project_id: str | None = None, session_id: str | None = None, team_id: str | None = None,
        org_id: str | None = None, force: bool = False,
        llm: Any = SERVICE_LLM,
    ) -> list[str]:
        """Rebuild the stale profiles (all with ``force``) with the model, or by rules without one;
        returns the kinds rebuilt."""
        model = self._model(llm)
        return self._as((user_id, project_id, session_id, team_id, org_id), lambda ident: profiles.refresh_profiles(
            ident, model=model, force=check_bool("force", force)))

    # --- reading ---------------------------------------------------------------------------

    def search_memories(
        self, query: str, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
        k: int = 5, memory_type: Any = None, scope: Any = None, status: Any = ops.DEFAULT_STATUS,
        min_relevance: float | None = None, as_of: Any = None,
    ) -> list[SearchResult]:
        """The ``k`` best of the caller's memories for ``query`` across their session, project
        and user scopes (or those in ``scope``), best first with their scores.

        Filters take one value or a list: ``memory_type``, ``scope``, ``status``
        (active only by default; add ``"superseded"`` to see what was replaced).
        ``min_relevance`` (default ``config.min_relevance``) drops weak matches, so
        fewer than ``k`` may come back. ``as_of`` (a datetime or ISO-8601 string)
        searches what held at that time, each memory in the wording it had then.
        Hits get ``last_used_at``/``access_count`` updated (not for ``as_of``).
        """
        return self._as((user_id, project_id, session_id, team_id, org_id), lambda ident: ops.search_memories(
            self.config, ident, query, k=k, memory_type=memory_type, scope=scope, status=status,
            min_relevance=min_relevance, as_of=as_of))

    def search_with_conflicts(
        self, query: str, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None, k: int = 5, memory_type: Any = None,
        scope: Any = None, min_relevance: float | None = None,
    ) -> tuple[list[SearchResult], list[Conflict]]:
        """:meth:`search_memories`, plus the conflicts between levels among and around the results:
        memories of different levels (org, team, user, ...) on the same subject that say different
        things, each group ordered by precedence (the first applies). This is what the middleware
        injects, so a team rule and a user preference that disagree are shown together."""
        return self._as((user_id, project_id, session_id, team_id, org_id), lambda ident: ops.search_with_conflicts(
            self.config, ident, query, k=k, memory_type=memory_type, scope=scope, min_relevance=min_relevance))

    def memory_history(
        self, memory_id: Any, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> list[MemoryVersion]:
        """A memory's story, oldest first: its earlier wordings (UPDATEs, edits) and the items it
        replaced or that replaced it (SUPERSEDE), e.g. "Uses Vim." then "Switched to VS Code."."""
        return self._as((user_id, project_id, session_id, team_id, org_id), ops.memory_history, memory_id)

    def check_duplicate(
        self, content: str, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
        scope: str = "user",
    ) -> MemoryItem | None:
        """The active memory in ``scope`` that ``content`` would duplicate (cosine >= the threshold), if any."""
        return self._as((user_id, project_id, session_id, team_id, org_id), lambda ident: ops.check_duplicate(
            self.config, ident, content, scope))

    def get_memory(
        self, memory_id: Any, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> MemoryItem:
        """One memory the caller may see, in any status; :class:`MemoryNotFoundError` otherwise."""
        return self._as((user_id, project_id, session_id, team_id, org_id), ops.get_memory, memory_id)

    def list_memories(
        self, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
        memory_type: Any = None, scope: Any = None, status: Any = ops.DEFAULT_STATUS, limit: int = 50,
        offset: int = 0, as_of: Any = None,
    ) -> list[MemoryItem]:
        """The caller's memories, most recently updated first (``as_of``: those that held then)."""
        return self._as((user_id, project_id, session_id, team_id, org_id), lambda ident: ops.list_memories(
            self.config, ident, memory_type=memory_type, scope=scope, status=status, limit=limit, offset=offset,
            as_of=as_of))

    def stats(
        self, *, user_id: str, project_id: str | None = None, session_id: str | None = None,
        team_id: str | None = None, org_id: str | None = None,
    ) -> MemoryStats:
        """Counts by type, scope and status, last write, extraction budget left and storage
        size, over what the caller may see."""
        return self._as((user_id, project_id, session_id, team_id, org_id),
                        lambda ident: ops.stats(self.config, ident))

    def extraction_budget(
        self, *, user_id: str, session_id: str | None = None, team_id: str | None = None,
        org_id: str | None = None, project_id: str | None = None,
    ) -> int | None:
        """Extraction runs left in the session's window (None without a session)."""
        return self._as((user_id, project_id, session_id, team_id, org_id),
                        lambda ident: ops.extraction_budget(self.config, ident))

    # --- data rights: export, import, forget ------------------------------------------------

    def export_data(self, *, user_id: str, what: str = "visible") -> dict[str, Any]:
        """The user's memory as plain JSON values (``json.dumps`` it), for a copy they take with
        them or a move to another database (:meth:`import_data`). ``what="visible"``: everything
        they may read in all their sessions, projects, teams and orgs, with the memberships and
        shares that let them read it; ``"owned"``: everything they created. No vectors: the
        importing side embeds again."""
        return self._by(user_id, rights.export_data, what)

    def import_data(self, data: Mapping[str, Any]) -> rights.ImportReport:
        """Write an :meth:`export_data` dict into this database (an operator's action: no user
        identity), keeping ids, timestamps, status and history; with the same embedding model,
        searches answer as before. Malformed input raises before anything is written; rows
        already present are skipped, so importing twice is harmless. Every row passes the gate:
        refused ones (a secret, a memory too long) are listed in the report's ``rejected``."""
        return self._execute(rights.import_data(data, self.config))

    def forget_user(self, user_id: str) -> rights.ForgetReport:
        """Erase a user for good (a deletion request): everything they own, episodic memory
        included, in one transaction; others' memories stay. The report counts what went and
        names the scopes left ``ownerless``, which an operator should give an owner. Idempotent."""
        return self._execute(rights.forget_user(user_id))

    def delete_scope(self, scope: str, scope_id: str, *, user_id: str) -> rights.DeleteReport:
        """Delete a project (by its owner), team (a lead) or org (an admin) with every memory,
        resource, profile, membership and share in it, when it is finished with. A scope that
        does not exist answers zeros, so a retry is safe."""
        return self._by(user_id, rights.delete_scope, scope, scope_id)

    # --- pure helpers (no I/O, never awaited) ------------------------------------------------

    def validate_memory(self, content: Any, *, confidence: Any = 1.0, memory_type: Any = "fact",
                        scope: Any = "user") -> Rejection | None:
        """The gate's verdict on a proposed memory, without saving it: ``None`` means it would pass
        (a duplicate is not a rejection; see :meth:`check_duplicate`). Malformed arguments raise."""
        new = ops.make_new_memory(content, confidence=confidence, memory_type=memory_type, scope=scope)
        return check_content(normalize_content(new.content), confidence=new.confidence, config=self.config)

    def format_memories_for_prompt(
        self, memories: Iterable[MemoryItem | SearchResult], *, budget_chars: int | None = None
    ) -> str:
        """The prompt block for ``memories`` within ``budget_chars`` (default ``config.prompt_budget_chars``)."""
        items = check_list("memories", memories)
        for i, m in enumerate(items):
            if not isinstance(m, (MemoryItem, SearchResult)):
                raise InvalidInputError(f"memories[{i}]", f"must be a MemoryItem or SearchResult (from a search or "
                                                          f"list call), got {type(m).__name__}")
        budget = self.config.prompt_budget_chars if budget_chars is None else check_int(
            "budget_chars", budget_chars, 1, 10_000_000)
        return format_memories_for_prompt(items, budget_chars=budget)


def _resolve(config: MemoryConfig | None, embeddings: Embeddings | None) -> tuple[MemoryConfig, Embeddings]:
    config = MemoryConfig.from_env() if config is None else config
    if not isinstance(config, MemoryConfig):
        raise ConfigurationError(f"config must be a MemoryConfig, got {type(config).__name__}")
    if embeddings is None:
        embeddings = resolve_embeddings(config)
    elif not isinstance(embeddings, Embeddings):
        raise ConfigurationError(
            f"embeddings must be a LangChain Embeddings object, got {type(embeddings).__name__}"
        )
    return config, embeddings


class MemoryService(_MemoryAPI):
    """Blocking memory service.

    ``MemoryService()`` uses ``DATABASE_URL`` when set and the embedded
    PostgreSQL otherwise, with the local embedding model. Pass ``conn`` (a DSN,
    a ``psycopg.Connection`` or a ``psycopg_pool.ConnectionPool``), ``config``
    and/or ``embeddings`` (any LangChain ``Embeddings``) to choose, and ``llm`` (any
    LangChain chat model) to extract, consolidate and build profiles with a model
    instead of the offline rules (``MEMORY_LLM`` names one too). The schema
    is migrated on construction. Thread-safe; use as a context manager or call
    :meth:`close` to release a pool it opened.
    """

    def __init__(
        self, conn: str | psycopg.Connection | ConnectionPool | None = None, *,
        config: MemoryConfig | None = None, embeddings: Embeddings | None = None, llm: Any = None,
    ) -> None:
        self.config, self.embeddings = _resolve(config, embeddings)
        self._llm = LlmSlot(llm, self.config)
        self._owned_pool: ConnectionPool | None = None
        if conn is None or isinstance(conn, str):
            dsn = resolve_dsn(conn, self.config)
            conn = self._owned_pool = open_pool(
                dsn, min_size=self.config.pool_min_size, max_size=self.config.pool_max_size,
                restart=embedded_restarter(conn, self.config),  # the embedded server we own comes back
            )
        elif not isinstance(conn, (psycopg.Connection, ConnectionPool)):
            raise ConfigurationError(
                f"conn must be a DSN string, a psycopg Connection or a ConnectionPool, got {type(conn).__name__}"
            )
        self.conn = conn
        self._closed = False
        try:
            self.applied_migrations: list[str] = run(
                migrate(embedding_dimensions(self.embeddings), embedding_model_name(self.embeddings)),
                self.conn, self.embeddings,
            )
        except BaseException:
            self.close()
            raise

    def _execute(self, op: Op[Any]) -> Any:
        if self._closed:
            op.close()
            raise ConfigurationError("this MemoryService is closed; create a new one")
        return run(op, self.conn, self.embeddings)

    def close(self) -> None:
        """Close the pool this service opened (a connection or pool you passed in stays open)."""
        self._closed = True
        if self._owned_pool is not None:
            self._owned_pool.close()
            self._owned_pool = None

    def __enter__(self) -> MemoryService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMemoryService(_MemoryAPI):
    """The asyncio twin of :class:`MemoryService`: same methods, each awaited.

    Accepts a DSN, a ``psycopg.AsyncConnection`` or an ``AsyncConnectionPool``.
    Setup (pool, migrations) happens on first use or on ``await service.setup()``;
    ``async with AsyncMemoryService() as memory:`` does both ends.
    """

    def __init__(
        self, conn: str | psycopg.AsyncConnection | AsyncConnectionPool | None = None, *,
        config: MemoryConfig | None = None, embeddings: Embeddings | None = None, llm: Any = None,
    ) -> None:
        self.config, self.embeddings = _resolve(config, embeddings)
        self._llm = LlmSlot(llm, self.config)
        if conn is not None and not isinstance(conn, (str, psycopg.AsyncConnection, AsyncConnectionPool)):
            raise ConfigurationError(
                "conn must be a DSN string, a psycopg AsyncConnection or an AsyncConnectionPool, "
                f"got {type(conn).__name__}"
            )
        self._given = conn
        self.conn: psycopg.AsyncConnection | AsyncConnectionPool | None = None
        self._owned_pool: AsyncConnectionPool | None = None
        self._setup_lock = threading.Lock()
        self._setup_task: asyncio.Future[None] | None = None
        self._closed = False
        self.applied_migrations: list[str] = []

    async def setup(self) -> None:
        """Open the pool and migrate the schema (idempotent; concurrent callers share one setup)."""
        if self.conn is not None:
            return
        with self._setup_lock:
            if self._setup_task is None:
                self._setup_task = asyncio.ensure_future(self._setup())
            task = self._setup_task
        try:
            await asyncio.shield(task)
        except BaseException:
            with self._setup_lock:
                if self._setup_task is task and task.done():
                    self._setup_task = None
            raise

    async def _setup(self) -> None:
        conn = self._given
        if conn is None or isinstance(conn, str):
            dsn = await asyncio.to_thread(resolve_dsn, conn, self.config)
            conn = self._owned_pool = await aopen_pool(
                dsn, min_size=self.config.pool_min_size, max_size=self.config.pool_max_size,
                restart=embedded_restarter(conn, self.config),
            )
        try:
            self.applied_migrations = await arun(
                migrate(embedding_dimensions(self.embeddings), embedding_model_name(self.embeddings)),
                conn, self.embeddings,
            )
        except BaseException:
            if self._owned_pool is not None:
                await self._owned_pool.close()
                self._owned_pool = None
            raise
        self.conn = conn

    async def _aexecute(self, op: Op[Any]) -> Any:
        if self._closed:
            op.close()
            raise ConfigurationError("this AsyncMemoryService is closed; create a new one")
        try:
            await self.setup()
        except BaseException:
            op.close()
            raise
        return await arun(op, self.conn, self.embeddings)  # type: ignore[arg-type]

    def _execute(self, op: Op[Any]) -> Any:
        return self._aexecute(op)

    async def close(self) -> None:
        self._closed = True
        if self._owned_pool is not None:
            await self._owned_pool.close()
            self._owned_pool = None

    async def __aenter__(self) -> AsyncMemoryService:
        await self.setup()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
