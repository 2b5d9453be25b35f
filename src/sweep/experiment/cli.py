"""`python -m sweep`: the Hydra face of golden-sweep.

Before Hydra runs anything, every combination on the command line is composed and checked
(`preflight`): a typo, an unknown option or a bad value in any of them is one `error:` line and
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
composes into each job's config and applies around the task in whichever process runs it.
`resume=true` reopens the sweep's last unfinished parent run and skips what finished in it
(`sweep.tracking.sweeps.resumable_sweep`, `sweep.experiment.trial`). A job in a worker process
that the sweep's own process started (joblib's loky workers) ends when that process dies, even
by kill -9 (`end_with_the_sweep`): its run is marked KILLED and the worker exits.

A key where its variable's name belongs (`model.embedder.api_key_env=sk-...`) and a `base_url`
with credentials are refused on the command line before anything else is read (`refuse_secrets`),
so neither reaches Hydra's `.hydra/` folder, MLflow's params or the console. A reader of the
console that leaves (`| head -1`) stops nothing: the runs go on and are logged, and the console
writes go to /dev/null (`sweep.errors.outlive_the_reader`).
"""

from __future__ import annotations

import errno
import gc
import logging
import math
import multiprocessing
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import hydra
from hydra import compose, initialize_config_module
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, Quote, QuotedString
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from sweep.errors import (
    InputError,
    Interrupted,
    bad_input,
    exit_2_on_bad_input,
    folder_problem,
    one_line,
    outlive_the_reader,
    raise_if_interrupted,
    report_bad_input,
    stop_on_signals,
)
from sweep.evaluation.leaderboard import build as build_leaderboard
from sweep.experiment.command_line import composition_error, hydra_arguments_parser, joined_lines, sweep_combinations
from sweep.experiment.trial import HOW_IT_RUNS, Trial, build_pipeline, check_settings, run_trial
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
from sweep.retrieval.model_client import check_base_url, check_key_variable
from sweep.settings import override_key
from sweep.tracking.store import tracking_uri, ui_hint
from sweep.tracking.sweeps import REPORT, SweepSummary, finish_sweep, job_environment, log_report, start_sweep

log = logging.getLogger("sweep")
BASIC_SWEEPER = ("basic", "preflighted")  # Hydra's basic sweeper, by its name and by its old one here
summary_log = logging.getLogger(SUMMARY)
CONSOLE = default_console()
EXIT_FAILED = 1  # a sweep in which some combination failed, or that could not open its parent run
FLAGS = {"-q": "quiet", "--quiet": "quiet", "-v": "verbose", "--verbose": "verbose"}  # shorthands for verbosity=
MAX_COMBINATIONS = 1000  # a larger -m sweep is refused: checking it alone would take minutes
NOTICE_FROM = 50  # from this many combinations, say that they are being checked (about 0.1 s each)
SWEEP_PID = "SWEEP_MAIN_PID"  # the sweep's own process, set in its jobs: a worker it started ends with it
GRACE_S = 10.0  # after the sweep's process died, how long a worker's run has to be marked KILLED
WATCH_EVERY_S = 0.2  # how often a worker looks whether the sweep's process is still its parent
OUTPUT_ROOM = 64 * 1024  # bytes Hydra's output folder needs at least: .hydra/*.yaml and the job's log
KEY_VARIABLES = {"reranker": "RERANK_API_KEY"}  # each component's default api_key_env; OPENAI_API_KEY elsewhere
SECRETS: dict[str, Callable[[str, str], None]] = {  # settings whose value must not be written or shown
    "api_key_env": lambda key, value: check_key_variable(
        key, value, KEY_VARIABLES.get(key.partition(".")[0], "OPENAI_API_KEY")
    ),
    "base_url": lambda key, value: check_base_url(key, value, f"{key.rpartition('.')[0]}.api_key_env".lstrip(".")),
}


