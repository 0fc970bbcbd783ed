"""Searches of big ranges from the process's copies of their vectors (``agent_memory.vector_cache``,
migration 0016): the answer equals the exhaustive scan under every access rule, stays equal
through every kind of write (new rows, edits, archive, restore, hard delete, expiry, visibility,
membership), never shows a row the caller may not read, and costs nothing in correctness when
the copy is stale or wrong."""

from __future__ import annotations

import asyncio
import math
import random
import time
from unittest import mock

import numpy as np
import psycopg
import pytest

from agent_memory import AsyncMemoryService, MemoryService, queries, ranking, vector_cache
from agent_memory.db import requests
from agent_memory.ops import NewMemory
from agent_memory.reembed import reembed
from hash_embeddings import HashEmbeddings
from search_reference import exhaustive, texts
from test_search_indexes import FILTERS, QUERIES, _answer, _callers, world  # noqa: F401  (a fixture)

#: ranges of at least this many rows are copied here (every range of ``world`` alice reads)
ROWS = 9


@pytest.fixture(scope="module")
def copied(memory):
    config = memory.config.replace(vector_cache_rows=ROWS)
    with MemoryService(memory.conn, config=config, embeddings=memory.embeddings) as service:
        yield service


def _cache(service) -> vector_cache.VectorCache:
    config = service.config
    return requests._SHARED[service.conn][f"vector_cache:{config.vector_cache_rows}:{config.vector_cache_mb}"]


class _Bands:
    """Records the ranges (level and rule) each search read from copies."""

    def __init__(self):
        self.calls: list[str] = []
        self._candidates = vector_cache.candidates

    def __call__(self, plan, **kw):
        self.calls.extend(f"{copy.scope}:{rule}" for copy, rule in plan.ranges)
        return self._candidates(plan, **kw)


def _same_as_exhaustive(service, ids, query, **args):
    got = service.for_user(**ids).search(query, **args)
    with exhaustive():
        want = service.for_user(**ids).search(query, **args)
    assert _answer(got) == _answer(want), (ids, query, args)
    return got


@pytest.mark.parametrize("caller", ["alice-all-levels", "alice-one-team", "alice-shared-project", "bob-owner-only",
                                    "carol", "alice-not-a-member"])
def test_searches_from_copies_equal_the_exhaustive_scan_under_every_access_rule(copied, world, caller):
    u, s, tag = world
    ids = _callers(u, s, tag)[caller]
    bands = _Bands()
    with mock.patch.object(vector_cache, "candidates", bands):
        for i, query in enumerate(QUERIES):
            for filters in FILTERS[i % 3::3] if caller != "alice-all-levels" else FILTERS:
                _same_as_exhaustive(copied, ids, query, **dict(dict(k=7), **filters))
    assert bands.calls, "the big ranges must have been read from copies"
    rules = set(bands.calls)
    if caller == "alice-shared-project":
        assert "project:public" in rules  # a shared project: its public rows only
    if caller == "bob-owner-only":
        assert "project:member" in rules and "team:member" in rules
    if caller == "alice-all-levels":
        assert "user:all" in rules and "session:mine" in rules


def test_copies_are_only_made_of_big_ranges(copied, world):
    u, s, tag = world
    _cache(copied).clear()
    for _ in range(2):  # the first reads the index and counts; the second copies the big ranges
        copied.for_user(**_callers(u, s, tag)["alice-all-levels"]).search("coffee")
    sizes = {(c.scope, int(c.alive[: c.size].sum())) for c in _cache(copied).ranges.values()}
    assert sizes and all(n >= ROWS for _, n in sizes)
    with MemoryService(copied.conn, config=copied.config.replace(vector_cache_rows=0),
                       embeddings=copied.embeddings) as off:
        bands = _Bands()
        with mock.patch.object(vector_cache, "candidates", bands):
            off.for_user(**_callers(u, s, tag)["alice-all-levels"]).search("coffee")
        assert bands.calls == []


