"""`python -m sweep.pool` on a real 2-configuration sweep (`real_sweep`: bm25 and tf-idf on the small
knowledge base): the queue is checked against what the runs logged (run.trec read line by line,
tables/retrieved_chunks.json), then labels added since, --depth, run ids instead of a sweep, and bad
input (one line, exit 2)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import mlflow
import pytest

from helpers import processes
from helpers.data import golden_of
from helpers.stores import on_a_full_disk
from sweep import pool
from sweep.evaluation.record import TrialRecord
from sweep.formats.corpus import Corpus, Document, load_corpus
from sweep.formats.golden import load_golden
from sweep.formats.runs import Run
from sweep.tracking.lifecycle import PARENT_RUN, trial_run
from sweep.tracking.records import save_record


def parent_of(store: str, child: str) -> str:
    return mlflow.MlflowClient(store).get_run(child).data.tags["mlflow.parentRunId"]


def logged(store: str, run_id: str, path: str, folder: Path) -> Path:
    """The run's artifact at `path`, read from `store` (not the process's current tracking URI, which
    an earlier test may have pointed elsewhere)."""
    return Path(
        mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=path, dst_path=str(folder), tracking_uri=store)
    )


def top_documents(trec: Path, depth: int) -> dict[str, list[str]]:
    """Each question's top documents of a TREC run file, ordered as trec_eval orders them."""
    rows: dict[str, list[tuple[float, str]]] = {}
    for line in trec.read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        rows.setdefault(qid, []).append((float(score), doc))
    return {qid: [doc for _, doc in sorted(hits, reverse=True)[:depth]] for qid, hits in rows.items()}


def read_queue(path: Path) -> tuple[dict, dict[str, dict]]:
    header, *questions = [json.loads(line) for line in path.read_text().splitlines()]
    return header["pool"], {q["qid"]: q for q in questions}


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = pool.main(argv)
    except SystemExit as exit:
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def in_store(real_sweep, monkeypatch):
    store, children, cwd, _ = real_sweep
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.chdir(cwd)
    monkeypatch.delenv(PARENT_RUN, raising=False)
    return store, children, cwd


