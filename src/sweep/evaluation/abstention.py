"""Abstention: when should the system say "nothing found"?

A question abstains at threshold t when its result is empty or its top score is below t.
Sweeping t over the observed top scores gives the trade-off between abstaining correctly
on unanswerable questions and keeping answers (and recall) on answerable ones; `calibrate`
picks a threshold for one run and re-evaluates the run as if it had been applied.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweep.evaluation.scoring import Evaluation, score


def abstention_curve(top_score: np.ndarray, answerable: np.ndarray, metric: np.ndarray) -> pd.DataFrame:
    """One row per candidate threshold (-inf, then each distinct top score, ascending).

    `top_score` is NaN for an empty result; `metric` is a per-question rank metric (its value
    for answerable questions; it drops to 0 for those that abstain). Columns: threshold,
    correct_rate (unanswerable that abstain), false_rate (answerable that abstain),
    metric (mean over answerable, abstentions scoring 0), balanced_accuracy."""
    top_score = np.asarray(top_score, dtype=float)
    answerable = np.asarray(answerable, dtype=bool)
    metric = np.where(answerable, np.nan_to_num(np.asarray(metric, dtype=float)), 0.0)
    scored = ~np.isnan(top_score)
    thresholds = np.r_[-np.inf, np.unique(top_score[scored])]

    def abstaining(mask: np.ndarray) -> np.ndarray:
        """For each threshold, how many questions under `mask` abstain."""
        scores = np.sort(top_score[mask & scored])
        return (mask & ~scored).sum() + np.searchsorted(scores, thresholds, side="left")

    n_answerable, n_unanswerable = answerable.sum(), (~answerable).sum()
    correct = abstaining(~answerable) / n_unanswerable if n_unanswerable else np.full(len(thresholds), np.nan)
    false = abstaining(answerable) / n_answerable if n_answerable else np.full(len(thresholds), np.nan)

    # metric kept at threshold t: sum over answerable questions whose top score >= t
    order = np.argsort(top_score[answerable & scored])
    kept_scores = top_score[answerable & scored][order]
    kept_metric = metric[answerable & scored][order]
    suffix = np.r_[np.cumsum(kept_metric[::-1])[::-1], 0.0]
    metric_kept = suffix[np.searchsorted(kept_scores, thresholds, side="left")]
    metric_mean = metric_kept / n_answerable if n_answerable else np.full(len(thresholds), np.nan)

    return pd.DataFrame(
        {
            "threshold": thresholds,
            "correct_rate": correct,
            "false_rate": false,
            "metric": metric_mean,
            "balanced_accuracy": (np.nan_to_num(correct) + 1 - np.nan_to_num(false)) / 2,
        }
    )


def suggest_min_score(curve: pd.DataFrame) -> float:
    """The threshold with the best balanced accuracy of answer-vs-abstain (the lowest on ties).

    -inf abstains exactly the questions the lowest observed top score does, so it is suggested
    only when no question has a score: a threshold one can configure beats an infinite one."""
    finite = curve[np.isfinite(curve["threshold"])]
    candidates = finite if len(finite) else curve
    return float(candidates["threshold"].iloc[int(candidates["balanced_accuracy"].to_numpy().argmax())])


@dataclass(frozen=True)
class Calibration:
    """A run's abstention trade-off and the minimum top score it suggests.

    `curve` is `abstention_curve`'s table with its `metric` column named after `metric`;
    `at_suggested` holds the evaluation's means (rank metrics and abstention rates) for the
    run with every question whose top score is below `suggested` emptied."""

    metric: str
    curve: pd.DataFrame
    suggested: float
    balanced_accuracy: float
    at_suggested: dict[str, float]


def calibrate(evaluation: Evaluation, metric: str = "recall_at_5") -> Calibration | None:
    """Calibrate the abstention threshold on `evaluation`; None when there is nothing to trade
    off (no unanswerable or no answerable question) or `metric` was not computed."""
    per_query = evaluation.per_query
    answerable = per_query["answerable"].to_numpy(dtype=bool)
    if metric not in evaluation.metrics or answerable.all() or not answerable.any():
        return None
    curve = abstention_curve(per_query["top_score"], answerable, per_query[metric])
    suggested = suggest_min_score(curve)
    at_threshold = curve[curve["threshold"] == suggested].iloc[0]
    # NaN (an empty result) compares False, so an empty result stays empty
    answering = per_query.index[per_query["top_score"].to_numpy() >= suggested]
    thresholded = score(
        evaluation.golden,
        evaluation.run.restrict(answering),
        metrics=[*evaluation.metrics, *evaluation.abstain_metrics],
        relevance_level=evaluation.relevance_level,
        gain=evaluation.gain,
    )
    return Calibration(
        metric=metric,
        curve=curve.rename(columns={"metric": metric}),
        suggested=suggested,
        balanced_accuracy=float(at_threshold["balanced_accuracy"]),
        at_suggested=dict(thresholded.mean),
    )
