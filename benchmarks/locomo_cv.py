"""Leave-one-conversation-out choice of ranking settings on LoCoMo (``benchmarks/locomo.py --cv``).

A setting tuned on the five dev conversations and scored on the same five flatters itself. Here
each conversation in turn is held out: every *family* of settings (:func:`families`: a grid, or a
single fixed setting) picks its member with the best overall Recall@10 on the other four, and that
member ranks the held-out one's questions. Each question is thus answered by a setting chosen
without it; the pooled held-out answers give the family's table, and the five held-out
conversations' Recall@10 its fold spread.

The rows are recorded once, through ``search_memories`` itself with the indexed statement swapped
for its exact reference (:func:`agent_memory.queries.search_candidates`, the scan the search-index
tests compare against) and a pool larger than a conversation: every memory of the caller is a
candidate, with the cosine, lexemes and BM25 statistics the service ranks with, so each setting
is replayed exactly. Replaying the library's own configured ranking must reproduce the service's
answers (checked and printed).

The families marked *replay only* are not in the library. IDF-chosen word feedback at a lower
weight (pseudo-relevance feedback as RM3 does it) needs the document count of every word of the
best memories before the second search; the library's feedback (``keyword_feedback``) picks
words by how many of the best memories share them instead, and weighs them like the question's.
Neighbour context (a turn's score lifted by its better adjacent turn of the same session) needs an
order among a source's memories, and source context (lifted by the best other turn of its
session) a memory's source in the search index, and neither is stored there. They are measured to
show what such evidence is worth. So are the centred settings (the cosine taken after removing a
share of the caller's mean vector, which needs every row's vector: :func:`attach_vectors` embeds
them again and checks they give the recorded cosines).

Two tables bound what any ranking of these signals could do: :func:`fusion_ceiling` lets each
question pick, with hindsight, its best setting of a wide grid of mixes of the cosine and the
keyword evidence, and :func:`evidence_ranks` says where the evidence memories rank by each signal
alone. A target above the ceiling needs new evidence, not another mix.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import numpy as np

from agent_memory import MemoryService, ops, queries, ranking

__all__ = ["Recorded", "attach_vectors", "centred", "cross_validate", "evidence_ranks", "families", "format_ceiling",
           "format_cv", "format_evidence_ranks", "fusion_ceiling", "on_candidates", "record_all", "relevance",
           "with_keyword_feedback", "with_neighbours", "with_shared_feedback", "with_source_context"]

FOLD_METRIC = "R@10"


@dataclass
class Recorded:
    """Every memory of one question's caller as ``search_memories`` handed it to ``ranking.rank``."""

    key: tuple[str, int]  # (sample_id, question index)
    ids: list[str]
    dia_ids: list[str]
    cosine: np.ndarray
    tfs: list[dict[str, int]]
    terms: list[str]
    df: dict[str, int]
    n_docs: int
    text: str = ""  # the question
    vectors: np.ndarray | None = None  # each row's stored vector (:func:`attach_vectors`)
    query_vector: np.ndarray | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def bm25(self) -> np.ndarray:
        if "bm25" not in self._cache:
            self._cache["bm25"] = np.array(ranking.bm25_scores(self.tfs, self.terms, self.df, self.n_docs))
        return self._cache["bm25"]

    def ceiling(self) -> float:
        return ranking.bm25_ceiling(self.terms, self.df, self.n_docs)

    def sessions(self) -> np.ndarray:
        """Each row's LoCoMo session number: the replay's stand-in for a memory's source."""
        if "sessions" not in self._cache:
            self._cache["sessions"] = np.array([int(d[1:].split(":")[0]) for d in self.dia_ids])
        return self._cache["sessions"]

    def adjacent(self) -> tuple[np.ndarray, np.ndarray]:
        """Index of each row's previous and next turn in the same session (-1: none), from LoCoMo's
        ``D<session>:<turn>`` ids: the replay's stand-in for an order the library does not keep."""
        if "adjacent" not in self._cache:
            where = {d: i for i, d in enumerate(self.dia_ids)}

            def at(d: str, step: int) -> int:
                session, turn = d[1:].split(":")
                return where.get(f"D{session}:{int(turn) + step}", -1)

            self._cache["adjacent"] = (np.array([at(d, -1) for d in self.dia_ids]),
                                       np.array([at(d, +1) for d in self.dia_ids]))
        return self._cache["adjacent"]


