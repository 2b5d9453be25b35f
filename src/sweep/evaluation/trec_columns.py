"""The scorer: a golden set's judgments and a run, both in columns, to every question's metric values, without pandas.

`score_columns` is the one computation of per-question values: `python -m sweep.evaluate --json`
calls it on TREC files read in columns (`sweep.formats.trec`, `Judgments.of_qrels`), and
`sweep.evaluation.scoring.score` on a golden set and a run in memory (trials, calibration, the
readable report), then builds its pandas tables on the `Scores` it returns. Strings are matched
once, by pyarrow's hash join (`index_in`), and the metrics are the numpy core's (`measures`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa

from sweep.evaluation.measures import RankedJudgments, abstention_rates, answerable_means, type_means
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


def score_columns(
    golden: Judgments,
    run: TrecRun,
    metrics: str | Sequence[str] | None = None,
    *,
    relevance_level: int = 1,
    gain: str = "linear",
) -> Scores:
    """Every question of `golden` scored on `run`: `metrics` are names such as "ndcg_at_10,mrr"
    (abstention rates included by name), None for DEFAULT_METRICS and the abstention rates that
    apply. A question the run left out returned nothing (trec_eval -c); a run query that is not a
    question is not scored (`Scores.unknown_queries`)."""
    rank_metrics, abstain_metrics = select_metrics(metrics, has_unanswerable=not golden.answerable.all())
    query_row = index_in(run.qid.dictionary, golden.ids)
    ranked = rank(golden, run, relevance_level, gain, query_row)
    return Scores(
        golden.ids,
        golden.types,
        golden.answerable,
        ranked.n_retrieved,
        ranked.top_score,
        metric_values(ranked, rank_metrics, golden.answerable),
        abstain_metrics,
        [run.qid.values[code] for code in np.flatnonzero(query_row < 0).tolist()],
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
