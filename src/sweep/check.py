"""`python -m sweep.check`: a CI gate that fails when a candidate run retrieves significantly worse.

    python -m sweep.check --baseline RUN --candidate RUN [--metric ndcg_at_10] [--max-drop 0.01]
                          [--per-type] [--alpha 0.05]

RUN: a run id, `best` (the finished run with the best `--metric`), or a sweep's parent run id
(as in `sweep.compare`: its children; two sweeps pair their children by overrides). The paired
statistics are `sweep.compare`'s, over the questions both runs scored on the same golden set.

The candidate regressed when both hold: it is worse by more than `--max-drop` (delta = candidate
- baseline < -max_drop; > max_drop for a metric where lower is better) and the difference is
significant (the two-sided paired randomization test's p < `--alpha`, the p-value `sweep.compare`
prints). `--per-type` applies the same rule to each question type too, with the types' p-values
Holm-corrected among themselves. Exit codes: 1 when a rule fails (the regressed questions are
printed, worst first), 0 otherwise (a run checked against itself passes), 2 on bad input (an
unknown run id or metric, a negative `--max-drop`, a store that cannot be reached). Reads only.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import Any

import pandas as pd

from sweep.compare import Comparison, add_common_options, compare_runs, lower_is_better, run_pairs
from sweep.errors import InputError, exit_2_on_bad_input
from sweep.evaluation.scoring import HEADLINE
from sweep.evaluation.significance import holm

EXIT_REGRESSED = 1
SHOWN = 50  # regressed questions printed per comparison by default


def regressed(row: pd.Series, metric: str, max_drop: float, alpha: float, p: float | None = None) -> bool:
    """Worse by more than `max_drop` and significantly so (p, default the row's, below `alpha`)."""
    drop = row["delta"] if lower_is_better(metric) else -row["delta"]
    return bool(drop > max_drop and (row["p_value"] if p is None else p) < alpha)


def _verdict(row: pd.Series, metric: str, max_drop: float, alpha: float, p: float) -> str:
    values = (
        f"{row['a']:.4f} -> {row['b']:.4f}, delta {row['delta']:+.4f} "
        f"(95% CI {row['ci_low']:+.4f} to {row['ci_high']:+.4f}), p {p:.4f}, "
        f"{int(row['wins'])} better / {int(row['ties'])} same / {int(row['losses'])} worse of {int(row['n'])}"
    )
    if regressed(row, metric, max_drop, alpha, p):
        return f"{values}: REGRESSED (worse by more than {max_drop:g}, p < {alpha:g})"
    return f"{values}: ok"


def _question(loss: dict[str, Any]) -> str:
    ranks = ""
    if loss["rank_a"] is not None or loss["rank_b"] is not None:
        ranks = f", first relevant rank {loss['rank_a'] or 'none'} -> {loss['rank_b'] or 'none'}"
    text = " ".join(loss["question"].split())
    text = text if len(text) <= 200 else f"{text[:200]}…"
    return f"  {loss['qid']} [{loss['type']}] {loss['a']:.4f} -> {loss['b']:.4f}{ranks}: {text}"


def check(comparison: Comparison, metric: str, max_drop: float, alpha: float, per_type: bool, shown: int) -> bool:
    """Print the verdicts for one (baseline, candidate) pair; whether the candidate regressed."""
    print(f"baseline  {comparison.a.run_id} {comparison.a.overrides or comparison.a.name}")
    print(f"candidate {comparison.b.run_id} {comparison.b.overrides or comparison.b.name}")
    if metric not in comparison.metrics.index:
        print(f"{metric}: no question has a value in both runs: nothing to check")
        return False
    overall = comparison.metrics.loc[metric]
    print(
        f"{metric} over {int(overall['n'])} questions: {_verdict(overall, metric, max_drop, alpha, overall['p_value'])}"
    )
    failed = regressed(overall, metric, max_drop, alpha)
    failed_types: list[str] = []
    if per_type:
        rows = {t: table.loc[metric] for t, table in comparison.per_type.items() if metric in table.index}
        adjusted = dict(zip(rows, holm([row["p_value"] for row in rows.values()]))) if rows else {}
        for qtype, row in rows.items():
            p = float(adjusted[qtype])
            where = f"{int(row['n'])} questions, p Holm-corrected over {len(rows)} types"
            print(f"  type {qtype} ({where}): {_verdict(row, metric, max_drop, alpha, p)}")
            if regressed(row, metric, max_drop, alpha, p):
                failed_types.append(qtype)
    if not (failed or failed_types):
        return False
    losses = comparison.losses(metric, None if failed else failed_types)
    scope = "" if failed else f" ({', '.join(failed_types)})"
    print(f"regressed questions{scope}: {len(losses)} worse on {metric} in the candidate, worst first")
    for loss in losses[:shown]:
        print(_question(loss))
    if len(losses) > shown:
        print(
            f"  … and {len(losses) - shown} more (python -m sweep.compare {comparison.a.run_id} {comparison.b.run_id})"
        )
    return True


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep.check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="run id, sweep (parent run) id, or `best`")
    parser.add_argument("--candidate", required=True, help="run id, sweep (parent run) id, or `best`")
    parser.add_argument("--metric", default=HEADLINE, help="the metric the rule applies to (default %(default)s)")
    parser.add_argument(
        "--max-drop", type=float, default=0.0, help="the largest drop tolerated, even when significant (default 0)"
    )
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level (default %(default)s)")
    parser.add_argument("--per-type", action="store_true", help="apply the rule to each question type too")
    parser.add_argument(
        "--show", type=int, default=SHOWN, help="regressed questions printed at most (default %(default)s)"
    )
    add_common_options(parser)
    return parser


@exit_2_on_bad_input
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not (math.isfinite(args.max_drop) and args.max_drop >= 0):
        raise InputError(f"--max-drop {args.max_drop}: must be a number >= 0 (how much worse is tolerated)")
    if not 0 < args.alpha < 1:
        raise InputError(f"--alpha {args.alpha}: must be between 0 and 1")
    if args.show < 0:
        raise InputError(f"--show {args.show}: must be >= 0")
    pairs = run_pairs(args.baseline, args.candidate, args.metric, args.experiment, ("--baseline", "--candidate"))
    comparisons = [
        compare_runs(a, b, [args.metric], args.metric, seed=args.seed, resamples=args.resamples) for a, b in pairs
    ]
    failed = 0
    for i, comparison in enumerate(comparisons):
        if i:
            print()
        failed += check(comparison, args.metric, args.max_drop, args.alpha, args.per_type, args.show)
    rule = f"{args.metric} worse by more than {args.max_drop:g} with p < {args.alpha:g}"
    if failed:
        print(f"check failed: {failed} of {len(comparisons)} comparisons regressed ({rule})")
        return EXIT_REGRESSED
    print(f"check passed: no regression ({rule}{', per type too' if args.per_type else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