def _memory_dia_ids(service: MemoryService, user_id: str) -> dict[str, str]:
    """id -> dia_id of every memory of ``user_id`` (read back page by page)."""
    out: dict[str, str] = {}
    while True:
        page = service.for_user(user_id).list(limit=100, offset=len(out))
        out.update({str(m.id): m.metadata["dia_id"] for m in page})
        if len(page) < 100:
            return out


def record_all(service: MemoryService, convs: Sequence[Any], suffix: str, k: int) -> list[Recorded]:
    """Run every question through ``search_memories`` with every memory of the caller a candidate."""
    seen: list[dict[str, Any]] = []
    original_rank = ranking.rank

    def spy(rows: Sequence[Mapping[str, Any]], **kwargs: Any) -> Any:
        seen.append({"rows": list(rows), **kwargs})
        return original_rank(rows, **kwargs)

    def scan(identity: Any, *, scopes: Any, types: Any, k: int, min_relevance: float,
             keyword_share: float | None = None, **terms: Any) -> Any:
        terms["pool"] = 10 ** 6  # every row is in the vector list
        terms.pop("cached", None)  # the reference reads every row itself
        return queries.search_candidates(queries.item_filter(identity, scopes=scopes, types=types), **terms)

    out = []
    with mock.patch.object(ranking, "rank", spy), mock.patch.object(ops.queries, "indexed_search", scan):
        for c in convs:
            user = c.user_id + suffix
            dia = _memory_dia_ids(service, user)
            for q in c.questions:
                seen.clear()
                service.for_user(user).search(q.text, k=k)
                call = seen[0]  # the question's own lexemes (with word feedback a second call follows)
                rows = call["rows"]
                assert len(rows) == len(dia), "every memory must be a candidate"
                out.append(Recorded(
                    (c.sample_id, q.index), [str(r["id"]) for r in rows], [dia[str(r["id"])] for r in rows],
                    np.array([float(r["similarity"]) for r in rows]),
                    [ranking.parse_tsvector(r["tsv"] or "") for r in rows],
                    list(call.get("query_terms") or ()), dict(call.get("df") or {}), int(call.get("n_docs") or 0),
                    q.text,
                ))
    return out


def attach_vectors(recorded: Sequence[Recorded], turns: Mapping[str, Mapping[str, str]], embeddings: Any) -> float:
    """Give each record its rows' vectors and its question's (embedded again by ``embeddings``, the
    service's model, from ``turns``: sample id -> dia id -> content), for the settings that move
    the query vector. Answers the largest difference between a recomputed and a recorded cosine,
    which must be float noise for the replay to stand for the service."""
    by_sample: dict[str, dict[str, np.ndarray]] = {}
    for sample, contents in turns.items():
        ids = list(contents)
        vectors = np.asarray(embeddings.embed_documents([contents[d] for d in ids]), dtype=np.float64)
        by_sample[sample] = dict(zip(ids, vectors))
    questions = np.asarray(embeddings.embed_documents([r.text for r in recorded]), dtype=np.float64)
    worst = 0.0
    for r, q in zip(recorded, questions):
        r.vectors = np.stack([by_sample[r.key[0]][d] for d in r.dia_ids])
        r.query_vector = q
        worst = max(worst, float(np.max(np.abs(r.vectors @ q - r.cosine))))
    return worst


# --- the settings --------------------------------------------------------------------------------

Method = Callable[[Recorded], np.ndarray]


