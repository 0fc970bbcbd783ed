"""search_memories returns the true top-k under every scope filter: compared with an exact scan in numpy."""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timezone

import numpy as np
import psycopg
import pytest

from agent_memory import MemoryService, ranking
from agent_memory.ops import NewMemory

TOPICS = ["coffee", "hiking", "python", "tax return", "guitar", "kubernetes", "sourdough", "marathon",
          "japanese", "chess", "garden", "invoice", "vacation", "piano", "database", "cat"]
FORMS = ["I like {t} a lot", "We talked about {t} yesterday", "My notes on {t} are in the wiki",
         "The team is worried about {t}", "Remember the {t} deadline on Friday", "{t} is my weekend plan",
         "Never schedule {t} before noon", "I decided to stop {t} for a month"]
SCOPE_FILTERS = [None, "user", "project", "session", ["user", "project"], ["session", "project"]]
QUERIES = ["what do I do on weekends?", "kubernetes deadline", "coffee", "music lessons", "money and taxes"]


@pytest.fixture(scope="module")
def corpus(memory: MemoryService):
    rng = random.Random(7)
    tag = uuid.uuid4().hex[:8]
    ids = {"user_id": f"exact-{tag}", "project_id": f"exact-p-{tag}", "session_id": f"exact-s-{tag}"}
    for scope in ("user", "project", "session"):
        items = [
            NewMemory(content=rng.choice(FORMS).format(t=rng.choice(TOPICS)) + f" (note {scope} {i})",
                      scope=scope, confidence=round(rng.uniform(0.7, 1.0), 3))
            for i in range(120)
        ]
        memory.for_user(**ids).add_many(items)
    # other tenants' rows with the same texts: must never appear, and must not change the answer
    memory.for_user(f"noise-{tag}", project_id=ids["project_id"] + "x").add_many([f"I like coffee a lot (note user {i})" for i in range(50)])
    return ids


def exact_top_k(dsn, memory, ids, query, scope, k, keyword_weight):
    """Score every visible row in Python: numpy cosine + the same BM25 over all rows."""
    scopes = {"user", "project", "session"} if scope is None else {scope} if isinstance(scope, str) else set(scope)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT id, scope, confidence, created_at, embedding::text AS emb, content_tsv::text AS tsv,"
            " context_embedding::text AS ctx, context_tsv::text AS ctsv"
            " FROM memory_items WHERE status = 'active' AND ("
            " (scope = 'user' AND scope_id = %(u)s) OR (scope = 'project' AND scope_id = %(p)s)"
            " OR (scope = 'session' AND scope_id = %(s)s AND user_id = %(u)s))",
            {"u": ids["user_id"], "p": ids["project_id"], "s": ids["session_id"]},
        ).fetchall()
        terms = [r[0] for r in conn.execute(
            "SELECT unnest(tsvector_to_array(to_tsvector('english', %s)))", (query,)).fetchall()]
    rows = [r for r in rows if r[1] in scopes]
    q = np.asarray(memory.embeddings.embed_query(query))
    # a row without a vector (a LangGraph store without an index saved it, migration 0020) scores 0
    embs = np.asarray([[float(x) for x in r[4].strip("[]").split(",")] if r[4] is not None else [0.0] * len(q)
                       for r in rows])
    norms = np.linalg.norm(embs, axis=1) * np.linalg.norm(q)
    cos = np.divide(embs @ q, norms, out=np.zeros(len(rows)), where=norms > 0)

    def context_cos(text):  # a memory that keeps its context: the cosine of the question and it
        if text is None:
            return None
        c = np.asarray([float(x) for x in text.strip("[]").split(",")])
        return float(c @ q / (np.linalg.norm(c) * np.linalg.norm(q)))

    tfs = [ranking.parse_tsvector(r[5]) for r in rows]
    df = {t: sum(1 for tf in tfs if t in tf) for t in terms}
    prio = memory.config.scope_priority
    candidates = [
        {"id": r[0], "similarity": float(c), "confidence": r[2], "scope_priority": prio[r[1]],
         "created_at": r[3], "tsv": r[5], "context_similarity": context_cos(r[6]), "context_tsv": r[7]}
        for r, c in zip(rows, cos)
    ]
    scoring = ranking.Scoring.from_config(memory.config).with_weights(keyword=keyword_weight)
    ranked = ranking.rank(candidates, scoring=scoring, query_terms=terms, df=df, n_docs=len(rows), k=k)
    return [r[0]["id"] for r in ranked], [r[1] for r in ranked]


