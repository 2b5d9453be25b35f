"""What a store or a sweep meets when the files under it are not what they seem (issue 49, item
13): another program's SQLite database at mlflow.db is refused before MLflow writes its tables
into it; a corpus edited while a sweep runs gives children that the leaderboard does not rank
together; a golden file whose lines were only reordered keeps its digest, and old runs (which
carry the digest in file order) still pair with new ones of the same file. Real SQLite stores in
tmp_path, logged in process as trials log; the commands in subprocesses (slow)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path

import mlflow
import pytest

from helpers import processes
from helpers.commands import one_error_line, runs_in, sweep, sweep_command, wait_for
from helpers.data import golden_of, ranked
from helpers.logged import BROKEN, EXPERIMENT, golden, log_run, rankings, scored_record
from helpers.store_folders import killed_after_the_first_combination
from helpers.stores import command
from sweep import best
from sweep.errors import InputError
from sweep.evaluation import score
from sweep.evaluation.leaderboard import NOT_RANKED, build
from sweep.evaluation.record import TrialRecord
from sweep.experiment.cli import close_sweep
from sweep.formats.corpus import Corpus, Document
from sweep.formats.golden import GoldenSet, load_golden, save_golden
from sweep.tracking.digests import (
    CORPUS_DIGEST,
    GOLDEN_DIGEST,
    GOLDEN_DIGEST_IN_FILE_ORDER,
    check_same_golden_set,
    file_order_digest,
    golden_digest,
    scored_on,
)
from sweep.tracking.lifecycle import trial_run
from sweep.tracking.records import load_record, save_record
from sweep.tracking.store import SUPERSEDED_BY, connect
from sweep.tracking.sweeps import start_sweep

# ---------------------------------------------------------------- another program's SQLite file at mlflow.db


def notes_database(path: Path) -> str:
    """An SQLite database of another program at `path` (one table, `notes`); its sha256."""
    with sqlite3.connect(path) as database:
        database.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        database.execute("INSERT INTO notes (text) VALUES ('buy milk')")
    database.close()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tables(path: Path) -> list[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as database:
        names = sorted(row[0] for row in database.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    database.close()
    return names


def refusal(uri: str, path: Path) -> str:
    return (
        f"{uri}: {path} is another program's SQLite database, not an MLflow store (its tables: notes; no "
        "alembic_version or experiments); nothing was written to it: point MLFLOW_TRACKING_URI at another file "
        "(sqlite:///PATH) or move this one away"
    )


@pytest.mark.parametrize("create", [True, False])
def test_another_programs_database_is_refused_before_mlflow_writes_into_it(tmp_path, create):
    """Before: MLflow made its 60-odd tables in the file, beside `notes` (even for a reading command)."""
    path = tmp_path / "mlflow.db"
    before = notes_database(path)
    uri = f"sqlite:///{path}"
    with pytest.raises(InputError) as refused:
        connect(uri, create=create)
    assert str(refused.value) == refusal(uri, path)
    assert tables(path) == ["notes"] and hashlib.sha256(path.read_bytes()).hexdigest() == before
    mlflow.set_tracking_uri(None)


def test_an_empty_file_or_a_new_path_becomes_a_store(tmp_path):
    empty, new = tmp_path / "empty.db", tmp_path / "new" / "mlflow.db"
    empty.touch()
    for path in (empty, new):
        connect(f"sqlite:///{path}")
        assert {"alembic_version", "experiments", "runs"} <= set(tables(path))
    mlflow.set_tracking_uri(None)


@pytest.mark.slow
def test_the_commands_refuse_another_programs_database_in_one_line(tmp_path, small_kb_files):
    before = notes_database(tmp_path / "mlflow.db")
    message = refusal("sqlite:///mlflow.db", tmp_path / "mlflow.db")
    result = command(tmp_path, "sweep.best")
    assert result.returncode == 2 and one_error_line(result.stderr) == message
    run = sweep(tmp_path, small_kb_files, "model=bm25", "chunk=0")
    assert run.returncode == 2 and one_error_line(run.stderr) == message
    assert tables(tmp_path / "mlflow.db") == ["notes"]
    assert hashlib.sha256((tmp_path / "mlflow.db").read_bytes()).hexdigest() == before
    assert not (tmp_path / "mlruns").exists()


# ---------------------------------------------------------------- a corpus edited while the sweep runs


def log_on(name: str, golden_set: GoldenSet, corpus: Corpus, results: dict[str, list[str]]) -> str:
    """A run of `name` scored on `golden_set`, searching `corpus`."""
    with trial_run(EXPERIMENT, name) as run:
        save_record(scored_record(name, golden_set, corpus, score(golden_set, ranked(results))))
    return run.run_id


def corpus_of(golden_set: GoldenSet, text: str) -> Corpus:
    return Corpus(tuple(Document(d, text) for q in golden_set for d in q.relevant))


def test_a_sweep_whose_corpus_changed_ranks_the_children_of_one_corpus_and_names_the_others(tracking):
    """Before: one leaderboard ranked all three together, with no word of the change."""
    g = golden()
    before, after = corpus_of(g, "text"), corpus_of(g, "text, edited")
    parent = start_sweep(EXPERIMENT, ["-m", "model=first,second,third"], "ndcg_at_10")
    first = log_on("first", g, before, rankings(g))
    second = log_on("second", g, after, rankings(g, BROKEN))
    third = log_on("third", g, after, rankings(g))
    summary, html = close_sweep()
    results = summary.results
    board = results.leaderboard
    assert list(board.index) == [third, second, first]
    assert list(board["status"]) == ["FINISHED", "FINISHED", NOT_RANKED] and board["mean"].isna().tolist()[2]
    note = (
        f"Not ranked: 1 run was scored on another corpus than the 2 ranked ({CORPUS_DIGEST} {after.digest[:12]}; "
        f"the corpus changed during the sweep): model=first ({before.digest[:12]}); sweep again to rank them together"
    )
    assert results.note == note and results.mde_line().endswith(f" answerable questions. {note}")
    assert note in html  # the report says it under the leaderboard too
    assert list(results.per_query.columns) == [third, second]
    client = mlflow.MlflowClient()
    logged = json.loads(Path(client.download_artifacts(parent, "tables/leaderboard.json", str(tracking))).read_text())
    assert [row[logged["columns"].index("status")] for row in logged["data"]] == ["FINISHED", "FINISHED", NOT_RANKED]


def test_on_a_tie_the_earliest_runs_corpus_is_ranked():
    records = [
        TrialRecord(name, {}, metrics={}, tables={"per_query": per_query}, digests={CORPUS_DIGEST: digest},
                    run_id=name, status="FINISHED")
        for name, digest, per_query in (
            ("a", "1" * 40, _per_query([1.0, 0.5])),
            ("b", "2" * 40, _per_query([0.0, 0.5])),
        )
    ]  # fmt: skip
    results = build("m", records)
    assert list(results.leaderboard.index) == ["a", "b"] and results.leaderboard.at["b", "status"] == NOT_RANKED
    assert "than the 1 ranked (data.corpus_digest 111111111111;" in results.note
    assert build("m", [records[0]]).note == ""


def _per_query(values):
    import pandas as pd

    return pd.DataFrame({"qid": [f"q{i}" for i in range(len(values))], "question": "", "type": "t", "m": values})


@pytest.mark.slow
def test_a_corpus_edited_in_the_middle_of_a_real_sweep(tmp_path, small_kb_files):
    """`python -m sweep -m ...` while the corpus file is edited after its first combination
    finished: the runs searching the corpus most of them searched are ranked, the line under the
    leaderboard names the others."""
    data = tmp_path / "data"
    shutil.copytree(small_kb_files, data)
    args, env = sweep_command(tmp_path, data, "-m", "model=bm25,tfidf", "chunk=0,200")
    process = processes.start(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for(tmp_path / "mlflow.db", lambda runs: any(r["child"] and r["status"] == "FINISHED" for r in runs))
    edit_the_first_document(data / "corpus.jsonl")
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output[-3000:]
    _, runs = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    children = sorted((run for run in runs if "sweep.parent" not in run.data.tags), key=lambda r: r.info.start_time)
    digests = {run.data.tags["sweep.overrides"]: run.data.tags[CORPUS_DIGEST] for run in children}
    assert len(digests) == 4 and len(set(digests.values())) == 2  # the edit landed between the 1st and the 4th
    kept = Counter(digests.values()).most_common(1)[0][0]  # most runs' corpus; on a tie the earliest run's
    line = next(line for line in output.splitlines() if "Not ranked: " in line)
    assert "the corpus changed during the sweep" in line and "sweep again to rank them together" in line
    assert f"({CORPUS_DIGEST} {kept[:12]};" in line
    for overrides, digest in digests.items():
        assert (f"{overrides} ({digest[:12]})" in line) == (digest != kept), overrides


def edit_the_first_document(corpus: Path) -> None:
    """One document's text changed, the file replaced whole (a combination never reads half of it)."""
    lines = corpus.read_text().splitlines()
    first = json.loads(lines[0])
    first["text"] += " Edited while the sweep ran."
    edited = corpus.with_name("corpus.edited")
    edited.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    os.replace(edited, corpus)


