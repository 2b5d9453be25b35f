"""Reading logged runs back: `LoggedRun`, searching finished runs, a sweep's children, the artifacts a trial logged.

What `sweep.tracking.records.load_record` assembles a record from: the tables, the TREC run file,
the chunks each question got, the golden file a run was scored on (its path, and the copy it
stored: `golden_copy`). Artifacts are read through MLflow's client wherever they are (a local
store's `file:` folders, a server's, a cloud's).
Reading creates nothing: no store, a store that cannot be reached, a malformed or unknown run id
are each one line.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse
from urllib.request import url2pathname

from sweep.errors import InputError, one_line
from sweep.tracking.store import (
    DEFAULT_EXPERIMENT,
    NOT_SUPERSEDED,
    RUN_ID,
    connect,
    existing_experiment_id,
    search_pages,
    tracking_uri,
)

if TYPE_CHECKING:
    import pandas as pd

    from sweep.formats.runs import Run

log = logging.getLogger(__name__)
METRIC_NAME = re.compile(r"[A-Za-z0-9_\-./: ]+")  # what a metric's name may hold (`records.metric_key`)
RUN_FILE = "run.trec"
RETRIEVED_CHUNKS = "tables/retrieved_chunks.json"
MEMBER_HITS = "tables/member_hits.json"  # a hybrid's members' top hits, as a table; before, all of them as a mapping
MEMBER_CANDIDATES = "parts/member_hits.parquet"  # every hit of a hybrid's members, a row each
MEMBER_HITS_COLUMNS = ["qid", "member", "rank", "doc", "score", "start", "end"]
GOLDEN_COPY = "golden"  # the folder of a run's artifacts holding the golden file it was scored on
GOLDEN_CONTEXT = "golden"  # the context of the golden set's dataset input
WORKING_FOLDER = "sweep.cwd"  # the tag of the folder a trial ran in: what its config's relative paths are relative to
LATEST = "latest"  # a sweep given as `latest`: the sweep started last in the experiment (`sweep_id`)


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
    start_time: int = 0  # milliseconds since the epoch, as MLflow keeps it

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
        run.info.start_time or 0,
    )


def logged_run(run_id: str) -> LoggedRun:
    """The run `run_id` in the store at `tracking_uri()`. Reading creates nothing: no store, a
    store that cannot be reached, a malformed or unknown id are each one line (InputError)."""
    import mlflow

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
    import mlflow

    parent = logged_run(parent_id)
    conditions = [f"tags.mlflow.parentRunId = '{parent.run_id}'", NOT_SUPERSEDED, *([where] if where else [])]
    return [
        as_logged(run) for run in search_pages(mlflow.MlflowClient(), parent.experiment_id, " and ".join(conditions))
    ]


def sweep_id(spec: str, experiment: str | None = None) -> str:
    """The run id `spec` names: `LATEST` (the sweep started last in `experiment`, default
    `DEFAULT_EXPERIMENT`: `latest_sweep`), else `spec` itself. What every command that takes a
    sweep's id takes."""
    return latest_sweep(experiment or DEFAULT_EXPERIMENT) if spec == LATEST else spec


