"""Stores, digests and commands at their edges (issue 23): a golden file edited between a kill and
`resume=true`, golden sets that differ after row 10,000, the hot journal a kill -9 leaves, a
read-only store, a full disk, and the faults that used to end in a traceback. Real SQLite stores in
tmp_path and real `python -m sweep ...` subprocesses (slow); each asserts the one line and the
runs' states after it. The digest rules are checked in process.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import mlflow
import pytest

from helpers import processes
from helpers.commands import one_error_line, sweep, sweep_command
from helpers.data import golden_of
from helpers.logged import BROKEN, golden, log_run, rankings
from helpers.store_folders import copied_store, killed_after_the_first_combination
from helpers.stores import command, copy_blank_store, leave_a_hot_journal, on_a_full_disk, states
from sweep.evaluation.record import TrialRecord
from sweep.formats.corpus import Corpus, Document
from sweep.formats.golden import GoldenSet
from sweep.tracking.digests import GOLDEN_DIGEST, golden_dataset, golden_digest, scored_on
from sweep.tracking.lifecycle import PARENT_RUN, trial_run
from sweep.tracking.records import save_record
from sweep.tracking.store import SUPERSEDED_BY, connect, use_experiment

# 2 lexical combinations on whole documents: a kill lands before, in or after either (most of a
# sweep's time is its own start and end), and each killed sweep and its resume are quick
SWEEP = ("-m", "model=bm25,tfidf", "chunk=0")


def log_failed(golden_set) -> str:
    """A run that failed after logging its golden set, with the `error` tag saying why."""
    with pytest.raises(RuntimeError), trial_run("golden-sweep", "failed") as run:
        save_record(TrialRecord("failed", {}, golden=golden_set, corpus=Corpus((Document("d", "text"),))))
        raise RuntimeError("the index could not be built")
    return run.run_id


@pytest.fixture(scope="module")
def logged(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A store logged in process once, which each test's `store` copies: its folder and the run ids."""
    folder = tmp_path_factory.mktemp("logged")
    copy_blank_store(folder)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{folder / 'mlflow.db'}")
        patch.delenv(PARENT_RUN, raising=False)
        g = golden()
        ids = {
            "good": log_run("good", g, rankings(g)),
            "worse": log_run("worse", g, rankings(g, BROKEN)),
            "failed": log_failed(g),
        }
    mlflow.set_tracking_uri(None)
    return folder, ids


@pytest.fixture
def store(logged, tmp_path, monkeypatch) -> SimpleNamespace:
    """A store in tmp_path/store logged in process: `good`, `worse` (8 questions broken) and `failed`."""
    template, ids = logged
    folder = copied_store(template, tmp_path / "store", monkeypatch)
    runs = SimpleNamespace(folder=folder, db=folder / "mlflow.db", journal=folder / "mlflow.db-journal", **ids)
    yield runs
    mlflow.set_tracking_uri(None)
    for path in (folder, runs.db):
        path.chmod(0o755)


def data_overrides(data: Path, cwd: Path) -> list[str]:
    return [
        f"golden.path={data / 'golden.jsonl'}",
        f"golden.corpus={data / 'corpus.jsonl'}",
        f"cache_dir={cwd / 'cache'}",
    ]


# ---------------------------------------------------------------- the data digests


def sets_differing_after_row_10000():
    relevant = {f"q{i:05d}": {f"d{i}": 1} for i in range(10_001)}
    return golden_of(relevant), golden_of(relevant | {"q10000": {"d0": 1}})


def test_golden_sets_that_differ_after_row_10000_have_different_digests():
    a, b = sets_differing_after_row_10000()
    assert golden_dataset(a).digest == golden_dataset(b).digest  # MLflow's: the first 10,000 rows only
    assert golden_digest(a) != golden_digest(b) and len(golden_digest(a)) == 32
    corpus = Corpus(tuple(Document(f"d{i}", "text") for i in range(10_001)))
    tags = {GOLDEN_DIGEST: golden_digest(a), "data.corpus_digest": corpus.digest}
    assert scored_on(tags, a, corpus, reads_filters=True) and not scored_on(tags, b, corpus, reads_filters=True)


