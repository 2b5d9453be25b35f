"""Latency that can be compared (sweep.evaluation.latency): the p50's interval, the paired test
against the fastest and its marks, the Pareto front of significant differences and the tie-aware
choice, each against scipy on seeded random inputs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sweep.evaluation.latency import (
    compare_to_fastest,
    front,
    log_ratios,
    marks,
    median_interval,
    not_slower,
    paired_tests,
    per_question_ms,
    resamples_for,
)
from sweep.evaluation.leaderboard import cheapest_tied
from sweep.evaluation.record import TrialRecord
from sweep.evaluation.significance import RESAMPLES, SEED


def timed(values: np.ndarray, start: int = 0) -> pd.Series:
    return pd.Series(values, index=[f"q{i}" for i in range(start, start + len(values))], dtype=float)


def shared_work(n: int = 100, configurations: int = 11, seed: int = 3, slower: dict[int, float] | None = None):
    """Configurations timed together that do the same work: each question's own cost (log-normal
    over questions), the moment's load (shared by all within a question), and noise of their own;
    `slower`: configuration -> factor of true extra work."""
    rng = np.random.default_rng(seed)
    question = rng.lognormal(np.log(15), 0.3, n)
    load = rng.lognormal(0, 0.4, n)  # load that comes and goes: alike for every configuration of a question
    factors = slower or {}
    return {
        f"c{c}": timed(question * load * factors.get(c, 1.0) * rng.lognormal(0, 0.08, n)) for c in range(configurations)
    }


def holm_reference(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjustment as its definition reads: the k-th smallest times (m - k + 1), running maximum."""
    order = np.argsort(p)
    adjusted = np.minimum(1, np.maximum.accumulate([(len(p) - k) * p[i] for k, i in enumerate(order)]))
    out = np.empty(len(p))
    out[order] = adjusted
    return out


def test_the_median_interval_is_scipys_percentile_bootstrap_and_seeded():
    rng = np.random.default_rng(1)
    for ms in (rng.lognormal(3, 0.5, 150), rng.exponential(10, 37)):
        reference = stats.bootstrap(
            (ms,), np.median, n_resamples=RESAMPLES, method="percentile", rng=np.random.default_rng(SEED)
        ).confidence_interval
        low, high = median_interval(ms)
        assert (low, high) == pytest.approx((reference.low, reference.high), rel=1e-12)
        assert low <= np.median(ms) <= high and median_interval(ms) == (low, high)
    assert median_interval(np.array([4.0, 4.0])) == (4.0, 4.0)


