"""Rank metrics as small pure functions over a ranked-judgments matrix.

Every query is a row: `grades[q, i]` is the judged grade of the document at rank i + 1
(0 for unjudged documents and for ranks past the end of a short run), `ideal[q]` holds the
query's positive grades sorted descending. Cumulative sums over ranks are computed once
(`RankedJudgments`), so any number of cutoffs costs one column lookup each.
Definitions follow trec_eval (see DESIGN.md, "Metric definitions").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from sweep.errors import InputError

GAINS = ("linear", "exponential")


@dataclass(frozen=True)
class RankedJudgments:
    grades: np.ndarray  # (queries, depth) float
    ideal: np.ndarray  # (queries, judged) float, positive grades sorted descending, 0-padded
    n_retrieved: np.ndarray  # (queries,) int
    top_score: np.ndarray  # (queries,) the first result's score, NaN for an empty result
    relevance_level: int = 1  # binary metrics count grade >= this as relevant
    gain: str = "linear"  # nDCG gain: grade (trec_eval) or 2**grade - 1

    def __post_init__(self) -> None:
        if self.gain not in GAINS:
            raise InputError(f"gain {self.gain!r} is not one of {', '.join(GAINS)}")
        if (
            isinstance(self.relevance_level, bool)
            or not isinstance(self.relevance_level, (int, np.integer))
            or self.relevance_level < 1
        ):
            raise InputError(f"relevance level {self.relevance_level!r} must be an integer >= 1")

    @property
    def depth(self) -> int:
        return self.grades.shape[1]

    @cached_property
    def is_relevant(self) -> np.ndarray:
        return self.grades >= self.relevance_level

    @cached_property
    def n_relevant(self) -> np.ndarray:
        return (self.ideal >= self.relevance_level).sum(axis=1)

    @cached_property
    def hits(self) -> np.ndarray:
        """hits[q, i]: relevant documents among the first i + 1."""
        return np.cumsum(self.is_relevant, axis=1, dtype=np.int64)

    @cached_property
    def first_relevant_rank(self) -> np.ndarray:
        """1-based rank of the first relevant document; 0 when there is none."""
        found = self.is_relevant.any(axis=1)
        return np.where(found, self.is_relevant.argmax(axis=1) + 1, 0)

    @cached_property
    def precision_sum(self) -> np.ndarray:
        """Running sum of precision at each relevant rank (the numerator of AP)."""
        ranks = np.arange(1, self.depth + 1)
        return np.cumsum(np.where(self.is_relevant, self.hits / ranks, 0.0), axis=1)

    @cached_property
    def dcg(self) -> np.ndarray:
        return np.cumsum(self._gain(self.grades) * _discount(self.depth), axis=1)

    @cached_property
    def idcg(self) -> np.ndarray:
        return np.cumsum(self._gain(self.ideal) * _discount(self.ideal.shape[1]), axis=1)

    def _gain(self, grades: np.ndarray) -> np.ndarray:
        positive = np.maximum(grades, 0.0)  # trec_eval: non-positive grades add nothing
        return positive if self.gain == "linear" else np.exp2(positive) - 1.0

    @staticmethod
    def at(cumulative: np.ndarray, k: int | None) -> np.ndarray:
        """Column k of a cumulative (queries, n) array: the value after the first k ranks."""
        n = cumulative.shape[1]
        if n == 0:
            return np.zeros(cumulative.shape[0])
        return cumulative[:, (n if k is None else min(k, n)) - 1]


def _discount(n: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, n + 2))


def _divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0 (trec_eval's convention)."""
    denominator = np.asarray(denominator, dtype=float)
    return np.divide(numerator, denominator, out=np.zeros(len(denominator)), where=denominator > 0)


# ---------------------------------------------------------------- the metrics
# k=None means "the whole ranking".


def recall(r: RankedJudgments, k: int) -> np.ndarray:
    """|top-k ∩ R| / |R|."""
    return _divide(r.at(r.hits, k), r.n_relevant)


