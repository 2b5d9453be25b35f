"""Score TREC qrels and a TREC run read in columns (`sweep.formats.trec`) with the numpy core, without pandas.

`python -m sweep.evaluate --json` scores TREC files so, to start quickly; `Scores.of` takes the
same record from an `Evaluation` (any input, through pandas), and the two agree to the last bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sweep.evaluation.measures import (
    RankedJudgments,
    abstention_rates,
    answerable_means,
    type_means,
    warn_unknown_queries,
)
from sweep.evaluation.registry import metric_values, select_metrics
from sweep.formats.columns import index_in
from sweep.formats.lines import UNTYPED, warn_if_unbalanced
from sweep.formats.trec import Qrels, TrecRun

if TYPE_CHECKING:
    from sweep.evaluation.scoring import Evaluation


@dataclass(frozen=True)
class Scores:
    """Every question's results, in golden order."""

    qids: list[str]
    types: np.ndarray
    answerable: np.ndarray
    abstained: np.ndarray  # 1.0 for an empty result
    values: dict[str, np.ndarray]  # rank metric -> value per question, NaN for unanswerable questions
    abstain_metrics: tuple[str, ...]

    @classmethod
    def of(cls, evaluation: Evaluation) -> Scores:
        frame = evaluation.per_query
        return cls(
            frame.index.tolist(),
            frame["type"].to_numpy(),
            frame["answerable"].to_numpy(),
            frame["abstained"].to_numpy(),
            {name: frame[name].to_numpy() for name in evaluation.metrics},
            evaluation.abstain_metrics,
        )

    def means(self, per_type: bool) -> dict[str, float]:
        """Means as `Evaluation.mean` has them; with `per_type`, type means as its `type_means`."""
        mean = answerable_means(self.values, self.answerable)
        mean |= abstention_rates(self.abstained, self.answerable, self.abstain_metrics)
        if per_type:
            mean |= type_means(self.types, self.answerable, self.abstained, self.values, self.abstain_metrics)
        return mean


def score_columns(
    qrels: Qrels,
    run: TrecRun,
    metrics: str | Sequence[str] | None = None,
    *,
    relevance_level: int = 1,
    gain: str = "linear",
    qrels_name: str = "qrels",
    run_name: str = "run",
) -> Scores:
    """What `score(load_golden(qrels), Run.read(run), ...)` gives for the same files, computed by
    the numpy core; the names are the files' for the warnings."""
    golden_order = qrels.qid.sorted_codes()  # a TREC qrels golden set is in qid order
    n_questions = len(golden_order)
    row_of = np.empty(n_questions, np.int64)
    row_of[golden_order] = np.arange(n_questions)
    judged_query = row_of[qrels.qid.codes]
    answerable = np.zeros(n_questions, bool)
    answerable[judged_query[qrels.grade >= 1]] = True
    warn_if_unbalanced(qrels_name, n_questions, int((~answerable).sum()))

    rank_metrics, abstain_metrics = select_metrics(metrics, has_unanswerable=not answerable.all())
    in_qrels = index_in(run.qid.distinct, qrels.qid.distinct)  # per distinct run query: its qrels code or -1
    unknown = [qid for qid, code in zip(run.qid.values, in_qrels.tolist()) if code < 0]
    warn_unknown_queries(run_name, qrels_name, unknown)
    ranked = RankedJudgments.join(
        n_questions,
        np.where(in_qrels >= 0, row_of[in_qrels], -1),
        run.qid.codes,
        run.docid.codes,
        run.score,
        judged_query,
        index_in(qrels.docid.distinct, run.docid.distinct)[qrels.docid.codes],
        qrels.grade,
        relevance_level,
        gain,
    )
    return Scores(
        [qrels.qid.values[code] for code in golden_order.tolist()],
        np.full(n_questions, UNTYPED),
        answerable,
        (ranked.n_retrieved == 0).astype(float),
        metric_values(ranked, rank_metrics, answerable),
        abstain_metrics,
    )
