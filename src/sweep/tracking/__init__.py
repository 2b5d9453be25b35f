"""MLflow: everything golden-sweep writes to it and reads from it, under DESIGN.md's names.

A trial (one configuration) is an MLflow run: params are the resolved config flattened to dotted
keys plus Hydra's chosen option per group (`index=hnsw`); metrics are headline means, per type
(`type/<type>/<metric>`, `type/<type>/n`), abstention and costs; tables via `mlflow.log_table`;
the golden set as a dataset input with its digest; tags for data digests, git commit and package
versions. A sweep is a parent run with a leaderboard. `best_run` finds a winner again. MLflow
metric names may not contain `@`; ours never do.

A sweep's combinations may run in other processes or on other machines (Hydra's joblib and Ray
launchers): `job_environment` is what each needs to log as a child of the sweep's parent run.
Every trial is tagged with its config digest (`config_digest`), so that a resumed sweep
(`start_sweep(resume=True)`) finds what already finished with one search (`earlier_runs`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import socket
import sqlite3
import subprocess
import tempfile
import time
import urllib.request
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
import yaml

from sweep.errors import InputError, Interrupted, interruption, one_line, raise_if_interrupted
from sweep.evaluation import Evaluation
from sweep.evaluation.abstention import Calibration
from sweep.evaluation.leaderboard import ConfigRun, SweepResults, build
from sweep.evaluation.scoring import HEADLINE
from sweep.formats.corpus import Corpus
from sweep.formats.files import exclusive_lock
from sweep.formats.golden import GoldenSet, doc_grades, evidence_spans
from sweep.formats.runs import Run
from sweep.reporting.html import render as render_report

log = logging.getLogger(__name__)
DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
DEFAULT_EXPERIMENT = "golden-sweep"
REPORT = "report.html"  # a sweep's self-contained report: its parent run's artifact
PARENT_RUN = "SWEEP_PARENT_RUN_ID"  # set by the sweep's parent run for the trials it launches
CONFIG_DIGEST = "sweep.config_digest"  # a trial's tag: which combination it measured (`config_digest`)
SUPERSEDED_BY = "sweep.superseded_by"  # an earlier try at a combination, replaced by this run on resume
NOT_SUPERSEDED = f"tags.`{SUPERSEDED_BY}` IS NULL"  # a search condition: what a resumed sweep did not replace
MAX_RUN_NAME = 250  # MLflow's runs.name column: PostgreSQL and MySQL refuse a longer name, SQLite does not
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}  # else 3.17's UI opens GenAI mode
PACKAGES = (
    "golden-sweep",
    "mlflow",
    "hydra-core",
    "faiss-cpu",
    "sentence-transformers",
    "torch",
    "bm25s",
    "scikit-learn",
)
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-./: ]")
_METRIC_NAME = re.compile(r"[A-Za-z0-9_\-./: ]+")
_RUN_ID = re.compile(r"[0-9a-f]{32}")
_OPENED: set[str] = set()  # SQLite stores this process has checked and opened


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI


def metric_key(name: str) -> str:
    """A name MLflow accepts: letters, digits and `_ - . / : space`."""
    return _UNSAFE.sub("_", name.replace("@", "_at_"))


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """{"index": {"M": 32}} -> {"index.M": "32"}; lists become their string form."""
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat |= flatten(value, f"{name}.")
        else:
            flat[name] = str(value)
    return flat


def connect(uri: str | None = None, create: bool = True) -> None:
    """Point MLflow at `uri` (default: `tracking_uri()`) and open its store now: a server that
    does not answer, or a SQLite file that cannot be created, opened or written, is one line
    within seconds, not minutes of MLflow's retries later. `create=False`: a SQLite store that
    does not exist yet is an error rather than a new file."""
    uri = uri or tracking_uri()
    if uri.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=10) as response:
                response.read()
        except OSError as error:
            reason = getattr(error, "reason", error)
            raise InputError(
                f"cannot reach the MLflow tracking server at {uri} ({reason}); start it, or unset "
                "MLFLOW_TRACKING_URI to log to sqlite:///mlflow.db here"
            ) from None
    elif uri.startswith("sqlite:") and uri not in _OPENED:
        _open_sqlite_store(uri, create)
        _OPENED.add(uri)
    mlflow.set_tracking_uri(uri)


def _open_sqlite_store(uri: str, create: bool) -> None:
    """Check the file, then let MLflow open (and, for a new file, create) the store while holding
    a lock on its folder, so that two sweeps starting at once on a new store do not both create
    its tables."""
    path = Path(uri.removeprefix("sqlite:///")).absolute()
    if path.is_dir():
        raise InputError(f"{uri}: {path} is a folder, not an SQLite file")
    if path.exists():
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as database:
                database.execute("PRAGMA schema_version").fetchone()  # reads the header: cheap at any size
        except sqlite3.Error as error:
            raise InputError(f"{uri}: not a usable SQLite database ({error})") from None
        if not os.access(path, os.W_OK):
            raise InputError(f"{uri}: the store is read-only")
    elif not create:
        raise InputError(f"{uri}: no MLflow store here yet (nothing has been logged to it)")
    folder = next(p for p in (path.parent, *path.parent.parents) if p.exists())
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{uri}: cannot create the store: {folder} is not a writable folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"{uri}: cannot create the store's folder ({error.strerror})") from None
    with exclusive_lock(path.parent):
        try:  # sqlite3 fails at once where MLflow would retry for minutes
            sqlite3.connect(path, timeout=30).close()
        except sqlite3.Error as error:
            raise InputError(f"{uri}: cannot create the store ({error})") from None
        try:
            mlflow.MlflowClient(uri).search_experiments(max_results=1)  # opens the store; creates its tables if new
        except Exception as error:
            raise InputError(f"{uri}: cannot open the MLflow store ({one_line(error)})") from None


def use_experiment(name: str) -> str:
    """Create or reuse the experiment (artifacts under ./mlruns for a local SQLite store); its id."""
    experiment = mlflow.get_experiment_by_name(name)
    if experiment is None:
        artifacts = None
        if mlflow.get_tracking_uri().startswith("sqlite:"):
            artifacts = (Path.cwd() / "mlruns").as_uri()
        try:
            experiment_id = mlflow.create_experiment(name, artifact_location=artifacts, tags=EXPERIMENT_KIND)
        except mlflow.exceptions.MlflowException:  # another sweep created it a moment ago
            experiment = mlflow.get_experiment_by_name(name)
            if experiment is None:
                raise
            experiment_id = experiment.experiment_id
    else:
        experiment_id = experiment.experiment_id
        for key, value in EXPERIMENT_KIND.items():
            mlflow.MlflowClient().set_experiment_tag(experiment_id, key, value)
    mlflow.set_experiment(experiment_id=experiment_id)
    return experiment_id


@dataclass(frozen=True)
class RunIds:
    run_id: str
    experiment_id: str


@contextmanager
def trial_run(experiment: str, name: str, tags: Mapping[str, str] | None = None) -> Iterator[RunIds]:
    """One trial's MLflow run, tagged `tags` from its start, a child of the sweep's parent run
    when there is one. An error inside marks it FAILED with an `error` tag saying why (one line);
    a signal marks it KILLED; either goes on up."""
    parent = os.environ.get(PARENT_RUN)
    connect()
    experiment_id = use_experiment(experiment)
    if parent is None:  # a sweep's parent run did this for its children
        kill_orphans(experiment_id)
    # the process tags come with the run itself: a kill -9 a moment later still leaves them
    with mlflow.start_run(
        run_name=run_name(name), parent_run_id=parent, nested=parent is not None, tags=process_tags() | dict(tags or {})
    ) as active:
        with stopping_as_killed():
            yield RunIds(active.info.run_id, active.info.experiment_id)


def run_name(words: str) -> str:
    """`words` as a run name any store takes: at most `MAX_RUN_NAME` characters, an ellipsis where
    it was cut (the `sweep.overrides` tag keeps all of them)."""
    return words if len(words) <= MAX_RUN_NAME else words[: MAX_RUN_NAME - 1] + "…"


@contextmanager
def stopping_as_killed() -> Iterator[None]:
    """Inside the active run: a signal ends it KILLED, an error FAILED (when the run's context
    exits), each with an `error` tag that says why in one line."""
    try:
        yield
        raise_if_interrupted()  # a signal whose raise a library swallowed: this run did not finish
    except BaseException as error:
        signal = interruption(error)
        if signal is None:
            if isinstance(error, Exception):
                mlflow.set_tag("error", one_line(error))
            raise
        try:
            mlflow.set_tag("error", str(signal))
            mlflow.end_run("KILLED")
        except Exception:  # the signal cut into MLflow's own write: the next sweep marks the run KILLED
            log.warning("could not mark the interrupted run KILLED; the next run on this store will")
        if isinstance(error, (Interrupted, KeyboardInterrupt)):
            raise
        raise signal from error  # a library's error about the signal it was handling is the signal


def process_tags() -> dict[str, str]:
    """Who runs this run: a later sweep can tell that its process died and mark it KILLED."""
    return {
        "sweep.host": socket.gethostname(),
        "sweep.pid": str(os.getpid()),
        "sweep.process_start": _started(os.getpid()),
    }


def _started(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _is_alive(tags: Mapping[str, str]) -> bool:
    """Whether the process that started a run (by its tags) still runs; True when unknown (another
    host, or a run logged by something else)."""
    if tags.get("sweep.host") != socket.gethostname() or not tags.get("sweep.pid", "").isdigit():
        return True
    pid = int(tags["sweep.pid"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: alive
    return _started(pid) == tags.get("sweep.process_start", "")


def kill_orphans(experiment_id: str, runs: Sequence[Any] | None = None) -> int:
    """Runs left RUNNING by a process that died (a crash in native code, kill -9): marked KILLED
    with an `error` tag saying so. `runs`: only these (default: every RUNNING run of the
    experiment). How many were marked."""
    client = mlflow.MlflowClient()
    if runs is None:
        runs = client.search_runs([experiment_id], filter_string="attributes.status = 'RUNNING'", max_results=1000)
    orphans = [r for r in runs if r.info.status == "RUNNING" and not _is_alive(r.data.tags)]
    for run in orphans:
        pid, host = run.data.tags.get("sweep.pid"), run.data.tags.get("sweep.host")
        client.set_tag(run.info.run_id, "error", f"its process ({pid} on {host}) ended while the run was RUNNING")
        client.set_terminated(run.info.run_id, "KILLED")
    return len(orphans)


def log_config(resolved: Mapping[str, Any], overrides: Sequence[str], choices: Mapping[str, str]) -> None:
    """Params: the resolved config flattened, and each config group's chosen option under the
    group's name (`index=hnsw`), so the UI can filter and plot by it. Artifacts: the resolved
    config, the overrides and choices that reproduce it. Tags: environment, overrides."""
    mlflow.log_params(flatten(resolved) | dict(choices))
    mlflow.log_dict(dict(resolved), "config/resolved.yaml")
    mlflow.log_dict({"overrides": list(overrides), "choices": dict(choices)}, "config/overrides.yaml")
    mlflow.set_tags(environment_tags() | {"sweep.overrides": " ".join(overrides) or "default"})


def start_sweep(experiment: str, overrides: Sequence[str], objective: str, resume: bool = False) -> str:
    """Open the sweep's parent run; the trials launched from this process become its children.
    Runs an earlier, dead process left RUNNING in the experiment are marked KILLED first.
    `resume`: reopen the sweep `resumable_sweep` finds instead, if there is one."""
    connect()
    experiment_id = use_experiment(experiment)
    kill_orphans(experiment_id)
    label = " ".join(overrides)
    earlier = resumable_sweep(experiment_id, label) if resume else None
    if earlier is None:
        tags = {"sweep.parent": "true", "sweep.overrides": label, "sweep.objective": objective}
        parent = mlflow.start_run(run_name=run_name(f"sweep {label}"), tags=tags | process_tags())
    else:
        resumed = int(earlier.data.tags.get("sweep.resumed", "0")) + 1
        parent = mlflow.start_run(run_id=earlier.info.run_id, tags=process_tags() | {"sweep.resumed": str(resumed)})
        if "error" in earlier.data.tags:  # why it stopped last time; it runs again
            mlflow.MlflowClient().delete_tag(earlier.info.run_id, "error")
        log.info("resuming the sweep %s (resumed %d time(s))", earlier.info.run_id, resumed)
    os.environ[PARENT_RUN] = parent.info.run_id
    return parent.info.run_id


def resumable_sweep(experiment_id: str, overrides: str) -> Any | None:
    """The sweep to resume: the latest parent run in the experiment with the same `overrides`,
    if it did not finish (KILLED, FAILED, or RUNNING when its process died: `kill_orphans` has
    marked it KILLED); None when that sweep FINISHED or there is none. A sweep whose process still
    runs (or runs on another host) cannot be resumed: one line."""
    # overrides are compared here, not in the filter: they may hold quotes that a filter string cannot
    for run in _search_pages(mlflow.MlflowClient(), experiment_id, "tags.`sweep.parent` = 'true'", newest_first=True):
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


def earlier_runs(digest: str) -> list[LoggedRun]:
    """The runs of the combination `digest` (`config_digest`) among the children of the sweep
    being run (`sweep_children`), earliest first; none outside a sweep."""
    parent = os.environ.get(PARENT_RUN)
    return sweep_children(parent, f"tags.`{CONFIG_DIGEST}` = '{digest}'") if parent is not None else []


def supersede(runs: Sequence[LoggedRun], run_id: str) -> None:
    """Mark `runs` (earlier tries at a combination) as replaced by the run `run_id`: the
    leaderboard leaves them out; they stay in the experiment as they were."""
    client = mlflow.MlflowClient()
    for run in runs:
        client.set_tag(run.run_id, SUPERSEDED_BY, run_id)


@dataclass(frozen=True)
class SweepSummary:
    experiment_id: str
    parent_id: str  # the sweep's parent run: what `sweep.best --sweep`, `sweep.pool --sweep` and `sweep.compare` take
    results: SweepResults | None  # the leaderboard and the report's contents; None without children
    report: str | None  # report.html (self-contained); None without children
    failed: list[tuple[str, str]]  # (overrides, error) of each combination that did not finish


def finish_sweep(interrupted: Interrupted | None = None) -> SweepSummary | None:
    """Close the sweep's parent run, FINISHED (KILLED when `interrupted`), with what its children
    measured (`sweep.evaluation.leaderboard`): `tables/leaderboard.json` (best `sweep.objective` first, with
    intervals, p-values against the leader and the tie mark), `stats/mde_<objective>` and the
    self-contained `report.html`. Children a dead process left RUNNING are marked KILLED first;
    children a resumed sweep replaced (`SUPERSEDED_BY`) are left out. None when no sweep is open."""
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
    results = report = None
    if children:
        results = build_results(objective, children)
        mlflow.log_table(results.leaderboard.reset_index(), "tables/leaderboard.json", run_id=parent_id)
        mlflow.log_metrics(loggable({f"stats/mde_{objective}": results.mde}))
        report = render_report(results, f"Sweep {parent.data.tags.get('sweep.overrides', '')}".strip())
        mlflow.log_text(report, REPORT)
    failed = [(c.overrides, c.tags.get("error") or c.status) for c in children if c.status != "FINISHED"]
    if interrupted is None:
        mlflow.end_run()
    else:
        mlflow.set_tag("error", str(interrupted))
        mlflow.end_run("KILLED")
    return SweepSummary(experiment_id, parent_id, results, report, failed)


def _search_pages(
    client: mlflow.MlflowClient, experiment_id: str, filter_string: str, newest_first: bool = False
) -> Iterator[Any]:
    """Every run matching `filter_string`, earliest (or newest) first, a result page at a time."""
    order, token = f"attributes.start_time {'DESC' if newest_first else 'ASC'}", None
    while True:
        page = client.search_runs([experiment_id], filter_string, order_by=[order], max_results=1000, page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def build_results(objective: str, runs: Sequence[LoggedRun]) -> SweepResults:
    """`sweep.evaluation.leaderboard.build` on logged runs: each finished run's per-question table is read back."""
    configs = [
        ConfigRun(
            run.run_id,
            run.overrides or run.name,
            run.status,
            run.metrics,
            run.params,
            _per_query_if_logged(run),
        )
        for run in runs
    ]
    return build(objective, configs)