def relevance(kw: float, norm: str = "coverage", half: float = ranking.BM25_HALF) -> Method:
    """``(1 - kw) * cosine + kw * keyword``, keyword as :func:`agent_memory.ranking.rank` computes it."""
    def method(r: Recorded) -> np.ndarray:
        bm = r.bm25()
        if norm == "coverage":
            ceiling = r.ceiling()
            key = np.minimum(bm / ceiling, 1.0) if ceiling > 0 else np.zeros_like(bm)
        else:
            key = np.where(bm > 0, bm / (bm + half), 0.0)
        return (1 - kw) * r.cosine + kw * key
    return method


def weighted_coverage(kw: float, *, power: float = 1.0, binary: bool = False, names: float = 1.0) -> Method:
    """Coverage with each query lexeme weighted ``idf ** power``, times ``names`` for the lexemes of
    the question's capitalised words after its first (names), and with ``binary`` each held lexeme
    counted once (no term-frequency saturation)."""
    k1 = ranking.BM25_K1

    def method(r: Recorded) -> np.ndarray:
        words = re.findall(r"[A-Za-z']+", r.text)
        capitalised = {w.lower() for w in words[1:] if w[0].isupper()}
        weights = {t: ranking.idf(r.df[t], r.n_docs) ** power
                   * (names if any(w.startswith(t) for w in capitalised) else 1.0)
                   for t in set(r.terms) if r.df.get(t)}
        ceiling = sum(weights.values())
        if not ceiling:
            return (1 - kw) * r.cosine
        held = np.array([sum(w * (1.0 if binary else tf[t] * (k1 + 1) / (tf[t] + k1))
                             for t, w in weights.items() if tf.get(t)) for tf in r.tfs])
        return (1 - kw) * r.cosine + kw * np.minimum(held / ceiling, 1.0)
    return method


def with_keyword_feedback(kw: float, docs: int, terms: int, beta: float) -> Method:
    """Pseudo-relevance feedback on words (replay only): the ``terms`` lexemes not in the question
    with the highest summed IDF over the ``docs`` best memories by coverage at ``kw`` join the
    question at weight ``beta``, and coverage is computed again over the weighted lexemes. IDF
    needs every lexeme's document count, which the replay has (every memory is a candidate) and
    one search statement does not."""
    first = relevance(kw)
    k1 = ranking.BM25_K1

    def method(r: Recorded) -> np.ndarray:
        df, n = _all_df(r), len(r.tfs)
        s = first(r)
        top = sorted(range(len(s)), key=lambda i: (-s[i], r.ids[i]))[:docs]
        mass: dict[str, float] = {}
        for i in top:
            for t in r.tfs[i]:
                if t not in r.terms:
                    mass[t] = mass.get(t, 0.0) + ranking.idf(df[t], n)
        extra = sorted(mass, key=lambda t: (-mass[t], t))[:terms]
        weights = {t: ranking.idf(df[t], n) for t in set(r.terms) if df.get(t)}
        weights.update({t: beta * ranking.idf(df[t], n) for t in extra})
        ceiling = sum(weights.values())
        if not ceiling:
            return s
        held = np.array([sum(w * tf[t] * (k1 + 1) / (tf[t] + k1) for t, w in weights.items() if tf.get(t))
                         for tf in r.tfs])
        return (1 - kw) * r.cosine + kw * np.minimum(held / ceiling, 1.0)
    return method


def _all_df(r: Recorded) -> dict[str, int]:
    """Every lexeme's document count over the caller's rows (every row is a candidate)."""
    if "all_df" not in r._cache:
        counts: dict[str, int] = {}
        for tf in r.tfs:
            for t in tf:
                counts[t] = counts.get(t, 0) + 1
        r._cache["all_df"] = counts
    return r._cache["all_df"]


#: the lexemes of a LoCoMo turn's date prefix (``[1:56 pm on 8 May, 2023]``): numbers, am/pm, months
_DATE_WORD = re.compile(r"[0-9:.]+|pm|am|januari|februari|march|april|may|june|juli|august|septemb|octob|novemb|decemb")


