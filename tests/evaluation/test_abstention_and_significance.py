"""Abstention trade-off curve, bootstrap intervals and paired comparisons."""

from __future__ import annotations

from itertools import product

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from helpers.data import golden_of
from sweep.evaluation import score
from sweep.evaluation.abstention import abstention_curve, calibrate, suggest_min_score
from sweep.evaluation.significance import EXACT_UP_TO, SEED, bootstrap_ci, compare, holm, randomization_p
from sweep.formats.runs import Run


def test_curve_counts_abstentions_at_every_threshold():
    top = np.array([0.9, 0.7, np.nan, 0.4, 0.6])
    answerable = np.array([True, True, True, False, False])
    recall = np.array([1.0, 0.5, 0.0, np.nan, np.nan])
    curve = abstention_curve(top, answerable, recall).set_index("threshold")
    assert curve.index.tolist() == [-np.inf, 0.4, 0.6, 0.7, 0.9]
    # at -inf only the empty result abstains
    assert curve.loc[-np.inf].tolist() == [
        0.0,
        pytest.approx(1 / 3),
        pytest.approx(1.5 / 3),
        pytest.approx((0 + 2 / 3) / 2),
    ]
    # at 0.7 both unanswerable abstain, answerable 0.9 and 0.7 still answer
    assert curve.loc[0.7, "correct_rate"] == 1.0
    assert curve.loc[0.7, "false_rate"] == pytest.approx(1 / 3)
    assert curve.loc[0.7, "metric"] == pytest.approx(1.5 / 3)
    # at 0.9 the 0.7 question is silenced and loses its recall
    assert curve.loc[0.9, "metric"] == pytest.approx(1 / 3)
    assert suggest_min_score(curve.reset_index()) == 0.7


def test_curve_without_unanswerable_questions_never_suggests_abstaining():
    curve = abstention_curve(np.array([0.3, 0.8]), np.array([True, True]), np.array([1.0, 1.0]))
    assert curve["correct_rate"].isna().all()
    # the lowest observed score, which abstains nobody, rather than the equivalent -inf
    assert suggest_min_score(curve) == 0.3
    assert curve.set_index("threshold").loc[0.3, "false_rate"] == 0.0


def test_suggests_minus_infinity_only_when_no_question_has_a_score():
    curve = abstention_curve(np.array([np.nan, np.nan]), np.array([True, False]), np.array([0.0, np.nan]))
    assert suggest_min_score(curve) == -np.inf


CALIBRATION_GOLDEN = {"a1": {"d1": 1}, "a2": {"d2": 1}, "a3": {"d3": 1}, "u1": {}, "u2": {}}
CALIBRATION_RUN = {  # unanswerable questions score low, save u1; a3 scores lower still and misses its document
    "a1": [("d1", 0.9), ("x", 0.2)],
    "a2": [("x", 0.8), ("d2", 0.7)],
    "u1": [("x", 0.75)],
    "a3": [("x", 0.35)],
    "u2": [("y", 0.1)],
}
CALIBRATION_METRICS = ["recall_at_5", "mrr", "abstain/correct_rate", "abstain/false_rate"]


def test_calibration_suggests_a_threshold_and_re_evaluates_the_run_at_it():
    golden = golden_of(CALIBRATION_GOLDEN)
    evaluation = score(golden, Run.from_ranked(CALIBRATION_RUN), CALIBRATION_METRICS)
    calibration = calibrate(evaluation)
    # 0.8 silences both unanswerable questions, and of the answerable only a3, which found nothing anyway
    assert calibration.suggested == 0.8
    assert calibration.balanced_accuracy == pytest.approx((1 + 1 - 1 / 3) / 2)
    assert "recall_at_5" in calibration.curve.columns and "metric" not in calibration.curve.columns
    assert calibration.curve["threshold"].tolist() == [-np.inf, 0.1, 0.35, 0.75, 0.8, 0.9]

    by_hand = Run.from_ranked({q: hits for q, hits in CALIBRATION_RUN.items() if hits[0][1] >= 0.8})
    expected = score(golden, by_hand, CALIBRATION_METRICS).mean
    assert calibration.at_suggested == pytest.approx(expected)
    assert calibration.at_suggested["abstain/correct_rate"] == 1.0
    assert calibration.at_suggested["abstain/false_rate"] == pytest.approx(1 / 3)
    assert calibration.at_suggested["recall_at_5"] == pytest.approx(2 / 3)
    assert calibration.at_suggested["mrr"] == pytest.approx((1 + 0.5) / 3)
    # the table's metric column agrees with the re-evaluation
    at_row = calibration.curve.set_index("threshold").loc[0.8]
    assert at_row["recall_at_5"] == pytest.approx(calibration.at_suggested["recall_at_5"])