def _per_query_if_logged(run: LoggedRun) -> pd.DataFrame | None:
    """A finished run's per-question table; None (with a warning) when it cannot be read back, so
    the sweep still closes with the others ranked."""
    if run.status != "FINISHED":
        return None
    try:
        return load_per_query(run)
    except InputError as error:
        log.warning("left out of the leaderboard: %s", error)
        return None


def ui_hint(experiment_id: str) -> list[str]:
    """How to look at the runs: the UI command for a local store, and the runs view's address
    (3.17's UI opens an experiment in GenAI mode, which lists no runs, unless told otherwise)."""
    uri = tracking_uri()
    lines, base = [], uri.rstrip("/")
    if uri.startswith("sqlite:"):
        lines.append(f"Compare runs: mlflow ui --backend-store-uri {uri}")
        base = "http://127.0.0.1:5000"
    lines.append(f"Runs view: {base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning")
    return lines


@dataclass(frozen=True)
class BestRun:
    run_id: str
    value: float
    config: dict[str, Any]  # the resolved config
    overrides: list[str]
    choices: dict[str, str]
    why: str  # how it was chosen, in one line


AMONG = ("best", "tied")  # the single best value, or the cheapest of those tied with it
CHEAPEST_BY = "latency/search_ms_p50"


def best_run(
    metric: str,
    experiment: str = DEFAULT_EXPERIMENT,
    sweep: str | None = None,
    maximize: bool = True,
    among: str = "best",
    prefer: str = CHEAPEST_BY,
) -> BestRun:
    """The finished run with the best `metric` (only the children of parent run `sweep`, if given;
    the earliest on ties). `among="tied"`: of the runs statistically tied with that one
    (`sweep.evaluation.leaderboard`: Holm-corrected paired test over the questions, on the runs of the sweep,
    or of the experiment scored on the same golden set), the one with the lowest `prefer` (a cost,
    e.g. `latency/search_ms_p50`). Reading creates nothing: no store is an error."""
    for name, value in (("--metric", metric), ("--prefer", prefer)):
        if not _METRIC_NAME.fullmatch(value):
            raise InputError(f"{name} {value!r}: not a metric name (letters, digits and _ - . / : space)")
    if among not in AMONG:
        raise InputError(f"--among {among!r}: one of {', '.join(AMONG)}")
    if among == "tied" and not maximize:
        raise InputError("--among tied ranks higher-is-better metrics; it cannot be combined with --minimize")
    if sweep is not None and not _RUN_ID.fullmatch(sweep):
        raise InputError(f"--sweep {sweep!r}: not an MLflow run id (32 hexadecimal digits)")
    experiment_id = _existing_experiment_id(experiment)
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
    if among == "tied":
        golden = run.data.tags.get("data.golden_digest", "")
        conditions.append(f"tags.`data.golden_digest` = '{golden}'")
        candidates = _search_pages(mlflow.MlflowClient(), experiment_id, " and ".join(conditions))
        run, why = _cheapest_tied(metric, [_logged(c) for c in candidates], prefer)
    with _no_progress_bar():
        config = yaml.safe_load(mlflow.artifacts.load_text(f"{run.info.artifact_uri}/config/resolved.yaml"))
        hydra = yaml.safe_load(mlflow.artifacts.load_text(f"{run.info.artifact_uri}/config/overrides.yaml"))
    return BestRun(run.info.run_id, run.data.metrics[metric], config, hydra["overrides"], hydra.get("choices", {}), why)


