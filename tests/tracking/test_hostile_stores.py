"""Stores, digests and commands at their edges (issue 23): a golden file edited between a kill and
`resume=true`, golden sets that differ after row 10,000, the hot journal a kill -9 leaves, a
read-only store, a full disk, and the faults that used to end in a traceback. Real SQLite stores in
tmp_path and real `python -m sweep ...` subprocesses (slow); each asserts the one line and the
runs' states after it. The digest rules are checked in process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import mlflow
import pytest

from helpers.commands import one_error_line, sweep, sweep_command, wait_for
from helpers.data import golden_of
from helpers.logged import BROKEN, golden, log_run, rankings
from sweep.formats.corpus import Corpus, Document
from sweep.tracking import (
    GOLDEN_DIGEST,
    PARENT_RUN,
    SUPERSEDED_BY,
    golden_dataset,
    golden_digest,
    log_golden_input,
    scored_on,
    trial_run,
)

# root ignores file modes: a command that must meet a read-only file runs without that power
READ_ONLY_POWER = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
SWEEP = ("-m", "model=bm25,tfidf", "chunk=0,200")  # 4 lexical combinations: quick to kill and resume


def command(cwd: Path, *args: str, env: dict | None = None, reader: bool = False) -> subprocess.CompletedProcess:
    """`python -m ARGS` in `cwd`, the store `./mlflow.db` unless `env` says otherwise; `reader`: as
    a process that file modes bind (root without its override)."""
    prefix = READ_ONLY_POWER if reader and os.geteuid() == 0 else []
    if prefix and shutil.which("setpriv") is None:
        pytest.fail("running as root, this test needs setpriv (util-linux) to meet a read-only file")
    environment = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", PARENT_RUN)}
    return subprocess.run(
        [*prefix, sys.executable, "-m", *args], cwd=cwd, env=environment | (env or {}),
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def states(database: Path) -> dict[str, tuple[str, str | None]]:
    """{run id: (status, its `error` tag)} read straight from the SQLite file, read-only."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        rows = connection.execute(
            "SELECT r.run_uuid, r.status, t.value FROM runs r LEFT JOIN tags t ON t.run_uuid = r.run_uuid AND t.key = 'error'"
        ).fetchall()
    connection.close()
    return {run_id: (status, error) for run_id, status, error in rows}


def log_failed(golden_set) -> str:
    """A run that failed after logging its golden set, with the `error` tag saying why."""
    with pytest.raises(RuntimeError), trial_run("golden-sweep", "failed") as run:
        log_golden_input(golden_set, Corpus((Document("d", "text"),)))
        raise RuntimeError("the index could not be built")
    return run.run_id


@pytest.fixture
def store(tmp_path, monkeypatch) -> SimpleNamespace:
    """A store in tmp_path logged in process: `good`, `worse` (8 questions broken) and `failed`."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.delenv(PARENT_RUN, raising=False)
    g = golden()
    runs = SimpleNamespace(
        folder=tmp_path,
        db=tmp_path / "mlflow.db",
        good=log_run("good", g, rankings(g)),
        worse=log_run("worse", g, rankings(g, BROKEN)),
        failed=log_failed(g),
    )
    yield runs
    mlflow.set_tracking_uri(None)


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
        f"{digests[1]}): paired statistics need the same questions"
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
    overrides = ("-m", "model=bm25,tfidf", "filter=pre")
    args, env = sweep_command(killed, data, *overrides)
    process = subprocess.Popen(args, cwd=killed, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(killed / "mlflow.db", lambda runs: any(r["child"] and r["status"] == "FINISHED" for r in runs))
    process.send_signal(signal.SIGKILL)
    process.wait()
    [finished_before] = [r for r, (status, _) in states(killed / "mlflow.db").items() if status == "FINISHED"]
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