@pytest.mark.parametrize(("keyword_weight", "pool"), [(0.0, 50), (None, 50), (None, 1)],
                         ids=["vector-only", "hybrid", "hybrid-pool-equals-k"])
@pytest.mark.parametrize("scope", SCOPE_FILTERS, ids=str)
def test_search_equals_exact_scan(dsn, memory, embeddings, corpus, scope, keyword_weight, pool):
    """Even when each candidate list holds only k rows, their union contains the exact top k."""
    config = memory.config.replace(candidate_pool=pool)
    if keyword_weight is not None:
        config = config.replace(keyword_weight=keyword_weight)
    kw = config.keyword_weight
    with MemoryService(dsn, config=config, embeddings=embeddings) as service:
        for query in QUERIES:
            for k in (1, 10, 40):
                hits = service.for_user(**corpus).search(query, k=k, scope=scope)
                want_ids, want_scores = exact_top_k(dsn, service, corpus, query, scope, k, kw)
                assert len(hits) == len(want_ids) == k
                assert [h.score for h in hits] == pytest.approx(want_scores, abs=1e-5)
                assert [h.id for h in hits] == want_ids


@pytest.fixture(scope="module")
def context_corpus(memory: MemoryService):
    """Transcripts (memories that keep their context) beside memories added by hand, at two levels."""
    rng = random.Random(29)
    tag = uuid.uuid4().hex[:8]
    ids = {"user_id": f"ctx-{tag}", "project_id": f"ctx-p-{tag}", "session_id": f"ctx-s-{tag}"}
    h = memory.for_user(**ids)
    for scope in ("user", "project"):
        turns = [rng.choice(FORMS).format(t=rng.choice(TOPICS)) + f" (turn {scope} {i})" for i in range(90)]
        h.add_transcript(turns, conversation=f"talk-{scope}", scope=scope)
        h.add_many([NewMemory(content=rng.choice(FORMS).format(t=rng.choice(TOPICS)) + f" (note {scope} {i})",
                              scope=scope) for i in range(40)])
    return ids


@pytest.mark.parametrize(("context_weight", "context_keyword"), [(0.0, 0.0), (0.4, 0.0), (1.0, 0.0), (0.0, 0.6),
                                                                 (0.4, 0.6), (0.7, 1.0)])
