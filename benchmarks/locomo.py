"""LoCoMo retrieval benchmark: Recall@k and MRR of ``MemoryHandle.search``.

Each LoCoMo conversation becomes one memory space (user ``locomo-<sample_id>``);
each dialogue turn one memory, ``"[<session date>] <speaker>: <text>"``, loaded
with the public ``add_transcript`` (each turn keeps its position and the ``--window`` turns
before it as its context), exactly as a user's code would load a conversation. Each question is a query; its evidence turns are the
relevant memories. Categories 1-4 make the "overall" figure, category 5
(adversarial) is reported apart. The data is CC BY-NC: it is read from
``../shared/data/locomo/`` and never copied into this repository.

    python benchmarks/locomo.py [--data PATH] [--keyword-weight W] [--candidate-pool N]
                                [--context-weight W] [--context-keyword-weight K] [--window N]
                                [--context-cv W[:K],W[:K],...]
                                [--limit-conversations N] [--dsn DSN] [--json OUT] [--sweep] [--cv]

By default a throwaway embedded PostgreSQL is started in a temporary directory.
``--sweep`` loads the data once, records the candidate rows that
``search_memories`` hands to :func:`agent_memory.ranking.rank` for several
candidate pool sizes, and replays many ranking methods on them in-process
(see :data:`SWEEP_METHODS`). ``--cv`` chooses among ranking settings by
leave-one-conversation-out (:mod:`locomo_cv`); it is how the default ranking was chosen.
``--context-cv`` chooses ``context_weight`` and ``context_keyword_weight`` (issue 29) by
leave-one-conversation-out over the given settings, each question searched through ``search``
under each.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import shlex
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from agent_memory import (
    AgentMemoryError,
    MemoryConfig,
    MemoryService,
    ops,
    queries,
    ranking,
)
from agent_memory.embeddings import LocalEmbeddings
from agent_memory.transcripts import TRANSCRIPT_WINDOW

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO_ROOT / ".." / "shared" / "data" / "locomo" / "locomo-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
OVERALL = (1, 2, 3, 4)
KS = (5, 10, 20)
SEARCH_K = max(KS)
_SESSION_KEY = re.compile(r"session_(\d+)")


# --- the data ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    index: int  # position in the sample's qa list
    text: str
    category: int
    evidence: frozenset[str]


@dataclass
class Conversation:
    sample_id: str
    turns: list[tuple[str, str]]  # (dia_id, memory content)
    questions: list[Question] = field(default_factory=list)
    skipped: int = 0  # questions with no evidence id that matches a turn

    @property
    def user_id(self) -> str:
        return f"locomo-{self.sample_id}"


def turn_content(date: str, turn: Mapping[str, Any]) -> str:
    text = f"[{date}] {turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    return f"{text} [shares {caption}]" if caption else text


def parse_evidence(evidence: Sequence[str], known: set[str]) -> frozenset[str]:
    """Evidence ids, tolerating the malformed ones (``"D8:6; D9:17"``); ids of no turn are dropped."""
    ids = {part for item in evidence for part in re.split(r"[;\s]+", str(item)) if part}
    return frozenset(ids & known)


def load_locomo(path: Path, limit: int | None = None) -> list[Conversation]:
    samples = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for sample in samples[:limit]:
        conv = sample["conversation"]
        sessions = sorted(
            (int(m.group(1)), key) for key in conv if (m := _SESSION_KEY.fullmatch(key))
        )
        turns = [
            (turn["dia_id"], turn_content(conv[f"{key}_date_time"], turn))
            for _, key in sessions for turn in conv[key]
        ]
        c = Conversation(sample["sample_id"], turns)
        known = {dia_id for dia_id, _ in turns}
        for i, qa in enumerate(sample["qa"]):
            evidence = parse_evidence(qa.get("evidence") or (), known)
            if not evidence:
                c.skipped += 1
                continue
            c.questions.append(Question(i, qa["question"], int(qa["category"]), evidence))
        out.append(c)
    return out


def load_into(service: MemoryService, convs: Sequence[Conversation], user_suffix: str = "",
              window: int = TRANSCRIPT_WINDOW) -> dict[str, int]:
    """Load every conversation through the public transcript call, ``add_transcript`` (each turn
    keeps its position and the ``window`` turns before it as context; no dedupe: two turns may say
    the same thing), as a user's code would; returns rejected counts by sample."""
    rejected = {}
    for c in convs:
        result = service.for_user(c.user_id + user_suffix).add_transcript(
            [{"content": content, "metadata": {"dia_id": dia_id}} for dia_id, content in c.turns],
            conversation=c.sample_id, window=window)
        rejected[c.sample_id] = len(result.rejected)
    return rejected


