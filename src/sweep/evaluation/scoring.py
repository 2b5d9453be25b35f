"""Score a run against a golden set: per-query values, then means, groups and worst queries.

Rank metrics are averaged over answerable questions only; unanswerable questions are
scored by abstention (an empty result is the right answer for them). A question missing
from the run returned nothing (trec_eval -c); a run query missing from the golden set is
dropped with one warning. Questions pending review (`status: pending`) are not scored, with one
warning that counts them (`GoldenSet.reviewed`): their rankings may be in the run, for pooling.
Means split by question type, and by source (human, synthetic) once the scored questions have
more than one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import pandas as pd
import pyarrow as pa

from sweep.errors import InputError
from sweep.evaluation import measures
from sweep.evaluation.context import CONTEXT_N, ContextScores
from sweep.evaluation.measures import (
    RankedJudgments,
    abstention_rates,
    answerable_means,
    group_starts,
    warn_unknown_queries,
)
from sweep.evaluation.registry import ABSTAIN_METRICS, HEADLINE, metric_values, select_metrics
from sweep.formats.columns import index_in
from sweep.formats.golden import GoldenSet
from sweep.formats.runs import Run


def rank_judgments(golden: GoldenSet, run: Run, relevance_level: int = 1, gain: str = "linear") -> RankedJudgments:
    """Every judged document the run retrieved, at its rank, one query per golden question (in golden order)."""
    qids, frame, judged = golden.ids, run.frame, golden.judgments
    return RankedJudgments.join(
        len(qids),
        qids.get_indexer(frame["qid"].cat.categories),
        frame["qid"].cat.codes.to_numpy(),
        frame["docid"].cat.codes.to_numpy(),
        frame["score"].to_numpy(),
        _rows(qids, judged["qid"].to_numpy()),
        index_in(pa.array(judged["docid"], pa.string()), pa.array(frame["docid"].cat.categories, pa.string())),
        judged["grade"].to_numpy(),
        relevance_level,
        gain,
    )


def _rows(qids: pd.Index, judged_qids: np.ndarray) -> np.ndarray:
    """The row of each judgment's question: looked up once per run of equal ids, as judgments
    come question by question (equal ids are one object, so comparing them is cheap)."""
    starts = group_starts(judged_qids)
    return np.repeat(qids.get_indexer(judged_qids[starts]), np.diff(np.r_[starts, len(judged_qids)]))


@dataclass(frozen=True)
class Evaluation:
    """Per-query values (`per_query`, indexed by qid) and the views built from them."""

    per_query: pd.DataFrame  # type, answerable, n_retrieved, top_score, abstained, one column per metric
    metrics: tuple[str, ...]  # rank metric names, in request order
    abstain_metrics: tuple[str, ...]
    golden: GoldenSet = field(repr=False)  # the questions scored: those pending review left out
    run: Run = field(repr=False)
    relevance_level: int = 1
    gain: str = "linear"
    context: ContextScores | None = field(default=None, repr=False)  # chunk-level scores, when chunks are known

    def with_context(self, context: ContextScores) -> Evaluation:
        """The same evaluation with the context metrics as per-query columns (NaN: no evidence);
        context scored on questions this evaluation left out (pending review) is left out too."""
        unscored = context.frame.index.difference(self.per_query.index)
        if len(unscored):
            scored = context.frame.drop(unscored)
            missing = {qid: context.missing[qid] for qid in scored.index}
            context = replace(context, frame=scored, missing=missing)
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
        means = answerable_means(self._values, self.per_query["answerable"].to_numpy())
        if self.context is not None:
            means |= {name: _mean(self.context.frame[name]) for name in self.context_metrics}
            means[CONTEXT_N] = float(len(self.context.frame))
        return means | self.abstention

    @cached_property
    def abstention(self) -> dict[str, float]:
        frame = self.per_query
        return abstention_rates(frame["abstained"].to_numpy(), frame["answerable"].to_numpy(), self.abstain_metrics)

    @property
    def _values(self) -> dict[str, np.ndarray]:
        return {name: self.per_query[name].to_numpy() for name in self.metrics}

    def by(self, column: str = "type") -> pd.DataFrame:
        """Means per group (question type by default, or any column of the per-query table or of
        the golden set's `questions_frame`, such as `source`): n, answerable, each metric, abstention."""
        frame = self.per_query
        if column not in frame:
            frame = frame.join(self.golden.questions_frame[[column]])
        return group_means(frame, column, self.metrics, self.context_metrics)

    def type_means(self) -> dict[str, float]:
        """`type/<type>/<metric>` and `type/<type>/n`, DESIGN's names; undefined means (the recall
        of a type with no answerable question) are left out. The rank metrics and abstention as
        `measures.type_means` computes them for `python -m sweep.evaluate`, to the last digit."""
        return self._rank_means(self.per_query["type"].to_numpy()) | self._context_means("type")

    def source_means(self) -> dict[str, float]:
        """`source/<source>/<metric>` and `source/<source>/n`, as `type_means` names them per type,
        once the scored questions come from more than one source (human, synthetic); else none."""
        sources = self.golden.questions_frame["source"]
        if sources.nunique() < 2:
            return {}
        # measures.type_means names its keys type/<group>/...: the same means, per source
        rank_means = {
            f"source/{key.removeprefix('type/')}": v for key, v in self._rank_means(sources.to_numpy()).items()
        }
        return rank_means | self._context_means("source")

    def _rank_means(self, groups: np.ndarray) -> dict[str, float]:
        """`measures.type_means` of the rank metrics and abstention over `groups` (one per question)."""
        frame = self.per_query
        return measures.type_means(
            groups, frame["answerable"].to_numpy(), frame["abstained"].to_numpy(), self._values, self.abstain_metrics
        )

    def _context_means(self, column: str) -> dict[str, float]:
        """`<column>/<group>/<context metric>` (and its n) where defined; none without context."""
        if self.context is None:
            return {}
        return {
            f"{column}/{group}/{name}": float(row[name])
            for group, row in self.by(column).iterrows()
            for name in [*self.context_metrics, CONTEXT_N]
            if not np.isnan(row[name])
        }

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
    """Per value of `column` (sorted): n, answerable, each rank metric and both abstention rates
    as `measures.group_means` computes them (the per-type means a run logs), then the context
    metrics over the questions with evidence (the others are NaN)."""
    groups = per_query[column].to_numpy()
    means = measures.group_means(
        groups, per_query["answerable"].to_numpy(dtype=bool), per_query["abstained"].to_numpy(dtype=float),
        {name: per_query[name].to_numpy(dtype=float) for name in metrics}, ABSTAIN_METRICS,
    )  # fmt: skip
    columns = ["n", "answerable", *metrics, *ABSTAIN_METRICS]
    table = pd.DataFrame.from_dict(means, orient="index", columns=columns).astype({"n": int, "answerable": int})
    table.index.name = column
    if context_metrics:
        grouped = per_query.groupby(column, sort=True)
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
    DEFAULT_METRICS plus the abstention rates that apply to this golden set. Questions pending
    review are not scored (module doc)."""
    scored = golden.reviewed
    if not len(scored):
        raise InputError(f"{golden.source}: every question is pending review; review them (python -m sweep.label)")
    answerable = scored.questions_frame["answerable"].to_numpy()
    rank_metrics, abstain = select_metrics(metrics, has_unanswerable=not answerable.all())
    warn_unknown_queries(run.name, golden.source, run.qids.difference(golden.ids).tolist())
    ranked = rank_judgments(scored, run, relevance_level, gain)
    frame = pd.DataFrame(
        {
            "type": scored.questions_frame["type"],
            "answerable": answerable,
            "n_retrieved": ranked.n_retrieved,
            "top_score": ranked.top_score,
            "abstained": (ranked.n_retrieved == 0).astype(float),
        }
        | metric_values(ranked, rank_metrics, answerable),
        index=scored.ids,
    )
    return Evaluation(frame, tuple(m.name for m in rank_metrics), abstain, scored, run, relevance_level, gain)