def _cheapest_tied(metric: str, candidates: Sequence[LoggedRun], prefer: str) -> tuple[Any, str]:
    """The run with the lowest `prefer` among `candidates` tied with the best by `metric` (the
    better-ranked one on equal cost; a run without `prefer` comes last), and why, in one line."""
    results = build_results(metric, candidates)
    board = results.leaderboard
    if board["mean"].isna().all():
        raise InputError(
            f"--among tied: {metric!r} is not a per-question metric (tables/per_query.json has no such column)"
        )
    tied = board[board["tied_with_best"]]
    cost = tied[prefer] if prefer in tied.columns else pd.Series(float("nan"), index=tied.index)
    chosen = cost.fillna(float("inf")).sort_values(kind="stable").index[0]
    leader = board.index[0]
    why = (
        f"the lowest {prefer} ({cost[chosen]:.4g}) of {len(tied)} of {len(board)} runs tied with the best "
        f"(run {leader}: {metric} {board.at[leader, 'mean']:.4f}; Holm-corrected paired test, alpha {results.alpha})"
    )
    return mlflow.get_run(chosen), why


def loggable(values: Mapping[str, float]) -> dict[str, float]:
    """MLflow-legal names; values that are undefined (NaN) or unbounded (an infinite threshold) left out."""
    return {metric_key(k): float(v) for k, v in values.items() if math.isfinite(v)}