def test_context_ranks_alike_in_every_path(dsn, memory, embeddings, context_corpus, context_weight, context_keyword):
    """With memories that keep their context, the indexed search, the narrowed search, the search
    that reads a big scope's copy and the exhaustive scan return the same hits with the same
    scores, and those are the numpy reference's (cosine mixed with the context's cosine, keyword
    evidence mixed with the context's keyword evidence)."""
    from datetime import datetime, timezone

    from search_reference import exhaustive

    since = datetime(2000, 1, 1, tzinfo=timezone.utc)
    for rows in (0, 50):  # without copies, and with the 130-row ranges copied
        config = memory.config.replace(context_weight=context_weight, context_keyword_weight=context_keyword,
                                       candidate_pool=1, vector_cache_rows=rows)
        with MemoryService(dsn, config=config, embeddings=embeddings) as service:
            h = service.for_user(**context_corpus)
            for query in QUERIES:
                for k in (1, 10):
                    h.search(query, k=k)  # the first search plans the copies
                    got = [(x.id, round(x.score, 9)) for x in h.search(query, k=k)]
                    narrowed = [(x.id, round(x.score, 9)) for x in h.search(query, k=k, created_after=since)]
                    with exhaustive():
                        want = [(x.id, round(x.score, 9)) for x in h.search(query, k=k)]
                    assert got == want == narrowed, (rows, query, k)
                    ids, scores = exact_top_k(dsn, service, context_corpus, query, ["user", "project"], k,
                                              config.keyword_weight)
                    assert [i for i, _ in got] == ids
                    assert [sc for _, sc in got] == pytest.approx(scores, abs=1e-5)
            if rows:  # the big ranges were read from their copies, context vectors and all
                from agent_memory.db import requests

                cache = requests._SHARED[service.conn][f"vector_cache:{rows}:{config.vector_cache_mb}"]
                assert len(cache.ranges) == 2
                assert all(c.contexts is not None and int(c.has_context[: c.size].sum()) == 90
                           for c in cache.ranges.values())


def test_context_changes_the_ranking_only_of_memories_that_keep_one(dsn, memory, embeddings, context_corpus):
    """Memories added by hand score the same whatever the context weight; a transcript's turns do not."""
    scores = {}
    for weight in (0.0, 0.4):
        config = memory.config.replace(context_weight=weight)
        with MemoryService(dsn, config=config, embeddings=embeddings) as service:
            hits = service.for_user(**context_corpus).search("kubernetes deadline", k=100)
            scores[weight] = {x.id: (x.score, x.item.context is not None) for x in hits}
    both = set(scores[0.0]) & set(scores[0.4])
    assert both
    assert all(scores[0.0][i][0] == pytest.approx(scores[0.4][i][0], abs=1e-9) for i in both if not scores[0.0][i][1])
    assert any(abs(scores[0.0][i][0] - scores[0.4][i][0]) > 1e-4 for i in both if scores[0.0][i][1])


@pytest.fixture(scope="module")
def sparse_corpus(dsn: str, memory: MemoryService):
    """A corpus where every third row has no vector (saved without an index, migration 0020)."""
    rng = random.Random(11)
    tag = uuid.uuid4().hex[:8]
    ids = {"user_id": f"sparse-{tag}", "project_id": f"sparse-p-{tag}", "session_id": f"sparse-s-{tag}"}
    for scope in ("user", "project"):
        items = [NewMemory(content=rng.choice(FORMS).format(t=rng.choice(TOPICS)) + f" (sparse {scope} {i})",
                           scope=scope, confidence=round(rng.uniform(0.7, 1.0), 3)) for i in range(90)]
        memory.for_user(**ids).add_many(items)
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE memory_items SET embedding = NULL, changed_xid = pg_current_xact_id()"
                     " WHERE scope_id IN (%(u)s, %(p)s) AND right(content, 2) ~ '[0369][)]$'",
                     {"u": ids["user_id"], "p": ids["project_id"]})
    return ids


@pytest.mark.parametrize(("keyword_weight", "pool"), [(0.0, 50), (None, 50), (None, 1)],
                         ids=["vector-only", "hybrid", "hybrid-pool-equals-k"])
@pytest.mark.parametrize("scope", [None, "user", "project"], ids=str)
def test_rows_without_vectors_score_zero_similarity_in_every_path(dsn, memory, embeddings, sparse_corpus, scope,
                                                                  keyword_weight, pool):
    """Rows without a vector take part with similarity 0 (found by their words); the search agrees
    with the exact scan, and none of them is lost or raises."""
    with psycopg.connect(dsn) as conn:
        missing = conn.execute("SELECT count(*) FROM memory_items WHERE scope_id = %s AND embedding IS NULL",
                               (sparse_corpus["user_id"],)).fetchone()[0]
    assert missing >= 20
    config = memory.config.replace(candidate_pool=pool)
    if keyword_weight is not None:
        config = config.replace(keyword_weight=keyword_weight)
    with MemoryService(dsn, config=config, embeddings=embeddings) as service:
        for query in QUERIES:
            for k in (1, 10, 40):
                hits = service.for_user(**sparse_corpus).search(query, k=k, scope=scope)
                want_ids, want_scores = exact_top_k(dsn, service, sparse_corpus, query, scope, k,
                                                    config.keyword_weight)
                assert [h.score for h in hits] == pytest.approx(want_scores, abs=1e-5)
                assert [h.id for h in hits] == want_ids