def test_a_question_reviewed_since_makes_another_digest():
    """The digest covers what the scoring reads: a pending question is not scored, so a run scored
    before its review is not paired with one scored after."""
    relevant = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    reviewed = golden_of(relevant)
    pending = GoldenSet(tuple(replace(q, status="pending") if q.id == "q2" else q for q in reviewed), source="g")
    assert golden_digest(pending) == golden_digest(golden_of({"q1": {"d1": 1}}))
    assert golden_digest(pending) != golden_digest(reviewed)


def test_a_legacy_digest_is_trusted_only_where_it_covers_everything():
    """MLflow's digest (runs logged before) sees neither filters nor rows after 10,000."""
    small = golden_of({"q1": {"d1": 1}, "q2": {"d2": 1}})
    corpus = Corpus((Document("d1", "one"), Document("d2", "two")))
    legacy = {GOLDEN_DIGEST: golden_dataset(small).digest, "data.corpus_digest": corpus.digest}
    assert re.fullmatch(r"[0-9a-f]{8}", legacy[GOLDEN_DIGEST])
    assert scored_on(legacy, small, corpus, reads_filters=False)  # filter=none on a small set: reused
    assert not scored_on(legacy, small, corpus, reads_filters=True)  # the filters it never saw may differ
    large, _ = sets_differing_after_row_10000()
    big_corpus = Corpus(tuple(Document(f"d{i}", "text") for i in range(10_001)))
    old = {GOLDEN_DIGEST: golden_dataset(large).digest, "data.corpus_digest": big_corpus.digest}
    assert not scored_on(old, large, big_corpus, reads_filters=False)


@pytest.mark.slow
def test_check_and_compare_refuse_golden_sets_that_differ_after_row_10000(store):
    a_set, b_set = sets_differing_after_row_10000()
    a = log_run("a", a_set, {q.id: list(q.relevant) for q in a_set})
    b = log_run("b", b_set, {q.id: list(q.relevant) for q in b_set})
    digests = golden_digest(a_set), golden_digest(b_set)
    different = (
        f"runs {a} and {b} were scored on different golden sets (data.golden_digest {digests[0]} and "
        f"{digests[1]}): paired statistics need the same questions: score one again on the other's golden file "
        f"(python -m sweep.rescore {a} --golden NEW), or compare them on the questions both hold with identical "
        "judgments (--shared)"
    )
    for args in (("sweep.check", "--baseline", a, "--candidate", b), ("sweep.compare", a, b)):
        result = command(store.folder, *args)
        assert result.returncode == 2 and one_error_line(result.stderr) == different
    # runs logged before: both with MLflow's digest, which is the same for both sets
    client, legacy = mlflow.MlflowClient(), golden_dataset(a_set).digest
    client.set_tag(a, GOLDEN_DIGEST, legacy)
    result = command(store.folder, "sweep.check", "--baseline", a, "--candidate", b)
    assert result.returncode == 2 and one_error_line(result.stderr) == (
        f"run {a} was logged before golden-sweep hashed whole golden sets (data.golden_digest {legacy} is MLflow's "
        f"digest of at most 10,000 questions, without filters), run {b} after: nothing says that they were scored on "
        "the same golden set; run the older one's configuration again to compare them"
    )
    client.set_tag(b, GOLDEN_DIGEST, legacy)
    result = command(store.folder, "sweep.compare", a, b, "--no-log")
    assert result.returncode == 2 and one_error_line(result.stderr) == (
        f"data.golden_digest {legacy} (logged before golden-sweep hashed whole golden sets) covers only the first "
        "10,000 of 10,001 questions: it cannot tell whether these runs were scored on the same golden set; run their "
        "configurations again to compare them"
    )


