"""A sweep as a parent run: opening it (or resuming it), its children, and closing it with a leaderboard.

The parent run is named by what varies in the sweep (`sweep weight=0.3,0.5,0.7`); the overrides
every combination shares are its `SHARED_OVERRIDES` tag and in its description (MLflow's note).

A sweep's combinations may run in other processes or on other machines (Hydra's joblib and Ray
launchers): `job_environment` is what each needs to log as a child of the sweep's parent run.
Every trial is tagged with its config digest (`config_digest`), so that a resumed sweep
(`start_sweep(resume=True)`) finds what already finished with one search per digest
(`earlier_runs`). `finish_sweep` closes the parent run with what its children measured and returns
it; the report made from that is the command's (`sweep.experiment.cli`), logged with `log_report`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
from mlflow.utils.mlflow_tags import MLFLOW_EXPERIMENT_PRIMARY_METRIC_GREATER_IS_BETTER as PRIMARY_METRIC_HIGHER
from mlflow.utils.mlflow_tags import MLFLOW_EXPERIMENT_PRIMARY_METRIC_NAME as PRIMARY_METRIC
from mlflow.utils.mlflow_tags import MLFLOW_RUN_NOTE

from sweep.errors import InputError, Interrupted
from sweep.evaluation.leaderboard import SweepResults
from sweep.evaluation.record import TrialRecord
from sweep.evaluation.registry import HEADLINE
from sweep.tracking.latencies import timed_records
from sweep.tracking.legacy import legacy_targets
from sweep.tracking.lifecycle import PARENT_RUN, kill_orphans, process_tags, run_name
from sweep.tracking.reading import LoggedRun, sweep_children
from sweep.tracking.records import log_tables, loggable, metric_key
from sweep.tracking.store import CONFIG_DIGEST, SUPERSEDED_BY, connect, search_pages, tracking_uri, use_experiment

log = logging.getLogger(__name__)
REPORT = "report.html"  # a sweep's self-contained report: its parent run's artifact
SHARED_OVERRIDES = "sweep.shared_overrides"  # a sweep's run's tag: the overrides all its runs have


def start_sweep(
    experiment: str,
    overrides: Sequence[str],
    objective: str,
    resume: bool = False,
    shared: Sequence[str] = (),
    varying: str = "",
) -> str:
    """Open the sweep's parent run, named `sweep <varying>` (what varies in it, default its
    `overrides`), with the `shared` overrides (what its runs' names leave out) as a tag and in its
    description; the trials launched from this process become its children. The experiment's
    charts open on the `objective`. Runs an earlier, dead process left RUNNING in the experiment
    are marked KILLED first. `resume`: reopen the sweep `resumable_sweep` finds instead, if there is one."""
    connect()
    experiment_id = use_experiment(experiment)
    kill_orphans(experiment_id)
    client = mlflow.MlflowClient()
    for key, value in {PRIMARY_METRIC: metric_key(objective), PRIMARY_METRIC_HIGHER: "true"}.items():
        client.set_experiment_tag(experiment_id, key, value)
    label = " ".join(overrides)
    earlier = resumable_sweep(experiment_id, label) if resume else None
    if earlier is None:
        tags = {"sweep.parent": "true", "sweep.overrides": label, "sweep.objective": objective}
        tags |= {SHARED_OVERRIDES: " ".join(shared), MLFLOW_RUN_NOTE: description(varying or label, shared, objective)}
        parent = mlflow.start_run(run_name=run_name(f"sweep {varying or label}"), tags=tags | process_tags())
    else:
        resumed = int(earlier.data.tags.get("sweep.resumed", "0")) + 1
        parent = mlflow.start_run(run_id=earlier.info.run_id, tags=process_tags() | {"sweep.resumed": str(resumed)})
        if "error" in earlier.data.tags:  # why it stopped last time; it runs again
            client.delete_tag(earlier.info.run_id, "error")
        log.info("resuming the sweep %s (resumed %d time(s))", earlier.info.run_id, resumed)
    os.environ[PARENT_RUN] = parent.info.run_id
    return parent.info.run_id


def description(varying: str, shared: Sequence[str], objective: str) -> str:
    """A sweep's run's description (Markdown): what it varies, by which metric, and what every
    one of its runs has, which their names leave out."""
    lines = [f"Sweep `{varying}`, by `{objective}`; each run is named by what varies."]
    if shared:
        lines.append(f"Every run of it has: `{' '.join(shared)}`.")
    return "\n\n".join(lines)


def resumable_sweep(experiment_id: str, overrides: str) -> Any | None:
    """The sweep to resume: the latest parent run in the experiment with the same `overrides`,
    if it did not finish (KILLED, FAILED, or RUNNING when its process died: `kill_orphans` has
    marked it KILLED); None when that sweep FINISHED or there is none. A sweep whose process still
    runs (or runs on another host) cannot be resumed: one line."""
    # overrides are compared here, not in the filter: they may hold quotes that a filter string cannot
    for run in search_pages(mlflow.MlflowClient(), experiment_id, "tags.`sweep.parent` = 'true'", newest_first=True):
        if run.data.tags.get("sweep.overrides") != overrides:
            continue
        if run.info.status == "FINISHED":
            return None
        if run.info.status == "RUNNING":
            pid, host = run.data.tags.get("sweep.pid"), run.data.tags.get("sweep.host")
            raise InputError(
                f"resume=true: the sweep {run.info.run_id} with these overrides is still running "
                f"(process {pid} on {host}); wait for it or stop it first"
            )
        return run
    return None


def job_environment(parent_id: str) -> dict[str, str]:
    """What a combination of the sweep `parent_id` needs in its own process, wherever that runs
    (Ray's workers inherit nothing from this one): the parent's id, and the store, a local SQLite
    path made absolute so that a worker in another folder writes to the same file."""
    uri = tracking_uri()
    if uri.startswith("sqlite:///"):
        uri = f"sqlite:///{Path(uri.removeprefix('sqlite:///')).absolute()}"
    return {PARENT_RUN: parent_id, "MLFLOW_TRACKING_URI": uri}


def config_digest(resolved: Mapping[str, Any]) -> str:
    """sha256 of a resolved config: which combination a trial measured, however the command line said it."""
    return hashlib.sha256(json.dumps(resolved, sort_keys=True, default=str).encode()).hexdigest()


def config_digests(resolved: Mapping[str, Any]) -> list[str]:
    """`config_digest` of `resolved` (what a trial is tagged with), then, when it differs, that of
    the same config with its `_target_`s as runs logged before the subpackages wrote them
    (`sweep.tracking.legacy`): the tag an old run of the same combination carries."""
    digests = [config_digest(resolved), config_digest(legacy_targets(resolved))]
    return list(dict.fromkeys(digests))


def earlier_runs(digests: Sequence[str]) -> list[LoggedRun]:
    """The runs of the combination tagged with any of `digests` (`config_digests`) among the
    children of the sweep being run (`sweep_children`), the runs of each digest earliest first,
    those of the later digests (older runs: `config_digests`' legacy one) first; none outside a sweep."""
    parent = os.environ.get(PARENT_RUN)
    if parent is None:
        return []
    found: dict[str, LoggedRun] = {}
    for digest in reversed(digests):
        found |= {run.run_id: run for run in sweep_children(parent, f"tags.`{CONFIG_DIGEST}` = '{digest}'")}
    return list(found.values())


def supersede(runs: Sequence[LoggedRun], run_id: str) -> None:
    """Mark `runs` (earlier tries at a combination) as replaced by the run `run_id`: the
    leaderboard leaves them out; they stay in the experiment as they were."""
    client = mlflow.MlflowClient()
    for run in runs:
        client.set_tag(run.run_id, SUPERSEDED_BY, run_id)


@dataclass(frozen=True)
class SweepSummary:
    """What `finish_sweep` read and logged: the command layer prints it and makes the report of it."""

    experiment_id: str
    parent_id: str  # the sweep's parent run: what `sweep.best --sweep`, `sweep.pool --sweep` and `sweep.compare` take
    overrides: str  # the sweep's command line (its `sweep.overrides` tag)
    children: list[LoggedRun]  # its runs, earliest first, the tries a resumed sweep replaced left out
    results: SweepResults | None  # the leaderboard and what a report shows; None without children
    failed: list[tuple[str, str]]  # (overrides, error) of each combination that did not finish


def finish_sweep(
    leaderboard: Callable[[str, Sequence[TrialRecord]], SweepResults], interrupted: Interrupted | None = None
) -> SweepSummary | None:
    """Close the sweep's parent run, FINISHED (KILLED when `interrupted`), with the leaderboard
    that `leaderboard(objective, records)` (`sweep.evaluation.leaderboard.build`) makes of its
    children's records: `tables/leaderboard.json` (best `sweep.objective` first, with intervals,
    p-values against the leader and the tie mark) and `stats/mde_<objective>`.
    Children a dead process left RUNNING are marked KILLED first; children a resumed sweep replaced
    (`SUPERSEDED_BY`) are left out. What it read; None when no sweep is open."""
    parent_id = os.environ.pop(PARENT_RUN, None)
    if parent_id is None:
        return None
    client = mlflow.MlflowClient()
    parent = client.get_run(parent_id)
    experiment_id, objective = parent.info.experiment_id, parent.data.tags.get("sweep.objective", HEADLINE)
    of_this_sweep = f"tags.mlflow.parentRunId = '{parent_id}'"
    running = f"{of_this_sweep} and attributes.status = 'RUNNING'"
    kill_orphans(experiment_id, client.search_runs([experiment_id], filter_string=running))
    children = sweep_children(parent_id)
    results = None
    if children:
        results = leaderboard(objective, timed_records(children))
        log_tables({"tables/leaderboard.json": results.leaderboard.reset_index()}, run_id=parent_id)
        mlflow.log_metrics(loggable({f"stats/mde_{objective}": results.mde}))
    failed = [(c.overrides, c.tags.get("error") or c.status) for c in children if c.status != "FINISHED"]
    if interrupted is None:
        mlflow.end_run()
    else:
        mlflow.set_tag("error", str(interrupted))
        mlflow.end_run("KILLED")
    overrides = parent.data.tags.get("sweep.overrides", "")
    return SweepSummary(experiment_id, parent_id, overrides, children, results, failed)


def log_report(parent_id: str, html: str) -> str:
    """A sweep's self-contained report as the artifact `REPORT` of its parent run (open or closed); its path."""
    mlflow.MlflowClient().log_text(parent_id, html, REPORT)
    return REPORT