def with_shared_feedback(kw: float, limit: int, docs: int = ranking.FEEDBACK_DOCS,
                         shared: int = ranking.FEEDBACK_SHARED, date_words: bool = True) -> Method:
    """What ``search_memories`` does with ``keyword_feedback=limit``: coverage at ``kw``, then the
    lexemes held by at least ``shared`` of the ``docs`` best memories (not the question's; most
    shared first, then alphabetical; at most ``limit``) join the question, and coverage is
    computed again over all of them (:func:`agent_memory.ranking.feedback_lexemes`). Without
    ``date_words`` the words of the turns' date prefixes may not join (what the gain is made of)."""
    first = relevance(kw)
    k1 = ranking.BM25_K1

    def method(r: Recorded) -> np.ndarray:
        s = first(r)
        top = sorted(range(len(s)), key=lambda i: (-s[i], r.ids[i]))[:docs]
        counts: dict[str, int] = {}
        for i in top:
            for t in r.tfs[i]:
                if t not in r.df and (date_words or not _DATE_WORD.fullmatch(t)):
                    counts[t] = counts.get(t, 0) + 1
        extra = sorted((t for t, c in counts.items() if c >= shared), key=lambda t: (-counts[t], t))[:limit]
        if not extra:
            return s
        df, n = _all_df(r), len(r.tfs)
        weights = {t: ranking.idf(df[t], n) for t in set(r.terms) | set(extra) if df.get(t)}
        ceiling = sum(weights.values())
        held = np.array([sum(w * tf[t] * (k1 + 1) / (tf[t] + k1) for t, w in weights.items() if tf.get(t))
                         for tf in r.tfs])
        return (1 - kw) * r.cosine + kw * np.minimum(held / ceiling, 1.0)
    return method


def with_neighbours(base: Method, lam: float) -> Method:
    """``score + lam * max(score of the previous and the next turn of the same session)`` (replay only)."""
    def method(r: Recorded) -> np.ndarray:
        s = base(r)
        prev, nxt = r.adjacent()
        padded = np.append(s, 0.0)  # index -1: no neighbour
        return s + lam * np.maximum(padded[prev], padded[nxt])
    return method


def with_source_context(base: Method, lam: float) -> Method:
    """``score + lam * (best score of another memory of the same source)``, a LoCoMo session being
    one source (replay only: the search index holds no source)."""
    def method(r: Recorded) -> np.ndarray:
        s = base(r)
        out = s.copy()
        sessions = r.sessions()
        for session in np.unique(sessions):
            idx = np.flatnonzero(sessions == session)
            if len(idx) < 2:
                continue
            top_two = np.sort(s[idx])[-2:]
            out[idx] += lam * np.where(s[idx] == top_two[1], top_two[0], top_two[1])
        return out
    return method


def centred(kw: float, share: float, documents: bool = False) -> Method:
    """Coverage at ``kw`` with the cosine taken after removing ``share`` of the mean of the
    caller's vectors from the question's (and with ``documents``, from every row's too): what all
    of a scope's memories have in common (a date line, a speaker's name, a topic) stops counting
    as similarity (replay only). Moving the query vector alone would cost the search nothing."""
    base = relevance(kw)

    def method(r: Recorded) -> np.ndarray:
        if r.vectors is None or r.query_vector is None:
            raise ValueError("centred settings need attach_vectors() first")
        mean = r.vectors.mean(axis=0)
        q = r.query_vector - share * mean
        rows = r.vectors - share * mean if documents else r.vectors
        cosine = rows @ q / (np.linalg.norm(rows, axis=1) * np.linalg.norm(q))
        return base(r) + (1 - kw) * (cosine - r.cosine)
    return method


def on_candidates(method: Method) -> Callable[[Any], list[float]]:
    """``method`` as a scoring function of ``locomo.Candidates`` (what ``--sweep`` records)."""
    def score(c: Any) -> list[float]:
        return list(method(Recorded(c.outcome_key, c.ids, c.dia_ids, np.asarray(c.cosine), c.tfs, c.terms,
                                    c.df, c.n_docs)))
    return score


