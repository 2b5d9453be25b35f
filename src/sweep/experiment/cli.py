"""`python -m sweep`: the Hydra face of golden-sweep.

Before Hydra runs anything, every combination on the command line is composed and checked
(`sweep.experiment.preflight`): a typo, an unknown option or a bad value in any of them is one `error:` line and
exit code 2, not a failure hours into a sweep. One configuration is one trial (`sweep.experiment.trial`);
with `-m`, every combination is a trial under one parent run (`ParentRunCallback`). The task function returns the config's `objective`
metric as a float, which is what Hydra sweepers (Optuna, Nevergrad, Ax) optimise. Errors
follow one policy. Exit codes: 0 done; 2 bad input (one `error:` line; in a multirun a bad
setting is found before anything runs); 1 a multirun in which some combination failed (each is a
FAILED MLflow run with its error, the others still ran; one line each at the end), or whose
parent run the tracking store refused (one line; nothing ran); 130 / 143
SIGINT / SIGTERM (the run in progress and the sweep are marked KILLED, the leaderboard of what
finished is logged).

A sweep's combinations may run in parallel processes or on a Ray cluster (`hydra/launcher=joblib`,
`hydra/launcher=ray`): the parent run stays in this process, and every job gets the parent's id
and the tracking store through Hydra's `hydra.job.env_set` (`pass_to_jobs`), which the launcher
composes into each job's config and applies around the task in whichever process runs it; among
them the overrides all its combinations share (`SHARED_OVERRIDES`), which each run's name leaves
out (`weight=0.3`: `trial_name`), and which the parent run keeps as a tag and in its description.
`resume=true` reopens the sweep's last unfinished parent run and skips what finished in it
(`sweep.tracking.sweeps.resumable_sweep`, `sweep.experiment.trial`). A job in a worker process
that the sweep's own process started (joblib's loky workers) ends when that process dies, even
by kill -9 (`sweep.experiment.workers`): its run is marked KILLED and the worker exits.

A key where its variable's name belongs (`model.embedder.api_key_env=sk-...`) and a `base_url`
with credentials are refused on the command line before anything else is read (the preflight),
so neither reaches Hydra's `.hydra/` folder, MLflow's params or the console. A reader of the
console that leaves (`| head -1`) stops nothing: the runs go on and are logged, and the console
writes go to /dev/null (`sweep.errors.outlive_the_reader`).
"""

from __future__ import annotations

import gc
import json
import logging
import math
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.types import Quote, QuotedString
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict, read_write

from sweep.errors import (
    Interrupted,
    bad_input,
    exit_2_on_bad_input,
    one_line,
    outlive_the_reader,
    raise_if_interrupted,
    report_bad_input,
    stop_on_signals,
)
from sweep.evaluation.leaderboard import build as build_leaderboard
from sweep.experiment.command_line import split_sweep
from sweep.experiment.heap import settle
from sweep.experiment.latency_pass import time_sweep
from sweep.experiment.preflight import preflight
from sweep.experiment.trial import HOW_IT_RUNS, Trial, run_trial
from sweep.experiment.workers import SWEEP_GONE, SWEEP_PID, end_with_the_sweep
from sweep.reporting.configs import varying_label
from sweep.reporting.console import (
    default_console,
    print_calibration,
    print_evaluation,
    print_leaderboard,
    print_lines,
    summary_line,
)
from sweep.reporting.html import render as render_report
from sweep.reporting.logs import SUMMARY, set_verbosity
from sweep.settings import override_key
from sweep.tracking.store import tracking_uri, ui_hint
from sweep.tracking.sweeps import REPORT, SweepSummary, finish_sweep, job_environment, log_report, start_sweep

log = logging.getLogger("sweep")
summary_log = logging.getLogger(SUMMARY)
CONSOLE = default_console()
EXIT_FAILED = 1  # a sweep in which some combination failed, or that could not open its parent run
SHARED_OVERRIDES = "SWEEP_SHARED_OVERRIDES"  # a sweep's jobs' variable: the overrides all of them have (JSON)
FLAGS = {"-q": "quiet", "--quiet": "quiet", "-v": "verbose", "--verbose": "verbose"}  # shorthands for verbosity=


