"""MLflow logging against a real SQLite store in tmp_path, read back through MlflowClient."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys

import mlflow
import pytest
import yaml

from helpers.data import golden_of, ranked
from helpers.stores import copy_blank_store
from sweep import errors
from sweep.errors import InputError, Interrupted
from sweep.evaluation import score
from sweep.evaluation.abstention import calibrate
from sweep.evaluation.record import Part, trial_record
from sweep.formats.corpus import Corpus, Document
from sweep.formats.runs import Run
from sweep.reporting.plots import close_figures, trial_figures
from sweep.tracking.lifecycle import trial_run
from sweep.tracking.records import flatten, load_record, metric_key, save_record


@pytest.fixture
def store(tmp_path, monkeypatch):
    copy_blank_store(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    yield tmp_path
    mlflow.set_tracking_uri(None)


def test_names_and_flattening():
    assert metric_key("recall@5") == "recall_at_5" and metric_key("type/how to/ndcg_at_10") == "type/how to/ndcg_at_10"
    assert metric_key("type/Q&A/mrr") == "type/Q_A/mrr"
    assert flatten({"index": {"name": "hnsw", "M": 32}, "chunk": 256}) == {
        "index.name": "hnsw",
        "index.M": "32",
        "chunk": "256",
    }


def test_a_run_receives_metrics_tables_dataset_and_tags(store):
    golden = golden_of(
        {"q1": {"a": 1}, "q2": {"b": 2}, "u": {}}, types={"q1": "factoid", "q2": "howto", "u": "unanswerable"}
    )
    evaluation = score(golden, ranked({"q1": ["a"], "q2": ["x", "b"]}), ["recall_at_1", "mrr", "abstain/correct_rate"])
    corpus = Corpus((Document("a", "text a"), Document("b", "text b")))
    record = trial_record(
        "index=flat", {"index": {"_target_": "sweep.retrieval.index.FlatIndex"}, "chunk": 256}, ["index=flat"],
        {"index": "flat"}, evaluation=evaluation, calibration=None, golden=golden, corpus=corpus, delivered_chunks={},
        parts={}, stats={"time/embed_s": 1.5, "abstain/suggested_min_score": float("-inf")},
    )  # fmt: skip
    with trial_run("golden-sweep-test", "index=flat") as run:
        save_record(record)
    experiment_id = run.experiment_id
    client = mlflow.MlflowClient()
    logged = client.get_run(run.run_id)
    metrics = logged.data.metrics
    assert metrics["recall_at_1"] == 0.5 and metrics["mrr"] == 0.75 and metrics["abstain/correct_rate"] == 1.0
    assert metrics["type/factoid/recall_at_1"] == 1.0 and metrics["type/howto/mrr"] == 0.5
    assert metrics["type/unanswerable/n"] == 1 and "type/unanswerable/mrr" not in metrics
    assert metrics["time/embed_s"] == 1.5 and "abstain/suggested_min_score" not in metrics  # no infinities
    # the flattened config, and the chosen option under the group's name
    assert logged.data.params == {"index._target_": "sweep.retrieval.index.FlatIndex", "chunk": "256", "index": "flat"}
    assert (
        logged.data.tags["data.corpus_digest"] == corpus.digest and logged.data.tags["sweep.overrides"] == "index=flat"
    )
    assert "version.mlflow" in logged.data.tags
    assert client.get_experiment(experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"
    artifacts = {a.path for a in client.list_artifacts(run.run_id, "tables")}
    assert artifacts == {"tables/per_query.json", "tables/per_type.json", "tables/worst_queries.json"}
    # as mlflow.log_table leaves them: listed for the UI, and read back by mlflow.load_table
    listed = json.loads(logged.data.tags["mlflow.loggedArtifacts"])
    assert listed == [{"path": path, "type": "table"} for path in sorted(artifacts)]
    mlflow.set_experiment(experiment_id=experiment_id)
    per_query = mlflow.load_table("tables/per_query.json", run_ids=[run.run_id])
    assert per_query["qid"].tolist() == ["q1", "q2", "u"] and per_query["recall_at_1"].tolist()[:2] == [1.0, 0.0]
    saved = (store / "mlruns").joinpath(run.run_id, "artifacts")
    assert yaml.safe_load((saved / "config" / "overrides.yaml").read_text()) == {
        "overrides": ["index=flat"],
        "choices": {"index": "flat"},
    }
    per_query = json.loads((saved / "tables" / "per_query.json").read_text())
    assert len(per_query["data"]) == 3
    inputs = logged.inputs.dataset_inputs
    assert len(inputs) == 1 and inputs[0].dataset.digest == logged.data.tags["data.golden_digest"]


def test_a_record_read_back_is_the_record_saved(store):
    golden = golden_of({"q1": {"a": 1}, "q2": {"b": 2}, "u": {}}, types={"q1": "factoid", "q2": "howto", "u": "none"})
    evaluation = score(golden, ranked({"q1": ["a", "b"], "q2": ["x", "b"]}))
    chunks = {"q1": [{"doc": "a", "start": 0, "end": 4, "score": 0.9}], "q2": [], "u": []}
    parts = {
        "bm25": Part({"mrr": 0.5}, {"q1": [["b", 0, 4, 3.5]], "q2": [["b", 0, 4, 1.0]]}),
        "dense": Part({"mrr": 1.0}, {}),
    }
    corpus = Corpus((Document("a", "text a"), Document("b", "text b")))
    saved = trial_record(
        "model=hybrid", {"model": {"fusion": "rrf"}}, ["model=hybrid"], {"model": "hybrid"}, evaluation=evaluation,
        calibration=calibrate(evaluation), golden=golden, corpus=corpus, delivered_chunks=chunks, parts=parts,
        stats={"latency/search_ms_p50": 3.5},
    )  # fmt: skip
    with trial_run("golden-sweep-test", saved.name) as run:
        save_record(saved)
    loaded = load_record(run.run_id, every_table=True, results=True, chunks=True, hits=True, config=True)
    assert (loaded.run_id, loaded.status, loaded.label) == (run.run_id, "FINISHED", "model=hybrid")
    assert (loaded.config, loaded.overrides, loaded.choices) == (saved.config, saved.overrides, saved.choices)
    assert loaded.metrics == {metric_key(k): v for k, v in saved.metrics.items() if math.isfinite(v)}
    assert set(loaded.tables) == set(saved.tables)
    for name, table in saved.tables.items():
        expected = json.loads(table.to_json(orient="split", index=False))
        assert json.loads(loaded.tables[name].to_json(orient="split", index=False)) == expected, name
    assert loaded.results.rankings(10) == saved.results.rankings(10) and loaded.delivered_chunks == chunks
    assert loaded.parts == {"bm25": parts["bm25"], "dense": Part({"mrr": 1.0}, {})}
    assert loaded.golden_digest == loaded.tags["data.golden_digest"] and loaded.golden is None


def test_a_trial_that_fails_is_a_failed_run_that_says_why(store):
    with pytest.raises(InputError), trial_run("golden-sweep-test", "chunk=-3"):
        raise InputError("chunk=-3: the chunk size must be a whole number of tokens >= 0")
    [run] = mlflow.search_runs(experiment_names=["golden-sweep-test"], output_format="list")
    assert run.info.status == "FAILED"
    assert run.data.tags["error"] == "chunk=-3: the chunk size must be a whole number of tokens >= 0"  # one line


def test_a_calibration_logs_its_threshold_metrics_table_and_plot(store):
    golden = golden_of({"a1": {"d1": 1}, "a2": {"d2": 1}, "u1": {}, "u2": {}})
    run = Run.from_ranked(
        {"a1": [("d1", 0.9)], "a2": [("x", 0.8), ("d2", 0.7)], "u1": [("x", 0.3)], "u2": [("y", 0.1)]}
    )
    evaluation = score(golden, run, ["recall_at_5", "mrr", "abstain/correct_rate", "abstain/false_rate"])
    calibration = calibrate(evaluation)
    record = trial_record(
        "default", {}, [], {}, evaluation=evaluation, calibration=calibration, golden=golden,
        corpus=Corpus((Document("d1", "one"), Document("d2", "two"))), delivered_chunks={}, parts={}, stats={},
    )  # fmt: skip
    figures = trial_figures(record)
    with trial_run("golden-sweep-test", "default") as logged_run:
        save_record(record, {path: f for path, f in figures.items() if "abstention" in path})
    close_figures(figures)
    client = mlflow.MlflowClient()
    metrics = client.get_run(logged_run.run_id).data.metrics
    assert metrics["abstain/suggested_min_score"] == 0.8
    assert metrics["abstain/at_suggested/recall_at_5"] == 1.0
    assert metrics["abstain/at_suggested/abstain/correct_rate"] == 1.0
    assert metrics["abstain/at_suggested/mrr"] == 0.75
    assert {a.path for a in client.list_artifacts(logged_run.run_id, "plots")} == {"plots/abstention_calibration.png"}
    assert "tables/abstention_curve.json" in {a.path for a in client.list_artifacts(logged_run.run_id, "tables")}
    artifacts = store / "mlruns" / logged_run.run_id / "artifacts"
    assert (artifacts / "plots" / "abstention_calibration.png").read_bytes().startswith(b"\x89PNG")
    table = json.loads((artifacts / "tables" / "abstention_curve.json").read_text())
    assert table["columns"] == ["threshold", "correct_rate", "false_rate", "recall_at_5", "balanced_accuracy"]
    assert [row[0] for row in table["data"]] == [0.1, 0.3, 0.8, 0.9]  # no -inf row


def test_a_signal_a_library_turned_into_its_own_error_still_kills_the_run(store):
    """SQLAlchemy, rolling back a write that a signal cut into, may raise an error of its own:
    the run is KILLED and the signal goes on up, not a failed run and a sweep that carries on."""
    with pytest.raises(Interrupted) as raised, trial_run("golden-sweep-test", "chunk=64"):
        try:
            raise Interrupted("SIGTERM", 143)
        except Interrupted as signal:
            raise RuntimeError("This Session's transaction has been rolled back") from signal
    assert raised.value.exit_code == 143
    [run] = mlflow.search_runs(experiment_names=["golden-sweep-test"], output_format="list")
    assert run.info.status == "KILLED" and run.data.tags["error"] == "interrupted by SIGTERM"


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the swallowing is the point
def test_a_signal_whose_raise_was_swallowed_still_kills_the_run(store, monkeypatch):
    """Python runs a signal handler anywhere, also in a `__del__` or a weakref callback, where the
    exception it raises is only printed (seen: SIGINT inside a WeakValueDictionary callback, and
    the sweep went on). The trial's end is a checkpoint: the run is KILLED, the signal goes on up."""
    monkeypatch.setattr(errors, "_RECEIVED", [])

    class Collected:
        def __del__(self) -> None:
            errors.raise_on_signal(signal.SIGTERM, None)

    with pytest.raises(Interrupted) as raised, trial_run("golden-sweep-test", "chunk=64"):
        Collected()  # collected at once: the handler's raise is printed and dropped
    assert raised.value.exit_code == 143
    [run] = mlflow.search_runs(experiment_names=["golden-sweep-test"], output_format="list")
    assert run.info.status == "KILLED" and run.data.tags["error"] == "interrupted by SIGTERM"


SWALLOWED_SIGNAL = """
import signal
from sweep.errors import Interrupted, raise_if_interrupted, raise_on_signal, stop_on_signals

stop_on_signals()

class Collected:
    def __del__(self):
        raise_on_signal(signal.SIGTERM, None)

class Broken:
    def __del__(self):
        raise ValueError("not a signal")

Collected()
Broken()
try:
    raise_if_interrupted()
except Interrupted as interrupted:
    print(interrupted.exit_code)
"""


def test_a_signal_raised_where_python_can_only_print_it_prints_nothing_and_other_errors_still_print():
    """`python -m sweep` under SIGTERM printed "Exception ignored in: <function
    WeakKeyDictionary...>" and a traceback above its one error line, when the signal came during a
    weakref callback; the checkpoint stops the command all the same, so that raise prints nothing."""
    done = subprocess.run([sys.executable, "-c", SWALLOWED_SIGNAL], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "143\n")
    assert "Interrupted" not in done.stderr and "ValueError: not a signal" in done.stderr
