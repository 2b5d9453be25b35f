"""Logging a trial to its run: config, metrics, tables, results, the golden set and the environment.

Params are the resolved config flattened to dotted keys plus Hydra's chosen option per group
(`index=hnsw`); metrics are headline means, per type (`type/<type>/<metric>`, `type/<type>/n`),
abstention and costs; tables as `mlflow.log_table` writes them (`log_tables`); the golden set as a dataset input with its
digest (`sweep.tracking.digests`); tags for data digests, git commit and package versions. MLflow metric names may not
contain `@`; `metric_key` writes ours without it. The plots are `sweep.tracking.plots`'.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.utils.mlflow_tags import MLFLOW_LOGGED_ARTIFACTS

from sweep.evaluation import Evaluation
from sweep.evaluation.abstention import Calibration
from sweep.formats.corpus import Corpus
from sweep.formats.golden import GoldenSet, doc_grades
from sweep.formats.runs import Run
from sweep.tracking.digests import GOLDEN_DIGEST, data_digests, golden_dataset
from sweep.tracking.plots import log_calibration_plot
from sweep.tracking.reading import MEMBER_HITS, RETRIEVED_CHUNKS, RUN_FILE

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


def log_config(resolved: Mapping[str, Any], overrides: Sequence[str], choices: Mapping[str, str]) -> None:
    """Params: the resolved config flattened, and each config group's chosen option under the
    group's name (`index=hnsw`), so the UI can filter and plot by it. Artifacts: the resolved
    config, the overrides and choices that reproduce it. Tags: environment, overrides."""
    mlflow.log_params(flatten(resolved) | dict(choices))
    mlflow.log_dict(dict(resolved), "config/resolved.yaml")
    mlflow.log_dict({"overrides": list(overrides), "choices": dict(choices)}, "config/overrides.yaml")
    mlflow.set_tags(environment_tags() | {"sweep.overrides": " ".join(overrides) or "default"})


def evaluation_metrics(evaluation: Evaluation) -> dict[str, float]:
    """Headline means, abstention rates and per-type means, skipping what is undefined (NaN)."""
    return loggable(evaluation.mean | evaluation.type_means())


def log_stats(stats: Mapping[str, float]) -> None:
    """What the pipeline measured: times, latencies, sizes, counts, shares."""
    mlflow.log_metrics(loggable(stats))


def log_results(results: Run) -> None:
    """The trial's results as a TREC run file (`run.trec`), for trec_eval or `sweep.evaluate`."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / RUN_FILE
        results.to_trec(path)
        mlflow.log_artifact(str(path))


def log_delivered_chunks(delivered: Mapping[str, list[dict[str, Any]]]) -> None:
    """`tables/retrieved_chunks.json`: each question's top chunks, best first, with offsets in the
    coordinates of the golden set's evidence, so anyone can recompute the context metrics."""
    mlflow.log_dict(dict(delivered), RETRIEVED_CHUNKS)


def log_member_evaluation(member: str, evaluation: Evaluation) -> None:
    """A hybrid member's own means (its candidates collapsed to documents) as `member/<name>/<metric>`."""
    mlflow.log_metrics(loggable({f"member/{member}/{name}": value for name, value in evaluation.mean.items()}))


def log_member_hits(hits: Mapping[str, Mapping[str, list[list[Any]]]]) -> None:
    """`tables/member_hits.json`: `{qid: {member: [[doc, start, end, score], ...]}}`, every candidate
    each member gave the fusion, with its own score, so anyone can recompute the fused ranking."""
    mlflow.log_dict({qid: dict(members) for qid, members in hits.items()}, MEMBER_HITS)


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
            table.to_json(written, orient="split", index=False, date_format="iso")
        client.log_artifacts(run_id, folder)
    listed = json.loads(client.get_run(run_id).data.tags.get(MLFLOW_LOGGED_ARTIFACTS, "[]"))
    entries = [{"path": path, "type": "table"} for path in tables]
    listed += [entry for entry in entries if entry not in listed]
    client.set_tag(run_id, MLFLOW_LOGGED_ARTIFACTS, json.dumps(listed))


def log_evaluation(evaluation: Evaluation, worst: int = 10) -> None:
    """The means as metrics (`evaluation_metrics`); per question, per type and the worst questions as tables."""
    mlflow.log_metrics(evaluation_metrics(evaluation))
    per_query = evaluation.per_query.reset_index()
    per_query.insert(2, "question", [evaluation.golden.by_id[q].question for q in per_query["qid"]])
    worst_table = evaluation.worst(worst).reset_index()
    worst_table["relevant"] = worst_table["relevant"].map(doc_grades)
    worst_table["retrieved"] = worst_table["retrieved"].map(doc_grades)
    tables = {
        "tables/per_query.json": per_query,
        "tables/per_type.json": evaluation.by("type").reset_index(),
        "tables/worst_queries.json": worst_table,
    }
    if evaluation.context is not None and len(evaluation.context.frame):
        tables["tables/worst_context.json"] = evaluation.worst_context(worst).reset_index()
    log_tables(tables)


def log_calibration(calibration: Calibration) -> None:
    """`abstain/suggested_min_score`, the means that threshold gives (`abstain/at_suggested/<metric>`),
    the curve as `tables/abstention_curve.json` and `plots/abstention_calibration.png`."""
    values = {"abstain/suggested_min_score": calibration.suggested} | {
        f"abstain/at_suggested/{name}": value for name, value in calibration.at_suggested.items()
    }
    mlflow.log_metrics(loggable(values))
    # the -inf row abstains exactly as the lowest observed score does, and JSON has no -inf
    curve = calibration.curve[calibration.curve["threshold"].map(math.isfinite)]
    log_tables({"tables/abstention_curve.json": curve})
    if len(curve):
        log_calibration_plot(calibration, curve)


def log_golden_input(golden: GoldenSet, corpus: Corpus) -> None:
    """The golden set as an MLflow dataset with its digest (`sweep.tracking.digests`), plus the data
    digests as tags."""
    digests = data_digests(golden, corpus)
    dataset = golden_dataset(golden, digests[GOLDEN_DIGEST])
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
    mlflow.set_tags(digests | {"data.corpus": str(Path(corpus.source).absolute())})


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