def is_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def overrides() -> list[str]:
    return measured_overrides(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def trial_name() -> str:
    """This run's name: in a sweep, its overrides less those the sweep shares (`varying_label`:
    `weight=0.3`; the sweep's process passes them, `SHARED_OVERRIDES`); else, or where nothing is
    left, its overrides; "default" without any."""
    mine = overrides()
    shared = os.environ.get(SHARED_OVERRIDES)
    return (varying_label(mine, json.loads(shared)) if shared is not None else "") or " ".join(mine) or "default"


def measured_overrides(overrides: Sequence[str]) -> list[str]:
    """The overrides that say what is measured: with or without `resume=true` or `verbosity=`,
    the same combinations."""
    return [o for o in overrides if override_key(o) not in HOW_IT_RUNS]


def verbosity_flags(argv: Sequence[str]) -> list[str]:
    """`-q`/`--quiet` and `-v`/`--verbose` as the override `verbosity=quiet|verbose` (Hydra takes
    overrides, not flags; both spellings work); the last one given wins."""
    flags = [FLAGS[a] for a in argv if a in FLAGS]
    rest = [a for a in argv if a not in FLAGS]
    return [*rest, f"verbosity={flags[-1]}"] if flags else rest


def choices() -> dict[str, str]:
    """Each config group's chosen option (`{"index": "hnsw", ...}`), Hydra's own groups left out;
    an option placed in a package (a hybrid's member, `model@model.members.bm25`) under that package's
    name (`model.members.bm25`: MLflow param names have no `@`)."""
    if not HydraConfig.initialized():
        return {}
    chosen = HydraConfig.get().runtime.choices
    return {
        group.partition("@")[2] or group: str(option)
        for group, option in chosen.items()
        if not group.startswith("hydra")
    }


def main() -> None:
    """Check the command line, run it; a signal stops the sweep as described in `stop`."""
    stop_on_signals()
    outlive_the_reader()
    combinations = 0
    try:
        sys.argv[1:] = connecting_to_a_ray_cluster(maximizing(verbosity_flags(sys.argv[1:])))
        combinations = preflight(sys.argv[1:])
        hydra_main()
        raise_if_interrupted()  # a signal a library swallowed during the last combination
    except (Interrupted, KeyboardInterrupt) as interrupted:
        stop(interrupted if isinstance(interrupted, Interrupted) else Interrupted("SIGINT", 130), combinations)


def stop(interrupted: Interrupted, combinations: int) -> None:
    """The trial in progress is already KILLED (`sweep.tracking.lifecycle.trial_run`); close the sweep's parent
    run KILLED with the leaderboard of what finished, say so in one line, exit 128 + signal."""
    for number in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut this short
        signal.signal(number, signal.SIG_IGN)
    try:
        summary, _ = close_sweep(interrupted)
    except Exception as error:  # the signal cut into MLflow's own write; the next sweep marks the runs KILLED
        log.warning("could not close the sweep's run (%s)", error)
        summary = None
    if summary is None:
        print(f"error: {interrupted}; the run in progress is marked KILLED", file=sys.stderr)
    else:
        done = 0 if summary.results is None else int((summary.results.leaderboard["status"] == "FINISHED").sum())
        print(
            f"error: {interrupted}: {done} of {combinations} combinations finished; the sweep is marked KILLED",
            file=sys.stderr,
        )
    raise SystemExit(interrupted.exit_code)


def close_sweep(interrupted: Interrupted | None = None) -> tuple[SweepSummary | None, str | None]:
    """Close the sweep's parent run with its leaderboard (`finish_sweep`, `sweep.evaluation.leaderboard.build`; KILLED when
    `interrupted`) and log the report made of it as the run's `report.html` (the MLflow layer
    renders nothing). What the sweep measured and the report; (None, None) when no sweep is open."""
    summary = finish_sweep(build_leaderboard, interrupted)
    if summary is None or summary.results is None:
        return summary, None
    started = min((child.start_time for child in summary.children), default=None)
    html = render_report(summary.results, f"Sweep {summary.overrides}".strip(), summary.parent_id, started)
    log_report(summary.parent_id, html)
    return summary, html


def maximizing(argv: Sequence[str]) -> list[str]:
    """`hydra/sweeper=optuna` maximises the objective unless the command line says otherwise: the
    plugin minimises by default, and the objective (like the leaderboard) is higher-is-better."""
    if "hydra/sweeper=optuna" in argv and not any(a.startswith("hydra.sweeper.direction=") for a in argv):
        return [*argv, "hydra.sweeper.direction=maximize"]
    return list(argv)


def connecting_to_a_ray_cluster(argv: Sequence[str]) -> list[str]:
    """`hydra/launcher=ray` with a cluster's address: hydra-ray-launcher 1.2.2 passes
    `object_store_memory` to `ray.init` unless told a value, and Ray refuses it when joining a
    cluster that is already running; null leaves it to the cluster."""
    joins = any(a.startswith("hydra.launcher.ray.init.address=") for a in argv) or "RAY_ADDRESS" in os.environ
    told = any("hydra.launcher.ray.init.object_store_memory=" in a for a in argv)
    if "hydra/launcher=ray" in argv and joins and not told:
        return [*argv, "+hydra.launcher.ray.init.object_store_memory=null"]
    return list(argv)


@hydra.main(version_base="1.3", config_path="pkg://sweep.conf", config_name="config")
def hydra_main(cfg: DictConfig) -> float | None:
    return task(cfg)


@exit_2_on_bad_input
def task(cfg: DictConfig) -> float | None:
    """The trial's objective; NaN for a combination of a multirun that failed (None under Optuna:
    hydra-optuna-sweeper 1.3.0 stops the whole sweep on NaN, hydra#2237, and marks a trial that
    returned None FAIL and goes on). In a worker whose sweep's process is gone, the worker ends here,
    its run marked KILLED (`end_with_the_sweep`)."""
    end_with_the_sweep()
    try:
        objective = run_task(cfg)
    except BaseException:
        if not SWEEP_GONE:
            raise
    else:
        if not SWEEP_GONE:
            return objective
    # nobody is left to take the result, and the run is closed: the worker ends now, what its
    # indexes made outside it removed (their finalizers run as the frames of the job are freed),
    # those of what `settle` froze between jobs too
    gc.unfreeze()
    gc.collect()
    logging.shutdown()
    os._exit(128 + signal.SIGTERM)


def run_task(cfg: DictConfig) -> float | None:
    raise_if_interrupted()  # no next combination after a signal, even one a library swallowed
    set_verbosity(cfg.verbosity)  # Hydra made this job's console afresh
    outlive_the_reader()  # its console handlers too
    if is_multirun():  # what the jobs before left alive lives as long as the process
        settle()
    try:
        name = trial_name()
        trial = run_trial(cfg, choices(), overrides(), name)
    except Exception as error:
        if not is_multirun():
            raise
        cause = bad_input(error)
        if cause is not None:
            log.error("%s", cause)  # the job's log file
            report_bad_input(cause)
        else:
            log.exception("this combination failed; the sweep goes on")
        optuna = str(HydraConfig.get().sweeper.get("_target_", "")).startswith("hydra_plugins.hydra_optuna_sweeper")
        return None if optuna else math.nan
    show(trial, name, cfg.objective, quiet=cfg.verbosity == "quiet")
    return trial.objective


def show(trial: Trial, name: str, objective: str, quiet: bool) -> None:
    """Every run's summary line first, under the run's `name` (logged, so a sweep's log file has it
    too); a single run, unless `quiet`, then prints its tables and its address in the UI."""
    if trial.evaluation is None:
        log.info(
            "%s: finished before, in run %s: %s %.4f (resume)",
            name,
            trial.mlflow_run.run_id,
            objective,
            trial.objective,
        )
        return
    summary_log.info("%s: %s", name, summary_line(trial.evaluation, objective, trial.stats, trial.seconds))
    if is_multirun() or quiet:
        return
    print_evaluation(trial.evaluation, console=CONSOLE)
    if trial.calibration is not None:
        print_calibration(trial.calibration, console=CONSOLE)
    print_lines(ui_hint(trial.mlflow_run.experiment_id, trial.mlflow_run.run_id), console=CONSOLE)


def pass_to_jobs(config: DictConfig, environment: dict[str, str]) -> None:
    """Set `environment` in every job of the sweep `config`, in whichever process or machine it
    runs: as `hydra.job.env_set` overrides, from which the launcher composes each job's config."""
    with read_write(config), open_dict(config):
        for name, value in environment.items():
            config.hydra.overrides.hydra.append(f"++hydra.job.env_set.{name}={quoted(value)}")


def quoted(value: str) -> str:
    """`value` as a quoted Hydra override value: a quote, the backslashes before a quote or the end,
    and `${` (an interpolation) are escaped."""
    interpolations_escaped = re.sub(r"(\\*)\$\{", lambda m: m.group(1) * 2 + "\\${", value)
    return QuotedString(text=interpolations_escaped, quote=Quote.single).with_quotes()  # Hydra escapes the rest


class ParentRunCallback(Callback):
    """Opens the sweep's parent run before the first combination, and logs the leaderboard and
    closes it after the last."""

    @exit_2_on_bad_input  # e.g. an unreachable tracking server: before any combination runs
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        set_verbosity(config.verbosity)  # before the launcher's first lines
        measured = measured_overrides(config.hydra.overrides.task)
        varying, shared = split_sweep(measured)
        try:
            parent = start_sweep(
                config.experiment, measured, config.objective, config.resume is True, shared, varying_label(varying, ())
            )
        except Exception as error:  # Hydra would only warn, and run every combination outside the sweep
            if bad_input(error) is not None:
                raise
            print(f"error: cannot open the sweep's run at {tracking_uri()} ({one_line(error)})", file=sys.stderr)
            raise SystemExit(EXIT_FAILED) from None
        environment = {SWEEP_PID: str(os.getpid()), SHARED_OVERRIDES: json.dumps(shared)}
        pass_to_jobs(config, job_environment(parent) | environment)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """The leaderboard; then, if combinations failed, one line each and exit code 1."""
        raise_if_interrupted()  # the sweep was stopped, not finished: `stop` closes it
        set_verbosity(config.verbosity)  # the console as the jobs had it, for the latency pass's libraries too
        time_sweep()  # every finished configuration timed together, before the leaderboard reads them
        summary, html = close_sweep()
        if summary is None:
            return
        if summary.results is not None:
            print_leaderboard(summary.results, console=CONSOLE)
        if html is not None:
            report = Path(config.hydra.sweep.dir) / REPORT
            report.parent.mkdir(parents=True, exist_ok=True)
            report.write_text(html)
            print_lines([f"Report: {report} (also the sweep run's artifact {REPORT})"], console=CONSOLE)
        print_lines(
            [f"Sweep run: {summary.parent_id} (what sweep.best --sweep, sweep.pool --sweep and sweep.compare take)"],
            console=CONSOLE,
        )
        print_lines(ui_hint(summary.experiment_id, summary.parent_id), console=CONSOLE)
        if summary.failed:
            n = len(summary.results.leaderboard) if summary.results is not None else len(summary.failed)
            print(f"error: {len(summary.failed)} of {n} combinations failed:", file=sys.stderr)
            for combination, error in summary.failed:
                print(f"  {combination}: {error}", file=sys.stderr)
            raise SystemExit(EXIT_FAILED)
