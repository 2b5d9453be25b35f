"""Paired statistics of run B against run A: per metric and question type, flips, losses, the gate.

Every statistic is paired over the questions present in both runs where both values are finite
(`significance.paired`; rank metrics are undefined for unanswerable questions; the abstention
rates are per-question 0/1 values over the unanswerable, respectively answerable, questions). Per
metric and per question type: both means, delta = B - A, its 95% paired bootstrap interval, the
two-sided paired randomization (sign-flip) p-value, the same Holm-corrected over the metrics, and
wins/ties/losses (questions where B is better / equal / worse; lower is better where the registry
says so). A question flips when its headline value is on different sides of `flip_at` in the two
runs; each flip shows the rank of the first relevant document in both runs (1 / its `mrr`).
Resampling is seeded: the same runs give the same intervals and p-values.

Runs scored on different versions of a golden set are compared, when asked (`--shared`), on the
questions both versions hold with identical judgments: the same id, text and grades
(`shared_questions`, `on_shared_questions`); `Comparison.shared` says how many of each side that is.

From Python: `sweep.compare_runs(a, b)` with two MLflow run ids, `compare_records` with two
records (`sweep.evaluation.record`), or `compare_per_query` with two per-question tables
(`tables/per_query.json`) and no MLflow at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pandas as pd

from sweep.errors import InputError
from sweep.evaluation.registry import ABSTAIN_CORRECT, ABSTAIN_FALSE, HEADLINE, lower_is_better
from sweep.evaluation.significance import RESAMPLES, SEED, check_resamples, compare, holm, paired

if TYPE_CHECKING:
    from sweep.evaluation.record import TrialRecord
    from sweep.formats.golden import GoldenSet

QUESTION_COLUMNS = ("qid", "type", "question", "answerable", "n_retrieved", "top_score", "abstained")
RANK_FROM = "mrr"  # 1 / rank of the first relevant document: the rank, back
FLIP_AT = 0.5
TIE = 1e-9  # closer than this is the same value (runs logged before values were exact kept 10 digits)
COLUMNS = ("a", "b", "delta", "ci_low", "ci_high", "p_value", "p_holm", "wins", "ties", "losses", "n")


def metric_values(per_query: pd.DataFrame) -> pd.DataFrame:
    """A run's per-question values (index qid): each metric column of `tables/per_query.json`
    as floats (NaN where undefined), plus `abstain/correct_rate` (whether an unanswerable
    question got nothing; only when there are some) and `abstain/false_rate` (whether an
    answerable one did), whose means are the logged rates."""
    if "qid" not in per_query.columns or per_query["qid"].duplicated().any():
        raise InputError("tables/per_query.json: not golden-sweep's per-question table (one row per qid)")
    frame = per_query.set_index("qid")
    columns = [c for c in frame.columns if c not in QUESTION_COLUMNS]
    values = frame[columns].apply(pd.to_numeric, errors="coerce").astype(float)
    if {"abstained", "answerable"} <= set(frame.columns):
        answerable = frame["answerable"].astype(bool)
        abstained = pd.to_numeric(frame["abstained"], errors="coerce").astype(float)
        if not answerable.all():
            values[ABSTAIN_CORRECT] = abstained.where(~answerable)
        values[ABSTAIN_FALSE] = abstained.where(answerable)
    return values


def better_by(pair: pd.DataFrame, metric: str) -> pd.Series:
    """Per paired question, how much better B is than A (b - a; a - b where lower is better)."""
    return pair["a"] - pair["b"] if lower_is_better(metric) else pair["b"] - pair["a"]


def paired_table(
    a: pd.DataFrame, b: pd.DataFrame, metrics: Sequence[str], seed: int = SEED, resamples: int = RESAMPLES
) -> pd.DataFrame:
    """One row per metric with at least one question both runs scored (`COLUMNS`): means over the
    paired questions, delta = B - A, its paired bootstrap interval, the randomization p-value and
    its Holm correction over these metrics (sweep.evaluation.significance), and wins/ties/losses.
    With one paired question the interval is the point and p is 1 (the exact sign-flip test)."""
    rows: dict[str, dict[str, float]] = {}
    for metric in metrics:
        pair = paired(a[metric], b[metric])
        if not len(pair):
            continue
        better = better_by(pair, metric)
        rows[metric] = {
            "wins": int((better > TIE).sum()),
            "ties": int((better.abs() <= TIE).sum()),
            "losses": int((better < -TIE).sum()),
        }
    if rows:
        tested = compare(a[list(rows)], b[list(rows)], list(rows), n_resamples=resamples, seed=seed)
        for metric, row in tested.iterrows():
            rows[metric] |= {
                "a": float(row["mean_a"]),
                "b": float(row["mean_b"]),
                "delta": float(row["delta"]),
                "ci_low": float(row["low"]),
                "ci_high": float(row["high"]),
                "p_value": float(row["p_randomization"]),
                "n": int(row["n"]),
            }
    table = pd.DataFrame.from_dict(rows, orient="index", columns=[c for c in COLUMNS if c != "p_holm"])
    table.insert(COLUMNS.index("p_holm"), "p_holm", holm(table["p_value"].to_numpy()) if len(table) else [])
    return table


def first_relevant_rank(values: pd.DataFrame, qid: str) -> int | None:
    """The rank of the question's first relevant document, from its reciprocal rank; None when
    no relevant document was retrieved or the run has no `mrr` column."""
    if RANK_FROM not in values.columns:
        return None
    rr = values.at[qid, RANK_FROM]
    return round(1 / rr) if math.isfinite(rr) and rr > 0 else None


@dataclass(frozen=True)
class Shared:
    """Two runs scored on different golden sets, compared on the questions both sets hold with
    identical judgments: how many, of how many questions each run scored."""

    questions: int
    of_a: int
    of_b: int

    def sentence(self) -> str:
        return (
            f"compared on {self.questions} of {self.of_a} questions of A and {self.questions} of {self.of_b} of B: "
            "the questions both golden sets hold with identical judgments"
        )


def shared_questions(a: GoldenSet, b: GoldenSet) -> list[str]:
    """The ids of the questions `a` and `b` both hold with the same text and the same grades, in `a`'s order."""
    return [
        q.id
        for q in a
        if q.id in b.by_id and b.by_id[q.id].question == q.question and dict(b.by_id[q.id].relevant) == dict(q.relevant)
    ]