def parse_context_grid(text: str) -> list[tuple[float, float | None]]:
    """``"0.7,0.7:0.5"`` -> ``[(0.7, None), (0.7, 0.5)]``: ``context_weight`` values, each optionally
    with a ``context_keyword_weight`` after a colon (None: the configured one)."""
    out = []
    for part in text.split(","):
        w, _, kw = part.partition(":")
        out.append((float(w), float(kw) if kw else None))
    return out


def setting_name(setting: tuple[float, float | None]) -> str:
    w, kw = setting
    return f"{w:g}" if kw is None else f"{w:g}:{kw:g}"


def context_cv(config: MemoryConfig, embeddings: LocalEmbeddings, convs: Sequence[Conversation], suffix: str,
               settings: Sequence[tuple[float, float | None]]) -> dict[str, Any]:
    """Choose ``context_weight`` (and, where given, ``context_keyword_weight``) by
    leave-one-conversation-out: every question searched (through ``search``, on the loaded
    database) under each setting; per fold the setting with the best overall Recall@10 on the
    other conversations is applied to the held-out one (ties: the smaller weights). Returns the
    per-setting tables, the held-out table, each fold's choice and held-out R@10 (the spread)."""
    by_setting: dict[str, list[Outcome]] = {}
    for setting in settings:
        w, kw = setting
        changes: dict[str, float] = {"context_weight": w}
        if kw is not None:
            changes["context_keyword_weight"] = kw
        with MemoryService(config=config.replace(**changes), embeddings=embeddings) as service:
            by_setting[setting_name(setting)] = evaluate(service, convs, suffix)
        print(f"context {setting_name(setting)}: R@10 {score(by_setting[setting_name(setting)])['overall']['R@10']:.3f}",
              flush=True)
    held: list[Outcome] = []
    folds = []
    for c in convs:
        def train_r10(name: str) -> float:
            return summarize([o for o in by_setting[name] if o.sample_id != c.sample_id and o.category in OVERALL])["R@10"]
        best = max(settings, key=lambda st: (round(train_r10(setting_name(st)), 9), -st[0], -(st[1] or 0.0)))
        out = [o for o in by_setting[setting_name(best)] if o.sample_id == c.sample_id]
        held.extend(out)
        folds.append({"held_out": c.sample_id, "weight": setting_name(best),
                      "R@10": summarize([o for o in out if o.category in OVERALL])["R@10"]})
    by_conversation = {name: {c.sample_id: score([o for o in outs if o.sample_id == c.sample_id]) for c in convs}
                       for name, outs in by_setting.items()}
    return {"weights": {name: score(o) for name, o in by_setting.items()}, "held_out": score(held), "folds": folds,
            "by_conversation": by_conversation}


# --- scoring ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    sample_id: str
    question: int
    category: int
    evidence: frozenset[str]
    retrieved: tuple[str, ...]  # dia_ids, best first

    def recall(self, k: int) -> float:
        return len(self.evidence.intersection(self.retrieved[:k])) / len(self.evidence)

    def reciprocal_rank(self) -> float:
        return next((1.0 / r for r, d in enumerate(self.retrieved, 1) if d in self.evidence), 0.0)


def summarize(outcomes: Sequence[Outcome]) -> dict[str, float]:
    n = len(outcomes)
    out: dict[str, float] = {"n": n}
    for k in KS:
        out[f"R@{k}"] = sum(o.recall(k) for o in outcomes) / n if n else math.nan
    out["MRR"] = sum(o.reciprocal_rank() for o in outcomes) / n if n else math.nan
    return out


def score(outcomes: Sequence[Outcome]) -> dict[str, dict[str, float]]:
    """Per category name, plus ``overall`` (categories 1-4)."""
    table = {name: summarize([o for o in outcomes if o.category == cat]) for cat, name in CATEGORIES.items()}
    table["overall"] = summarize([o for o in outcomes if o.category in OVERALL])
    return table