@pytest.mark.slow
def test_the_queue_is_the_union_of_the_runs_unjudged_top_documents(in_store, small_kb_files, tmp_path):
    store, children, cwd = in_store
    parent = parent_of(store, children["bm25"])
    output = tmp_path / "queue.jsonl"
    result = processes.run(
        [sys.executable, "-m", "sweep.pool", "--sweep", parent, "--output", str(output)],
        cwd=cwd, capture_output=True, text=True, timeout=300, env=os.environ | {"MLFLOW_TRACKING_URI": store},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no download bars

    corpus = load_corpus(small_kb_files / "corpus.jsonl")
    golden = load_golden(small_kb_files / "golden.jsonl", corpus, warn=False)
    header, queue = read_queue(output)
    run_ids = [r["run_id"] for r in header["runs"]]
    assert sorted(run_ids) == sorted(children.values())
    assert header["golden"] == str((small_kb_files / "golden.jsonl").resolve())  # the one the runs were scored on
    assert header["depth"] == 10 and header["corpus_digest"] == corpus.digest
    assert list(queue) == [q.id for q in golden]  # every question, unanswerable ones too, in golden order

    tops = {run: top_documents(logged(store, run, "run.trec", tmp_path / run), 10) for run in run_ids}
    chunks = {
        run: json.loads(logged(store, run, "tables/retrieved_chunks.json", tmp_path / run).read_text())
        for run in run_ids
    }
    total = 0
    for q in golden:
        expected: dict[str, dict[str, int]] = {}
        for run in run_ids:
            for rank, doc in enumerate(tops[run].get(q.id, []), start=1):
                if doc not in q.relevant:
                    expected.setdefault(doc, {})[run] = rank
        got = queue[q.id]["candidates"]
        assert {c["doc"]: c["ranks"] for c in got} == expected, q.id
        assert [c["best_rank"] for c in got] == sorted(min(r.values()) for r in expected.values())
        for candidate in got:
            doc, ranks = candidate["doc"], candidate["ranks"]
            order = sorted(ranks, key=lambda run: (ranks[run], run_ids.index(run)))
            logged_chunks = [
                (run, c) for run in order for c in chunks[run][q.id] if c["doc"] == doc
            ]  # each run's chunks best first
            if not logged_chunks:
                assert candidate["chunk"] is None
                continue
            run, best = logged_chunks[0]
            chunk = candidate["chunk"]
            assert (chunk["run"], chunk["start"], chunk["end"]) == (run, best["start"], best["end"])
            assert chunk["text"] == corpus.by_id[doc].content[best["start"] : best["end"]]
        total += len(got)
    assert any(queue[q.id]["candidates"] for q in golden if not q.answerable)  # pooled too
    assert f"candidates: {total} for {len(golden)} questions" in result.stdout
    assert "wrote" in result.stdout and "0 questions with none" in result.stdout


@pytest.mark.slow
def test_labels_and_questions_added_since_the_sweep(in_store, small_kb_files, tmp_path, capsys):
    store, children, _ = in_store
    first = tmp_path / "first.jsonl"
    code, _, err = run_main([children["bm25"], children["tfidf"], "--output", str(first)], capsys)
    assert code == 0, err
    _, before = read_queue(first)
    qid = next(iter(before))
    judged_since = before[qid]["candidates"][0]["doc"]

    golden = tmp_path / "golden.jsonl"
    records = [json.loads(line) for line in (small_kb_files / "golden.jsonl").read_text().splitlines()]
    for record in records:
        if record["id"] == qid:
            record["relevant"][judged_since] = 0  # judged, not relevant: out of the pool
    records.append({"id": "new", "question": "a question the sweep has not seen", "relevant": {}})
    golden.write_text("".join(json.dumps(r) + "\n" for r in records))
    second = tmp_path / "second.jsonl"
    code, out, err = run_main(["--sweep", "latest", "--golden", str(golden), "--output", str(second)], capsys)
    assert code == 0, err
    header, after = read_queue(second)
    assert header["golden"] == str(golden.resolve())
    assert sorted(r["run_id"] for r in header["runs"]) == sorted(children.values())  # the store's one sweep
    assert [c["doc"] for c in after[qid]["candidates"]] == [c["doc"] for c in before[qid]["candidates"][1:]]
    assert "new" not in after and "1 questions are not in these runs (added since?) and were not pooled: new" in out

    shallow = tmp_path / "shallow.jsonl"
    code, out, _ = run_main([children["bm25"], children["tfidf"], "--depth", "1", "--output", str(shallow)], capsys)
    assert code == 0
    _, top = read_queue(shallow)
    assert all(len(q["candidates"]) <= 2 and all(c["best_rank"] == 1 for c in q["candidates"]) for q in top.values())
    without = sum(not q["candidates"] for q in top.values())
    assert f"{without} questions with none" in out


@pytest.mark.slow
def test_bad_input_is_one_line_and_exit_2(in_store, small_kb_files, tmp_path, capsys):
    store, children, cwd = in_store
    parent = parent_of(store, children["bm25"])
    output = tmp_path / "queue.jsonl"
    other = tmp_path / "other-golden.jsonl"
    shutil.copyfile(small_kb_files / "golden.jsonl", other)
    edited = tmp_path / "edited-corpus.jsonl"  # one word changed: chunk offsets might not match any more
    edited.write_text((small_kb_files / "corpus.jsonl").read_text().replace("policy", "Policy", 1))
    with trial_run("pool-test-other", "other golden set") as run:  # an experiment of its own: `best` ignores it
        golden_set, corpus = golden_of({"x": {"d": 1}}), Corpus((Document("d", "text"),))
        save_record(
            TrialRecord(run.run_id, {}, results=Run.from_ranked({"x": [("d", 1.0)]}), golden=golden_set, corpus=corpus)
        )
    cases = [
        ([], "give either --sweep PARENT_RUN_ID or one or more RUN_IDs"),
        (["--sweep", parent, children["bm25"]], "give either --sweep"),
        (["--sweep", children["bm25"]], "not a sweep's parent run"),
        ([parent], f"{parent} is a sweep's parent run: pool its children with --sweep {parent}"),
        (["0" * 32], f"no run {'0' * 32} at"),
        (["not-a-run"], "'not-a-run': not an MLflow run id"),
        ([children["bm25"], run.run_id], f"the runs were scored on different golden sets: {children['bm25']}"),
        ([children["bm25"], "--corpus", str(edited)], "not the corpus the runs searched"),
        ([children["bm25"], "--golden", str(tmp_path / "absent.jsonl")], "absent.jsonl: no such file"),
        (["--sweep", "latest", "--experiment", "pool-test-other"], "no sweep in experiment 'pool-test-other'"),
        (["--sweep", "latest", "--experiment", "nope"], "no MLflow experiment named 'nope'"),
    ]
    for argv, expected in cases:
        code, out, err = run_main([*argv, "--output", str(output)], capsys)
        assert code == 2 and err.startswith("error: ") and expected in err, (argv, err)
        assert len(err.strip().splitlines()) == 1 and not output.exists()
    code, _, err = run_main([children["bm25"], "--golden", str(other), "--output", str(other)], capsys)
    assert code == 2 and "is the golden set or the corpus" in err
    assert other.read_bytes() == (small_kb_files / "golden.jsonl").read_bytes()  # untouched
    code, _, err = run_main([children["bm25"], "--depth", "0", "--output", str(output)], capsys)
    assert code == 2 and "must be at least 1" in err


@pytest.mark.slow
def test_an_output_on_a_full_disk_is_one_line_and_exit_2(in_store, tmp_path):
    """As `sweep.best --output` does, not a traceback (30 KiB left: the queue is larger). The queue
    is written atomically: its temporary file is removed when the write fails."""
    store, children, cwd = in_store
    fs = tmp_path / "fs"
    output = fs / "queue.jsonl"
    args = [sys.executable, "-m", "sweep.pool", children["bm25"], children["tfidf"], "--output", str(output)]
    code, stderr = on_a_full_disk(cwd, fs, args, {"MLFLOW_TRACKING_URI": store})
    assert code == 2
    assert stderr == f"error: --output {output}: cannot write it (No space left on device); nothing was written\n"