@pytest.mark.slow
def test_resume_after_the_golden_filters_changed_runs_the_combination_again(tmp_path, small_kb_files):
    """The filters are in the digest: the run that finished on the old filters is superseded,
    and the resumed sweep gives the numbers of a sweep run whole on the edited file."""
    data, killed, whole = tmp_path / "data", tmp_path / "killed", tmp_path / "whole"
    shutil.copytree(small_kb_files, data)
    killed.mkdir()
    whole.mkdir()
    overrides = ("-m", "model=bm25,tfidf", "filter=pre", "chunk=0")  # whole documents: no tokenizer to load
    finished_before = killed_after_the_first_combination(killed, data, *overrides)
    questions = [json.loads(line) for line in (data / "golden.jsonl").read_text().splitlines()]
    edited = "".join(json.dumps(q | {"filters": {"status": "archived"}}) + "\n" for q in questions)
    (data / "golden.jsonl").write_text(edited)

    resumed = sweep(killed, data, *overrides, "resume=true")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "(resume)" not in resumed.stdout + resumed.stderr  # nothing finished on these filters
    assert sweep(whole, data, *overrides).returncode == 0
    client = mlflow.MlflowClient(f"sqlite:///{killed / 'mlflow.db'}")
    assert client.get_run(finished_before).data.tags[SUPERSEDED_BY]
    assert "RUNNING" not in {status for status, _ in states(killed / "mlflow.db").values()}
    values = objectives(killed)
    assert len(values) == 2 and values == objectives(whole)
    assert len(set(values.values())) == 1  # every question now filters to the archived documents


def objectives(folder: Path) -> dict[tuple[str, str], float]:
    """{(model, chunk): ndcg_at_10} of the FINISHED children of the last sweep in `folder`'s store
    that no resumed sweep replaced."""
    client = mlflow.MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("golden-sweep").experiment_id
    [parent] = client.search_runs(
        [experiment], "tags.`sweep.parent` = 'true'", order_by=["attributes.start_time DESC"], max_results=1
    )
    children = client.search_runs(
        [experiment], f"tags.mlflow.parentRunId = '{parent.info.run_id}' and attributes.status = 'FINISHED'"
    )
    kept = [c for c in children if SUPERSEDED_BY not in c.data.tags]
    return {(c.data.params["model"], c.data.params["chunk"]): c.data.metrics["ndcg_at_10"] for c in kept}


# ---------------------------------------------------------------- the store itself


@pytest.mark.slow
def test_a_hot_journal_left_by_kill_9_is_rolled_back_not_refused(store):
    before = states(store.db)
    leave_a_hot_journal(store.db)
    best = command(store.folder, "sweep.best")
    assert best.returncode == 0 and best.stdout.startswith(f"run {store.good}: ndcg_at_10 = 1.0000, the highest")
    assert (
        best.stderr
        == "sqlite:///mlflow.db: rolled back the write a killed process left unfinished (mlflow.db-journal)\n"
    )
    assert not store.journal.exists() and states(store.db) == before  # the unfinished write is undone
    # a hot journal in a store this process may not write: one line, and the journal is kept
    leave_a_hot_journal(store.db)
    store.db.chmod(0o444)
    store.folder.chmod(0o555)
    refused = command(store.folder, "sweep.check", "--baseline", store.good, "--candidate", store.good, reader=True)
    assert refused.returncode == 2 and one_error_line(refused.stderr) == (
        "sqlite:///mlflow.db: a process was killed while writing to the store and left mlflow.db-journal, which "
        f"only a read-write open rolls back: {store.db} or its folder is read-only here"
    )
    assert store.journal.exists()