def evaluate(service: MemoryService, convs: Sequence[Conversation], user_suffix: str = "") -> list[Outcome]:
    outcomes = []
    for c in convs:
        for q in c.questions:
            hits = service.for_user(c.user_id + user_suffix).search(q.text, k=SEARCH_K)
            retrieved = tuple(h.item.metadata["dia_id"] for h in hits)
            outcomes.append(Outcome(c.sample_id, q.index, q.category, q.evidence, retrieved))
    return outcomes


def format_table(table: Mapping[str, Mapping[str, float]]) -> str:
    rows = [f"| {'category':<22} | {'n':>4} | " + " | ".join(f"{m:>5}" for m in (*[f'R@{k}' for k in KS], "MRR")) + " |"]
    rows.append("|" + "-" * 24 + "|" + "-" * 6 + "|" + "|".join(["-" * 7] * (len(KS) + 1)) + "|")
    order = [(name, f"{cat} {name}") for cat, name in CATEGORIES.items() if cat in OVERALL]
    order += [("overall", "overall (1-4)"), ("adversarial", "5 adversarial (apart)")]
    for key, label in order:
        s = table[key]
        cells = " | ".join(f"{s[m]:.3f}" for m in (*[f'R@{k}' for k in KS], "MRR"))
        rows.append(f"| {label:<22} | {int(s['n']):>4} | {cells} |")
    return "\n".join(rows)


# --- the environment --------------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "cpu": cpu or "unknown",
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }


def command_line() -> str:
    return " ".join(shlex.quote(a) for a in ["python", *sys.argv])


@contextmanager
def database(dsn: str | None) -> Iterator[tuple[MemoryConfig, str]]:
    """(base config, user id suffix): a fresh embedded server in a temporary directory, or the given DSN.

    On a given database the users get a random suffix so that runs never mix;
    their rows are left behind, so point it at a scratch database.
    """
    if dsn:
        yield MemoryConfig(database_url=dsn), f"-{uuid.uuid4().hex[:8]}"
        return
    from agent_memory.db.embedded import stop_embedded_server

    with tempfile.TemporaryDirectory(prefix="locomo-bench-") as tmp:
        data_dir = Path(tmp) / "pgdata"
        try:
            yield MemoryConfig(data_dir=data_dir), ""
        finally:
            stop_embedded_server(data_dir)


# --- the sweep: many ranking methods replayed on recorded candidates --------------------------


@dataclass
class Candidates:
    """What ``search_memories`` passed to ``ranking.rank`` for one question."""

    outcome_key: tuple[str, int]
    ids: list[str]
    dia_ids: list[str]
    cosine: list[float]
    tfs: list[dict[str, int]]
    terms: list[str]
    df: dict[str, int]
    n_docs: int


def record_candidates(service: MemoryService, convs: Sequence[Conversation], suffix: str) -> list[Candidates]:
    """Run every question through ``search_memories`` and keep the rows its ranking step saw."""
    seen: list[dict[str, Any]] = []
    original = ranking.rank

    def spy(rows: Sequence[Mapping[str, Any]], **kwargs: Any) -> Any:
        seen.append({"rows": list(rows), **kwargs})
        return original(rows, **kwargs)

    def scan(identity: Any, *, scopes: Any, types: Any, k: int, min_relevance: float,
             keyword_share: float | None = None, **terms: Any) -> Any:
        # the statement with candidate lists of ``pool`` rows (the indexed search keeps only the band
        # around its k-th best, which no other ranking could be replayed on)
        terms.pop("cached", None)
        return queries.search_candidates(queries.item_filter(identity, scopes=scopes, types=types), **terms)

    import locomo_cv

    out = []
    with mock.patch.object(ranking, "rank", spy), mock.patch.object(ops.queries, "indexed_search", scan):
        for c in convs:
            dia = locomo_cv._memory_dia_ids(service, c.user_id + suffix)
            for q in c.questions:
                seen.clear()
                service.for_user(c.user_id + suffix).search(q.text, k=SEARCH_K)
                [call] = seen
                rows = call["rows"]
                out.append(Candidates(
                    (c.sample_id, q.index), [str(r["id"]) for r in rows],
                    [dia[str(r["id"])] for r in rows], [float(r["similarity"]) for r in rows],
                    [ranking.parse_tsvector(r["tsv"] or "") for r in rows],
                    list(call.get("query_terms") or ()), dict(call.get("df") or {}), int(call.get("n_docs") or 0),
                ))
    return out


