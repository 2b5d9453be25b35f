"""Reading logged runs back: `LoggedRun`, a sweep's children, and the artifacts a trial logged.

What `sweep.compare`, `sweep.check` and `sweep.pool` read: the per-question table, the TREC run
file, the chunks each question got, the golden file a run was scored on. Reading creates nothing:
no store, a store that cannot be reached, a malformed or unknown run id are each one line.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.utils.file_utils import local_file_uri_to_path

from sweep.errors import InputError, one_line
from sweep.formats.runs import Run
from sweep.tracking.store import (
    DEFAULT_EXPERIMENT,
    NOT_SUPERSEDED,
    RUN_ID,
    connect,
    existing_experiment_id,
    search_pages,
    tracking_uri,
)

RUN_FILE = "run.trec"
RETRIEVED_CHUNKS = "tables/retrieved_chunks.json"
MEMBER_HITS = "tables/member_hits.json"  # a hybrid's members' own hits


@dataclass(frozen=True)
class LoggedRun:
    """A run as `sweep.compare` and `sweep.check` need it: who it is and what it was scored on."""

    run_id: str
    name: str
    status: str
    experiment_id: str
    artifact_uri: str
    tags: dict[str, str]
    metrics: dict[str, float]
    params: dict[str, str]

    @property
    def is_sweep(self) -> bool:
        """A sweep's parent run: its children are the evaluations."""
        return self.tags.get("sweep.parent") == "true"

    @property
    def overrides(self) -> str:
        return self.tags.get("sweep.overrides", "")

    @property
    def golden_digest(self) -> str | None:
        return self.tags.get("data.golden_digest")


def as_logged(run: Any) -> LoggedRun:
    """An MLflow `Run` as a `LoggedRun`."""
    return LoggedRun(
        run.info.run_id,
        run.info.run_name or run.data.tags.get("mlflow.runName", ""),
        run.info.status,
        run.info.experiment_id,
        run.info.artifact_uri,
        dict(run.data.tags),
        dict(run.data.metrics),
        dict(run.data.params),
    )


def logged_run(run_id: str) -> LoggedRun:
    """The run `run_id` in the store at `tracking_uri()`. Reading creates nothing: no store, a
    store that cannot be reached, a malformed or unknown id are each one line (InputError)."""
    if not RUN_ID.fullmatch(run_id):
        raise InputError(f"{run_id!r}: not an MLflow run id (32 hexadecimal digits)")
    connect(create=False)
    try:
        return as_logged(mlflow.MlflowClient().get_run(run_id))
    except mlflow.exceptions.MlflowException as error:
        if error.error_code == "RESOURCE_DOES_NOT_EXIST":
            raise InputError(f"no run {run_id} at {tracking_uri()}") from None
        raise InputError(f"run {run_id}: cannot read it from {tracking_uri()} ({one_line(error)})") from None


def sweep_children(parent_id: str, where: str = "") -> list[LoggedRun]:
    """The runs of the sweep `parent_id` (its children; `where`: a further condition), earliest
    first, whatever their status; the tries a resumed sweep replaced (`SUPERSEDED_BY`) left out."""
    parent = logged_run(parent_id)
    conditions = [f"tags.mlflow.parentRunId = '{parent.run_id}'", NOT_SUPERSEDED, *([where] if where else [])]
    return [
        as_logged(run) for run in search_pages(mlflow.MlflowClient(), parent.experiment_id, " and ".join(conditions))
    ]