def is_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def overrides() -> list[str]:
    return measured_overrides(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


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
    html = render_report(summary.results, f"Sweep {summary.overrides}".strip())
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


def chooses_its_combinations(override: Override) -> bool:
    """Whether `override` hands the sweep to a sweeper that chooses its own combinations (Optuna,
    ...): not Hydra's basic one, by its name or by its old one (`preflighted`)."""
    if override.get_key_element() == "hydra/sweeper":
        return override.value() not in BASIC_SWEEPER
    return override.get_key_element().startswith(("hydra/sweeper", "hydra.sweeper"))


@exit_2_on_bad_input
def preflight(argv: Sequence[str]) -> int:
    """Compose and check every combination the command line asks for, as Hydra will; how many."""
    args, _ = hydra_arguments_parser().parse_known_args(argv)
    refuse_secrets(args.overrides)  # before anything, --cfg and --help included, shows or writes one
    asks_something_else = args.help or args.hydra_help or args.version or args.info or args.cfg or args.shell_completion
    other_config = args.config_path or args.config_dir or args.config_name or args.experimental_rerun
    if asks_something_else or other_config:
        return 0
    parser = OverridesParser.create()
    for override in args.overrides:
        try:
            parser.parse_overrides([override])
        except HydraException as error:
            raise InputError(f"{override}: cannot be read as an override ({joined_lines(error)})") from None
    parsed = parser.parse_overrides(args.overrides)
    if args.multirun and any(chooses_its_combinations(o) for o in parsed):
        return 0  # another sweeper chooses the combinations; each is checked when it runs
    hydra_own = [override.input_line for override in parsed if override.is_hydra_override()]
    if args.multirun:  # as the sweeper launches each combination and Hydra composes its job: Hydra's own first
        swept = [o.input_line for o in parsed if o.is_hydra_override() and o.is_sweep_override()]
        if swept:
            raise InputError(f"{swept[0]}: Hydra's own settings (hydra.*) take one value in a sweep, not several")
        jobs = sweep_combinations([o for o in parsed if not o.is_hydra_override()])
        combinations = [[*hydra_own, *job] for job in jobs]
    else:
        jobs = combinations = [list(args.overrides)]
    if len(combinations) > MAX_COMBINATIONS:
        raise InputError(
            f"-m: {len(combinations):,} combinations; one sweep runs at most {MAX_COMBINATIONS:,} (each is an MLflow "
            "run, checked before the first starts): split it, or let a sweeper choose (hydra/sweeper=optuna)"
        )
    if len(combinations) >= NOTICE_FROM:
        print(f"checking the {len(combinations):,} combinations before the first runs ...", file=sys.stderr)
    with initialize_config_module(version_base="1.3", config_module="sweep.conf"):
        first = composed_with_hydra(combinations[0])  # also for the output folder and the launcher
        check_output_folder(first, args.multirun)
        if args.multirun:
            check_launcher(first)
        for number, (combination, job) in enumerate(zip(combinations, jobs)):
            where = f" (in the combination {' '.join(job)})" if len(combinations) > 1 else ""
            try:
                reuse = number == 0 and first is not None
                composed = first if reuse else compose("config", overrides=combination, return_hydra_config=True)
                cfg = without_hydra(composed)
                check_settings(cfg)
                if cfg.resume and not args.multirun:
                    raise InputError("resume=true resumes a sweep: add -m (a single run has nothing to resume)")
                build_pipeline(cfg)  # cheap (nothing loads yet), and it checks what spans settings
            except Exception as error:
                cause = bad_input(error)  # also when Hydra wraps what a constructor raised
                if cause is not None:
                    raise InputError(f"{cause}{where}") from None
                if isinstance(error, (HydraException, OmegaConfBaseException)):
                    raise InputError(composition_error(error, combination) + where) from None
                raise
    return len(combinations)


def composed_with_hydra(overrides: Sequence[str]) -> DictConfig | None:
    """`overrides` composed with Hydra's own config (`hydra.*`); None where they cannot be
    composed (the checks that follow say why)."""
    try:
        return compose("config", overrides=list(overrides), return_hydra_config=True)
    except (HydraException, OmegaConfBaseException):
        return None


def without_hydra(composed: DictConfig) -> DictConfig:
    """What `compose` gives for the same overrides: the config without Hydra's node."""
    cfg = composed.copy()
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def check_output_folder(composed: DictConfig | None, multirun: bool) -> None:
    """That Hydra can create its output folder (`hydra.run.dir`, `hydra.sweep.dir` with -m) and
    write its first files there: a folder that cannot be written (/proc, a read-only working
    folder) or a full disk is one line before anything runs, not Hydra's traceback. A temporary
    folder is made where it would go, `OUTPUT_ROOM` bytes written in it, and removed."""
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    if composed is None:
        return
    try:
        folder = Path(str(OmegaConf.select(composed, key))).absolute()
    except (HydraException, OmegaConfBaseException):
        return  # what cannot be composed or resolved here is reported by the checks that follow, or by Hydra
    problem = folder_problem(folder, room=OUTPUT_ROOM)
    if problem is None:
        return
    if problem.endswith((os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))):
        raise InputError(
            f"{key}={folder}: no space left for Hydra's output folder ({problem}); free some, "
            f"or give {key}=<a folder on a disk with room>"
        )
    raise InputError(
        f"{key}={folder}: Hydra cannot create its output folder there ({problem}); give {key}=<a writable folder>"
    )