def test_nothing_to_calibrate_without_both_kinds_of_question_or_the_metric():
    answerable_only = {q: rel for q, rel in CALIBRATION_GOLDEN.items() if rel}
    run = Run.from_ranked(CALIBRATION_RUN)
    assert calibrate(score(golden_of(answerable_only), run, ["recall_at_5"])) is None
    unanswerable_only = {q: rel for q, rel in CALIBRATION_GOLDEN.items() if not rel}
    assert calibrate(score(golden_of(unanswerable_only), run, ["recall_at_5"])) is None
    assert calibrate(score(golden_of(CALIBRATION_GOLDEN), run, ["mrr"])) is None


def test_bootstrap_intervals_are_seeded_and_bracket_the_mean():
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"a": rng.random(80), "b": rng.integers(0, 2, 80).astype(float), "const": np.ones(80)})
    first, second = bootstrap_ci(frame), bootstrap_ci(frame)
    pd.testing.assert_frame_equal(first, second)
    assert (first["low"] <= first["mean"]).all() and (first["mean"] <= first["high"]).all()
    assert first.loc["const"].tolist() == [1.0, 1.0, 1.0]
    assert 0.05 < first.loc["a", "high"] - first.loc["a", "low"] < 0.3


def test_holm_adjustment():
    assert holm(np.array([0.01, 0.04, 0.03])).tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert holm(np.array([0.5, 0.9])).tolist() == pytest.approx([1.0, 1.0])


def test_paired_comparison_finds_a_real_gain_and_not_a_null_one():
    rng = np.random.default_rng(7)
    a = pd.DataFrame({"ndcg_at_10": rng.random(60), "mrr": rng.random(60)}, index=[f"q{i}" for i in range(60)])
    better = a.assign(ndcg_at_10=np.clip(a["ndcg_at_10"] + 0.15 + rng.normal(0, 0.05, 60), 0, 1))
    table = compare(a, better, ["ndcg_at_10", "mrr"])
    assert table.loc["ndcg_at_10", "delta"] > 0.1
    assert table.loc["ndcg_at_10", "low"] > 0
    assert table.loc["ndcg_at_10", "p_randomization_holm"] < 0.01
    assert table.loc["ndcg_at_10", "p_bootstrap_holm"] < 0.01
    assert table.loc["mrr", "delta"] == 0 and table.loc["mrr", "p_randomization"] == 1.0
    pd.testing.assert_frame_equal(table, compare(a, better, ["ndcg_at_10", "mrr"]))


def test_paired_comparison_uses_only_questions_both_runs_scored():
    a = pd.DataFrame({"m": [0.0, 1.0, np.nan]}, index=["x", "y", "u"])
    b = pd.DataFrame({"m": [1.0, 1.0]}, index=["x", "y"])
    assert compare(a, b, ["m"]).loc["m", "n"] == 2


def test_one_paired_question_is_a_point_interval_and_p_one():
    a = pd.DataFrame({"m": [0.2]}, index=["q1"])
    b = pd.DataFrame({"m": [0.7]}, index=["q1"])
    row = compare(a, b, ["m"]).loc["m"]
    assert row["n"] == 1 and row["delta"] == pytest.approx(0.5)
    assert row["low"] == row["high"] == pytest.approx(0.5) and row["p_randomization"] == 1.0


def scipy_randomization_p(delta: np.ndarray, n_resamples: int) -> float:
    """What `randomization_p` reproduces: scipy's paired sign-flip test, batched as ours is;
    exact (every flip) up to `EXACT_UP_TO` questions."""
    return float(
        stats.permutation_test(
            (delta,),
            np.mean,
            permutation_type="samples",
            n_resamples=np.inf if delta.size <= EXACT_UP_TO else n_resamples,
            alternative="two-sided",
            rng=np.random.default_rng(SEED),
            vectorized=True,
            batch=max(1, (1 << 22) // delta.size),
        ).pvalue
    )


def tenths(n: int, seed: int) -> np.ndarray:
    """Differences of two metrics in tenths (as precision@10's): many zeros and many resampled
    means equal to the observed one in theory, apart only by rounding."""
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 11, n) - rng.integers(0, 11, n)) / 10


@pytest.mark.parametrize("n", [2, 5, 10, 11, 16, 17, 40, 128, 200, pytest.param(2500, marks=pytest.mark.slow)])
def test_randomization_p_is_scipys_permutation_test_to_the_bit(n):
    """Same draws, same sums, same tolerance: identical p-values, on metric-like and continuous
    differences; exact up to 16 questions; in two batches at 2,500 questions."""
    rng = np.random.default_rng(n)
    differences = [
        tenths(n, seed=n),
        np.where(rng.random(n) < 0.7, 0.0, rng.random(n) - 0.4),
        np.round(rng.random(n) - rng.random(n) + 0.05, 3),
        rng.normal(0.02, 1e-6, n),
    ]
    for delta in differences:
        for n_resamples in (999, 2000):
            assert randomization_p(delta, n_resamples) == scipy_randomization_p(delta, n_resamples), (n, n_resamples)


