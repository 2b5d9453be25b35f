"""`hydra/sweeper=optuna`: Optuna picks the combinations, each trial is a child of one parent run,
and it maximises the objective (the plugin minimises unless told otherwise). A failed trial is a
FAILED child and an Optuna FAIL, and the study goes on (hydra-optuna-sweeper 1.3.0 stops the whole
sweep when a trial returns NaN, hydra#2237). Marked slow: each starts `python -m sweep`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import mlflow
import pytest
import yaml
from mlflow.entities import Run

from helpers.commands import runs_in, sweep

OPTUNA = ("-m", "hydra/sweeper=optuna", "hydra.sweeper.sampler.seed=0")


def sweep_runs(cwd: Path) -> tuple[mlflow.MlflowClient, Run, list[Run]]:
    """(client, the parent run, its children in the order they ran) of the one sweep in `cwd`."""
    client, runs = runs_in(f"sqlite:///{cwd / 'mlflow.db'}")
    [parent] = [r for r in runs if r.data.tags.get("sweep.parent") == "true"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(runs) == 1 + len(children)
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    return client, parent, sorted(children, key=lambda c: c.info.start_time)


def leaderboard_rows(client: mlflow.MlflowClient, parent: Run, where: Path) -> list[list]:
    path = client.download_artifacts(parent.info.run_id, "tables/leaderboard.json", str(where))
    return json.loads(Path(path).read_text())["data"]


@pytest.mark.slow
def test_optuna_runs_4_trials_under_one_parent_maximising_the_objective(tmp_path, small_kb_files):
    first, again = tmp_path / "first", tmp_path / "again"
    first.mkdir()
    # lexical models: what Optuna samples and maximises is the point here, not the embedding
    space = ("model=choice(bm25,tfidf)", "chunk=choice(64,128)")
    result = sweep(first, small_kb_files, *OPTUNA, "hydra.sweeper.n_trials=4", *space)
    assert result.returncode == 0, result.stderr[-3000:]
    client, parent, children = sweep_runs(first)
    assert len(children) == 4 and {c.info.status for c in children} == {"FINISHED"}
    sampled = [(c.data.params["model"], c.data.params["chunk"]) for c in children]
    for (model, chunk), child in zip(sampled, children):
        assert model in {"bm25", "tfidf"} and chunk in {"64", "128"}
        assert {f"model={model}", f"chunk={chunk}"} <= set(child.data.tags["sweep.overrides"].split())
    assert len(leaderboard_rows(client, parent, tmp_path)) == 4
    # the study's best is the best child: Optuna maximised what the task returned, the objective
    objective = [c.data.metrics["ndcg_at_10"] for c in children]
    assert max(objective) > min(objective)  # else minimising would pass too
    results = yaml.safe_load((first / "multirun" / "optimization_results.yaml").read_text())
    assert results["best_value"] == pytest.approx(max(objective), abs=1e-12)
    best = {trial for trial, value in zip(sampled, objective) if value == max(objective)}
    assert (results["best_params"]["model"], str(results["best_params"]["chunk"])) in best
    assert "hydra.sweeper.direction=maximize" in (first / "multirun" / "0" / ".hydra" / "hydra.yaml").read_text()
    # the sampler's seed makes the trials reproducible: the same first two
    again.mkdir()
    assert sweep(again, small_kb_files, *OPTUNA, "hydra.sweeper.n_trials=2", *space).returncode == 0
    assert [(c.data.params["model"], c.data.params["chunk"]) for c in sweep_runs(again)[2]] == sampled[:2]


@pytest.mark.slow
def test_a_failed_optuna_trial_is_a_failed_child_and_the_study_goes_on(tmp_path, small_kb_files):
    # ivf's 16 lists need at least 16 chunks; 12 whole documents are too few
    result = sweep(tmp_path, small_kb_files, *OPTUNA, "hydra.sweeper.n_trials=4", "index=choice(flat,ivf)", "chunk=0")
    assert result.returncode == 1, result.stderr[-3000:]
    client, parent, children = sweep_runs(tmp_path)
    assert len(children) == 4 and len(leaderboard_rows(client, parent, tmp_path)) == 4
    statuses = {c.data.params["index"]: set() for c in children}
    for child in children:
        statuses[child.data.params["index"]].add(child.info.status)
    assert statuses == {"flat": {"FINISHED"}, "ivf": {"FAILED"}}  # seed 0 samples both
    failed = sum(c.info.status == "FAILED" for c in children)
    assert f"error: {failed} of 4 combinations failed:" in result.stderr
    results = yaml.safe_load((tmp_path / "multirun" / "optimization_results.yaml").read_text())
    assert results["best_params"] == {"index": "flat"} and not math.isnan(results["best_value"])