def latest_sweep(experiment: str = DEFAULT_EXPERIMENT) -> str:
    """The id of the sweep (parent run) started last in `experiment`. Reading creates nothing."""
    runs = mlflow.MlflowClient().search_runs(
        [existing_experiment_id(experiment)],
        filter_string="tags.`sweep.parent` = 'true'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if not runs:
        raise InputError(f"no sweep in experiment {experiment!r} at {tracking_uri()}")
    return runs[0].info.run_id


@contextmanager
def no_progress_bar() -> Iterator[None]:
    """MLflow draws a download bar on stderr for every artifact it reads; a one-line CLI shows none."""
    name = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    before = os.environ.get(name)
    os.environ[name] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def require_artifacts(run: LoggedRun) -> None:
    """One line when a FINISHED `run` (which logged artifacts) has a local artifact folder that is
    gone (mlruns/ moved or deleted), rather than MLflow's error about the first file it misses."""
    local = run.artifact_uri.startswith("file:") or "://" not in run.artifact_uri
    if run.status == "FINISHED" and local and not Path(local_file_uri_to_path(run.artifact_uri)).is_dir():
        raise InputError(
            f"run {run.run_id}: its artifacts are gone ({local_file_uri_to_path(run.artifact_uri)} does not "
            "exist: was mlruns/ moved or deleted?)"
        )


def _listed(run: LoggedRun, folder: str | None = None) -> set[str]:
    require_artifacts(run)
    return {a.path for a in mlflow.MlflowClient().list_artifacts(run.run_id, folder)}


def load_per_query(run: LoggedRun) -> pd.DataFrame:
    """`tables/per_query.json` of `run` (what `log_evaluation` logged), one row per question, in
    the logged column order; undefined values (NaN, logged as null) are NaN again."""
    if "tables/per_query.json" not in _listed(run, "tables"):
        kind = "a sweep's parent run" if run.is_sweep else f"a {run.status} run"
        raise InputError(f"run {run.run_id} ({kind}) has no tables/per_query.json: it holds no evaluation")
    try:
        with no_progress_bar():
            table = mlflow.artifacts.load_dict(f"{run.artifact_uri}/tables/per_query.json")
        return pd.DataFrame(table["data"], columns=table["columns"])
    except (mlflow.exceptions.MlflowException, OSError, KeyError, TypeError, ValueError) as error:
        raise InputError(f"run {run.run_id}: cannot read tables/per_query.json ({one_line(error)})") from None


def golden_source(run: LoggedRun) -> str | None:
    """The golden file `run` was scored on: the source (an absolute path) of its `golden` dataset
    input; None when it has none."""
    inputs = mlflow.MlflowClient().get_run(run.run_id).inputs
    for dataset_input in inputs.dataset_inputs if inputs is not None else ():
        if any(tag.key == "mlflow.data.context" and tag.value == "golden" for tag in dataset_input.tags):
            return getattr(mlflow.data.get_source(dataset_input.dataset), "uri", None)
    return None


def load_run_file(run: LoggedRun) -> Run:
    """`run.trec` of `run` (what `log_results` logged), ordered as trec_eval orders it; an empty
    file (every question abstained) is an empty run."""
    if RUN_FILE not in _listed(run):
        kind = "a sweep's parent run" if run.is_sweep else f"a {run.status} run"
        raise InputError(f"run {run.run_id} ({kind}) has no {RUN_FILE}: it holds no results")
    with no_progress_bar(), tempfile.TemporaryDirectory() as folder:
        try:
            path = Path(mlflow.artifacts.download_artifacts(f"{run.artifact_uri}/{RUN_FILE}", dst_path=folder))
        except (mlflow.exceptions.MlflowException, OSError) as error:
            raise InputError(f"run {run.run_id}: cannot read {RUN_FILE} ({one_line(error)})") from None
        if path.stat().st_size == 0:
            return Run.from_ranked({}, name=run.run_id)
        return Run.read(path)


def load_retrieved_chunks(run: LoggedRun) -> dict[str, list[dict[str, Any]]] | None:
    """`tables/retrieved_chunks.json` of `run` (`log_delivered_chunks`): each question's top chunks,
    best first, as {"doc", "start", "end", "score"}; None when the run did not log it."""
    if RETRIEVED_CHUNKS not in _listed(run, "tables"):
        return None
    try:
        with no_progress_bar():
            return mlflow.artifacts.load_dict(f"{run.artifact_uri}/{RETRIEVED_CHUNKS}")
    except (mlflow.exceptions.MlflowException, OSError, TypeError, ValueError) as error:
        raise InputError(f"run {run.run_id}: cannot read {RETRIEVED_CHUNKS} ({one_line(error)})") from None
