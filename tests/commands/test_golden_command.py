"""`python -m sweep.golden diff` and `check`: files and `run:<id>` (the golden file a run stored, with its
lineage), text and JSON, bad input; runs logged in process to a real store, and one real sweep (slow)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import mlflow
import pytest

from helpers import processes
from helpers.commands import one_error_line
from helpers.data import write_kb_slice
from helpers.store_folders import tracking_in
from helpers.stores import copy_blank_store
from sweep import golden as command
from sweep.evaluation.record import TrialRecord
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden
from sweep.tracking.digests import golden_digest
from sweep.tracking.lifecycle import trial_run
from sweep.tracking.records import save_record

EXPERIMENT = "golden-sweep"


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = command.main(argv)
    except SystemExit as exit:
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    return path


def log_scored_on(golden_path: Path, corpus_path: Path, name: str) -> str:
    """A run that logs the golden set as a trial logs it (`save_record`): its id."""
    corpus = load_corpus(corpus_path)
    with trial_run(EXPERIMENT, name) as run:
        save_record(TrialRecord(name, {}, golden=load_golden(golden_path, corpus, warn=False), corpus=corpus))
    return run.run_id


@pytest.fixture
def kb(tmp_path, monkeypatch) -> Path:
    """The small knowledge base's files in tmp_path/kb, tmp_path the working folder with a blank store."""
    copy_blank_store(tmp_path)
    tracking_in(tmp_path, monkeypatch)
    yield write_kb_slice(tmp_path / "kb", {"Finance"}, documents=12)
    mlflow.set_tracking_uri(None)


def test_a_run_stores_its_golden_file_and_the_one_it_was_edited_from(kb, capsys):
    golden_path, corpus_path = kb / "golden.jsonl", kb / "corpus.jsonl"
    first = log_scored_on(golden_path, corpus_path, "first")
    client = mlflow.MlflowClient()
    logged = client.get_run(first)
    assert {a.path for a in client.list_artifacts(first, "golden")} == {"golden/golden.jsonl"}
    stored = Path(client.download_artifacts(first, "golden/golden.jsonl", str(kb.parent / "download")))
    assert stored.read_bytes() == golden_path.read_bytes()
    assert logged.data.tags["data.golden_file_sha256"] == hashlib.sha256(golden_path.read_bytes()).hexdigest()
    assert logged.data.tags["data.golden"] == str(golden_path.absolute())
    assert "data.golden_parent_digest" not in logged.data.tags  # the first set at that path
    # the file edited: a question reworded; the next run's parent is the first run's set
    edited = records(golden_path)
    edited[0]["question"] = "a question asked another way"
    write(golden_path, edited)
    second = log_scored_on(golden_path, corpus_path, "second")
    third = log_scored_on(golden_path, corpus_path, "third")  # the same set again: the same parent
    for run_id in (second, third):
        tags = client.get_run(run_id).data.tags
        assert tags["data.golden_parent_digest"] == logged.data.tags["data.golden_digest"] != tags["data.golden_digest"]
        assert tags["data.golden_parent_run"] == first
        inputs = {
            next(t.value for t in i.tags if t.key == "mlflow.data.context"): i.dataset.digest
            for i in client.get_run(run_id).inputs.dataset_inputs
        }
        assert inputs == {"golden": tags["data.golden_digest"], "golden.parent": logged.data.tags["data.golden_digest"]}
    # the diff of the two runs' stored copies: the one reworded question
    code, out, err = run_main(["diff", f"run:{first}", f"run:{second}", "--json"], capsys)
    assert code == 0, err
    diff = json.loads(out)
    assert (diff["old"], diff["new"]) == (f"run:{first}", f"run:{second}")
    assert diff["questions"]["reworded"] == [
        {"id": edited[0]["id"], "old": records(stored)[0]["question"], "new": "a question asked another way"}
    ]
    assert sum(n for key, n in diff["summary"].items() if not key.endswith("_questions")) == 1
    code, out, _ = run_main(["diff", f"run:{first}", str(golden_path)], capsys)
    assert code == 0 and out.splitlines()[2] == (
        f"~ question {edited[0]['id']} reworded: {records(stored)[0]['question']!r} -> 'a question asked another way'"
    )


