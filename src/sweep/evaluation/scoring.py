"""Score a run against a golden set: per-query values, then means, groups and worst queries.

`score` hands both, in columns, to the one scorer (`trec_columns.score_columns`, which
`python -m sweep.evaluate` also calls on TREC files) and wraps the `Scores` it returns in an
`Evaluation`, whose pandas tables are built when first asked for.

Rank metrics are averaged over answerable questions only; unanswerable questions are scored by
abstention (an empty result is the right answer for them). A question missing from the run
returned nothing (trec_eval -c); a run query missing from the golden set is dropped with one
warning. Rankings are in trec_eval's order (`sweep.formats.runs`: score descending, ties by
document id descending), so a value here is trec_eval's on the run's `run.trec`; where a metric's
cutoff splits tied documents with a relevant one among them, one warning a run names how many
questions and the first (`trec_columns.tied_at_cutoffs`): there the tie rule, not the scores,
decides what the cutoff holds. Questions pending review (`status: pending`) are not scored, with one warning that
counts them (`GoldenSet.reviewed`): their rankings may be in the run, for pooling. Means split
by question type, and by source (human, synthetic) once the scored questions have more than one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import pandas as pd

from sweep.errors import InputError
from sweep.evaluation import measures
from sweep.evaluation.context import CONTEXT_N, ContextScores
from sweep.evaluation.measures import group_starts, warn_unknown_queries
from sweep.evaluation.registry import ABSTAIN_METRICS, HEADLINE
from sweep.evaluation.trec_columns import Judgments, Scores, TiedAtCutoff, score_columns
from sweep.formats.columns import Strings, string_array
from sweep.formats.golden import GoldenSet
from sweep.formats.provenance import HUMAN
from sweep.formats.runs import Run

log = logging.getLogger(__name__)


def golden_judgments(golden: GoldenSet) -> Judgments:
    """`golden` in columns, as the scorer reads it."""
    judged = golden.judgments
    # one dictionary entry per judgment: the scorer only matches them with the run's documents,
    # and hashing them first to find repeats would cost more than matching them all
    docids = Strings(np.arange(len(judged), dtype=np.int32), string_array(judged["docid"]))
    questions = golden.questions_frame
    return Judgments(
        string_array(golden.ids),
        questions["type"].to_numpy(),
        questions["answerable"].to_numpy(),
        _rows(golden.ids, judged["qid"].to_numpy()),
        docids,
        judged["grade"].to_numpy(),
    )


def _rows(qids: pd.Index, judged_qids: np.ndarray) -> np.ndarray:
    """The row of each judgment's question: looked up once per run of equal ids, as judgments
    come question by question (equal ids are one object, so comparing them is cheap)."""
    starts = group_starts(judged_qids)
    return np.repeat(qids.get_indexer(judged_qids[starts]), np.diff(np.r_[starts, len(judged_qids)]))


@dataclass(frozen=True)
class Evaluation:
    """Every question's values (`scores`) and the views built from them: the per-query table
    (`per_query`, indexed by qid, built when first asked for), means, groups, worst questions."""

    scores: Scores
    golden: GoldenSet = field(repr=False)  # the questions scored: those pending review left out
    run: Run = field(repr=False)
    relevance_level: int = 1
    gain: str = "linear"
    context: ContextScores | None = field(default=None, repr=False)  # chunk-level scores, when chunks are known

    @property
    def metrics(self) -> tuple[str, ...]:
        """The rank metrics' names, in request order."""
        return tuple(self.scores.values)

    @property
    def abstain_metrics(self) -> tuple[str, ...]:
        return self.scores.abstain_metrics

    @cached_property
    def per_query(self) -> pd.DataFrame:
        """type, answerable, n_retrieved, top_score, abstained, one column per metric (then the
        context metrics, when known), indexed by qid."""
        scores = self.scores
        frame = pd.DataFrame(
            {
                "type": self.golden.questions_frame["type"],
                "answerable": scores.answerable,
                "n_retrieved": scores.n_retrieved,
                "top_score": scores.top_score,
                "abstained": scores.abstained,
            }
            | scores.values,
            index=self.golden.ids,
        )
        return frame if self.context is None else frame.join(self.context.frame)

    def with_context(self, context: ContextScores) -> Evaluation:
        """The same evaluation with the context metrics as per-query columns (NaN: no evidence);
        context scored on questions this evaluation left out (pending review) is left out too."""
        unscored = context.frame.index.difference(self.golden.ids)
        if len(unscored):
            scored = context.frame.drop(unscored)
            missing = {qid: context.missing[qid] for qid in scored.index}
            context = replace(context, frame=scored, missing=missing)
        return replace(self, context=context)

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
        means = dict(self.scores.rank_means)
        if self.context is not None:
            means |= {name: _mean(self.context.frame[name]) for name in self.context_metrics}
            means[CONTEXT_N] = float(len(self.context.frame))
        return means | self.abstention

    @property
    def abstention(self) -> dict[str, float]:
        return self.scores.abstention

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
        `python -m sweep.evaluate --per-type` prints them (`Scores.means`), the same computation."""
        return self.scores.type_means(self.scores.types) | self._context_means("type")

    def source_means(self) -> dict[str, float]:
        """`source/<source>/<metric>` and `source/<source>/n`, as `type_means` names them per type,
        once a scored question is not a person's (`source: synthetic`), so generated questions are
        always told apart, even where they are all there is; none for a set of people's questions
        only, whose split would repeat the overall means."""
        sources = self.golden.questions_frame["source"]
        if set(sources) <= {HUMAN}:
            return {}
        # measures.type_means names its keys type/<group>/...: the same means, per source
        rank_means = {
            f"source/{key.removeprefix('type/')}": v for key, v in self.scores.type_means(sources.to_numpy()).items()
        }
        return rank_means | self._context_means("source")

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
        """The n answerable questions with the lowest `metric` (ties by id) among those below its
        median over the run's answerable questions (never a perfect one; none when all score the
        same), with their evidence: the question, its labelled documents and the top `evidence`
        retrieved (doc, grade; None where the document is not judged for the question)."""
        metric = metric or self.headline
        answerable = self.answerable
        below = answerable[answerable[metric] < answerable[metric].median()]
        frame = below.rename_axis("qid").sort_values([metric, "qid"], kind="stable").head(n)
        retrieved = self.run.restrict(frame.index).rankings(limit=evidence)
        questions = [self.golden.by_id[qid] for qid in frame.index]
        return frame[[metric, "type", "n_retrieved"]].assign(
            question=[q.question for q in questions],
            relevant=[dict(q.relevant) for q in questions],
            retrieved=[[(doc, q.relevant.get(doc)) for doc, _ in retrieved.get(q.id, [])] for q in questions],
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
    *,
    condensed: bool = False,
) -> Evaluation:
    """`metrics`: names such as "ndcg_at_10,mrr" (abstention rates included by name); None means
    DEFAULT_METRICS plus the abstention rates that apply to this golden set. Questions pending
    review are not scored (module doc). `condensed`: the rank metrics score each ranking without
    its unjudged documents (trec_eval -J); abstention, `n_retrieved`, `top_score` and `judged_at_k`
    still describe the ranking as retrieved (`score_columns`)."""
    scored = golden.reviewed
    if not len(scored):
        raise InputError(f"{golden.source}: every question is pending review; review them (python -m sweep.label)")
    scores = score_columns(
        golden_judgments(scored),
        run.columns,
        metrics,
        relevance_level=relevance_level,
        gain=gain,
        ties=True,
        condensed=condensed,
    )
    unknown = [qid for qid in scores.unknown_queries if qid not in golden.by_id]  # pending questions are known
    warn_unknown_queries(run.name, golden.source, unknown)
    if scores.tied is not None and scored.first_time(f"ties {run.name}"):
        warn_ties(run.name, scores.tied, len(scored))
    return Evaluation(scores, scored, run, relevance_level, gain)


def warn_ties(name: str, tied: TiedAtCutoff, n_questions: int) -> None:
    """The one warning for tied scores that a metric's cutoff splits (`TiedAtCutoff`)."""
    ranks = f"ranks {tied.first_rank}-{tied.last_rank}"
    docs = ", ".join(repr(doc) for doc in tied.docs) + (
        ", ..." if tied.last_rank - tied.first_rank + 1 > len(tied.docs) else ""
    )
    log.warning(
        "%s: on %d of %d questions a metric's cutoff splits documents of the same score with a relevant one among "
        "them, e.g. question %r: %s tie at %r (%s) across the cutoff at %d; which of them count within it is the "
        "tie rule's choice (document id, highest first, as trec_eval), not the scores'",
        name, tied.questions, n_questions, tied.qid, ranks, tied.score, docs, tied.k,
    )  # fmt: skip
