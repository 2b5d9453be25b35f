"""Agreement: an LLM judge's grades against people's, and one sweep's leaderboard against another's.

Judge against people, on the (question, document) pairs both graded (`judge_agreement`):

Cohen's κ on relevance (grade >= 1 relevant), from the confusion matrix O (n pairs; rows the
people's class, columns the judge's):

    p_o = sum_i O_ii / n                 (observed agreement)
    p_e = sum_i (r_i / n) (c_i / n)      (agreement by chance: r row sums, c column sums)
    κ   = (p_o - p_e) / (1 - p_e)

quadratic-weighted κ on the grade scale (every grade from the lowest to the highest either gave,
so that a grade nobody used still counts in the distances; negative grades, which TREC qrels
allow, are 0: both mean not relevant):

    w_ij = (g_i - g_j)^2,   E_ij = r_i c_j / n
    κ_w  = 1 - sum_ij w_ij O_ij / sum_ij w_ij E_ij

Cohen's κ is κ_w with w_ij = 1 for i != j (0 on the diagonal), so one function computes both. Both
are sklearn's `cohen_kappa_score` (unweighted; `weights="quadratic"` with the same `labels`). A κ is
undefined (NaN, with the reason) where the chance disagreement sum_ij w_ij E_ij is 0: no pairs, or
people and the judge each gave every pair the same class (grade). Its 95% interval is a percentile
bootstrap that resamples questions (a question's pairs go together: they share its wording and
its judge's reading), seeded; `significance`'s bootstrap resamples per-question values of a mean,
and κ is no mean of per-question values, so each resample's confusion matrix is summed from the
questions' own. Resamples where κ is undefined are left out.

Leaderboard against leaderboard (`board_agreement`): Kendall's τ-b between the configurations'
means, whether the best configuration and the set tied with it are the same, and each pair's
`sweep.check` verdict (`pair_verdict`) under both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sweep.evaluation.comparison import compare_records, gate
from sweep.evaluation.leaderboard import ALPHA, SweepResults
from sweep.evaluation.significance import BATCH_VALUES, RESAMPLES, SEED
from sweep.formats.judgments import on_people_scale

if TYPE_CHECKING:
    from sweep.evaluation.record import TrialRecord
    from sweep.formats.judgments import JudgeGrade

CONFIDENCE = 0.95
NO_PAIRS = "no (question, document) pair is graded by both people and the judge"
NEITHER = "neither"  # a pair's verdict when neither configuration is significantly worse


def kappa(confusion: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """κ_w of the module's doc for each confusion matrix in `confusion` (shape `(..., k, k)`); NaN
    where the chance disagreement is 0."""
    confusion = np.asarray(confusion, dtype=float)
    n = confusion.sum(axis=(-2, -1))
    expected = confusion.sum(axis=-1)[..., :, None] * confusion.sum(axis=-2)[..., None, :]
    chance = (weights * expected).sum(axis=(-2, -1))
    observed = (weights * confusion).sum(axis=(-2, -1)) * n  # E carries a 1/n: both scaled by n
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(chance > 0, 1 - observed / np.where(chance > 0, chance, 1), np.nan)


def disagreement(k: int) -> np.ndarray:
    """Cohen's weights: 1 off the diagonal."""
    return 1 - np.eye(k)


def quadratic(grades: np.ndarray) -> np.ndarray:
    """(g_i - g_j)^2 for every two grades of the scale."""
    return (grades[:, None] - grades[None, :]).astype(float) ** 2


