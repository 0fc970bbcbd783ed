"""Access control against a reference model: thousands of random operations on shared memory.

A Hypothesis state machine drives a small world per example (four users, two projects, two
teams, one org, two session ids, all with fresh ids) through project/team/org creation,
membership changes, shares, team write policies and memory writes, edits, deletes and restores,
by random actors whether they are allowed or not. :class:`Model` implements the documented
rules on its own, in plain Python (nothing from ``agent_memory.access``). It checks:

- every action the model allows succeeds; a refused one raises ``MemoryNotFoundError`` when
  the memory is not visible to the caller and ``PermissionDeniedError`` when it is visible but
  not theirs to change (or the project/team/org refuses them), and changes nothing: after every
  write, read straight from the tables, the database holds exactly the model's memories,
  scopes, members and shares;
- reads (``list``, ``search``, ``stats``, ``get``, ``find_duplicate``, the middleware's lookup, the knowledge graph's
  ``graph_nodes``, ``explore``, ``graph_view`` and ``traverse``, its storylines too (built by a consolidation rule),
  and dedupe on save, ``memberships``, ``list_members``) return exactly what the model says the
  caller may see; after every step one user (in turn) lists under one identity (in turn), and
  at the end of each example every user reads the whole world under several identities;
- a save is deduplicated only into a memory at least as visible as it would be;
- the past (``list`` and ``search`` with ``known_at``, ``history``): memories are put by key
  again with another visibility (wider or narrower) and edited; each version keeps the
  visibility it had, and a reader gets a memory as it was at an earlier moment only if they
  can read it now and could read that version (the model keeps every version and the step
  it was replaced in; the moments are the database's clock between steps).

The same machine covers who a run is (:mod:`agent_memory.identity`) and who may use a thread:

- a run's identity read from ``config["configurable"]`` and the agent's context: a field both
  name with different values is refused (``IdentityConflictError``) before anything is read;
  otherwise the reads are exactly what the model says the merged identity sees;
- a LangGraph Platform run (``configurable["langgraph_auth_user"]``, sometimes with a project
  claim): a run or context naming another user, or another project than the claim, is refused;
  otherwise the reads are exactly what the authenticated user sees with the run's other ids;
- checkpoint reads and writes (``get_tuple``, ``list``, ``put``) by a user, by a context, by
  both (agreeing or not) or by nobody, on threads owned by a user or by nobody: the first user
  claims a thread, nobody else and no user-less call may read or write it (``require_user``), and
  every checkpoint read back is the one the model says was written there last.

Embeddings are a hash (similarity is not what this tests), on a database of their own. The
module asserts that thousands of operations ran; ``pytest -s`` prints how many of each.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import citus_cluster
import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from langchain_core.embeddings import Embeddings
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.runtime import Runtime

from agent_memory import MemoryConfig, MemoryService
from agent_memory.db import requests
from agent_memory.embeddings import LocalEmbeddings
from agent_memory.episodic import PostgresCheckpointer
from agent_memory.graph.maintenance import maintain_graph
from agent_memory.errors import (
    AgentMemoryError,
    IdentityConflictError,
    InvalidInputError,
    MemoryNotFoundError,
    PermissionDeniedError,
)
from agent_memory.identity import Identity, identity_from
from agent_memory.middleware import MemoryBackend
from agent_memory.middleware.context import ContextBuilder
from agent_memory.store import AgentMemoryStore
from agent_memory.models import MemoryItem, Rejection

pytestmark = pytest.mark.slow

EXAMPLES = 40
STEPS = 100
MIN_STEPS = 2_000  # "thousands of operations": checked after the run
if citus_cluster.citus_url():  # the cluster subset (.ci/run): fewer runs (about 40 s), the same rules
    EXAMPLES, STEPS, MIN_STEPS = 6, 50, 200
MAX_RUNS = 25  # of one rule in one example, see capped()

#: what ran, over the whole module (steps, service calls, outcomes per rule)
STATS: Counter[str] = Counter()


class HashEmbeddings(Embeddings):
    """Deterministic unit vectors from a hash of the text, as long as the local model's."""

    dimensions = LocalEmbeddings.dimensions

    def _vector(self, text: str) -> list[float]:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        v = np.random.default_rng(seed).standard_normal(self.dimensions)
        return (v / np.linalg.norm(v)).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


# --- the reference model ---------------------------------------------------------------------

KINDS = ("project", "team", "org")
ROLES = {"project": ("owner", "admin", "editor", "viewer"), "team": ("lead", "member"), "org": ("admin", "member")}
FOUNDER = {"project": "owner", "team": "lead", "org": "admin"}
VISIBILITIES = ("public", "members", "owner_only")
#: who reads a memory of each visibility, fewest first: each reads what the one before does
WIDTH = {"owner_only": 0, "members": 1, "public": 2}
KEYS = ("plan", "status")  # few, so that puts find memories to replace
IDENTITY_KEYS = ("project_id", "session_id", "team_id", "org_id")
#: what change_memory does (deletes and restores twice as often, so that restores find archived memories)
CHANGES = ("edit", "delete", "delete", "restore", "restore", "delete_hard", "purge")

Error = type[AgentMemoryError] | None  # the error a call must raise, or None: it must succeed
Ident = dict[str, str | None]  # project_id, session_id, team_id, org_id


@dataclass
class Item:
    scope: str
    scope_id: str
    creator: str
    visibility: str
    session: str | None
    content: str
    status: str = "active"
    key: str | None = None
    made: int = 0  # the moment (index) before the step that wrote it
    #: its earlier versions, oldest first: (content, visibility, the moment before the step that replaced it)
    versions: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)

    def revise(self, moment: int, *, content: str, visibility: str | None = None) -> None:
        self.versions.append((self.content, self.visibility, moment))
        self.content = content
        self.visibility = visibility or self.visibility

    def row(self) -> tuple[Any, ...]:
        return (self.scope, self.scope_id, self.creator, self.visibility, self.status, self.content, self.session)


