"""Latency that can be compared: each configuration's median with an interval, and which differences are real.

Input: per configuration (a run id), the milliseconds of each timed question (a Series indexed by
question id), best from one interleaved pass over the configurations (`sweep.experiment.latency_pass`),
so that load that comes and goes hits every configuration alike. From it:

- `median_interval`: the p50's 95% percentile-bootstrap interval (resampling questions, seeded),
  logged beside the p50 as `INTERVAL`'s metrics.
- `compare_to_fastest`: the fastest configuration (the lowest p50) and, for each other one, a
  paired test over the questions both timed: the per-question log-ratio log(ms / fastest's ms), a
  two-sided sign-flip randomization test of its mean (`significance.randomization_p`),
  Holm-corrected across the configurations. A configuration is `slower` when that corrected p is
  below alpha and its mean log-ratio is above 0; `ratio` is exp of that mean (the geometric mean of
  the per-question ratios). A configuration whose questions were not timed is tested against
  nothing: NaN, never slower.
- `front`: the Pareto front that counts a latency difference only when the test finds it: the
  configuration with the best quality, and each other one that is significantly faster than every
  configuration of higher quality, tested against the one of them with the lowest p50 (Holm across
  the front's tests). Configurations the test cannot tell apart are equally fast, so of those only
  the best quality is on the front.
- `not_slower`: of some configurations, those not significantly slower than the fastest of them: a
  tie by latency stays a tie (`sweep.best --among tied --prefer latency/...`).

Each test draws enough sign flips that its smallest possible p-value is far below Holm's first
threshold for the number of tests; the same inputs give the same p-values, marks and front.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from sweep.evaluation.significance import RESAMPLES, SEED, bootstrap_interval, holm, paired, randomization_p

ALPHA = 0.05
TABLE = "latency"  # a record's table of the timed questions: qid, ms
PREFIX = "latency/search_ms_"  # the metrics per-question latencies stand behind (p50, p95, p99)
INTERVAL = (f"{PREFIX}p50_low", f"{PREFIX}p50_high")  # the metrics of the p50's interval
COLUMNS = ("latency_low", "latency_high", "latency_ratio", "latency_p_holm", "slower")  # `compare_to_fastest`'s


def median_interval(
    ms: np.ndarray, confidence: float = 0.95, n_resamples: int = RESAMPLES, seed: int = SEED
) -> tuple[float, float]:
    """The seeded percentile bootstrap interval of the median over questions; the point when nothing varies."""
    return bootstrap_interval(ms, np.median, confidence, n_resamples, seed)


def log_ratios(fast: pd.Series, other: pd.Series) -> np.ndarray:
    """log(other / fast) on the questions both timed."""
    pair = paired(fast, other)
    a, b = np.maximum(pair["a"].to_numpy(float), 1e-9), np.maximum(pair["b"].to_numpy(float), 1e-9)
    return np.log(b) - np.log(a)


def resamples_for(tests: int, alpha: float = ALPHA) -> int:
    """Sign flips per test: the smallest p-value, 1 / (flips + 1), is a twentieth of Holm's first
    threshold alpha / tests at most."""
    return max(RESAMPLES, math.ceil(20 * tests / alpha))


def paired_tests(
    pairs: Mapping[str, tuple[pd.Series, pd.Series]], alpha: float = ALPHA, seed: int = SEED
) -> pd.DataFrame:
    """For each name -> (reference ms, other ms): the mean log-ratio of other to reference, its
    ratio, the two-sided randomization p-value and the Holm-corrected one across `pairs`, and
    whether the other is significantly slower (`slower`) or faster (`faster`)."""
    flips = resamples_for(len(pairs), alpha)
    rows = {}
    for name, (reference, other) in pairs.items():
        d = log_ratios(reference, other)
        mean = float(d.mean()) if d.size else math.nan
        rows[name] = {"log_ratio": mean, "ratio": math.exp(mean), "p": randomization_p(d, flips, seed), "n": d.size}
    table = pd.DataFrame.from_dict(rows, orient="index", columns=["log_ratio", "ratio", "p", "n"])
    table["p_holm"] = holm(table["p"].to_numpy()) if len(table) else []
    significant = table["p_holm"] < alpha
    table["slower"] = significant & (table["log_ratio"] > 0)
    table["faster"] = significant & (table["log_ratio"] < 0)
    return table


def p50s(per_question: Mapping[str, pd.Series]) -> pd.Series:
    """Each configuration's median ms (those with timed questions)."""
    return pd.Series({r: float(ms.median()) for r, ms in per_question.items() if ms.notna().any()}, dtype=float)


