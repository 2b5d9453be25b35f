"""Retrieval metrics that agree with trec_eval, plus abstention, aggregation and significance.

`registry` declares every metric (name, direction, label, cost, formula); `measures` is the numpy
core; `comparison` pairs two runs' per-question values; `scoring` (`score`, `Evaluation`) builds pandas tables on it and is
imported on first use, so that `python -m sweep.evaluate`, which needs only the core, starts
without pandas.
"""

from typing import TYPE_CHECKING

from sweep.evaluation.measures import RankedJudgments
from sweep.evaluation.registry import (
    ABSTAIN_CORRECT,
    ABSTAIN_FALSE,
    DEFAULT_METRICS,
    FAMILIES,
    HEADLINE,
    MEASURES,
    Measure,
    Metric,
    lower_is_better,
    measure_of,
    parse_metrics,
    valid_names,
)

if TYPE_CHECKING:
    from sweep.evaluation.scoring import Evaluation, score

__all__ = [
    "ABSTAIN_CORRECT",
    "ABSTAIN_FALSE",
    "DEFAULT_METRICS",
    "FAMILIES",
    "Evaluation",
    "HEADLINE",
    "MEASURES",
    "Measure",
    "Metric",
    "RankedJudgments",
    "lower_is_better",
    "measure_of",
    "score",
    "parse_metrics",
    "valid_names",
]
_SCORING = ("Evaluation", "score")


def __getattr__(name: str):
    if name in _SCORING:
        from sweep.evaluation import scoring

        return getattr(scoring, name)
    raise AttributeError(f"module 'sweep.evaluation' has no attribute {name!r}")
