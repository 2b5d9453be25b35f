"""Rank metrics as small pure functions over the judged documents each query retrieved.

The numpy core of scoring, without pandas, so that `python -m sweep.evaluate` starts quickly: a
run and its judgments come in as integer arrays, `RankedJudgments.join` finds the judged
documents among the retrieved ones (one hash join for all queries), and each metric is a few
array operations over those hits. Sums per query are `np.bincount` with weights, taken in rank
order, so they add up exactly as running sums over the ranks do; no Python loop runs per query.
Definitions follow trec_eval (docs/concepts/metrics.md). The metrics' names, directions
and labels are declared in `registry`, which takes each rank metric's formula from its docstring here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from sweep.errors import InputError

log = logging.getLogger(__name__)

GAINS = ("linear", "exponential")
ABSTAIN_CORRECT = "abstain/correct_rate"  # unanswerable questions that got an empty result
ABSTAIN_FALSE = "abstain/false_rate"  # answerable questions that got an empty result


@dataclass(frozen=True)
class RankedJudgments:
    """Every judged document a run retrieved, at its rank; one query per golden question.

    `hit_query`, `hit_rank` (1-based) and `hit_grade` describe one retrieved judged document
    each (grade 0 and negative grades included), sorted by query, then rank as retrieved.
    `ideal_query` and `ideal_grade` hold each query's positive grades, sorted by query, then grade
    descending: the ideal ranking; `n_graded_zero` counts each query's judgments of grade 0.
    `top_score` is NaN for an empty result. With `condensed` (trec_eval -J), the metrics rank each
    hit among its query's judged documents only (`scored_rank`); `hit_rank`, `n_retrieved` and
    `top_score` still describe the ranking as retrieved."""

    n_queries: int
    hit_query: np.ndarray
    hit_rank: np.ndarray
    hit_grade: np.ndarray  # float
    ideal_query: np.ndarray
    ideal_grade: np.ndarray  # float
    n_graded_zero: np.ndarray
    n_retrieved: np.ndarray
    top_score: np.ndarray
    relevance_level: int = 1  # binary metrics count grade >= this as relevant
    gain: str = "linear"  # nDCG gain: grade (trec_eval) or 2**grade - 1
    condensed: bool = False  # unjudged documents left out of the ranking the metrics score

    def __post_init__(self) -> None:
        if self.gain not in GAINS:
            raise InputError(f"gain {self.gain!r} is not one of {', '.join(GAINS)}")
        if (
            isinstance(self.relevance_level, bool)
            or not isinstance(self.relevance_level, (int, np.integer))
            or self.relevance_level < 1
        ):
            raise InputError(f"relevance level {self.relevance_level!r} must be an integer >= 1")

    @classmethod
    def join(
        cls,
        n_queries: int,
        query_row: np.ndarray,
        run_query: np.ndarray,
        run_doc: np.ndarray,
        run_score: np.ndarray,
        judged_query: np.ndarray,
        judged_doc: np.ndarray,
        judged_grade: np.ndarray,
        relevance_level: int = 1,
        gain: str = "linear",
    ) -> RankedJudgments:
        """`run_*`: one entry per retrieved document, each query's entries together and in rank
        order; `run_query` numbers the run's queries, and `query_row` gives each of them its row
        0..n_queries-1 (-1: a query the golden set does not have, left out). `judged_*`: one entry
        per judgment, at most one per (row, document), `judged_doc` numbering documents as
        `run_doc` does (-1: never retrieved)."""
        starts = group_starts(run_query)
        rows = query_row[run_query[starts]]
        known = rows >= 0
        n_retrieved = np.zeros(n_queries, np.int64)
        n_retrieved[rows[known]] = np.diff(np.r_[starts, len(run_query)])[known]
        top_score = np.full(n_queries, np.nan)
        top_score[rows[known]] = run_score[starts[known]]
        first_row = np.zeros(n_queries, np.int64)
        first_row[rows[known]] = starts[known]

        # the join on (run query, document): judgments of questions the run left out cannot match
        run_query_of = np.full(n_queries, -1, np.int64)
        run_query_of[query_row[query_row >= 0]] = np.flatnonzero(query_row >= 0)
        judged_run_query = run_query_of[judged_query]
        retrieved = (judged_doc >= 0) & (judged_run_query >= 0)
        n_docs = int(max(run_doc.max(initial=-1), judged_doc.max(initial=-1))) + 1
        # int32 keys when they fit: half the memory traffic
        key_type = np.int32 if len(query_row) * n_docs <= np.iinfo(np.int32).max else np.int64
        judged_key = (judged_run_query[retrieved] * n_docs + judged_doc[retrieved]).astype(key_type)
        by_key = np.argsort(judged_key, kind="stable")  # near linear: judgments come query by query
        run_key = run_query.astype(key_type)  # in place from here: one array of the run's length, not three
        run_key *= n_docs
        run_key += run_doc
        hit_row, position = _lookup(judged_key[by_key], run_key)
        hit_query = query_row[run_query[hit_row]]

        positive = judged_grade > 0
        ideal_query, ideal_grade = judged_query[positive], judged_grade[positive]
        top = ideal_grade.max(initial=0)
        ideal = np.argsort(ideal_query * (top + 1) + (top - ideal_grade), kind="stable")  # query, then grade descending
        return cls(
            n_queries,
            hit_query,
            hit_row - first_row[hit_query] + 1,
            judged_grade[retrieved][by_key][position].astype(float),
            ideal_query[ideal],
            ideal_grade[ideal].astype(float),
            np.bincount(judged_query[judged_grade == 0], minlength=n_queries),
            n_retrieved,
            top_score,
            relevance_level,
            gain,
        )

    @cached_property
    def scored_rank(self) -> np.ndarray:
        """Each hit's rank in the ranking the metrics score: as retrieved, or when condensed its
        place among its query's judged documents (the hits are exactly those)."""
        return _ordinals(self.hit_query) if self.condensed else self.hit_rank

    @cached_property
    def relevant(self) -> tuple[np.ndarray, np.ndarray]:
        """(query, rank) of each relevant hit (grade >= relevance_level), sorted as the hits are."""
        keep = self.hit_grade >= self.relevance_level
        return self.hit_query[keep], self.scored_rank[keep]

    @cached_property
    def n_relevant(self) -> np.ndarray:
        return np.bincount(self.ideal_query[self.ideal_grade >= self.relevance_level], minlength=self.n_queries)

    @cached_property
    def n_nonrelevant(self) -> np.ndarray:
        """Judged documents graded 0 up to below the relevance level, per query; a negative grade
        (trec_eval's -1: pooled but not judged) is neither relevant nor non-relevant."""
        below = self.ideal_query[self.ideal_grade < self.relevance_level]
        return self.n_graded_zero + np.bincount(below, minlength=self.n_queries)

    def relevant_within(self, k: int | None) -> np.ndarray:
        """|top-k ∩ R| per query."""
        return _sum_within(*self.relevant, k, None, self.n_queries)

    @cached_property
    def first_relevant_rank(self) -> np.ndarray:
        """1-based rank of the first relevant document; 0 when there is none."""
        query, rank = self.relevant
        first = group_starts(query)
        out = np.zeros(self.n_queries, np.int64)
        out[query[first]] = rank[first]
        return out

    @cached_property
    def precision_at_relevant(self) -> np.ndarray:
        """Precision at each relevant hit's rank: relevant documents so far / rank."""
        query, rank = self.relevant
        return _ordinals(query) / rank

    def precision_sum(self, k: int | None) -> np.ndarray:
        """Σ precision at each relevant rank within k, per query: AP's numerator."""
        return _sum_within(*self.relevant, k, self.precision_at_relevant, self.n_queries)

    @cached_property
    def discount(self) -> np.ndarray:
        """1 / log2(rank + 1) for ranks 1..n, one table for the run's and the ideal ranking."""
        n = max(int(self.n_retrieved.max(initial=0)), int(np.bincount(self.ideal_query).max(initial=0)), 1)
        return 1.0 / np.log2(np.arange(2, n + 2))

    @cached_property
    def discounted_gain(self) -> np.ndarray:
        """gain(grade) / log2(rank + 1) at each hit."""
        return self._gain(self.hit_grade) * self.discount[self.scored_rank - 1]

    def dcg(self, k: int | None) -> np.ndarray:
        return _sum_within(self.hit_query, self.scored_rank, k, self.discounted_gain, self.n_queries)

    @cached_property
    def ideal_rank(self) -> np.ndarray:
        """1-based rank of each grade in its query's ideal ranking."""
        return _ordinals(self.ideal_query)

    @cached_property
    def ideal_discounted_gain(self) -> np.ndarray:
        return self._gain(self.ideal_grade) * self.discount[self.ideal_rank - 1]

    def idcg(self, k: int | None) -> np.ndarray:
        return _sum_within(self.ideal_query, self.ideal_rank, k, self.ideal_discounted_gain, self.n_queries)

    def _gain(self, grades: np.ndarray) -> np.ndarray:
        positive = np.maximum(grades, 0.0)  # trec_eval: non-positive grades add nothing
        return positive if self.gain == "linear" else np.exp2(positive) - 1.0


