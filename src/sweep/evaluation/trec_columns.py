"""The scorer: a golden set's judgments and a run, both in columns, to every question's metric values, without pandas.

`score_columns` is the one computation of per-question values: `python -m sweep.evaluate --json`
calls it on TREC files read in columns (`sweep.formats.trec`, `Judgments.of_qrels`), and
`sweep.evaluation.scoring.score` on a golden set and a run in memory (trials, calibration, the
readable report), then builds its pandas tables on the `Scores` it returns. Strings are matched
once, by pyarrow's hash join (`index_in`), and the metrics are the numpy core's (`measures`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import pyarrow as pa

from sweep.evaluation.measures import RankedJudgments, abstention_rates, answerable_means, group_starts, type_means
from sweep.evaluation.registry import metric_values, select_metrics
from sweep.formats.columns import Strings, index_in, take
from sweep.formats.lines import UNTYPED
from sweep.formats.trec import Qrels, TrecRun


@dataclass(frozen=True)
class Judgments:
    """A golden set as the scorer reads it: its questions in golden order, one row per judgment."""

    ids: pa.StringArray  # question ids, distinct
    types: np.ndarray  # each question's type
    answerable: np.ndarray  # whether each question has a document graded 1 or more
    question: np.ndarray  # each judgment's question: its position in `ids`
    docid: Strings  # each judgment's document (its dictionary may hold a string more than once)
    grade: np.ndarray  # each judgment's grade

    @classmethod
    def of_qrels(cls, qrels: Qrels) -> Judgments:
        """TREC qrels as `load_golden` reads them: one untyped question per query, in qid order."""
        positions = qrels.qid.sorted_positions()
        question = positions[qrels.qid.codes]
        answerable = np.zeros(len(positions), bool)
        answerable[question[qrels.grade >= 1]] = True
        return cls(
            take(qrels.qid.dictionary, np.argsort(positions)),
            np.full(len(positions), UNTYPED, dtype=object),
            answerable,
            question,
            qrels.docid,
            qrels.grade,
        )


@dataclass(frozen=True)
class Scores:
    """Every question's results, in golden order."""

    ids: pa.StringArray  # the questions' ids
    types: np.ndarray
    answerable: np.ndarray
    n_retrieved: np.ndarray  # documents the run returned for the question
    top_score: np.ndarray  # the score of its first document, NaN for an empty result
    values: dict[str, np.ndarray]  # rank metric -> value per question, NaN for unanswerable questions
    abstain_metrics: tuple[str, ...]
    unknown_queries: list[str]  # the run's queries that are not questions: not scored
    tied: TiedAtCutoff | None = None  # tied scores a cutoff splits, with a relevant document among them (when asked)

    @cached_property
    def qids(self) -> list[str]:
        return self.ids.to_pylist()

    @cached_property
    def abstained(self) -> np.ndarray:
        """1.0 for an empty result, else 0.0."""
        return (self.n_retrieved == 0).astype(float)

    @cached_property
    def rank_means(self) -> dict[str, float]:
        """Each rank metric over the answerable questions."""
        return answerable_means(self.values, self.answerable)

    @cached_property
    def abstention(self) -> dict[str, float]:
        """The abstention rates asked for."""
        return abstention_rates(self.abstained, self.answerable, self.abstain_metrics)

    def type_means(self, groups: np.ndarray) -> dict[str, float]:
        """`type/<group>/n` and `type/<group>/<metric>` for the rank metrics and abstention, per
        value of `groups` (one per question): `measures.type_means`."""
        return type_means(groups, self.answerable, self.abstained, self.values, self.abstain_metrics)

    def means(self, per_type: bool) -> dict[str, float]:
        """The rank metrics' means and the abstention rates; with `per_type`, the means per type."""
        return self.rank_means | self.abstention | (self.type_means(self.types) if per_type else {})


@dataclass(frozen=True)
class TiedAtCutoff:
    """The questions whose documents at a metric's cutoff k and k+1 have the same score, with a
    relevant document among all those that tie and not all of them of one grade: which of them
    fall within the cutoff is the tie rule's choice (trec_eval's: document id, descending), not
    the scores'. The first of them, in golden order, at its smallest such k, as the example."""

    questions: int
    qid: str
    k: int
    first_rank: int  # the ranks the tie spans, 1-based
    last_rank: int
    score: float
    docs: tuple[str, ...]  # the tied documents, in rank order (at most 4)


def score_columns(
    golden: Judgments,
    run: TrecRun,
    metrics: str | Sequence[str] | None = None,
    *,
    relevance_level: int = 1,
    gain: str = "linear",
    ties: bool = False,
    condensed: bool = False,
) -> Scores:
    """Every question of `golden` scored on `run`: `metrics` are names such as "ndcg_at_10,mrr"
    (abstention rates included by name), None for DEFAULT_METRICS and the abstention rates that
    apply. A question the run left out returned nothing (trec_eval -c); a run query that is not a
    question is not scored (`Scores.unknown_queries`). With `ties`, the ties the metrics' cutoffs
    split are looked for (`Scores.tied`: `tied_at_cutoffs`).

    With `condensed` (trec_eval -J, ir_measures' judged-only), the rank metrics score each ranking
    with its unjudged documents removed, and ties are looked for in those rankings. What describes
    the ranking as retrieved stays so: `n_retrieved`, `top_score`, `judged_at_k` and abstention. A
    question whose documents are all unjudged did not abstain: it answered, with nothing we can grade."""
    rank_metrics, abstain_metrics = select_metrics(metrics, has_unanswerable=not golden.answerable.all())
    query_row = index_in(run.qid.dictionary, golden.ids)
    ranked = rank(golden, run, relevance_level, gain, query_row)
    if condensed:
        run, ranked = judged_only(run, ranked, query_row), replace(ranked, condensed=True)
    return Scores(
        golden.ids,
        golden.types,
        golden.answerable,
        ranked.n_retrieved,
        ranked.top_score,
        metric_values(ranked, rank_metrics, golden.answerable),
        abstain_metrics,
        [run.qid.values[code] for code in np.flatnonzero(query_row < 0).tolist()],
        tied_at_cutoffs(golden, run, ranked, query_row, [m.k for m in rank_metrics if m.k]) if ties else None,
    )