def latest_sweep(experiment: str = DEFAULT_EXPERIMENT) -> str:
    """The id of the sweep (parent run) started last in `experiment`. Reading creates nothing."""
    import mlflow

    runs = mlflow.MlflowClient().search_runs(
        [existing_experiment_id(experiment)],
        filter_string="tags.`sweep.parent` = 'true'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if not runs:
        raise InputError(f"no sweep in experiment {experiment!r} at {tracking_uri()}")
    return runs[0].info.run_id


@dataclass(frozen=True)
class RunSearch:
    """The finished runs of an experiment with a finite value of `metric`, less the tries a resumed
    sweep replaced, with each of `tags` (key, value)."""

    experiment_id: str
    metric: str
    maximize: bool = True
    tags: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not METRIC_NAME.fullmatch(self.metric):
            raise InputError(f"--metric {self.metric!r}: not a metric name (letters, digits and _ - . / : space)")

    def filter_string(self) -> str:
        """The search in MLflow's filter syntax (the metric's name is checked; tag values are ours)."""
        conditions = ["attributes.status = 'FINISHED'", f"metrics.`{self.metric}` > -1e300", NOT_SUPERSEDED]
        return " and ".join(conditions + [f"tags.`{key}` = '{value}'" for key, value in self.tags])


def finished_runs(search: RunSearch, best_only: bool) -> list[LoggedRun]:
    """The best run by the search's metric (the earliest on ties), or all of them, earliest first."""
    import mlflow

    if not best_only:
        return [as_logged(r) for r in search_pages(mlflow.MlflowClient(), search.experiment_id, search.filter_string())]
    order = f"metrics.`{search.metric}` {'DESC' if search.maximize else 'ASC'}"
    runs = mlflow.search_runs(
        [search.experiment_id],
        filter_string=search.filter_string(),
        order_by=[order, "attributes.start_time ASC"],
        max_results=1,
        output_format="list",
    )
    return [as_logged(r) for r in runs]


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


def local_artifacts(run: LoggedRun) -> Path | None:
    """The folder of `run`'s artifacts where they are files on this machine (a `file:` URI, or a
    path, as MLflow gives them for a local store); None where MLflow fetches them from elsewhere
    (a server's `mlflow-artifacts:`, a cloud's). Only to say so when that folder is gone: MLflow
    reads them either way."""
    parsed = urlparse(run.artifact_uri)
    if parsed.scheme == "file":
        return Path(url2pathname(parsed.path))
    return Path(run.artifact_uri) if parsed.scheme == "" else None


def require_artifacts(run: LoggedRun) -> None:
    """One line when a FINISHED `run` (which logged artifacts) has a local artifact folder that is
    gone (mlruns/ moved or deleted), rather than MLflow's error about the first file it misses."""
    folder = local_artifacts(run)
    if run.status == "FINISHED" and folder is not None and not folder.is_dir():
        raise InputError(
            f"run {run.run_id}: its artifacts are gone ({folder} does not exist: was mlruns/ moved or deleted?)"
        )


def _listed(run: LoggedRun, folder: str | None = None) -> set[str]:
    """The paths of `run`'s artifacts in `folder` (its top level for None), as MLflow lists them:
    by the run's artifact URI, which `run` holds (by its id, MLflow reads the whole run twice)."""
    import mlflow

    require_artifacts(run)
    uri = f"{run.artifact_uri}/{folder}" if folder else run.artifact_uri
    return {posixpath.join(folder or "", posixpath.basename(a.path)) for a in mlflow.artifacts.list_artifacts(uri)}


def _unreadable(run: LoggedRun, path: str, error: BaseException) -> InputError:
    return InputError(f"run {run.run_id}: cannot read {path} ({one_line(error)})")


@contextmanager
def artifact_file(run: LoggedRun, path: str) -> Iterator[Path]:
    """A file on this machine holding `run`'s artifact `path`: MLflow's download of it (a copy,
    for a local store) into a temporary folder, removed afterwards. An artifact MLflow cannot
    fetch is one line."""
    import mlflow

    with no_progress_bar(), tempfile.TemporaryDirectory() as folder:
        try:
            downloaded = mlflow.artifacts.download_artifacts(f"{run.artifact_uri}/{path}", dst_path=folder)
        except (mlflow.exceptions.MlflowException, OSError) as error:
            raise _unreadable(run, path, error) from None
        yield Path(downloaded)


def artifact_text(run: LoggedRun, path: str) -> str:
    """The text of `run`'s artifact `path`; one that cannot be read is one line."""
    with artifact_file(run, path) as file:
        try:
            return file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise _unreadable(run, path, error) from None


def _artifact_json(run: LoggedRun, path: str) -> Any:
    try:
        return json.loads(artifact_text(run, path))
    except ValueError as error:
        raise _unreadable(run, path, error) from None


def load_per_query(run: LoggedRun) -> pd.DataFrame:
    """`tables/per_query.json` of `run` (what `save_record` logged), one row per question, in
    the logged column order; undefined values (NaN, logged as null) are NaN again."""
    path = "tables/per_query.json"
    table = load_table(run, path)
    if table is None:
        kind = "a sweep's parent run" if run.is_sweep else f"a {run.status} run"
        raise InputError(f"run {run.run_id} ({kind}) has no {path}: it holds no evaluation")
    return table


def load_table(run: LoggedRun, path: str) -> pd.DataFrame | None:
    """The table `path` (`tables/<name>.json`, as `mlflow.log_table` writes it) of `run`; None when
    the run has none."""
    import pandas as pd

    if path not in _listed(run, str(Path(path).parent)):
        return None
    table = _artifact_json(run, path)
    try:
        return pd.DataFrame(table["data"], columns=table["columns"])
    except (KeyError, TypeError, ValueError) as error:
        raise _unreadable(run, path, error) from None


def golden_input(run_id: str, context: str = GOLDEN_CONTEXT) -> Any:
    """The dataset input of the run `run_id` logged with `context` (MLflow's `DatasetInput`: the
    golden set a run was scored on, `golden`, or the one it was edited from, `golden.parent`);
    None when it has none."""
    import mlflow
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    inputs = mlflow.MlflowClient().get_run(run_id).inputs
    for dataset_input in inputs.dataset_inputs if inputs is not None else ():
        if any(tag.key == MLFLOW_DATASET_CONTEXT and tag.value == context for tag in dataset_input.tags):
            return dataset_input
    return None


def golden_source(run: LoggedRun) -> str | None:
    """The golden file `run` was scored on: the source (an absolute path) of its `golden` dataset
    input; None when it has none."""
    import mlflow

    dataset_input = golden_input(run.run_id)
    return None if dataset_input is None else getattr(mlflow.data.get_source(dataset_input.dataset), "uri", None)


@contextmanager
def golden_copy(run: LoggedRun) -> Iterator[Path]:
    """The golden file `run` was scored on, as the run stored it (`golden/<file name>`; a BEIR or
    chunking-benchmark folder as `golden/<folder name>/` with the files its questions were read
    from), downloaded into a temporary folder and removed afterwards. A run that stored none
    (logged before runs stored it, or scored on a set not read from a file) is one line."""
    stored = sorted(_listed(run, GOLDEN_COPY))
    if len(stored) != 1:
        kind = "a sweep's parent run" if run.is_sweep else f"a {run.status} run"
        raise InputError(
            f"run {run.run_id} ({kind}) stored no golden file ({GOLDEN_COPY}/): it was logged before runs stored "
            "the golden set they were scored on, or it holds no evaluation"
        )
    with artifact_file(run, stored[0]) as path:
        yield path


def load_run_file(run: LoggedRun) -> Run:
    """`run.trec` of `run` (what `save_record` logged), ordered as trec_eval orders it; an empty
    file (every question abstained) is an empty run."""
    from sweep.formats.runs import Run

    if RUN_FILE not in _listed(run):
        kind = "a sweep's parent run" if run.is_sweep else f"a {run.status} run"
        raise InputError(f"run {run.run_id} ({kind}) has no {RUN_FILE}: it holds no results")
    with artifact_file(run, RUN_FILE) as path:
        try:
            empty = path.stat().st_size == 0
        except OSError as error:
            raise _unreadable(run, RUN_FILE, error) from None
        return Run.from_ranked({}, name=run.run_id) if empty else Run.read(path)


def load_retrieved_chunks(run: LoggedRun) -> dict[str, list[dict[str, Any]]] | None:
    """`tables/retrieved_chunks.json` of `run`: each question's top chunks, best first, as
    {"doc", "start", "end", "score"}; None when the run did not log it."""
    return _optional_json(run, RETRIEVED_CHUNKS)


def load_member_hits(run: LoggedRun) -> dict[str, dict[str, list[list[Any]]]] | None:
    """Every candidate each part of `run`'s retriever gave, best first, as
    `{qid: {part: [[doc, start, end, score], ...]}}`: from `parts/member_hits.parquet` (a row
    each), or from `tables/member_hits.json` where a run logged that mapping itself (before the
    table); None when the run logged neither."""
    import pandas as pd

    if MEMBER_CANDIDATES not in _listed(run, str(Path(MEMBER_CANDIDATES).parent)):
        return _optional_json(run, MEMBER_HITS)
    with artifact_file(run, MEMBER_CANDIDATES) as path:
        try:
            table = pd.read_parquet(path, columns=MEMBER_HITS_COLUMNS).sort_values("rank", kind="stable")
        except (OSError, ValueError) as error:
            raise _unreadable(run, MEMBER_CANDIDATES, error) from None
    hits: dict[str, dict[str, list[list[Any]]]] = {}
    columns = [table[name].tolist() for name in ("qid", "member", "doc", "start", "end", "score")]
    for qid, member, *hit in zip(*columns):
        hits.setdefault(qid, {}).setdefault(member, []).append(hit)
    return hits


def _optional_json(run: LoggedRun, path: str) -> Any:
    if path not in _listed(run, str(Path(path).parent)):
        return None
    return _artifact_json(run, path)
