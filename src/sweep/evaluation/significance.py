"""Uncertainty: bootstrap intervals for means and paired tests between two runs.

`paired` is the one place two runs' per-question values are joined: on question id, keeping the
questions where both are defined (compare, check, the leaderboard's tests against its leader).

Resampling is over questions (the unit a golden set samples) with a fixed seed, so the
same inputs always give the same intervals and p-values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from sweep.errors import InputError

SEED = 20261130
RESAMPLES = 2000
MAX_RESAMPLES = 100_000  # p-values to 1e-5; more only take longer (and the compare command refuses them)
EXACT_UP_TO = 16  # questions: up to here every one of the 2^n sign flips is counted (65,536 at most, about 10 ms)
BATCH_VALUES = 1 << 22  # resampled values held at once (32 MiB): memory stays bounded for any golden set


def bootstrap_ci(
    values: pd.DataFrame, confidence: float = 0.95, n_resamples: int = RESAMPLES, seed: int = SEED
) -> pd.DataFrame:
    """Percentile bootstrap interval of the mean of each column (NaN rows of a column ignored).

    Returns a frame indexed by column name with mean, low, high."""
    rows = {}
    for column in values.columns:
        sample = values[column].dropna().to_numpy(dtype=float)
        rows[column] = (sample_mean(sample), *bootstrap_interval(sample, np.mean, confidence, n_resamples, seed))
    return pd.DataFrame.from_dict(rows, orient="index", columns=["mean", "low", "high"])


def sample_mean(sample: np.ndarray) -> float:
    """The mean of a sample without NaN, as every interval here is centred (NaN for no values)."""
    return sample.mean() if sample.size else np.nan


def bootstrap_interval(
    sample: np.ndarray,
    statistic: Callable[..., Any] = np.mean,
    confidence: float = 0.95,
    n_resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float]:
    """The percentile bootstrap interval of `statistic` (numpy's, taking `axis`) over `sample`
    (`_bootstrap`); the point itself when nothing varies, NaN for an empty sample."""
    if sample.size < 2 or np.ptp(sample) == 0:  # nothing to resample: the interval is the point
        point = float(statistic(sample)) if sample.size else np.nan
        return point, point
    result = _bootstrap(sample, confidence, n_resamples, seed, statistic)
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def _bootstrap(
    sample: np.ndarray, confidence: float, n_resamples: int, seed: int, statistic: Callable[..., Any] = np.mean
) -> Any:
    """scipy's percentile bootstrap of `statistic` (the mean), seeded: the same sample gives the
    same interval. (scipy.stats is imported here: its import takes half a second, which `sweep.best
    --among tied` does not need.)"""
    from scipy import stats

    return stats.bootstrap(
        (sample,),
        statistic,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method="percentile",
        rng=np.random.default_rng(seed),
        batch=_batch(sample.size),
    )


def _batch(size: int) -> int:
    """Resamples per vectorised step so that one step holds at most `BATCH_VALUES` values."""
    return max(1, BATCH_VALUES // max(1, size))


def check_resamples(n_resamples: int) -> None:
    """At least 1 and at most `MAX_RESAMPLES`: one line otherwise."""
    if not 1 <= n_resamples <= MAX_RESAMPLES:
        raise InputError(
            f"--resamples {n_resamples}: give 1 to {MAX_RESAMPLES:,} (the default {RESAMPLES:,} gives p-values to "
            "about 0.001; more only take longer)"
        )


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1)."""
    p_values = np.asarray(p_values, dtype=float)
    m = len(p_values)
    order = np.argsort(p_values)
    adjusted = np.maximum.accumulate(np.minimum((m - np.arange(m)) * p_values[order], 1.0))
    out = np.empty(m)
    out[order] = adjusted
    return out


def paired(a: pd.Series, b: pd.Series) -> pd.DataFrame:
    """Two per-question series (index qid) side by side as columns `a` and `b`, on the questions
    both have where both values are defined (not NaN), in `a`'s order."""
    return pd.concat([a, b], axis=1, keys=["a", "b"], join="inner").dropna()


def compare(
    a: pd.DataFrame,
    b: pd.DataFrame,
    metrics: list[str] | tuple[str, ...],
    confidence: float = 0.95,
    n_resamples: int = RESAMPLES,
    seed: int = SEED,
) -> pd.DataFrame:
    """Paired comparison of run B against run A on the questions both scored.

    `a`, `b`: per-query tables (index qid) with a column per metric. Per metric: means,
    delta (B - A), a paired-bootstrap interval of the delta, a two-sided randomization
    (sign-flip) p-value and a paired-bootstrap p-value, each Holm-corrected across metrics."""
    rows = []
    for metric in metrics:
        pair = paired(a[metric], b[metric])
        delta = (pair["b"] - pair["a"]).to_numpy()
        rows.append(
            {
                "metric": metric,
                "n": len(delta),
                "mean_a": pair["a"].mean(),
                "mean_b": pair["b"].mean(),
                "delta": delta.mean() if delta.size else np.nan,
                **_paired_bootstrap(delta, confidence, n_resamples, seed),
                "p_randomization": randomization_p(delta, n_resamples, seed),
            }
        )
    table = pd.DataFrame(rows).set_index("metric")
    table["p_randomization_holm"] = holm(table["p_randomization"].to_numpy())
    table["p_bootstrap_holm"] = holm(table["p_bootstrap"].to_numpy())
    return table


def _paired_bootstrap(delta: np.ndarray, confidence: float, n_resamples: int, seed: int) -> dict[str, float]:
    if delta.size < 2 or np.ptp(delta) == 0:
        point = delta.mean() if delta.size else np.nan
        return {"low": point, "high": point, "p_bootstrap": 1.0 if point == 0 or delta.size < 2 else 0.0}
    result = _bootstrap(delta, confidence, n_resamples, seed)
    means = result.bootstrap_distribution
    # two-sided: how often the resampled mean falls on the other side of zero
    p = min(1.0, 2 * min((means <= 0).mean(), (means >= 0).mean()))
    return {"low": result.confidence_interval.low, "high": result.confidence_interval.high, "p_bootstrap": p}


def randomization_p(delta: np.ndarray, n_resamples: int = RESAMPLES, seed: int = SEED) -> float:
    """Two-sided paired randomization p-value of the per-question differences `delta`: how often
    the mean of delta with random signs is at least as far from 0 as the observed mean, with
    `stats.permutation_test`'s sign draws and sums, to the bit, and a tolerance for rounding that
    also holds where the observed mean is near 0.

    Exact over all 2^n sign flips when n is at most `EXACT_UP_TO` or 2^n at most `n_resamples`
    (scipy's exact test, `n_resamples=np.inf`): where a few questions decide (a question type in
    `sweep.check --per-type`), whether p is below alpha must not depend on which flips were drawn.
    Otherwise `n_resamples` random flips, as scipy draws them: that function (one sample,
    `permutation_type="samples"`) shuffles each question's pair (d, -d) with one 32-bit draw of the
    generator, keeping d when its low bit is 1, and sums the flipped values in question order; the
    test agrees with it on random inputs. Drawing the bits directly takes a quarter to a third of
    the time, and a leaderboard of 50 runs makes 49 of these tests.

    Flipped means equal to the observed one in theory (recall's thirds: 2/3 - 1/3 and 1/3 - 0)
    differ from it in the last bits; they count as equal within 100 epsilons of the differences'
    mean size (scipy's tolerance, 100 epsilons of the observed mean, misses them where that mean is
    near 0, and it is never larger than this one). The differences must be exact to begin with
    (`sweep.tracking.records.table_json` stores per-question values so): values rounded to 10 digits
    are apart by far more than any tolerance, and miscounted ties moved p across alpha."""
    if delta.size < 2 or not delta.any():  # one question: its two sign flips are +d and -d, p = 1
        return 1.0
    n = delta.size
    observed = delta.mean()
    if n <= EXACT_UP_TO or 2**n <= n_resamples:  # every sign pattern once, as scipy's exact test
        null = _flipped_means(delta, ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) == 1)
        total, unseen = 2**n, 0
    else:
        rng = np.random.default_rng(seed)
        batch = min(_batch(n), n_resamples)
        null = np.concatenate(
            [
                _flipped_means(
                    delta, (rng.integers(0, 2**32, (min(batch, n_resamples - start), n), np.uint32) & 1) == 1
                )
                for start in range(0, n_resamples, batch)
            ]
        )
        total, unseen = n_resamples, 1  # the observed flip counts once more (a Monte Carlo p-value is never 0)
    # equal in theory, apart by rounding: equal. scipy scales this with the observed mean alone, which
    # leaves no room where that mean is 0 in theory (1/3 - 1/3 is 0, 2/3 - 1/3 - 1/3 is 6e-17): the
    # differences' own size bounds their rounding, and the tolerance is never below scipy's
    tolerance = np.finfo(float).eps * 100 * max(abs(observed), np.abs(delta).mean())
    at_most = (np.count_nonzero(null <= observed + tolerance) + unseen) / (total + unseen)
    at_least = (np.count_nonzero(null >= observed - tolerance) + unseen) / (total + unseen)
    return float(min(2 * min(at_most, at_least), 1.0))


def _flipped_means(delta: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Per row of `keep` (resamples x questions): the mean of delta with the signs flipped where
    `keep` is False, summed left to right as scipy sums it (numpy's `mean` sums pairwise)."""
    return np.cumsum(np.where(keep, delta, -delta), axis=-1)[:, -1] / delta.size