def evaluation_metrics(evaluation: Evaluation) -> dict[str, float]:
    """Headline means, abstention rates and per-type means, skipping what is undefined (NaN)."""
    return loggable(evaluation.mean | evaluation.type_means())


def log_stats(stats: Mapping[str, float]) -> None:
    """What the pipeline measured: times, latencies, sizes, counts, shares."""
    mlflow.log_metrics(loggable(stats))


def log_results(results: Run) -> None:
    """The trial's results as a TREC run file (`run.trec`), for trec_eval or `sweep.evaluate`."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.trec"
        results.to_trec(path)
        mlflow.log_artifact(str(path))


def log_delivered_chunks(delivered: Mapping[str, list[dict[str, Any]]]) -> None:
    """`tables/retrieved_chunks.json`: each question's top chunks, best first, with offsets in the
    coordinates of the golden set's evidence, so anyone can recompute the context metrics."""
    mlflow.log_dict(dict(delivered), "tables/retrieved_chunks.json")


def log_evaluation(evaluation: Evaluation, worst: int = 10) -> None:
    mlflow.log_metrics(evaluation_metrics(evaluation))
    per_query = evaluation.per_query.reset_index()
    per_query.insert(2, "question", [evaluation.golden.by_id[q].question for q in per_query["qid"]])
    mlflow.log_table(per_query, "tables/per_query.json")
    mlflow.log_table(evaluation.by("type").reset_index(), "tables/per_type.json")
    worst_table = evaluation.worst(worst).reset_index()
    worst_table["relevant"] = worst_table["relevant"].map(doc_grades)
    worst_table["retrieved"] = worst_table["retrieved"].map(doc_grades)
    mlflow.log_table(worst_table, "tables/worst_queries.json")
    if evaluation.context is not None and len(evaluation.context.frame):
        mlflow.log_table(evaluation.worst_context(worst).reset_index(), "tables/worst_context.json")