def _sum_within(
    query: np.ndarray, rank: np.ndarray, k: int | None, weights: np.ndarray | None, n_queries: int
) -> np.ndarray:
    """Per query: how many of its entries rank in the top k (all of them for k None), or the sum
    of their `weights`, added up in the entries' order."""
    if k is not None:
        top = rank <= k
        query, weights = query[top], None if weights is None else weights[top]
    return np.bincount(query, weights, minlength=n_queries)


def group_starts(query: np.ndarray) -> np.ndarray:
    """Where each query's entries begin, in an array that has them together."""
    return np.r_[0, np.flatnonzero(query[1:] != query[:-1]) + 1] if len(query) else np.zeros(0, np.int64)


def _ordinals(query: np.ndarray) -> np.ndarray:
    """1, 2, ... along each query's entries, in an array that has them together."""
    starts = group_starts(query)
    return np.arange(1, len(query) + 1) - np.repeat(starts, np.diff(np.r_[starts, len(query)]))


# 2**width / golden ratio: multiplying by it scatters keys over the top bits
_FIBONACCI = {np.dtype(np.int32): np.uint32(0x9E3779B9), np.dtype(np.int64): np.uint64(0x9E3779B97F4A7C15)}


def _lookup(keys: np.ndarray, probes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices of the `probes` found in the sorted, distinct `keys`, their positions in `keys`);
    keys and probes are both int32 or both int64.

    A run retrieves more documents than it has judgments, so most probes are misses: a bitmap
    over hashed keys (a one-hash Bloom filter, at most ~6% false positives) rules them out in a
    few array passes, and only the rest are binary-searched."""
    bits = int(np.clip(np.ceil(np.log2(16 * max(len(keys), 1))), 10, 26))
    maybe = np.zeros(1 << bits, bool)
    maybe[_slots(keys, bits)] = True
    candidates = np.flatnonzero(maybe[_slots(probes, bits)])
    position = np.searchsorted(keys, probes[candidates]).clip(max=len(keys) - 1)
    found = keys[position] == probes[candidates]
    return candidates[found], position[found]


def _slots(keys: np.ndarray, bits: int) -> np.ndarray:
    """Fibonacci hashing: the top `bits` bits of key * 2**width / golden ratio."""
    multiplier = _FIBONACCI[keys.dtype]
    slots = keys.view(multiplier.dtype) * multiplier
    slots >>= multiplier.dtype.type(8 * keys.itemsize - bits)
    return slots


def _divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0 (trec_eval's convention)."""
    denominator = np.asarray(denominator, dtype=float)
    return np.divide(numerator, denominator, out=np.zeros(len(denominator)), where=denominator > 0)