#: project notes repeat with small variations (another name, build or day), as real ones do: many
#: rows share most words and lie within a hair of each other in meaning (issue 29, big scopes)
NOTE_FORMS = ["Standup {d}: {n} is still working on the {c}, blocked on code review.",
              "Deploy of build {b} of the {c} to staging passed.",
              "CI run {b} on the {c} failed on {d}.",
              "{n} reviewed the pull request {b} for the {c} and asked for changes."]
NOTE_QUERIES = ["who is blocked on code review?", "did the deploy of the payments service pass?",
                "CI run failed on Monday", "pull request for the search index"]


def repetitive_notes(rng: random.Random, n: int) -> list[str]:
    """``n`` notes from :data:`NOTE_FORMS`, a tenth of them repeated word for word."""
    out: list[str] = []
    for _ in range(n):
        if out and rng.random() < 0.1:
            out.append(rng.choice(out))
            continue
        out.append(rng.choice(NOTE_FORMS).format(
            d=rng.choice(["Monday", "Tuesday", "Friday"]), n=rng.choice(["Alice", "Bruno", "Chen", "Dana"]),
            c=rng.choice(["payments service", "search index", "login page"]), b=rng.randint(1000, 1010)))
    return out


@pytest.fixture(scope="module")
def repetitive_corpus(memory: MemoryService):
    """A project of repetitive notes kept with their context (a transcript) and by hand, and a
    member's own repetitive notes."""
    rng = random.Random(290)
    tag = uuid.uuid4().hex[:8]
    ids = {"user_id": f"rep-{tag}", "project_id": f"rep-p-{tag}", "session_id": f"rep-s-{tag}"}
    h = memory.for_user(**ids)
    h.add_transcript(repetitive_notes(rng, 160), conversation="standups", scope="project")
    h.add_many([NewMemory(content=text, scope="project") for text in repetitive_notes(rng, 60)])
    h.add_many([NewMemory(content=text, scope="user") for text in repetitive_notes(rng, 40)])
    return ids


def test_repetitive_texts_rank_alike_in_every_path(dsn, memory, embeddings, repetitive_corpus):
    """Over notes that repeat with small variations (many near ties), the indexed search, the
    search that reads the big scope's copy (whose candidates are chosen with the copy's own, far
    smaller, error), the narrowed search and the exhaustive scan return the same hits with the same
    scores, and those are the numpy reference's."""
    from datetime import datetime, timezone

    from search_reference import exhaustive

    since = datetime(2000, 1, 1, tzinfo=timezone.utc)
    for rows in (0, 50):  # without copies, and with the 220-row project copied
        config = memory.config.replace(candidate_pool=1, vector_cache_rows=rows)
        with MemoryService(dsn, config=config, embeddings=embeddings) as service:
            h = service.for_user(**repetitive_corpus)
            for query in NOTE_QUERIES:
                for k in (1, 10, 30):
                    h.search(query, k=k)  # the first search plans the copies
                    got = [(x.id, round(x.score, 9)) for x in h.search(query, k=k)]
                    narrowed = [(x.id, round(x.score, 9)) for x in h.search(query, k=k, created_after=since)]
                    with exhaustive():
                        want = [(x.id, round(x.score, 9)) for x in h.search(query, k=k)]
                    assert got == want == narrowed, (rows, query, k)
                    _, scores = exact_top_k(dsn, service, repetitive_corpus, query, ["user", "project"], k,
                                            config.keyword_weight)
                    assert [sc for _, sc in got] == pytest.approx(scores, abs=1e-5)
            if rows:
                from agent_memory.db import requests

                cache = requests._SHARED[service.conn][f"vector_cache:{rows}:{config.vector_cache_mb}"]
                assert {c.scope for c in cache.ranges.values()} == {"project"}