@pytest.mark.slow
def test_a_store_killed_while_its_tables_were_made_is_made_anew(tmp_path, small_kb_files):
    """MLflow makes a new store's tables in dozens of migrations, not one transaction: they are
    made beside the store, which appears whole or not at all."""
    args, env = sweep_command(tmp_path, small_kb_files, "model=bm25", new_store=True)
    process = processes.start(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (tmp_path / ".mlflow.db.new").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert (tmp_path / ".mlflow.db.new").exists() and not (tmp_path / "mlflow.db").exists()
    best = command(tmp_path, "sweep.best")
    assert (
        best.returncode == 2
        and one_error_line(best.stderr)
        == "sqlite:///mlflow.db: no MLflow store here yet (nothing has been logged to it)"
    )
    run = sweep(tmp_path, small_kb_files, "model=bm25", new_store=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert [status for status, _ in states(tmp_path / "mlflow.db").values()] == ["FINISHED"]
    assert not (tmp_path / ".mlflow.db.new").exists()


@pytest.mark.slow
def test_reading_commands_work_on_a_read_only_store(store, small_kb_files, tmp_path):
    before = states(store.db)
    store.db.chmod(0o444)
    store.folder.chmod(0o555)
    best = command(store.folder, "sweep.best", reader=True)
    assert best.returncode == 0 and best.stdout.startswith(f"run {store.good}: ndcg_at_10 = 1.0000"), best.stderr
    check = command(store.folder, "sweep.check", "--baseline", store.good, "--candidate", store.worse, reader=True)
    assert check.returncode == 1 and "check failed: 1 of 1 comparisons regressed" in check.stdout  # it gates
    compare = command(store.folder, "sweep.compare", store.good, store.worse, "--no-log", reader=True)
    assert compare.returncode == 0 and compare.stderr == ""
    # a command that writes says so, in one line, before it runs anything
    data = [*data_overrides(small_kb_files, tmp_path), f"hydra.run.dir={tmp_path / 'out'}"]
    written = command(store.folder, "sweep", "model=bm25", *data, reader=True)
    assert written.returncode == 2 and one_error_line(written.stderr) == "sqlite:///mlflow.db: the store is read-only"
    assert states(store.db) == before


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_the_run_is_failed(tmp_path, small_kb_files):
    run = [sys.executable, "-m", "sweep", "model=bm25", *data_overrides(small_kb_files, tmp_path)]
    # the store's filesystem is full: its tables and experiment exist (made here, copied there
    # before it fills up), the run's writes do not fit
    store = tmp_path / "store"
    store.mkdir()
    uri = f"sqlite:///{store / 'fs' / 'mlflow.db'}"
    made = copy_blank_store(tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(store)  # the experiment's artifacts: ./mlruns of the command below
        connect(f"sqlite:///{made}")
        use_experiment("golden-sweep")
    mlflow.set_tracking_uri(None)
    code, stderr = on_a_full_disk(
        store, store / "fs", [*run, f"hydra.run.dir={store / 'out'}"], {"MLFLOW_TRACKING_URI": uri},
        store=made, keep=store / "after.db",
    )  # fmt: skip
    said = one_error_line(stderr)  # first: had the filesystem not been made, its traceback
    [(run_id, (status, error))] = states(store / "after.db").items()
    assert code == 2 and status == "FAILED"
    assert error == f"no space left to log it ({uri}: database or disk is full)"
    assert said == f"run {run_id}: {error}; the run is marked FAILED"
    # mlruns/ is full: the store (./mlflow.db) is not
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    code, stderr = on_a_full_disk(artifacts, artifacts / "mlruns", [*run, f"hydra.run.dir={artifacts / 'out'}"], {})
    said = one_error_line(stderr)
    [(run_id, (status, error))] = states(artifacts / "mlflow.db").items()
    assert code == 2 and status == "FAILED"
    where = (artifacts / "mlruns" / run_id / "artifacts").as_uri()
    assert error == f"no space left to log it (its artifacts in {where}: No space left on device)"
    assert said == f"run {run_id}: {error}; the run is marked FAILED"


# ---------------------------------------------------------------- one line, not a traceback

UNSET = "a sweep sets it for its combinations; unset it to log a run of your own"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["model=bm25", "hydra.run.dir=/proc/nope"], {}, "hydra.run.dir=/proc/nope: Hydra cannot create its output folder there (/proc: No such file or directory); give hydra.run.dir=<a writable folder>"),
        (["-m", "model=bm25,tfidf", "hydra.sweep.dir=/proc/nope"], {}, "hydra.sweep.dir=/proc/nope: Hydra cannot create its output folder there (/proc: No such file or directory); give hydra.sweep.dir=<a writable folder>"),
        (["model=bm25", "hydra.run.dir={tmp}/out"], {"MLFLOW_TRACKING_URI": "nonsense://x/y"}, "MLFLOW_TRACKING_URI=nonsense://x/y: MLflow has no tracking store for this address; give sqlite:///PATH, http(s)://HOST:PORT, postgresql://... or mysql://..., or unset it to log to sqlite:///mlflow.db here"),
        (["model=bm25", "hydra.run.dir={tmp}/out"], {PARENT_RUN: "xyz"}, f"SWEEP_PARENT_RUN_ID='xyz': not an MLflow run id (32 hexadecimal digits); {UNSET}"),
        (["model=bm25", "hydra.run.dir={tmp}/out"], {PARENT_RUN: "0" * 32}, f"SWEEP_PARENT_RUN_ID={'0' * 32}: no such run at sqlite:///mlflow.db; {UNSET}"),
        (["-m", "model=bm25,tfidf", "chunk=range(0,3000000,1000)"], {}, "-m: 6,000 combinations; one sweep runs at most 1,000 (each is an MLflow run, checked before the first starts): split it, or let a sweeper choose (hydra/sweeper=optuna)"),
    ],
)  # fmt: skip
def test_a_bad_place_or_address_is_one_line_and_no_run(tmp_path, small_kb_files, args, env, message):
    copy_blank_store(tmp_path)  # the parent run is looked up in a store: MLflow takes seconds to make one
    result = command(
        tmp_path, "sweep", *[a.format(tmp=tmp_path) for a in args], *data_overrides(small_kb_files, tmp_path), env=env
    )
    assert result.returncode == 2 and one_error_line(result.stderr) == message
    assert states(tmp_path / "mlflow.db") == {}


