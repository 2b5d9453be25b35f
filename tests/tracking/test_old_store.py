"""Runs logged before the subpackages keep working: a store written by commit 474223c
(tests/data/old_store: `python -m sweep -m chunk=0,40 index=flat,hnsw ...` in /tmp/old-store,
killed with SIGKILL in its 3rd combination: 2 FINISHED children, the parent and the 3rd child
KILLED) whose logged configs, params and config digests name the old `_target_` paths
(`sweep.index.FlatIndex`). `sweep.best` gives its best config with today's paths, `sweep.compare`
and `sweep.check` read its runs, and `resume=true` finishes its sweep. The commands run in a
subprocess (slow); the target map and `best_config` are checked in process.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hydra.utils import get_class
from omegaconf import OmegaConf

from helpers import processes
from helpers.commands import compose_config, runs_in
from helpers.paths import OLD_STORE
from helpers.stores import relocate
from sweep.best import best_config, find_best
from sweep.experiment.trial import build_pipeline, combination_digests
from sweep.tracking.legacy import current_targets, legacy_targets
from sweep.tracking.lifecycle import PARENT_RUN
from sweep.tracking.store import CONFIG_DIGEST, SUPERSEDED_BY

PARENT = "4fa86a666ac04e8fbd35dfc15ea58930"
FLAT = "cfd907d5bb06431dac6e16ec1f023fe8"  # chunk=0 index=flat, FINISHED
HNSW = "505efe31c7c6486e91fdfa2e1b25993f"  # chunk=0 index=hnsw, FINISHED
KILLED = "b74a545e02d344d588d45f091f4898d0"  # chunk=40 index=flat, KILLED by the next process
WRITTEN_IN = "/tmp/old-store"  # where the store was made: its artifact locations are absolute
DATA = ("golden.path=golden.jsonl", "golden.corpus=corpus.jsonl", "cache_dir=cache")


@pytest.fixture
def old_store(tmp_path, monkeypatch) -> Path:
    """A copy of the old store in tmp_path, relocated: MLflow keeps each experiment's and run's
    artifact location as an absolute URI in the database (file:///tmp/old-store/mlruns/...), so
    moving a store means rewriting those prefixes (`relocate`). The originals under tests/data are
    never written. MLflow reads `./mlflow.db` of the copy."""
    copy = tmp_path / "old-store"
    shutil.copytree(OLD_STORE, copy)
    relocate(copy, WRITTEN_IN)
    monkeypatch.chdir(copy)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv(PARENT_RUN, raising=False)
    return copy


def logged(run_id: str, name: str) -> dict:
    return yaml.safe_load((OLD_STORE / "mlruns" / run_id / "artifacts" / "config" / name).read_text())


def targets(config) -> list[str]:
    """Every `_target_` in a resolved config."""
    if not isinstance(config, dict):
        return []
    own = [config["_target_"]] if "_target_" in config else []
    return own + [target for value in config.values() for target in targets(value)]


@pytest.mark.parametrize("run_id", [FLAT, HNSW, KILLED])
def test_the_target_map_turns_an_old_config_into_todays_and_back(run_id):
    old = logged(run_id, "resolved.yaml")
    assert "sweep.index.FlatIndex" in targets(old) or "sweep.index.HNSWIndex" in targets(old)
    today = OmegaConf.to_container(compose_config(*logged(run_id, "overrides.yaml")["overrides"]), resolve=True)
    for how_it_ran in ("resume", "verbosity"):  # not logged: how the sweep ran, not what it measured
        today.pop(how_it_ran)
    assert current_targets(old) == today and legacy_targets(today) == old
    for target in targets(current_targets(old)):
        assert get_class(target).__module__.startswith("sweep.")  # importable where the map says


@pytest.mark.parametrize("run_id", [FLAT, HNSW, KILLED])
def test_a_combination_also_matches_the_digest_its_old_run_was_tagged_with(run_id):
    database = sqlite3.connect(f"file:{OLD_STORE / 'mlflow.db'}?mode=ro", uri=True)
    [tag] = database.execute("SELECT value FROM tags WHERE run_uuid = ? AND key = ?", (run_id, CONFIG_DIGEST))
    database.close()
    cfg = compose_config(*logged(run_id, "overrides.yaml")["overrides"], "resume=true")
    current, legacy = combination_digests(cfg)
    assert legacy == tag[0] and current != legacy


def test_best_config_of_an_old_run_has_todays_targets(old_store):
    winner = find_best("ndcg_at_10")
    assert winner.run_id in {FLAT, HNSW}
    assert winner.command.startswith("python -m sweep chunk=0 index=")
    config = best_config("ndcg_at_10")
    assert config == winner.config and config.model._target_ == "sweep.retrieval.dense.DenseRetriever"
    assert targets(OmegaConf.to_container(config)) == targets(current_targets(logged(winner.run_id, "resolved.yaml")))
    build_pipeline(config)  # instantiable as it is (models load when first used)


def run(old_store: Path, *args: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", PARENT_RUN)}
    return processes.run(
        [sys.executable, "-m", *args], cwd=old_store, env=environment, capture_output=True, text=True, timeout=900
    )


@pytest.mark.slow
def test_best_compare_and_check_read_the_old_runs(old_store):
    best = run(old_store, "sweep.best")
    assert best.returncode == 0, best.stderr[-3000:]
    assert best.stdout.split()[1].rstrip(":") in {FLAT, HNSW}
    assert "_target_: sweep.retrieval.index." in best.stdout and "sweep.index." not in best.stdout
    compared = run(old_store, "sweep.compare", FLAT, HNSW)
    assert compared.returncode == 0, compared.stderr[-3000:]
    checked = run(old_store, "sweep.check", "--baseline", FLAT, "--candidate", HNSW)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert "check passed" in checked.stdout


@pytest.mark.slow
def test_resume_finishes_the_old_killed_sweep_under_its_parent(old_store):
    resumed = run(old_store, "sweep", "-m", "chunk=0,40", "index=flat,hnsw", *DATA, "resume=true")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.count("(resume)") == 2  # the two old runs that had finished stand for themselves
    client, runs = runs_in(f"sqlite:///{old_store / 'mlflow.db'}")
    [parent] = [r for r in runs if r.data.tags.get("sweep.parent") == "true"]
    assert parent.info.run_id == PARENT and parent.info.status == "FINISHED" and "error" not in parent.data.tags
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == PARENT]
    assert len(children) == len(runs) - 1  # nothing outside the old sweep
    finished = [c for c in children if c.info.status == "FINISHED"]
    assert len(finished) == 4 and {FLAT, HNSW} <= {c.info.run_id for c in finished}
    assert {(c.data.params["chunk"], c.data.params["index"]) for c in finished} == {
        ("0", "flat"), ("0", "hnsw"), ("40", "flat"), ("40", "hnsw"),
    }  # fmt: skip
    [killed] = [c for c in children if c.info.status != "FINISHED"]
    assert killed.info.run_id == KILLED and killed.data.tags[SUPERSEDED_BY] in {c.info.run_id for c in finished}
    assert "report.html" in {a.path for a in client.list_artifacts(PARENT)}