class Model:
    """The documented rules, in plain dicts and sets."""

    def __init__(self, users: list[str], ids: dict[str, list[str]], sessions: list[str]) -> None:
        self.users, self.ids, self.sessions = users, ids, sessions
        self.policy: dict[tuple[str, str], str | None] = {}  # existing scopes -> team write policy
        self.members: dict[tuple[str, str], dict[str, str]] = {}  # scope -> user -> role
        self.shares: set[tuple[str, str, str]] = set()  # (project, "user"/"team"/"org", grantee)
        self.items: dict[uuid.UUID, Item] = {}
        self.gone: list[uuid.UUID] = []  # hard-deleted ids, in order
        self.owner: dict[str, str] = {}  # thread -> the user who claimed it
        self.note: dict[str, str] = {}  # thread -> what its latest checkpoint says

    # threads
    def thread_call(self, thread: str, user: str | None) -> Error:
        """A checkpoint call on ``thread`` by ``user`` (None: names no user): the owner, or anyone
        on a thread nobody owns (a named user then claims it)."""
        owner = self.owner.get(thread)
        if owner is None:
            if user is not None:
                self.owner[thread] = user
            return None
        return None if user == owner else PermissionDeniedError

    # standing
    def exists(self, kind: str, sid: str) -> bool:
        return (kind, sid) in self.policy

    def role(self, user: str, kind: str, sid: str) -> str | None:
        return self.members.get((kind, sid), {}).get(user)

    def last_founder(self, kind: str, sid: str, user: str) -> bool:
        roles = self.members.get((kind, sid), {})
        return roles.get(user) == FOUNDER[kind] and list(roles.values()).count(FOUNDER[kind]) == 1

    def manager(self, kind: str, actor_role: str | None) -> bool:
        return actor_role in {"project": ("owner", "admin"), "team": ("lead",), "org": ("admin",)}[kind]

    def may_manage(self, kind: str, actor_role: str | None, role: str | None) -> bool:
        """Whether a member with ``actor_role`` may grant, change or take away ``role``."""
        if not self.manager(kind, actor_role):
            return False
        return not (kind == "project" and actor_role == "admin" and role in ("owner", "admin"))

    def may_set_role(self, actor: str, kind: str, sid: str, member: str, role: str) -> bool:
        """add_member: managers grant roles they manage, never leaving the scope without a founder."""
        actor_role, current = self.role(actor, kind, sid), self.role(member, kind, sid)
        if not self.exists(kind, sid) or not self.manager(kind, actor_role):
            return False
        if not all(r is None or self.may_manage(kind, actor_role, r) for r in (current, role)):
            return False
        return role == FOUNDER[kind] or not self.last_founder(kind, sid, member)

    def may_remove(self, actor: str, kind: str, sid: str, member: str) -> bool:
        """remove_member: anyone may leave, managers remove roles they manage; the last founder stays.
        (Removing someone who is not a member is allowed and answers False.)"""
        if member != actor:
            if not self.exists(kind, sid) or not self.manager(kind, self.role(actor, kind, sid)):
                return False
            current = self.role(member, kind, sid)
            if current is not None and not self.may_manage(kind, self.role(actor, kind, sid), current):
                return False
        return not self.last_founder(kind, sid, member)

    # reading
    def shared_with(self, user: str, project: str) -> bool:
        return any(p == project and ((gk == "user" and gid == user) or (gk != "user" and self.role(user, gk, gid)))
                   for p, gk, gid in self.shares)

    def visible(self, user: str, ident: Ident, item: Item, subtree: bool = False) -> bool:
        """``subtree``: the shared levels reach every scope below the named one by whole ``/``
        segments, each under its own rule."""
        def named(wanted: str | None) -> bool:
            return wanted is not None and (item.scope_id == wanted or subtree and item.scope_id.startswith(wanted + "/"))

        if item.scope == "user":
            return item.creator == user
        if item.scope == "session":
            return item.creator == user and ident["session_id"] == item.scope_id
        mine = item.visibility != "owner_only" or item.creator == user
        member = self.role(user, item.scope, item.scope_id) is not None
        if item.scope == "project":
            if not named(ident["project_id"]):
                return False
            return (member and mine) or (item.visibility == "public" and self.shared_with(user, item.scope_id))
        level = ident["team_id" if item.scope == "team" else "org_id"]
        return (level is None or named(level)) and member and mine

    def visible_ids(self, user: str, ident: Ident, subtree: bool = False) -> set[uuid.UUID]:
        return {i for i, item in self.items.items() if self.visible(user, ident, item, subtree)}

    def then(self, item: Item, moment: int) -> tuple[str, str] | None:
        """The wording and visibility ``item`` had at ``moment`` (None: it was not written yet)."""
        if item.made >= moment:
            return None
        return next(((c, v) for c, v, replaced in item.versions if replaced >= moment),
                    (item.content, item.visibility))

    def past(self, user: str, ident: Ident, moment: int, *, rules_of_then: bool = True) -> dict[uuid.UUID, str]:
        """What ``user`` reads of the world as it was at ``moment``, each memory in its wording of
        then: a memory they read now, in a version they could read then (without
        ``rules_of_then``: in any version, as reads did before versions kept their visibility)."""
        seen = {}
        for i, item in self.items.items():
            then = self.then(item, moment)
            if then is not None and self.visible(user, ident, item) and (
                    not rules_of_then or self.visible(user, ident, dataclasses.replace(item, visibility=then[1]))):
                seen[i] = then[0]
        return seen

    def history(self, user: str, ident: Ident, item: Item) -> list[str]:
        """The wordings of ``item`` its history shows ``user`` (one they read now): the current
        one, and each earlier one they could read while it held."""
        return [c for c, v, _ in item.versions
                if self.visible(user, ident, dataclasses.replace(item, visibility=v))] + [item.content]

    @staticmethod
    def merges(scope: str, new: str, stored: str) -> bool:
        """A save of visibility ``new`` may be deduplicated into a memory of visibility ``stored``:
        at least as visible (in a user's or session's memory visibility changes no reader)."""
        return scope in ("user", "session") or WIDTH[stored] >= WIDTH[new]

    # writing
    def may_create(self, user: str, kind: str, sid: str) -> bool:
        role = self.role(user, kind, sid)
        if kind == "project":
            return role in ("owner", "admin", "editor")
        if kind == "team":
            return role == "lead" or (role == "member" and self.policy[(kind, sid)] == "members")
        return role == "admin"

    def may_change_own(self, user: str, item: Item) -> bool:
        """Edit, delete or restore a memory ``user`` created."""
        if item.scope in ("user", "session"):
            return True
        return self.may_create(user, item.scope, item.scope_id)

    def may_change(self, user: str, item: Item) -> bool:
        """Edit, delete or restore ``item`` (one ``user`` can read)."""
        if item.creator == user and self.may_change_own(user, item):
            return True
        if item.scope in ("user", "session"):
            return False
        role = self.role(user, item.scope, item.scope_id)
        return role in {"project": ("owner", "admin"), "team": ("lead",), "org": ("admin",)}[item.scope]

    def why_not_change(self, user: str, ident: Ident, memory_id: uuid.UUID) -> Error:
        item = self.items.get(memory_id)
        if item is None or not self.visible(user, ident, item):
            return MemoryNotFoundError
        return None if self.may_change(user, item) else PermissionDeniedError

    def found(self, kind: str, sid: str, founder: str, policy: str | None) -> None:
        self.policy[(kind, sid)] = (policy or "members") if kind == "team" else None
        self.members[(kind, sid)] = {founder: FOUNDER[kind]}


#: everything the world's users and scopes hold, read in one round trip
WORLD_SQL = """
SELECT
  (SELECT coalesce(jsonb_agg(jsonb_build_array(id, scope, scope_id, user_id, visibility, status, content, session_id)),
                   '[]') FROM memory_items WHERE user_id = ANY(%(users)s)),
  (SELECT coalesce(jsonb_agg(jsonb_build_array(kind, scope_id, settings->>'write')), '[]')
   FROM memory_scopes WHERE scope_id = ANY(%(ids)s)),
  (SELECT coalesce(jsonb_agg(jsonb_build_array(kind, scope_id, user_id, role)), '[]')
   FROM memory_members WHERE scope_id = ANY(%(ids)s) OR user_id = ANY(%(users)s)),
  (SELECT coalesce(jsonb_agg(jsonb_build_array(project_id, grantee_kind, grantee_id)), '[]')
   FROM memory_project_shares WHERE project_id = ANY(%(ids)s))
"""


# --- the machine -----------------------------------------------------------------------------


def capped(fn: Callable[..., None]) -> Callable[..., None]:
    """A rule that runs at most ``MAX_RUNS`` times per example. Hypothesis sometimes builds an example
    from one or two rules (its simplest example, and mutations of it), which would spend the run on
    repeats of one call; capped, such an example ends early and a more varied one takes its place."""

    @functools.wraps(fn)
    def counted(self: AccessMachine, *args: Any, **kwargs: Any) -> None:
        self.runs[fn.__name__] += 1
        fn(self, *args, **kwargs)

    return precondition(lambda self: self.runs[fn.__name__] < MAX_RUNS)(counted)