def _bm25(c: Candidates, k1: float, b: float, avgdl: float | None) -> list[float]:
    if not c.terms:
        return [0.0] * len(c.ids)
    if b == 0:
        return ranking.bm25_scores(c.tfs, c.terms, c.df, c.n_docs, k1=k1)
    # textbook BM25 with length normalisation, which the library dropped; avgdl over the
    # candidates (the library's former behaviour) unless the collection's is given
    lengths = [sum(tf.values()) for tf in c.tfs]
    if avgdl is None:
        avgdl = (sum(lengths) / len(lengths)) or 1.0
    idf = {t: ranking.idf(c.df.get(t, 0), c.n_docs) for t in set(c.terms)}
    return [
        sum(idf[t] * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * dl / avgdl)) for t in c.terms if tf.get(t))
        for tf, dl in zip(c.tfs, lengths)
    ]


def _ranks(values: Sequence[float]) -> list[float]:
    """1-based rank of each value, best (largest) first; zero scores get no rank (inf)."""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    out = [math.inf] * len(values)
    for r, i in enumerate(order, 1):
        if values[i] > 0:
            out[i] = r
    return out


Method = Callable[[Candidates], list[float]]


def fused(kw: float, *, half: float = 5.0, k1: float = 1.2, b: float = 0.75, norm: str = "squash",
          avgdl: Mapping[str, float] | None = None) -> Method:
    """``(1-kw)*cosine + kw*keyword``, keyword = BM25 squashed (absolute) or divided by the candidates' max."""
    def method(c: Candidates) -> list[float]:
        bm = _bm25(c, k1, b, None if avgdl is None else avgdl[c.outcome_key[0]])
        if norm == "squash":
            key = [x / (x + half) if x > 0 else 0.0 for x in bm]
        else:
            top = max(bm, default=0.0) or 1.0
            key = [x / top for x in bm]
        return [(1 - kw) * s + kw * k for s, k in zip(c.cosine, key)]
    return method


def lift(kw: float, *, half: float = 5.0, k1: float = 1.2, b: float = 0.0) -> Method:
    """``cosine + kw*keyword*(1 - cosine)``: keyword evidence only raises relevance (kw=1 is a noisy-OR)."""
    def method(c: Candidates) -> list[float]:
        key = [x / (x + half) if x > 0 else 0.0 for x in _bm25(c, k1, b, None)]
        return [s + kw * k * (1 - s) for s, k in zip(c.cosine, key)]
    return method


def rrf(*, c: float = 60.0, kw: float = 0.5, k1: float = 1.2, b: float = 0.75) -> Method:
    """Reciprocal rank fusion of the cosine and BM25 rankings within the candidates."""
    def method(cand: Candidates) -> list[float]:
        vec = _ranks(cand.cosine)
        key = _ranks(_bm25(cand, k1, b, None))
        return [(1 - kw) / (c + v) + kw / (c + k) for v, k in zip(vec, key)]
    return method


def replay(cands: Sequence[Candidates], method: Method, outcomes: Mapping[tuple[str, int], Outcome]) -> list[Outcome]:
    out = []
    for c in cands:
        scores = method(c)
        # the service breaks ties by newer row then id; one import gives every turn one created_at
        order = sorted(range(len(c.ids)), key=lambda i: (-scores[i], c.ids[i]))[:SEARCH_K]
        o = outcomes[c.outcome_key]
        out.append(Outcome(o.sample_id, o.question, o.category, o.evidence, tuple(c.dia_ids[i] for i in order)))
    return out