@pytest.mark.slow
def test_resume_after_the_corpus_changed_runs_the_finished_combination_again(tmp_path, small_kb_files):
    """The corpus digest is what `resume=true` reuses a run by: the run that finished on the old
    corpus is superseded, and the resumed sweep ranks its two children of the new one together."""
    data = tmp_path / "data"
    shutil.copytree(small_kb_files, data)
    overrides = ("-m", "model=bm25,tfidf", "chunk=0")
    finished_before = killed_after_the_first_combination(tmp_path, data, *overrides)
    edit_the_first_document(data / "corpus.jsonl")
    resumed = sweep(tmp_path, data, *overrides, "resume=true")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "(resume)" not in resumed.stdout + resumed.stderr and "Not ranked" not in resumed.stdout
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert client.get_run(finished_before).data.tags[SUPERSEDED_BY]


# ---------------------------------------------------------------- a golden file whose lines were only reordered


def in_two_orders() -> tuple[GoldenSet, GoldenSet]:
    full = golden()
    return full, golden_of({q.id: q.relevant for q in reversed(list(full))}, {q.id: q.type for q in full})


def test_the_golden_digest_ignores_the_order_of_the_lines(tmp_path):
    """Before: the reversed file had another digest, and every run of it was "another golden set"."""
    ordered, reversed_ = in_two_orders()
    assert golden_digest(ordered) == golden_digest(reversed_)
    assert file_order_digest(ordered) != file_order_digest(reversed_)
    assert golden_digest(ordered) == file_order_digest(ordered)  # its lines are in id order: as before
    save_golden(reversed_, tmp_path / "reversed.jsonl")
    assert golden_digest(load_golden(tmp_path / "reversed.jsonl")) == golden_digest(ordered)
    changed = golden_of({**{q.id: q.relevant for q in ordered}, "f00": {"doc-f01": 1}})
    assert golden_digest(changed) != golden_digest(ordered)  # a grade is still a change