@pytest.fixture
def project(copied, tenant):
    """A project of 40 memories shared by two members, searched once so it is copied."""
    owner = copied.for_user(tenant.user, project_id=tenant.project)
    copied.add_member("project", tenant.project, tenant.other_user, "editor", user_id=tenant.user)
    owner.add_many([NewMemory(content=t, scope="project", confidence=round(0.6 + 0.01 * i, 2))
                    for i, t in enumerate(texts(random.Random(5), "p", 40))])
    owner.search("coffee")  # reads the index and sees 40 rows: the next search copies them
    owner.search("coffee")
    assert any(c.scope == "project" for c in _cache(copied).ranges.values())
    return owner


def test_every_kind_of_write_reaches_the_copy(copied, tenant, project):
    ids = dict(user_id=tenant.user, project_id=tenant.project)
    other = copied.for_user(tenant.other_user, project_id=tenant.project)
    check = lambda q, **a: _same_as_exhaustive(copied, ids, q, **dict(dict(k=5), **a))  # noqa: E731

    new = project.add("The espresso machine in the kitchen needs descaling every Monday", scope="project")
    assert check("espresso machine descaling")[0].item.id == new.id
    project.edit(new.id, content="The tea kettle in the kitchen needs descaling every Monday")
    assert check("tea kettle descaling")[0].item.id == new.id
    project.delete(new.id)  # archived
    assert new.id not in {r.item.id for r in check("tea kettle descaling")}
    project.restore(new.id)
    assert check("tea kettle descaling")[0].item.id == new.id
    project.delete(new.id, hard=True)  # a delete: the copy is made again
    assert new.id not in {r.item.id for r in check("tea kettle descaling")}

    hidden = other.add("The vault combination changes on the first of the month", scope="project",
                       visibility="owner_only")
    assert hidden.id not in {r.item.id for r in check("vault combination month", k=40)}
    assert other.search("vault combination", k=3)[0].item.id == hidden.id
    _same_as_exhaustive(copied, dict(user_id=tenant.other_user, project_id=tenant.project), "vault combination")

    short = project.put("fleeting", "The fire drill is at three this afternoon", scope="project", ttl=1.5)
    assert check("fire drill afternoon")[0].item.id == short.id
    time.sleep(1.6)
    assert short.id not in {r.item.id for r in check("fire drill afternoon")}

    copied.remove_member("project", tenant.project, tenant.other_user, user_id=tenant.user)
    assert copied.for_user(tenant.other_user, project_id=tenant.project).search("coffee", scope="project") == []


def test_a_copy_never_shows_what_the_caller_may_not_read(copied, tenant, project):
    """A copy whose rows are wrong (a foreign range's vectors under this range) may cost
    recall, never a leak: every answer is read again under the full rule."""
    outsider = copied.for_user(tenant.other_user, project_id=tenant.other_project)
    outsider.add_many([NewMemory(content=t, scope="project") for t in texts(random.Random(8), "o", 20)])
    outsider.search("coffee")
    outsider.search("coffee")
    mine = next(c for c in _cache(copied).ranges.values() if c.scope == "project"
                and c.key == copied_key(tenant.project))
    theirs = next(c for c in _cache(copied).ranges.values() if c.scope == "project"
                  and c.key == copied_key(tenant.other_project))
    with mine.lock, theirs.lock:  # poison: alice's copy now lists the outsider's rows as hers
        for id_ in theirs.ids:
            mine.ids.append(id_)
            mine.slot[id_] = mine.size
            mine._grow(mine.size + 1)
            mine.vectors[mine.size] = theirs.vectors[theirs.slot[id_]]
            mine.confidence[mine.size], mine.alive[mine.size], mine.expires[mine.size] = 1.0, True, np.inf
            mine.visibility[mine.size], mine.owner[mine.size] = 0, 0
            mine.size += 1
    seen = project.search("coffee", k=60)
    assert seen and all(r.item.scope_id != tenant.other_project for r in seen)
    _cache(copied).drop("project", copied_key(tenant.project))


def copied_key(scope_id: str) -> int:
    from agent_memory.queries import scope_key

    return scope_key(scope_id)


