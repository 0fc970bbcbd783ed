"""The pure parts of ``benchmarks/citus_side_by_side.py``: its exhaustive reference (the scan of
every visible row, without the keyword list Citus cannot plan) still matches the statement it
cuts, and its report reads the plans and numbers it is given. The benchmark itself needs a
cluster and runs by hand (BENCHMARKS.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent_memory import MemoryConfig, queries
from agent_memory.identity import Identity
from agent_memory.ranking import Scoring

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import citus_side_by_side as bench  # noqa: E402


def _reference_text(ids: Identity, scoring: Scoring) -> str:
    q, _ = queries.search_candidates(queries.item_filter(ids, scopes=None, types=None), query_vector=[0.1] * 384,
                                     query_text="coffee budget", pool=10 ** 7, scoring=scoring)
    return q.as_string(None)


def test_the_reference_cuts_only_the_keyword_list():
    text = _reference_text(Identity(user_id="u1", project_id="p1"), Scoring.from_config(MemoryConfig.defaults()))
    cut = bench.KEYWORD_LIST.sub("", text)
    assert cut != text
    assert "CROSS JOIN ceiling" not in cut and "unnest(m.content_tsv)" not in cut
    # the BM25 statistics and the vector list (every visible row, pool unbounded) stay
    assert "stats AS MATERIALIZED" in cut and "LIMIT %(q_pool)s" in cut and "kw_df" in cut


def test_the_reference_stands_in_for_the_indexed_search_on_either_system():
    """What the service calls for a search is, inside ``exhaustive()``, the cut scan with an
    unbounded pool, whatever the cluster flag says."""
    with bench.exhaustive():
        q, params = bench.ops.queries.indexed_search(
            Identity(user_id="u1"), scopes=None, types=None, k=10, min_relevance=0.0, query_vector=[0.1] * 384,
            query_text="coffee budget", pool=20, scoring=Scoring.from_config(MemoryConfig.defaults()), distributed=True)
    text = q.as_string(None)
    assert "CROSS JOIN ceiling" not in text and "stats AS MATERIALIZED" in text
    assert params["q_pool"] == 10 ** 7


def test_task_counts_are_read_from_a_plan():
    plan = "Custom Scan (Citus Adaptive)\n  Task Count: 1\n  ->  Distributed Subplan 1_1\n        Task Count: 32\n"
    assert bench.task_counts(plan) == [1, 32]
    assert bench.task_counts("Seq Scan on memory_items") == []


@pytest.mark.parametrize("with_saves", [True, False])
def test_the_report_says_each_figure_and_the_ratio(with_saves):
    one = {"p50": 4.0, "p95": 5.0, "recall": 1.0, "short": 0, "n": 50}
    two = {"p50": 8.0, "p95": 10.0, "recall": 1.0, "short": 0, "n": 50}
    report = {
        "rows": 1000,
        "load": {"single node": {"seconds": 1, "rows_per_s": 1000}, "cluster": {"seconds": 2, "rows_per_s": 500}},
        "searches": {"100-memory user": {"single node": one, "cluster": two}},
        "statements": {"single node": {"ranking statement": 1.0}, "cluster": {"ranking statement": 3.0}},
        "explain": {"100-memory user": {"task_counts": [1], "plan": "Task Count: 1"}},
    }
    if with_saves:
        save = {"db_p50": 2.0, "db_p95": 3.0, "e2e_p50": 6.0, "e2e_p95": 9.0, "rows_after_16_concurrent_saves": 1}
        report["saves"] = {"single node": save, "cluster": dict(save, db_p95=6.0)}
    text = bench.markdown(report)
    assert "| search, 100-memory user: p50 / p95 ms | 4.0 / 5.0 | 8.0 / 10.0 | 2.00x / 2.00x |" in text
    assert "| search, 100-memory user: recall@10, short | 1.0, 0 of 50 | 1.0, 0 of 50 | |" in text
    assert "rows/s | 1,000 | 500 | 0.50x |" in text
    assert "Task Count [1]" in text
    assert ("save into the project, DB part: p50 / p95 ms | 2.0 / 3.0 | 2.0 / 6.0 | 2.00x (p95)" in text) == with_saves
