"""What a caller can ask of memory, written once as operations.

Every public method here is a generator function that returns an :data:`~agent_memory.db.requests.Op`:
it validates its arguments when it starts, then yields SQL, embedding and model
requests. Nothing in this module does I/O, so the same source serves three doors:

- :class:`~agent_memory.handles.MemoryHandle` runs each operation with a blocking
  pool, :class:`~agent_memory.handles.AsyncMemoryHandle` awaits it on an asyncio
  pool (both generated from this module by ``tools/codegen.py``, so their
  signatures, return types and docstrings are this module's, and a test fails
  when the generated file is stale);
- the middleware and the tools build the same operations and run them sync or async
  (:class:`~agent_memory.middleware.backend.MemoryBackend`), with typed results;
- tests can drive an operation with scripted answers and no database.

:class:`PrincipalOps` is one principal's memory (identity fixed when it is made: it is
never an argument, so a model or a client cannot choose it); :class:`AdminOps` is what
is not one principal's (projects, teams and orgs, moving and erasing a user's data).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from . import access, documents, ops, resources, rights, transcripts
from .config import MemoryConfig
from .db.requests import Op
from .documents import DocumentReport, PassageHit
from .errors import InvalidInputError
from .extraction.pipeline import ExtractionReport, extract_memories, extract_waiting
from .graph import ops as graph_ops
from .graph import view as graph_view
from .graph.models import ExploreResult, GraphNode, GraphRelation, TraverseResult
from .graph.view import GraphView
from .models import (
    Conflict,
    Identity,
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
from .ops import DEFAULT_STATUS
from .profiles import store as profiles
from .profiles.store import AgentProfiles, Profile
from .reports import AddManyReport, DeleteReport, ForgetReport, ImportReport, MaintenanceReport
from .validation import check_bool, check_identity, check_list

__all__ = ["SERVICE_LLM", "AdminOps", "PrincipalOps", "coerce_new_memory"]

#: "the service's own chat model" where a method also accepts a model (``None``: the offline rules)
SERVICE_LLM: Any = object()


#: what an item of a bulk import may say (a key names one memory to replace: that is :meth:`PrincipalOps.put`)
_BULK_FIELDS = tuple(f for f in NewMemory.__dataclass_fields__ if f != "key") + ("ttl",)


def coerce_new_memory(item: Any, index: int, config: MemoryConfig | None = None) -> NewMemory:
    """One item of a bulk import (a :class:`NewMemory`, a dict with ``content`` or a string), checked
    (its type: built-in, or one of ``config``'s custom types)."""
    if isinstance(item, NewMemory):
        if item.key is not None:
            raise InvalidInputError(f"items[{index}]", "has a key; save keyed memories one by one with put()")
        return ops.make_new_memory(
            item.content, memory_type=item.memory_type, scope=item.scope, confidence=item.confidence,
            source=item.source, source_id=item.source_id, visibility=item.visibility, metadata=item.metadata,
            expires_at=item.expires_at, retention=item.retention, config=config, context=item.context,
            position=item.position,
        )
    if isinstance(item, str):
        return ops.make_new_memory(item)
    if isinstance(item, Mapping):
        fields = dict(item)
        if "content" not in fields:
            raise InvalidInputError(f"items[{index}]", "needs a 'content' key")
        unknown = set(fields) - set(_BULK_FIELDS)
        if unknown:
            raise InvalidInputError(f"items[{index}]", f"has unknown keys {sorted(unknown)}; allowed: "
                                                       f"{', '.join(_BULK_FIELDS)} (keyed memories: put())")
        return ops.make_new_memory(fields.pop("content"), **fields, config=config)
    raise InvalidInputError(f"items[{index}]", f"must be a NewMemory, a dict or a string, got {type(item).__name__}")


ModelChoice = Callable[[Any], Any]


class PrincipalOps:
    """One principal's memory as operations: the caller is ``identity``, fixed when this is made.

    ``config`` is the service's; ``choose_model`` turns a method's ``llm`` argument
    (:data:`SERVICE_LLM`, a chat model or ``None``) into the model to use."""

    __slots__ = ("choose_model", "config", "identity")

    def __init__(self, config: MemoryConfig, identity: Identity, choose_model: ModelChoice) -> None:
        self.config = config
        self.identity = identity
        self.choose_model = choose_model

    # --- writing ---------------------------------------------------------------------------

    def add(
        self, content: str, *, memory_type: str = "fact", scope: str = "user", confidence: float = 1.0,
        source: str = "user", source_id: str | None = None, visibility: str = "members",
        metadata: Mapping[str, Any] | None = None, dedupe: bool = True, ttl: float | timedelta | None = None,
        expires_at: datetime | str | None = None, retention: str = "decay", valid_from: datetime | str | None = None,
        context: str | None = None,
    ) -> Op[MemoryItem | Rejection]:
        """Save one memory through the gate.

        Returns the stored :class:`MemoryItem`; the *existing* item (with ``deduplicated=True``
        and a fresh ``last_used_at``) when an active memory in the same scope says the same
        thing; or a :class:`Rejection` saying why nothing was stored (too short or long, low
        confidence, a secret). ``scope``: ``"user"`` (follows the user everywhere),
        ``"session"``, ``"project"``, ``"team"`` or ``"org"`` (the handle's id for that level
        names where it goes; shared levels need a role that may write). ``memory_type``: a
        built-in type or one of ``MEMORY_CUSTOM_TYPES`` (``config.custom_memory_types``).
        Malformed arguments raise :class:`InvalidInputError`; a role that may not write raises
        :class:`PermissionDeniedError`.

        ``ttl`` (seconds, or a ``timedelta``) or ``expires_at`` (a time) makes it expire: from
        then on no read sees it, and a sweep (:meth:`MemoryService.purge_expired`) deletes it.
        Neither: the configured lifetime of its level or type (``MEMORY_TTL_DAYS``), if any.
        ``retention``: what :meth:`MemoryService.maintain` may do with it: ``"keep"`` (never
        archive), ``"decay"`` (archive once faded and unused, where that is turned on) or
        ``"ephemeral"`` (archive once unused for ``MEMORY_EPHEMERAL_DAYS``).
        ``valid_from`` (a time, not in the future): when the fact began to hold in the world
        (``as_of`` reads by it); default: when it is recorded.
        ``context``: the text around it where it was learned (the recent turns of the conversation
        an agent saved it in): stored with it, secrets withheld, and embedded in the same batch as
        the memory; a search then weighs it too (``MEMORY_CONTEXT_WEIGHT``). None: ranked as before.
        """
        new = ops.make_new_memory(
            content, memory_type=memory_type, scope=scope, confidence=confidence, source=source,
            source_id=source_id, visibility=visibility, metadata=metadata, ttl=ttl, expires_at=expires_at,
            retention=retention, valid_from=valid_from, config=self.config, context=context,
        )
        return (yield from ops.add_memory(self.config, self.identity, new, dedupe=check_bool("dedupe", dedupe)))

    def put(
        self, key: str, content: str, *, scope: str = "user", memory_type: str = "fact", confidence: float = 1.0,
        source: str = "user", visibility: str = "members", metadata: Mapping[str, Any] | None = None,
        ttl: float | timedelta | None = None, expires_at: datetime | str | None = None, retention: str = "decay",
        valid_from: datetime | str | None = None,
    ) -> Op[MemoryItem | Rejection]:
        """Save ``content`` under ``key``, unique in the caller's ``scope`` (a session's keys are its
        user's): the memory that holds the key is revised in place, its earlier wording kept in
        :meth:`history` (and made active again if it was archived), or a new one is written.

        Like LangGraph's ``BaseStore.put``: never deduplicated (the key says which memory it is);
        ``visibility``, ``metadata``, the expiry and ``retention`` are replaced, not merged. Who may replace a
        shared memory: as for :meth:`edit`. The gate applies as for :meth:`add` (a
        :class:`Rejection`, nothing written); a key held by a memory the caller may not see raises
        :class:`PermissionDeniedError`. ``valid_from``: as for :meth:`add` (given, it replaces the
        held memory's too).
        """
        new = ops.make_new_memory(
            content, memory_type=memory_type, scope=scope, confidence=confidence, source=source,
            visibility=visibility, metadata=metadata, key=key, ttl=ttl, expires_at=expires_at, retention=retention,
            valid_from=valid_from, config=self.config,
        )
        return (yield from ops.put_memory(self.config, self.identity, new))

    def add_many(
        self, items: Iterable[NewMemory | Mapping[str, Any] | str], *, dedupe: bool = False,
    ) -> Op[AddManyReport]:
        """Save many memories at once (importers, benchmarks): one batched embedding and one COPY.

        ``items`` are :class:`NewMemory` objects, dicts with ``content`` (and any
        :class:`NewMemory` field) or strings. Each passes the gate's content checks
        (rejections are reported by position, the rest are written); ``dedupe`` also skips
        duplicates of active memories and of earlier items. Malformed items raise
        :class:`InvalidInputError` before anything is written.
        """
        news = [coerce_new_memory(item, i, self.config) for i, item in enumerate(check_list("items", items))]
        return (yield from ops.import_memories(self.config, self.identity, news, dedupe=check_bool("dedupe", dedupe)))

    def add_transcript(
        self, turns: Iterable[Mapping[str, Any] | str], *, conversation: str, start: int | None = None,
        window: int = transcripts.TRANSCRIPT_WINDOW, scope: str = "user", visibility: str = "members",
        metadata: Mapping[str, Any] | None = None, dedupe: bool = False,
    ) -> Op[AddManyReport]:
        """Save a conversation's turns as memories that keep their context: each records the
        conversation (``source_id=conversation``, source ``"conversation"``), its position in it
        (``position``: ``start``, ``start + 1``, ...) and its ``context``, the turn with the
        ``window`` turns before it, whose vector is made in the same batch as the turn's own.

        ``turns``: strings, or mappings with ``content`` and optional ``metadata``. ``start``
        (None): right after the last turn of ``conversation`` already stored in ``scope``, so a
        second call appends, and the stored turns before it are the new turns' context (only
        turns before a turn are its context: appending never changes a stored memory). Each turn
        passes the gate as in :meth:`add_many` (rejections reported by position; a refused turn
        keeps its position and is still its neighbours' context, secrets withheld); ``dedupe``
        as there (off: two turns may say the same thing). Malformed turns raise
        :class:`InvalidInputError` before anything is written.
        """
        return (yield from transcripts.add_transcript(
            self.config, self.identity, turns, conversation=conversation, start=start, window=window, scope=scope,
            visibility=visibility, metadata=metadata, dedupe=dedupe))

    def edit(
        self, memory_id: Any, *, content: str | None = None, memory_type: str | None = None,
        confidence: float | None = None, reason: str | None = None,
    ) -> Op[MemoryItem | Rejection]:
        """Revise an active memory in place; its earlier wording stays in :meth:`history`.

        Who may: the creator of a user or session memory; on a shared level, its creator while
        their role may still write there, and a project's owner or admins, a team's leads and
        an org's admins for any memory of it. New content passes the gate (a
        :class:`Rejection` otherwise); :class:`MemoryNotFoundError` when the caller cannot see
        it, :class:`PermissionDeniedError` when they may see but not edit it."""
        return (yield from ops.edit_memory(
            self.config, self.identity, memory_id, content=content, memory_type=memory_type,
            confidence=confidence, reason=reason))

    def delete(self, memory_id: Any, *, hard: bool = False) -> Op[MemoryItem]:
        """Archive a memory (it never surfaces again and can be :meth:`restore`\\ d), or with
        ``hard=True`` delete it for good; returns the item as it was.

        Who may: as for :meth:`edit` (its creator, or whoever manages its level).

        :class:`MemoryNotFoundError` when the caller cannot see it, :class:`PermissionDeniedError`
        when they may see but not delete it, :class:`InvalidInputError` for an id that is not a UUID.
        """
        return (yield from ops.delete_memory(self.identity, memory_id, hard=check_bool("hard", hard)))

    def restore(self, memory_id: Any) -> Op[MemoryItem]:
        """Make an archived memory active again (who may: as for :meth:`edit`).

        :class:`MemoryNotFoundError` / :class:`PermissionDeniedError` as for :meth:`delete`;
        :class:`InvalidInputError` when it is not archived.
        """
        return (yield from ops.restore_memory(self.identity, memory_id))

    def purge_archived(self) -> Op[int]:
        """Permanently delete every archived memory the caller created; returns how many.

        Cannot be undone. Raises only for the database (:class:`DatabaseUnavailableError`).
        """
        return (yield from ops.purge_archived(self.identity))

    # --- learning: resources -> memories -> profiles ----------------------------------------

    def extract(self, messages: Any, *, llm: Any = SERVICE_LLM, min_new_turns: int = 1,
                keep_last_run: bool = False) -> Op[ExtractionReport]:
        """Learn from the session's conversation (the handle needs a ``session_id``).

        Proposes memory items from its messages not read yet (those that waited first), passes
        them through the gate, consolidates each against what is stored (ADD / UPDATE /
        SUPERSEDE / NONE), then rebuilds the profiles that changed. ``messages`` are LangChain
        messages, ``{"role", "content"}`` dicts or strings (user turns); pass the whole
        conversation: the session remembers what it read. At most ``MEMORY_MAX_EXTRACTIONS`` runs
        per session per window; beyond it the report says ``rate_limited`` and the messages are
        kept on the session's conversation for the next run the limit allows (never dropped).
        ``llm``: the service's model by default, another chat model, or ``None`` for the offline
        rules. A model failure never raises: the report says ``failed`` and the messages wait for
        the next run. ``min_new_turns``: keep them (status ``waiting``) until that many user turns
        wait. ``keep_last_run``: do not spend the window's last run here; keep it for
        :meth:`extract_waiting` at the end of the conversation (what the agent middleware does).
        """
        keep_last_run = check_bool("keep_last_run", keep_last_run)
        model = self.choose_model(llm)
        return (yield from extract_memories(
            self.config, self.identity, messages, model=model, profile_model=model, min_new_turns=min_new_turns,
            keep_last_run=keep_last_run))

    def extract_waiting(self, *, llm: Any = SERVICE_LLM, idle_seconds: float = 0.0) -> Op[list[ExtractionReport]]:
        """Read the turns waiting on the caller's session conversations (kept by :meth:`extract`
        for a later run), each session with its own budget; one report per session read.
        ``idle_seconds``: only conversations with no new turn for that long (0: all). The agent
        middleware calls it when a thread goes idle, is resumed, or the user's next session
        starts; call it yourself from a scheduler if your agent runs elsewhere. Only the caller's
        own conversations are read.
        """
        model = self.choose_model(llm)
        return (yield from extract_waiting(self.config, self.identity, model=model, profile_model=model,
                                           idle_seconds=idle_seconds))

    def record_extraction_run(self) -> Op[int | Rejection]:
        """Count one automatic extraction run against the session's budget
        (``MEMORY_MAX_EXTRACTIONS`` per ``MEMORY_EXTRACTION_WINDOW_HOURS``): the runs left, or a
        ``RATE_LIMITED`` :class:`Rejection`.

        Needs a ``session_id`` on the handle (:class:`InvalidInputError` otherwise).
        """
        return (yield from ops.record_extraction_run(self.config, self.identity))

    def add_resource(
        self, content: str, *, kind: str = "document", scope: str = "user", title: str | None = None,
        external_id: str | None = None, metadata: Mapping[str, Any] | None = None,
    ) -> Op[Resource]:
        """Record a document (``kind="document"``) or project resource: the raw material memories
        can cite as their source (``source_id=str(resource.id)``). With ``external_id`` a second
        call replaces the content of the same resource.

        This only records it: nothing is learned and it is not searchable by passage. To do both,
        use :meth:`add_document` (a later ``add_resource`` of a learned document's ``external_id``
        replaces its text but leaves its passages and memories until the next :meth:`add_document`).

        A secret in ``external_id``, ``title`` or ``metadata``, an empty or oversized text, a
        conversation ``kind`` or a scope without its id raise :class:`InvalidInputError`; a project
        role that may not write raises :class:`PermissionDeniedError`. To learn from the text as well,
        use :meth:`add_document`.
        """
        return (yield from resources.add_resource(
            self.config, self.identity, content, kind=kind, scope=scope, title=title, external_id=external_id,
            metadata=metadata))

    def add_document(
        self, content: str, *, title: str | None = None, external_id: str | None = None, scope: str = "user",
        kind: str = "document", metadata: Mapping[str, Any] | None = None, llm: Any = SERVICE_LLM,
    ) -> Op[DocumentReport]:
        """Learn from a document (text or markdown, up to ``MAX_RESOURCE_CHARS``): record it as a
        resource (as :meth:`add_resource`), cut it into passages (markdown headings give each its
        section; code blocks are kept whole where they fit), embed them in one batch so
        :meth:`search_documents` finds them, then turn what the passages state into memories
        through the gate and consolidation, as :meth:`extract` does for a conversation.

        Each memory is filed where the document is (``scope``: ``"user"``, ``"session"`` or
        ``"project"``), with ``source`` ``"knowledge_base"`` (``"project_resource"`` for that
        ``kind``), ``source_id=str(report.resource.id)`` and ``metadata["passage"]`` (its index,
        character range in the resource's ``content``, headings and hash). Again with the same
        ``external_id``: unchanged passages are kept and not read again, new ones are read, and
        memories whose passage is gone are superseded. Secrets in the text are withheld
        (``[withheld: <kind>]``) before anything is stored or read; a secret in ``external_id``
        or ``metadata`` raises :class:`InvalidInputError`, as do a conversation ``kind``, an
        empty or oversized text and a scope without its id. A role that may not write the scope
        raises :class:`PermissionDeniedError`.

        ``llm``: the service's model by default (one call per ~12,000 characters of new text),
        another chat model, or ``None`` for the offline rules (which catch explicit statements:
        "We use ...", "We decided ...", "I prefer ..."). A model failure does not raise: the
        report says ``failed``, the passages are stored and searchable, and the next
        ``add_document`` of the same ``external_id`` reads them. Not rate-limited per session:
        it is an explicit call. Returns a :class:`~agent_memory.documents.DocumentReport`
        (passages added / kept / removed, memories added / updated / superseded / rejected)."""
        model = self.choose_model(llm)
        return (yield from documents.add_document(
            self.config, self.identity, content, model=model, profile_model=model, kind=kind, scope=scope,
            title=title, external_id=external_id, metadata=metadata))

    def search_documents(
        self, query: str, *, k: int = 5, kind: str | None = None,
    ) -> Op[builtins.list[PassageHit]]:
        """The ``k`` passages of documents added with :meth:`add_document` that best match
        ``query``, best first: each with its document (id, kind, title, external id), its place
        (index, character range, headings), its text and score. Only documents the caller may
        read are searched (as :meth:`get_resource` decides: their own user and session documents,
        and their project's); the search is exact and hybrid (meaning and the query's words).
        ``kind``: ``"document"`` or ``"project_resource"`` only. A bad ``query``, ``k`` (1 to
        100) or ``kind`` raises :class:`InvalidInputError`."""
        return (yield from documents.search_documents(self.config, self.identity, query, k=k, kind=kind))

    def get_resource(self, resource_id: Any) -> Op[Resource]:
        """One resource the caller may read (theirs, or their project's); :class:`MemoryNotFoundError` otherwise."""
        return (yield from resources.get_resource(self.identity, resource_id))

    def list_resources(self, *, kind: str | None = None, limit: int = 50, offset: int = 0) -> Op[builtins.list[Resource]]:
        """The caller's resources (conversations of all their sessions, documents) and their project's.

        A bad ``kind``, ``limit`` or ``offset`` raises :class:`InvalidInputError`.
        """
        return (yield from resources.list_resources(self.identity, kind=kind, limit=limit, offset=offset))

    def source(self, memory_id: Any) -> Op[Resource | None]:
        """Where a memory came from: the conversation, document or project resource it was made
        from, or ``None`` when it was stated directly without a session.

        :class:`MemoryNotFoundError` when the caller cannot see the memory.
        """
        return (yield from resources.source_of(self.identity, memory_id))

    def profiles(self) -> Op[AgentProfiles]:
        """The user profile and (with a ``project_id``) the project profile, as the agent should
        see them now; ``.user_text`` / ``.project_text`` are the prompt sections. A profile whose
        memories changed is rebuilt first, by rules (milliseconds); with a model, the refresh
        after the agent's run (or :meth:`refresh_profiles`) then rebuilds it with the model.

        Example: ``system_prompt += memory.for_user("alice", project_id="web").profiles().user_text``.
        Raises only for the database (:class:`DatabaseUnavailableError`).
        """
        return (yield from profiles.get_profiles(self.identity))

    def profile(self, kind: str = "user") -> Op[Profile]:
        """One profile as stored (``kind`` ``"user"`` or ``"project"``), without rebuilding it.

        A ``kind`` other than ``"user"`` or ``"project"`` (or ``"project"`` on a handle without a
        ``project_id``) raises :class:`InvalidInputError`.
        """
        return (yield from profiles.get_profile(self.identity, kind))

    def update_profile(self, fields: Mapping[str, Any], *, kind: str = "user") -> Op[Profile]:
        """Set profile fields by hand. A field set here wins over what extraction builds, until
        :meth:`reset_profile_fields`; ``None`` or ``[]`` clears it.

        Example: ``handle.update_profile({"username": "Ally", "communication_style": "concise"})``.
        An unknown field or a value of the wrong shape raises :class:`InvalidInputError` naming the
        field and what it takes; a project profile needs a role that may write the project
        (:class:`PermissionDeniedError`).
        """
        return (yield from profiles.update_profile(self.identity, kind, fields))

    def reset_profile_fields(self, names: Iterable[str] | None = None, *, kind: str = "user") -> Op[Profile]:
        """Forget hand-set profile values (all, or the fields named) so built values show again.

        An unknown field name raises :class:`InvalidInputError`.
        """
        names = names if names is None or isinstance(names, str) else check_list("names", names)
        return (yield from profiles.reset_profile_fields(self.identity, kind, names))

    def refresh_profiles(self, *, force: bool = False, llm: Any = SERVICE_LLM) -> Op[builtins.list[str]]:
        """Rebuild the stale profiles (all with ``force``) with the model, or by rules without
        one; returns the kinds rebuilt.

        A model failure falls back to the rules (it never raises); a non-bool ``force`` raises
        :class:`InvalidInputError`.
        """
        model = self.choose_model(llm)
        return (yield from profiles.refresh_profiles(self.identity, model=model, force=check_bool("force", force)))

    # --- reading ---------------------------------------------------------------------------

    def search(
        self, query: str, *, k: int = 5, memory_type: Any = None, scope: Any = None, status: Any = DEFAULT_STATUS,
        min_relevance: float | None = None, as_of: Any = None, known_at: Any = None,
        filter: Mapping[str, Any] | None = None, created_after: Any = None, created_before: Any = None,
        updated_after: Any = None, updated_before: Any = None, source: Any = None, source_id: Any = None,
        subtree: bool = False,
    ) -> Op[builtins.list[SearchResult]]:
        """The ``k`` best of the caller's memories for ``query`` across every level they may
        read (session, user, project, teams, orgs), or those in ``scope``, best first with
        their scores.

        Filters take one value or a list: ``memory_type``, ``scope``, ``status`` (active only
        by default; add ``"superseded"`` to see what was replaced). ``min_relevance`` (default
        ``config.min_relevance``) drops weak matches, so fewer than ``k`` may come back.
        ``as_of`` (a datetime or ISO-8601 string) searches what held at that time, each memory
        in the wording it had then. Hits get ``last_used_at``/``access_count`` updated (not
        for ``as_of``). ``as_of`` is world time (what held then, as known now: a move said
        today to have happened last month held last week); ``known_at`` is record time (what
        the memory held then: last week it knew the old city).

        Narrowing, exact (the top ``k`` of the same ranking among the memories that pass):
        ``filter`` on ``metadata`` (``{"tag": "billing"}``, ``{"priority": {"$gte": 2}}``,
        ``{"due": {"$lt": "2026-12-01"}}``, ``$in``/``$nin``/``$ne``/``$contains``/``$exists``,
        ``$or``/``$and``/``$not``; see :mod:`agent_memory.filters`), ``created_after`` /
        ``created_before`` / ``updated_after`` / ``updated_before`` (a datetime or ISO string;
        after is inclusive, before exclusive), ``source`` (``"user"``, ``"ai"``, ``"document"``...
        or a list) and ``source_id`` (a resource id or a list: the memories learned from it).

        ``subtree=True`` reads the project, team and org levels down their ``/`` paths: with
        ``project_id="co/eng"``, memories of ``co/eng/web`` and ``co/eng/web/api`` too, each only
        if the caller may read that scope (member, or its public memories when shared with them),
        whole segments only (never ``co/engine``). Nearer scopes rank first among equals
        (:data:`agent_memory.ranking.SUBTREE_STEP`). Malformed narrowing raises
        :class:`InvalidInputError` saying what to write instead.
        """
        return (yield from ops.search_memories(
            self.config, self.identity, query, k=k, memory_type=memory_type, scope=scope, status=status,
            min_relevance=min_relevance, as_of=as_of, known_at=known_at, filter=filter,
            created_after=created_after, created_before=created_before, updated_after=updated_after,
            updated_before=updated_before, source=source, source_id=source_id, subtree=subtree))

    def search_with_conflicts(
        self, query: str, *, k: int = 5, memory_type: Any = None, scope: Any = None,
        min_relevance: float | None = None, filter: Mapping[str, Any] | None = None, subtree: bool = False,
    ) -> Op[tuple[builtins.list[SearchResult], builtins.list[Conflict]]]:
        """:meth:`search`, plus the conflicts between levels among and around the results:
        memories of different levels (org, team, user, ...) on the same subject that say
        different things, each group ordered by precedence (the first applies). This is what
        the middleware injects, so a team rule and a user preference that disagree are shown
        together. ``filter`` and ``subtree``: as for :meth:`search`.

        Raises as :meth:`search` does.
        """
        return (yield from ops.search_with_conflicts(
            self.config, self.identity, query, k=k, memory_type=memory_type, scope=scope,
            min_relevance=min_relevance, filter=filter, subtree=subtree))

    def get(self, memory_id: Any) -> Op[MemoryItem]:
        """One memory the caller may see, in any status; :class:`MemoryNotFoundError` otherwise."""
        return (yield from ops.get_memory(self.identity, memory_id))

    def get_by_key(self, key: str, *, scope: str = "user") -> Op[MemoryItem]:
        """The active memory saved under ``key`` (:meth:`put`) in the caller's ``scope``: one index
        lookup. :class:`MemoryNotFoundError` when there is none, it expired, or the caller may not see it."""
        return (yield from ops.get_by_key(self.identity, key, scope))

    def list(
        self, *, memory_type: Any = None, scope: Any = None, status: Any = DEFAULT_STATUS, limit: int = 50,
        offset: int = 0, as_of: Any = None, known_at: Any = None, filter: Mapping[str, Any] | None = None,
        created_after: Any = None, created_before: Any = None, updated_after: Any = None,
        updated_before: Any = None, source: Any = None, source_id: Any = None, subtree: bool = False,
    ) -> Op[builtins.list[MemoryItem]]:
        """The caller's memories, most recently updated first (``as_of``: those that held in the
        world then; ``known_at``: those the memory held then; ``filter``, the time bounds,
        ``source``, ``source_id`` and ``subtree``: as for :meth:`search`).

        Example: ``handle.list(memory_type="decision", scope="project", filter={"tags": {"$contains": "infra"}})``.
        Malformed arguments (an unknown type or status, ``limit`` outside 1..10000, a bad filter or
        time) raise :class:`InvalidInputError` saying what to pass instead.
        """
        return (yield from ops.list_memories(
            self.config, self.identity, memory_type=memory_type, scope=scope, status=status, limit=limit,
            offset=offset, as_of=as_of, known_at=known_at, filter=filter, created_after=created_after,
            created_before=created_before, updated_after=updated_after, updated_before=updated_before,
            source=source, source_id=source_id, subtree=subtree))

    def history(self, memory_id: Any) -> Op[builtins.list[MemoryVersion]]:
        """A memory's story, oldest first: its earlier wordings (UPDATEs, edits) and the items it
        replaced or that replaced it (SUPERSEDE), e.g. "Uses Vim." then "Switched to VS Code.".

        :class:`MemoryNotFoundError` when the caller cannot see the memory.
        """
        return (yield from ops.memory_history(self.identity, memory_id,
                                              distributed=self.config.distributed is not None))

    def find_duplicate(self, content: str, *, scope: str = "user") -> Op[MemoryItem | None]:
        """The active memory in ``scope`` that ``content`` would duplicate (cosine at or above
        ``config.duplicate_threshold``), if any.

        Malformed ``content`` or ``scope`` (or a scope without its id) raises :class:`InvalidInputError`.
        """
        return (yield from ops.check_duplicate(self.config, self.identity, content, scope))

    def stats(self) -> Op[MemoryStats]:
        """What the caller's memory holds and what it is doing, over what the caller may see:
        counts by type, scope and status, last write, storage size, recalls (total, last use,
        the three memories recalled most and least) and, with a session, the extraction runs
        used and left in the window, the times a run had to wait for the budget, the messages
        waiting to be read, and the memories injected in the session's last turns.

        Raises only for the database (:class:`DatabaseUnavailableError`).
        """
        return (yield from ops.stats(self.config, self.identity))

    def record_injected(self, memory_ids: Sequence[str | UUID]) -> Op[None]:
        """Remember which memories were put in the prompt in this turn of the session (the agent
        middleware calls it after each run; :meth:`stats` shows the last turns'). Without a
        session it does nothing; ids that are not UUIDs raise :class:`InvalidInputError`.
        """
        return (yield from ops.record_injected(self.identity, memory_ids))

    def extraction_budget(self) -> Op[int | None]:
        """Extraction runs left in the session's window (``None`` without a session).

        Raises only for the database (:class:`DatabaseUnavailableError`).
        """
        return (yield from ops.extraction_budget(self.config, self.identity))

    # --- the knowledge graph ---------------------------------------------------------------

    def explore(
        self, queries: Iterable[str] | str | None = None, *, text_matches: Iterable[str] | str | None = None,
        relationship_filters: Mapping[str, Any] | None = None, granularity: int = 1,
        semantic_weight: float = 0.3, time_weight: float = 0.3, salience_weight: float = 0.4,
        return_explanations: bool = False,
    ) -> Op[ExploreResult]:
        """Everything around a topic in the caller's knowledge graph: the people, concepts and
        entities whose notes are near ``queries`` (up to 5) or whose names match ``text_matches``,
        the relations touching them and the memories that mention them or answer the queries.

        Each hit is scored ``semantic_weight * max(similarity, text match) + time_weight *
        recency + salience_weight * salience`` (recency halves in about 35 days).
        ``relationship_filters`` (``min_attitude``, ``max_attitude``, ``min_proximity``,
        ``max_proximity``, ``relationship_types``, ``exclude_relationship_types``) removes
        relations before scoring. ``granularity`` (the design's): 1 returns the memories in full,
        with the best 3 storylines and 2 macros as names; 2 the best 5 storylines in full (their
        summary, anchor and newest memories as previews) and 2 macros as names; 3 the best 5
        macros in full (with their storylines), no memories. Storylines and macros are built by
        ``maintain()``. ``return_explanations`` adds each score's parts. Returned nodes,
        storylines and macros count as recalled.
        Malformed arguments raise :class:`InvalidInputError`.
        """
        return (yield from graph_ops.explore(
            self.config, self.identity, queries=queries, text_matches=text_matches,
            relationship_filters=relationship_filters, granularity=granularity, semantic_weight=semantic_weight,
            time_weight=time_weight, salience_weight=salience_weight,
            return_explanations=check_bool("return_explanations", return_explanations)))

    def traverse(
        self, *, mode: str = "ppr", seed_nodes: Iterable[str] = (), max_depth: int = 3, damping: float = 0.85,
        top_k: int = 20, relation_kinds: Iterable[str] | None = None,
        relationship_types: Iterable[str] | None = None, direction: str = "both",
        min_attitude: int | None = None, max_attitude: int | None = None, min_proximity: int | None = None,
        max_proximity: int | None = None, valid_at: datetime | str | None = None,
        since: datetime | str | None = None, until: datetime | str | None = None,
    ) -> Op[TraverseResult]:
        """Walk the caller's knowledge graph from ``seed_nodes`` (node ids from :meth:`explore`,
        or names).

        ``mode="ppr"``: personalised PageRank (restart probability ``1 - damping``) over
        relations and co-mentions, at most ``max_depth`` hops out; the ``top_k`` nodes it
        reaches, best first, with the relations among them. ``mode="pattern"``: the relations
        that match (``relation_kinds``, ``relationship_types``, ``direction`` from/to the seeds,
        attitude and proximity bounds, ``valid_at`` or a ``since``/``until`` window; without a
        time only current ones), with the nodes at their other end. Filters are values, never
        query text. Malformed arguments or an unknown seed raise :class:`InvalidInputError`.
        """
        return (yield from graph_ops.traverse(
            self.identity, mode=mode, seed_nodes=seed_nodes, max_depth=max_depth, damping=damping, top_k=top_k,
            relation_kinds=relation_kinds, relationship_types=relationship_types, direction=direction,
            min_attitude=min_attitude, max_attitude=max_attitude, min_proximity=min_proximity,
            max_proximity=max_proximity, valid_at=valid_at, since=since, until=until))

    def graph_nodes(
        self, *, node_type: str | None = None, name: str | None = None, limit: int = 100,
    ) -> Op[builtins.list[GraphNode]]:
        """The nodes of the caller's knowledge graph, their own node first, then the most
        mentioned; ``node_type`` (``person``, ``concept``, ``entity``) or ``name`` (a name or
        alias) narrows it."""
        return (yield from graph_ops.list_nodes(self.identity, node_type=node_type, name=name, limit=limit))

    def graph_node(self, node: str) -> Op[tuple[GraphNode, builtins.list[GraphRelation]]]:
        """One node of the caller's graph (by id or name) with all its relations, ended ones
        included. An unknown node raises :class:`InvalidInputError`."""
        return (yield from graph_ops.get_node(self.identity, node))

    def graph_view(self, *, around: str | None = None, limit: int = 300) -> Op[GraphView]:
        """The caller's graph to draw (``agent-memory graph show --html``): its ``limit`` most
        mentioned nodes, or ``around`` a node (id or name) that node and those related to it,
        with every relation among them, ended ones included."""
        return (yield from graph_view.view(self.identity, around=around, limit=limit))

    def merge_nodes(self, keep: str, absorb: str) -> Op[GraphNode]:
        """Two nodes of the caller's graph are one: ``absorb`` (id or name) joins ``keep``; its
        names become aliases and its mentions, relations and notes move over. Answers ``keep``."""
        return (yield from graph_ops.merge(self.identity, keep, absorb))

    def split_node(self, node: str, name: str, memory_ids: Iterable[Any]) -> Op[GraphNode]:
        """Part of a node is someone or something else: a new node ``name`` of the same kind
        takes the mentions and notes of ``memory_ids``. Answers the new node."""
        return (yield from graph_ops.split(self.identity, node, name, memory_ids))

    def build_graph(self, *, batch: int = 200, limit: int | None = None, llm: Any = SERVICE_LLM) -> Op[int]:
        """Build the caller's knowledge graph from their memories written before it (oldest
        first, a transaction per ``batch``; a memory already in the graph is skipped, so an
        interrupted run is simply run again). ``llm``: the service's model by default (one call
        per 20 memories, with the rules' reading added; a failure falls back to the rules),
        another chat model, or ``None`` for the offline rules only. Answers how many memories
        were read."""
        return (yield from graph_ops.backfill(self.identity, batch=batch, limit=limit,
                                              model=self.choose_model(llm)))


class AdminOps:
    """What is not one principal's memory, as operations: projects, teams and orgs and their
    members, and a user's data as a whole (export, import, forget, delete a scope).

    ``user_id`` names who acts (their role decides what they may do); :meth:`import_data`
    acts for one user (``user_id``) or, explicitly, as the operator (``as_operator=True``)."""

    __slots__ = ("choose_model", "config")

    def __init__(self, config: MemoryConfig, choose_model: Callable[[Any], Any] | None = None) -> None:
        self.config = config
        # maintain()'s llm argument into a model, as PrincipalOps (None: offline only)
        self.choose_model = choose_model or (lambda llm: None if llm is SERVICE_LLM else llm)

    # --- projects, teams, orgs and their members -------------------------------------------

    def create_project(self, project_id: str, *, user_id: str) -> Op[Membership]:
        """Create a project with ``user_id`` as its owner (idempotent for its owner). Projects
        are also created by their first write unless ``auto_create_projects`` is off.

        Example: ``memory.create_project("acme/web", user_id="alice")``. An id that is not a scope
        path raises :class:`InvalidInputError` (with the ``/`` form to use for ``a:b``); a project that
        exists and is not theirs raises :class:`PermissionDeniedError`.
        """
        return (yield from access.create_scope(self.config, check_identity(user_id), Scope.PROJECT, project_id))

    def create_team(self, team_id: str, *, user_id: str, write: str | None = None) -> Op[Membership]:
        """Create a team with ``user_id`` as its lead. ``write``: ``"members"`` (any member may
        write the team's memory) or ``"leads"``; default ``config.team_write``.

        Malformed ids or ``write`` raise :class:`InvalidInputError`; a team that exists and that
        they do not lead raises :class:`PermissionDeniedError`.
        """
        return (yield from access.create_scope(self.config, check_identity(user_id), Scope.TEAM, team_id, write))

    def create_org(self, org_id: str, *, user_id: str) -> Op[Membership]:
        """Create an organization with ``user_id`` as its admin; only org admins write org memory.

        Malformed ids raise :class:`InvalidInputError`; an org that exists and that they do not
        administer raises :class:`PermissionDeniedError`.
        """
        return (yield from access.create_scope(self.config, check_identity(user_id), Scope.ORG, org_id))

    def add_member(self, scope: str, scope_id: str, member: str, role: str, *, user_id: str) -> Op[Membership]:
        """Give ``member`` a ``role`` in a project (owner, admin, editor, viewer), team (lead,
        member) or org (admin, member), or change it. Project admins manage editors and viewers;
        owners, team leads and org admins manage everyone. The last owner/lead/admin stays.

        Example: ``memory.add_member("project", "acme/web", "bob", "editor", user_id="alice")``.
        A role that does not exist for the level raises :class:`InvalidInputError`; a caller who may
        not manage that role, or a scope that does not exist (create it first), raises
        :class:`PermissionDeniedError`.
        """
        return (yield from access.add_member(check_identity(user_id), scope, scope_id, member, role))

    def remove_member(self, scope: str, scope_id: str, member: str, *, user_id: str) -> Op[bool]:
        """Take ``member`` out of a project, team or org (or leave it, ``member=user_id``); what
        they wrote stays theirs. Returns whether they were a member.

        :class:`PermissionDeniedError` for a caller who may not remove them, or for the last
        owner, lead or admin.
        """
        return (yield from access.remove_member(check_identity(user_id), scope, scope_id, member))

    def list_members(self, scope: str, scope_id: str, *, user_id: str) -> Op[builtins.list[Membership]]:
        """The members of a project, team or org you belong to, with their roles.

        :class:`PermissionDeniedError` for a caller who is not a member.
        """
        return (yield from access.list_members(check_identity(user_id), scope, scope_id))

    def memberships(
        self, *, user_id: str, scope: str | None = None, prefix: str | None = None,
    ) -> Op[builtins.list[Membership]]:
        """Your projects, teams and orgs with your role in each; ``prefix`` (``"acme"``) keeps the
        ids equal to it or below it by whole ``/`` segments (``acme/web``, never ``acme-corp``).

        A malformed ``scope`` or ``prefix`` raises :class:`InvalidInputError`.
        """
        return (yield from access.memberships(check_identity(user_id), scope, prefix))

    def set_team_write(self, team_id: str, write: str, *, user_id: str) -> Op[str]:
        """Let every member (``"members"``) or only the leads (``"leads"``) write the team's memory.

        :class:`PermissionDeniedError` unless the caller leads the team; a ``write`` other than
        ``"members"`` or ``"leads"`` raises :class:`InvalidInputError`.
        """
        return (yield from access.set_team_write(check_identity(user_id), team_id, write))

    def share_project(
        self, project_id: str, *, user_id: str, with_user: str | None = None, with_team: str | None = None,
        with_org: str | None = None,
    ) -> Op[None]:
        """Let a user, or every member of a team or org, read the project's ``public`` memories.

        Exactly one of ``with_user``, ``with_team``, ``with_org`` (:class:`InvalidInputError`
        otherwise); only the project's owner or admins may share it (:class:`PermissionDeniedError`).
        """
        return (yield from access.share_project(
            check_identity(user_id), project_id, with_user=with_user, with_team=with_team, with_org=with_org))

    def unshare_project(
        self, project_id: str, *, user_id: str, with_user: str | None = None, with_team: str | None = None,
        with_org: str | None = None,
    ) -> Op[bool]:
        """Undo :meth:`share_project`; returns whether it was shared.

        Raises as :meth:`share_project` does.
        """
        return (yield from access.unshare_project(
            check_identity(user_id), project_id, with_user=with_user, with_team=with_team, with_org=with_org))

    # --- data rights: export, import, forget ------------------------------------------------

    def export_data(self, *, user_id: str, what: str = "visible") -> Op[dict[str, Any]]:
        """The user's memory as plain JSON values (``json.dumps`` it), for a copy they take with
        them or a move to another database (:meth:`import_data`). ``what="visible"``: everything
        they may read in all their sessions, projects, teams and orgs, with the memberships and
        shares that let them read it; ``"owned"``: everything they created. No vectors: the
        importing side embeds again.

        A ``what`` other than ``"visible"`` or ``"owned"`` raises :class:`InvalidInputError`.
        """
        return (yield from rights.export_data(check_identity(user_id), what))

    def import_data(
        self, data: Mapping[str, Any], *, user_id: str | None = None, as_operator: bool = False,
    ) -> Op[ImportReport]:
        """Write an :meth:`export_data` dict into this database, keeping ids, timestamps, status
        and history; with the same embedding model, searches answer as before. ``user_id``: the
        rows may name that user only (their own export); ``as_operator=True``: the operator's
        import, writing ownership, memberships, shares and profiles of anyone as the file says.
        A file naming anyone else raises :class:`PermissionDeniedError` listing the rows.

        Malformed input (ids, keys and names by the API's rules) raises before anything is
        written; rows already present are skipped, and so is anything that would hang on them
        (versions, passages, members), so importing twice is harmless. Every row passes the
        gate: refused ones (a secret, a memory too long) are listed in the report's ``rejected``."""
        return (yield from rights.import_data(data, self.config, user_id=user_id, as_operator=as_operator))

    def forget_user(self, *, user_id: str) -> Op[ForgetReport]:
        """Erase a user for good (a deletion request): everything they own, episodic memory
        included, in one transaction; others' memories stay. The report counts what went and
        names the scopes left ``ownerless``, which an operator should give an owner. Idempotent.

        Cannot be undone. Example: ``report = memory.forget_user(user_id="alice"); print(report.summary())``.
        """
        return (yield from rights.forget_user(user_id))

    def purge_expired(self) -> Op[int]:
        """Delete every memory whose expiry has passed (from then on no read saw it already), with
        its history; answers how many. Safe to run at any time and from several processes (each
        batch skips rows another is deleting): from cron, or a LangGraph store's TTL sweeper.

        Raises only for the database (:class:`DatabaseUnavailableError`).
        """
        return (yield from ops.purge_expired(distributed=self.config.distributed is not None))

    def maintain(self, *, at: datetime | str | None = None, llm: Any = SERVICE_LLM) -> Op[MaintenanceReport]:
        """Forgetting, run from cron (``agent-memory maintain``): delete what expired, archive
        ``ephemeral`` memories unused for ``MEMORY_EPHEMERAL_DAYS`` and, where
        ``MEMORY_ARCHIVE_BELOW`` is set, ``decay`` memories whose salience (raised by each recall,
        halving every ``stability`` days, fading slower once recalled after longer gaps) fell
        below it and that went unused for ``MEMORY_ARCHIVE_IDLE_DAYS``. Archived memories can be
        restored. Safe to run concurrently. ``at`` (default now) is the time it judges by: a later
        one acts now on what will have faded by then (it is not a dry run).

        The knowledge graph's part: nodes that faded (candidates and active ones of ``decay``
        retention; core ones never) or were ``ephemeral`` and unused 90 days are archived, nodes
        whose notes changed are described again, and storylines (a node mentioned by 5+ memories
        over 3+ days) and macros (2+ storylines over 30+ days) are brought up to date and
        summarised: extractively, or by ``llm`` (the service's model by default; ``None``: offline)."""
        return (yield from ops.maintain(self.config, at=at, model=self.choose_model(llm)))

    def delete_scope(self, scope: str, scope_id: str, *, user_id: str) -> Op[DeleteReport]:
        """Delete a project (by its owner), team (a lead) or org (an admin) with every memory,
        resource, profile, membership and share in it, when it is finished with. A scope that
        does not exist answers zeros, so a retry is safe.

        Cannot be undone. :class:`PermissionDeniedError` for a caller without that role;
        a malformed ``scope`` or id raises :class:`InvalidInputError`.
        """
        return (yield from rights.delete_scope(check_identity(user_id), scope, scope_id))
