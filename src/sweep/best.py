"""The winning configuration, pulled back from MLflow.

    from sweep import best_config
    cfg = best_config("ndcg_at_10")              # an OmegaConf DictConfig
    cfg = best_config("ndcg_at_10", among="tied", prefer="latency/search_ms_p50")

    python -m sweep.best --metric ndcg_at_10 [--sweep PARENT_RUN_ID] [--output best.yaml]
    python -m sweep.best --metric ndcg_at_10 --among tied --prefer latency/search_ms_p50

`among="tied"` takes the cheapest (lowest `prefer`) of the runs the golden set cannot tell apart
from the best one (a Holm-corrected paired test over the questions: `sweep.evaluation.leaderboard`), rather
than a maximum that may be noise.

The chosen run is a `BestRun`; its config has today's `_target_` paths, also for a run logged
before the subpackages (`sweep.tracking.legacy`), so that it can be run again. Reading MLflow needs
neither Hydra nor FAISS, so neither is imported here.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from sweep.errors import InputError, exit_2_on_bad_input
from sweep.evaluation.leaderboard import cheapest_tied
from sweep.evaluation.registry import CHEAPEST_BY
from sweep.tracking.digests import GOLDEN_DIGEST, check_legacy_size
from sweep.tracking.legacy import current_targets
from sweep.tracking.reading import METRIC_NAME, RunSearch, finished_runs, require_artifacts
from sweep.tracking.records import load_record, load_records
from sweep.tracking.store import DEFAULT_EXPERIMENT, PARENT_TAG, RUN_ID, connect, existing_experiment_id

AMONG = ("best", "tied")  # the single best value, or the cheapest of those tied with it


@dataclass(frozen=True)
class BestRun:
    """The run `best_run` chose, and how to run its configuration again."""

    run_id: str
    value: float  # its value of the metric it was chosen by
    config: DictConfig  # the resolved config, today's `_target_`s: runs as it is with sweep.experiment.trial.run_trial
    overrides: list[str]  # the command line that produced it
    choices: dict[str, str]  # each config group's option (`{"index": "hnsw", ...}`)
    why: str  # how it was chosen, in one line

    @property
    def command(self) -> str:
        return shlex.join(["python", "-m", "sweep", *self.overrides])


def best_run(
    metric: str,
    experiment: str = DEFAULT_EXPERIMENT,
    sweep: str | None = None,
    maximize: bool = True,
    among: str = "best",
    prefer: str | None = None,
) -> BestRun:
    """The finished run with the best `metric` (only the children of parent run `sweep`, if given;
    the earliest on ties). `among="tied"`: of the runs statistically tied with that one
    (`sweep.evaluation.leaderboard.cheapest_tied`: Holm-corrected paired test over the questions, on
    the runs of the sweep, or of the experiment scored on the same golden set), the one with the
    lowest `prefer` (a cost, e.g. `latency/search_ms_p50`; default `CHEAPEST_BY`; only with
    `among="tied"`). Reading creates nothing: no store is an error."""
    if prefer is not None and not METRIC_NAME.fullmatch(prefer):
        raise InputError(f"--prefer {prefer!r}: not a metric name (letters, digits and _ - . / : space)")
    if among not in AMONG:
        raise InputError(f"--among {among!r}: one of {', '.join(AMONG)}")
    if prefer is not None and among != "tied":
        raise InputError(f"--prefer {prefer}: it chooses among the runs tied with the best; add --among tied")
    if among == "tied" and not maximize:
        raise InputError("--among tied ranks higher-is-better metrics; it cannot be combined with --minimize")
    if sweep is not None and not RUN_ID.fullmatch(sweep):
        raise InputError(f"--sweep {sweep!r}: not an MLflow run id (32 hexadecimal digits)")
    connect(create=False)
    search = RunSearch(existing_experiment_id(experiment), metric, maximize, ((PARENT_TAG, sweep),) if sweep else ())
    found = finished_runs(search, best_only=True)
    if not found:
        where = f"sweep {sweep}" if sweep else f"experiment {experiment!r}"
        raise InputError(f"no finished run in {where} has the metric {metric!r}")
    best, why = found[0], f"the {'highest' if maximize else 'lowest'} {metric}"
    require_artifacts(best)
    chosen = best.run_id
    if among == "tied":
        golden = best.tags.get(GOLDEN_DIGEST, "")
        records = load_records(finished_runs(replace(search, tags=(*search.tags, (GOLDEN_DIGEST, golden))), False))
        check_legacy_size(golden, max((len(r.per_query) for r in records if r.per_query is not None), default=0))
        cheapest, why = cheapest_tied(metric, records, prefer or CHEAPEST_BY)
        chosen = cheapest.run_id
    record = load_record(best if chosen == best.run_id else chosen, per_query=False, config=True)
    return BestRun(
        record.run_id,
        record.metrics[metric],
        OmegaConf.create(current_targets(record.config)),
        list(record.overrides),
        record.choices,
        why,
    )


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
    (`best_run`)."""
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
