"""The winning configuration, pulled back from MLflow.

    from sweep import best_config
    cfg = best_config("ndcg_at_10")              # an OmegaConf DictConfig

    python -m sweep.best --metric ndcg_at_10 [--sweep PARENT_RUN_ID] [--output best.yaml]
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import mlflow
import yaml
from omegaconf import DictConfig, OmegaConf

from sweep.cli import tracking_uri
from sweep.errors import InputError
from sweep.tracking import connect

DEFAULT_EXPERIMENT = "golden-sweep"


@dataclass(frozen=True)
class Winner:
    run_id: str
    value: float
    config: DictConfig
    overrides: list[str]

    @property
    def command(self) -> str:
        return shlex.join(["python", "-m", "sweep", *self.overrides])


def find_best(
    metric: str = "ndcg_at_10", experiment: str | None = None, sweep: str | None = None, maximize: bool = True
) -> Winner:
    """The finished run with the best `metric` (only the children of parent run `sweep`, if given)."""
    connect(tracking_uri())
    name = experiment or DEFAULT_EXPERIMENT
    found = mlflow.get_experiment_by_name(name)
    if found is None:
        raise InputError(f"no MLflow experiment named {name!r} at {tracking_uri()}")
    conditions = ["attributes.status = 'FINISHED'", f"metrics.`{metric}` > -1e300"]
    if sweep:
        conditions.append(f"tags.mlflow.parentRunId = '{sweep}'")
    runs = mlflow.search_runs(
        [found.experiment_id],
        filter_string=" and ".join(conditions),
        order_by=[f"metrics.`{metric}` {'DESC' if maximize else 'ASC'}", "attributes.start_time ASC"],
        max_results=1,
        output_format="list",
    )
    if not runs:
        where = f"sweep {sweep}" if sweep else f"experiment {name!r}"
        raise InputError(f"no finished run in {where} has the metric {metric!r}")
    run = runs[0]
    config = OmegaConf.create(mlflow.artifacts.load_text(f"{run.info.artifact_uri}/config/resolved.yaml"))
    overrides = yaml.safe_load(mlflow.artifacts.load_text(f"{run.info.artifact_uri}/config/overrides.yaml"))["overrides"]
    return Winner(run.info.run_id, run.data.metrics[metric], config, overrides)


def best_config(
    metric: str = "ndcg_at_10", experiment: str | None = None, sweep: str | None = None, maximize: bool = True
) -> DictConfig:
    """The winning run's fully resolved config."""
    return find_best(metric, experiment, sweep, maximize).config


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sweep.best", description="Print the winning configuration.")
    parser.add_argument("--metric", default="ndcg_at_10")
    parser.add_argument("--experiment", default=None, help=f"default {DEFAULT_EXPERIMENT!r}")
    parser.add_argument("--sweep", default=None, help="parent run id: only that sweep's runs")
    parser.add_argument("--minimize", action="store_true", help="lower is better (e.g. latency/search_ms_p50)")
    parser.add_argument("--output", default=None, help="write the resolved config to this YAML file")
    args = parser.parse_args(argv)
    try:
        winner = find_best(args.metric, args.experiment, args.sweep, maximize=not args.minimize)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"run {winner.run_id}: {args.metric} = {winner.value:.4f}")
    print(f"reproduce: {winner.command}")
    if args.output:
        OmegaConf.save(winner.config, args.output)
        print(f"config written to {args.output}")
    else:
        print(OmegaConf.to_yaml(winner.config), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
