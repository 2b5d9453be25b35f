"""Retrieval metrics that agree with trec_eval, plus abstention, aggregation and significance."""

from sweep.metrics.measures import FAMILIES, Metric, RankedJudgments, parse_metrics, valid_names
from sweep.metrics.scoring import (
    ABSTAIN_CORRECT,
    ABSTAIN_FALSE,
    DEFAULT_METRICS,
    Evaluation,
    rank_judgments,
    score,
)

__all__ = [
    "ABSTAIN_CORRECT",
    "ABSTAIN_FALSE",
    "DEFAULT_METRICS",
    "FAMILIES",
    "Evaluation",
    "Metric",
    "RankedJudgments",
    "score",
    "parse_metrics",
    "rank_judgments",
    "valid_names",
]