# ---------------------------------------------------------------- the metrics
# k=None means "the whole ranking"; R is the set of documents with grade >= relevance_level.


def recall(r: RankedJudgments, k: int) -> np.ndarray:
    """|top-k ∩ R| / |R|."""
    return _divide(r.relevant_within(k), r.n_relevant)


def precision(r: RankedJudgments, k: int) -> np.ndarray:
    """|top-k ∩ R| / k, dividing by k even when fewer were returned."""
    return r.relevant_within(k) / k


def hit(r: RankedJudgments, k: int) -> np.ndarray:
    """1 if any relevant document is in the top k."""
    return (r.relevant_within(k) > 0).astype(float)


def mrr(r: RankedJudgments, k: int | None = None) -> np.ndarray:
    """1 / rank of the first relevant document (within the top k), else 0."""
    rank = r.first_relevant_rank
    within = (rank > 0) if k is None else (rank > 0) & (rank <= k)
    return np.where(within, 1.0 / np.maximum(rank, 1), 0.0)


def ndcg(r: RankedJudgments, k: int | None = None) -> np.ndarray:
    """DCG@k / IDCG@k with DCG@k = Σ_{i <= k} gain(grade_i) / log2(i + 1), the ideal ranking
    built from every judged grade."""
    return _divide(r.dcg(k), r.idcg(k))


def average_precision(r: RankedJudgments, k: int | None = None) -> np.ndarray:
    """Σ precision at each relevant rank within k, divided by |R|."""
    return _divide(r.precision_sum(k), r.n_relevant)


def r_precision(r: RankedJudgments, k: None = None) -> np.ndarray:
    """|top-|R| ∩ R| / |R|: precision at rank |R|."""
    query, rank = r.relevant
    at_r = rank <= np.maximum(r.n_relevant, 1)[query]
    return _divide(np.bincount(query[at_r], minlength=r.n_queries), r.n_relevant)


