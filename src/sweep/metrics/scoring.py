"""Score a run against a golden set: per-query values, then means, groups and worst queries.

Rank metrics are averaged over answerable questions only; unanswerable questions are
scored by abstention (an empty result is the right answer for them). A question missing
from the run returned nothing (trec_eval -c); a run query missing from the golden set is
dropped with one warning.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import pandas as pd

from sweep.golden import GoldenSet
from sweep.metrics.context import CONTEXT_N, ContextScores
from sweep.metrics.measures import Metric, RankedJudgments, parse_metrics
from sweep.runs import Run

log = logging.getLogger(__name__)

ABSTAIN_CORRECT = "abstain/correct_rate"  # unanswerable questions that got an empty result
ABSTAIN_FALSE = "abstain/false_rate"  # answerable questions that got an empty result
ABSTAIN_METRICS = (ABSTAIN_CORRECT, ABSTAIN_FALSE)
HEADLINE = "ndcg_at_10"
DEFAULT_METRICS = (
    "recall_at_1", "recall_at_3", "recall_at_5", "recall_at_10", "recall_at_20", "recall_at_100",
    "precision_at_1", "precision_at_5", "precision_at_10",
    "hit_at_1", "hit_at_5", "hit_at_10",
    "mrr", "mrr_at_10", "ndcg_at_5", "ndcg_at_10", "ndcg_at_20", "map", "map_at_10", "r_precision",
)  # fmt: skip


def rank_judgments(golden: GoldenSet, run: Run, relevance_level: int = 1, gain: str = "linear") -> RankedJudgments:
    """Place every judged grade at its rank, one row per golden question (in golden order)."""
    qids = golden.ids
    frame = run.frame
    row = qids.get_indexer(frame["qid"].cat.categories)[frame["qid"].cat.codes.to_numpy()]
    docs, scores = frame["docid"].cat.codes.to_numpy(), frame["score"].to_numpy()
    if (row < 0).any():  # run queries that are not in the golden set
        known = row >= 0
        row, docs, scores = row[known], docs[known], scores[known]
    n_queries = len(qids)

    starts = np.flatnonzero(np.r_[True, row[1:] != row[:-1]]) if len(row) else np.array([], dtype=np.int64)
    rank = np.arange(len(row)) - np.repeat(starts, np.diff(np.r_[starts, len(row)]))
    n_retrieved = np.bincount(row, minlength=n_queries)

    # grade of each retrieved (query, document): a hash join on one integer key
    judged = golden.judgments
    judged_row = qids.get_indexer(judged["qid"])
    judged_doc = frame["docid"].cat.categories.get_indexer(judged["docid"])  # -1: never retrieved
    judged_grade = judged["grade"].to_numpy(dtype=float)
    n_docs = max(len(frame["docid"].cat.categories), 1)
    retrieved = judged_doc >= 0
    judged_key = pd.Index(judged_row[retrieved].astype(np.int64) * n_docs + judged_doc[retrieved])
    position = judged_key.get_indexer(row.astype(np.int64) * n_docs + docs)
    grade_of_hit = np.append(judged_grade[retrieved], 0.0)[position]  # position -1: unjudged, grade 0

    grades = np.zeros((n_queries, max(int(n_retrieved.max(initial=0)), 1)))
    grades[row, rank] = grade_of_hit
    top_score = np.full(n_queries, np.nan)
    top_score[row[starts]] = scores[starts]
    ideal = _ideal(judged_row, judged_grade, n_queries)
    return RankedJudgments(grades, ideal, n_retrieved, top_score, relevance_level, gain)


def _ideal(row: np.ndarray, grade: np.ndarray, n_queries: int) -> np.ndarray:
    """Each query's positive grades, sorted descending, 0-padded."""
    positive = grade > 0
    row, grade = row[positive], grade[positive]
    order = np.lexsort((-grade, row))
    row, grade = row[order], grade[order]
    counts = np.bincount(row, minlength=n_queries)
    ideal = np.zeros((n_queries, max(int(counts.max(initial=0)), 1)))
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    ideal[row, np.arange(len(row)) - starts[row]] = grade
    return ideal