def sweep_methods(avgdl: Mapping[str, float]) -> dict[str, Method]:
    """Every method the sweep compares (name -> scoring function over one question's candidates)."""
    methods: dict[str, Method] = {"vector only (kw=0)": fused(0.0), "BM25 only (kw=1)": fused(1.0, b=0.0)}
    for half in (1.0, 2.0, 3.0, 5.0, 10.0):  # the textbook BM25 (b=0.75), squashed
        for kw in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7):
            methods[f"squash h={half:g} kw={kw:g} k1=1.2 b=0.75"] = fused(kw, half=half)
    methods["squash h=5 kw=0.5 k1=1.2 b=0.75 global avgdl"] = fused(0.5, avgdl=avgdl)
    for half in (2.0, 3.0, 5.0, 8.0, 12.0):  # no length normalisation
        for kw in (0.3, 0.4, 0.5, 0.6, 0.7):
            methods[f"squash h={half:g} kw={kw:g} k1=1.2 b=0"] = fused(kw, half=half, b=0.0)
    for b in (0.25, 0.5, 1.0):
        for kw in (0.4, 0.5, 0.6):
            methods[f"squash h=5 kw={kw:g} k1=1.2 b={b:g}"] = fused(kw, b=b)
    for k1 in (0.6, 0.9, 1.5, 2.0):
        methods[f"squash h=5 kw=0.5 k1={k1:g} b=0"] = fused(0.5, k1=k1, b=0.0)
    for kw in (0.5, 0.8, 1.0):
        methods[f"lift h=5 kw={kw:g} k1=1.2 b=0"] = lift(kw)
    for kw in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6):
        methods[f"max-norm kw={kw:g} k1=1.2 b=0.75"] = fused(kw, norm="max")
    for kw in (0.3, 0.5, 0.7):
        methods[f"RRF c=60 kw={kw:g}"] = rrf(kw=kw)
    methods["RRF c=10 kw=0.5"] = rrf(c=10.0)
    return methods


def run_sweep(
    config: MemoryConfig, embeddings: LocalEmbeddings, convs: Sequence[Conversation], suffix: str,
    pools: Sequence[int], outcomes: Mapping[tuple[str, int], Outcome],
) -> dict[str, Any]:
    """Record candidates once per pool, then score every method of :func:`sweep_methods` on them.

    Recording uses keyword_weight 0.5: any weight above 0 fetches the same candidates here
    (every LoCoMo memory has the same confidence and scope), and vector-only ranking finds
    the same top 20 in them as in its own candidates.
    """
    results: dict[str, Any] = {}
    recorded: dict[int, list[Candidates]] = {}
    for pool in pools:
        t0 = time.perf_counter()
        with MemoryService(config=config.replace(candidate_pool=pool, keyword_weight=0.5, keyword_feedback=0),
                           embeddings=embeddings) as service:
            recorded[pool] = record_candidates(service, convs, suffix)
        sizes = [len(c.ids) for c in recorded[pool]]
        print(f"pool {pool}: recorded {len(sizes)} questions, {sum(sizes) / len(sizes):.0f} candidates each, "
              f"{time.perf_counter() - t0:.1f}s", flush=True)
    # a pool at least as large as a conversation holds every row: the collection's average length
    full = recorded[max(pools)]
    avgdl: dict[str, float] = {}
    for c in full:
        if c.outcome_key[0] not in avgdl:
            lengths = [sum(tf.values()) for tf in c.tfs]
            avgdl[c.outcome_key[0]] = sum(lengths) / len(lengths)
    methods = sweep_methods(avgdl)
    # the replay must agree with the service: the library's own settings, replayed, give its answers
    if config.candidate_pool in recorded and not config.keyword_feedback:  # recorded without feedback
        import locomo_cv

        own = locomo_cv.on_candidates(locomo_cv.relevance(config.keyword_weight, config.keyword_norm))
        same = sum(r.retrieved == outcomes[r.sample_id, r.question].retrieved
                   for r in replay(recorded[config.candidate_pool], own, outcomes))
        print(f"replay of the library's ranking matches search_memories on {same}/{len(outcomes)} questions")
    for pool, cands in recorded.items():
        for name, method in methods.items():
            table = score(replay(cands, method, outcomes))
            results[f"pool={pool} {name}"] = {"pool": pool, "method": name, **{
                key: table[key] for key in ("overall", "adversarial")}, "categories": table}
    return results


def format_sweep(results: Mapping[str, Any]) -> str:
    lines = [f"| {'pool':>4} | {'method':<48} | R@5   | R@10  | R@20  | MRR   | cat5 R@10 |",
             "|------|" + "-" * 50 + "|-------|-------|-------|-------|-----------|"]
    for r in sorted(results.values(), key=lambda r: -r["overall"]["R@10"]):
        o = r["overall"]
        lines.append(f"| {r['pool']:>4} | {r['method']:<48} | {o['R@5']:.3f} | {o['R@10']:.3f} | "
                     f"{o['R@20']:.3f} | {o['MRR']:.3f} | {r['adversarial']['R@10']:>9.3f} |")
    return "\n".join(lines)