def bpref(r: RankedJudgments, k: None = None) -> np.ndarray:
    """Σ over the relevant documents retrieved, r, of 1 - min(n_r, |R|) / min(|R|, |N|), divided by
    |R|: n_r the judged non-relevant documents ranked above r, N every judged document graded below
    the relevance level. Unjudged documents count for nothing, so holes do not lower it (trec_eval)."""
    nonrelevant = (r.hit_grade >= 0) & (r.hit_grade < r.relevance_level)
    above = np.cumsum(nonrelevant) - nonrelevant  # over all queries: less those above each query's first hit
    starts = group_starts(r.hit_query)
    above -= np.repeat(above[starts], np.diff(np.r_[starts, len(above)]))
    query, _ = r.relevant
    n_relevant = r.n_relevant[query]
    # a non-relevant document ranks above a relevant one only where N > 0: no division by 0
    wrong = np.minimum(above[r.hit_grade >= r.relevance_level], n_relevant) / np.maximum(
        np.minimum(n_relevant, r.n_nonrelevant[query]), 1
    )
    return _divide(np.bincount(query, 1.0 - wrong, minlength=r.n_queries), r.n_relevant)


def judged(r: RankedJudgments, k: int) -> np.ndarray:
    """|top-k ∩ J| / min(k, |run|), J every judged document (any grade, 0 included): the share of
    the documents a reader sees that someone judged. Below 1 the other metrics count unjudged
    documents as irrelevant, so a better system may score worse (a hole to pool and label).
    Unlike ir_measures' Judged@k (/ k), a short ranking is not penalised; NaN for an empty one.
    Always of the ranking as retrieved, condensed or not: the holes a condensed list steps over."""
    shown = np.minimum(r.n_retrieved, k).astype(float)
    counted = _sum_within(r.hit_query, r.hit_rank, k, None, r.n_queries)
    return np.divide(counted, shown, out=np.full(r.n_queries, np.nan), where=shown > 0)


# ---------------------------------------------------------------- per question and means


def answerable_means(values: Mapping[str, np.ndarray], answerable: np.ndarray) -> dict[str, float]:
    """Each rank metric averaged over the answerable questions."""
    return {name: _mean(column[answerable]) for name, column in values.items()}


def abstention_rates(abstained: np.ndarray, answerable: np.ndarray, names: Sequence[str]) -> dict[str, float]:
    """The share of unanswerable questions with an empty result (`abstain/correct_rate`) and of
    answerable ones (`abstain/false_rate`), those of `names`."""
    rates = {ABSTAIN_CORRECT: _mean(abstained[~answerable]), ABSTAIN_FALSE: _mean(abstained[answerable])}
    return {name: rates[name] for name in names}


def group_means(
    groups: np.ndarray,
    answerable: np.ndarray,
    abstained: np.ndarray,
    values: Mapping[str, np.ndarray],
    abstain_metrics: Sequence[str],
) -> dict[object, dict[str, float]]:
    """The one per-group aggregation (question types, tags): per group, in sorted order, `n`,
    `answerable` (counts), each rank metric's mean over the group's answerable questions and the
    abstention rates of `abstain_metrics` (NaN where undefined)."""
    out: dict[object, dict[str, float]] = {}
    for group in sorted(set(groups.tolist())):  # a handful of groups, not one pass per question
        rows = groups == group
        means = answerable_means({name: column[rows] for name, column in values.items()}, answerable[rows])
        means |= abstention_rates(abstained[rows], answerable[rows], abstain_metrics)
        out[group] = {"n": int(rows.sum()), "answerable": int(answerable[rows].sum())} | means
    return out


def type_means(
    types: np.ndarray,
    answerable: np.ndarray,
    abstained: np.ndarray,
    values: Mapping[str, np.ndarray],
    abstain_metrics: Sequence[str],
) -> dict[str, float]:
    """`type/<type>/n`, then `type/<type>/<metric>` for the rank metrics and abstention rates,
    types in sorted order (DESIGN's names): `group_means` by type. Undefined means (the recall of
    a type with no answerable question) are left out."""
    out: dict[str, float] = {}
    for qtype, means in group_means(types, answerable, abstained, values, abstain_metrics).items():
        out[f"type/{qtype}/n"] = means.pop("n")
        del means["answerable"]
        out |= {f"type/{qtype}/{name}": value for name, value in means.items() if not np.isnan(value)}
    return out


def _mean(values: np.ndarray) -> float:
    """The mean of the defined values (judged_at_k is undefined for an empty result); NaN if none."""
    defined = values[~np.isnan(values)]
    return float(defined.mean()) if len(defined) else float("nan")


def warn_unknown_queries(run_name: str, golden_source: str, unknown: Sequence[str]) -> None:
    """One warning for the run's queries that the golden set does not have (they are not scored)."""
    if len(unknown):
        log.warning(
            "%s: %d queries are not in the golden set %s and are ignored (first: %r)",
            run_name,
            len(unknown),
            golden_source,
            min(unknown),
        )