@dataclass(frozen=True)
class Evaluation:
    """Per-query values (`per_query`, indexed by qid) and the views built from them."""

    per_query: pd.DataFrame  # type, answerable, n_retrieved, top_score, abstained, one column per metric
    metrics: tuple[str, ...]  # rank metric names, in request order
    abstain_metrics: tuple[str, ...]
    golden: GoldenSet = field(repr=False)
    run: Run = field(repr=False)
    relevance_level: int = 1
    gain: str = "linear"
    context: ContextScores | None = field(default=None, repr=False)  # chunk-level scores, when chunks are known

    def with_context(self, context: ContextScores) -> Evaluation:
        """The same evaluation with the context metrics as per-query columns (NaN: no evidence)."""
        return replace(self, per_query=self.per_query.join(context.frame), context=context)

    @property
    def context_metrics(self) -> tuple[str, ...]:
        return tuple(self.context.frame.columns) if self.context is not None else ()

    @property
    def headline(self) -> str:
        """The metric that ranks questions as worst: nDCG@10 when computed, else the first."""
        return HEADLINE if HEADLINE in self.metrics else self.metrics[0]

    @property
    def answerable(self) -> pd.DataFrame:
        return self.per_query[self.per_query["answerable"]]

    @cached_property
    def mean(self) -> dict[str, float]:
        """Rank metrics over answerable questions, plus the requested abstention rates."""
        means = {name: _mean(self.answerable[name]) for name in self.metrics}
        if self.context is not None:
            means |= {name: _mean(self.context.frame[name]) for name in self.context_metrics}
            means[CONTEXT_N] = float(len(self.context.frame))
        return means | self.abstention

    @cached_property
    def abstention(self) -> dict[str, float]:
        abstained = self.per_query["abstained"]
        rates = {
            ABSTAIN_CORRECT: _mean(abstained[~self.per_query["answerable"]]),
            ABSTAIN_FALSE: _mean(abstained[self.per_query["answerable"]]),
        }
        return {name: rates[name] for name in self.abstain_metrics}

    def by(self, column: str = "type") -> pd.DataFrame:
        """Means per group (question type by default): n, answerable, each metric, abstention."""
        return group_means(self.per_query, column, self.metrics, self.context_metrics)

    def type_means(self) -> dict[str, float]:
        """`type/<type>/<metric>` and `type/<type>/n`, DESIGN's names; undefined means (the recall
        of a type with no answerable question) are left out."""
        values: dict[str, float] = {}
        context_n = [CONTEXT_N] if self.context is not None else []
        for qtype, row in self.by("type").iterrows():
            values[f"type/{qtype}/n"] = int(row["n"])
            for name in [*self.metrics, *self.abstain_metrics, *self.context_metrics, *context_n]:
                if not np.isnan(row[name]):
                    values[f"type/{qtype}/{name}"] = float(row[name])
        return values

    def by_tag(self) -> pd.DataFrame:
        """Means per tag; a question with several tags counts in each."""
        tags = [list(self.golden.by_id[qid].tags) for qid in self.per_query.index]
        exploded = self.per_query.assign(tag=tags).explode("tag").dropna(subset=["tag"])
        return group_means(exploded, "tag", self.metrics, self.context_metrics)

    def worst(self, n: int = 5, metric: str | None = None, evidence: int = 5) -> pd.DataFrame:
        """The n answerable questions with the lowest `metric` (ties by id), with their evidence:
        the question, its labelled documents and the top `evidence` retrieved (doc, grade)."""
        metric = metric or self.headline
        frame = self.answerable.rename_axis("qid").sort_values([metric, "qid"], kind="stable").head(n)
        retrieved = self.run.restrict(frame.index).rankings(limit=evidence)
        questions = [self.golden.by_id[qid] for qid in frame.index]
        return frame[[metric, "type", "n_retrieved"]].assign(
            question=[q.question for q in questions],
            relevant=[dict(q.relevant) for q in questions],
            retrieved=[[(doc, q.relevant.get(doc, 0)) for doc, _ in retrieved.get(q.id, [])] for q in questions],
        )

    def worst_context(self, n: int = 5) -> pd.DataFrame:
        """The n questions whose top chunks cover the least of their evidence (by context recall at
        the largest k, ties by id), with the evidence text they missed."""
        if self.context is None:
            return pd.DataFrame()
        metric = self.context.recall_at_largest
        frame = self.context.frame.rename_axis("qid").sort_values([metric, "qid"], kind="stable").head(n)
        questions = [self.golden.by_id[qid] for qid in frame.index]
        return frame[[metric]].assign(
            type=[q.type for q in questions],
            question=[q.question for q in questions],
            missing=[self.context.missing[qid] for qid in frame.index],
        )


