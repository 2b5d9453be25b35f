"""`python -m sweep.compare A B`: is run B better or worse than run A, and on which questions?

    python -m sweep.compare A B [--json] [--metrics m1,m2] [--metric ndcg_at_10] [--flip-at 0.5] [--shared]

A and B are MLflow run ids, or `best`: the finished run with the best `--metric` in the experiment
(`sweep.best`'s winner). A sweep's parent run id stands for its children (finished ones):
A a sweep and B a run compares each child of A with B; A a run and B a sweep compares A with each
child of B; two sweeps pair their children by their overrides (the same `sweep.overrides`, in any
order, less `experiment=` and `cache_dir=`), and children with no partner are named on stderr and
skipped.

Both runs must be scored on the same golden set (tag `data.golden_digest`): runs scored on
different versions are refused, with the command that scores one again on the other's version
(`python -m sweep.rescore RUN --golden NEW`). `--shared` compares them instead on the questions both
versions hold with identical judgments (the same id, text and grades; each version read from the
golden file the run stored, checked against its digest) and says how many of each side that
is. Every statistic is
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

From Python: `sweep.compare_runs(a, b)`. The statistics are `sweep.evaluation.comparison`, the
runs' lookup `sweep.tracking.resolve`, their records `sweep.tracking.records`, the Markdown and
JSON `sweep.reporting.comparison_report`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import replace

from mlflow.exceptions import MlflowException

from sweep.arguments import add_common_options, metric_list
from sweep.errors import InputError, exit_2_on_bad_input, one_line
from sweep.evaluation.comparison import FLIP_AT, Comparison, compare_records, on_shared_questions, require_evaluation
from sweep.evaluation.registry import HEADLINE
from sweep.evaluation.significance import RESAMPLES, SEED
from sweep.reporting.comparison_report import comparison_json, comparison_markdown
from sweep.tracking.digests import check_legacy_size, check_same_golden_set, scored_golden
from sweep.tracking.reading import LoggedRun, logged_run
from sweep.tracking.records import load_record, log_comparison
from sweep.tracking.resolve import run_pairs


def compare_runs(
    a: LoggedRun | str,
    b: LoggedRun | str,
    metrics: Sequence[str] | None = None,
    headline: str | None = None,
    flip_at: float = FLIP_AT,
    seed: int = SEED,
    resamples: int = RESAMPLES,
    shared: bool = False,
) -> Comparison:
    """Run B against run A, each an MLflow run id or a run read already (`sweep.tracking.reading`):
    their records through `sweep.evaluation.comparison.compare_records`. Both must be scored on
    the same golden set (tag `data.golden_digest`), or, with `shared`, are compared on the
    questions their golden sets both hold with identical judgments; a run that did not finish is
    one line with its status and why it stopped."""
    a_run, b_run = (logged_run(run) if isinstance(run, str) else run for run in (a, b))
    a_record, b_record = load_record(a_run), load_record(b_run)
    for record in (a_record, b_record):
        require_evaluation(record)
    if check_same_golden_set(a_record, b_record, shared):
        check_legacy_size(a_record.golden_digest, max(len(a_record.per_query), len(b_record.per_query)))
        return compare_records(a_record, b_record, metrics, headline, flip_at, seed, resamples)
    a_record, b_record, common = on_shared_questions(a_record, b_record, scored_golden(a_run), scored_golden(b_run))
    compared = compare_records(a_record, b_record, metrics, headline, flip_at, seed, resamples)
    return replace(compared, shared=common)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "a", metavar="A", help="run id, sweep (parent run) id, `best`, or `latest` (the sweep started last)"
    )
    parser.add_argument(
        "b", metavar="B", help="run id, sweep (parent run) id, `best`, or `latest` (the sweep started last)"
    )
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
    add_shared_option(parser)
    add_common_options(parser)
    return parser


def add_shared_option(parser: argparse.ArgumentParser) -> None:
    """`--shared`, which `sweep.check` takes too."""
    parser.add_argument(
        "--shared",
        action="store_true",
        help="runs scored on different golden sets: compare the questions both hold with identical judgments",
    )


@exit_2_on_bad_input
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not math.isfinite(args.flip_at):
        raise InputError(f"--flip-at {args.flip_at}: must be a finite number")
    metrics = metric_list(args.metrics)
    pairs = run_pairs(args.a, args.b, args.metric or HEADLINE, args.experiment)
    comparisons = [
        compare_runs(a, b, metrics, args.metric, args.flip_at, args.seed, args.resamples, args.shared) for a, b in pairs
    ]
    if not args.no_log:
        for c in comparisons:
            try:
                log_comparison(c.b.run_id, c.a.run_id, comparison_markdown(c), comparison_json(c))
            except (OSError, MlflowException) as error:  # a read-only store or artifact folder: reading is fine
                raise InputError(
                    f"cannot log the comparison as artifacts of run {c.b.run_id} ({one_line(error)}); "
                    "--no-log compares without logging"
                ) from None
    if args.json:
        records = [comparison_json(c) for c in comparisons]
        json.dump(records[0] if len(records) == 1 else {"comparisons": records}, sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print("\n".join(comparison_markdown(c) for c in comparisons), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
