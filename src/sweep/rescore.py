"""`python -m sweep.rescore`: stored runs scored again on a new version of their golden set, without retrieval.

    python -m sweep.rescore RUN_OR_SWEEP --golden NEW [--experiment NAME]

RUN_OR_SWEEP: a run id, a sweep's parent run id (its finished children), or `latest` (the sweep
started last in `--experiment`, default golden-sweep). Each run is scored
again on NEW from its stored ranking and delivered chunks (no retrieval, no model loaded) and
logged as a new run tagged `sweep.rescores=<its id>`, with NEW's digests, so that `sweep.compare`
and `sweep.check` pair it with runs scored on NEW; a sweep becomes a new sweep with its own
leaderboard. Questions of NEW that the stored runs were never asked (new, or reworded since) are
not scored: they are counted, and only a new run scores them. `--experiment`: where the new runs
go (default: the stored runs' experiment). Exit 2 on bad input, one line.

The work is `sweep.experiment.rescore_runs`, the scoring `sweep.evaluation.rescoring`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sweep.errors import exit_2_on_bad_input
from sweep.experiment.rescore_runs import Rescoring, rescore
from sweep.reporting.console import print_leaderboard
from sweep.reporting.formatting import number


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep.rescore", description=__doc__.split("\n\n")[0])
    parser.add_argument("run", metavar="RUN_OR_SWEEP", help="run id, a sweep's parent run id, or `latest`")
    parser.add_argument("--golden", required=True, metavar="NEW", help="the golden file to score the runs on")
    parser.add_argument(
        "--experiment", default=None, help="where the new runs go (default: the stored runs'), and where `latest` looks"
    )
    return parser


def lines(result: Rescoring) -> list[str]:
    """One line per run scored again, then the questions left unscored, then the new sweep."""
    out = [
        f"rescored {r.source} as {r.run_id} ({r.label}): {result.objective} {number(r.before)} -> "
        f"{number(r.after)} on {r.questions} questions of {result.golden}"
        for r in result.runs
    ]
    out += [f"note: skipped {run.run_id} ({run.overrides}): {run.status}" for run in result.skipped]
    if result.unscored:
        shown = ", ".join(result.unscored[:5]) + (", …" if len(result.unscored) > 5 else "")
        out.append(f"{len(result.unscored)} questions of NEW are new: re-run to score them ({shown})")
    if result.sweep is not None:
        out.append(f"sweep {result.sweep.parent_id} rescores sweep {result.source_sweep}")
    return out


@exit_2_on_bad_input
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    result = rescore(args.run, args.golden, args.experiment)
    print("\n".join(lines(result)))
    if result.sweep is not None and result.sweep.results is not None:
        print_leaderboard(result.sweep.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