@pytest.mark.slow
def test_a_read_only_working_folder_is_one_line(tmp_path, small_kb_files):
    folder = tmp_path / "read-only"
    folder.mkdir(mode=0o555)
    result = command(folder, "sweep", "model=bm25", *data_overrides(small_kb_files, tmp_path), reader=True)
    folder.chmod(0o755)
    assert result.returncode == 2
    assert re.fullmatch(
        rf"hydra.run.dir={folder}/outputs/\d{{4}}-\d\d-\d\d/\d\d-\d\d-\d\d: Hydra cannot create its output folder "
        rf"there \({folder}: Permission denied\); give hydra.run.dir=<a writable folder>",
        one_error_line(result.stderr),
    )
    assert list(folder.iterdir()) == []


@pytest.mark.slow
def test_what_the_reading_commands_refuse_is_one_line(store):
    before = states(store.db)
    cases = [
        (["sweep.compare", store.good, store.worse, "--resamples", "20000000"], "--resamples 20000000: give 1 to 100,000 (the default 2,000 gives p-values to about 0.001; more only take longer)"),
        (["sweep.check", "--baseline", store.good, "--candidate", store.failed], f"run {store.failed} FAILED (RuntimeError: the index could not be built): it holds no evaluation to compare"),
        (["sweep.best", "--among", "tied", "--prefer", "nosuch/metric"], "--prefer 'nosuch/metric': no run tied with the best has this metric (1 tied; the costs they have: none)"),
        (["sweep.best", "--prefer", "latency/search_ms_p50"], "--prefer latency/search_ms_p50: it chooses among the runs tied with the best; add --among tied"),
    ]  # fmt: skip
    for args, message in cases:
        result = command(store.folder, *args)
        assert result.returncode == 2 and one_error_line(result.stderr) == message, args
    # mlruns/ deleted: the line says so, also where --among tied would first miss a per-question table
    shutil.rmtree(store.folder / "mlruns")
    gone = store.folder / "mlruns" / store.good / "artifacts"
    for among in ("best", "tied"):
        result = command(store.folder, "sweep.best", "--among", among)
        assert result.returncode == 2 and one_error_line(result.stderr) == (
            f"run {store.good}: its artifacts are gone ({gone} does not exist: was mlruns/ moved or deleted?)"
        )
    assert states(store.db) == before