def test_diff_of_two_files_as_text_and_json(kb, capsys):
    old = kb / "golden.jsonl"
    new = records(old)
    removed = new.pop(1)
    new[0]["type"] = "procedural"
    new_path = write(kb / "new.jsonl", new)
    code, out, _ = run_main(["diff", str(old), str(new_path), "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["questions"]["removed"] == [
        {"id": removed["id"], "question": removed["question"], "type": removed.get("type", "untyped")}
    ]
    assert data["fields"] == [{"id": new[0]["id"], "field": "type", "old": "factoid", "new": "procedural"}]
    code, out, _ = run_main(["diff", str(old), str(new_path)], capsys)
    assert code == 0 and out.splitlines()[1].startswith("questions: 0 added, 1 removed, 0 reworded;")
    assert f"- question {removed['id']}" in out


def test_check_exits_1_on_drift_and_0_without(kb, capsys):
    golden_path, corpus_path = kb / "golden.jsonl", kb / "corpus.jsonl"
    code, out, _ = run_main(["check", str(golden_path), "--corpus", str(corpus_path)], capsys)
    assert code == 0 and out.splitlines()[-1] == "no drift"
    documents = records(corpus_path)
    judged = next(iter(records(golden_path)[0]["relevant"]))
    fewer = write(kb / "fewer.jsonl", [d for d in documents if d["id"] != judged])
    code, out, _ = run_main(["check", str(golden_path), "--corpus", str(fewer), "--json"], capsys)
    data = json.loads(out)
    assert code == 1 and data["summary"]["missing_documents"] >= 1
    assert judged in {m["document"] for m in data["missing_documents"]}


def test_bad_input_is_one_line_and_exit_2(kb, capsys):
    no_copy = TrialRecord("memory", {"model": "bm25"}, golden=load_golden(kb / "golden.jsonl", warn=False))
    with trial_run(EXPERIMENT, "memory") as run:  # its config, and no corpus: the golden set is not logged
        save_record(no_copy)
    golden_path = str(kb / "golden.jsonl")
    for argv, message in (
        (["diff", "missing.jsonl", golden_path], "missing.jsonl: no such file or directory"),
        (["diff", "run:12345", golden_path], "'12345': not an MLflow run id (32 hexadecimal digits)"),
        (["diff", f"run:{'0' * 32}", golden_path], f"no run {'0' * 32} at"),
        (["diff", f"run:{run.run_id}", golden_path], f"run {run.run_id} (a FINISHED run) stored no golden file"),
        (["check", golden_path, "--corpus", "nowhere"], "--corpus nowhere: no such file or folder"),
    ):
        code, _, err = run_main(argv, capsys)
        assert code == 2 and message in one_error_line(err), err


@pytest.mark.slow
def test_a_real_sweeps_runs_stored_the_file_byte_for_byte(real_sweep, small_kb_files, tmp_path):
    store, runs, cwd, _ = real_sweep
    client = mlflow.MlflowClient(store)
    for run_id in runs.values():
        stored = Path(client.download_artifacts(run_id, "golden/golden.jsonl", str(tmp_path / run_id)))
        assert stored.read_bytes() == (small_kb_files / "golden.jsonl").read_bytes()
    result = processes.run(
        [sys.executable, "-m", "sweep.golden", "diff", f"run:{runs['bm25']}", str(small_kb_files / "golden.jsonl"),
         "--json"],
        cwd=cwd, capture_output=True, text=True, timeout=300, env=os.environ | {"MLFLOW_TRACKING_URI": store},
    )  # fmt: skip
    assert result.returncode == 0 and result.stderr == "", result.stderr
    diff = json.loads(result.stdout)
    assert diff["summary"]["old_questions"] == diff["summary"]["new_questions"] > 0
    assert sum(n for key, n in diff["summary"].items() if not key.endswith("_questions")) == 0
    scored = load_golden(small_kb_files / "golden.jsonl", load_corpus(small_kb_files / "corpus.jsonl"), warn=False)
    assert client.get_run(runs["bm25"]).data.tags["data.golden_digest"] == golden_digest(scored)
