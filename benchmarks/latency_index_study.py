"""The ``--index-study`` of ``latency.py``: exact per-scope scan versus an HNSW index.

Adds one big project, then times pure vector top-k with and without a full and a
partial HNSW index (recall against the exact scan), and saves with the index present.
Separate because it builds and drops its own indexes and runs only on request.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from psycopg import sql
from psycopg_pool import ConnectionPool

from agent_memory import MemoryService, queries
from agent_memory.models import Scope

from latency_bench import Bench
from latency_data import SEED, CachedEmbeddings, Caller, SentenceMaker, save_work
from latency_timing import stats_ms

HNSW_INDEX = "memory_items_embedding_hnsw_bench"
PARTIAL_INDEX = "memory_items_bigproject_hnsw_bench"
#: (label, settings); each runs in its own transaction with SET LOCAL
HNSW_VARIANTS = (
    ("hnsw ef_search=40", {"hnsw.ef_search": "40", "hnsw.iterative_scan": "off"}),
    ("hnsw ef_search=200", {"hnsw.ef_search": "200", "hnsw.iterative_scan": "off"}),
    ("hnsw ef_search=40 strict_order", {"hnsw.ef_search": "40", "hnsw.iterative_scan": "strict_order"}),
    ("hnsw ef_search=40 relaxed_order", {"hnsw.ef_search": "40", "hnsw.iterative_scan": "relaxed_order"}),
)
#: make the HNSW path the only one without a disable penalty, so the planner must take it
FORCE_INDEX = {"enable_seqscan": "off", "enable_bitmapscan": "off", "enable_sort": "off"}


def topk_query(who: Caller, vector: Sequence[float], k: int,
               scopes: Sequence[Scope] | None = None) -> tuple[sql.Composable, dict[str, Any]]:
    """Pure vector top-k under the caller's visibility filter (no scores, no keywords)."""
    filt, params = queries.item_filter(who.identity(), scopes=scopes)
    return (sql.SQL("SELECT m.id, m.embedding <=> %(t_vec)s::vector AS d FROM memory_items m WHERE {f}"
                    " ORDER BY m.embedding <=> %(t_vec)s::vector LIMIT %(t_k)s").format(f=filt),
            dict(params, t_vec=queries.vector_literal(vector), t_k=k))


def run_topk(pool: ConnectionPool, work: Sequence[tuple[Caller, list[float]]], k: int, settings: dict[str, str],
             scopes: Sequence[Scope] | None = None) -> tuple[list[float], list[list[tuple[Any, float]]], str]:
    times, answers = [], []
    with pool.connection() as conn:
        def once(who: Caller, vec: list[float]) -> tuple[float, list[tuple[Any, float]]]:
            with conn.transaction():
                for name, value in settings.items():
                    conn.execute("SELECT set_config(%s, %s, true)", (name, value))
                q, p = topk_query(who, vec, k, scopes)
                t = time.perf_counter()
                # never prepared: a cached generic plan would ignore the settings of later variants
                rows = conn.execute(q, p, prepare=False).fetchall()
                return time.perf_counter() - t, rows

        for who, vec in work[:10]:
            once(who, vec)
        for who, vec in work:
            dt_, rows = once(who, vec)
            times.append(dt_)
            answers.append(rows)
        with conn.transaction():
            for name, value in settings.items():
                conn.execute("SELECT set_config(%s, %s, true)", (name, value))
            q, p = topk_query(*work[0], k, scopes)
            plan = "\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + q, p).fetchall())
    return times, answers, plan


def recall(exact: list[list[tuple[Any, float]]], got: list[list[tuple[Any, float]]], k: int) -> dict[str, float]:
    """Share of the exact top-k found (a row at the k-th exact distance counts, so ties are fair)."""
    scores, short = [], 0
    for ex, g in zip(exact, got):
        if not ex:
            continue
        want = min(k, len(ex))
        kth = ex[want - 1][1]
        scores.append(min(want, sum(1 for _, d in g if d <= kth + 1e-6)) / want)
        short += len(g) < want
    return {"recall": float(np.mean(scores)), "queries_short": short,
            "mean_rows": float(np.mean([len(g) for g in got]))}


