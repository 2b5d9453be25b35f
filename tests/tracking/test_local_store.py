"""`sweep.tracking.local_store` against MLflow's own client on one real SQLite store: the same
runs for every search `sweep.best` makes (ties, NaN and infinite metrics, failed, deleted and
superseded runs, a sweep's children, golden digests, another experiment), and None (MLflow reads
the store) wherever reading the file straight could answer otherwise."""

from __future__ import annotations

import math
import shutil
import sqlite3
from pathlib import Path

import mlflow
import pytest
from mlflow.entities import Metric, RunTag
from mlflow.store.db.utils import _get_latest_schema_revision

from helpers.stores import copy_blank_store
from sweep.errors import InputError
from sweep.tracking import GOLDEN_DIGEST, SUPERSEDED_BY, connect, use_experiment
from sweep.tracking.best import MlflowStore, RunSearch, open_store
from sweep.tracking.local_store import PARENT_TAG, LocalStore, mlflow_schema, open_local
from sweep.tracking.reading import LoggedRun

T0 = 1_700_000_000_000  # ms


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(the SQLite file, {name: run id}) of a store made and written by MLflow."""
    folder = tmp_path_factory.mktemp("local-store")
    copy_blank_store(folder)
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        connect()
        client = mlflow.MlflowClient(uri)
        main, other = use_experiment("golden-sweep"), use_experiment("other")
        ids: dict[str, str] = {}

        def run(name, experiment=main, start=0, status="FINISHED", metrics=None, tags=None, parent=None):
            created = client.create_run(experiment, start_time=T0 + start, run_name=name)
            run_id = ids[name] = created.info.run_id
            tags = (tags or {}) | ({PARENT_TAG: ids[parent]} if parent else {})
            client.log_batch(
                run_id,
                metrics=[
                    Metric(k, v, T0, step) for k, values in (metrics or {}).items() for step, v in enumerate(values)
                ],
                params=[mlflow.entities.Param("model", name)],
                tags=[RunTag(k, v) for k, v in tags.items()],
            )
            client.set_terminated(run_id, status)

        run("sweep", tags={"sweep.parent": "true"})
        run("a", start=1, metrics={"ndcg_at_10": [0.1, 0.8], "mrr": [0.5]}, tags={GOLDEN_DIGEST: "g1"}, parent="sweep")
        run("b", start=2, metrics={"ndcg_at_10": [0.8], "latency": [3.0]}, tags={GOLDEN_DIGEST: "g1"}, parent="sweep")
        run("c", start=2, metrics={"ndcg_at_10": [0.8], "latency": [3.0]}, tags={GOLDEN_DIGEST: "g1"}, parent="sweep")
        run("failed", start=3, status="FAILED", metrics={"ndcg_at_10": [0.9]}, tags={GOLDEN_DIGEST: "g1"})
        run("replaced", start=4, metrics={"ndcg_at_10": [0.95]}, tags={SUPERSEDED_BY: "x", GOLDEN_DIGEST: "g1"})
        run("deleted", start=5, metrics={"ndcg_at_10": [0.99]}, tags={GOLDEN_DIGEST: "g1"})
        client.delete_run(ids["deleted"])
        run("nan", start=6, metrics={"ndcg_at_10": [math.nan], "mrr": [0.9]}, tags={GOLDEN_DIGEST: "g2"})
        run(
            "low",
            start=7,
            metrics={"ndcg_at_10": [0.7], "latency": [1.0], "mrr": [-math.inf]},
            tags={GOLDEN_DIGEST: "g2"},
        )
        run("huge", start=8, metrics={"latency": [math.inf]})
        run("elsewhere", other, start=9, metrics={"ndcg_at_10": [1.0]})
        yield folder / "mlflow.db", ids
        mlflow.set_tracking_uri(None)


def same(runs: list[LoggedRun]) -> list[tuple]:
    """The runs with their NaN metrics comparable (NaN != NaN)."""
    return [
        (r.run_id, r.name, r.status, r.experiment_id, r.artifact_uri, r.tags, r.params,
         {k: "NaN" if math.isnan(v) else v for k, v in r.metrics.items()})
        for r in runs
    ]  # fmt: skip


SEARCHES = [
    ("ndcg_at_10", True, ()),
    ("ndcg_at_10", False, ()),
    ("mrr", True, ()),
    ("mrr", False, ()),
    ("latency", False, ()),
    ("latency", True, ()),
    ("nosuch", True, ()),
    ("ndcg_at_10", True, ((PARENT_TAG, "sweep"),)),
    ("ndcg_at_10", True, ((GOLDEN_DIGEST, "g1"),)),
    ("ndcg_at_10", True, ((GOLDEN_DIGEST, "g2"), (PARENT_TAG, "sweep"))),
    ("latency", False, ((GOLDEN_DIGEST, "g1"),)),
]  # (metric, maximize, tags); a run's name in a tag stands for its id


def test_every_search_finds_what_mlflow_finds(store, monkeypatch):
    path, ids = store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{path}")
    local, through_mlflow = open_local(f"sqlite:///{path}"), MlflowStore()
    assert isinstance(local, LocalStore) and isinstance(open_store(), LocalStore)
    experiment = local.experiment_id("golden-sweep")
    assert experiment == through_mlflow.experiment_id("golden-sweep")
    for metric, maximize, tags in SEARCHES:
        tags = tuple((key, ids.get(value, value)) for key, value in tags)
        search = RunSearch(experiment, metric, maximize, tags)
        for best_only in (True, False):
            expected = same(through_mlflow.runs(search, best_only))
            assert same(local.runs(search, best_only)) == expected, (search, best_only)
    # what the searches above cover: ties go to the earlier start, then to the smaller run id; NaN,
    # -inf, failed, deleted and replaced runs and another experiment's are never found
    b, c = sorted(["b", "c"], key=ids.get)
    found = {(metric, maximize): [r.name for r in local.runs(RunSearch(experiment, metric, maximize), False)]
             for metric, maximize in (("ndcg_at_10", True), ("mrr", True))}  # fmt: skip
    assert found == {("ndcg_at_10", True): ["a", b, c, "low"], ("mrr", True): ["a", "nan"]}
    best = {(metric, maximize): local.runs(RunSearch(experiment, metric, maximize), True)[0].name
            for metric, maximize in (("ndcg_at_10", True), ("ndcg_at_10", False), ("latency", True), ("latency", False))}  # fmt: skip
    assert best == {
        ("ndcg_at_10", True): "a",
        ("ndcg_at_10", False): "low",
        ("latency", True): "huge",
        ("latency", False): "low",
    }
    tied = RunSearch(experiment, "latency", False, ((GOLDEN_DIGEST, "g1"),))
    assert [r.name for r in local.runs(tied, True)] == [b]


def test_an_experiment_the_store_does_not_have_is_one_line(store, monkeypatch):
    path, _ = store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{path}")
    for reader in (open_local(f"sqlite:///{path}"), MlflowStore()):
        with pytest.raises(InputError, match=f"^no MLflow experiment named 'nope' at sqlite:///{path}$"):
            reader.experiment_id("nope")


def test_the_schema_is_the_one_mlflow_reads_from_its_migrations():
    assert mlflow_schema() == _get_latest_schema_revision()


def test_mlflow_reads_what_the_file_alone_might_answer_otherwise(store, tmp_path, monkeypatch):
    path, _ = store
    copy = tmp_path / "mlflow.db"
    shutil.copy(path, copy)
    assert open_local(f"sqlite:///{copy}") is not None
    for uri in (
        "http://127.0.0.1:5000",
        f"sqlite:///{tmp_path / 'none.db'}",
        f"sqlite:///{copy}?timeout=5",
        "sqlite://",
    ):
        assert open_local(uri) is None, uri
    monkeypatch.setenv("MLFLOW_ENABLE_WORKSPACES", "true")  # experiments scoped by a column not read here
    assert open_local(f"sqlite:///{copy}") is None
    monkeypatch.delenv("MLFLOW_ENABLE_WORKSPACES")
    journal = copy.with_name("mlflow.db-journal")
    journal.write_bytes(b"")  # a journal to roll back: MLflow's open does it (and says so)
    assert open_local(f"sqlite:///{copy}") is None
    journal.unlink()
    with sqlite3.connect(copy) as database:  # an older schema: MLflow refuses the store
        database.execute("UPDATE alembic_version SET version_num = 'bd07f7e963c5'")
    database.close()
    assert open_local(f"sqlite:///{copy}") is None
    copy.write_bytes(b"not a database")
    assert open_local(f"sqlite:///{copy}") is None