def _mean(values: pd.Series) -> float:
    return float(values.mean()) if len(values) else float("nan")


def group_means(
    per_query: pd.DataFrame, column: str, metrics: tuple[str, ...], context_metrics: tuple[str, ...] = ()
) -> pd.DataFrame:
    grouped = per_query.groupby(column, sort=True)
    table = pd.DataFrame({"n": grouped.size(), "answerable": grouped["answerable"].sum()})
    answerable = per_query[per_query["answerable"]].groupby(column)
    for name in metrics:
        table[name] = answerable[name].mean()
    unanswerable = per_query[~per_query["answerable"]].groupby(column)["abstained"]
    table[ABSTAIN_CORRECT] = unanswerable.mean()
    table[ABSTAIN_FALSE] = answerable["abstained"].mean()
    if context_metrics:  # over the questions with evidence (the others are NaN)
        table[CONTEXT_N] = grouped[context_metrics[0]].count()
        for name in context_metrics:
            table[name] = grouped[name].mean()
    return table


def score(
    golden: GoldenSet,
    run: Run,
    metrics: str | Sequence[str] | None = None,
    relevance_level: int = 1,
    gain: str = "linear",
) -> Evaluation:
    """`metrics`: names such as "ndcg_at_10,mrr" (abstention rates included by name); None means
    DEFAULT_METRICS plus the abstention rates that apply to this golden set."""
    if metrics is None:
        has_unanswerable = not golden.questions_frame["answerable"].all()
        names = [*DEFAULT_METRICS, *(ABSTAIN_METRICS if has_unanswerable else (ABSTAIN_FALSE,))]
    else:
        names = [n.strip() for n in (metrics.split(",") if isinstance(metrics, str) else metrics) if n.strip()]
    abstain = tuple(n for n in dict.fromkeys(names) if n in ABSTAIN_METRICS)
    rank_names = [n for n in names if n not in ABSTAIN_METRICS]
    rank_metrics = parse_metrics(rank_names) if rank_names or not abstain else []

    extra = run.qids.difference(golden.ids)
    if len(extra):
        log.warning(
            "%s: %d queries are not in the golden set %s and are ignored (first: %r)",
            run.name,
            len(extra),
            golden.source,
            extra[0],
        )
    ranked = rank_judgments(golden, run, relevance_level, gain)
    per_query = per_query_table(golden, ranked, rank_metrics)
    return Evaluation(per_query, tuple(m.name for m in rank_metrics), abstain, golden, run, relevance_level, gain)


def per_query_table(golden: GoldenSet, ranked: RankedJudgments, metrics: list[Metric]) -> pd.DataFrame:
    frame = golden.questions_frame[["type", "answerable"]].copy()
    frame["n_retrieved"] = ranked.n_retrieved
    frame["top_score"] = ranked.top_score
    frame["abstained"] = (ranked.n_retrieved == 0).astype(float)
    answerable = frame["answerable"].to_numpy()
    for metric in metrics:
        frame[metric.name] = np.where(answerable, metric(ranked), np.nan)
    return frame