def _pyplot() -> Any:
    """pyplot on the file-only backend: runs have no display."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot


def log_plots(evaluation: Evaluation) -> None:
    """recall@k over k, and the headline metric per question type, as PNG artifacts."""
    plt = _pyplot()
    recalls = sorted((int(m.rsplit("_", 1)[1]), v) for m, v in evaluation.mean.items() if m.startswith("recall_at_"))
    if recalls:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot([k for k, _ in recalls], [v for _, v in recalls], marker="o")
        ax.set(xscale="log", xlabel="k", ylabel="recall@k", ylim=(0, 1.02), title="Recall@k (answerable questions)")
        ax.grid(alpha=0.3)
        mlflow.log_figure(fig, "plots/recall_at_k.png")
        plt.close(fig)
    metric = evaluation.headline
    by_type = evaluation.by("type")[metric].dropna()
    if len(by_type):
        fig, ax = plt.subplots(figsize=(5, 0.4 * len(by_type) + 1.2))
        ax.barh(by_type.index.astype(str), by_type.to_numpy())
        ax.set(xlim=(0, 1), xlabel=metric, title=f"{metric} per question type")
        fig.tight_layout()
        mlflow.log_figure(fig, f"plots/{metric}_per_type.png")
        plt.close(fig)


def log_calibration(calibration: Calibration) -> None:
    """`abstain/suggested_min_score`, the means that threshold gives (`abstain/at_suggested/<metric>`),
    the curve as `tables/abstention_curve.json` and `plots/abstention_calibration.png`."""
    values = {"abstain/suggested_min_score": calibration.suggested} | {
        f"abstain/at_suggested/{name}": value for name, value in calibration.at_suggested.items()
    }
    mlflow.log_metrics(loggable(values))
    # the -inf row abstains exactly as the lowest observed score does, and JSON has no -inf
    curve = calibration.curve[calibration.curve["threshold"].map(math.isfinite)]
    mlflow.log_table(curve, "tables/abstention_curve.json")
    if len(curve):
        _log_calibration_plot(calibration, curve)


def _log_calibration_plot(calibration: Calibration, curve: pd.DataFrame) -> None:
    """The four rates over the threshold, with the suggested one marked."""
    plt = _pyplot()
    lines = {
        "correct_rate": "unanswerable that abstain",
        "false_rate": "answerable that abstain",
        calibration.metric: f"{calibration.metric} kept",
        "balanced_accuracy": "balanced accuracy",
    }
    fig, ax = plt.subplots(figsize=(6, 4))
    for column, label in lines.items():
        # each value holds from just above the previous observed score up to its own threshold
        ax.plot(curve["threshold"], curve[column], drawstyle="steps-pre", marker=".", label=label)
    if math.isfinite(calibration.suggested):
        ax.axvline(calibration.suggested, color="grey", linestyle="--", label=f"suggested {calibration.suggested:.3g}")
    ax.set(
        xlabel="minimum top score (threshold)",
        ylabel="share of questions / mean",
        ylim=(-0.02, 1.02),
        title="Abstention threshold calibration",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    mlflow.log_figure(fig, "plots/abstention_calibration.png")
    plt.close(fig)


def golden_dataset(golden: GoldenSet) -> Any:
    """The golden set as an MLflow dataset; its digest is the `data.golden_digest` tag."""
    frame = pd.DataFrame(
        {
            "id": [q.id for q in golden],
            "question": [q.question for q in golden],
            "type": [q.type for q in golden],
            "relevant": [doc_grades(q.relevant) for q in golden],
            "evidence": [evidence_spans(q.evidence) for q in golden],
        }
    )
    with warnings.catch_warnings():  # MLflow registers its local-file source twice and says so
        warnings.filterwarnings("ignore", message="The specified dataset source can be interpreted in multiple ways")
        return mlflow.data.from_pandas(frame, source=str(Path(golden.source).resolve()), name=Path(golden.source).name)


def data_digests(golden: GoldenSet, corpus: Corpus) -> dict[str, str]:
    """The tags that say what a run was scored on: the golden set's and the corpus's digests."""
    return _digest_tags(golden_dataset(golden), corpus)


def _digest_tags(dataset: Any, corpus: Corpus) -> dict[str, str]:
    return {"data.golden_digest": dataset.digest, "data.corpus_digest": corpus.digest}


def log_golden_input(golden: GoldenSet, corpus: Corpus) -> None:
    """The golden set as an MLflow dataset (digest included), plus data digests as tags."""
    dataset = golden_dataset(golden)
    for attempt in range(3):
        try:
            mlflow.log_input(dataset, context="golden")
            break
        except mlflow.exceptions.MlflowException as error:
            # Workers of one sweep log the same dataset at once; MLflow checks that it exists, then
            # inserts it, so on PostgreSQL all but one insert are refused (the transaction rolls back).
            # Tried again, the dataset is there and only the link to this run is written.
            if attempt == 2 or not any(
                clash in str(error) for clash in ("dataset_pk", "UNIQUE constraint failed: datasets")
            ):
                raise
            time.sleep(0.2 * (attempt + 1))
    # the corpus's path is absolute: sweep.pool reads it back from another folder
    mlflow.set_tags(_digest_tags(dataset, corpus) | {"data.corpus": str(Path(corpus.source).absolute())})


def environment_tags() -> dict[str, str]:
    tags = {f"version.{name}": _version(name) for name in PACKAGES}
    commit = _git_commit()
    if commit:
        tags["mlflow.source.git.commit"] = commit
    return tags


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git_commit() -> str | None:
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10
        )
    except OSError:
        return None
    return result.stdout.strip() if result.returncode == 0 else None


# ---------------------------------------------------------------- reading runs back (sweep.compare, sweep.check)


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


def _logged(run: Any) -> LoggedRun:
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
    if not _RUN_ID.fullmatch(run_id):
        raise InputError(f"{run_id!r}: not an MLflow run id (32 hexadecimal digits)")
    connect(create=False)
    try:
        return _logged(mlflow.MlflowClient().get_run(run_id))
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
        _logged(run) for run in _search_pages(mlflow.MlflowClient(), parent.experiment_id, " and ".join(conditions))
    ]


@contextmanager
def _no_progress_bar() -> Iterator[None]:
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


def load_per_query(run: LoggedRun) -> pd.DataFrame:
    """`tables/per_query.json` of `run` (what `log_evaluation` logged), one row per question, in
    the logged column order; undefined values (NaN, logged as null) are NaN again."""
    listed = {a.path for a in mlflow.MlflowClient().list_artifacts(run.run_id, "tables")}
    if "tables/per_query.json" not in listed:
        kind = "a sweep's parent run" if run.is_sweep else f"a {run.status} run"
        raise InputError(f"run {run.run_id} ({kind}) has no tables/per_query.json: it holds no evaluation")
    try:
        with _no_progress_bar():
            table = mlflow.artifacts.load_dict(f"{run.artifact_uri}/tables/per_query.json")
        return pd.DataFrame(table["data"], columns=table["columns"])
    except (mlflow.exceptions.MlflowException, OSError, KeyError, TypeError, ValueError) as error:
        raise InputError(f"run {run.run_id}: cannot read tables/per_query.json ({one_line(error)})") from None


def log_comparison(run_id: str, name: str, markdown: str, data: Mapping[str, Any]) -> list[str]:
    """A comparison as artifacts of run `run_id`: `compare/<name>.md` and `compare/<name>.json`.
    The artifact paths."""
    client = mlflow.MlflowClient()
    paths = [f"compare/{name}.md", f"compare/{name}.json"]
    client.log_text(run_id, markdown, paths[0])
    client.log_dict(run_id, dict(data), paths[1])
    return paths


# ---------------------------------------------------------------- a run's results, read back (sweep.pool)

RUN_FILE = "run.trec"
RETRIEVED_CHUNKS = "tables/retrieved_chunks.json"


def golden_source(run: LoggedRun) -> str | None:
    """The golden file `run` was scored on: the source (an absolute path) of its `golden` dataset
    input; None when it has none."""
    inputs = mlflow.MlflowClient().get_run(run.run_id).inputs
    for dataset_input in inputs.dataset_inputs if inputs is not None else ():
        if any(tag.key == "mlflow.data.context" and tag.value == "golden" for tag in dataset_input.tags):
            return getattr(mlflow.data.get_source(dataset_input.dataset), "uri", None)
    return None


def _listed(run: LoggedRun, folder: str | None = None) -> set[str]:
    return {a.path for a in mlflow.MlflowClient().list_artifacts(run.run_id, folder)}


def load_run_file(run: LoggedRun) -> Run:
    """`run.trec` of `run` (what `log_results` logged), ordered as trec_eval orders it; an empty
    file (every question abstained) is an empty run."""
    if RUN_FILE not in _listed(run):
        kind = "a sweep's parent run" if run.is_sweep else f"a {run.status} run"
        raise InputError(f"run {run.run_id} ({kind}) has no {RUN_FILE}: it holds no results")
    with _no_progress_bar(), tempfile.TemporaryDirectory() as folder:
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
        with _no_progress_bar():
            return mlflow.artifacts.load_dict(f"{run.artifact_uri}/{RETRIEVED_CHUNKS}")
    except (mlflow.exceptions.MlflowException, OSError, TypeError, ValueError) as error:
        raise InputError(f"run {run.run_id}: cannot read {RETRIEVED_CHUNKS} ({one_line(error)})") from None


def _existing_experiment_id(experiment: str) -> str:
    """The id of the experiment named `experiment`; reading creates nothing: no store, or no such
    experiment in it, is one line."""
    connect(create=False)
    found = mlflow.get_experiment_by_name(experiment)
    if found is None:
        raise InputError(f"no MLflow experiment named {experiment!r} at {tracking_uri()}")
    return found.experiment_id


def latest_sweep(experiment: str = DEFAULT_EXPERIMENT) -> str:
    """The id of the sweep (parent run) started last in `experiment`. Reading creates nothing."""
    runs = mlflow.MlflowClient().search_runs(
        [_existing_experiment_id(experiment)],
        filter_string="tags.`sweep.parent` = 'true'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if not runs:
        raise InputError(f"no sweep in experiment {experiment!r} at {tracking_uri()}")
    return runs[0].info.run_id
