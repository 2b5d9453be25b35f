"""Choosing the best run: `best_run` and its record, `BestRun` (what `sweep.best` prints).

The finished run with the best metric; or (`among="tied"`) the cheapest of the runs the golden set
cannot tell apart from it (a Holm-corrected paired test over the questions:
`sweep.evaluation.leaderboard`). Its config is given back with today's `_target_` paths, also when
the run was logged before the subpackages (`sweep.tracking.legacy`), so that it can be run again.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mlflow
import pandas as pd
import yaml
from omegaconf import DictConfig, OmegaConf

from sweep.errors import InputError, one_line
from sweep.evaluation.registry import CHEAPEST_BY, COSTS
from sweep.tracking.digests import GOLDEN_DIGEST, check_legacy_size
from sweep.tracking.legacy import current_targets
from sweep.tracking.reading import LoggedRun, as_logged, no_progress_bar, require_artifacts
from sweep.tracking.store import DEFAULT_EXPERIMENT, NOT_SUPERSEDED, RUN_ID, existing_experiment_id, search_pages
from sweep.tracking.sweeps import build_results

AMONG = ("best", "tied")  # the single best value, or the cheapest of those tied with it
_METRIC_NAME = re.compile(r"[A-Za-z0-9_\-./: ]+")


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
    (`sweep.evaluation.leaderboard`: Holm-corrected paired test over the questions, on the runs of the sweep,
    or of the experiment scored on the same golden set), the one with the lowest `prefer` (a cost,
    e.g. `latency/search_ms_p50`; default `CHEAPEST_BY`; only with `among="tied"`). Reading creates
    nothing: no store is an error."""
    for name, value in (("--metric", metric), ("--prefer", prefer)):
        if value is not None and not _METRIC_NAME.fullmatch(value):
            raise InputError(f"{name} {value!r}: not a metric name (letters, digits and _ - . / : space)")
    if among not in AMONG:
        raise InputError(f"--among {among!r}: one of {', '.join(AMONG)}")
    if prefer is not None and among != "tied":
        raise InputError(f"--prefer {prefer}: it chooses among the runs tied with the best; add --among tied")
    if among == "tied" and not maximize:
        raise InputError("--among tied ranks higher-is-better metrics; it cannot be combined with --minimize")
    if sweep is not None and not RUN_ID.fullmatch(sweep):
        raise InputError(f"--sweep {sweep!r}: not an MLflow run id (32 hexadecimal digits)")
    experiment_id = existing_experiment_id(experiment)
    conditions = ["attributes.status = 'FINISHED'", f"metrics.`{metric}` > -1e300", NOT_SUPERSEDED]
    if sweep:
        conditions.append(f"tags.mlflow.parentRunId = '{sweep}'")
    runs = mlflow.search_runs(
        [experiment_id],
        filter_string=" and ".join(conditions),
        order_by=[f"metrics.`{metric}` {'DESC' if maximize else 'ASC'}", "attributes.start_time ASC"],
        max_results=1,
        output_format="list",
    )
    if not runs:
        where = f"sweep {sweep}" if sweep else f"experiment {experiment!r}"
        raise InputError(f"no finished run in {where} has the metric {metric!r}")
    run, why = runs[0], f"the {'highest' if maximize else 'lowest'} {metric}"
    require_artifacts(as_logged(run))
    if among == "tied":
        golden = run.data.tags.get(GOLDEN_DIGEST, "")
        conditions.append(f"tags.`{GOLDEN_DIGEST}` = '{golden}'")
        candidates = search_pages(mlflow.MlflowClient(), experiment_id, " and ".join(conditions))
        run, why = _cheapest_tied(metric, [as_logged(c) for c in candidates], prefer or CHEAPEST_BY, golden)
    try:
        with no_progress_bar():
            config = yaml.safe_load(mlflow.artifacts.load_text(f"{run.info.artifact_uri}/config/resolved.yaml"))
            hydra = yaml.safe_load(mlflow.artifacts.load_text(f"{run.info.artifact_uri}/config/overrides.yaml"))
    except (mlflow.exceptions.MlflowException, OSError) as error:
        raise InputError(f"run {run.info.run_id}: cannot read its logged config ({one_line(error)})") from None
    return BestRun(
        run.info.run_id,
        run.data.metrics[metric],
        OmegaConf.create(current_targets(config)),
        hydra["overrides"],
        hydra.get("choices", {}),
        why,
    )


def _cheapest_tied(metric: str, candidates: Sequence[LoggedRun], prefer: str, golden: str) -> tuple[Any, str]:
    """The run with the lowest `prefer` among `candidates` (scored on the golden set `golden`) tied
    with the best by `metric` (the better-ranked one on equal cost; a run without `prefer` comes
    last), and why, in one line. No tied run with `prefer` is an error, not a choice by NaN."""
    results = build_results(metric, candidates)
    check_legacy_size(golden, len(results.questions))
    board = results.leaderboard
    if board["mean"].isna().all():
        raise InputError(
            f"--among tied: {metric!r} is not a per-question metric (tables/per_query.json has no such column)"
        )
    tied = board[board["tied_with_best"]]
    metrics = {run.run_id: run.metrics for run in candidates}
    cost = pd.Series([metrics[r].get(prefer, math.nan) for r in tied.index], index=tied.index, dtype=float)
    if cost.isna().all():
        known = sorted({name for r in tied.index for name in metrics[r] if name in COSTS})
        raise InputError(
            f"--prefer {prefer!r}: no run tied with the best has this metric ({len(tied)} tied; the costs they "
            f"have: {', '.join(known) or 'none'})"
        )
    chosen = cost.fillna(math.inf).sort_values(kind="stable").index[0]
    leader = board.index[0]
    why = (
        f"the lowest {prefer} ({cost[chosen]:.4g}) of {len(tied)} of {len(board)} runs tied with the best "
        f"(run {leader}: {metric} {board.at[leader, 'mean']:.4f}; Holm-corrected paired test, alpha {results.alpha})"
    )
    return mlflow.get_run(chosen), why