def test_deletes_moves_and_truncation_leave_a_reset_mark(fresh_dsn, embeddings, config):
    dsn = fresh_dsn()
    with MemoryService(dsn, config=config.replace(vector_cache_rows=ROWS), embeddings=embeddings) as service:
        handle = service.for_user("u1")
        saved = handle.add_many([NewMemory(content=t) for t in texts(random.Random(2), "u", 20)])
        handle.search("coffee")
        handle.search("coffee")
        assert len(_cache(service).ranges) == 1
        with psycopg.connect(dsn, autocommit=True) as conn:
            def mark(scope):
                return conn.execute("SELECT xid::text FROM memory_scope_resets WHERE scope = %s", (scope,)).fetchone()
            assert mark("user") is None
            handle.delete(saved.inserted[0], hard=True)
            assert mark("user") is not None
            before = mark("user")[0]
            conn.execute("UPDATE memory_items SET scope_id = 'u2', user_id = 'u2' WHERE id = %s", (saved.inserted[1],))
            assert int(mark("user")[0]) > int(before)
            # what a search reads stays exact after each (the copy is made again)
            _same_as_exhaustive(service, dict(user_id="u1"), "coffee", k=30)
            conn.execute("TRUNCATE memory_items CASCADE")
            assert mark("*") is not None
        assert handle.search("coffee") == []
        # recording a hit's use changes nothing a copy holds: no stamp
        handle.add_many([NewMemory(content=t) for t in texts(random.Random(4), "v", 20)])
        handle.search("coffee")
        with psycopg.connect(dsn) as conn:
            stamps = conn.execute("SELECT count(DISTINCT changed_xid) FROM memory_items").fetchone()[0]
        handle.search("coffee")
        handle.search("hiking")
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT count(DISTINCT changed_xid) FROM memory_items").fetchone()[0] == stamps


def test_async_searches_read_the_same_copies(dsn, embeddings, config, copied, world):
    u, s, tag = world
    ids = _callers(u, s, tag)["bob-owner-only"]

    async def main():
        async with AsyncMemoryService(dsn, config=config.replace(vector_cache_rows=ROWS),
                                      embeddings=embeddings) as service:
            return [await service.for_user(**ids).search(q, k=6) for q in QUERIES]

    got = asyncio.run(main())
    for q, results in zip(QUERIES, got):
        with exhaustive():
            want = copied.for_user(**ids).search(q, k=6)
        assert _answer(results) == _answer(want)