JOBLIB_LAUNCHER = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"


def check_launcher(composed: DictConfig | None) -> None:
    """The launcher's settings, as joblib would take them when the sweep launches its first
    combination (a 34-line traceback then, after the sweep's run was opened): `n_jobs=0`, and what
    `joblib.Parallel` refuses when made (`prefer`, `require`, `batch_size`, `max_nbytes`)."""
    if composed is None:
        return
    try:
        launcher = OmegaConf.to_container(OmegaConf.select(composed, "hydra.launcher"), resolve=True)
    except (HydraException, OmegaConfBaseException, ValueError):
        return  # reported by the checks that follow, or by Hydra
    if not isinstance(launcher, dict) or launcher.get("_target_") != JOBLIB_LAUNCHER:
        return
    from joblib import Parallel

    settings = {name: value for name, value in launcher.items() if name != "_target_"}
    if settings.get("n_jobs") == 0:
        raise InputError(
            "hydra.launcher.n_jobs=0: joblib runs at least one combination at a time; give how many at once "
            "(hydra.launcher.n_jobs=2), or -1 for one per CPU core"
        )
    for name in ("pre_dispatch", "batch_size", "max_nbytes"):  # as the launcher hands them to joblib
        try:
            settings[name] = int(settings[name]) if settings.get(name) else settings.get(name)
        except ValueError:
            pass
    try:
        Parallel(**{**settings, "backend": "loky"})  # the backend the launcher always uses; nothing starts yet
    except (TypeError, ValueError) as error:
        raise InputError(f"hydra.launcher: joblib refuses these settings ({one_line(error)})") from None


def refuse_secrets(overrides: Sequence[str]) -> None:
    """A key given where its variable's name belongs (`model.embedder.api_key_env=sk-...`) or a
    `base_url` with credentials, under any component's key (`reranker.`, `judge.`, a hybrid's
    member, Optuna's search space): one line that does not show the value, before Hydra writes the
    command line to `.hydra/overrides.yaml` and MLflow logs it. A component made from a config file
    checks the same when it is made (`sweep.retrieval.model_client.ModelClient`)."""
    parser = OverridesParser.create()
    for text in overrides:
        key = text.partition("=")[0].lstrip("+~").strip()
        check = SECRETS.get(key.rpartition(".")[2].partition("@")[0])
        if check is None or "=" not in text:
            continue
        try:
            [override] = parser.parse_overrides([text])
        except HydraException:
            raise InputError(f"{key}: cannot be read as an override; the value is not shown") from None
        if override.is_sweep_override() and not override.is_discrete_sweep():
            continue  # an interval: numbers, no text to check
        values = override.sweep_string_iterator() if override.is_sweep_override() else [override.value()]
        for value in values:
            if value is not None:
                check(key, value)


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
        if not _SWEEP_GONE:
            raise
    else:
        if not _SWEEP_GONE:
            return objective
    # nobody is left to take the result, and the run is closed: the worker ends now, what its
    # indexes made outside it removed (their finalizers run as the frames of the job are freed)
    gc.collect()
    logging.shutdown()
    os._exit(128 + signal.SIGTERM)