def old_run(run_id: str, golden_set: GoldenSet) -> None:
    """Make the logged run `run_id` as runs logged before the digest ignored line order are: its
    golden digest the one in file order, no file-order tag."""
    client = mlflow.MlflowClient()
    client.set_tag(run_id, GOLDEN_DIGEST, file_order_digest(golden_set))
    client.delete_tag(run_id, GOLDEN_DIGEST_IN_FILE_ORDER)


def test_resume_pairs_an_old_run_and_a_new_run_with_the_file_they_were_scored_on():
    ordered, reversed_ = in_two_orders()
    corpus = corpus_of(ordered, "text")
    old = {GOLDEN_DIGEST: file_order_digest(reversed_), CORPUS_DIGEST: corpus.digest}  # logged before, reversed file
    new = {GOLDEN_DIGEST: golden_digest(ordered), GOLDEN_DIGEST_IN_FILE_ORDER: file_order_digest(ordered)}
    assert scored_on(old, reversed_, corpus, reads_filters=True)  # the same file: reused
    assert not scored_on(old, golden_of({"q": {"d": 1}}), corpus, reads_filters=True)
    assert scored_on(new | {CORPUS_DIGEST: corpus.digest}, reversed_, corpus, reads_filters=True)


def test_compare_check_and_best_pair_runs_of_one_golden_set_in_any_order(tracking, capsys):
    ordered, reversed_ = in_two_orders()
    a = log_run("a", ordered, rankings(ordered))
    b = log_run("b", reversed_, rankings(reversed_, BROKEN))  # before: refused as another golden set
    check_same_golden_set(load_record(a), load_record(b))
    old = log_run("old", reversed_, rankings(reversed_))
    old_run(old, reversed_)
    check_same_golden_set(load_record(old), load_record(b))  # an old run and a new one of the reversed file
    # sweep.best: old ~ b (the reversed file's digest) and b ~ a (the order-free one): one golden set
    assert best.main(["--metric", "ndcg_at_10"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.startswith(f"run {a}: ndcg_at_10 = 1.0000")  # no run left out


def test_an_old_run_of_the_lines_in_another_order_is_refused_with_the_reason(tracking):
    """An old run carries only the digest of its file's order: a new run of the lines in another
    order cannot be told to be the same set by digests alone; the line says what to do."""
    ordered, reversed_ = in_two_orders()
    new = log_run("new", ordered, rankings(ordered))
    old = log_run("old", reversed_, rankings(reversed_))
    old_run(old, reversed_)
    with pytest.raises(InputError) as refused:
        check_same_golden_set(load_record(new), load_record(old))
    assert str(refused.value) == (
        f"runs {new} and {old} were scored on different golden sets ({GOLDEN_DIGEST} {golden_digest(ordered)} and "
        f"{file_order_digest(reversed_)}): paired statistics need the same questions; run {old} was logged before "
        "the digest ignored the order of the golden file's lines: if only their order changed, run its "
        "configuration again to compare them"
    )


def test_runs_logged_now_carry_both_digests(tracking):
    ordered, reversed_ = in_two_orders()
    run = log_run("r", reversed_, rankings(reversed_))
    tags = mlflow.MlflowClient().get_run(run).data.tags
    assert tags[GOLDEN_DIGEST] == golden_digest(ordered)
    assert tags[GOLDEN_DIGEST_IN_FILE_ORDER] == file_order_digest(reversed_)
    assert load_record(run).digests[GOLDEN_DIGEST_IN_FILE_ORDER] == file_order_digest(reversed_)
