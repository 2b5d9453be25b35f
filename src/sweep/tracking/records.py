"""A trial's record in MLflow: `save_record` writes one into its run, `load_record` reads one back.

The only place a `TrialRecord` (`sweep.evaluation.record`) turns into MLflow calls. A run holds:
params, the resolved config flattened to dotted keys plus Hydra's chosen option per group
(`index=hnsw`); metrics, every number of the record, the objective first (MLflow metric names may
not contain `@`: `metric_key`); tables as `mlflow.log_table` writes them (`tables/<name>.json`);
`run.trec`; the chunks each question got (`tables/retrieved_chunks.json`); the parts' candidates,
a row each: every one (`parts/member_hits.parquet`), and each part's top `MEMBER_HITS_SHOWN` per
question as a table a person reads in the UI (`tables/member_hits.json`); the golden set as a
dataset input with its digest and the data digests as tags (`sweep.tracking.digests`), with the
golden file itself and the set it was edited from (`sweep.tracking.lineage`); the plots the caller
drew; tags for the git commit and package versions.
"""

from __future__ import annotations

import json
import logging
import math
import re
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from importlib import metadata
from itertools import chain
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pandas as pd
import yaml
from mlflow.entities import Metric
from mlflow.utils.mlflow_tags import MLFLOW_LOGGED_ARTIFACTS

from sweep.errors import InputError
from sweep.evaluation.record import TABLES, Part, TrialRecord
from sweep.tracking.digests import (
    CORPUS_DIGEST,
    GOLDEN_DIGEST,
    GOLDEN_DIGEST_IN_FILE_ORDER,
    data_digests,
    golden_dataset,
)
from sweep.tracking.lineage import keep_golden_set
from sweep.tracking.reading import (
    GOLDEN_CONTEXT,
    MEMBER_CANDIDATES,
    MEMBER_HITS,
    MEMBER_HITS_COLUMNS,
    RETRIEVED_CHUNKS,
    RUN_FILE,
    LoggedRun,
    artifact_text,
    load_member_hits,
    load_per_query,
    load_retrieved_chunks,
    load_run_file,
    load_table,
    logged_run,
)

log = logging.getLogger(__name__)
CONFIG = "config/resolved.yaml"
OVERRIDES = "config/overrides.yaml"
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
MEMBER_HITS_SHOWN = 10  # each part's candidates per question in the UI's table: 15,200 rows hung the UI's viewer


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


def loggable(values: Mapping[str, float]) -> dict[str, float]:
    """MLflow-legal names; values that are undefined (NaN) or unbounded (an infinite threshold) left out."""
    return {metric_key(k): float(v) for k, v in values.items() if math.isfinite(v)}


def log_tables(tables: Mapping[str, pd.DataFrame], run_id: str | None = None) -> None:
    """Each table as `mlflow.log_table` writes a new one (JSON in pandas' "split" orient, listed in
    the run's `mlflow.loggedArtifacts` tag, which the UI and `mlflow.load_table` read), for the
    active run or `run_id`, in one upload and one tag write: log_table lists the run's artifacts,
    reads the run and writes the tag for every table, about 85 ms apiece."""
    client = mlflow.MlflowClient()
    run_id = run_id or mlflow.active_run().info.run_id
    with tempfile.TemporaryDirectory() as folder:
        for path, table in tables.items():
            written = Path(folder, path)
            written.parent.mkdir(parents=True, exist_ok=True)
            written.write_text(table_json(table), encoding="utf-8")
        client.log_artifacts(run_id, folder)
    listed = json.loads(client.get_run(run_id).data.tags.get(MLFLOW_LOGGED_ARTIFACTS, "[]"))
    entries = [{"path": path, "type": "table"} for path in tables]
    listed += [entry for entry in entries if entry not in listed]
    client.set_tag(run_id, MLFLOW_LOGGED_ARTIFACTS, json.dumps(listed))


def log_into_run(run_id: str, metrics: Mapping[str, float], tables: Mapping[str, pd.DataFrame]) -> None:
    """Into the run `run_id`, open or closed: `metrics` (a NaN left out) in one batch, and `tables`
    (artifact path -> table, as `log_tables` writes them)."""
    at = int(time.time() * 1000)
    mlflow.MlflowClient().log_batch(run_id, metrics=[Metric(k, v, at, 0) for k, v in loggable(metrics).items()])
    log_tables(tables, run_id=run_id)


