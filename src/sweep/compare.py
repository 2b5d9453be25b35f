"""`python -m sweep.compare A B`: is run B better or worse than run A, and on which questions?

    python -m sweep.compare A B [--json] [--metrics m1,m2] [--metric ndcg_at_10] [--flip-at 0.5]

A and B are MLflow run ids, or `best`: the finished run with the best `--metric` in the experiment
(`sweep.best`'s winner). A sweep's parent run id stands for its children (finished ones):
A a sweep and B a run compares each child of A with B; A a run and B a sweep compares A with each
child of B; two sweeps pair their children by their overrides (the same `sweep.overrides`, in any
order, less `experiment=` and `cache_dir=`), and children with no partner are named on stderr and
skipped.

Both runs must be scored on the same golden set (tag `data.golden_digest`). Every statistic is
paired over the questions present in both runs where both values are finite (rank metrics are
undefined for unanswerable questions; the abstention rates are per-question 0/1 values over the
unanswerable, respectively answerable, questions). Per metric and per question type: both means,
delta = B - A, its 95% paired bootstrap interval, the two-sided paired randomization (sign-flip)
p-value, the same Holm-corrected over the metrics, and wins/ties/losses (questions where B is
better / equal / worse; lower is better for `abstain/false_rate` and `context/tokens_at_*`).
A question flips when its `--metric` value is on different sides of `--flip-at` in the two runs
(good: >= 0.5 by default, e.g. nDCG@10 >= 0.5 is the first relevant document in the top 3 when it
is the only one); each flip shows the question and the rank of the first relevant document in both
runs (1 / its `mrr`). Resampling is seeded: the same runs give the same intervals and p-values.

The comparison is logged as artifacts of B: `compare/<A's run id>.md` and `.json`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from sweep import tracking
from sweep.errors import InputError, exit_2_on_bad_input
from sweep.evaluation.scoring import ABSTAIN_CORRECT, ABSTAIN_FALSE, HEADLINE
from sweep.evaluation.significance import RESAMPLES, SEED, compare, holm
from sweep.settings import override_key

QUESTION_COLUMNS = ("qid", "type", "question", "answerable", "n_retrieved", "top_score", "abstained")
RANK_FROM = "mrr"  # 1 / rank of the first relevant document: the rank, back
BEST = "best"
FLIP_AT = 0.5
TIE = 1e-9  # per-question values are logged to 10 digits: closer than this is the same value
UNPAIRED = ("experiment", "cache_dir")  # overrides that pairing children by overrides ignores
CELL_LIMIT = 200  # characters of a question a Markdown cell shows; the JSON keeps it whole
COLUMNS = ("a", "b", "delta", "ci_low", "ci_high", "p_value", "p_holm", "wins", "ties", "losses", "n")


def lower_is_better(metric: str) -> bool:
    """Answerable questions that got nothing, and tokens delivered (a cost): less is better."""
    return metric == ABSTAIN_FALSE or metric.startswith("context/tokens_at_")


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


def paired_table(
    a: pd.DataFrame, b: pd.DataFrame, metrics: Sequence[str], seed: int = SEED, resamples: int = RESAMPLES
) -> pd.DataFrame:
    """One row per metric with at least one question both runs scored (`COLUMNS`): means over the
    paired questions, delta = B - A, its paired bootstrap interval, the randomization p-value and
    its Holm correction over these metrics (sweep.evaluation.significance), and wins/ties/losses.
    With one paired question the interval is the point and p is 1 (the exact sign-flip test)."""
    rows: dict[str, dict[str, float]] = {}
    for metric in metrics:
        pair = pd.concat([a[metric], b[metric]], axis=1, keys=["a", "b"], join="inner").dropna()
        if not len(pair):
            continue
        better = pair["b"] - pair["a"] if not lower_is_better(metric) else pair["a"] - pair["b"]
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
class Comparison:
    a: tracking.LoggedRun
    b: tracking.LoggedRun
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

    def losses(self, metric: str, types: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The questions where B is worse than A on `metric` (of `types` only, if given), the
        largest loss first, as `flips` describes them."""
        pair = pd.concat([self.a_values[metric], self.b_values[metric]], axis=1, keys=["a", "b"]).dropna()
        if types is not None:
            pair = pair[self.questions.loc[pair.index, "type"].isin(list(types))]
        worse = (pair["a"] - pair["b"]) * (-1 if lower_is_better(metric) else 1)
        order = worse[worse > TIE].sort_values(ascending=False, kind="stable").index
        return [describe_question(self, metric, qid) for qid in order]

    def to_json(self) -> dict[str, Any]:
        return {
            "run_a": _describe(self.a),
            "run_b": _describe(self.b),
            "golden_digest": self.a.golden_digest,
            "n_questions": self.n_questions,
            "test": {
                "delta": "b - a, over the questions both runs scored with a finite value",
                "interval": "95% paired bootstrap (percentile)",
                "p_value": "two-sided paired randomization (sign-flip) test",
                "p_holm": "p_value, Holm-corrected over the metrics of the same table",
                "resamples": self.resamples,
                "seed": self.seed,
            },
            "headline": self.headline,
            "flip_at": self.flip_at,
            "metrics": _records(self.metrics),
            "per_type": {qtype: _records(table) for qtype, table in self.per_type.items()},
            "flipped": self.flipped,
        }

    def to_markdown(self) -> str:
        lines = [
            f"## Comparison: B `{self.b.run_id}` against A `{self.a.run_id}`",
            "",
            f"- A: `{self.a.run_id}` {_md(self.a.overrides or self.a.name)}",
            f"- B: `{self.b.run_id}` {_md(self.b.overrides or self.b.name)}",
            f"- golden set `{self.a.golden_digest}`: {self.n_questions} questions in both runs",
            "- delta = B − A over the questions both runs scored (n); 95% CI: paired bootstrap; "
            f"p: two-sided paired randomization test ({self.resamples} resamples, seed {self.seed}); "
            "p (Holm): corrected over the metrics of the table; W/T/L: questions where B is better / "
            "equal / worse; `*`: p < 0.05",
            "",
            "| metric | A | B | delta | 95% CI | p | p (Holm) | W/T/L | n |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for metric, row in self.metrics.iterrows():
            lines.append(f"| {metric} | {_row(row)} |")
        lines += ["", f"### Per question type: {self.headline}", ""]
        typed = [(qtype, t.loc[self.headline]) for qtype, t in self.per_type.items() if self.headline in t.index]
        if typed:
            lines += ["| type | A | B | delta | 95% CI | p | p (Holm) | W/T/L | n |", "|---|" + "--:|" * 8]
            lines += [f"| {_md(qtype)} | {_row(row)} |" for qtype, row in typed]
        else:
            lines.append(f"No question type has {self.headline} in both runs.")
        good = "≤" if lower_is_better(self.headline) else "≥"
        lines += ["", f"### Questions that flipped: {self.headline} {good} {self.flip_at:g} in one run only", ""]
        if self.flipped:
            lines += [
                "| change | qid | type | question | A | B | first relevant rank A → B |",
                "|---|---|---|---|--:|--:|--:|",
            ]
            for flip in self.flipped:
                ranks = f"{_rank(flip['rank_a'])} → {_rank(flip['rank_b'])}"
                lines.append(
                    f"| {flip['change']} | {_md(flip['qid'])} | {_md(flip['type'])} | {_md(flip['question'])} "
                    f"| {_num(flip['a'])} | {_num(flip['b'])} | {ranks} |"
                )
        else:
            lines.append("None.")
        return "\n".join(lines) + "\n"


def _describe(run: tracking.LoggedRun) -> dict[str, Any]:
    return {"run_id": run.run_id, "name": run.name, "overrides": run.overrides}


def _records(table: pd.DataFrame) -> dict[str, dict[str, Any]]:
    return {metric: {c: _plain(row[c]) for c in COLUMNS} for metric, row in table.iterrows()}


def _plain(value: Any) -> Any:
    """JSON's numbers: counts as integers, NaN as null."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    value = float(value)
    return value if math.isfinite(value) else None


def _num(value: float | None, signed: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def _row(row: pd.Series) -> str:
    star = "*" if row["p_value"] < 0.05 else ""
    return " | ".join(
        [
            _num(row["a"]),
            _num(row["b"]),
            _num(row["delta"], signed=True),
            f"[{_num(row['ci_low'], True)}, {_num(row['ci_high'], True)}]",
            f"{_num(row['p_value'])}{star}",
            _num(row["p_holm"]),
            f"{int(row['wins'])}/{int(row['ties'])}/{int(row['losses'])}",
            str(int(row["n"])),
        ]
    )


def _rank(rank: int | None) -> str:
    return "none" if rank is None else str(rank)


def _md(text: Any) -> str:
    """A Markdown table cell: one line, pipes escaped, at most CELL_LIMIT characters."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= CELL_LIMIT else f"{text[:CELL_LIMIT]}…"


def known_metrics(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """Metrics both runs have per question, in A's order."""
    return [m for m in a.columns if m in b.columns]


def check_metrics(names: Sequence[str], known: Sequence[str], option: str) -> None:
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InputError(f"{option} {','.join(unknown)}: not a metric of these runs; known: {', '.join(known)}")


def compare_runs(
    a: tracking.LoggedRun,
    b: tracking.LoggedRun,
    metrics: Sequence[str] | None = None,
    headline: str | None = None,
    flip_at: float = FLIP_AT,
    seed: int = SEED,
    resamples: int = RESAMPLES,
) -> Comparison:
    """Run B against run A (see the module's doc). `metrics`: all both runs have by default;
    `headline`: the metric of the per-type Markdown table and of the flips (nDCG@10 by default)."""
    for run in (a, b):
        if not run.golden_digest:
            raise InputError(f"run {run.run_id} has no data.golden_digest tag: not a golden-sweep evaluation")
    if a.golden_digest != b.golden_digest:
        raise InputError(
            f"runs {a.run_id} and {b.run_id} were scored on different golden sets (data.golden_digest "
            f"{a.golden_digest} and {b.golden_digest}): paired statistics need the same questions"
        )
    a_frame, b_frame = tracking.load_per_query(a), tracking.load_per_query(b)
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
    pair = pd.concat([comparison.a_values[metric], comparison.b_values[metric]], axis=1, keys=["a", "b"]).dropna()
    good = (pair <= at) if lower_is_better(metric) else (pair >= at)
    changed = pair.index[good["a"] != good["b"]]
    out = [
        {"change": "broken" if good.at[q, "a"] else "fixed"} | describe_question(comparison, metric, q) for q in changed
    ]
    return sorted(out, key=lambda flip: flip["change"] != "broken")  # stable: question order within each


def resolve(spec: str, label: str, metric: str, experiment: str) -> tracking.LoggedRun:
    """`spec`: a run id, or `best` (the finished run with the best `metric` in `experiment`)."""
    try:
        if spec == BEST:
            try:
                spec = tracking.best_run(metric, experiment, maximize=not lower_is_better(metric)).run_id
            except InputError as error:
                raise InputError(f"{label} {BEST}: {error}") from None
        return tracking.logged_run(spec)
    except InputError as error:
        raise InputError(error if str(error).startswith(f"{label} ") else f"{label}: {error}") from None


def evaluations(run: tracking.LoggedRun) -> list[tracking.LoggedRun]:
    """The runs that `run` stands for: itself, or a sweep's finished children."""
    if not run.is_sweep:
        return [run]
    children = tracking.sweep_children(run.run_id)
    finished = [c for c in children if c.status == "FINISHED"]
    for child in children:
        if child.status != "FINISHED":
            print(
                f"note: skipping {child.run_id} ({child.overrides}) of sweep {run.run_id}: {child.status}",
                file=sys.stderr,
            )
    if not finished:
        raise InputError(f"sweep {run.run_id} has no finished run")
    return finished


def _override_key(run: tracking.LoggedRun) -> tuple[str, ...]:
    """What pairs two sweeps' children: their overrides in any order, less those that do not
    change results (`experiment=`, `cache_dir=`)."""
    return tuple(sorted(o for o in run.overrides.split() if override_key(o) not in UNPAIRED))


def run_pairs(
    a_spec: str,
    b_spec: str,
    metric: str = HEADLINE,
    experiment: str = tracking.DEFAULT_EXPERIMENT,
    labels: tuple[str, str] = ("A", "B"),
) -> list[tuple[tracking.LoggedRun, tracking.LoggedRun]]:
    """The (A, B) evaluations to compare: see the module's doc for what a sweep's id means."""
    tracking.connect(create=False)  # no store, or one that cannot be reached: one line, unprefixed
    a = resolve(a_spec, labels[0], metric, experiment)
    b = resolve(b_spec, labels[1], metric, experiment)
    a_runs, b_runs = evaluations(a), evaluations(b)
    if not (a.is_sweep and b.is_sweep):
        return [(x, y) for x in a_runs for y in b_runs]
    by_key: dict[tuple[str, ...], tracking.LoggedRun] = {}
    for run in a_runs:
        by_key.setdefault(_override_key(run), run)
    pairs = []
    for run in b_runs:
        partner = by_key.pop(_override_key(run), None)
        if partner is None:
            print(f"note: {run.run_id} ({run.overrides}) of {labels[1]} has no partner in {labels[0]}", file=sys.stderr)
        else:
            pairs.append((partner, run))
    for run in by_key.values():
        print(f"note: {run.run_id} ({run.overrides}) of {labels[0]} has no partner in {labels[1]}", file=sys.stderr)
    if not pairs:
        raise InputError(f"sweeps {a.run_id} and {b.run_id} have no configuration (overrides) in common")
    return pairs


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be at least 1")
    return value


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--experiment", default=tracking.DEFAULT_EXPERIMENT, help="where `best` looks (default %(default)r)"
    )
    parser.add_argument("--seed", type=int, default=SEED, help="resampling seed (default %(default)s)")
    parser.add_argument(
        "--resamples",
        type=positive_int,
        default=RESAMPLES,
        help="bootstrap and randomization resamples (default %(default)s)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("a", metavar="A", help="run id, sweep (parent run) id, or `best`")
    parser.add_argument("b", metavar="B", help="run id, sweep (parent run) id, or `best`")
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    parser.add_argument(
        "--metrics", default=None, help="comma-separated metrics (default: every metric both runs have)"
    )
    parser.add_argument(
        "--metric",
        default=None,
        help=f"the per-type table's and the flips' metric, and what `best` is best by (default {HEADLINE})",
    )
    parser.add_argument(
        "--flip-at",
        type=float,
        default=FLIP_AT,
        help="a question flips when --metric crosses this (default %(default)s)",
    )
    parser.add_argument("--no-log", action="store_true", help="do not log the comparison as artifacts of B")
    add_common_options(parser)
    return parser


@exit_2_on_bad_input
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not math.isfinite(args.flip_at):
        raise InputError(f"--flip-at {args.flip_at}: must be a finite number")
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics is not None else None
    if metrics is not None and not metrics:
        raise InputError("--metrics: give at least one metric name")
    pairs = run_pairs(args.a, args.b, args.metric or HEADLINE, args.experiment)
    comparisons = [compare_runs(a, b, metrics, args.metric, args.flip_at, args.seed, args.resamples) for a, b in pairs]
    if not args.no_log:
        for comparison in comparisons:
            tracking.log_comparison(
                comparison.b.run_id, comparison.a.run_id, comparison.to_markdown(), comparison.to_json()
            )
    if args.json:
        out = comparisons[0].to_json() if len(comparisons) == 1 else {"comparisons": [c.to_json() for c in comparisons]}
        json.dump(out, sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print("\n".join(c.to_markdown() for c in comparisons), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
