"""Keyword evidence as coverage of the question's IDF mass, and word feedback (issue 14): pure
ranking, the config settings, and both search statements computing them exactly (candidate lists
of k rows, the indexed search, the former ``squash`` and no feedback kept as options), never
reading another tenant's words."""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timezone

import pytest

from agent_memory import ConfigurationError, MemoryConfig, MemoryService, ranking
from agent_memory.ops import NewMemory
from search_reference import exhaustive, texts
from test_search_indexes import FILTERS as INDEX_FILTERS
from test_search_indexes import QUERIES as INDEX_QUERIES
from test_search_indexes import _callers, world  # noqa: F401 (the fixture)

NOW = datetime.now(timezone.utc)


def row(id, similarity, tsv):
    return {"id": id, "similarity": similarity, "confidence": 1.0, "scope_priority": 0.6, "tsv": tsv,
            "created_at": NOW}


def test_the_ceiling_is_the_summed_idf_of_the_query_words_anyone_holds():
    df, n = {"rare": 1, "common": 80, "absent": 0}, 100
    assert ranking.bm25_ceiling(["rare", "common", "absent", "rare"], df, n) == pytest.approx(
        ranking.idf(1, n) + ranking.idf(80, n))
    assert ranking.bm25_ceiling(["absent"], df, n) == 0.0


def test_coverage_is_the_share_of_the_ceiling_and_at_most_one():
    assert ranking.coverage(0.0, 3.0) == 0.0 and ranking.coverage(1.0, 0.0) == 0.0
    assert ranking.coverage(1.5, 3.0) == pytest.approx(0.5)
    assert ranking.coverage(4.0, 3.0) == 1.0  # a word held twice scores above its IDF


def test_coverage_splits_the_question_between_the_memories_by_idf():
    """One memory holds the question's rare word, the other its three common ones: each gets its
    share of the question's IDF mass (together all of it), so the rare word wins."""
    rows = [row("rare", 0.30, "'zephyrin':1"), row("common", 0.30, "'went':1 'today':2 'said':3")]
    df, n = {"zephyrin": 1, "went": 120, "today": 120, "said": 120}, 400
    terms = ["zephyrin", "went", "today", "said"]
    w = ranking.Scoring(ranking.Weights(similarity=0.5, confidence=0.3, scope=0.2, keyword=0.4),
                        MemoryConfig.defaults().scope_priority)
    ranked = ranking.rank(rows, scoring=w, query_terms=terms, df=df, n_docs=n, k=2)
    assert [r[0]["id"] for r in ranked] == ["rare", "common"]
    rare, common = ranked[0][3], ranked[1][3]
    assert rare > 0.5 > common > 0 and rare + common == pytest.approx(1.0)
    squashed = ranking.rank(rows, scoring=dataclasses.replace(w, keyword_norm="squash"), query_terms=terms, df=df,
                            n_docs=n, k=2)
    assert {r[0]["id"]: r[3] for r in squashed}["common"] == pytest.approx(
        ranking.squash(ranking.bm25_scores([{"went": 1, "today": 1, "said": 1}], terms, df, n)[0]))
    with pytest.raises(ValueError, match="keyword_norm"):
        dataclasses.replace(w, keyword_norm="bm25")


def test_the_config_defaults_to_coverage_and_refuses_other_norms():
    config = MemoryConfig.defaults()
    assert (config.keyword_norm, config.keyword_weight, config.keyword_feedback) == ("coverage", 0.4, 0)
    assert MemoryConfig.defaults(keyword_norm="squash").keyword_norm == "squash"
    with pytest.raises(ConfigurationError, match="keyword_norm must be one of coverage, squash"):
        MemoryConfig.defaults(keyword_norm="max")


@pytest.fixture(scope="module")
def corpus(memory: MemoryService):
    """Sentences that share words at very different rates, so coverage and squash disagree."""
    rng = random.Random(41)
    user = f"coverage-{rng.getrandbits(32):08x}"
    items = [NewMemory(content=t, confidence=round(rng.uniform(0.6, 1.0), 3)) for t in texts(rng, "cov", 120)]
    items += [NewMemory(content=f"The zephyrin deploy note number {i} mentions coffee and the weekend plan")
              for i in range(6)]
    memory.for_user(user).add_many(items, dedupe=False)
    return user


