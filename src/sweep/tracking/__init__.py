"""MLflow: everything golden-sweep writes to it and reads from it, under DESIGN.md's names.

A trial (one configuration) is an MLflow run; a sweep is a parent run with a leaderboard. This
package imports no reporting: a sweep's report is made by the command that ran it. Its modules,
each with one job, and everything they offer, re-exported here (`from sweep import tracking`):

- `store`: which store, opening it, experiments, searching runs;
- `lifecycle`: a trial's run, ending it KILLED or FAILED, the runs a dead process left RUNNING;
- `sweeps`: a sweep's parent run, resuming it, its children, closing it with the leaderboard;
- `logger`: params, metrics, tables, results, the golden set and the environment of a trial;
- `digests`: the data digests (what a run was scored on) and which runs they pair;
- `plots`: a trial's PNG plots;
- `reading`: runs and their artifacts read back (`sweep.compare`, `sweep.check`, `sweep.pool`);
- `best`: choosing the best run (`sweep.best`);
- `legacy`: the `_target_` paths of runs logged before the subpackages.

Each name is imported on first use, so that a command imports only the modules it needs: MLflow's
import alone takes about 2 s, and `sweep.best` reads a local store without it.
"""

from importlib import import_module

# module -> the names it offers
_MODULES = {
    "best": ("AMONG", "CHEAPEST_BY", "BestRun", "best_run"),
    "digests": (
        "CORPUS_DIGEST",
        "GOLDEN_DIGEST",
        "check_legacy_size",
        "check_same_golden_set",
        "data_digests",
        "golden_dataset",
        "golden_digest",
        "scored_on",
    ),
    "legacy": ("LEGACY_MODULES", "current_targets", "legacy_targets"),
    "lifecycle": (
        "MAX_RUN_NAME",
        "PARENT_RUN",
        "RunIds",
        "kill_orphans",
        "process_tags",
        "run_name",
        "stopping_as_killed",
        "trial_run",
    ),
    "logger": (
        "PACKAGES",
        "environment_tags",
        "evaluation_metrics",
        "flatten",
        "log_calibration",
        "log_comparison",
        "log_config",
        "log_delivered_chunks",
        "log_evaluation",
        "log_golden_input",
        "log_member_evaluation",
        "log_member_hits",
        "log_results",
        "log_stats",
        "loggable",
        "metric_key",
    ),
    "plots": ("log_plots",),
    "reading": (
        "MEMBER_HITS",
        "RETRIEVED_CHUNKS",
        "RUN_FILE",
        "LoggedRun",
        "build_results",
        "golden_source",
        "latest_sweep",
        "load_per_query",
        "load_retrieved_chunks",
        "load_run_file",
        "logged_run",
        "sweep_children",
    ),
    "store": (
        "CONFIG_DIGEST",
        "DEFAULT_EXPERIMENT",
        "DEFAULT_TRACKING_URI",
        "EXPERIMENT_KIND",
        "NOT_SUPERSEDED",
        "SUPERSEDED_BY",
        "connect",
        "tracking_uri",
        "ui_hint",
        "use_experiment",
    ),
    "sweeps": (
        "REPORT",
        "SweepSummary",
        "config_digest",
        "config_digests",
        "earlier_runs",
        "finish_sweep",
        "job_environment",
        "log_report",
        "resumable_sweep",
        "start_sweep",
        "supersede",
    ),
}
_MODULE_OF = {name: module for module, names in _MODULES.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name in _MODULE_OF:
        return getattr(import_module(f"sweep.tracking.{_MODULE_OF[name]}"), name)
    raise AttributeError(f"module 'sweep.tracking' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