def test_duplicate_check_agrees_with_and_without_copies_over_repetitive_texts(dsn, memory, embeddings,
                                                                              repetitive_corpus):
    """The duplicate a save would merge into is the same whether the project is read from its copy
    (only the rows the copy finds at the best similarity are measured in the database) or from the
    index, for near repeats, exact repeats and new notes, at several thresholds."""
    rng = random.Random(2901)
    probes = repetitive_notes(rng, 12) + ["The office plants need water on Fridays."]
    for threshold in (0.85, 0.95, 0.99):
        found = {}
        for rows in (0, 50):
            config = memory.config.replace(vector_cache_rows=rows, duplicate_threshold=threshold)
            with MemoryService(dsn, config=config, embeddings=embeddings) as service:
                h = service.for_user(**repetitive_corpus)
                found[rows] = [getattr(h.find_duplicate(text, scope="project"), "id", None) for text in probes]
        assert found[0] == found[50], threshold
        assert any(i is not None for i in found[0]) or threshold > 0.95
    assert found[0][-1] is None  # the new note has no duplicate
def test_a_turn_found_only_by_its_contexts_words_is_found_by_every_path(dsn, memory, embeddings):
    """A turn that does not say what it is about ("Yes, the one by the lake") holds none of the
    question's words; the turn before it does. With keyword evidence over the context it is the
    best answer, and every path finds it even with one candidate per list (pool 1, k 1): the
    indexed search reads the contexts' postings, the copies hold them too."""
    from search_reference import exhaustive

    tag = uuid.uuid4().hex[:8]
    who = {"user_id": f"lake-{tag}"}
    rng = random.Random(3)
    memory.for_user(**who).add_many([rng.choice(FORMS).format(t=rng.choice(TOPICS)) + f" (note {i})"
                                     for i in range(60)])
    report = memory.for_user(**who).add_transcript(
        ["Which cabin near Trondheim did we book?", "Yes, the one by the lake", "I like coffee a lot"],
        conversation="trip")
    turn = report.inserted[1]
    since = datetime(2000, 1, 1, tzinfo=timezone.utc)
    firsts = {}
    for weight in (0.0, 1.0):
        for rows in (0, 50):
            config = memory.config.replace(context_weight=0.0, context_keyword_weight=weight, candidate_pool=1,
                                           vector_cache_rows=rows)
            with MemoryService(dsn, config=config, embeddings=embeddings) as service:
                h = service.for_user(**who)
                h.search("Trondheim", k=1)  # plans the copies
                got = [(x.id, round(x.score, 9)) for x in h.search("Trondheim", k=3)]
                narrowed = [(x.id, round(x.score, 9)) for x in h.search("Trondheim", k=3, created_after=since)]
                with exhaustive():
                    want = [(x.id, round(x.score, 9)) for x in h.search("Trondheim", k=3)]
                assert got == want == narrowed, (weight, rows)
                ids, scores = exact_top_k(dsn, service, {**who, "project_id": "-", "session_id": "-"},
                                          "Trondheim", "user", 3, config.keyword_weight)
                assert [i for i, _ in got] == ids
                assert [sc for _, sc in got] == pytest.approx(scores, abs=1e-5)
                firsts[weight] = [i for i, _ in got]
    assert turn in firsts[1.0][:2]  # the question's turn and the answer that follows it
    assert turn not in firsts[0.0]  # without the context's words it holds nothing of the question