def run_task(cfg: DictConfig) -> float | None:
    raise_if_interrupted()  # no next combination after a signal, even one a library swallowed
    set_verbosity(cfg.verbosity)  # Hydra made this job's console afresh
    outlive_the_reader()  # its console handlers too
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
        optuna = str(HydraConfig.get().sweeper.get("_target_", "")).startswith("hydra_plugins.hydra_optuna_sweeper")
        return None if optuna else math.nan
    show(trial, cfg.objective, quiet=cfg.verbosity == "quiet")
    return trial.objective


_WATCHING: list[int] = []  # the sweep process this worker watches, once watched
_SWEEP_GONE: list[int] = []  # that process, once it is gone


def end_with_the_sweep() -> None:
    """In a worker process that the sweep's own process started (joblib's loky workers; not the
    sweep's process, not a Ray worker, whose cluster ends it): end with the sweep, even when it dies
    by kill -9. A thread looks at the worker's parent every `WATCH_EVERY_S` (a process whose parent
    dies is handed to another: its parent pid changes; loky's workers have no sentinel of their
    parent to wait on); then SIGTERM, whose handler marks the run in progress KILLED
    (`stop_on_signals`, installed here), the job ends the worker (`task`), and SIGKILL ends it if it
    is still there `GRACE_S` later (between jobs, or stuck). Idempotent: once per worker."""
    parent = multiprocessing.parent_process()
    main = os.environ.get(SWEEP_PID)
    if _WATCHING or parent is None or main != str(parent.pid) or main == str(os.getpid()):
        return
    _WATCHING.append(parent.pid)
    if threading.current_thread() is threading.main_thread():
        stop_on_signals()
    threading.Thread(target=_end_when_gone, args=(parent.pid,), name="end-with-the-sweep", daemon=True).start()


def _end_when_gone(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_EVERY_S)
    _SWEEP_GONE.append(parent)
    log.warning("the sweep's process (pid %d) is gone: this worker (pid %d) stops", parent, os.getpid())
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE_S)
    os.kill(os.getpid(), signal.SIGKILL)


def show(trial: Trial, objective: str, quiet: bool) -> None:
    """Every run's summary line first (logged, so a sweep's log file has it too); a single run,
    unless `quiet`, then prints its tables."""
    name = " ".join(overrides()) or "default"
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
    print_lines(ui_hint(trial.mlflow_run.experiment_id), console=CONSOLE)


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
        try:
            parent = start_sweep(
                config.experiment,
                measured_overrides(config.hydra.overrides.task),
                config.objective,
                config.resume is True,
            )
        except Exception as error:  # Hydra would only warn, and run every combination outside the sweep
            if bad_input(error) is not None:
                raise
            print(f"error: cannot open the sweep's run at {tracking_uri()} ({one_line(error)})", file=sys.stderr)
            raise SystemExit(EXIT_FAILED) from None
        pass_to_jobs(config, {**job_environment(parent), SWEEP_PID: str(os.getpid())})

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """The leaderboard; then, if combinations failed, one line each and exit code 1."""
        raise_if_interrupted()  # the sweep was stopped, not finished: `stop` closes it
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
        print_lines(ui_hint(summary.experiment_id), console=CONSOLE)
        if summary.failed:
            n = len(summary.results.leaderboard) if summary.results is not None else len(summary.failed)
            print(f"error: {len(summary.failed)} of {n} combinations failed:", file=sys.stderr)
            for combination, error in summary.failed:
                print(f"  {combination}: {error}", file=sys.stderr)
            raise SystemExit(EXIT_FAILED)