def families(with_vectors: bool = False) -> dict[str, dict[str, Method]]:
    """Family -> {setting name -> method}. A one-member family is a fixed setting (no tuning).
    ``with_vectors``: also the settings that need :func:`attach_vectors`."""
    fams: dict[str, dict[str, Method]] = {
        "former default: squash h=5 kw=0.5 (fixed)": {"squash h=5 kw=0.5": relevance(0.5, "squash", 5.0)},
        "vector only (fixed)": {"kw=0": relevance(0.0)},
        "**new default: coverage kw=0.4 (fixed)**": {"coverage kw=0.4": relevance(0.4)},
        "coverage kw=0.4 + word feedback 5 (fixed)": {
            "coverage kw=0.4 + feedback 5": with_shared_feedback(0.4, 5)},
        "coverage kw=0.4 + word feedback 5, no words of the date prefixes (fixed)": {
            "coverage kw=0.4 + feedback 5 without date words": with_shared_feedback(0.4, 5, date_words=False)},
        "coverage kw=0.4 + word feedback (best 3-8 x shared by 2-3 x 3-10 words)": {
            f"coverage kw=0.4 + feedback best={d} shared={m} words={n}": with_shared_feedback(0.4, n, d, m)
            for d in (3, 5, 8) for m in (2, 3) for n in (3, 5, 10)},
        "coverage + word feedback 5 (kw 0.3-0.5)": {
            f"coverage kw={kw:g} + feedback 5": with_shared_feedback(kw, 5) for kw in (0.3, 0.4, 0.5)},
        "squash grid (kw 0.3-0.7 x h 2-12)": {
            f"squash h={h:g} kw={kw:g}": relevance(kw, "squash", h)
            for kw in (0.3, 0.4, 0.5, 0.6, 0.7) for h in (2.0, 3.0, 5.0, 8.0, 12.0)},
        "coverage grid (kw 0.2-0.7)": {
            f"coverage kw={kw:g}": relevance(kw) for kw in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)},
        "coverage, lexemes weighted idf^p (kw 0.4-0.5 x p 1.5-2)": {
            f"coverage kw={kw:g} idf^{p:g}": weighted_coverage(kw, power=p) for kw in (0.4, 0.5) for p in (1.5, 2.0)},
        "coverage, no term frequency (kw 0.3-0.5)": {
            f"coverage kw={kw:g} binary": weighted_coverage(kw, binary=True) for kw in (0.3, 0.4, 0.5)},
        "coverage, names in the question weighted x0.5-3 (kw 0.4)": {
            f"coverage kw=0.4 names x{w:g}": weighted_coverage(0.4, names=w) for w in (0.5, 1.5, 2.0, 3.0)},
        "replay only: coverage + IDF-chosen word feedback at a lower weight (best 3-5 x 3-5 words x 0.2-0.5)": {
            f"coverage kw=0.4 + feedback docs={d} words={n} weight={w:g}": with_keyword_feedback(0.4, d, n, w)
            for d in (3, 5) for n in (3, 5) for w in (0.2, 0.35, 0.5)},
        "replay only: coverage + neighbour context (kw 0.3-0.5 x lam 0.1-1)": {
            f"coverage kw={kw:g} + neighbours lam={lam:g}": with_neighbours(relevance(kw), lam)
            for kw in (0.3, 0.4, 0.5) for lam in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)},
        "replay only: coverage + source context (kw 0.3-0.5 x lam 0.1-0.5)": {
            f"coverage kw={kw:g} + source lam={lam:g}": with_source_context(relevance(kw), lam)
            for kw in (0.3, 0.4, 0.5) for lam in (0.1, 0.2, 0.3, 0.4, 0.5)},
        "replay only: squash h=5 kw=0.5 + neighbour context (lam 0.1-0.6)": {
            f"squash h=5 kw=0.5 + neighbours lam={lam:g}": with_neighbours(relevance(0.5, "squash", 5.0), lam)
            for lam in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)},
    }
    if with_vectors:
        fams["replay only: coverage, question vector centred on the caller's mean (kw 0.3-0.5 x share 0.25-1)"] = {
            f"coverage kw={kw:g} query centred x{a:g}": centred(kw, a)
            for kw in (0.3, 0.4, 0.5) for a in (0.25, 0.5, 0.75, 1.0)}
        fams["replay only: coverage, question and memory vectors centred (kw 0.3-0.5 x share 0.5-1)"] = {
            f"coverage kw={kw:g} all centred x{a:g}": centred(kw, a, documents=True)
            for kw in (0.3, 0.4, 0.5) for a in (0.5, 1.0)}
    return fams