class AccessMachine(RuleBasedStateMachine):
    """Random actors doing random things to one small world; see the module docstring."""

    def __init__(self, service: MemoryService, conn: psycopg.Connection, checkpointer: PostgresCheckpointer) -> None:
        super().__init__()
        self.service, self.conn, self.checkpointer = service, conn, checkpointer
        self.runs: Counter[str] = Counter()  # rule -> times run in this example
        self.written = 0  # contents written in this example

    # helpers

    def _call(self, rule: str, expected: Error, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run one service call that must succeed (``expected`` None) or raise exactly ``expected``."""
        STATS["calls"] += 1
        what = f"{fn.__name__}{args!r} {kwargs!r}"
        try:
            result = fn(*args, **kwargs)
        except AgentMemoryError as exc:
            if expected is None or type(exc) is not expected:
                want = "success" if expected is None else expected.__name__
                raise AssertionError(f"{what}: expected {want}, got {type(exc).__name__}: {exc}") from exc
            STATS[f"{rule}: {expected.__name__}"] += 1
            return None
        if expected is not None:
            raise AssertionError(f"{what}: expected {expected.__name__}, but it succeeded: {result!r}")
        STATS[f"{rule}: ok"] += 1
        return result

    def _user(self, data: st.DataObject, among: Any = ()) -> str:
        """Any user, or more likely one of ``among`` (one draw: Hypothesis caps the data per example,
        and fewer draws per step leave room for more steps)."""
        return data.draw(st.sampled_from([*sorted(set(among)) * 3, *self.users]))

    def _involved(self, item: Item | None) -> list[str]:
        """The users a memory concerns: its creator and the members of its scope."""
        if item is None:
            return []
        return [item.creator, *(self.model.members.get((item.scope, item.scope_id), {}) if item.scope in KINDS
                                else ())]

    def _ident(self, data: st.DataObject) -> Ident:
        """A random identity: ids the user may or may not belong to, or none (one draw)."""
        return dict(zip(IDENTITY_KEYS, data.draw(st.sampled_from(self.identities)), strict=True))

    def _natural_ident(self, item: Item) -> Ident:
        """The identity that names the memory's own scope."""
        ident: Ident = dict.fromkeys(IDENTITY_KEYS)
        if item.scope != "user":
            ident[f"{item.scope}_id"] = item.scope_id
        return ident

    def _content(self, who: str) -> str:
        """New wording, unique in the example (a replay of the example writes the same)."""
        self.written += 1
        return f"Note number {self.written} written by {self.names[who]} with Kim for the shared world"

    def _managers(self, kind: str, sid: str) -> list[str]:
        return [u for u, r in self.model.members.get((kind, sid), {}).items() if self.model.manager(kind, r)]

    def _scope_target(self, data: st.DataObject) -> tuple[str, str]:
        """A project, team or org: mostly one that exists (when one does), else any."""
        existing = sorted(self.model.policy)
        if existing and data.draw(st.integers(0, 3)) > 0:
            return data.draw(st.sampled_from(existing))
        kind = data.draw(st.sampled_from(KINDS))
        return kind, data.draw(st.sampled_from(self.ids[kind]))

    # the database, read directly: it must hold exactly the model

    def _check_database(self) -> None:
        m = self.model
        all_ids = sorted({sid for ids in self.ids.values() for sid in ids})
        row = self.conn.execute(WORLD_SQL, {"users": self.users, "ids": all_ids}).fetchone()
        items = {uuid.UUID(i): tuple(rest) for i, *rest in row[0]}
        scopes = {(k, s): w for k, s, w in row[1]}
        members = {(k, s, u): r for k, s, u, r in row[2]}
        shares = {tuple(share) for share in row[3]}
        assert items == {i: item.row() for i, item in m.items.items()}, "memory rows differ from the model"
        assert scopes == m.policy, "projects/teams/orgs differ from the model"
        assert members == {(k, s, u): r for (k, s), roles in m.members.items() for u, r in roles.items()}, \
            "memberships differ from the model"
        assert shares == m.shares, "project shares differ from the model"

    def _check_list(self, user: str, ident: Ident) -> set[uuid.UUID]:
        """list_memories (every status) returns exactly the memories the model says ``user`` sees, as they are."""
        m = self.model
        expected = m.visible_ids(user, ident)
        STATS["calls"] += 1
        got = {i.id: i for i in self.service.for_user(user, **ident).list(status=None, limit=1000)}
        leaked, missing = set(got) - expected, expected - set(got)
        assert not leaked and not missing, (
            f"list_memories as {user} {ident}: leaked {[m.items.get(i) for i in leaked]}, "
            f"missing {[m.items[i] for i in missing]}")
        for i, item in got.items():
            assert _row(item) == m.items[i].row(), f"{item} differs from the model's {m.items[i]}"
        return expected

    def _check_reads(self, user: str, ident: Ident, *, search: bool = True) -> None:
        """Every read path returns exactly what the model says ``user`` sees."""
        m = self.model
        expected = self._check_list(user, ident)
        STATS["calls"] += 1
        active = {i.id for i in self.service.for_user(user, **ident).list(limit=1000)}
        assert active == {i for i in expected if m.items[i].status == "active"}, f"active list as {user} {ident}"
        if not search:
            return
        STATS["calls"] += 1
        stats = self.service.for_user(user, **ident).stats()
        total = stats.total
        assert total == len(expected), f"stats as {user} {ident} counted {total}, the model {len(expected)}"
        # the most and least recalled are memories the reader sees (active ones)
        named = {r.memory_id for r in (*stats.most_recalled, *stats.least_recalled)}
        seen_active = {i for i in expected if m.items[i].status == "active"}
        assert named <= seen_active, f"stats as {user} {ident} named {[m.items.get(i) for i in named - seen_active]}"
        if seen_active:
            assert stats.least_recalled, f"stats as {user} {ident} named no least recalled of {len(seen_active)}"
        STATS["calls"] += 1
        k = self.service.config.max_k
        hits = {h.item.id for h in self.service.for_user(user, **ident).search("note written for the shared world", k=k, status=None, min_relevance=0.0)}
        assert hits <= expected, f"search as {user} {ident} leaked {[m.items.get(i) for i in hits - expected]}"
        if len(expected) <= k:
            assert hits == expected, f"search as {user} {ident} missed {[m.items[i] for i in expected - hits]}"
        # active memories only: the search indexes, and the copies of every range (vector_cache_rows=1)
        STATS["calls"] += 1
        active = {i for i in expected if m.items[i].status == "active"}
        hits = {h.item.id for h in self.service.for_user(user, **ident).search(
            "note written for the shared world", k=k, min_relevance=0.0)}
        assert hits <= active, f"copied search as {user} {ident} leaked {[m.items.get(i) for i in hits - active]}"
        if len(active) <= k:
            assert hits == active, f"copied search as {user} {ident} missed {[m.items[i] for i in active - hits]}"
        # the specification's search_memories (identity as keywords) is the same read
        STATS["calls"] += 1
        spec = {h.item.id for h in self.service.search_memories(
            "note written for the shared world", user_id=user, k=k, min_relevance=0.0, **ident)}
        assert spec == hits, f"search_memories as {user} {ident} differs from search: {spec ^ hits}"
        # subtree reads: every scope below the named ones, each under its own rule
        below = m.visible_ids(user, ident, subtree=True)
        STATS["calls"] += 2
        listed = {i.id for i in self.service.for_user(user, **ident).list(status=None, limit=1000, subtree=True)}
        assert listed == below, (f"subtree list as {user} {ident}: leaked {[m.items.get(i) for i in listed - below]}, "
                                 f"missing {[m.items[i] for i in below - listed]}")
        deep = {h.item.id for h in self.service.for_user(user, **ident).search(
            "note written for the shared world", k=k, status=None, min_relevance=0.0, subtree=True)}
        assert deep <= below, f"subtree search as {user} {ident} leaked {[m.items.get(i) for i in deep - below]}"
        if len(below) <= k:
            assert deep == below, f"subtree search as {user} {ident} missed {[m.items[i] for i in below - deep]}"
        # the middleware's lookup: a request naming Kim (every note does) is checked against the
        # caller's own memories (a look that counts no recall), then injects only what they may read now
        STATS["calls"] += 1
        built = ContextBuilder(MemoryBackend(self.service), k=min(k, 50), profiles=False).build(
            Identity(user_id=user, **ident), [HumanMessage("Write a note for the shared world with Kim.")])
        assert built is not None
        injected = {uuid.UUID(i) for i in built.memory_ids}
        assert injected <= active, f"injection as {user} {ident} leaked {[m.items.get(i) for i in injected - active]}"
        if active:
            assert built.decision is not None and built.decision.needed and injected, f"no injection as {user} {ident}"
        # the knowledge graph: a user's graph holds only what they wrote ("with Kim" names a person in
        # every note), and explore shows only memories they may read now
        # (not on a Citus cluster, which runs without the graph: docs/how-to/citus.md, "Limits")
        graph = not citus_cluster.citus_url()
        handle = self.service.for_user(user, **ident)
        if graph:
            STATS["calls"] += 2
            assert {n.created_by for n in handle.graph_nodes()} <= {user}, f"graph of {user} holds others' nodes"
            explored = handle.explore(["note written for the shared world"], text_matches=["Kim"])
            shown = {h.memory.id for h in explored.memories}
            assert shown <= active, f"explore as {user} {ident} leaked {[m.items.get(i) for i in shown - active]}"
        # ... and what graph_view draws (agent-memory graph show --html) and traverse walks is theirs only,
        # with the storylines below
        STATS["calls"] += 2 if graph else 0
        drawn = handle.graph_view(limit=50) if graph else None
        if drawn is not None:
            assert {n.created_by for n in drawn.nodes} <= {user}, f"graph_view of {user} draws others' nodes"
            assert {r.recorded_by for r in drawn.relations} <= {user}, f"graph_view of {user} draws others' relations"
        if drawn is not None and any(n.name == "Kim" for n in drawn.nodes):
            walked = handle.traverse(seed_nodes=["Kim"], top_k=50)
            assert {h.node.created_by for h in walked.nodes} <= {user}, f"traverse as {user} walked others' nodes"
        # storylines (built by consolidate_graph): the user's own, showing only memories they may read now
        if graph:
            STATS["calls"] += 1
            arcs = handle.explore(["note written for the shared world"], text_matches=["Kim"], granularity=2)
            previews = {i for story in arcs.storylines for i, _, _ in story.previews}
            assert previews <= active, f"storylines as {user} {ident} leaked {[m.items.get(i) for i in previews - active]}"
            own = {n.id for n in handle.graph_nodes(limit=10_000)}
            assert {s.anchor_id for s in (*arcs.storylines, *arcs.macros)} <= own, f"{user} sees another graph's storyline"
        # LangGraph's store over the same memories: each level's namespace shows exactly that level's
        # (not on a Citus cluster: the store's search has no cluster form yet, docs/how-to/citus.md)
        if citus_cluster.citus_url():
            return
        store = AgentMemoryStore(self.service, caller=Identity(user_id=user, **ident))
        fielded = AgentMemoryStore(self.service, caller=Identity(user_id=user, **ident), index={"fields": ["content"]})
        levels = {"user": ("memories", user), "session": ("sessions", ident["session_id"]),
                  "project": ("projects", ident["project_id"]), "team": ("teams", ident["team_id"]),
                  "org": ("orgs", ident["org_id"])}
        for level, namespace in levels.items():
            if namespace[1] is None:
                continue
            STATS["calls"] += 1
            shown = {uuid.UUID(item.key) for item in store.search(namespace, limit=1000)}
            wanted = {i for i in expected if m.items[i].status == "active" and m.items[i].scope == level
                      and m.items[i].scope_id == namespace[1]}
            assert shown == wanted, (f"store.search({namespace}) as {user} {ident}: leaked "
                                     f"{[m.items.get(i) for i in shown - wanted]}, missing {[m.items[i] for i in wanted - shown]}")
            # ... and a query search of a store with an index config (one vector per field, migration 0025)
            STATS["calls"] += 1
            scored = {uuid.UUID(item.key) for item in fielded.search(namespace, query="note", limit=1000)}
            assert scored == wanted, f"fielded store.search({namespace}, query) as {user} {ident}: {scored ^ wanted}"

    # the world

    @initialize(data=st.data(), collide=st.booleans(), populate=st.sampled_from([True, True, True, False]))
    def make_world(self, data: st.DataObject, collide: bool, populate: bool) -> None:
        """Fresh ids; with ``collide`` a project, a team, an org, a user and a session share names
        (kinds must never mix) and one project id is a path below another (no inheritance); with
        ``populate`` most scopes start out with members and every example with some memories."""
        tag = uuid.uuid4().hex[:8]
        names = ("ana", "ben", "cy", "dee")
        if collide:
            base = [f"w{tag}", f"w{tag}/web", f"w{tag}-corp"]
            self.ids = {"project": base[:2], "team": [base[0], base[2]], "org": [base[1]]}
            self.users = [f"ana-{tag}", f"ben-{tag}", f"cy-{tag}", base[2]]
            self.sessions = [base[0], f"s{tag}"]
        else:
            self.ids = {"project": [f"p{tag}", f"p{tag}/web"], "team": [f"t{tag}-a", f"t{tag}-a/b"], "org": [f"o{tag}"]}
            self.users = [f"{n}-{tag}" for n in names]
            self.sessions = [f"s{tag}-1", f"s{tag}-2"]
        self.threads = [f"th{tag}-{i}" for i in range(3)]
        self.names = dict(zip(self.users, names))
        self.moments: list[Any] = []
        self._tick()
        self.identities = list(itertools.product(
            [None, *self.ids["project"]], [None, *self.sessions], [None, *self.ids["team"]], [None, *self.ids["org"]]))
        self.model = Model(self.users, self.ids, self.sessions)
        STATS["examples"] += 1
        if populate:
            self._populate(data)
        for _ in range(data.draw(st.integers(4, 10))):  # some memories (writes the model may refuse)
            self._save(data, data.draw(st.sampled_from(["user", "session", *KINDS])))

    def _populate(self, data: st.DataObject) -> None:
        """Most scopes exist from the start, with random founders, members, policies and shares
        (set up through the service, which must allow all of it)."""
        m = self.model
        for kind in KINDS:
            for sid in self.ids[kind]:
                if not data.draw(st.integers(0, 4)):
                    continue
                founder = data.draw(st.sampled_from(self.users))
                policy = data.draw(st.sampled_from(["members", "leads"])) if kind == "team" else None
                extra = {"write": policy} if kind == "team" else {}
                self._call("populate", None, getattr(self.service, f"create_{kind}"), sid, user_id=founder, **extra)
                m.found(kind, sid, founder, policy)
                for user in self.users:
                    role = data.draw(st.sampled_from([None, *ROLES[kind]]))
                    if user != founder and role is not None:
                        self._call("populate", None, self.service.add_member, kind, sid, user, role,
                                   user_id=founder)
                        m.members[(kind, sid)][user] = role
        for project in self.ids["project"]:
            if not m.exists("project", project):
                continue
            owner = next(u for u, r in m.members[("project", project)].items() if r == "owner")
            for grantee_kind in ("user", "team", "org"):
                pool = self.users if grantee_kind == "user" else self.ids[grantee_kind]
                for grantee in data.draw(st.lists(st.sampled_from(pool), max_size=1)):
                    self._call("populate", None, self.service.share_project, project, user_id=owner,
                               **{f"with_{grantee_kind}": grantee})
                    m.shares.add((project, grantee_kind, grantee))
        self._check_database()

    def _step(self, name: str) -> None:
        STATS["steps"] += 1
        STATS[f"rule {name}"] += 1
        self._tick()

    def _tick(self) -> None:
        """A moment between steps, by the database's clock (which stamps every write and version)."""
        self.moments.append(self.conn.execute("SELECT clock_timestamp()").fetchone()[0])

    @property
    def moment(self) -> int:
        """The moment before the current step: what it writes is newer."""
        return len(self.moments) - 1

    @invariant()
    def one_reader_sees_exactly_their_memories(self) -> None:
        """After every step one user lists under one identity, both in turn."""
        if hasattr(self, "model"):
            n = sum(self.runs.values())  # this example's own count: a replay must check the same reads
            ident = dict(zip(IDENTITY_KEYS, self.identities[n % len(self.identities)], strict=True))
            self._check_list(self.users[n % len(self.users)], ident)

    # --- scopes and members ------------------------------------------------------------------

    @rule(data=st.data(), policy=st.sampled_from([None, "members", "leads"]))
    @capped
    def create_scope(self, data: st.DataObject, policy: str | None) -> None:
        self._step("create_scope")
        m = self.model
        kind, sid = self._scope_target(data)
        actor = self._user(data, m.members.get((kind, sid), {}))
        fresh = not m.exists(kind, sid)
        expected = None if fresh or m.role(actor, kind, sid) == FOUNDER[kind] else PermissionDeniedError
        extra = {"write": policy} if kind == "team" else {}
        result = self._call("create_scope", expected, getattr(self.service, f"create_{kind}"), sid, user_id=actor,
                            **extra)
        if expected is None:
            assert (result.scope.value, result.scope_id, result.user_id, result.role.value) == \
                (kind, sid, actor, FOUNDER[kind])
            if fresh:
                m.found(kind, sid, actor, policy)
        self._check_database()

    @rule(data=st.data())
    @capped
    def add_member(self, data: st.DataObject) -> None:
        self._step("add_member")
        m = self.model
        kind, sid = self._scope_target(data)
        roles = m.members.get((kind, sid), {})
        actor = self._user(data, self._managers(kind, sid))
        member = self._user(data, roles)
        role = data.draw(st.sampled_from(ROLES[kind]))
        expected = None if m.may_set_role(actor, kind, sid, member, role) else PermissionDeniedError
        result = self._call("add_member", expected, self.service.add_member, kind, sid, member, role, user_id=actor)
        if expected is None:
            assert (result.user_id, result.role.value) == (member, role)
            m.members[(kind, sid)][member] = role
        self._check_database()

    @rule(data=st.data(), leave=st.booleans())
    @capped
    def remove_member(self, data: st.DataObject, leave: bool) -> None:
        self._step("remove_member")
        m = self.model
        kind, sid = self._scope_target(data)
        roles = m.members.get((kind, sid), {})
        actor = self._user(data, roles if leave else self._managers(kind, sid))
        member = actor if leave else self._user(data, roles)
        answer = m.role(member, kind, sid) is not None
        expected = None if m.may_remove(actor, kind, sid, member) else PermissionDeniedError
        result = self._call("remove_member", expected, self.service.remove_member, kind, sid, member, user_id=actor)
        if expected is None:
            assert result is answer, f"remove_member answered {result}, the model says {answer}"
            roles.pop(member, None)
        self._check_database()

    @rule(data=st.data(), share=st.booleans(), grantee_kind=st.sampled_from(["user", "team", "org"]))
    @capped
    def share_project(self, data: st.DataObject, share: bool, grantee_kind: str) -> None:
        self._step("share_project" if share else "unshare_project")
        m = self.model
        project = data.draw(st.sampled_from(self.ids["project"]))
        actor = self._user(data, self._managers("project", project))
        grantee = data.draw(st.sampled_from(self.users if grantee_kind == "user" else self.ids[grantee_kind]))
        allowed = m.exists("project", project) and m.role(actor, "project", project) in ("owner", "admin")
        expected = None if allowed else PermissionDeniedError
        key = (project, grantee_kind, grantee)
        fn = self.service.share_project if share else self.service.unshare_project
        result = self._call("share_project" if share else "unshare_project", expected, fn, project,
                            user_id=actor, **{f"with_{grantee_kind}": grantee})
        if expected is None:
            if share:
                m.shares.add(key)
            else:
                assert result is (key in m.shares), f"unshare answered {result}"
                m.shares.discard(key)
        self._check_database()

    @rule(data=st.data(), policy=st.sampled_from(["members", "leads"]))
    @capped
    def set_team_write(self, data: st.DataObject, policy: str) -> None:
        self._step("set_team_write")
        m = self.model
        team = data.draw(st.sampled_from(self.ids["team"]))
        actor = self._user(data, self._managers("team", team))
        expected = None if m.role(actor, "team", team) == "lead" else PermissionDeniedError
        self._call("set_team_write", expected, self.service.set_team_write, team, policy, user_id=actor)
        if expected is None:
            m.policy[("team", team)] = policy
        self._check_database()

    # --- memories ----------------------------------------------------------------------------

    def _save(self, data: st.DataObject, scope: str, source: Item | None = None) -> None:
        """Save a new memory; with ``source``, what that memory says, deduplicated (mostly into the
        same place): the duplicate found must be an active memory of that scope the writer can see."""
        m = self.model
        ident = self._ident(data)
        near = source is not None and source.scope == scope and data.draw(st.integers(0, 3)) > 0
        kind_id = None
        if scope in KINDS:
            kind_id = source.scope_id if near else data.draw(st.sampled_from(self.ids[scope]))
            ident[f"{scope}_id"] = kind_id
        elif scope == "session":
            ident["session_id"] = source.scope_id if near else data.draw(st.sampled_from(self.sessions))
        if near:
            actor = self._user(data, self._involved(source))
        else:
            actor = self._user(data, m.members.get((scope, kind_id), {}) if kind_id else ())
        again = None if source is None else source.content
        visibility = data.draw(st.sampled_from(VISIBILITIES))
        expected: Error = None
        if scope == "project" and not m.exists("project", kind_id):
            pass  # the first write creates the project, the writer its owner
        elif scope in KINDS and not (m.exists(scope, kind_id) and m.may_create(actor, scope, kind_id)):
            expected = PermissionDeniedError
        content = again or self._content(actor)
        duplicate = None
        if again is not None:
            def repeated(new: str) -> uuid.UUID | None:
                return next((i for i, item in m.items.items() if item.status == "active" and item.scope == scope
                             and item.content == again and m.visible(actor, ident, item)
                             and m.merges(scope, new, item.visibility)), None)

            duplicate = repeated(visibility)
            found = self._call("check_duplicate", None, self.service.for_user(actor, **ident).find_duplicate,
                               again, scope=scope)  # as a save with the default visibility
            assert (found and found.id) == repeated("members"), \
                f"check_duplicate found {found}, the model says {repeated('members')}"
        result = self._call(f"save {scope}" + (" again" if again else ""), expected,
                            self.service.for_user(actor, **ident).add, content, scope=scope,
                            visibility=visibility, dedupe=again is not None)
        if expected is None:
            assert isinstance(result, MemoryItem), f"the gate refused {content!r}: {result}"
            if duplicate is not None:
                assert result.deduplicated and result.id == duplicate, \
                    f"saving {again!r} again gave {result}, the model says it repeats {m.items[duplicate]}"
                assert _row(result) == m.items[duplicate].row()
                STATS["save again: deduplicated"] += 1
            else:
                assert not result.deduplicated, f"{result} deduplicated against a memory the model has not"
                if scope == "project" and not m.exists("project", kind_id):
                    m.found("project", kind_id, actor, None)
                scope_id = {"user": actor, "session": ident["session_id"]}.get(scope, kind_id)
                item = Item(scope, scope_id, actor, visibility,
                            ident["session_id"] if scope == "session" else None, content, made=self.moment)
                assert _row(result) == item.row()
                m.items[result.id] = item
        self._check_database()

    # (not on a Citus cluster: the graph runs without a cluster form there, docs/how-to/citus.md)
    @precondition(lambda self: not citus_cluster.citus_url())
    @rule()
    @capped
    def consolidate_graph(self) -> None:
        """Days pass for the knowledge graph (each memory's mentions move back 0-4 days) and the
        nightly consolidation runs: whoever named Kim in five notes gets a storyline of them,
        whatever scopes they were written in (the read checks what it shows). Memories are not
        touched, so the model needs no change."""
        self._step("consolidate graph")
        self.conn.execute("UPDATE graph_mentions SET mentioned_at = mentioned_at"
                          " - make_interval(days => abs(hashtext(source_id::text)) % 5)")
        self.conn.execute("UPDATE graph_nodes n SET updated_at = now(), distinct_days = ARRAY(SELECT DISTINCT"
                          " g.mentioned_at::date FROM graph_mentions g WHERE g.scope = n.scope"
                          " AND g.scope_id = n.scope_id AND g.node_id = n.id ORDER BY 1)")
        STATS["calls"] += 1
        requests.run(maintain_graph(at=datetime.now(UTC)), self.service.conn, self.service.embeddings)

    @rule(data=st.data())
    @capped
    def save_project_memory(self, data: st.DataObject) -> None:
        self._step("save project")
        self._save(data, "project")

    @rule(data=st.data(), scope=st.sampled_from(["team", "org"]))
    @capped
    def save_team_or_org_memory(self, data: st.DataObject, scope: str) -> None:
        self._step(f"save {scope}")
        self._save(data, scope)

    @rule(data=st.data(), scope=st.sampled_from(["user", "session"]))
    @capped
    def save_private_memory(self, data: st.DataObject, scope: str) -> None:
        self._step(f"save {scope}")
        self._save(data, scope)

    @rule(data=st.data(), scope=st.sampled_from(["user", "project"]), conversation=st.sampled_from(["talk", "chat"]),
          n=st.integers(1, 3))
    @capped
    def save_transcript(self, data: st.DataObject, scope: str, conversation: str, n: int) -> None:
        """Turns of a conversation (``add_transcript``): appended after the turns of it the writer
        sees in that scope, whose words become the new turns' context. The context holds only
        turns the writer may read (another member's ``owner_only`` turns of the same conversation
        are never read into it), and the turns are memories like any other for every read."""
        m = self.model
        self._step(f"save transcript {scope}")
        ident = self._ident(data)
        kind_id = None
        if scope == "project":
            kind_id = data.draw(st.sampled_from(self.ids["project"]))
            ident["project_id"] = kind_id
        actor = self._user(data, m.members.get((scope, kind_id), {}) if kind_id else ())
        visibility = data.draw(st.sampled_from(VISIBILITIES))
        expected: Error = None
        if scope == "project" and m.exists("project", kind_id) and not m.may_create(actor, "project", kind_id):
            expected = PermissionDeniedError
        turns = [self._content(actor) for _ in range(n)]
        # what the writer may read now, in any wording (the context is read before the turns are written)
        readable = {text for i in m.visible_ids(actor, ident) for text in
                    (m.items[i].content, *(v[0] for v in m.items[i].versions))}
        report = self._call(f"save transcript {scope}", expected, self.service.for_user(actor, **ident).add_transcript,
                            turns, conversation=conversation, scope=scope, visibility=visibility)
        if expected is None:
            assert len(report.inserted) == n, f"add_transcript refused turns: {report}"
            if scope == "project" and not m.exists("project", kind_id):
                m.found("project", kind_id, actor, None)
            scope_id = actor if scope == "user" else kind_id
            for memory_id, content in zip(report.inserted, turns, strict=True):
                m.items[memory_id] = Item(scope, scope_id, actor, visibility, None, content, made=self.moment)
            contexts = self.conn.execute("SELECT context FROM memory_items WHERE id = ANY(%s)",
                                         (list(report.inserted),)).fetchall()
            for (context,) in contexts:
                leaked = [line for line in context.split("\n") if line not in readable and line not in turns]
                assert not leaked, f"add_transcript as {actor} {ident} read {leaked} into a context"
        self._check_database()

    @precondition(lambda self: self.model.items)
    @rule(data=st.data())
    @capped
    def save_again(self, data: st.DataObject) -> None:
        """What a memory says, saved again with dedupe (mostly into its own scope)."""
        m = self.model
        source = m.items[data.draw(st.sampled_from(list(m.items)))]
        scope = source.scope
        if not data.draw(st.integers(0, 3)):
            scope = data.draw(st.sampled_from(["user", "session", *KINDS]))
        self._step(f"save {scope} again")
        self._save(data, scope, source)

    @rule(data=st.data())
    @capped
    def put_by_key(self, data: st.DataObject) -> None:
        """A put by key: a new memory, or the one that holds the key in the scope replaced (a new
        wording and visibility, wider or narrower; active again if archived), by someone who may
        see and change it; its earlier version keeps the visibility it had."""
        m = self.model
        # mostly a memory of a project, team or org (where visibility decides who reads it) put again
        keyed = [i for i, item in m.items.items() if item.key is not None  # in the order written: replays draw alike
                 for _ in range(4 if item.scope in KINDS else 1)]
        source = m.items[data.draw(st.sampled_from(keyed))] if keyed and data.draw(st.integers(0, 3)) else None
        scope = source.scope if source is not None else data.draw(st.sampled_from([*KINDS * 2, "user", "session"]))
        key = source.key if source is not None else data.draw(st.sampled_from(KEYS))
        self._step(f"put {scope}")
        ident = self._ident(data)
        kind_id = None
        if scope in KINDS:
            kind_id = source.scope_id if source is not None else data.draw(st.sampled_from(self.ids[scope]))
            ident[f"{scope}_id"] = kind_id
        elif scope == "session":
            ident["session_id"] = source.scope_id if source is not None else data.draw(st.sampled_from(self.sessions))
        actor = self._user(data, self._involved(source) if source is not None
                           else m.members.get((scope, kind_id), {}) if kind_id else ())
        visibility = data.draw(st.sampled_from(VISIBILITIES))
        scope_id = {"user": actor, "session": ident["session_id"]}.get(scope, kind_id)
        holder = next((i for i, item in m.items.items() if (item.scope, item.scope_id, item.key) == (scope, scope_id, key)
                       and (scope != "session" or item.creator == actor)), None)
        expected: Error = None
        new_project = scope == "project" and not m.exists("project", kind_id)
        if scope in KINDS and not new_project and not (m.exists(scope, kind_id) and m.may_create(actor, scope, kind_id)):
            expected = PermissionDeniedError
        elif holder is not None and not (m.visible(actor, ident, m.items[holder])
                                         and m.may_change(actor, m.items[holder])):
            expected = PermissionDeniedError
        content = self._content(actor)
        result = self._call(f"put {scope}" + (" again" if holder else ""), expected,
                            self.service.for_user(actor, **ident).put, key, content, scope=scope,
                            visibility=visibility)
        if expected is None:
            assert isinstance(result, MemoryItem), f"the gate refused {content!r}: {result}"
            if holder is None:
                if new_project:
                    m.found("project", kind_id, actor, None)
                item = Item(scope, scope_id, actor, visibility, ident["session_id"] if scope == "session" else None,
                            content, key=key, made=self.moment)
                m.items[result.id] = item
            else:
                assert result.id == holder, f"put {key!r} wrote {result}, the model says it replaces {m.items[holder]}"
                item = m.items[holder]
                item.revise(self.moment, content=content, visibility=visibility)
                item.status = "active"
                STATS["put again: replaced"] += 1
            assert _row(result) == item.row()
        self._check_database()

    # (not on a Citus cluster: reads of the past have no cluster form yet, docs/how-to/citus.md)
    @precondition(lambda self: self.model.items and not citus_cluster.citus_url())
    @rule(data=st.data(), when=st.sampled_from(["known_at", "as_of"]))
    @capped
    def read_the_past(self, data: st.DataObject, when: str) -> None:
        """``list`` and ``search`` at an earlier moment, and a memory's ``history``: exactly what
        the model says the reader could read then and can read now, each in its wording of then."""
        self._step("read_the_past")
        m = self.model
        # mostly a memory with earlier versions, read by someone it concerns while one of them held
        def narrower(item: Item, visibility: str) -> bool:  # a version fewer could read than read it now
            return item.scope in KINDS and WIDTH[visibility] < WIDTH[item.visibility]

        revised = [i for i, item in m.items.items() if item.versions
                   for _ in range(4 if any(narrower(item, v) for _, v, _ in item.versions) else 1)]
        focus = m.items[data.draw(st.sampled_from(revised))] if revised and data.draw(st.integers(0, 3)) else None
        if focus is not None:  # mostly a reader other than its creator, while a narrower version held
            user = self._user(data, [u for u in self._involved(focus) if u != focus.creator])
            ident = self._natural_ident(focus)
            moment = data.draw(st.sampled_from([replaced for _, v, replaced in focus.versions
                                                for _ in range(3 if narrower(focus, v) else 1)]))
        else:
            user, ident = self._user(data, [item.creator for item in m.items.values()]), self._ident(data)
            moment = data.draw(st.integers(0, len(self.moments) - 2))
        expected = m.past(user, ident, moment)
        if expected != m.past(user, ident, moment, rules_of_then=False):
            STATS["read_the_past: a narrower version withheld"] += 1
        me = self.service.for_user(user, **ident)
        at = {when: self.moments[moment]}
        STATS["calls"] += 2
        listed = {i.id: i.content for i in me.list(status=None, limit=1000, **at)}
        assert listed == expected, (f"list({when}) as {user} {ident}: leaked "
                                    f"{[(listed[i], m.items.get(i)) for i in listed if expected.get(i) != listed[i]]}, "
                                    f"missing {[m.items[i] for i in expected if i not in listed]}")
        k = self.service.config.max_k
        hits = {h.item.id: h.item.content for h in me.search("note written for the shared world", k=k, status=None,
                                                            min_relevance=0.0, **at)}
        assert hits.items() <= expected.items(), f"search({when}) as {user} {ident} leaked {hits.items() - expected.items()}"
        if len(expected) <= k:
            assert hits == expected, f"search({when}) as {user} {ident} missed {expected.items() - hits.items()}"
        readable = [i for i, item in m.items.items() if m.visible(user, ident, item)]
        if readable:
            memory_id = next((i for i in readable if m.items[i] is focus), None) or data.draw(st.sampled_from(readable))
            STATS["calls"] += 1
            shown = [v.content for v in me.history(memory_id)]
            assert shown == m.history(user, ident, m.items[memory_id]), \
                f"history of {m.items[memory_id]} as {user} {ident} showed {shown}"
            STATS["read_the_past: history"] += 1

    def _memory_id(self, data: st.DataObject, status: str = "active") -> uuid.UUID:
        """Mostly a memory in ``status`` (when there is one), sometimes any, rarely a deleted one."""
        m = self.model
        choice = data.draw(st.integers(0, 7))
        pool = [i for i, item in m.items.items() if item.status == status]
        if choice == 0 and m.gone:
            return data.draw(st.sampled_from(m.gone))
        if choice < 3 or not pool:
            pool = list(m.items)
        return data.draw(st.sampled_from(pool))

    def _target(self, data: st.DataObject, status: str = "active") -> tuple[str, Ident, uuid.UUID]:
        """An actor, an identity (usually the one naming the memory's scope) and a memory id."""
        memory_id = self._memory_id(data, status)
        item = self.model.items.get(memory_id)
        actor = self._user(data, self._involved(item))
        natural = item is not None and data.draw(st.integers(0, 3)) > 0
        return actor, (self._natural_ident(item) if natural else self._ident(data)), memory_id

    @precondition(lambda self: self.model.items)
    @rule(data=st.data(), action=st.sampled_from(CHANGES))
    @capped
    def change_memory(self, data: st.DataObject, action: str) -> None:
        """Edit, delete (archive), restore or hard-delete a memory, or purge one's archived ones (one
        rule, so that when Hypothesis leaves rules out of an example, these are in or out together)."""
        if action == "purge":
            self._purge_archived(data)
            return
        self._step(f"{action}_memory")
        m = self.model
        actor, ident, memory_id = self._target(data, "archived" if action == "restore" else "active")
        expected = m.why_not_change(actor, ident, memory_id)
        status = None if expected else m.items[memory_id].status
        if action == "edit":
            expected = InvalidInputError if status not in (None, "active") else expected
            content = self._content(actor)
            result = self._call("edit_memory", expected, self.service.for_user(actor, **ident).edit, memory_id,
                                content=content)
            if expected is None:
                assert not isinstance(result, Rejection), result
                m.items[memory_id].revise(self.moment, content=content)
                assert _row(result) == m.items[memory_id].row()
        elif action == "restore":
            expected = InvalidInputError if status not in (None, "archived") else expected
            result = self._call("restore_memory", expected, self.service.for_user(actor, **ident).restore, memory_id)
            if expected is None:
                m.items[memory_id].status = "active"
                assert _row(result) == m.items[memory_id].row()
        else:
            hard = action == "delete_hard"
            self._call(f"{action}_memory", expected, self.service.for_user(actor, **ident).delete, memory_id,
                       hard=hard)
            if expected is None and hard:
                del m.items[memory_id]
                m.gone.append(memory_id)
            elif expected is None:
                m.items[memory_id].status = "archived"
        self._check_database()

    def _purge_archived(self, data: st.DataObject) -> None:
        """Purging deletes only the caller's own archived memories that they may still change."""
        self._step("purge_archived")
        m = self.model
        actor, ident = self._user(data), self._ident(data)
        doomed = [i for i, item in m.items.items() if item.creator == actor and item.status == "archived"
                  and m.visible(actor, ident, item) and m.may_change_own(actor, item)]
        n = self._call("purge_archived", None, self.service.for_user(actor, **ident).purge_archived)
        assert n == len(doomed), f"purge_archived deleted {n}, the model says {len(doomed)}"
        for i in doomed:
            del m.items[i]
            m.gone.append(i)
        self._check_database()

    # --- who the run is: config, context, threads ----------------------------------------------

    def _run_identity(self, data: st.DataObject, nobody: int = 0) -> tuple[str | None, Any, str | None, Error]:
        """A run's ``user_id`` in ``configurable`` and its context (each maybe absent; when both
        are given, mostly the same user), the user they name, and whether they conflict. ``nobody``
        more draws make it a call that names no user at all (as ``agent.get_state(config)`` can)."""
        choice = data.draw(st.integers(-nobody, 4))  # no context (twice as often), the same user (twice), another
        if choice < 0:
            return None, None, None, None
        config_user = data.draw(st.sampled_from([None, None, *self.users]))
        if choice in (0, 4):
            return config_user, None, config_user, None
        context_user = config_user if choice in (1, 2) and config_user else self._user(data)
        context = {"user_id": context_user}
        conflict = config_user is not None and context_user != config_user
        return config_user, context, config_user or context_user, IdentityConflictError if conflict else None

    @staticmethod
    def _run_config(thread: str | None, config_user: str | None, context: Any, **more: Any) -> dict[str, Any]:
        """The config LangGraph hands a node or the checkpointer: the run's Runtime rides in it."""
        configurable: dict[str, Any] = {k: v for k, v in (("thread_id", thread), ("user_id", config_user)) if v}
        if context is not None:
            configurable["__pregel_runtime"] = Runtime(context=context)
        return {"configurable": {**configurable, **more}}

    @rule(data=st.data())
    @capped
    def read_as_the_run(self, data: st.DataObject) -> None:
        """Memories read under the identity a run resolves from its config and its context
        (which sometimes names a project too): a disagreement is refused, never merged."""
        self._step("read_as_the_run")
        config_user, context, user, expected = self._run_identity(data)
        ident = self._ident(data)
        project = data.draw(st.sampled_from([None, ident["project_id"], *self.ids["project"]]))
        if context is not None and project is not None:
            context = {**context, "project_id": project}
            if ident["project_id"] is not None and project != ident["project_id"]:
                expected = IdentityConflictError
            ident = {**ident, "project_id": ident["project_id"] or project}
        config = self._run_config(None, config_user, context, **{k: v for k, v in ident.items() if v})
        who = self._call("resolve identity", expected, identity_from, config, required=False)
        if expected is not None:
            return
        if user is None:
            assert who is None, f"{config} resolved to {who} without a user"
            return
        assert who is not None and who.user_id == user and {k: getattr(who, k) for k in IDENTITY_KEYS} == ident
        self._check_list(user, ident)

    @rule(data=st.data())
    @capped
    def read_as_the_authenticated_run(self, data: st.DataObject) -> None:
        """Memories read by a LangGraph Platform run: the auth handler's user (sometimes with a
        project claim) comes first; a run that names another user or project is refused, and what
        the user does not claim comes from the run."""
        self._step("read_as_the_authenticated_run")
        auth_user = self._user(data)
        ident = self._ident(data)
        claim = data.draw(st.sampled_from([None, None, *self.ids["project"]]))
        run_user = data.draw(st.sampled_from([None, None, auth_user, *self.users]))
        in_context = data.draw(st.booleans())
        expected: Error = None
        if run_user is not None and run_user != auth_user:
            expected = IdentityConflictError
        run = {k: v for k, v in self._ident_fields(ident, claim).items() if v}
        if claim is not None:
            if ident["project_id"] is not None and ident["project_id"] != claim:
                expected = IdentityConflictError
            ident = {**ident, "project_id": claim}
        if run_user is not None:
            run["user_id"] = run_user
        auth = {"identity": auth_user, **({"project_id": claim} if claim else {})}
        if in_context:
            config = self._run_config(None, None, run, langgraph_auth_user=auth)
        else:
            config = self._run_config(None, None, None, langgraph_auth_user=auth, **run)
        who = self._call("resolve the authenticated identity", expected, identity_from, config)
        if expected is not None:
            return
        assert who is not None and who.user_id == auth_user
        assert {k: getattr(who, k) for k in IDENTITY_KEYS} == ident
        self._check_list(auth_user, ident)

    @staticmethod
    def _ident_fields(ident: Ident, claim: str | None) -> Ident:
        """What the run itself names: the drawn ids, and the project only when the user claims
        none (a claimed one is named by the run only when it repeats the claim)."""
        return {k: v for k, v in ident.items() if not (k == "project_id" and claim is not None and v == claim)}

    def _check_threads(self) -> None:
        rows = self.conn.execute("SELECT thread_id, user_id FROM checkpoint_thread_owner WHERE thread_id = ANY(%s)",
                                 (self.threads,)).fetchall()
        assert dict(rows) == self.model.owner, "thread owners differ from the model"

    @rule(data=st.data())
    @capped
    def write_checkpoint(self, data: st.DataObject) -> None:
        """A checkpoint written by a run (a user, a context, both, or nobody) to a random thread."""
        self._step("write_checkpoint")
        thread = data.draw(st.sampled_from(self.threads))
        config_user, context, user, expected = self._run_identity(data)
        if expected is None:
            expected = self.model.thread_call(thread, user)
        self.written += 1
        note = f"checkpoint {self.written} by {user and self.names[user]}"
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"note": note}
        config = self._run_config(thread, config_user, context, checkpoint_ns="")
        self._call(f"put as {'nobody' if user is None else 'someone'}", expected, self.checkpointer.put, config,
                   checkpoint, {}, {})
        if expected is None:
            self.model.note[thread] = note
        self._check_threads()

    @rule(data=st.data(), listing=st.booleans())
    @capped
    def read_checkpoint(self, data: st.DataObject, listing: bool) -> None:
        """A thread's latest checkpoint read (get_tuple or list) by a user, a context, both or
        nobody: only its owner (or anyone, while nobody owns it) gets it, and it is the last one written."""
        self._step("read_checkpoint")
        thread = data.draw(st.sampled_from(self.threads))
        config_user, context, user, expected = self._run_identity(data, nobody=2)
        if expected is None:
            expected = self.model.thread_call(thread, user)
        config = self._run_config(thread, config_user, context)
        name = f"{'list' if listing else 'get_tuple'} as {'nobody' if user is None else 'someone'}"
        if listing:
            found = self._call(name, expected, lambda: list(self.checkpointer.list(config, limit=1)))
            found = found[0] if found else None
        else:
            found = self._call(name, expected, self.checkpointer.get_tuple, config)
        if expected is None:
            got = None if found is None else found.checkpoint["channel_values"].get("note")
            assert got == self.model.note.get(thread), \
                f"{name} of {thread} as {user} read {got!r}, the model says {self.model.note.get(thread)!r}"
        self._check_threads()

    # --- reads -------------------------------------------------------------------------------

    @rule(data=st.data())
    @capped
    def read_memories(self, data: st.DataObject) -> None:
        self._step("read_memories")
        self._check_reads(self._user(data), self._ident(data))

    @precondition(lambda self: self.model.items or self.model.gone)
    @rule(data=st.data())
    @capped
    def get_memories(self, data: st.DataObject) -> None:
        """get_memory on a few ids: visible ones come back as they are, the rest are not found."""
        self._step("get_memory")
        m = self.model
        every = [*m.items, *m.gone]
        for memory_id in data.draw(st.lists(st.sampled_from(every), min_size=1, max_size=3, unique=True)):
            item = m.items.get(memory_id)
            user = self._user(data, self._involved(item))
            natural = item is not None and data.draw(st.booleans())
            ident = self._natural_ident(item) if natural else self._ident(data)
            seen = item is not None and m.visible(user, ident, item)
            got = self._call("get_memory", None if seen else MemoryNotFoundError,
                             self.service.for_user(user, **ident).get, memory_id)
            if seen:
                assert _row(got) == item.row()

    @rule(data=st.data())
    @capped
    def read_members(self, data: st.DataObject) -> None:
        """memberships() is the user's own roles (of one kind, below a prefix by whole segments:
        ``w…`` covers ``w…/web``, never ``w…-corp``); list_members() the scope's, for its members only."""
        self._step("read_members")
        m = self.model
        user = self._user(data)
        kind = data.draw(st.sampled_from([None, *KINDS]))
        prefix = data.draw(st.sampled_from([None, *sorted({sid for ids in self.ids.values() for sid in ids})]))
        mine = {(s.scope.value, s.scope_id, s.role.value) for s in self._call(
            "memberships", None, self.service.memberships, user_id=user, scope=kind, prefix=prefix)}
        assert mine == {(k, s, roles[user]) for (k, s), roles in m.members.items() if user in roles
                        and kind in (None, k) and (prefix is None or s == prefix or s.startswith(prefix + "/"))}
        kind, sid = self._scope_target(data)
        expected = None if m.role(user, kind, sid) else PermissionDeniedError
        got = self._call("list_members", expected, self.service.list_members, kind, sid, user_id=user)
        if expected is None:
            assert {x.user_id: x.role.value for x in got} == m.members[(kind, sid)]

    def teardown(self) -> None:
        """The whole world, read by every user under identities naming each scope in turn."""
        if not hasattr(self, "model"):
            return
        self._check_database()
        for n, user in enumerate(self.users):
            session = self.sessions[n % 2]
            idents: list[Ident] = [
                {"project_id": p, "session_id": session, "team_id": None, "org_id": None}
                for p in [None, *self.ids["project"]]
            ]
            idents += [{"project_id": None, "session_id": None, "team_id": t, "org_id": o}
                       for t in self.ids["team"] for o in self.ids["org"]]
            for ident in idents:
                self._check_reads(user, ident, search=False)