# ---------------------------------------------------------------- kill -9 at any moment, then resume


def started_sweep(folder: Path, data: Path, stderr=subprocess.DEVNULL) -> tuple[processes.Started, float]:
    """`python -m sweep SWEEP` started in `folder`, and when: once its process exists, so that a
    forkserver's first start is not counted as the sweep's time."""
    args, env = sweep_command(folder, data, *SWEEP)
    process = processes.start(args, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
    return process, time.monotonic()


def killed_after(folder: Path, data: Path, seconds: float) -> float | None:
    """`python -m sweep SWEEP` in `folder` killed with SIGKILL `seconds` after it started: None, or
    how long it took when it ended before that."""
    folder.mkdir()
    process, started = started_sweep(folder, data)
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait()
        return None
    return time.monotonic() - started


def resumed(folder: Path, data: Path, reference: dict, seconds: float) -> dict:
    """The killed sweep in `folder` resumed: what the resumed store holds, and whether it is what
    `reference` (an uninterrupted sweep's `objectives`) measured."""
    journal = (folder / "mlflow.db-journal").exists()
    resume = sweep(folder, data, *SWEEP, "resume=true")
    after = states(folder / "mlflow.db") if (folder / "mlflow.db").exists() else {}
    values = objectives(folder) if resume.returncode == 0 else {}
    return {
        "killed_at_s": round(seconds, 2),
        "journal_left": journal,
        "resume_exit": resume.returncode,
        "errors": [line for line in resume.stderr.splitlines() if line.startswith("error:")],
        "running": sum(status == "RUNNING" for status, _ in after.values()),
        "reused": resume.stdout.count("(resume)") + resume.stderr.count("(resume)"),
        "finished_children": len(values),
        "same_numbers": values == reference,
    }


def kill_loop(tmp_path: Path, data: Path, iterations: int, seed: int) -> list[dict]:
    """An uninterrupted sweep, then `iterations` sweeps, each killed at a random moment of its own
    span of the sweep's duration (the spans split it evenly: early and late kills alike), then
    resumed. A kill lands while the sweep runs: a sweep that ran faster and ended first is started
    again, the moment drawn anew in the same span of nine tenths of the time that one took."""
    whole = tmp_path / "whole"
    whole.mkdir()
    process, started = started_sweep(whole, data, stderr=subprocess.PIPE)
    _, stderr = process.communicate(timeout=900)
    duration = time.monotonic() - started
    assert process.returncode == 0, stderr[-3000:]
    reference = objectives(whole)
    assert len(reference) == 2
    moments = random.Random(seed)
    outcomes = []
    for span in range(iterations):
        for attempt in range(5):
            seconds = 0.5 + (span + moments.random()) / iterations * (duration - 0.5)
            folder = tmp_path / f"kill-{span}-{attempt}"
            took = killed_after(folder, data, seconds)
            if took is None:
                outcomes.append(resumed(folder, data, reference, seconds))
                break
            duration = 0.9 * took
        else:
            raise AssertionError(f"five sweeps in a row ended before their kill, the last at {seconds:.2f} s")
    return outcomes


@pytest.mark.slow
def test_kill_9_at_random_moments_then_resume_gives_the_uninterrupted_numbers(tmp_path, small_kb_files):
    for outcome in kill_loop(tmp_path, small_kb_files, iterations=5, seed=23):
        assert outcome["resume_exit"] == 0 and not outcome["errors"], outcome
        assert outcome["running"] == 0 and outcome["finished_children"] == 2 and outcome["same_numbers"], outcome