def precision(r: RankedJudgments, k: int) -> np.ndarray:
    """|top-k ∩ R| / k, dividing by k even when fewer were returned."""
    return r.at(r.hits, k) / k


def hit(r: RankedJudgments, k: int) -> np.ndarray:
    """1 if any relevant document is in the top k."""
    return (r.at(r.hits, k) > 0).astype(float)


def mrr(r: RankedJudgments, k: int | None = None) -> np.ndarray:
    """1 / rank of the first relevant document (within the top k), else 0."""
    rank = r.first_relevant_rank
    within = (rank > 0) if k is None else (rank > 0) & (rank <= k)
    return np.where(within, 1.0 / np.maximum(rank, 1), 0.0)


def ndcg(r: RankedJudgments, k: int | None = None) -> np.ndarray:
    """DCG@k / IDCG@k, the ideal ranking built from every judged grade."""
    return _divide(r.at(r.dcg, k), r.at(r.idcg, k))


def average_precision(r: RankedJudgments, k: int | None = None) -> np.ndarray:
    """Σ precision at each relevant rank within k, divided by |R|."""
    return _divide(r.at(r.precision_sum, k), r.n_relevant)


def r_precision(r: RankedJudgments, k: None = None) -> np.ndarray:
    """Precision at rank |R|."""
    columns = np.clip(r.n_relevant, 1, max(r.depth, 1)) - 1
    hits_at_r = r.hits[np.arange(len(columns)), columns] if r.depth else np.zeros(len(columns))
    return _divide(hits_at_r, r.n_relevant)


# ---------------------------------------------------------------- names


@dataclass(frozen=True)
class Family:
    function: Callable[..., np.ndarray]
    cutoff: str  # "required", "optional" or "none"


FAMILIES: dict[str, Family] = {
    "recall": Family(recall, "required"),
    "precision": Family(precision, "required"),
    "hit": Family(hit, "required"),
    "mrr": Family(mrr, "optional"),
    "ndcg": Family(ndcg, "optional"),
    "map": Family(average_precision, "optional"),
    "r_precision": Family(r_precision, "none"),
}

_NAME = re.compile(r"(?P<family>[a-z_]+?)(?:_at_(?P<k>-?\d+))?")


def valid_names() -> str:
    forms = []
    for name, family in FAMILIES.items():
        forms += {"required": [f"{name}_at_K"], "optional": [name, f"{name}_at_K"], "none": [name]}[family.cutoff]
    return ", ".join(forms)


@dataclass(frozen=True)
class Metric:
    """A parsed metric name such as `ndcg_at_10` (family ndcg, k 10) or `mrr` (k None)."""

    family: str
    k: int | None

    @property
    def name(self) -> str:
        return self.family if self.k is None else f"{self.family}_at_{self.k}"

    def __call__(self, ranked: RankedJudgments) -> np.ndarray:
        return FAMILIES[self.family].function(ranked, self.k)

    @classmethod
    def parse(cls, name: str) -> Metric:
        match = _NAME.fullmatch(name.strip())
        family = FAMILIES.get(match["family"]) if match else None
        if family is None:
            raise InputError(f"unknown metric {name!r}; valid metrics: {valid_names()}")
        k = None if match["k"] is None else int(match["k"])
        if k is None and family.cutoff == "required":
            raise InputError(f"metric {name!r} needs a cutoff, e.g. {match['family']}_at_10")
        if k is not None and family.cutoff == "none":
            raise InputError(f"metric {name!r} takes no cutoff; use {match['family']}")
        if k is not None and k <= 0:
            raise InputError(f"metric {name!r}: k must be a positive integer, got {k}")
        return cls(match["family"], k)


def parse_metrics(names: list[str]) -> list[Metric]:
    """Each name checked; order kept, repeats dropped."""
    if not names:
        raise InputError("no metrics given")
    return list(dict.fromkeys(Metric.parse(n) for n in names))