def test_candidates_keep_every_row_that_can_reach_the_top_k():
    """Against a brute force over random copies, rules, floors, keyword postings and weights: every
    row whose estimated final score (keyword evidence included) can reach the statement's cut is
    kept, and the BM25 statistics count exactly the rows the caller sees."""
    rng = np.random.default_rng(1)
    words = ["alpha", "beta", "gamma", "delta"]
    for trial in range(200):
        n, k = int(rng.integers(1, 300)), int(rng.integers(1, 20))
        copy = vector_cache.CachedRange("project", 1, 8)
        vectors = rng.normal(size=(n, 8)).astype(np.float32)
        rows = []
        for i in range(n):
            held = [w for w in words if rng.random() < 0.3]
            context = rng.normal(size=8).astype(np.float32) if rng.random() < 0.5 else None
            rows.append({"id": f"r{i}", "v": bytes(4) + vectors[i].astype(">f4").tobytes(),
                         "cv": None if context is None else bytes(4) + context.astype(">f4").tobytes(),
                         "confidence": float(rng.uniform(0.5, 1)), "visibility": str(rng.choice(VIS)),
                         "owner_key": int(rng.integers(0, 3)), "memory_type": "fact",
                         "expires": None if rng.random() > 0.1 else 0.0, "active": bool(rng.random() > 0.1),
                         "tsv": " ".join(f"'{w}':{j + 1}" for j, w in enumerate(held))})
        copy.apply(rows)
        q = vector_cache.unit(rng.normal(size=8))
        floor = float(rng.choice([0.0, 0.2]))
        rule = str(rng.choice(["all", "mine", "member", "public"]))
        plan = vector_cache.Plan(((copy, rule),), now=1.0, lexemes=("alpha", "gamma", "omega"), complete=True)
        coverage = bool(rng.random() < 0.5)
        scoring = ranking.Scoring(ranking.Weights(similarity=0.5, confidence=0.3, scope=0.2, keyword=0.4,
                                                  salience=0.05),
                                  {"project": 0.8}, keyword_norm="coverage" if coverage else "squash",
                                  context=0.4)
        w = dict(min_relevance=floor, error=0.01, rest_n=int(rng.integers(0, 50)), rest_df={"alpha": 3, "omega": 1})
        got = vector_cache.candidates(plan, query=q, owner_key=1, types=None, k=k, scoring=scoring, **w)
        # brute force, row by row
        seen = [r for r in rows if r["active"] and r["expires"] is None and {
            "all": True, "mine": r["owner_key"] == 1, "member": r["visibility"] != "owner_only" or r["owner_key"] == 1,
            "public": r["visibility"] == "public"}[rule]]
        n_all = w["rest_n"] + len(seen)
        df = {x: w["rest_df"].get(x, 0) + sum(f"'{x}'" in r["tsv"] for r in seen) for x in plan.lexemes}
        df = {x: c for x, c in df.items() if c > 0}
        assert got.n == n_all and got.df == df
        idf = {x: math.log(1 + (n_all - c + 0.5) / (c + 0.5)) for x, c in df.items()}

        def final(r):
            sim = float(vector_cache.unit(np.frombuffer(r["v"][4:], ">f4")) @ q)
            if r["cv"] is not None:  # a memory that keeps its context: mixed with the context's cosine
                sim = 0.6 * sim + 0.4 * float(vector_cache.unit(np.frombuffer(r["cv"][4:], ">f4")) @ q)
            bm25 = sum(v for x, v in idf.items() if f"'{x}'" in r["tsv"])
            key = (min(bm25 / sum(idf.values()), 1) if idf else 0) if coverage else bm25 / (bm25 + 5)
            return (0.3 * sim + 0.3 * r["confidence"] + 0.2 * 0.8 + 0.2 * key, 0.6 * sim + 0.4 * key)

        scored = [(r["id"], *final(r)) for r in seen]
        sure = sorted((f for _, f, rel in scored if floor <= 0 or rel >= floor + 0.01), reverse=True)
        cut = sure[k - 1] if len(sure) >= k else -math.inf
        want = {i for i, f, rel in scored if f >= cut - 2 * 0.3 * 0.01 - 0.05 - 1e-9 and (floor <= 0 or rel >= floor - 0.01)}
        assert set(got.ids) == want, trial


VIS = ["public", "members", "owner_only"]


def test_duplicate_checks_read_the_copy_and_still_find_every_duplicate(copied, tenant, project):
    """A save into a copied scope finds its duplicate from the copy (16 at once still leave one
    row), and a duplicate check never finds a row the saver may not see."""
    from concurrent.futures import ThreadPoolExecutor

    hidden = copied.for_user(tenant.other_user, project_id=tenant.project).add(
        "The staging password rotates every ninety days", scope="project", visibility="owner_only")
    again = project.add("The staging password rotates every ninety days", scope="project")
    assert again.id != hidden.id  # bob's owner_only row is not alice's duplicate
    text = "Our quarterly planning offsite is in Lisbon this year"
    with ThreadPoolExecutor(16) as pool:
        saved = list(pool.map(lambda _: project.add(text, scope="project"), range(16)))
    assert len({s.id for s in saved}) == 1
    assert project.find_duplicate("Our quarterly planning offsite is in Lisbon this year!", scope="project").id \
        == saved[0].id
    assert any(c.scope == "project" for c in _cache(copied).ranges.values())


class _Reversed(HashEmbeddings):
    """Another model of the same size: each text's words read backwards."""

    def __init__(self, dims: int) -> None:
        super().__init__(dims)
        self.model = f"reversed-{dims}"

    def _vector(self, text: str) -> list[float]:
        return super()._vector(text[::-1])


def test_re_embedding_reaches_the_copies(fresh_dsn, config):
    """Re-embedding stamps every row, so a live copy takes the new vectors on the next search."""
    dsn = fresh_dsn()
    with MemoryService(dsn, config=config.replace(vector_cache_rows=5), embeddings=HashEmbeddings(32)) as service:
        service.for_user("u1").add_many([NewMemory(content=t) for t in texts(random.Random(6), "r", 30)])
        service.for_user("u1").search("coffee")
        service.for_user("u1").search("coffee")
        [copy] = _cache(service).ranges.values()
        assert reembed(service.conn, _Reversed(32), batch_size=50).switched
        for query in QUERIES:
            _same_as_exhaustive(service, {"user_id": "u1"}, query, k=5)
        assert next(iter(_cache(service).ranges.values())) is copy  # brought up to date, not copied again
        with psycopg.connect(dsn) as conn:
            rows = conn.execute("SELECT id, content FROM memory_items").fetchall()
        for id_, content in rows:
            want = vector_cache.unit(_Reversed(32)._vector(content))
            assert np.allclose(copy.vectors[copy.slot[id_]], want, atol=1e-6)