def same_draws_in_exact_arithmetic(units: np.ndarray, n_resamples: int = 2000, seed: int = SEED) -> float:
    """The Monte Carlo p-value of the differences `units` (integers: tenths, thirds) over the sign
    flips scipy draws (`randomization_p`'s), their sums exact: what the p-value is without rounding."""
    n, rng = units.size, np.random.default_rng(seed)
    batch = min(max(1, (1 << 22) // n), n_resamples)
    keep = np.concatenate(
        [
            (rng.integers(0, 2**32, (min(batch, n_resamples - start), n), np.uint32) & 1) == 1
            for start in range(0, n_resamples, batch)
        ]
    )
    sums, observed = np.where(keep, units, -units).sum(axis=1), units.sum()
    at_most = (np.count_nonzero(sums <= observed) + 1) / (n_resamples + 1)
    at_least = (np.count_nonzero(sums >= observed) + 1) / (n_resamples + 1)
    return min(2 * min(at_most, at_least), 1.0)


@pytest.mark.parametrize(("n", "seed"), [(40, 1), (40, 3), (128, 13), (128, 18), (200, 31)])
def test_randomization_p_counts_the_ties_rounding_hides_from_scipy(n, seed):
    """Differences in tenths whose resampled means equal the observed one in theory and differ by
    rounding, by more than scipy's tolerance (eps x 100 x the observed mean, nothing where that
    mean is near 0): the p-value is the one the same draws give in exact arithmetic; scipy's
    misses ties there (these seeds changed its p-value with the order of summation)."""
    delta = tenths(n, seed)
    assert randomization_p(delta) == pytest.approx(same_draws_in_exact_arithmetic(np.rint(delta * 10)), abs=1e-12)
    assert randomization_p(delta) != scipy_randomization_p(delta, 2000)


# ---------------------------------------------------------------- against the exact enumeration (issue 49, item 4)


def thirds(n: int, seed: int) -> np.ndarray:
    """Differences of two recall values of questions with three relevant documents each (0, 1/3,
    2/3, 1), computed as the scorer computes them: many differences equal in theory (1/3 - 0 and
    2/3 - 1/3), and sign flips whose mean ties the observed one exactly."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 4, n) / 3 - rng.integers(0, 4, n) / 3


def enumerated_p(delta: np.ndarray) -> float:
    """The two-sided sign-flip p-value over all 2^n flips, in exact integer arithmetic (`delta`
    in thirds): the share of flipped sums at most, and at least, the observed one; the smaller,
    doubled, at most 1."""
    units = np.rint(delta * 3).astype(np.int64)
    assert np.allclose(units / 3, delta)
    signs = np.array(list(product((1, -1), repeat=units.size)), dtype=np.int64)
    sums, observed = signs @ units, units.sum()
    return min(1.0, 2 * min(np.mean(sums <= observed), np.mean(sums >= observed)))


@pytest.mark.parametrize("n", [2, 3, 5, 7, 9, 12, 16])
def test_randomization_p_is_the_exact_enumeration_on_ties_up_to_16_questions(n):
    """Up to 16 questions every flip is counted: the p-value is the exact one, not within
    Monte Carlo error of it."""
    for seed in range(20):
        delta = thirds(n, seed)
        assert randomization_p(delta) == pytest.approx(enumerated_p(delta), abs=1e-12), (n, seed)


def test_where_the_mean_difference_is_0_in_theory_every_flip_ties_or_beats_it():
    """-1/3 + 2/3 + 2/3 - 1 - 1/3 + 2/3 + 1/3 - 2/3 is 0, in floats 1.1e-16: p is 1. scipy's exact
    test, whose tolerance scales with that mean alone, counts 0.9297."""
    delta = thirds(9, 1)
    assert delta.sum() != 0 and enumerated_p(delta) == 1.0
    assert randomization_p(delta) == 1.0 and scipy_randomization_p(delta, 2000) == 0.9296875


def test_the_issues_case_gives_the_exact_p_not_the_rounded_one():
    """recall@5, B - A on 7 questions: -1/3, four 2/3, two 1/3. The flips of {-1/3, 1/3} tie the
    observed mean; values kept to 10 digits (0.3333333333, 0.6666666667) lost one of those ties."""
    a = np.array([3, 0, 0, 0, 0, 0, 1]) / 3
    b = np.array([2, 2, 2, 2, 2, 1, 2]) / 3
    assert randomization_p(b - a) == enumerated_p(b - a) == 0.0625
    assert randomization_p(np.round(b, 10) - np.round(a, 10)) == 0.046875  # before: across alpha 0.05


@pytest.mark.parametrize(("n", "seed"), [(17, 0), (18, 1), (18, 2)])
def test_randomization_p_is_within_monte_carlo_error_of_the_exact_enumeration_above_16(n, seed):
    """From 17 questions 2,000 random flips (scipy's): within 4 standard errors of the exact p."""
    delta = thirds(n, seed)
    exact, sampled = enumerated_p(delta), randomization_p(delta)
    error = 2 * np.sqrt(max(exact, 1e-3) * (1 - min(exact, 0.999)) / 2000)  # p doubles a share of 2,000 draws
    assert abs(sampled - exact) <= 4 * error, (exact, sampled)
