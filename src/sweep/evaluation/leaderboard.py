"""A sweep's leaderboard with its uncertainty: which configurations the golden set can tell apart.

Per configuration (a finished child run): the mean of the objective over the questions where it
is defined, its 95% percentile-bootstrap interval (resampling questions), and a paired comparison
with the leader (the highest mean): the 95% bootstrap interval of the mean per-question difference
(`delta_low`, `delta_high`: resampling the questions both have), and a two-sided randomization
(sign-flip) p-value on those differences, Holm-corrected across the sweep's comparisons. A
configuration is `tied_with_best` when that corrected p-value is at least `alpha`: the data cannot
say it is worse. Resampling is seeded, so the same runs give the same intervals, p-values, marks and order.

Minimum detectable effect (`mde`): the smallest true difference in the objective's mean that a
paired test at `alpha` (two-sided) would detect with probability `power`, for the questions at
hand, by the normal approximation of the paired test:

    MDE = (z(1 - alpha/2) + z(power)) * sd(d) / sqrt(n)

where d are the per-question differences between a configuration and the leader and n their
number; sd(d) is the median over the sweep's configurations (each against the leader), so one
outlier configuration does not set it. With 0.05 and 0.8 the factor is 2.80. It needs at least two
configurations with a value of the objective on two questions both have (a difference to measure;
finished runs of a golden set nothing is labelled in yet have none); otherwise NaN. The same
approximation solved for n gives the answerable questions a difference `delta` would take,
((z(1 - alpha/2) + z(power)) * sd(d) / delta)^2 (`questions_to_detect`; the MDE line names it for
`TARGET_DIFFERENCE`).

One corpus: a configuration scored on another corpus than the others (its `data.corpus_digest`:
the corpus file was edited while the sweep ran) is not ranked against them. The runs of the corpus
most of them searched (on a tie, the earliest run's) are ranked; the others follow with the status
`NOT_RANKED`, and one line (`SweepResults.note`, under the leaderboard) names them.

Latency: from the ranked runs' timed questions (`tables/latency.json`, a sweep's all timed together),
`sweep.evaluation.latency.marks` adds the p50's interval (`latency_low`, `latency_high`), the ratio
to the fastest and the Holm-corrected p-value of the paired test against it, the `slower` mark, and
`on_front` (the quality-versus-latency front that counts only significant latency differences).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweep.errors import InputError
from sweep.evaluation.latency import INTERVAL as LOGGED_INTERVAL
from sweep.evaluation.latency import PREFIX as LATENCY_PREFIX
from sweep.evaluation.latency import TABLE as LATENCY_TABLE
from sweep.evaluation.latency import marks as latency_marks
from sweep.evaluation.latency import not_slower, per_question_ms
from sweep.evaluation.record import CORPUS_DIGEST, TrialRecord
from sweep.evaluation.registry import COSTS
from sweep.evaluation.significance import RESAMPLES, SEED, bootstrap_ci, holm, paired, randomization_p, sample_mean

ALPHA = 0.05
POWER = 0.8
TARGET_DIFFERENCE = 0.02  # the difference the MDE line says how many questions would detect
NOT_RANKED = "not ranked: other corpus"  # the status of a run scored on another corpus than those ranked
COLUMNS = (
    "config", "status", "mean", "ci_low", "ci_high", "n", "delta", "delta_low", "delta_high", "p_value", "p_holm",
    "tied_with_best",
)  # fmt: skip
GOLDEN_PATH = "golden.path"  # the param of the golden file a run was scored on
COMMIT = "mlflow.source.git.commit"  # the tag of the git commit a run ran


@dataclass(frozen=True)
class SweepResults:
    """Everything a sweep's reports show (console, `tables/leaderboard.json`, `report.html`).

    All frames are keyed by child run id; `leaderboard` is ordered best first (then failed runs)."""

    objective: str
    leaderboard: pd.DataFrame  # COLUMNS, then the registry's COSTS where logged
    per_type: pd.DataFrame  # run id x question type: the objective's mean per type
    per_query: pd.DataFrame  # question id x run id: the objective per question (NaN where undefined)
    questions: pd.DataFrame  # question id -> question, type
    differing: pd.DataFrame  # run id x config key: only the keys whose values differ between the runs
    mde: float  # NaN when it cannot be estimated (fewer than two scored configurations)
    alpha: float = ALPHA
    power: float = POWER
    note: str = ""  # which runs were not ranked and why (`other_corpora`), in one line; "" when all were
    # what the ranked runs were scored on and ran, each value once, in run order
    golden_paths: tuple[str, ...] = ()
    golden_digests: tuple[str, ...] = ()
    commits: tuple[str, ...] = ()

    @property
    def n_questions(self) -> int:
        """Questions where the objective is defined in some configuration (the answerable ones)."""
        return int(self.per_query.notna().any(axis=1).sum())

    def mde_line(self) -> str:
        """The line under the leaderboard: the minimum detectable effect, then the `note` on the
        runs that were not ranked, if any."""
        return f"{self._mde_sentence()}. {self.note}" if self.note else self._mde_sentence()

    def _mde_sentence(self) -> str:
        if not np.isfinite(self.mde):
            finished = int((self.leaderboard["status"] == "FINISHED").sum())
            scored = int(self.leaderboard["mean"].notna().sum())
            if scored < 2:  # finished runs without a value (nothing labelled yet) are not scored
                return (
                    f"{self.objective}: no minimum detectable effect: it needs two configurations with a value "
                    f"of {self.objective}, and {scored} of the {finished} finished have one"
                )
            return (
                f"{self.objective}: no minimum detectable effect: it needs two questions with a value in both "
                "the leader and another configuration"
            )
        test = f"(paired test, alpha {self.alpha}, power {self.power:.0%})"
        if self.mde < 0.001:  # at 3 decimals it would read "differences below 0.000"
            detectable = f"differences in {self.objective} as small as 0.001 are detectable {test}"
        else:
            detectable = f"differences below {self.mde:.3f} {self.objective} are not detectable {test}"
        leader = self.per_query.columns[0]
        needed = questions_to_detect(self.per_query, leader, TARGET_DIFFERENCE, self.alpha, self.power)
        return (
            f"with {self.n_questions} answerable questions, {detectable}; detecting {TARGET_DIFFERENCE} would "
            f"take about {max(2, math.ceil(needed))} answerable questions"
        )

    def worst(self, n: int = 10) -> pd.DataFrame:
        """The `n` questions with the lowest objective averaged over the configurations: the
        question, its type, that mean, and the value in each configuration (columns: run ids)."""
        values = self.per_query.dropna(how="all")
        mean = values.mean(axis=1).rename("mean")
        order = mean.sort_values(kind="stable").index[:n]
        return self.questions.reindex(order).join(mean).join(values)


def build(objective: str, runs: Sequence[TrialRecord], alpha: float = ALPHA, seed: int = SEED) -> SweepResults:
    """The sweep's results from its runs' records (in start order): finished runs ranked by `rank`,
    the others after them in start order with their status and what metrics they logged."""
    per_query = objective_values(objective, runs)
    elsewhere, note = other_corpora([run for run in runs if run.run_id in per_query])
    per_query = {run_id: values for run_id, values in per_query.items() if run_id not in elsewhere}
    ranked = rank(per_query, alpha, seed=seed)
    order = [*ranked.index, *(run.run_id for run in runs if run.run_id not in per_query)]
    by_id = {run.run_id: run for run in runs}
    status = [NOT_RANKED if r in elsewhere else by_id[r].status for r in order]
    described = pd.DataFrame({"config": [by_id[r].label for r in order], "status": status}, index=order)
    metrics = pd.DataFrame.from_dict({r: dict(by_id[r].metrics) for r in order}, orient="index").reindex(order)
    costs = [c for c in COSTS if c in metrics.columns]
    # the p50's interval as the latency pass logged it is `latency_low`/`_high`, from the same times
    others = [c for c in metrics.columns if c not in (*costs, *LOGGED_INTERVAL) and not c.startswith("type/")]
    timed = per_question_ms({r: by_id[r].tables.get(LATENCY_TABLE) for r in ranked.index})
    latency = latency_marks(ranked["mean"], timed, alpha, seed)  # from the questions timed together
    leaderboard = described.join(ranked).join(latency).join(metrics[[*costs, *sorted(others)]])
    leaderboard.index.name = "run_id"
    prefix, suffix = "type/", f"/{objective}"
    per_type = metrics[[c for c in metrics.columns if c.startswith(prefix) and c.endswith(suffix)]]
    per_type = per_type.rename(columns=lambda c: c[len(prefix) : -len(suffix)]).loc[list(ranked.index)]
    questions = (
        by_id[next(iter(per_query))].per_query.set_index("qid")[["question", "type"]]
        if per_query
        else pd.DataFrame(columns=["question", "type"])
    )
    leader = ranked.index[0] if len(ranked) else None
    scored = [by_id[r] for r in ranked.index]
    return SweepResults(
        objective=objective,
        leaderboard=leaderboard,
        per_type=per_type.sort_index(axis=1),
        per_query=pd.DataFrame(per_query)[list(ranked.index)],
        questions=questions,
        differing=differing_keys({r: by_id[r].params for r in order}),
        mde=minimum_detectable_effect(per_query, leader, alpha) if leader else float("nan"),
        alpha=alpha,
        note=note,
        golden_paths=distinct(run.params.get(GOLDEN_PATH, "") for run in scored),
        golden_digests=distinct(run.golden_digest or "" for run in scored),
        commits=distinct(run.tags.get(COMMIT, "") for run in scored),
    )


def distinct(values: Iterable[str]) -> tuple[str, ...]:
    """The non-empty `values`, each once, in order."""
    return tuple(dict.fromkeys(v for v in values if v))


def other_corpora(scored: Sequence[TrialRecord]) -> tuple[set[str], str]:
    """The ids of the `scored` runs (in start order) that searched another corpus than most of
    them (by `data.corpus_digest`; on a tie, the corpus of the earliest run), and one line naming
    them; (empty, "") when all searched one corpus."""
    counts = Counter(run.corpus_digest for run in scored)  # in the order first seen: ties go to the earliest
    if len(counts) < 2:
        return set(), ""
    kept = counts.most_common(1)[0][0]
    others = [run for run in scored if run.corpus_digest != kept]
    named = "; ".join(f"{run.label} ({_short(run.corpus_digest)})" for run in others)
    runs = "1 run was" if len(others) == 1 else f"{len(others)} runs were"
    return {run.run_id for run in others}, (
        f"Not ranked: {runs} scored on another corpus than the {counts[kept]} ranked ({CORPUS_DIGEST} "
        f"{_short(kept)}; the corpus changed during the sweep): {named}; sweep again to rank them together"
    )


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "none"


def objective_values(objective: str, runs: Sequence[TrialRecord]) -> dict[str, pd.Series]:
    """Run id -> the objective per question (index qid), for the finished runs whose per-question
    table has it, in the order of `runs`."""
    scored = [r for r in runs if r.status == "FINISHED" and r.per_query is not None and objective in r.per_query]
    return {run.run_id: run.per_query.set_index("qid")[objective].astype(float) for run in scored}


def rank(
    per_query: Mapping[str, pd.Series],
    alpha: float = ALPHA,
    n_resamples: int = RESAMPLES,
    seed: int = SEED,
    intervals: bool = True,
) -> pd.DataFrame:
    """The statistical columns of the leaderboard, one row per run id (keys of `per_query`, each a
    Series of the objective per question, NaN where undefined), best mean first (the earlier run
    on equal means): mean, ci_low, ci_high, n, delta (vs the leader), delta_low and delta_high (its
    paired interval), p_value, p_holm, tied_with_best. Without `intervals`, the intervals are NaN
    and nothing is bootstrapped (which runs are tied needs only the tests)."""
    rows = {}
    for run_id, values in per_query.items():
        if intervals:
            interval = bootstrap_ci(values.to_frame("v"), n_resamples=n_resamples, seed=seed).loc["v"]
            mean, low, high = interval["mean"], interval["low"], interval["high"]
        else:
            mean, low, high = sample_mean(values.dropna().to_numpy(dtype=float)), np.nan, np.nan
        rows[run_id] = {"mean": mean, "ci_low": low, "ci_high": high, "n": int(values.notna().sum())}
    table = pd.DataFrame.from_dict(rows, orient="index", columns=["mean", "ci_low", "ci_high", "n"])
    table = table.sort_values("mean", ascending=False, kind="stable", na_position="last")
    if not len(table) or table["mean"].isna().all():
        return table.assign(
            delta=np.nan, delta_low=np.nan, delta_high=np.nan, p_value=np.nan, p_holm=np.nan, tied_with_best=False
        )
    leader = table.index[0]
    deltas = {run_id: paired_differences(per_query[leader], per_query[run_id]) for run_id in table.index[1:]}
    p_values = pd.Series({run_id: randomization_p(d, n_resamples, seed) for run_id, d in deltas.items()}, dtype=float)
    table["delta"] = table["mean"] - table.at[leader, "mean"]
    table["delta_low"], table["delta_high"] = (0.0, 0.0) if intervals else (np.nan, np.nan)  # the leader's
    if intervals:
        spread = bootstrap_ci(
            pd.DataFrame({r: pd.Series(d) for r, d in deltas.items()}), n_resamples=n_resamples, seed=seed
        )
        table.loc[spread.index, "delta_low"], table.loc[spread.index, "delta_high"] = spread["low"], spread["high"]
    table["p_value"] = p_values.reindex(table.index)
    table["p_holm"] = pd.Series(holm(p_values.to_numpy()), index=p_values.index).reindex(table.index)
    table.loc[leader, ["p_value", "p_holm"]] = 1.0
    table["tied_with_best"] = table["p_holm"] >= alpha
    return table


def paired_differences(leader: pd.Series, other: pd.Series) -> np.ndarray:
    """other - leader on the questions where both are defined."""
    pair = paired(leader, other)
    return (pair["b"] - pair["a"]).to_numpy(dtype=float)


def minimum_detectable_effect(
    per_query: Mapping[str, pd.Series], leader: str, alpha: float = ALPHA, power: float = POWER
) -> float:
    """The MDE of the module docstring; NaN without a second finished configuration."""
    spread, size = paired_spread(per_query, leader)
    return float(z_sum(alpha, power) * spread / np.sqrt(size)) if np.isfinite(spread) else float("nan")


def questions_to_detect(
    per_query: Mapping[str, pd.Series], leader: str, delta: float, alpha: float = ALPHA, power: float = POWER
) -> float:
    """The answerable questions the paired test needs to detect a true difference `delta` (the
    module docstring's approximation solved for n); NaN where the MDE is."""
    spread, _ = paired_spread(per_query, leader)
    return float((z_sum(alpha, power) * spread / delta) ** 2)


def paired_spread(per_query: Mapping[str, pd.Series], leader: str) -> tuple[float, float]:
    """sd(d) and n of the module docstring: the medians over the configurations other than the
    leader of their differences' standard deviation and number; NaN without one."""
    spreads, sizes = [], []
    for run_id, values in per_query.items():
        if run_id == leader:
            continue
        d = paired_differences(per_query[leader], values)
        if d.size >= 2:
            spreads.append(d.std(ddof=1))
            sizes.append(d.size)
    if not spreads:
        return float("nan"), float("nan")
    return float(np.median(spreads)), float(np.median(sizes))


def z_sum(alpha: float, power: float) -> float:
    """z(1 - alpha/2) + z(power)."""
    from scipy import stats  # here, not at the top: `sweep.best --among tied` ranks without it (0.5 s)

    return float(stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power))