def test_a_scope_bigger_than_the_copies_may_be_is_read_from_the_index(fresh_dsn, config):
    dsn = fresh_dsn()
    small = config.replace(vector_cache_rows=5, vector_cache_mb=1)
    with MemoryService(dsn, config=small, embeddings=HashEmbeddings(512)) as service:
        handle = service.for_user("u1")
        handle.add_many([NewMemory(content=t) for t in texts(random.Random(9), "big", 700)], dedupe=False)
        service.for_user("u2").add_many([NewMemory(content=t) for t in texts(random.Random(9), "s", 20)])
        for query in QUERIES[:3]:
            _same_as_exhaustive(service, {"user_id": "u1"}, query, k=5)
            _same_as_exhaustive(service, {"user_id": "u2"}, query, k=5)
        cache = _cache(service)
        assert [c.scope for c in cache.ranges.values()] == ["user"] and len(cache.too_big) == 1
        bands = _Bands()
        with mock.patch.object(vector_cache, "candidates", bands):
            handle.search("coffee")  # not loaded again: the index
        assert bands.calls == []


def test_only_callers_who_see_many_memories_plan_their_copies(fresh_dsn, config):
    """A search by a caller not known to read a big range reads the index without the plan's
    round trip; one that saw many rows plans the next time, and a caller whose ranges were all
    small is not planned again for a while."""
    dsn = fresh_dsn()
    with MemoryService(dsn, config=config.replace(vector_cache_rows=10), embeddings=HashEmbeddings(32)) as service:
        service.for_user("big").add_many([NewMemory(content=t) for t in texts(random.Random(1), "b", 30)])
        service.for_user("small").add_many([NewMemory(content=t) for t in texts(random.Random(2), "s", 5)])
        plans = mock.patch.object(queries, "cache_plan", wraps=queries.cache_plan)
        with plans as planned:
            service.for_user("small").search("coffee")
            service.for_user("small").search("coffee")
            assert planned.call_count == 0  # 5 rows: never planned
            service.for_user("big").search("coffee")
            assert planned.call_count == 0  # first: the index, 30 rows seen
            service.for_user("big").search("coffee")
            assert planned.call_count == 1 and len(_cache(service).ranges) == 1
            service.for_user("big").search("coffee")
            assert planned.call_count == 2  # a caller with copies plans every search (their changes)
            service.for_user("big", project_id="p").search("coffee")  # another caller: the index again
            assert planned.call_count == 2


def test_a_cache_remembers_a_bounded_number_of_callers():
    cache = vector_cache.VectorCache(10, 2**20)
    for i in range(vector_cache._CALLERS + 50):
        cache.saw(("u", f"session-{i}"), 10)
    assert len(cache.callers) == vector_cache._CALLERS
    assert not cache.plans(("u", "session-0")) and cache.plans(("u", f"session-{vector_cache._CALLERS + 49}"))


def test_a_copy_keeps_each_rows_context_vector_through_updates_and_compaction():
    """Context vectors (issue 29) stay with their rows when a copy grows, is updated and is compacted;
    a range of memories without context holds no context matrix at all."""
    rng = np.random.default_rng(29)

    def row(i, active=True, context=True):
        v = rng.normal(size=4).astype(np.float32)
        return {"id": f"r{i}", "v": bytes(4) + v.astype(">f4").tobytes(),
                "cv": bytes(4) + np.full(4, i + 1, np.float32).astype(">f4").tobytes() if context else None,
                "confidence": 1.0, "visibility": "public", "owner_key": 1, "memory_type": "fact",
                "expires": None, "active": active, "tsv": ""}

    plain = vector_cache.CachedRange("project", 1, 4)
    plain.apply([row(i, context=False) for i in range(10)])
    assert plain.contexts is None and not plain.has_context[: plain.size].any()
    copy = vector_cache.CachedRange("project", 2, 4)
    copy.apply([row(i, context=i % 2 == 0) for i in range(1500)])
    copy.apply([row(i, active=False) for i in range(1500) if i % 4 < 2])  # half leave: compacted
    assert copy.size < 1500
    for slot, name in enumerate(copy.ids):
        i = int(name[1:])
        assert copy.has_context[slot] == (i % 2 == 0)
        want = vector_cache.unit(np.full(4, i + 1)) if i % 2 == 0 else np.zeros(4)
        assert np.allclose(copy.contexts[slot], want)


