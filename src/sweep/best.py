"""The winning configuration, pulled back from MLflow.

    from sweep import best_config
    cfg = best_config("ndcg_at_10")              # an OmegaConf DictConfig
    cfg = best_config("ndcg_at_10", among="tied", prefer="latency/search_ms_p50")

    python -m sweep.best --metric ndcg_at_10 [--sweep PARENT_RUN_ID] [--output best.yaml]
    python -m sweep.best --metric ndcg_at_10 --among tied --prefer latency/search_ms_p50

`among="tied"` takes the cheapest (lowest `prefer`) of the runs the golden set cannot tell apart
from the best one (a Holm-corrected paired test over the questions: `sweep.evaluation.leaderboard`), rather
than a maximum that may be noise.

The record of the chosen run is `sweep.tracking.BestRun`; its config has today's `_target_`
paths, also for a run logged before the subpackages. Reading MLflow needs neither Hydra nor FAISS,
so neither is imported here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from sweep.errors import InputError, exit_2_on_bad_input
from sweep.tracking import AMONG, CHEAPEST_BY, DEFAULT_EXPERIMENT, BestRun, best_run


def find_best(
    metric: str = "ndcg_at_10",
    experiment: str | None = None,
    sweep: str | None = None,
    maximize: bool = True,
    among: str = "best",
    prefer: str | None = None,
) -> BestRun:
    """The finished run with the best `metric` (only the children of parent run `sweep`, if given);
    `among="tied"`: the one with the lowest `prefer` of those statistically tied with it
    (`sweep.tracking.best_run`)."""
    return best_run(metric, experiment or DEFAULT_EXPERIMENT, sweep, maximize, among, prefer)


def best_config(
    metric: str = "ndcg_at_10",
    experiment: str | None = None,
    sweep: str | None = None,
    maximize: bool = True,
    among: str = "best",
    prefer: str | None = None,
) -> DictConfig:
    """The winning run's fully resolved config (`find_best`)."""
    return find_best(metric, experiment, sweep, maximize, among, prefer).config


@exit_2_on_bad_input
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sweep.best", description="Print the winning configuration.")
    parser.add_argument("--metric", default="ndcg_at_10")
    parser.add_argument("--experiment", default=None, help=f"default {DEFAULT_EXPERIMENT!r}")
    parser.add_argument("--sweep", default=None, help="parent run id: only that sweep's runs")
    parser.add_argument("--minimize", action="store_true", help="lower is better (e.g. latency/search_ms_p50)")
    parser.add_argument(
        "--among", default="best", choices=AMONG, help="tied: the cheapest of the runs tied with the best"
    )
    parser.add_argument("--prefer", default=None, help=f"with --among tied, lowest wins (default {CHEAPEST_BY})")
    parser.add_argument("--output", default=None, help="write the resolved config to this YAML file")
    args = parser.parse_args(argv)
    if args.output and Path(args.output).is_dir():
        raise InputError(
            f"--output {args.output}: is a folder; give a file name, e.g. {Path(args.output) / 'best.yaml'}"
        )
    winner = find_best(args.metric, args.experiment, args.sweep, not args.minimize, args.among, args.prefer)
    print(f"run {winner.run_id}: {args.metric} = {winner.value:.4f}, {winner.why}")
    print(f"reproduce: {winner.command}")
    if args.output:
        try:
            OmegaConf.save(winner.config, args.output)
        except OSError as error:
            raise InputError(f"--output {args.output}: cannot write it ({error.strerror})") from None
        print(f"config written to {args.output}")
    else:
        print(OmegaConf.to_yaml(winner.config), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