def on_shared_questions(
    a: TrialRecord, b: TrialRecord, a_golden: GoldenSet, b_golden: GoldenSet
) -> tuple[TrialRecord, TrialRecord, Shared]:
    """Records `a` and `b`, scored on `a_golden` and `b_golden`, with their per-question tables cut
    to the questions both sets hold with identical judgments (`shared_questions`), and the counts."""
    for record in (a, b):
        require_evaluation(record)
    common = set(shared_questions(a_golden, b_golden))
    cut = [
        replace(r, tables={**r.tables, "per_query": r.per_query[r.per_query["qid"].astype(str).isin(common)]})
        for r in (a, b)
    ]
    if not len(cut[0].per_query) or not len(cut[1].per_query):
        raise InputError(f"runs {a.run_id} and {b.run_id}: their golden sets hold no question with identical judgments")
    shared = Shared(
        len(set(cut[0].per_query["qid"]) & set(cut[1].per_query["qid"])), len(a.per_query), len(b.per_query)
    )
    return cut[0], cut[1], shared


@dataclass(frozen=True)
class Comparison:
    a: TrialRecord  # or anything with run_id, name and label
    b: TrialRecord
    n_questions: int  # questions present in both runs
    metrics: pd.DataFrame  # paired_table over all questions
    per_type: dict[str, pd.DataFrame]  # paired_table per question type
    headline: str
    flip_at: float
    flipped: list[dict[str, Any]]
    seed: int
    resamples: int
    a_values: pd.DataFrame = field(repr=False)  # per-question values (index qid) of the questions in both runs
    b_values: pd.DataFrame = field(repr=False)
    questions: pd.DataFrame = field(repr=False)  # index qid: type, question
    shared: Shared | None = None  # runs scored on different golden sets: the questions compared (`--shared`)

    def losses(self, metric: str, types: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The questions where B is worse than A on `metric` (of `types` only, if given), the
        largest loss first, as `flips` describes them."""
        pair = paired(self.a_values[metric], self.b_values[metric])
        if types is not None:
            pair = pair[self.questions.loc[pair.index, "type"].isin(list(types))]
        worse = -better_by(pair, metric)
        order = worse[worse > TIE].sort_values(ascending=False, kind="stable").index
        return [describe_question(self, metric, qid) for qid in order]


def known_metrics(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """Metrics both runs have per question, in A's order."""
    return [m for m in a.columns if m in b.columns]


def check_metrics(names: Sequence[str], known: Sequence[str], option: str) -> None:
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InputError(f"{option} {','.join(unknown)}: not a metric of these runs; known: {', '.join(known)}")


def require_evaluation(record: TrialRecord) -> None:
    """One line with the status of a run that holds no evaluation, and why it stopped (its `error` tag)."""
    if record.per_query is None:
        why = record.tags.get("error", "no error recorded")
        raise InputError(f"run {record.run_id} {record.status} ({why}): it holds no evaluation to compare")


def compare_records(
    a: TrialRecord,
    b: TrialRecord,
    metrics: Sequence[str] | None = None,
    headline: str | None = None,
    flip_at: float = FLIP_AT,
    seed: int = SEED,
    resamples: int = RESAMPLES,
) -> Comparison:
    """Record B against record A (see the module's doc), through `compare_per_query`; a run that
    did not finish is one line with its status and why it stopped (its `error` tag). That both
    were scored on the same golden set is the caller's to check (`sweep.tracking.digests`)."""
    for record in (a, b):
        require_evaluation(record)
    return compare_per_query(a, b, a.per_query, b.per_query, metrics, headline, flip_at, seed, resamples)


def compare_per_query(
    a: Any,
    b: Any,
    a_frame: pd.DataFrame,
    b_frame: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    headline: str | None = None,
    flip_at: float = FLIP_AT,
    seed: int = SEED,
    resamples: int = RESAMPLES,
) -> Comparison:
    """Run B against run A from their per-question tables (`tables/per_query.json`'s columns);
    `a`, `b` describe the runs (run_id, name, label). `metrics`: all both runs
    have by default; `headline`: the metric of the per-type table and of the flips (nDCG@10 by
    default)."""
    check_resamples(resamples)
    a_values, b_values = metric_values(a_frame), metric_values(b_frame)
    known = known_metrics(a_values, b_values)
    if headline is not None:
        check_metrics([headline], known, "--metric")
    metrics = list(dict.fromkeys(metrics)) if metrics else known
    check_metrics(metrics, known, "--metrics")
    headline = headline or (HEADLINE if HEADLINE in metrics else metrics[0])
    common = a_values.index.intersection(b_values.index)
    if not len(common):
        raise InputError(f"runs {a.run_id} and {b.run_id} have no question in common")
    selected = list(dict.fromkeys([*metrics, headline, *([RANK_FROM] if RANK_FROM in known else [])]))
    a_values, b_values = a_values.loc[common, selected], b_values.loc[common, selected]
    types = a_frame.set_index("qid").loc[common, "type"].astype(str) if "type" in a_frame else None
    per_type = {}
    if types is not None:
        for qtype in sorted(types.unique()):
            qids = types.index[types == qtype]
            per_type[qtype] = paired_table(a_values.loc[qids], b_values.loc[qids], metrics, seed, resamples)
    comparison = Comparison(
        a,
        b,
        len(common),
        paired_table(a_values, b_values, metrics, seed, resamples),
        per_type,
        headline,
        flip_at,
        [],
        seed,
        resamples,
        a_values,
        b_values,
        question_table(a_frame, common),
    )
    return replace(comparison, flipped=flips(comparison))


def question_table(frame: pd.DataFrame, qids: pd.Index) -> pd.DataFrame:
    """Each question's type and text (index qid), from a per_query table."""
    info = frame.set_index("qid").reindex(qids)
    return pd.DataFrame(
        {c: (info[c].astype(str) if c in info.columns else pd.Series("", index=qids)) for c in ("type", "question")}
    )


def describe_question(comparison: Comparison, metric: str, qid: str) -> dict[str, Any]:
    return {
        "qid": str(qid),
        "type": comparison.questions.at[qid, "type"],
        "question": comparison.questions.at[qid, "question"],
        "a": float(comparison.a_values.at[qid, metric]),
        "b": float(comparison.b_values.at[qid, metric]),
        "rank_a": first_relevant_rank(comparison.a_values, qid),
        "rank_b": first_relevant_rank(comparison.b_values, qid),
    }


def flips(comparison: Comparison) -> list[dict[str, Any]]:
    """Questions whose headline metric is good (>= flip_at; <= when lower is better) in one run
    only: those B broke first, then those it fixed, each in question order."""
    metric, at = comparison.headline, comparison.flip_at
    pair = paired(comparison.a_values[metric], comparison.b_values[metric])
    good = (pair <= at) if lower_is_better(metric) else (pair >= at)
    changed = pair.index[good["a"] != good["b"]]
    out = [
        {"change": "broken" if good.at[q, "a"] else "fixed"} | describe_question(comparison, metric, q) for q in changed
    ]
    return sorted(out, key=lambda flip: flip["change"] != "broken")  # stable: question order within each


# ---------------------------------------------------------------- the gate (sweep.check)


def regressed(row: pd.Series, metric: str, max_drop: float, alpha: float, p: float | None = None) -> bool:
    """Worse by more than `max_drop` and significantly so (p, default the row's, below `alpha`)."""
    drop = row["delta"] if lower_is_better(metric) else -row["delta"]
    return bool(drop > max_drop and (row["p_value"] if p is None else p) < alpha)


@dataclass(frozen=True)
class Gate:
    """`sweep.check`'s rule applied to one comparison on `metric`: the overall row (None when no
    question has a value in both runs), each type's row with its p-value Holm-corrected over the
    types (with `per_type`), what regressed, and the regressed questions, worst first."""

    comparison: Comparison
    metric: str
    max_drop: float
    alpha: float
    overall: pd.Series | None
    types: dict[str, tuple[pd.Series, float]]  # type -> (row, p Holm-corrected over the types)
    failed: bool  # the overall rule
    failed_types: list[str]
    losses: list[dict[str, Any]]

    @property
    def regressed(self) -> bool:
        return self.failed or bool(self.failed_types)


def gate(comparison: Comparison, metric: str, max_drop: float, alpha: float, per_type: bool) -> Gate:
    """Apply the rule (worse by more than `max_drop` with p < `alpha`) overall and, with
    `per_type`, to each question type."""
    if metric not in comparison.metrics.index:
        return Gate(comparison, metric, max_drop, alpha, None, {}, False, [], [])
    overall = comparison.metrics.loc[metric]
    failed = regressed(overall, metric, max_drop, alpha)
    types: dict[str, tuple[pd.Series, float]] = {}
    if per_type:
        rows = {t: table.loc[metric] for t, table in comparison.per_type.items() if metric in table.index}
        adjusted = dict(zip(rows, holm([row["p_value"] for row in rows.values()]))) if rows else {}
        types = {qtype: (row, float(adjusted[qtype])) for qtype, row in rows.items()}
    failed_types = [t for t, (row, p) in types.items() if regressed(row, metric, max_drop, alpha, p)]
    losses = comparison.losses(metric, None if failed else failed_types) if failed or failed_types else []
    return Gate(comparison, metric, max_drop, alpha, overall, types, failed, failed_types, losses)
