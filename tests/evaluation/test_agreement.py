"""`sweep.evaluation.agreement`: the judge's κ against sklearn's on random pairs, Kendall's τ of two
leaderboards against scipy's, the bootstrap's seed, and the inputs where κ is undefined."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from helpers.data import golden_of
from sweep.evaluation.agreement import NEITHER, NO_PAIRS, board_agreement, judge_agreement
from sweep.evaluation.leaderboard import build
from sweep.evaluation.record import TrialRecord
from sweep.formats.judgments import JudgeGrade, with_judge_grades


def judged(qid: str, doc: str, grade: int | None, calibration: bool = False) -> JudgeGrade:
    return JudgeGrade(
        qid, doc, grade, "qwen2.5:7b", "3f2a9c1b", 400, 90, "##final score", "2026-12-06T10:00:00Z", calibration
    )


def random_pairs(seed: int, questions: int = 40, flip: float = 0.2) -> tuple[dict, list[JudgeGrade]]:
    """People's grades 0-3 on 1-6 documents per question; the judge gives the same grade but for
    about `flip` of the pairs, where it draws one at random; a few more pairs only one side has."""
    rng = np.random.default_rng(seed)
    people, judge = {}, []
    for q in range(questions):
        for d in range(rng.integers(1, 7)):
            grade = int(rng.integers(0, 4))
            people[(f"q{q}", f"d{d}")] = grade
            given = int(rng.integers(0, 4)) if rng.random() < flip else grade
            judge.append(judged(f"q{q}", f"d{d}", given, calibration=bool(rng.random() < 0.3)))
        judge.append(judged(f"q{q}", "pooled", int(rng.integers(0, 4))))  # people never graded it
    judge.append(judged("q0", "unread", None))
    return people, judge


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kappa_and_weighted_kappa_are_sklearns(seed):
    people, judge = random_pairs(seed)
    both = [(people[g.pair], g.grade) for g in judge if g.pair in people]
    person, grade = [p for p, _ in both], [j for _, j in both]
    agreement = judge_agreement(people, judge)
    binary = cohen_kappa_score([p >= 1 for p in person], [g >= 1 for g in grade])
    assert agreement.kappa == pytest.approx(binary, abs=1e-9)
    weighted = cohen_kappa_score(person, grade, weights="quadratic", labels=[0, 1, 2, 3])
    assert agreement.weighted_kappa == pytest.approx(weighted, abs=1e-9)
    assert 0 < agreement.kappa < 1 and agreement.kappa_low <= agreement.kappa <= agreement.kappa_high
    assert agreement.pairs == len(both) and agreement.questions == 40
    assert agreement.judge_only == 40 and agreement.no_grade == 1
    assert agreement.calibration == sum(g.calibration for g in judge if g.pair in people)
    assert agreement.confusion.to_numpy().sum() == len(both)
    assert agreement.confusion.at[3, 0] == sum(p == 3 and g == 0 for p, g in both)
    assert agreement.bias == pytest.approx(np.mean(grade) - np.mean(person))
    assert agreement.kappa_reason == agreement.weighted_reason == ""


def test_a_grade_nobody_gave_still_counts_in_the_distances():
    """Grades 0 and 3 only: the scale is 0-3 (sklearn's with labels 0-3), not two neighbours."""
    people = {("q", f"d{i}"): (3 if i % 2 else 0) for i in range(8)}
    judge = [judged("q", f"d{i}", 3 if i in (1, 2, 3) else 0) for i in range(8)]
    agreement = judge_agreement(people, judge)
    person, grade = [people[g.pair] for g in judge], [g.grade for g in judge]
    expected = cohen_kappa_score(person, grade, weights="quadratic", labels=[0, 1, 2, 3])
    assert agreement.weighted_kappa == pytest.approx(expected, abs=1e-9)
    assert list(agreement.confusion.index) == [0, 1, 2, 3]


def test_the_bootstrap_interval_is_the_same_for_the_same_seed():
    people, judge = random_pairs(4)
    first, again = judge_agreement(people, judge, seed=7), judge_agreement(people, judge, seed=7)
    other = judge_agreement(people, judge, seed=8)
    assert (first.kappa_low, first.kappa_high) == (again.kappa_low, again.kappa_high)
    assert (first.kappa_low, first.kappa_high) != (other.kappa_low, other.kappa_high)
    assert first.kappa == other.kappa


def test_perfect_agreement_is_one():
    people, _ = random_pairs(5)
    agreement = judge_agreement(people, [judged(q, d, grade) for (q, d), grade in people.items()])
    assert agreement.kappa == agreement.weighted_kappa == 1.0 and agreement.bias == 0


def test_degenerate_inputs_give_nan_with_a_reason():
    nothing = judge_agreement({("q", "d"): 2}, [judged("q", "other", 2), judged("q", "d", None)])
    assert math.isnan(nothing.kappa) and math.isnan(nothing.weighted_kappa) and math.isnan(nothing.kappa_low)
    assert nothing.kappa_reason == nothing.weighted_reason == NO_PAIRS and nothing.pairs == 0
    assert math.isnan(nothing.bias)

    same = judge_agreement({("q", "a"): 2, ("r", "b"): 2}, [judged("q", "a", 2), judged("r", "b", 2)])
    assert math.isnan(same.kappa) and "one class (relevant)" in same.kappa_reason
    assert math.isnan(same.weighted_kappa) and "one class (grade 2)" in same.weighted_reason

    # one class each way, but not the same one: defined (sklearn says 0 too)
    relevant_only = judge_agreement({("q", "a"): 2, ("q", "b"): 1}, [judged("q", "a", 2), judged("q", "b", 0)])
    assert relevant_only.kappa == cohen_kappa_score([1, 1], [1, 0]) == 0.0 and not relevant_only.kappa_reason
    # one class (relevant), grades that differ: the binary κ is undefined, the weighted one is not
    graded = judge_agreement({("q", "a"): 2, ("q", "b"): 1}, [judged("q", "a", 2), judged("q", "b", 1)])
    assert math.isnan(graded.kappa) and graded.weighted_kappa == 1.0


def records(means: dict[str, float], seed: int, questions: int = 30) -> list[TrialRecord]:
    """Finished records whose objective per question is noise around `means`."""
    rng = np.random.default_rng(seed)
    qids = [f"q{i}" for i in range(questions)]
    out = []
    for run_id, mean in means.items():
        per_query = pd.DataFrame(
            {
                "qid": qids,
                "type": "factoid",
                "question": qids,
                "ndcg_at_10": np.clip(mean + rng.normal(0, 0.1, questions), 0, 1),
            }
        )
        out.append(TrialRecord(run_id, {}, tables={"per_query": per_query}, run_id=run_id, status="FINISHED"))
    return out


def test_tau_is_scipys_and_verdicts_flip_where_a_difference_appears():
    before = records({"a": 0.80, "b": 0.79, "c": 0.5, "d": 0.2}, seed=1)
    after = records({"a": 0.60, "b": 0.80, "c": 0.81, "d": 0.21}, seed=1)
    old, new = build("ndcg_at_10", before), build("ndcg_at_10", after)
    compared = board_agreement(old, new, before, after)
    expected = stats.kendalltau(old.leaderboard["mean"], new.leaderboard["mean"].reindex(old.leaderboard.index))
    assert compared.tau == pytest.approx(expected.statistic, abs=1e-12) and compared.tau < 1
    assert compared.best == (old.leaderboard.index[0], new.leaderboard.index[0]) and not compared.same_best
    assert len(compared.verdicts) == 6  # every pair once
    by_pair = {(v.a, v.b): v for v in compared.verdicts}
    assert by_pair[("a", "b")].before == NEITHER and by_pair[("a", "b")].after == "a"  # a became worse than b
    assert by_pair[("a", "d")].before == by_pair[("a", "d")].after == "d"  # d stays worse
    assert compared.flips == [v for v in compared.verdicts if v.before != v.after] and compared.flips

    itself = board_agreement(old, old, before, before)
    assert itself.tau == 1.0 and itself.same_best and itself.same_tied and not itself.flips


def test_the_judges_grades_above_peoples_highest_count_as_it():
    # people grade 0-2, as the labelling app does; UMBRELA's 3 is their 2, in κ and in the holes filled
    people = {("q1", "a"): 2, ("q1", "b"): 0, ("q2", "a"): 1, ("q2", "b"): 2}
    judge = [judged("q1", "a", 3), judged("q1", "b", 0), judged("q2", "a", 3), judged("q2", "b", 2)]
    agreement = judge_agreement(people, judge)
    weighted = cohen_kappa_score([2, 0, 1, 2], [2, 0, 2, 2], weights="quadratic", labels=[0, 1, 2])
    assert agreement.weighted_kappa == pytest.approx(weighted, abs=1e-9)
    assert list(agreement.confusion.columns) == [0, 1, 2]  # no 3 left
    golden = golden_of({"q1": {"a": 2}, "q2": {"a": 1}})
    filled = with_judge_grades(golden, [judged("q1", "c", 3), judged("q2", "c", 1)])
    assert filled.by_id["q1"].relevant == {"a": 2, "c": 2} and filled.by_id["q2"].relevant == {"a": 1, "c": 1}
    assert filled.by_id["q1"].provenance["c"].by == "llm:qwen2.5:7b@3f2a9c1b"