def run_cv(config: MemoryConfig, embeddings: LocalEmbeddings, convs: Sequence[Conversation], suffix: str,
           outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Record every memory as a candidate of every question, check that replaying the configured
    ranking gives the service's answers, and cross-validate :func:`locomo_cv.families`."""
    import locomo_cv

    t0 = time.perf_counter()
    with MemoryService(config=config, embeddings=embeddings) as service:
        recorded = locomo_cv.record_all(service, convs, suffix, SEARCH_K)
    by_key = {(o.sample_id, o.question): o for o in outcomes}
    own = (locomo_cv.with_shared_feedback(config.keyword_weight, config.keyword_feedback)
           if config.keyword_feedback and config.keyword_norm == "coverage"
           else locomo_cv.relevance(config.keyword_weight, config.keyword_norm))
    same = sum(locomo_cv._retrieve(r, own(r), SEARCH_K) == by_key[r.key].retrieved for r in recorded)
    print(f"cv: recorded {len(recorded)} questions in {time.perf_counter() - t0:.1f}s; replay of the library's "
          f"ranking matches search_memories on {same}/{len(recorded)} questions", flush=True)
    drift = locomo_cv.attach_vectors(recorded, {c.sample_id: dict(c.turns) for c in convs}, embeddings)
    print(f"cv: vectors embedded again for the centred settings; largest cosine difference {drift:.1e}", flush=True)
    make = lambda o, got: Outcome(o.sample_id, o.question, o.category, o.evidence, got)  # noqa: E731
    results = locomo_cv.cross_validate(recorded, by_key, score, make, SEARCH_K, locomo_cv.families(with_vectors=True))
    results["fusion ceiling"] = locomo_cv.fusion_ceiling(recorded, by_key, score, make)
    results["evidence ranks"] = locomo_cv.evidence_ranks(
        recorded, by_key, {cat: f"{cat} {name}" for cat, name in CATEGORIES.items()})
    return results


# --- the command ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo JSON (default: %(default)s)")
    p.add_argument("--keyword-weight", type=float, default=None, help="MemoryConfig.keyword_weight (default: its default)")
    p.add_argument("--candidate-pool", type=int, default=None, help="MemoryConfig.candidate_pool (default: its default)")
    p.add_argument("--limit-conversations", type=int, default=None, metavar="N", help="use the first N conversations")
    p.add_argument("--dsn", default=None, help="PostgreSQL URL (default: DATABASE_URL, else a temporary embedded server)")
    p.add_argument("--threads", type=int, default=1, help="embedding threads (MemoryConfig.embedding_threads)")
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the results as JSON")
    p.add_argument("--context-weight", type=float, default=None,
                   help="MemoryConfig.context_weight (default: its default)")
    p.add_argument("--window", type=int, default=TRANSCRIPT_WINDOW,
                   help="turns before a turn kept as its context (add_transcript's window; default: %(default)s)")
    p.add_argument("--context-keyword-weight", type=float, default=None,
                   help="MemoryConfig.context_keyword_weight (default: its default)")
    p.add_argument("--context-cv", default=None, metavar="W[:K],W[:K],...",
                   help="choose context_weight (W) and context_keyword_weight (K, default: the configured one)"
                        " among these by leave-one-conversation-out (issue 29)")
    p.add_argument("--sweep", action="store_true", help="compare ranking methods on one loaded database")
    p.add_argument("--cv", action="store_true",
                   help="choose ranking settings leave-one-conversation-out (benchmarks/locomo_cv.py)")
    p.add_argument("--pools", default="20,50,100,1000",
                   help="candidate pools for --sweep; the largest should hold a whole conversation (default: %(default)s)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    data = args.data.expanduser().resolve()
    if not data.is_file():
        sys.exit(f"error: LoCoMo data not found at {data}; pass --data PATH to locomo-dev.json "
                 "(see ../shared/data/locomo/README.md)")
    if args.limit_conversations is not None and args.limit_conversations < 1:
        sys.exit("error: --limit-conversations must be at least 1")
    overrides = {k: v for k, v in (("keyword_weight", args.keyword_weight),
                                   ("candidate_pool", args.candidate_pool),
                                   ("context_weight", args.context_weight),
                                   ("context_keyword_weight", args.context_keyword_weight)) if v is not None}
    try:
        MemoryConfig(embedding_threads=args.threads, **overrides)  # bad values fail here, before any work
        pools = [int(x) for x in args.pools.split(",")]
        if min(pools) < 1:
            raise ValueError(f"--pools must be positive whole numbers, got {args.pools!r}")
        dsn = args.dsn or MemoryConfig.from_env().database_url
    except (AgentMemoryError, ValueError) as exc:
        sys.exit(f"error: {exc}")
    convs = load_locomo(data, args.limit_conversations)
    started = datetime.datetime.now(datetime.timezone.utc)
    report: dict[str, Any] = {
        "command": command_line(), "date": started.isoformat(timespec="seconds"), "machine": machine_info(),
        "data": str(data), "conversations": [c.sample_id for c in convs],
        "turns": sum(len(c.turns) for c in convs), "questions": sum(len(c.questions) for c in convs),
        "skipped_questions": sum(c.skipped for c in convs),
    }
    embeddings = LocalEmbeddings(threads=args.threads)
    with database(dsn) as (base, suffix):
        config = base.replace(embedding_threads=args.threads, **overrides)
        t0 = time.perf_counter()
        with MemoryService(config=config, embeddings=embeddings) as service:
            t_open = time.perf_counter()
            rejected = load_into(service, convs, suffix, window=args.window)
            t_load = time.perf_counter()
            outcomes = evaluate(service, convs, suffix)
            t_search = time.perf_counter()
        table = score(outcomes)
        report.update(
            config={"keyword_weight": config.keyword_weight, "keyword_norm": config.keyword_norm,
                    "context_weight": config.context_weight, "window": args.window,
                    "context_keyword_weight": config.context_keyword_weight,
                    "keyword_feedback": config.keyword_feedback,
                    "candidate_pool": config.candidate_pool,
                    "bm25_k1": ranking.BM25_K1, "bm25_b": ranking.BM25_B, "bm25_half": ranking.BM25_HALF},
            rejected_turns=sum(rejected.values()), results=table,
            seconds={"start": round(t_open - t0, 2), "load": round(t_load - t_open, 2),
                     "search": round(t_search - t_load, 2),
                     "per_query_ms": round(1000 * (t_search - t_load) / max(len(outcomes), 1), 2)},
            outcomes=[{"sample_id": o.sample_id, "question": o.question, "category": o.category,
                       "evidence": sorted(o.evidence), "retrieved": list(o.retrieved)} for o in outcomes],
        )
        if args.sweep:
            by_key = {(o.sample_id, o.question): o for o in outcomes}
            report["sweep"] = run_sweep(config, embeddings, convs, suffix, pools, by_key)
        if args.cv:
            report["cv"] = run_cv(config, embeddings, convs, suffix, outcomes)
        if args.context_cv:
            report["context_cv"] = context_cv(config, embeddings, convs, suffix, parse_context_grid(args.context_cv))

    m = report["machine"]
    print(f"LoCoMo retrieval: {len(convs)} conversations, {report['turns']} turns "
          f"({report['rejected_turns']} rejected by the gate), {report['questions']} questions "
          f"({report['skipped_questions']} skipped: no valid evidence)")
    print(f"config: {json.dumps(report['config'])}")
    print(format_table(table))
    s = report["seconds"]
    print(f"time: start {s['start']}s, load {s['load']}s, search {s['search']}s ({s['per_query_ms']} ms/query)")
    print(f"machine: {m['platform']}, {m['cpu']}, {m['cpu_count']} CPUs, Python {m['python']}")
    print(f"command: {report['command']}")
    print(f"date: {report['date']}")
    if args.sweep:
        print()
        print(format_sweep(report["sweep"]))
    if args.cv:
        import locomo_cv

        cv = dict(report["cv"])
        ceiling, ranks = cv.pop("fusion ceiling"), cv.pop("evidence ranks")
        print()
        print(locomo_cv.format_cv(cv, format_table))
        print()
        print(locomo_cv.format_ceiling(ceiling))
        print(locomo_cv.format_evidence_ranks(ranks))
    if args.context_cv:
        ccv = report["context_cv"]
        for w, t in ccv["weights"].items():
            print(f"\ncontext {w} (context_weight[:context_keyword_weight], every conversation):")
            print(format_table(t))
        print("\ncontext_weight chosen by leave-one-conversation-out, held-out answers:")
        print(format_table(ccv["held_out"]))
        r10 = [f["R@10"] for f in ccv["folds"]]
        print("folds: " + ", ".join(f"{f['held_out']} w={f['weight']} R@10={f['R@10']:.3f}" for f in ccv["folds"]))
        print(f"fold spread (held-out R@10): {min(r10):.3f}-{max(r10):.3f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