@dataclass(frozen=True)
class JudgeAgreement:
    """The judge against people on the pairs both graded (see the module's doc)."""

    kappa: float  # Cohen's, on relevance (grade >= 1)
    kappa_low: float  # its 95% bootstrap interval over questions
    kappa_high: float
    weighted_kappa: float  # quadratic, on the grade scale
    confusion: pd.DataFrame  # people's grade (rows) x the judge's grade (columns): pairs
    bias: float  # the judge's mean grade minus people's, over the pairs both graded
    pairs: int  # graded by both
    questions: int  # the questions of those pairs
    no_grade: int  # pairs of the judgments where the judge's answer held no grade
    judge_only: int  # pairs the judge graded that people never graded (the pool's holes)
    calibration: int  # calibration pairs (drawn from people's grades) among those compared
    kappa_reason: str = ""  # why `kappa` is NaN; "" when it is defined
    weighted_reason: str = ""
    seed: int = SEED
    resamples: int = RESAMPLES


def judge_agreement(
    people: Mapping[tuple[str, str], int],
    judged: Sequence[JudgeGrade],
    seed: int = SEED,
    resamples: int = RESAMPLES,
) -> JudgeAgreement:
    """The judge's grades `judged` against people's (`sweep.formats.judgments.person_grades`) on
    the pairs both graded, the judge's on people's scale (`on_people_scale`: a grade above
    people's highest is taken as it); NaN with a reason where a κ is undefined."""
    judged = on_people_scale(judged, people)
    both = [(people[g.pair], g) for g in judged if g.grade is not None and g.pair in people]
    person = np.array([max(grade, 0) for grade, _ in both], dtype=int)
    judge = np.array([max(g.grade, 0) for _, g in both], dtype=int)
    qids = pd.Index(sorted({g.qid for _, g in both}))
    question = qids.get_indexer([g.qid for _, g in both])
    scale = np.arange(0, max(person.max(initial=0), judge.max(initial=0)) + 1)
    confusion = np.zeros((len(scale), len(scale)), dtype=int)
    np.add.at(confusion, (person, judge), 1)
    binary = np.array([[part.sum() for part in np.split(row, [1], axis=1)] for row in np.split(confusion, [1])])
    cohen = float(kappa(binary, disagreement(2)))
    weighted = float(kappa(confusion, quadratic(scale)))
    low, high = kappa_interval(question, person >= 1, judge >= 1, len(qids), seed, resamples)
    return JudgeAgreement(
        kappa=cohen,
        kappa_low=low,
        kappa_high=high,
        weighted_kappa=weighted,
        confusion=pd.DataFrame(confusion, index=pd.Index(scale, name="people"), columns=pd.Index(scale, name="judge")),
        bias=float(judge.mean() - person.mean()) if len(both) else float("nan"),
        pairs=len(both),
        questions=len(qids),
        no_grade=sum(g.grade is None for g in judged),
        judge_only=sum(g.grade is not None and g.pair not in people for g in judged),
        calibration=sum(g.calibration for _, g in both),
        kappa_reason=undefined_because(binary, ["not relevant", "relevant"]),
        weighted_reason=undefined_because(confusion, [f"grade {g}" for g in scale]),
        seed=seed,
        resamples=resamples,
    )


def undefined_because(confusion: np.ndarray, labels: Sequence[str]) -> str:
    """Why κ of `confusion` (its classes named by `labels`) is undefined, in one line; "" where it
    is defined. With any weights that are 0 on the diagonal only, the chance disagreement is 0
    exactly when both raters put every pair in one and the same class."""
    if not confusion.sum():
        return NO_PAIRS
    if np.isnan(kappa(confusion, disagreement(len(confusion)))):
        [only] = np.flatnonzero(confusion.sum(axis=1))
        return (
            f"people and the judge put all {confusion.sum()} pairs both graded in one class ({labels[only]}): "
            "agreement by chance is certain, so κ is undefined"
        )
    return ""