def _row(item: MemoryItem) -> tuple[Any, ...]:
    return (item.scope.value, item.scope_id, item.user_id, item.visibility.value, item.status.value, item.content,
            item.session_id)


@pytest.fixture(scope="module")
def world_service(fresh_dsn: Callable[[], str]) -> Iterator[tuple[MemoryService, psycopg.Connection,
                                                                  PostgresCheckpointer]]:
    """A service with hash embeddings on a database of its own, its checkpointer, and a plain
    connection to inspect it. Every range of one row or more is searched from a copy of its
    vectors (``vector_cache_rows=1``), so the model checks that read path too."""
    dsn = fresh_dsn()
    # on a Citus cluster without the knowledge graph: its recall joins a user's graph to memories of
    # other scopes, which has no cluster form yet (docs/how-to/citus.md)
    config = MemoryConfig(vector_cache_rows=1, **({"knowledge_graph": False} if citus_cluster.citus_url() else {}))
    with MemoryService(dsn, config=config, embeddings=HashEmbeddings()) as service, \
            PostgresCheckpointer(dsn, config=MemoryConfig()) as checkpointer, \
            psycopg.connect(dsn, autocommit=True) as conn:
        service.for_user("nobody").search("makes the copies' cache")
        for cache in requests._SHARED.get(service.conn, {}).values():  # none on a cluster (copies are off)
            cache.recheck_after = 0.0  # every search plans again, so every range with a row is copied
        yield service, conn, checkpointer


def test_access_control_matches_the_model(world_service, record_property) -> None:
    service, conn, checkpointer = world_service
    before = STATS["steps"]
    started = time.perf_counter()
    run_state_machine_as_test(
        lambda: AccessMachine(service, conn, checkpointer),
        settings=settings(
            max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, derandomize=True, database=None,
            # no shrinking: against the database it can take minutes, and the failing step's message
            # already names the call, the caller and what differs (add Phase.shrink to minimize)
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        ),
    )
    steps = STATS["steps"] - before
    summary = (f"{steps} operations ({STATS['calls']} service calls) in {STATS['examples']} examples, "
               f"{time.perf_counter() - started:.1f} s")
    print(summary)
    for key in sorted(k for k in STATS if ":" in k or k.startswith("rule ")):
        print(f"  {key}: {STATS[key]}")
    record_property("access_operations", steps)
    assert steps >= MIN_STEPS, summary
