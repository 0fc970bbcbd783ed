"""Ranking is pure: BM25 over PostgreSQL lexemes, fused with cosine, then the spec's weighted sum."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from agent_memory import ranking

NOW = datetime.now(timezone.utc)
PRIORITY = {"session": 1.0, "project": 0.8, "user": 0.6, "team": 0.4, "org": 0.2}


def scoring(keyword: float, **kwargs) -> ranking.Scoring:
    return ranking.Scoring(ranking.Weights(similarity=0.5, confidence=0.3, scope=0.2, keyword=keyword), PRIORITY,
                           **kwargs)


def row(id, similarity, confidence=1.0, priority=0.6, tsv="", age=0):
    return {"id": id, "similarity": similarity, "confidence": confidence, "scope_priority": priority,
            "tsv": tsv, "created_at": NOW - timedelta(seconds=age)}


def test_parse_tsvector_counts_positions_and_unquotes():
    assert ranking.parse_tsvector("'cat':2,5 'it''s':1 'sat':3A") == {"cat": 2, "it's": 1, "sat": 1}
    assert ranking.parse_tsvector("") == {}


def test_bm25_rewards_rare_terms_and_term_frequency():
    docs = [{"postgres": 1, "db": 1}, {"db": 2}, {"cat": 1}]
    df = {"postgres": 1, "db": 50}
    scores = ranking.bm25_scores(docs, ["postgres", "db"], df, n_docs=100)
    assert scores[0] > scores[1] > scores[2] == 0.0


def test_without_keyword_weight_the_spec_formula_is_exact():
    w = scoring(0.0)
    ranked = ranking.rank([row("a", 0.9, 0.8, 0.6), row("b", 0.7, 1.0, 1.0)], scoring=w, k=2)
    assert [r[0]["id"] for r in ranked] == ["b", "a"]
    assert ranked[0][1] == pytest.approx(0.7 * 0.5 + 1.0 * 0.3 + 1.0 * 0.2)
    assert ranked[1][1] == pytest.approx(0.9 * 0.5 + 0.8 * 0.3 + 0.6 * 0.2)


def test_keyword_evidence_lifts_an_exact_term_match():
    w = scoring(0.5)
    rows = [row("semantic", 0.6, tsv="'weekly':1 'sync':2"), row("exact", 0.45, tsv="'qzx-7741':4 'cluster':2")]
    ranked = ranking.rank(rows, scoring=w, query_terms=["qzx-7741"], df={"qzx-7741": 1}, n_docs=500, k=2)
    assert ranked[0][0]["id"] == "exact" and ranked[0][3] > 0 and ranked[1][3] == 0


def test_ties_go_to_the_newer_memory_and_k_truncates():
    w = scoring(0.0)
    ranked = ranking.rank([row("old", 0.5, age=100), row("new", 0.5, age=1), row("low", 0.1)], scoring=w, k=2)
    assert [r[0]["id"] for r in ranked] == ["new", "old"]


def test_min_relevance_filters_before_the_cut():
    w = scoring(0.0)
    rows = [row("strong", 0.8, confidence=0.7), row("weak", 0.1, confidence=1.0, priority=1.0),
            row("medium", 0.4, confidence=0.7)]
    assert [r[0]["id"] for r in ranking.rank(rows, scoring=w, k=2)] == ["strong", "weak"]
    assert [r[0]["id"] for r in ranking.rank(rows, scoring=w, k=2, min_relevance=0.3)] == ["strong", "medium"]


def test_scoring_is_read_from_the_config_once_and_validated():
    """The one scoring rule: its weights, level priorities and keyword form come from the config,
    so the SQL statements and the Python ranking cannot disagree on a default."""
    from agent_memory import MemoryConfig

    config = MemoryConfig.defaults(keyword_weight=0.3, keyword_norm="squash", weight_salience=0.1)
    s = ranking.Scoring.from_config(config)
    assert (s.weights.keyword, s.keyword_norm, s.weights.salience, s.coverage) == (0.3, "squash", 0.1, False)
    assert dict(s.scope_priority) == dict(config.scope_priority)
    assert s.vector_weight == pytest.approx(config.weight_similarity * 0.7)
    assert s.keyword_weight == pytest.approx(config.weight_similarity * 0.3)
    assert s.keyword(5.0, 10.0) == pytest.approx(ranking.squash(5.0))
    assert s.with_weights(keyword=0).keyword_weight == 0 and s.weights.keyword == 0.3
    assert ranking.Scoring.from_config(MemoryConfig.defaults()).keyword(5.0, 10.0) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="keyword_norm must be one of"):
        scoring(0.4, keyword_norm="bm25")
    with pytest.raises(ValueError, match="k1 and half must be positive"):
        scoring(0.4, half=0)


def test_the_contexts_words_count_only_for_a_memory_that_keeps_its_context():
    """Keyword evidence over the context (issue 29) mixes in by ``context_keyword`` for a row with a
    context (``context_similarity`` not None), exactly as the formula says; a row without one ranks
    on its own words whatever its ``context_tsv`` holds."""
    w = scoring(0.4, context=0.0, context_keyword=0.5)
    df, n = {"lake": 2, "cabin": 1}, 10
    turn = {**row("turn", 0.3, tsv="'lake':1"), "context_similarity": 0.3, "context_tsv": "'cabin':1 'lake':1"}
    bare = {**row("bare", 0.3, tsv="'lake':1"), "context_similarity": None, "context_tsv": "'cabin':1 'lake':1"}
    ranked = ranking.rank([turn, bare], scoring=w, query_terms=["cabin", "lake"], df=df, n_docs=n, k=2)
    assert [r[0]["id"] for r in ranked] == ["turn", "bare"]
    ceiling = ranking.bm25_ceiling(["cabin", "lake"], df, n)
    own = ranking.bm25_scores([{"lake": 1}], ["cabin", "lake"], df, n)[0] / ceiling
    assert ranked[0][3] == ranked[1][3] == pytest.approx(own)  # ``keyword`` reports the memory's own
    mixed = own + 0.5 * (1.0 - own)  # the context holds every query word: coverage 1
    assert ranked[0][1] - ranked[1][1] == pytest.approx(0.5 * 0.4 * (mixed - own))
    assert w.mixed_keyword(0.2, None) == 0.2 and w.mixed_keyword(0.2, 0.6) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="context_keyword"):
        scoring(0.4, context_keyword=1.5)