# --- the protocol --------------------------------------------------------------------------------


def _retrieve(r: Recorded, scores: np.ndarray, k: int) -> tuple[str, ...]:
    # the service breaks ties by newer row then id; one import gives every turn one created_at
    order = sorted(range(len(r.ids)), key=lambda i: (-scores[i], r.ids[i]))[:k]
    return tuple(r.dia_ids[i] for i in order)


def cross_validate(
    recorded: Sequence[Recorded], outcomes: Mapping[tuple[str, int], Any], score: Callable[[Sequence[Any]], Any],
    make_outcome: Callable[[Any, tuple[str, ...]], Any], k: int,
    fams: Mapping[str, Mapping[str, Method]] | None = None,
) -> dict[str, Any]:
    """For each family: the setting each fold chose, each held-out conversation's score, and the
    table of the pooled held-out answers (``score`` of them) next to the in-sample best's."""
    fams = families() if fams is None else fams
    samples = sorted({r.key[0] for r in recorded})
    results: dict[str, Any] = {}
    for fam, methods in fams.items():
        answers = {name: [make_outcome(outcomes[r.key], _retrieve(r, m(r), k)) for r in recorded]
                   for name, m in methods.items()}

        def overall(name: str, samples: set[str], answers: Mapping[str, list[Any]] = answers) -> float:
            return score([o for o in answers[name] if o.sample_id in samples])["overall"][FOLD_METRIC]

        held_out, folds = [], []
        for sample in samples:
            rest = set(samples) - {sample}
            chosen = max(methods, key=lambda n, rest=rest: (overall(n, rest), n))
            held_out += [o for o in answers[chosen] if o.sample_id == sample]
            folds.append({"held_out": sample, "chosen": chosen, FOLD_METRIC: overall(chosen, {sample})})
        best = max(methods, key=lambda n: (overall(n, set(samples)), n))
        fold_values = [f[FOLD_METRIC] for f in folds]
        results[fam] = {
            "folds": folds, "table": score(held_out),
            "fold_mean": sum(fold_values) / len(fold_values), "fold_min": min(fold_values),
            "fold_max": max(fold_values),
            "fold_sd": math.sqrt(sum((v - sum(fold_values) / len(fold_values)) ** 2 for v in fold_values)
                                 / max(len(fold_values) - 1, 1)),
            "in_sample_best": best, "in_sample": score(answers[best]),
        }
    return results


def format_cv(results: Mapping[str, Any], format_table: Callable[[Any], str]) -> str:
    lines = [("| family | multi-hop | temporal | open-domain | single-hop | overall R@5 | R@10 | R@20 | MRR |"
              " fold R@10 mean (min-max, sd) | in-sample best: R@10 |"), "|" + "---|" * 11]
    for fam, r in results.items():
        t = r["table"]
        lines.append(
            f"| {fam} | " + " | ".join(f"{t[c]['R@10']:.3f}" for c in ("multi-hop", "temporal", "open-domain", "single-hop"))
            + f" | {t['overall']['R@5']:.3f} | {t['overall']['R@10']:.3f} | {t['overall']['R@20']:.3f}"
            f" | {t['overall']['MRR']:.3f} | {r['fold_mean']:.3f} ({r['fold_min']:.3f}-{r['fold_max']:.3f},"
            f" {r['fold_sd']:.3f}) | {r['in_sample_best']}: {r['in_sample']['overall']['R@10']:.3f} |")
    for fam, r in results.items():
        lines += ["", f"{fam}: held-out answers, per category",
                  "chosen per fold: " + "; ".join(f"{f['held_out']} <- {f['chosen']} ({f[FOLD_METRIC]:.3f})"
                                                  for f in r["folds"]),
                  format_table(r["table"])]
    return "\n".join(lines)