def differing_keys(params: Mapping[str, Mapping[str, str]]) -> pd.DataFrame:
    """run id x config key, only the keys whose values are not the same in every run (a key a
    run lacks counts as different)."""
    frame = pd.DataFrame.from_dict(dict(params), orient="index")
    varies = [key for key in frame.columns if frame[key].nunique(dropna=False) > 1]
    return frame[sorted(varies)]


def cheapest_tied(metric: str, records: Sequence[TrialRecord], prefer: str) -> tuple[TrialRecord, str]:
    """The record with the lowest `prefer` (a cost metric) among `records` tied with the best by
    `metric` (`rank`; the better-ranked one on equal cost; a record without `prefer` comes last),
    and why, in one line. No tied record with `prefer` is an error, not a choice by NaN. A latency
    (`latency/search_ms_...`) of records with timed questions counts only where a paired test finds
    it (`sweep.evaluation.latency.not_slower`): the better-ranked of those not significantly slower
    than the fastest, and the line says when that is a tie by latency."""
    board = rank(objective_values(metric, records), intervals=False)
    if board["mean"].isna().all():
        raise InputError(
            f"--among tied: {metric!r} is not a per-question metric (tables/per_query.json has no such column)"
        )
    tied = board[board["tied_with_best"]]
    by_id = {record.run_id: record for record in records}
    cost = pd.Series([by_id[r].metrics.get(prefer, np.nan) for r in tied.index], index=tied.index, dtype=float)
    if cost.isna().all():
        known = sorted({name for r in tied.index for name in by_id[r].metrics if name in COSTS})
        raise InputError(
            f"--prefer {prefer!r}: no run tied with the best has this metric ({len(tied)} tied; the costs they "
            f"have: {', '.join(known) or 'none'})"
        )
    chosen = cost.fillna(np.inf).sort_values(kind="stable").index[0]
    leader = board.index[0]
    among = (
        f"{len(tied)} of {len(board)} runs tied with the best "
        f"(run {leader}: {metric} {board.at[leader, 'mean']:.4f}; Holm-corrected paired test, alpha {ALPHA})"
    )
    latency = prefer.startswith(LATENCY_PREFIX)
    timed = per_question_ms({r: by_id[r].tables.get(LATENCY_TABLE) for r in tied.index}) if latency else {}
    if len(timed) < 2:  # nothing to test: one run tied, or no timed questions
        return by_id[chosen], f"the lowest {prefer} ({cost[chosen]:.4g}) of {among}"
    # latency: only a difference the paired test over the timed questions finds counts
    fast = not_slower(timed, list(tied.index), ALPHA)
    chosen, test = fast[0], f"paired test over the timed questions, Holm-corrected, alpha {ALPHA}"
    if len(fast) == 1:
        return by_id[chosen], f"significantly the fastest ({prefer} {cost[chosen]:.4g}; {test}) of {among}"
    return by_id[chosen], (
        f"a tie by latency: {len(fast)} runs are not significantly slower than the fastest ({test}), so the "
        f"best-ranked of them ({prefer} {cost[chosen]:.4g}), of {among}"
    )