def test_rows_without_vectors_are_read_from_copies_at_similarity_zero(copied, dsn):
    """Memories saved without a vector (a LangGraph store with ``index=None``, migration 0020)
    sit in a copy as zero vectors: similarity 0, as the exhaustive scan scores them."""
    import uuid

    user = f"novec-{uuid.uuid4().hex[:8]}"
    copied.for_user(user).add_many(texts(random.Random(3), "novec", 30))
    with psycopg.connect(dsn) as conn:
        gone = conn.execute("UPDATE memory_items SET embedding = NULL, changed_xid = pg_current_xact_id()"
                            " WHERE scope_id = %s AND right(content, 2) ~ '[02468][)]$'", (user,)).rowcount
    assert gone >= 10
    bands = _Bands()
    with mock.patch.object(vector_cache, "candidates", bands):
        for query in QUERIES:
            hits = _same_as_exhaustive(copied, {"user_id": user}, query, k=7)
            assert hits
    assert bands.calls, "the range must have been read from its copy"


def _near_repeats(rng: np.random.Generator, n: int, dims: int = 16) -> tuple[vector_cache.CachedRange, list[dict]]:
    """A copy of ``n`` rows whose vectors are a few notes repeated with small variations (and some
    word for word), as a big project's notes are."""
    bases = rng.normal(size=(4, dims)).astype(np.float32)
    vectors = bases[rng.integers(0, 4, n)] + rng.normal(size=(n, dims)).astype(np.float32) * 0.02
    vectors[rng.random(n) < 0.1] = bases[0]
    copy = vector_cache.CachedRange("project", 1, dims)
    rows = [{"id": f"r{i}", "v": bytes(4) + vectors[i].astype(">f4").tobytes(), "cv": None, "confidence": 0.8,
             "visibility": str(rng.choice(["members", "public", "owner_only"])), "owner_key": int(rng.integers(0, 3)),
             "memory_type": "fact", "expires": None, "active": True, "tsv": "'deploy':1"} for i in range(n)]
    copy.apply(rows)
    return copy, rows


def test_closest_holds_the_exact_closest_duplicate_and_few_other_rows():
    """Over near repeats: the rows a duplicate check measures in the database always hold the exact
    closest row (of the visibilities it may merge into, under the rule) at the threshold, and stay
    a handful where every row within the index's error would be hundreds."""
    rng = np.random.default_rng(29)
    copy, rows = _near_repeats(rng, 2000)
    measured = within_index_error = 0
    for trial in range(60):
        q = vector_cache.unit(copy.vectors[int(rng.integers(0, copy.size))] + rng.normal(size=16) * 0.01)
        rule = str(rng.choice(["all", "mine", "member", "public"]))
        allowed = [str(v) for v in rng.choice(["members", "public", "owner_only"], int(rng.integers(1, 4)), replace=False)]
        threshold = float(rng.choice([0.85, 0.95, 0.999]))
        got = vector_cache.closest(((copy, rule),), query=q, now=1.0, owner_key=1, threshold=threshold,
                                   visibilities=allowed)
        exact = [(float(np.float64(vector_cache.unit(np.frombuffer(r["v"][4:], ">f4"))) @ q), r["id"]) for r in rows
                 if r["visibility"] in allowed and {"all": True, "mine": r["owner_key"] == 1,
                                                    "member": r["visibility"] != "owner_only" or r["owner_key"] == 1,
                                                    "public": r["visibility"] == "public"}[rule]]
        if not exact:
            assert got == []
            continue
        best = max(exact)
        if best[0] >= threshold:
            assert {i for s, i in exact if s == best[0]} <= set(got)
        else:
            assert all(s < threshold for s, i in exact if i in got)
        assert all(s >= best[0] - 3 * vector_cache.ERROR for s, i in exact if i in got)
        measured += len(got)
        within_index_error += sum(s >= max(best[0], threshold) - 2 * queries.HALF_ERROR for s, _ in exact)
    assert measured < within_index_error / 3, (measured, within_index_error)