# --- the ceiling of fusion -------------------------------------------------------------------------


def fusion_ceiling(
    recorded: Sequence[Recorded], outcomes: Mapping[tuple[str, int], Any], score: Callable[[Sequence[Any]], Any],
    make_outcome: Callable[[Any, tuple[str, ...]], Any], k: int = 10,
) -> dict[str, Any]:
    """What the best mix of the two signals we have could reach: for each question, with
    hindsight, the setting of a wide grid (coverage at keyword weight 0-1 in steps of 0.05,
    squash at 0.1-0.9 x half 2, 5, 12) that retrieves most of its evidence in the top ``k``.
    No setting of the grid, fixed or chosen per question by any rule, does better than this
    (recall at ``k``): a category whose target lies well above it needs evidence other than the
    cosine and the keywords, not another mix of them."""
    grid = [relevance(kw) for kw in np.linspace(0.0, 1.0, 21)] + [
        relevance(kw, "squash", half) for kw in np.linspace(0.1, 0.9, 9) for half in (2.0, 5.0, 12.0)]
    best = []
    for r in recorded:
        o = outcomes[r.key]
        answers = [_retrieve(r, m(r), k) for m in grid]
        best.append(make_outcome(o, max(answers, key=lambda got: len(o.evidence.intersection(got)))))
    table = score(best)
    return {"k": k, **{category: row[f"R@{k}"] for category, row in table.items()}}


def evidence_ranks(recorded: Sequence[Recorded], outcomes: Mapping[tuple[str, int], Any],
                   categories: Mapping[int, str]) -> dict[str, dict[str, float]]:
    """Where each category's evidence memories rank by the cosine alone and by the keyword
    evidence (BM25) alone, among all of the caller's memories: the share in each list's top 10, in
    either's, and past 100 in both (what no mix of the two can lift)."""
    ranks: dict[str, list[tuple[int, int]]] = {name: [] for name in categories.values()}
    for r in recorded:
        o = outcomes[r.key]
        if o.category not in categories:
            continue
        by = []
        for signal in (r.cosine, r.bm25()):
            order = sorted(range(len(r.ids)), key=lambda i, s=signal: (-s[i], r.ids[i]))
            by.append({r.dia_ids[i]: place for place, i in enumerate(order, 1)})
        ranks[categories[o.category]] += [(by[0][d], by[1][d]) for d in o.evidence]
    out = {}
    for name, pairs in ranks.items():
        a = np.array(pairs, dtype=float).reshape(-1, 2)
        out[name] = {"evidence": len(a), "cosine_top10": float(np.mean(a[:, 0] <= 10)),
                     "keywords_top10": float(np.mean(a[:, 1] <= 10)),
                     "either_top10": float(np.mean(a.min(axis=1) <= 10)),
                     "past100_both": float(np.mean(a.min(axis=1) > 100))}
    return out


def format_evidence_ranks(table: Mapping[str, Mapping[str, float]]) -> str:
    lines = ["| category | evidence memories | in the cosine's top 10 | in the keywords' top 10 | in either's |"
             " past 100 in both |", "|---|---|---|---|---|---|"]
    lines += [f"| {name} | {int(t['evidence'])} | {t['cosine_top10']:.2f} | {t['keywords_top10']:.2f} |"
              f" {t['either_top10']:.2f} | {t['past100_both']:.2f} |" for name, t in table.items()]
    return "\n".join(lines)


def format_ceiling(ceiling: Mapping[str, Any]) -> str:
    return (f"fusion ceiling (each question's best setting of the grid, with hindsight), R@{ceiling['k']}: "
            + ", ".join(f"{c} {ceiling[c]:.3f}" for c in ("multi-hop", "temporal", "open-domain", "single-hop",
                                                          "overall")))
