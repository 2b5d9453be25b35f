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
"""

from sweep.tracking.best import AMONG, CHEAPEST_BY, BestRun, best_run
from sweep.tracking.digests import (
    CORPUS_DIGEST,
    GOLDEN_DIGEST,
    check_legacy_size,
    check_same_golden_set,
    data_digests,
    golden_dataset,
    golden_digest,
    scored_on,
)
from sweep.tracking.legacy import LEGACY_MODULES, current_targets, legacy_targets
from sweep.tracking.lifecycle import (
    MAX_RUN_NAME,
    PARENT_RUN,
    RunIds,
    kill_orphans,
    process_tags,
    run_name,
    stopping_as_killed,
    trial_run,
)
from sweep.tracking.logger import (
    PACKAGES,
    environment_tags,
    evaluation_metrics,
    flatten,
    log_calibration,
    log_comparison,
    log_config,
    log_delivered_chunks,
    log_evaluation,
    log_golden_input,
    log_member_evaluation,
    log_member_hits,
    log_results,
    log_stats,
    loggable,
    metric_key,
)
from sweep.tracking.plots import log_plots
from sweep.tracking.reading import (
    MEMBER_HITS,
    RETRIEVED_CHUNKS,
    RUN_FILE,
    LoggedRun,
    golden_source,
    latest_sweep,
    load_per_query,
    load_retrieved_chunks,
    load_run_file,
    logged_run,
    sweep_children,
)
from sweep.tracking.store import (
    CONFIG_DIGEST,
    DEFAULT_EXPERIMENT,
    DEFAULT_TRACKING_URI,
    EXPERIMENT_KIND,
    NOT_SUPERSEDED,
    SUPERSEDED_BY,
    connect,
    tracking_uri,
    ui_hint,
    use_experiment,
)
from sweep.tracking.sweeps import (
    REPORT,
    SweepSummary,
    build_results,
    config_digest,
    config_digests,
    earlier_runs,
    finish_sweep,
    job_environment,
    log_report,
    resumable_sweep,
    start_sweep,
    supersede,
)

__all__ = [
    "AMONG",
    "CHEAPEST_BY",
    "CONFIG_DIGEST",
    "CORPUS_DIGEST",
    "DEFAULT_EXPERIMENT",
    "DEFAULT_TRACKING_URI",
    "EXPERIMENT_KIND",
    "GOLDEN_DIGEST",
    "LEGACY_MODULES",
    "MAX_RUN_NAME",
    "NOT_SUPERSEDED",
    "PACKAGES",
    "PARENT_RUN",
    "MEMBER_HITS",
    "REPORT",
    "RETRIEVED_CHUNKS",
    "RUN_FILE",
    "SUPERSEDED_BY",
    "BestRun",
    "LoggedRun",
    "RunIds",
    "SweepSummary",
    "best_run",
    "build_results",
    "check_legacy_size",
    "check_same_golden_set",
    "config_digest",
    "config_digests",
    "connect",
    "current_targets",
    "data_digests",
    "earlier_runs",
    "environment_tags",
    "evaluation_metrics",
    "finish_sweep",
    "flatten",
    "golden_dataset",
    "golden_digest",
    "golden_source",
    "job_environment",
    "kill_orphans",
    "latest_sweep",
    "legacy_targets",
    "load_per_query",
    "load_retrieved_chunks",
    "load_run_file",
    "log_calibration",
    "log_comparison",
    "log_config",
    "log_delivered_chunks",
    "log_evaluation",
    "log_golden_input",
    "log_member_evaluation",
    "log_member_hits",
    "log_plots",
    "log_report",
    "log_results",
    "log_stats",
    "loggable",
    "logged_run",
    "metric_key",
    "process_tags",
    "resumable_sweep",
    "run_name",
    "scored_on",
    "start_sweep",
    "stopping_as_killed",
    "supersede",
    "sweep_children",
    "trial_run",
    "tracking_uri",
    "ui_hint",
    "use_experiment",
]