def kappa_interval(
    question: np.ndarray, person: np.ndarray, judge: np.ndarray, questions: int, seed: int, resamples: int
) -> tuple[float, float]:
    """The percentile bootstrap interval of Cohen's κ of `person` and `judge` (relevant or not,
    per pair) resampling the `questions` (`question`: each pair's), seeded; NaN where κ is
    undefined in every resample."""
    if not questions:
        return float("nan"), float("nan")
    cells = question * 4 + person.astype(int) * 2 + judge.astype(int)
    per_question = np.bincount(cells, minlength=questions * 4).reshape(questions, 4)
    rng = np.random.default_rng(seed)
    batch = max(1, BATCH_VALUES // questions)
    kappas = []
    for start in range(0, resamples, batch):
        drawn = rng.multinomial(questions, np.full(questions, 1 / questions), size=min(batch, resamples - start))
        kappas.append(kappa((drawn @ per_question).reshape(-1, 2, 2), disagreement(2)))
    values = np.concatenate(kappas)
    values = values[~np.isnan(values)]
    if not values.size:
        return float("nan"), float("nan")
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


# ---------------------------------------------------------------- leaderboard against leaderboard


@dataclass(frozen=True)
class PairVerdict:
    """`sweep.check`'s verdict on two configurations under two leaderboards: which of them is
    significantly worse (its run id), or `NEITHER`."""

    a: str  # run ids, `a` ranked above `b` in the first leaderboard
    b: str
    before: str
    after: str

    @property
    def flipped(self) -> bool:
        return self.before != self.after


@dataclass(frozen=True)
class BoardAgreement:
    """Two leaderboards of the same configurations: what a change of grades did to the decision."""

    tau: float  # Kendall's τ-b between the means of the configurations ranked in both; NaN below two
    best: tuple[str | None, str | None]  # each leaderboard's best run id
    tied: tuple[frozenset[str], frozenset[str]]  # each leaderboard's runs tied with its best (the best included)
    verdicts: list[PairVerdict]

    @property
    def same_best(self) -> bool:
        return self.best[0] == self.best[1]

    @property
    def same_tied(self) -> bool:
        return self.tied[0] == self.tied[1]

    @property
    def flips(self) -> list[PairVerdict]:
        return [v for v in self.verdicts if v.flipped]


def pair_verdict(a: TrialRecord, b: TrialRecord, objective: str, alpha: float = ALPHA) -> str:
    """The run id of the record significantly worse than the other on `objective` (`sweep.check`'s
    gate with max_drop 0 and `alpha`, tried both ways), or `NEITHER`."""
    worse = [
        second.run_id
        for first, second in ((a, b), (b, a))
        if gate(compare_records(first, second, [objective], objective), objective, 0.0, alpha, False).regressed
    ]
    return worse[0] if worse else NEITHER  # a mean lower and higher at once: never both


def ranked_means(board: SweepResults) -> pd.Series:
    """Run id -> the objective's mean, for the configurations the leaderboard ranks with a mean."""
    return board.leaderboard["mean"].dropna().astype(float)


def tied_set(board: SweepResults) -> frozenset[str]:
    return frozenset(board.leaderboard.index[board.leaderboard["tied_with_best"].fillna(False).astype(bool)])


def board_agreement(
    before: SweepResults,
    after: SweepResults,
    before_records: Sequence[TrialRecord],
    after_records: Sequence[TrialRecord],
    alpha: float = ALPHA,
) -> BoardAgreement:
    """`after` against `before` (two leaderboards of one sweep's configurations, from the
    records given), on the configurations both rank; the verdicts in `before`'s order."""
    from scipy import stats  # here: scipy.stats takes half a second to import

    means = pd.concat([ranked_means(before), ranked_means(after)], axis=1, join="inner")
    tau = float(stats.kendalltau(means.iloc[:, 0], means.iloc[:, 1]).statistic) if len(means) >= 2 else np.nan
    records = [{r.run_id: r for r in group} for group in (before_records, after_records)]
    verdicts = [
        PairVerdict(
            a,
            b,
            pair_verdict(records[0][a], records[0][b], before.objective, alpha),
            pair_verdict(records[1][a], records[1][b], after.objective, alpha),
        )
        for a, b in combinations(means.index, 2)
    ]
    firsts = tuple(ranked_means(board).index[0] if len(ranked_means(board)) else None for board in (before, after))
    return BoardAgreement(tau, firsts, (tied_set(before), tied_set(after)), verdicts)