def table_json(table: pd.DataFrame) -> str:
    """`table` as JSON in pandas' "split" orient without its index, as `mlflow.log_table` writes it
    (and `mlflow.load_table` reads it), with every number as it is: pandas writes a float to 10
    significant digits by default and to 15 at most, so that 1/3 and 2/3 came back as 0.3333333333
    and 0.6666666667, whose differences are no longer equal, and a paired test read from them
    counted ties wrongly; Python's `json` writes the shortest text that reads back to the same
    float. Values that are not numbers (NaN, an infinity) are null, as pandas writes them."""
    written = json.loads(table.to_json(orient="split", index=False, date_format="iso"))
    rows = written["data"]
    for j in range(table.shape[1]):
        column = table.iloc[:, j]
        if pd.api.types.is_float_dtype(column.dtype):
            exact = [value if math.isfinite(value) else None for value in column.tolist()]
        elif column.dtype == object:
            exact = [_exact(value, row[j]) for value, row in zip(column.tolist(), rows)]
        else:
            continue
        for row, value in zip(rows, exact):
            row[j] = value
    return json.dumps(written, allow_nan=False)


def _exact(value: Any, written: Any) -> Any:
    """`written` (pandas' JSON of `value`) with each float in it as `value` holds it."""
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (list, tuple, np.ndarray)) and isinstance(written, list) and len(value) == len(written):
        return [_exact(item, text) for item, text in zip(value, written)]
    if isinstance(value, Mapping) and isinstance(written, dict) and len(value) == len(written):
        return {str(key): _exact(item, written.get(str(key))) for key, item in value.items()}
    return written


def log_comparison(run_id: str, name: str, markdown: str, data: Mapping[str, Any]) -> list[str]:
    """A comparison as artifacts of run `run_id`: `compare/<name>.md` and `compare/<name>.json`.
    The artifact paths."""
    client = mlflow.MlflowClient()
    paths = [f"compare/{name}.md", f"compare/{name}.json"]
    client.log_text(run_id, markdown, paths[0])
    client.log_dict(run_id, dict(data), paths[1])
    return paths


def environment_tags() -> dict[str, str]:
    """The versions of the packages that matter (`PACKAGES`) and the git commit, when there is one."""
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


def save_record(record: TrialRecord, figures: Mapping[str, Any] | None = None, with_config: bool = True) -> None:
    """What `record` holds, into the active run (`sweep.tracking.lifecycle.trial_run`): its config
    (params: the resolved config flattened, and each config group's chosen option under the
    group's name, so the UI can filter and plot by it; the config and the command line that
    reproduce it as artifacts; the environment as tags), the golden set and the data digests,
    metrics, tables, the run file, the delivered chunks, the parts' candidates, and `figures`
    (artifact path -> matplotlib figure) as PNGs. A trial saves its record with the config alone
    first, so that a run that fails later still says what it was, then the rest of it
    (`with_config=False`: the config is in the run already)."""
    if with_config and record.config:
        mlflow.log_params(flatten(record.config) | dict(record.choices))
        mlflow.log_dict(dict(record.config), CONFIG)
        mlflow.log_dict({"overrides": list(record.overrides), "choices": dict(record.choices)}, OVERRIDES)
        mlflow.set_tags(environment_tags() | {"sweep.overrides": record.command_line or "default"})
    if record.golden is not None and record.corpus is not None:
        _log_golden_input(record)
    if record.metrics:
        mlflow.log_metrics(objective_first(loggable(record.metrics), record.config.get("objective")))
    tables = {f"tables/{name}.json": table for name, table in record.tables.items()}
    candidates = member_hits_table(record.parts)
    if len(candidates):
        tables[MEMBER_HITS] = candidates[candidates["rank"] <= MEMBER_HITS_SHOWN]
    if tables:
        log_tables(tables)
    if record.results is not None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / RUN_FILE
            record.results.to_trec(path)
            mlflow.log_artifact(str(path))
    for path, figure in (figures or {}).items():
        mlflow.log_figure(figure, path)
    if record.delivered_chunks:
        mlflow.log_dict(dict(record.delivered_chunks), RETRIEVED_CHUNKS)
    if len(candidates):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder, Path(MEMBER_CANDIDATES).name)
            candidates.to_parquet(path, index=False)
            mlflow.log_artifact(str(path), str(Path(MEMBER_CANDIDATES).parent))


def objective_first(metrics: Mapping[str, float], objective: str | None) -> dict[str, float]:
    """`metrics` (MLflow names) with the `objective`'s first: the UI's compare view plots the first
    metric a run logged, and lists a run's metrics in the order it logged them."""
    key = metric_key(objective) if objective else None
    return ({key: metrics[key]} if key in metrics else {}) | dict(metrics)


def member_hits_table(parts: Mapping[str, Part]) -> pd.DataFrame:
    """Every candidate each part gave, a row each, by question, then by part, then by rank (1: its
    best): `MEMBER_HITS_COLUMNS`, the chunk's document and score first, its offsets last. Built a
    column at a time: a hybrid's two members give some 78,000 rows a run on the bundled set."""
    first_seen: dict[str, int] = {}  # questions in the order the parts first name them
    for values in parts.values():
        for qid in values.hits or {}:
            first_seen.setdefault(qid, len(first_seen))
    blocks = sorted(  # stable: within a question, the parts keep their order
        ((qid, part, rows) for part, values in parts.items() for qid, rows in (values.hits or {}).items() if rows),
        key=lambda block: first_seen[block[0]],
    )
    sizes = [len(rows) for _, _, rows in blocks]
    hits = pd.DataFrame(
        list(chain.from_iterable(rows for _, _, rows in blocks)), columns=["doc", "start", "end", "score"]
    )
    hits.insert(0, "qid", np.repeat([qid for qid, _, _ in blocks], sizes))
    hits.insert(1, "member", np.repeat([part for _, part, _ in blocks], sizes))
    hits.insert(2, "rank", np.concatenate([np.arange(1, n + 1) for n in sizes]) if sizes else np.array([], dtype=int))
    return hits[MEMBER_HITS_COLUMNS]