def test_a_copys_own_error_keeps_few_candidates_over_near_repeats():
    """Over near repeats the candidates chosen with the copy's own error (:data:`vector_cache.ERROR`)
    are a small part of those chosen with the index's, and still hold the exact top k."""
    rng = np.random.default_rng(2901)
    copy, rows = _near_repeats(rng, 3000)
    scoring = ranking.Scoring(ranking.Weights(similarity=0.5, confidence=0.3, scope=0.2, keyword=0.4),
                              {"project": 0.8})
    plan = vector_cache.Plan(((copy, "all"),), now=1.0, lexemes=("deploy",), complete=True)
    for trial in range(20):
        q = vector_cache.unit(copy.vectors[int(rng.integers(0, copy.size))] + rng.normal(size=16) * 0.05)
        kw = dict(query=q, owner_key=1, types=None, k=10, scoring=scoring, min_relevance=0.0, rest_n=0, rest_df={})
        narrow = vector_cache.candidates(plan, error=vector_cache.ERROR, **kw)
        wide = vector_cache.candidates(plan, error=queries.HALF_ERROR, **kw)
        sims = np.asarray([float(vector_cache.unit(np.frombuffer(r["v"][4:], ">f4")) @ q) for r in rows])
        top = {rows[i]["id"] for i in np.argsort(-sims, kind="stable")[:10] if sims[i] > np.sort(sims)[-10] + 1e-6}
        assert top <= set(narrow.ids)
        assert len(narrow.ids) < len(wide.ids) / 3, (len(narrow.ids), len(wide.ids))


def test_a_copys_mixed_vectors_give_the_two_products_similarity_through_writes():
    """A copy scores a row that keeps its context with one product of its mixed vector (the
    vector moved towards the context's by the share), equal to mixing the two cosines; the
    mixed vectors stay true when rows are added, changed, gain or lose a context, leave, when
    the copy is compacted, and when the share changes."""
    rng = np.random.default_rng(2902)

    def row(i, *, context, active=True):
        v, c = rng.normal(size=6).astype(np.float32), rng.normal(size=6).astype(np.float32)
        return {"id": f"r{i}", "v": bytes(4) + v.astype(">f4").tobytes(),
                "cv": bytes(4) + c.astype(">f4").tobytes() if context else None, "confidence": 1.0,
                "visibility": "public", "owner_key": 1, "memory_type": "fact", "expires": None, "active": active,
                "tsv": ""}

    def two_products(copy, q, share):
        own = copy.vectors[: copy.size] @ q
        ctx = copy.contexts[: copy.size] @ q
        return np.where(copy.has_context[: copy.size], own + share * (ctx - own), own)

    copy = vector_cache.CachedRange("project", 3, 6)
    copy.apply([row(i, context=i % 3 == 0) for i in range(1200)])
    writes = [lambda: copy.apply([row(i, context=True) for i in range(1200, 1300)]),  # added
              lambda: copy.apply([row(i, context=i % 2 == 0) for i in range(0, 300)]),  # changed, contexts gained/lost
              lambda: copy.apply([row(i, context=False, active=False) for i in range(300, 1100)])]  # left: compacted
    for write in [lambda: None, *writes]:
        write()
        for share in (0.7, 0.3):
            q = vector_cache.unit(rng.normal(size=6))
            rows = np.flatnonzero(copy.alive[: copy.size])
            got = copy.similarity(q, rows, share)
            assert copy.mixed is not None and copy.mixed_share == share
            assert np.allclose(got, two_products(copy, q, share)[rows], atol=1e-5)
    assert copy.size < 1300  # the compaction happened
    assert np.allclose(copy.similarity(q, rows, 0.0), (copy.vectors[: copy.size] @ q)[rows], atol=1e-6)
