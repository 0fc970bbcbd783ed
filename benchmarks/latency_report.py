"""The markdown report of ``latency.py``: its tables, built from the JSON-able report dict,
and the targets the largest size is judged against.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

TARGET_SEARCH_P95_MS = 15.0
TARGET_SAVE_P95_MS = 30.0


def fmt(s: dict[str, float], keys: Iterable[str] = ("p50", "p95", "p99")) -> str:
    return " / ".join(f"{s[k]:.1f}" for k in keys)


def markdown(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [
        f"Command: `{r['command']}` (code {r['code']})  ",
        f"Date: {r['date']}; machine: {m['nproc']} cores ({m['cpu']}), {m['python']}, {m['postgres']}, "
        f"pgvector {m['pgvector']}, shared_buffers {m['shared_buffers']}; load average before "
        f"{r['loadavg_before']}, after {r['loadavg_after']}.  ",
        f"Data: {r['data']}",
        "",
        "| rows | load s (rows/s) | search end-to-end p50 / p95 / p99 ms | search DB-only p50 / p95 / p99 ms "
        "| DB-only without usage UPDATE | save p50 / p95 / p99 ms | save outcomes |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in r["sizes"]:
        sr, sv = s["search"], s["saves"]
        lines.append(
            f"| {s['rows']:,} | {s['load']['seconds']:.0f} ({s['load']['rows_per_s']:.0f}) | {fmt(sr['end_to_end'])} "
            f"| {fmt(sr['db_only'])} | {fmt(sr['db_only_no_touch'])} | {fmt(sv['save'])} | {sv['outcomes']} |")
    lines += ["", "Where the time goes (p50 / p95 ms; `breakdown` runs the same op statement by statement):", "",
              "| rows | query embedding | search SQL (candidates + BM25 stats) | usage UPDATE | commit "
              "| UPDATE alone, own tx | save: embed | lock | duplicate check | insert | commit |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in r["sizes"]:
        bp, sp = s["search"]["breakdown_parts"], s["saves"]["breakdown_parts"]
        cell = lambda d: fmt(d, ("p50", "p95"))  # noqa: E731
        lines.append(f"| {s['rows']:,} | {cell(s['search']['query_embedding'])} | {cell(bp['candidates'])} "
                     f"| {cell(bp['touch'])} | {cell(bp['commit'])} "
                     f"| {cell(s['touch']['update_tx'])} | " + " | ".join(cell(sp[p]) for p in
                     ("embed", "lock", "duplicate_check", "insert", "commit")) + " |")
    lines += ["", "Machine load per phase (load average at the start; CPU busy over the phase, all processes "
              "/ this Python process only):", "",
              "| phase | rows | seconds | load average | machine busy % | this process % |", "|---|---|---|---|---|---|"]
    lines += [f"| {p['phase']} | {p['rows']:,} | {p['seconds']} | {p['loadavg_start']} | {p['machine_busy_pct']} "
              f"| {p['this_process_pct']} |" for p in r["phases"]]
    last = r["sizes"][-1]
    met = lambda v, t: "met" if v <= t else "NOT met"  # noqa: E731
    lines += ["", f"Targets at {last['rows']:,} rows: search p95 {last['search']['end_to_end']['p95']:.1f} ms "
              f"(target {TARGET_SEARCH_P95_MS:g}: {met(last['search']['end_to_end']['p95'], TARGET_SEARCH_P95_MS)}), "
              f"save p95 {last['saves']['save']['p95']:.1f} ms "
              f"(target {TARGET_SAVE_P95_MS:g}: {met(last['saves']['save']['p95'], TARGET_SAVE_P95_MS)})."]
    if "index_study" in r:
        ix = r["index_study"]
        lines += ["", f"Index study on {ix['rows_total']:,} rows (median visible rows per caller: "
                  f"{ix['visible_rows']['per_user_median']:.0f} for ordinary users, "
                  f"{ix['visible_rows']['big_project_median']:.0f} in the big project). HNSW build "
                  f"{ix['hnsw_build_s']:.0f} s, {ix['hnsw_size']}; partial HNSW on the big project {ix['partial_build_s']:.0f} s; "
                  f"hnsw.max_scan_tuples={ix['hnsw_max_scan_tuples']}. Recall counts a row at the k-th exact "
                  "distance as found.",
                  "", "| case | k | variant | uses HNSW | p50 ms | p95 ms | recall | queries with < k rows | mean rows |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for t in ix["topk"]:
            lines.append(f"| {t['case']} | {t['k']} | {t['variant']} | {'yes' if t['plan_uses_hnsw'] else 'no'} "
                         f"| {t['p50']:.2f} | {t['p95']:.2f} | {t['recall']:.3f} | {t['queries_short']} "
                         f"| {t['mean_rows']:.1f} |")
        bs = ix["big_project_search"]
        lines += ["", f"Real search (DB only) for big-project callers: p50 / p95 / p99 {fmt(bs['db_only'])} ms; "
                  f"search SQL p95 {bs['breakdown_parts']['candidates']['p95']:.2f} ms.  ",
                  f"Save p50 / p95 / p99 without HNSW {fmt(ix['saves_without_hnsw'])} ms, with HNSW "
                  f"{fmt(ix['saves_with_hnsw'])} ms. The search SQL uses the HNSW index: "
                  f"{'yes' if ix['search_plan_uses_hnsw'] else 'no'}."]
    return "\n".join(lines)