def compare_to_fastest(
    per_question: Mapping[str, pd.Series],
    ids: Sequence[str],
    alpha: float = ALPHA,
    seed: int = SEED,
    intervals: bool = True,
) -> pd.DataFrame:
    """`COLUMNS` for each of `ids`: the p50's interval (NaN without `intervals`: the marks alone
    need no bootstrap, nor scipy), the ratio to the fastest, the Holm-corrected p-value of the
    paired test against it and the `slower` mark (module docstring); NaN and not slower where
    `per_question` has no timed question of the run."""
    table = pd.DataFrame(index=pd.Index(list(ids)), columns=list(COLUMNS), dtype=float)
    table["slower"] = False
    medians = p50s({r: per_question[r] for r in ids if r in per_question})
    if medians.empty:
        return table
    for run_id in medians.index if intervals else ():
        table.loc[run_id, ["latency_low", "latency_high"]] = median_interval(
            per_question[run_id].dropna().to_numpy(float), seed=seed
        )
    fastest = medians.idxmin()
    others = {r: (per_question[fastest], per_question[r]) for r in medians.index if r != fastest}
    tests = paired_tests(others, alpha, seed)
    table.loc[fastest, ["latency_ratio", "latency_p_holm"]] = 1.0, 1.0
    table.loc[tests.index, "latency_ratio"] = tests["ratio"]
    table.loc[tests.index, "latency_p_holm"] = tests["p_holm"]
    table.loc[tests.index, "slower"] = tests["slower"]
    table["slower"] = table["slower"].astype(bool)
    return table


def front(means: pd.Series, per_question: Mapping[str, pd.Series], alpha: float = ALPHA, seed: int = SEED) -> set[str]:
    """The run ids on the Pareto front of quality (`means`, higher is better) against latency,
    counting a latency difference only where the paired test finds it (module docstring); runs
    without a mean or without timed questions take no part."""
    medians = p50s({r: per_question[r] for r in means.dropna().index if r in per_question})
    if medians.empty:
        return set()
    quality = means[medians.index].sort_values(ascending=False, kind="stable")
    pairs = {}
    for run_id, mean in quality.items():
        better = medians[quality.index[quality > mean]]
        if len(better):  # p must beat the quickest of those of higher quality
            pairs[run_id] = (per_question[better.idxmin()], per_question[run_id])
    faster = paired_tests(pairs, alpha, seed)["faster"]
    return {r for r in quality.index if r not in pairs or bool(faster[r])}


def marks(
    means: pd.Series, per_question: Mapping[str, pd.Series], alpha: float = ALPHA, seed: int = SEED
) -> pd.DataFrame:
    """The leaderboard's latency columns for the runs of `means` (their objective's mean, ranked):
    `COLUMNS` (`compare_to_fastest`) and `on_front` (`front`)."""
    table = compare_to_fastest(per_question, list(means.index), alpha, seed)
    table["on_front"] = table.index.isin(list(front(means, per_question, alpha, seed)))
    return table


def not_slower(
    per_question: Mapping[str, pd.Series], ids: Sequence[str], alpha: float = ALPHA, seed: int = SEED
) -> list[str]:
    """Those of `ids` (in their order) that are not significantly slower than the fastest of them
    (`compare_to_fastest`); `ids` without timed questions are left out."""
    timed = [r for r in ids if r in per_question and per_question[r].notna().any()]
    if not timed:
        return []
    marks = compare_to_fastest(per_question, timed, alpha, seed, intervals=False)
    return [r for r in timed if not marks.at[r, "slower"]]


def per_question_ms(tables: Mapping[str, pd.DataFrame | None]) -> dict[str, pd.Series]:
    """Run id -> ms per question id, from each run's `TABLE` (qid, ms); runs without one left out."""
    return {
        run_id: table.set_index("qid")["ms"].astype(float)
        for run_id, table in tables.items()
        if table is not None and len(table)
    }


def latency_table(ms: Mapping[str, float]) -> pd.DataFrame:
    """`TABLE` of the timed questions: qid, ms, in the order they were timed."""
    return pd.DataFrame({"qid": list(ms), "ms": [float(v) for v in ms.values()]})
