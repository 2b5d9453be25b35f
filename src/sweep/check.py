"""`python -m sweep.check`: a CI gate that fails when a candidate run retrieves significantly worse.

    python -m sweep.check --baseline RUN --candidate RUN [--metric ndcg_at_10] [--max-drop 0.01]
                          [--per-type] [--alpha 0.05] [--shared]

RUN: a run id, `best` (the finished run with the best `--metric`), or a sweep's parent run id
(as in `sweep.compare`: its children; two sweeps pair their children by overrides). The paired
statistics are `sweep.compare`'s, over the questions both runs scored on the same golden set; runs
scored on different versions of it are refused (the message names `python -m sweep.rescore`), or,
with `--shared`, checked on the questions both versions hold with identical judgments.

The candidate regressed when both hold: it is worse by more than `--max-drop` (delta = candidate
- baseline < -max_drop; > max_drop for a metric where lower is better) and the difference is
significant (the two-sided paired randomization test's p < `--alpha`, the p-value `sweep.compare`
prints). `--per-type` applies the same rule to each question type too, with the types' p-values
Holm-corrected among themselves. Exit codes: 1 when a rule fails (the regressed questions are
printed, worst first), 0 otherwise (a run checked against itself passes), 2 on bad input (an
unknown run id or metric, a negative `--max-drop`, a store that cannot be reached). Reads only.

The rule is `sweep.evaluation.comparison.gate`, the lines `sweep.reporting.comparison_report.gate_lines`.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from sweep.arguments import add_common_options
from sweep.compare import add_shared_option, compare_runs
from sweep.errors import InputError, exit_2_on_bad_input
from sweep.evaluation.comparison import gate
from sweep.evaluation.registry import HEADLINE
from sweep.reporting.comparison_report import gate_lines
from sweep.tracking.resolve import run_pairs

EXIT_REGRESSED = 1
SHOWN = 50  # regressed questions printed per comparison by default


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep.check", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--baseline", required=True, help="run id, sweep (parent run) id, `best`, or `latest` (the sweep started last)"
    )
    parser.add_argument(
        "--candidate", required=True, help="run id, sweep (parent run) id, `best`, or `latest` (the sweep started last)"
    )
    parser.add_argument("--metric", default=HEADLINE, help="the metric the rule applies to (default %(default)s)")
    parser.add_argument(
        "--max-drop", type=float, default=0.0, help="the largest drop tolerated, even when significant (default 0)"
    )
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level (default %(default)s)")
    parser.add_argument("--per-type", action="store_true", help="apply the rule to each question type too")
    parser.add_argument(
        "--show", type=int, default=SHOWN, help="regressed questions printed at most (default %(default)s)"
    )
    add_shared_option(parser)
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
        compare_runs(a, b, [args.metric], args.metric, seed=args.seed, resamples=args.resamples, shared=args.shared)
        for a, b in pairs
    ]
    failed = 0
    for i, comparison in enumerate(comparisons):
        if i:
            print()
        result = gate(comparison, args.metric, args.max_drop, args.alpha, args.per_type)
        print("\n".join(gate_lines(result, args.show)))
        failed += result.regressed
    rule = f"{args.metric} worse by more than {args.max_drop:g} with p < {args.alpha:g}"
    if failed:
        print(f"check failed: {failed} of {len(comparisons)} comparisons regressed ({rule})")
        return EXIT_REGRESSED
    print(f"check passed: no regression ({rule}{', per type too' if args.per_type else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
