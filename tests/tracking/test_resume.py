"""`resume=true`: a rerun of a sweep skips the combinations that finished in its last, unfinished
parent run (same config digest, corpus digest and golden-set digest) and runs the rest under that
parent; a run a killed process left RUNNING is marked KILLED and superseded by its rerun. The kill
test and the reruns start `python -m sweep` in a subprocess (slow); the rules are checked in process.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import mlflow
import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from helpers import processes
from helpers.commands import compose_config, one_error_line, runs_in, sweep, sweep_command, wait_for
from sweep.errors import InputError
from sweep.experiment.cli import quoted
from sweep.experiment.preflight import preflight
from sweep.experiment.trial import combination_digests
from sweep.tracking.lifecycle import process_tags
from sweep.tracking.reading import sweep_children
from sweep.tracking.store import CONFIG_DIGEST, SUPERSEDED_BY
from sweep.tracking.sweeps import job_environment, resumable_sweep

# lexical: a combination runs about a second (the 3rd, the first with chunk=200, also loads the
# tokenizer), and the kill, sent within a poll (0.1 s) of its start, lands in it
SWEEP = ("-m", "chunk=0,200", "model=bm25,tfidf")


def sweep_runs(store: str) -> tuple[mlflow.MlflowClient, list, list]:
    """(client, parent runs, child runs) in the store."""
    client, runs = runs_in(store)
    parents = [r for r in runs if r.data.tags.get("sweep.parent") == "true"]
    return client, parents, [r for r in runs if r.data.tags.get("mlflow.parentRunId")]


def combination(run) -> tuple[str, str]:
    return run.data.params["chunk"], run.data.params["model"]


def leaderboard(client: mlflow.MlflowClient, parent_id: str, where: Path) -> list[dict]:
    table = json.loads(Path(client.download_artifacts(parent_id, "tables/leaderboard.json", str(where))).read_text())
    return [dict(zip(table["columns"], row)) for row in table["data"]]


@pytest.mark.slow
def test_a_sweep_killed_in_its_third_combination_resumes_under_the_same_parent(tmp_path, small_kb_files, monkeypatch):
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    killed.mkdir()
    whole.mkdir()
    args, env = sweep_command(killed, small_kb_files, *SWEEP)
    process = processes.start(args, cwd=killed, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    before = wait_for(
        killed / "mlflow.db",
        lambda runs: (
            sum(r["child"] and r["status"] == "FINISHED" for r in runs) == 2
            and any(r["child"] and r["status"] == "RUNNING" for r in runs)
        ),
        timeout=300,
    )
    process.kill()  # SIGKILL: nothing closes the runs
    process.wait()
    [parent_id] = [r["run_id"] for r in before if not r["child"]]
    finished_before = {r["run_id"] for r in before if r["child"] and r["status"] == "FINISHED"}
    [orphan_id] = [r["run_id"] for r in before if r["child"] and r["status"] == "RUNNING"]

    resumed = sweep(killed, small_kb_files, *SWEEP, "resume=true")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.count("(resume)") == 2  # the two that had finished, not run again
    store = f"sqlite:///{killed / 'mlflow.db'}"
    client, [parent], children = sweep_runs(store)
    assert parent.info.run_id == parent_id and parent.info.status == "FINISHED"
    assert "error" not in parent.data.tags and parent.data.tags["sweep.resumed"] == "1"
    assert parent.data.tags["sweep.overrides"].startswith("chunk=0,200 model=bm25,tfidf golden.path=")  # no resume=
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent_id}
    finished = [c for c in children if c.info.status == "FINISHED"]
    [orphan] = [c for c in children if c.info.status != "FINISHED"]
    assert orphan.info.run_id == orphan_id and orphan.info.status == "KILLED"
    assert "ended while the run was RUNNING" in orphan.data.tags["error"]
    assert len(finished) == 4 and len({combination(c) for c in finished}) == 4  # none twice
    assert finished_before < {c.info.run_id for c in finished}
    [rerun] = [c for c in finished if c.info.run_id == orphan.data.tags[SUPERSEDED_BY]]
    # the killed try may have died before logging its params: its config digest, tagged at its start, says which it was
    assert rerun.data.tags[CONFIG_DIGEST] == orphan.data.tags[CONFIG_DIGEST]
    assert rerun.info.run_name == orphan.info.run_name
    assert all("resume" not in c.info.run_name and "resume" not in c.data.params for c in finished)  # resumed or not
    rows = leaderboard(client, parent_id, tmp_path)
    assert len(rows) == 4 and {row["status"] for row in rows} == {"FINISHED"}  # the KILLED try is not a row
    monkeypatch.setenv(
        "MLFLOW_TRACKING_URI", store
    )  # what compare, pool and best read as the sweep's runs: not it either
    assert sorted(c.run_id for c in sweep_children(parent_id)) == sorted(c.info.run_id for c in finished)

    uninterrupted = sweep(whole, small_kb_files, *SWEEP)
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    _, _, reference = sweep_runs(f"sqlite:///{whole / 'mlflow.db'}")
    objective = {combination(c): c.data.metrics["ndcg_at_10"] for c in finished}
    assert objective == {combination(c): c.data.metrics["ndcg_at_10"] for c in reference}  # exactly
    assert {c.data.tags[CONFIG_DIGEST] for c in finished} == {c.data.tags[CONFIG_DIGEST] for c in reference}


@pytest.mark.slow
def test_without_resume_a_rerun_is_a_new_sweep_and_resuming_a_finished_one_starts_anew(tmp_path, small_kb_files):
    lexical = ("-m", "model=bm25,tfidf", "chunk=0")  # whole documents: no tokenizer to load
    assert sweep(tmp_path, small_kb_files, *lexical).returncode == 0
    again = sweep(tmp_path, small_kb_files, *lexical)
    assert again.returncode == 0, again.stderr[-3000:]
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _, parents, children = sweep_runs(store)
    assert len(parents) == 2 and len(children) == 4 and {c.info.status for c in children} == {"FINISHED"}
    for parent in parents:
        assert sum(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children) == 2
    # the last sweep with these overrides finished: there is nothing to resume, so a new one runs
    resumed = sweep(tmp_path, small_kb_files, *lexical, "resume=true")
    assert resumed.returncode == 0 and "(resume)" not in resumed.stdout
    _, parents, children = sweep_runs(store)
    assert len(parents) == 3 and len(children) == 6 and SUPERSEDED_BY not in str([c.data.tags for c in children])


def test_the_config_digest_is_what_a_combination_measures():
    digest = combination_digests(compose_config("chunk=64"))[0]
    assert digest == combination_digests(compose_config("chunk=64", "resume=true", "cache_dir=/elsewhere"))[0]
    assert digest != combination_digests(compose_config("chunk=128"))[0]
    assert digest != combination_digests(compose_config("chunk=64", "index=hnsw"))[0]


def test_resume_is_for_sweeps_and_a_bad_value_is_one_line(capsys):
    for argv, message in (
        (["resume=true"], "resume=true resumes a sweep: add -m (a single run has nothing to resume)"),
        (["-m", "chunk=64,128", "resume=maybe"], "resume='maybe': must be true or false"),
    ):
        with pytest.raises(SystemExit) as exited:
            preflight(argv)
        assert exited.value.code == 2 and one_error_line(capsys.readouterr().err).startswith(message)
    assert preflight(["-m", "chunk=64,128", "resume=true"]) == 2


@pytest.mark.slow
def test_a_sweep_whose_process_still_runs_cannot_be_resumed(tmp_path):
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("e")
    tags = {"sweep.parent": "true", "sweep.overrides": "chunk=64,128"}
    finished = client.create_run(experiment, tags=tags)
    client.set_terminated(finished.info.run_id, "FINISHED")
    client.create_run(experiment, tags=tags | {"sweep.overrides": "chunk=32,64"})  # another sweep
    mlflow.set_tracking_uri(client.tracking_uri)
    try:
        assert resumable_sweep(experiment, "chunk=64,128") is None  # the last one finished
        killed = client.create_run(experiment, tags=tags)
        client.set_terminated(killed.info.run_id, "KILLED")
        assert resumable_sweep(experiment, "chunk=64,128").info.run_id == killed.info.run_id
        running = client.create_run(experiment, tags=tags | process_tags())  # this very process
        with pytest.raises(InputError, match=f"the sweep {running.info.run_id} with these overrides is still running"):
            resumable_sweep(experiment, "chunk=64,128")
    finally:
        mlflow.set_tracking_uri(None)


def test_jobs_get_the_parent_and_an_absolute_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert job_environment("abc") == {
        "SWEEP_PARENT_RUN_ID": "abc",
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
    }
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert job_environment("abc")["MLFLOW_TRACKING_URI"] == "http://127.0.0.1:5000"


@pytest.mark.parametrize("value", ["sqlite:////tmp/a b/mlflow.db", "it's", "a\\", "a\\'b", "x${y}", "0123abc"])
def test_a_value_passed_to_the_jobs_arrives_unchanged(value):
    parsed = OverridesParser.create().parse_override(f"++hydra.job.env_set.VALUE={quoted(value)}")
    assert OmegaConf.create({"value": parsed.value()}).value == value  # as the job's env_set resolves it