def tied_at_cutoffs(
    golden: Judgments, run: TrecRun, ranked: RankedJudgments, query_row: np.ndarray, cutoffs: Sequence[int]
) -> TiedAtCutoff | None:
    """`TiedAtCutoff` for `run` (in trec_eval's order) at `cutoffs`; None when no cutoff splits a
    tie that way. `ranked` ranks its hits as `run` holds them (`scored_rank`). Whole-array operations: first the two documents at each cutoff of each question
    (a few comparisons a question); only where some tie, the run's stretches of equal scores."""
    codes, score = run.qid.codes, run.score
    cutoffs = sorted(set(cutoffs))
    if not cutoffs or len(score) < 2:
        return None
    starts = group_starts(codes)
    sizes = np.diff(np.r_[starts, len(codes)])
    rows = query_row[codes[starts]]  # each run query's question, -1 for none
    found_query, found_k, found_at = [], [], []
    for k in cutoffs:
        deep = np.flatnonzero((sizes > k) & (rows >= 0))
        at = starts[deep] + k - 1  # the row of rank k
        tied = score[at] == score[at + 1]
        found_query.append(deep[tied])
        found_k.append(np.full(int(tied.sum()), k))
        found_at.append(at[tied])
    query, k_of, at = (np.concatenate(parts) for parts in (found_query, found_k, found_at))
    if not len(at):
        return None
    # the stretches of equal scores within a query: each row's stretch, where each starts, how long
    new = np.ones(len(score), bool)
    new[1:] = (codes[1:] != codes[:-1]) | (score[1:] != score[:-1])
    stretch = np.cumsum(new) - 1
    stretch_start = np.flatnonzero(new)
    stretch_size = np.diff(np.r_[stretch_start, len(score)])
    # the judged documents in the stretches found: how many, how many relevant, their grades' range
    candidates = np.unique(stretch[at])
    first_row = np.zeros(ranked.n_queries, np.int64)
    first_row[rows[rows >= 0]] = starts[rows >= 0]
    hit_stretch = stretch[first_row[ranked.hit_query] + ranked.scored_rank - 1]
    position = np.searchsorted(candidates, hit_stretch).clip(max=len(candidates) - 1)
    inside = candidates[position] == hit_stretch
    which, grade = position[inside], ranked.hit_grade[inside]
    n = len(candidates)
    judged = np.bincount(which, minlength=n)
    relevant = np.bincount(which[grade >= ranked.relevance_level], minlength=n)
    low, high = np.full(n, np.inf), np.full(n, -np.inf)
    np.minimum.at(low, which, grade)
    np.maximum.at(high, which, grade)
    one_grade = (judged == stretch_size[candidates]) & (low == high)  # every tied document judged alike
    decides = ((relevant > 0) & ~one_grade)[np.searchsorted(candidates, stretch[at])]
    if not decides.any():
        return None
    question = rows[query[decides]]
    first = np.lexsort((k_of[decides], question))[0]  # golden order, then the smallest k
    row = at[decides][first]
    begin, size = stretch_start[stretch[row]], stretch_size[stretch[row]]
    start = starts[query[decides][first]]
    docs = tuple(run.docid.values[code] for code in run.docid.codes[begin : begin + min(size, 4)].tolist())
    return TiedAtCutoff(
        questions=len(np.unique(question)),
        qid=golden.ids[int(question[first])].as_py(),
        k=int(k_of[decides][first]),
        first_rank=int(begin - start + 1),
        last_rank=int(begin - start + size),
        score=float(score[row]),
        docs=docs,
    )


def judged_only(run: TrecRun, ranked: RankedJudgments, query_row: np.ndarray) -> TrecRun:
    """The condensed run: `run` with only the documents `ranked` found judged, in their order."""
    starts = group_starts(run.qid.codes)
    rows = query_row[run.qid.codes[starts]]
    first_row = np.zeros(ranked.n_queries, np.int64)
    first_row[rows[rows >= 0]] = starts[rows >= 0]
    kept = np.sort(first_row[ranked.hit_query] + ranked.hit_rank - 1)  # the run's order: its queries', then rank
    return TrecRun(
        Strings(run.qid.codes[kept], run.qid.dictionary),
        Strings(run.docid.codes[kept], run.docid.dictionary),
        run.score[kept],
    )


def rank(
    golden: Judgments,
    run: TrecRun,
    relevance_level: int = 1,
    gain: str = "linear",
    query_row: np.ndarray | None = None,
) -> RankedJudgments:
    """Every judged document the run retrieved, at its rank, one query per question of `golden`.
    `query_row`, when the caller has it: each run query's question, -1 for none
    (`index_in(run.qid.dictionary, golden.ids)`)."""
    return RankedJudgments.join(
        len(golden.ids),
        index_in(run.qid.dictionary, golden.ids) if query_row is None else query_row,
        run.qid.codes,
        run.docid.codes,
        run.score,
        golden.question,
        index_in(golden.docid.dictionary, run.docid.dictionary)[golden.docid.codes],
        golden.grade,
        relevance_level,
        gain,
    )