QUERIES = ["zephyrin deploy", "coffee deadline on Friday", "what is the weekend plan for the marathon and guitar?",
           "budget", "nothing matches qwertyuiop"]


def _answer(results):
    return [(r.id, round(r.score, 9)) for r in results]


@pytest.mark.parametrize(("norm", "feedback"), [("coverage", 5), ("coverage", 0), ("squash", 0), ("squash", 5)])
def test_both_statements_find_the_exact_top_k_under_either_norm(memory, corpus, norm, feedback):
    """The indexed search against the scan of every row; and the scan statement itself (taken for
    a narrowed search) with candidate lists of only k rows: its keyword list must be ordered by the
    same evidence the ranking uses. With feedback both searches of a call are compared."""
    config = memory.config.replace(keyword_norm=norm, keyword_weight=0.4, candidate_pool=1,
                                   keyword_feedback=feedback)
    since = datetime(2000, 1, 1, tzinfo=timezone.utc)
    with MemoryService(memory.conn, config=config, embeddings=memory.embeddings) as service:
        for query in QUERIES:
            for k in (1, 5):
                got = service.for_user(corpus).search(query, k=k)
                scanned = service.for_user(corpus).search(query, k=k, created_after=since)
                with exhaustive():
                    want = service.for_user(corpus).search(query, k=k)
                assert _answer(got) == _answer(want) == _answer(scanned), (norm, query, k)
                assert len(want) == k


def test_feedback_takes_the_words_the_best_memories_share():
    tsvs = ["'camp':3 'kid':2 'melani':1", "'kid':4 'melani':1 'swim':2", "'camp':1 'kid':2 'museum':3", "'kid':1 'zoo':2"]
    assert ranking.feedback_lexemes(tsvs, {"melani", "famili"}, 5) == ["kid", "camp"]  # only the best 3 count
    assert ranking.feedback_lexemes(tsvs, {"melani"}, 1) == ["kid"]
    assert ranking.feedback_lexemes(tsvs, {"melani"}, 0) == [] == ranking.feedback_lexemes([None], set(), 5)


def test_feedback_never_reads_another_tenants_words(memory, corpus):
    """The words joining the question come from the caller's own best memories: another user's
    memories full of related words change neither the words nor the answer."""
    config = memory.config.replace(keyword_feedback=5)
    with MemoryService(memory.conn, config=config, embeddings=memory.embeddings) as service:
        before = {q: _answer(service.for_user(corpus).search(q, k=5)) for q in QUERIES}
        service.for_user(corpus + "-other").add_many(
            [f"The zephyrin deploy crew drinks coffee with sourdough and guitar on the weekend (x {i})"
             for i in range(40)], dedupe=False)
        for query in QUERIES:
            hits = service.for_user(corpus).search(query, k=5)
            assert _answer(hits) == before[query], query
            assert all(h.item.user_id == corpus for h in hits)


@pytest.mark.parametrize("caller", ["alice-all-levels", "alice-one-team", "alice-shared-project", "bob-owner-only",
                                    "carol", "alice-not-a-member"])
def test_feedback_stays_exact_under_every_access_rule(memory, world, caller):
    """test_search_indexes' comparison, with word feedback on: both searches of each call equal
    the exhaustive scan's for every caller and filter, and no hit is another tenant's."""
    u, s, tag = world
    ids = _callers(u, s, tag)[caller]
    config = memory.config.replace(keyword_feedback=5)
    with MemoryService(memory.conn, config=config, embeddings=memory.embeddings) as service:
        for i, query in enumerate(INDEX_QUERIES):
            for filters in INDEX_FILTERS[i % 3::3]:
                args = dict(dict(k=7), **filters)
                got = service.for_user(**ids).search(query, **args)
                with exhaustive():
                    want = service.for_user(**ids).search(query, **args)
                assert _answer(got) == _answer(want), (caller, query, filters)
                if caller == "alice-not-a-member":
                    assert {r.item.scope_id for r in got} <= {u["alice"], s["O"]}