def index_study(b: Bench, maker: SentenceMaker, vectors: dict[str, np.ndarray], users: int,
                work_users: Sequence[tuple[Caller, str]], big_n: int, log: Callable[[str], None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    loader = MemoryService(b.pool, config=b.config, embeddings=CachedEmbeddings(vectors))
    big_members = [Caller(f"bench-big-u{i}", "bench-bigproject", f"bench-big-s{i}") for i in range(5)]
    t = time.perf_counter()
    contents = maker.memories("project", big_n)
    user_contents = maker.memories("user", 50 * len(big_members))
    new = [c for c, _ in contents + user_contents]
    CachedEmbeddings(vectors).embed_documents_array(new)  # runs the model once per new text, filling `vectors`
    out["big_project_embed_s"] = time.perf_counter() - t
    log(f"  embedded {len(new)} new distinct sentences for the big project in {out['big_project_embed_s']:.0f} s")
    t = time.perf_counter()
    for i, who in enumerate(big_members):
        mine = [{"content": c, "memory_type": mt, "scope": "project"} for c, mt in contents[i::len(big_members)]]
        mine += [{"content": c, "memory_type": mt, "scope": "user"} for c, mt in user_contents[i * 50:(i + 1) * 50]]
        for start in range(0, len(mine), 2000):
            loader.for_user(**who.kwargs()).add_many(mine[start:start + 2000])
    with b.pool.connection() as conn:
        conn.execute("VACUUM ANALYZE memory_items")
        out["rows_total"] = conn.execute("SELECT count(*) FROM memory_items").fetchone()[0]
    out["big_project_load_s"] = time.perf_counter() - t
    qtexts = list(b.qvecs)
    per_user = [(who, b.qvecs[q]) for who, q in work_users[:100]]
    big = [(big_members[i % 5], b.qvecs[qtexts[i]]) for i in range(100)]
    out["visible_rows"] = {"per_user_median": float(np.median([b.visible_rows(w) for w, _ in per_user])),
                           "big_project_median": float(np.median([b.visible_rows(w) for w, _ in big]))}
    # the real search path (exact scan) for big-project callers, for scale
    out["big_project_search"] = b.searches([(big_members[i % 5], qtexts[i]) for i in range(100)],
                                           [(big_members[i % 5], qtexts[100 + i]) for i in range(10)])
    out["saves_without_hnsw"] = b.saves(save_work(maker, users, 100, random.Random(SEED + 7)), [], 0,
                                        random.Random(1))["save"]
    cases = {"per_user": per_user, "big_project": big}
    exact: dict[tuple[str, int], Any] = {}
    table: list[dict[str, Any]] = []
    for case, work in cases.items():
        for k in (5, 50):
            times, answers, plan = run_topk(b.pool, work, k, {})
            exact[(case, k)] = answers
            table.append({"case": case, "k": k, "variant": "exact scan (current indexes)", **stats_ms(times),
                          **recall(answers, answers, k), "plan_uses_hnsw": HNSW_INDEX in plan})
    log(f"  building HNSW on {out['rows_total']} rows (m=16, ef_construction=64) ...")
    with b.pool.connection() as conn:
        conn.execute("SET maintenance_work_mem = '1GB'")
        t = time.perf_counter()
        conn.execute(sql.SQL("CREATE INDEX {} ON memory_items USING hnsw (embedding vector_cosine_ops)")
                     .format(sql.Identifier(HNSW_INDEX)))
        out["hnsw_build_s"] = time.perf_counter() - t
        conn.execute("ANALYZE memory_items")
        out["hnsw_size"] = conn.execute("SELECT pg_size_pretty(pg_relation_size(%s::regclass))",
                                        (HNSW_INDEX,)).fetchone()[0]
        out["hnsw_max_scan_tuples"] = conn.execute("SHOW hnsw.max_scan_tuples").fetchone()[0]
    try:
        for case, work in cases.items():
            for k in (5, 50):
                variants = [("planner's choice, ef_search=40", {})]
                variants += [(name, dict(FORCE_INDEX, **s)) for name, s in HNSW_VARIANTS]
                for name, settings in variants:
                    times, answers, plan = run_topk(b.pool, work, k, settings)
                    table.append({"case": case, "k": k, "variant": name, **stats_ms(times),
                                  **recall(exact[(case, k)], answers, k), "plan_uses_hnsw": HNSW_INDEX in plan})
        who, q = work_users[0]
        out["search_plan_uses_hnsw"] = any(HNSW_INDEX in p for p in b.explain(who, q).values())
        out["saves_with_hnsw"] = b.saves(save_work(maker, users, 100, random.Random(SEED + 8)), [], 0,
                                         random.Random(2))["save"]
        # A partial index over the one big scope leaves HNSW no filter to lose rows to; it serves a
        # query on that scope alone (the visible filter's OR of scopes can't use it).
        with b.pool.connection() as conn:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(HNSW_INDEX)))
            t = time.perf_counter()
            conn.execute(sql.SQL("CREATE INDEX {} ON memory_items USING hnsw (embedding vector_cosine_ops)"
                                 " WHERE scope = 'project' AND scope_id = 'bench-bigproject'")
                         .format(sql.Identifier(PARTIAL_INDEX)))
            out["partial_build_s"] = time.perf_counter() - t
            conn.execute("ANALYZE memory_items")
        project = (Scope.PROJECT,)
        for k in (5, 50):
            scope_exact: list[list[tuple[Any, float]]] = []
            for name, settings in (("exact scan, project scope only", {"enable_indexscan": "off"}),
                                   ("partial hnsw, ef_search=40", {"hnsw.ef_search": "40"}),
                                   ("partial hnsw, ef_search=100", {"hnsw.ef_search": "100"}),
                                   ("partial hnsw, ef_search=200", {"hnsw.ef_search": "200"})):
                times, got, plan = run_topk(b.pool, big, k, settings, project)
                if name.startswith("exact"):
                    scope_exact = got
                table.append({"case": "big_project, its scope only", "k": k, "variant": name, **stats_ms(times),
                              **recall(scope_exact, got, k), "plan_uses_hnsw": PARTIAL_INDEX in plan})
    finally:
        with b.pool.connection() as conn:
            for index in (HNSW_INDEX, PARTIAL_INDEX):
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index)))
    out["topk"] = table
    return out