def load_record(
    run: str | LoggedRun,
    *,
    per_query: bool = True,
    every_table: bool = False,
    results: bool = False,
    chunks: bool = False,
    hits: bool = False,
    config: bool = False,
) -> TrialRecord:
    """The record that the run `run` (an id, or one read already) holds, as far as it holds one:
    the per-question table of a finished run (one that did not finish has none; nor with
    `per_query=False`), its metrics, params and tags. Its other tables (`every_table`), the run file (`results`), the delivered
    chunks (`chunks`), the parts' candidates (`hits`), and the logged config with the command line
    that gave it (`config`; else the params stand for it) are read only when asked for. Reading
    creates nothing; what cannot be read is one line naming the run (InputError)."""
    stored = logged_run(run) if isinstance(run, str) else run
    tables = {}
    if per_query and stored.status == "FINISHED" and not stored.is_sweep:
        tables["per_query"] = load_per_query(stored)
        for name in TABLES if every_table else ():
            if name != "per_query" and (table := load_table(stored, f"tables/{name}.json")) is not None:
                tables[name] = table
    logged_config, overrides, choices = _logged_config(stored) if config else ({}, (), {})
    member_hits = load_member_hits(stored) if hits else None
    members = {key.split("/")[1] for key in stored.metrics if key.startswith("member/") and key.count("/") >= 2}
    parts = {
        member: Part(
            {
                key.split("/", 2)[2]: value
                for key, value in stored.metrics.items()
                if key.startswith(f"member/{member}/")
            },
            None if member_hits is None else {qid: got[member] for qid, got in member_hits.items() if member in got},
        )
        for member in sorted(members)
    }
    return TrialRecord(
        name=stored.name,
        config=logged_config,
        overrides=overrides,
        choices=choices,
        metrics=dict(stored.metrics),
        tables=tables,
        results=load_run_file(stored) if results else None,
        delivered_chunks=load_retrieved_chunks(stored) if chunks else None,
        parts=parts,
        digests={
            key: stored.tags[key]
            for key in (GOLDEN_DIGEST, GOLDEN_DIGEST_IN_FILE_ORDER, CORPUS_DIGEST)
            if key in stored.tags
        },
        run_id=stored.run_id,
        status=stored.status,
        tags=dict(stored.tags),
        params=dict(stored.params),
    )


def load_records(runs: Sequence[LoggedRun]) -> list[TrialRecord]:
    """`load_record` of each of `runs` (per-question tables only); a finished run whose table cannot
    be read back is left with none, with a warning, so that a sweep still closes with the others."""
    records = []
    for run in runs:
        try:
            records.append(load_record(run))
        except InputError as error:
            log.warning("left out of the leaderboard: %s", error)
            records.append(load_record(run, per_query=False))
    return records


def _logged_config(stored: LoggedRun) -> tuple[dict[str, Any], tuple[str, ...], dict[str, str]]:
    """The resolved config a run logged, and the overrides and choices that gave it."""
    config = yaml.safe_load(artifact_text(stored, CONFIG))
    hydra = yaml.safe_load(artifact_text(stored, OVERRIDES))
    return config, tuple(hydra["overrides"]), dict(hydra.get("choices", {}))


def _log_golden_input(record: TrialRecord) -> None:
    """The golden set as an MLflow dataset with its digest (`sweep.tracking.digests`), plus the data
    digests as tags; the golden file kept with the run, and the set it was edited from as a second
    dataset input (`sweep.tracking.lineage`)."""
    digests = data_digests(record.golden, record.corpus)
    dataset = golden_dataset(record.golden, digests[GOLDEN_DIGEST])
    run = mlflow.active_run().info
    kept, parents = keep_golden_set(record.golden, record.corpus, run.experiment_id, digests[GOLDEN_DIGEST])
    for attempt in range(3):
        try:
            mlflow.log_input(dataset, context=GOLDEN_CONTEXT)
            if parents:
                mlflow.MlflowClient().log_inputs(run.run_id, parents)
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
    # the corpus's path is absolute: sweep.pool reads it back from another folder; in one write, so
    # that a run tagged with its golden path has its lineage too (`sweep.tracking.lineage`)
    mlflow.set_tags(digests | kept | {"data.corpus": str(Path(record.corpus.source).absolute())})