@pytest.mark.parametrize("n", [12, 60, 150])
def test_the_paired_test_is_scipys_sign_flip_test_on_log_ratios_then_holm(n):
    rng = np.random.default_rng(n)
    fast = timed(rng.lognormal(3, 0.4, n))
    others = {f"o{k}": timed(fast.to_numpy() * rng.lognormal(0.05 * k, 0.2, n)) for k in range(4)}
    table = paired_tests({name: (fast, other) for name, other in others.items()})
    flips = resamples_for(len(others))
    for name, other in others.items():
        d = np.log(other.to_numpy()) - np.log(fast.to_numpy())
        np.testing.assert_allclose(log_ratios(fast, other), d, rtol=1e-12)
        reference = stats.permutation_test(
            (d,), np.mean, permutation_type="samples", alternative="two-sided", vectorized=True,
            n_resamples=np.inf if n <= 16 else flips, rng=np.random.default_rng(SEED), batch=max(1, (1 << 22) // n),
        ).pvalue  # fmt: skip
        assert table.at[name, "p"] == reference, name
        assert table.at[name, "ratio"] == pytest.approx(math.exp(d.mean()))
    np.testing.assert_allclose(table["p_holm"], holm_reference(table["p"].to_numpy()))
    assert (table["slower"] == ((table["p_holm"] < 0.05) & (table["log_ratio"] > 0))).all()


def test_enough_flips_that_holm_can_reach_alpha_for_many_configurations():
    for tests in (1, 10, 49, 200):
        assert 1 / (resamples_for(tests) + 1) < 0.05 / tests / 10


def test_configurations_sharing_their_work_are_not_slower_and_a_real_cost_is():
    times = shared_work()
    equal = compare_to_fastest(times, [f"c{c}" for c in range(11)])
    assert not equal["slower"].any()
    fastest = min(times, key=lambda c: times[c].median())
    assert equal.at[fastest, "latency_ratio"] == 1.0 and equal["latency_ratio"].between(0.95, 1.05).all()
    assert (equal["latency_low"] <= equal["latency_high"]).all()
    costly = compare_to_fastest(shared_work(slower={4: 1.3}), [f"c{c}" for c in range(11)])
    assert costly.index[costly["slower"]].tolist() == ["c4"]
    assert costly.at["c4", "latency_ratio"] == pytest.approx(1.3, rel=0.1)


def test_the_same_times_give_the_same_marks():
    a = compare_to_fastest(shared_work(slower={2: 1.1}), [f"c{c}" for c in range(11)])
    pd.testing.assert_frame_equal(a, compare_to_fastest(shared_work(slower={2: 1.1}), [f"c{c}" for c in range(11)]))


def test_a_run_without_timed_questions_is_tested_against_nothing():
    times = shared_work(configurations=2, slower={1: 2.0})
    table = compare_to_fastest(times, ["c0", "c1", "old"])
    assert table.at["c1", "slower"] and not table.at["old", "slower"] and np.isnan(table.at["old", "latency_p_holm"])
    read = per_question_ms({"a": pd.DataFrame({"qid": ["q1"], "ms": [3.0]}), "b": None})
    assert list(read) == ["a"] and read["a"].to_dict() == {"q1": 3.0}


def test_the_front_counts_only_significant_latency_differences():
    """best: the highest quality, slow; quick: lower quality, much faster (on the front);
    noise: lower quality still, as fast as quick (dominated: no faster than quick);
    same_as_best: as slow as best, lower quality (dominated)."""
    times = shared_work(configurations=4, slower={0: 3.0, 3: 3.0})
    times = dict(zip(["best", "quick", "noise", "same_as_best"], times.values()))
    means = pd.Series({"best": 0.9, "quick": 0.8, "noise": 0.7, "same_as_best": 0.85})
    assert front(means, times) == {"best", "quick"}
    # a raw p50 a hair lower is no reason to be on the front
    assert times["noise"].median() != times["quick"].median()
    table = marks(means, times)
    assert table.index[table["on_front"]].tolist() == ["best", "quick"]
    assert table.index[table["slower"]].tolist() == ["best", "same_as_best"]
    # eleven configurations sharing their work: one front point, the best quality
    equal = shared_work()
    assert front(pd.Series({f"c{c}": 0.5 + c / 100 for c in range(11)}), equal) == {"c10"}


def test_a_tie_by_latency_stays_a_tie():
    times = shared_work(configurations=3, slower={2: 2.0})
    assert not_slower(times, ["c1", "c0", "c2"]) == ["c1", "c0"]
    assert not_slower(times, ["c2"]) == ["c2"] and not_slower(times, ["unknown"]) == []


def record(run_id: str, quality: np.ndarray, ms: pd.Series, p50: float) -> TrialRecord:
    per_query = pd.DataFrame({"qid": [f"q{i}" for i in range(len(quality))], "ndcg_at_10": quality})
    table = pd.DataFrame({"qid": ms.index, "ms": ms.to_numpy()})
    return TrialRecord(
        run_id, {}, metrics={"latency/search_ms_p50": p50}, tables={"per_query": per_query, "latency": table},
        run_id=run_id, status="FINISHED",
    )  # fmt: skip


def test_prefer_latency_picks_by_significant_differences_and_says_when_it_is_a_tie():
    rng = np.random.default_rng(5)
    quality = rng.uniform(0.3, 0.9, 80)
    times = shared_work(n=80, configurations=3, slower={2: 2.0})
    # all three tied on quality; c1's p50 is a hair lower than c0's only by noise
    records = [record(f"c{c}", quality, times[f"c{c}"], float(times[f"c{c}"].median())) for c in range(3)]
    chosen, why = cheapest_tied("ndcg_at_10", records, "latency/search_ms_p50")
    assert chosen.run_id == "c0" and "a tie by latency: 2 runs are not significantly slower" in why
    # by the logged value alone the noise would have chosen
    assert min(records, key=lambda r: r.metrics["latency/search_ms_p50"]).run_id != "c2"
    quick = shared_work(n=80, configurations=2, slower={0: 2.0})
    records = [record(f"c{c}", quality, quick[f"c{c}"], float(quick[f"c{c}"].median())) for c in range(2)]
    chosen, why = cheapest_tied("ndcg_at_10", records, "latency/search_ms_p50")
    assert chosen.run_id == "c1" and why.startswith("significantly the fastest")
    # one run tied with the best: nothing to test, nothing claimed
    far = record("far", quality - 0.3, quick["c0"], float(quick["c0"].median()))
    chosen, why = cheapest_tied("ndcg_at_10", [records[0], far], "latency/search_ms_p50")
    assert chosen.run_id == "c0" and why.startswith("the lowest latency/search_ms_p50") and "1 of 2 runs" in why
