"""`python -m sweep`: the Hydra face of golden-sweep.

One configuration is one trial (`sweep.trial`); with `-m`, every combination is a trial under
one parent run (`ParentRunCallback`). The task function returns the config's `objective`
metric as a float, which is what Hydra sweepers (Optuna, Nevergrad, Ax) optimise. Errors
follow one policy: bad input in a single run is one `error:` line and exit code 2; in a
multirun, a combination that fails is a FAILED MLflow run with its error, logged here, and the
sweep goes on.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from sweep import tracking
from sweep.errors import bad_input, exit_2_on_bad_input, report_bad_input
from sweep.report import default_console, print_calibration, print_evaluation, print_leaderboard, print_lines
from sweep.trial import Trial, run_trial

log = logging.getLogger("sweep")
CONSOLE = default_console()
SHOWN = ("recall_at_5", "mrr", "abstain/correct_rate", "latency/search_ms_p50")  # besides the objective


def is_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def overrides() -> list[str]:
    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def choices() -> dict[str, str]:
    """Each config group's chosen option (`{"index": "hnsw", ...}`), Hydra's own groups left out."""
    if not HydraConfig.initialized():
        return {}
    chosen = HydraConfig.get().runtime.choices
    return {group: str(option) for group, option in chosen.items() if not group.startswith("hydra")}


@hydra.main(version_base="1.3", config_path="pkg://sweep.conf", config_name="config")
def main(cfg: DictConfig) -> float:
    return task(cfg)


@exit_2_on_bad_input
def task(cfg: DictConfig) -> float:
    """The trial's objective; NaN for a combination of a multirun that failed."""
    try:
        trial = run_trial(cfg, choices(), overrides())
    except Exception as error:
        if not is_multirun():
            raise
        cause = bad_input(error)
        if cause is not None:
            log.error("%s", cause)  # the job's log file
            report_bad_input(cause)
        else:
            log.exception("this combination failed; the sweep goes on")
        return math.nan
    show(trial, cfg.objective)
    return trial.objective


def show(trial: Trial, objective: str) -> None:
    """A multirun logs one line per combination; a single run prints its report."""
    mean = trial.evaluation.mean
    if is_multirun():
        headline = ", ".join(f"{k} {mean[k]:.4f}" for k in dict.fromkeys([objective, *SHOWN]) if k in mean)
        log.info("%s: %s", " ".join(overrides()) or "default", headline)
        return
    print_evaluation(trial.evaluation, console=CONSOLE)
    if trial.calibration is not None:
        print_calibration(trial.calibration, console=CONSOLE)
    print_lines(tracking.ui_hint(trial.mlflow_run.experiment_id), console=CONSOLE)


class ParentRunCallback(Callback):
    """Opens the sweep's parent run before the first combination, and logs the leaderboard and
    closes it after the last."""

    @exit_2_on_bad_input  # e.g. an unreachable tracking server: before any combination runs
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        tracking.start_sweep(config.experiment, list(config.hydra.overrides.task))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        finished = tracking.finish_sweep(config.objective)
        if finished is None:
            return
        leaderboard, experiment_id = finished
        if leaderboard is not None:
            print_leaderboard(leaderboard, [config.objective, *SHOWN], console=CONSOLE)
        print_lines(tracking.ui_hint(experiment_id), console=CONSOLE)
