"""Bad input and faults, class by class: every case asserts the exit code (or the exception), the
one-line message, and that nothing was lost or made up (MLflow runs and their statuses, cache
files, input files untouched).

Classes: settings (checked before anything runs), input files, caches, native code and dead
processes, signals, tracking stores, sweep.best.
"""

from __future__ import annotations

import ctypes
import functools
import json
import logging
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import numpy as np
import pytest

from helpers import processes
from helpers.commands import compose_config, one_error_line, runs_in, sweep, sweep_command, wait_for
from helpers.stores import CLONE_NEWNS, CLONE_NEWUSER, MS_PRIVATE, MS_REC, on_a_full_disk, states
from sweep.errors import InputError
from sweep.experiment.preflight import preflight
from sweep.experiment.trial import warn_about_costly_settings
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden
from sweep.formats.runs import Run
from sweep.retrieval.cache import EmbeddingCache, _umask
from sweep.tracking.lifecycle import kill_orphans, process_tags

# ---------------------------------------------------------------- 1. settings, before anything runs


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["index=hnsw", "index.M=0"], "index.M=0: must be an integer from 2 to 1024"),
        (["index=hnsw", "index.ef_search=0"], "index.ef_search=0: must be an integer >= 1"),
        (
            ["-m", "index=hnsw", "index.M=16,0,32"],
            "index.M=0: must be an integer from 2 to 1024 (in the combination index=hnsw index.M=0)",
        ),
        (["index=hnsw", "index.M='32'"], "index.M='32': must be an integer from 2 to 1024"),
        (["depth=abc"], "depth='abc': must be an integer from 1 to 100000"),
        (["chunk_depth=0"], "chunk_depth=0: must be an integer from 1 to 1000000"),
        (["chunk=-3"], "chunk=-3: must be an integer >= 0"),
        (
            ["-m", "chunk=64", "hydra.job.chdir=true,false"],
            "hydra.job.chdir=true,false: Hydra's own settings (hydra.*) take one value in a sweep, not several",
        ),
        (
            ["-m", "chunk=0,24,256"],
            "chunking.overlap=32: must be smaller than chunk=24 (or chunk=0: whole documents) (in the combination chunk=24)",
        ),
        (
            ["reranker=cross_encoder"],
            "reranker.model is not set: give the path of a local sentence-transformers CrossEncoder folder",
        ),
        (["experiment="], "experiment='': must be a non-empty string"),
        (["golden=beir"], "golden.path is not set: give it on the command line (golden.path=...)"),
        (["model=custom"], "model._target_ is not set: give it on the command line (model._target_=...)"),
        (
            ["model=custom", "model._target_=no.such.Retriever"],
            "model._target_=no.such.Retriever: cannot import it (No module named 'no')",
        ),
        (["index=annoy"], "index=annoy: no such option (the options: chroma, flat, hnsw, ivf, lancedb)"),
        (
            ["index=hnsw", "index.ef=64"],
            "index.ef: not a setting (did you mean index.ef_construction or index.ef_search? known: M, ef_construction, ef_search); to add a key of your own: +index.ef=...",
        ),
        (
            ["index=hnsw", "+index.efsearch=64"],
            "index.efsearch: not a setting of HNSWIndex (did you mean index.ef_search? known: M, ef_construction, ef_search)",
        ),
        (
            ["model=bm25", "model.method=bm26"],
            "model.method='bm26': must be one of robertson, atire, bm25l, bm25+, lucene",
        ),
        (["filter=post", "filter.overfetch=0.5"], "filter.overfetch=0.5: must be a number >= 1"),
        (["model=hybrid", "model.k=-1"], "model.k=-1: must be a number >= 0"),
        (["reranker=hybrid"], "reranker=hybrid was removed: use model=hybrid model.fusion=rrf"),
        (["model.embedder.batch_size=0"], "model.embedder.batch_size=0: must be an integer from 1 to 4096"),
        (["abstain.min_score=high"], "abstain.min_score='high': must be a number, or null"),
        (["objective=ndcg@10"], "objective='ndcg@10': must be one of recall_at_1,"),
        (["context.k=[5,0]"], "context.k=[5, 0]: must be a non-empty list of distinct integers from 1 to 1000"),
        (["context.k=[]"], "context.k=[]: must be a non-empty list of distinct integers from 1 to 1000"),
        (["chunking=sentences", "chunking.overlap=-1"], "chunking.overlap=-1: must be an integer >= 0"),
        (["chunking=semantic", "chunking.threshold=1"], "chunking.threshold=1: must be between 0 and 1, both excluded"),
        (["golden.corpus_ids=name"], "golden.corpus_ids='name': must be one of path, stem"),
        (["index.M=[1"], "index.M=[1: cannot be read as an override (no viable alternative at input '[1')"),
        (["chunk=1,2"], "Ambiguous value for argument 'chunk=1,2'"),
        (
            ["-m", "model=bm25,tfidf", "hydra/launcher=joblib", "hydra.launcher.n_jobs=0"],
            "hydra.launcher.n_jobs=0: joblib runs at least one combination at a time; give how many at once "
            "(hydra.launcher.n_jobs=2), or -1 for one per CPU core",
        ),
        (
            ["-m", "model=bm25,tfidf", "hydra/launcher=joblib", "hydra.launcher.prefer=fast"],
            "hydra.launcher: joblib refuses these settings (ValueError: prefer=fast is not a valid backend hint",
        ),
        (
            ["index=lancedb", "index.uri=/proc/nope"],
            "index.uri=/proc/nope: LanceDB cannot keep its database there (/proc: No such file or directory); "
            "give index.uri=<a writable folder>, or leave it null for a temporary one",
        ),
        (
            ["index=chroma", "index.path=/proc/version/chroma"],
            "index.path=/proc/version/chroma: Chroma cannot keep its database there (/proc/version: Not a "
            "directory); give index.path=<a writable folder>, or leave it null for a temporary one",
        ),
    ],
)
def test_a_bad_setting_is_one_line_and_exit_2_before_anything_runs(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        preflight(argv)
    assert exited.value.code == 2
    assert one_error_line(capsys.readouterr().err).startswith(message)
    assert list(tmp_path.iterdir()) == []  # no store, no cache, no output folder


def test_good_settings_pass_and_costly_ones_are_warned_about(caplog):
    assert preflight(["-m", "index=flat,hnsw", "chunk=128,256"]) == 4
    with caplog.at_level(logging.WARNING, logger="sweep.experiment.trial"):
        warn_about_costly_settings(compose_config("chunk_depth=10", "index=ivf", "index.nprobe=32"))
    said = " | ".join(r.getMessage() for r in caplog.records)
    assert (
        "chunk_depth=10 is smaller than depth=100" in said and "index.nprobe=32 is larger than index.nlist=16" in said
    )


@pytest.mark.slow
def test_a_bad_value_in_one_combination_stops_the_whole_sweep_before_it_starts(tmp_path, small_kb_files):
    result = sweep(
        tmp_path, small_kb_files, "-m", "index=hnsw", "index.M=16,0,32", new_store=True
    )  # FAISS would abort on M=0
    assert result.returncode == 2
    assert one_error_line(result.stderr).startswith("index.M=0: must be an integer from 2 to 1024")
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "cache").exists()


# ---------------------------------------------------------------- 2. input files


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


READERS = {"golden": load_golden, "run": Run.read, "corpus": load_corpus}
GOOD_QUESTION = b'{"id": "q1", "question": "how many days of leave", "relevant": {"d1": 1}}\n'


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        (
            "golden.jsonl",
            GOOD_QUESTION + b'{"id": "q2", "question": "caf\xe9", "relevant": {}}\n',
            "golden.jsonl:2: not UTF-8 text (byte 0xe9 at offset 103)",
        ),
        (
            "golden.yaml",
            b'- id: q1\n  question: "caf\xe9"\n  relevant: {}\n',
            "golden.yaml:2: not UTF-8 text (byte 0xe9 at offset 25)",
        ),
        ("golden.qrels", b"q1 0 d1 1\nq\xff 0 d2 1\n", "golden.qrels:2: not UTF-8 text (byte 0xff at offset 11)"),
        (
            "golden.jsonl",
            b'{"id": "q1", "question": "x", "relevant": {"d1": Infinity}}\n',
            "golden.jsonl:1: question 'q1': grade of 'd1' is inf; expected an integer",
        ),
        (
            "golden.jsonl",
            b'{"id": "q1", "question": "x", "relevant": {"d1": NaN}}\n',
            "golden.jsonl:1: question 'q1': grade of 'd1' is nan; expected an integer",
        ),
        (
            "golden.jsonl",
            b'{"id": "q1", "question": "x", "relevant": {"d1": 1000000000}}\n',
            "golden.jsonl:1: question 'q1': grade of 'd1' is 1000000000; grades go from 0 to 100",
        ),
        (
            "golden.jsonl",
            b'{"id": "q1", "question": "x", "relevant": {"d1": 2.5}}\n',
            "golden.jsonl:1: question 'q1': grade of 'd1' is 2.5; expected an integer",
        ),
        (
            "golden.qrels",
            b"q1 0 d1 99999999999999999999\n",
            "golden.qrels:1: grade 99999999999999999999 is out of range (-100 to 100)",
        ),
        (
            "golden.jsonl",
            b'{"id": "q1", "question": "x", "relevant": null}\n',
            "golden.jsonl:1: question 'q1' has relevant: null; expected a mapping",
        ),
        (
            "golden.jsonl",
            b'{"id": "q1", "question": "x", "relevant": {}, "filters": null}\n',
            "golden.jsonl:1: question 'q1' has filters: null",
        ),
        (
            "golden.jsonl",
            b'{"id": "q1", "question": "x", "relevant": {}, "filter": {"department": "HR"}}\n',
            "golden.jsonl:1: question 'q1' has a key 'filter' it does not know (did you mean 'filters'?",
        ),
        (
            "golden.jsonl",
            b'{"id": "q1", "qestion": "x", "relevant": {}}\n',
            "golden.jsonl:1: question 'q1' has a key 'qestion' it does not know (did you mean 'question'?",
        ),
        ("run.trec", b"q1 Q0 d1 1 2.0 t\nq1 Q0 d\xfe 2 1.0 t\n", "run.trec:2: not UTF-8 text (byte 0xfe at offset 24)"),
        ("run.trec", b"q1 Q0 d1 1 inf t\n", "run.trec:1: score is inf; scores must be finite numbers"),
        (
            "run.jsonl",
            b'{"id": "q1", "result": [["d1", 1.0]]}\n',
            "run.jsonl:1: a result line has a key 'result' it does not know (did you mean 'results'?",
        ),
        (
            "run.jsonl",
            b'{"id": "q1", "results": [["d1", Infinity]]}\n',
            "run.jsonl:1: query 'q1': score inf of 'd1' is not a finite number",
        ),
        (
            "corpus.jsonl",
            b'{"id": "d1", "text": "x", "metdata": {}}\n',
            "corpus.jsonl:1: document 'd1' has a key 'metdata' it does not know (did you mean 'metadata'?",
        ),
        (
            "corpus.jsonl",
            b'{"id": "d1", "text": "caf\xe9"}\n',
            "corpus.jsonl:1: not UTF-8 text (byte 0xe9 at offset 25)",
        ),
        (
            "corpus.jsonl",
            b'{"id": "d1", "text": "x", "metadata": null}\n',
            "corpus.jsonl:1: document 'd1' has a null 'title' or 'metadata'",
        ),
    ],
)
def test_a_bad_input_file_names_file_line_and_problem(tmp_path, name, data, message):
    path = write(tmp_path / name, data)
    with pytest.raises(InputError) as raised:
        READERS[name.split(".")[0]](path)
    assert str(raised.value).removeprefix(f"{tmp_path}/").startswith(message)
    assert path.read_bytes() == data  # read, never rewritten


def test_a_folder_where_a_file_belongs_says_so(tmp_path):
    with pytest.raises(InputError, match="is a directory, not a run file"):
        Run.read(tmp_path)


@pytest.mark.slow
def test_the_evaluate_command_reports_undecodable_bytes_in_one_line(tmp_path):
    qrels = write(tmp_path / "qrels.txt", b"q1 0 d1 1\n")
    run = write(tmp_path / "run.trec", b"q1 Q0 d1 1 2.0 t\nq1 Q0 \xc3\x28 2 1.0 t\n")
    result = processes.run(
        [sys.executable, "-m", "sweep.evaluate", qrels, run], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert one_error_line(result.stderr) == f"{run}:2: not UTF-8 text (byte 0xc3 at offset 23)"


@pytest.fixture
def huge_question(tmp_path, small_kb_files) -> Path:
    """The small knowledge base plus an answerable 50 MB question."""
    data = tmp_path / "huge"
    data.mkdir()
    (data / "corpus.jsonl").write_bytes((small_kb_files / "corpus.jsonl").read_bytes())
    first = json.loads((small_kb_files / "corpus.jsonl").read_text().splitlines()[0])["id"]
    question = {"id": "huge", "question": "zebra " + "lorem ipsum dolor " * 2_900_000, "relevant": {first: 1}}
    (data / "golden.jsonl").write_text((small_kb_files / "golden.jsonl").read_text() + json.dumps(question) + "\n")
    return data


@pytest.mark.slow
def test_a_50_mb_question_neither_stalls_the_report_nor_loses_text(tmp_path, huge_question):
    start = time.monotonic()
    result = sweep(tmp_path, huge_question, "model=bm25", "chunk=0")
    assert result.returncode == 0, result.stderr[-2000:]
    assert time.monotonic() - start < 120
    assert "(52,200,006 characters)" in result.stdout  # the worst-questions cell, cut
    _, [run] = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert run.info.status == "FINISHED"
    table = json.loads((tmp_path / "mlruns" / run.info.run_id / "artifacts" / "tables" / "per_query.json").read_text())
    questions = dict(zip([row[0] for row in table["data"]], [row[2] for row in table["data"]]))
    assert len(questions["huge"]) == 52_200_006  # the artifact keeps all of it


@pytest.mark.slow
def test_the_evaluate_report_of_a_50_mb_question_is_quick(tmp_path, huge_question):
    golden = tmp_path / "golden.jsonl"
    # the huge one, and one answered, so that the huge one is below the median: a worst question
    huge = (huge_question / "golden.jsonl").read_text().splitlines()[-1]
    golden.write_text(huge + "\n" + json.dumps({"id": "ok", "question": "fine", "relevant": {"d1": 1}}) + "\n")
    run = write(tmp_path / "run.trec", b"huge Q0 nothing 1 1.0 t\nok Q0 d1 1 1.0 t\n")
    start = time.monotonic()
    result = processes.run(
        [sys.executable, "-m", "sweep.evaluate", golden, run],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0 and time.monotonic() - start < 60
    assert "(52,200,006 characters)" in result.stdout


# ---------------------------------------------------------------- 3. caches that cannot lie

VECTORS = np.random.default_rng(7).normal(size=(40, 8)).astype(np.float32)


def stored(tmp_path: Path) -> tuple[EmbeddingCache, Path]:
    cache = EmbeddingCache(tmp_path / "cache")
    assert cache.get("k") is None
    cache.put("k", VECTORS)
    return cache, tmp_path / "cache" / "k.npz"


def damage_same_size(path: Path) -> None:
    path.write_bytes(np.random.default_rng(0).bytes(path.stat().st_size))


def damage_truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:200])


def damage_vectors_keep_meta(path: Path) -> None:
    """A well-formed entry whose vectors are not the ones its checksum describes."""
    with np.load(path) as entry:
        meta = entry["meta"]
    np.savez(path, vectors=np.zeros_like(VECTORS), meta=meta)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (damage_same_size, "unreadable"),
        (damage_truncate, "unreadable"),
        (damage_vectors_keep_meta, "stored sha256 does not match"),
        (lambda path: path.write_bytes(b""), "unreadable"),
    ],
    ids=["same-size garbage", "truncated", "vectors changed", "emptied"],
)
def test_a_damaged_cache_entry_is_reported_and_recomputed(tmp_path, caplog, damage, problem):
    cache, path = stored(tmp_path)
    damage(path)
    with caplog.at_level(logging.WARNING, logger="sweep.retrieval.embed"):
        assert cache.get("k") is None
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"{path}: damaged embedding cache entry ({problem}") and warning.endswith(
        "recomputing it"
    )
    cache.put("k", VECTORS)  # what the embedding does next
    assert np.array_equal(cache.get("k"), VECTORS)


def test_an_entry_copied_under_another_key_is_not_believed(tmp_path, caplog):
    cache, path = stored(tmp_path)
    path.with_name("k2.npz").write_bytes(path.read_bytes())
    with caplog.at_level(logging.WARNING, logger="sweep.retrieval.embed"):
        assert cache.get("k2") is None
    assert "stored key does not match" in caplog.text


def test_writes_are_atomic_and_a_failed_write_loses_nothing_computed(tmp_path, caplog):
    _, path = stored(tmp_path)
    assert [p.name for p in path.parent.iterdir()] == ["k.npz"]  # no temporary file left behind
    unwritable = EmbeddingCache("/proc/golden-sweep-cache")  # /proc takes no new folders, even from root
    with caplog.at_level(logging.WARNING, logger="sweep.retrieval.embed"):
        unwritable.put("k", VECTORS)  # no exception: the run goes on with the vectors it computed
    assert unwritable.get("k") is None and "could not store the embeddings" in caplog.text


def test_entries_take_the_umask_and_abandoned_temporary_files_go(tmp_path):
    previous = os.umask(0o027)
    try:
        _umask.cache_clear()
        _, path = stored(tmp_path)
    finally:
        os.umask(previous)
        _umask.cache_clear()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # readable by the group that shares the cache
    old, recent = path.parent / ".k.abc.partial", path.parent / ".k.def.partial"  # a killed writer's, a live one's
    for partial in (old, recent):
        partial.write_bytes(b"half an entry")
    hours_ago = time.time() - EmbeddingCache.ABANDONED_AFTER_S - 60
    os.utime(old, (hours_ago, hours_ago))
    EmbeddingCache(path.parent)
    assert sorted(p.name for p in path.parent.iterdir()) == [recent.name, "k.npz"]


HOLD_A_CLAIM = """
import sys, time
import numpy as np
from sweep.retrieval.cache import EmbeddingCache
cache = EmbeddingCache(sys.argv[1])
with cache.claimed("k"):
    print("claimed", flush=True)
    time.sleep(float(sys.argv[2]))
    cache.put("k", np.ones((3, 4), dtype=np.float32))
time.sleep(60)
"""


def holding_a_claim(folder: Path, seconds: float) -> subprocess.Popen:
    """Another process that claims the entry "k", stores it after `seconds`, then lets go."""
    holder = processes.start([sys.executable, "-c", HOLD_A_CLAIM, str(folder), str(seconds)], stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert holder.stdout.readline() == "claimed\n"
    return holder


@pytest.mark.slow  # a process of its own holds the claim 1.5 s
def test_a_claimed_entry_is_waited_for_not_computed_twice(tmp_path):
    holder = holding_a_claim(tmp_path, 1.5)
    try:
        cache = EmbeddingCache(tmp_path)
        assert cache.get("k") is None  # being computed elsewhere
        with cache.claimed("k"):
            assert np.array_equal(cache.get("k"), np.ones((3, 4)))  # there once the claim is ours
    finally:
        holder.kill()


@pytest.mark.slow  # a process of its own
def test_a_claim_dies_with_its_process(tmp_path):
    holder = holding_a_claim(tmp_path, 600)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    cache = EmbeddingCache(tmp_path)
    with cache.claimed("k"):  # not waiting for the dead: the kernel dropped its lock
        assert cache.get("k") is None


@pytest.mark.parametrize("kind", ["file", "file above"])
def test_a_cache_folder_that_cannot_be_one_is_an_error_when_made(tmp_path, kind):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    folder = blocker if kind == "file" else blocker / "cache"
    with pytest.raises(InputError, match=f"cache_dir={folder}: {blocker} is a file, not a folder"):
        EmbeddingCache(folder)


@pytest.mark.slow
def test_a_garbage_cache_file_gives_the_right_numbers_end_to_end(tmp_path, small_kb_files):
    first = sweep(tmp_path, small_kb_files, "chunk=0")
    assert first.returncode == 0, first.stderr[-2000:]
    [entry] = (tmp_path / "cache").glob("*.npz")
    damage_same_size(entry)
    second = sweep(tmp_path, small_kb_files, "chunk=0")
    assert second.returncode == 0 and "damaged embedding cache entry" in second.stdout + second.stderr
    _, runs = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    after, before = (r.data.metrics for r in runs)  # newest first
    assert after["ndcg_at_10"] == before["ndcg_at_10"] and after["embed/cache_hit"] == before["embed/cache_hit"] == 0.0


@pytest.mark.slow
def test_a_cache_dir_that_is_a_file_fails_before_embedding(tmp_path, small_kb_files):
    (tmp_path / "blocker").write_text("x")
    args, env = sweep_command(
        tmp_path, small_kb_files, "chunk=0", env={"SWEEP_CACHE_DIR": str(tmp_path / "blocker")}, new_store=True
    )
    args = [a for a in args if not a.startswith("cache_dir=")]  # the environment variable decides
    result = processes.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert not (tmp_path / "mlflow.db").exists()  # refused by the preflight: no run started, nothing embedded
    message = f"cache_dir={tmp_path / 'blocker'}: {tmp_path / 'blocker'} is a file, not a folder"
    assert one_error_line(result.stderr).startswith(message)


# ---------------------------------------------------------------- 4. dead processes


def dead_pid() -> int:
    child = processes.start([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.slow
def test_runs_of_a_dead_process_are_marked_killed_and_live_ones_are_not(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow.MlflowClient(store)
    experiment = client.create_experiment("e")
    host = socket.gethostname()
    dead = client.create_run(
        experiment, tags={"sweep.host": host, "sweep.pid": str(dead_pid()), "sweep.process_start": "1"}
    )
    alive = client.create_run(experiment, tags=process_tags())  # this very process
    elsewhere = client.create_run(experiment, tags={"sweep.host": "another-host", "sweep.pid": "1"})
    mlflow.set_tracking_uri(store)
    try:
        assert kill_orphans(experiment) == 1
    finally:
        mlflow.set_tracking_uri(None)
    statuses = {r.info.run_id: r.info.status for r in client.search_runs([experiment])}
    assert statuses == {dead.info.run_id: "KILLED", alive.info.run_id: "RUNNING", elsewhere.info.run_id: "RUNNING"}
    assert "ended while the run was RUNNING" in client.get_run(dead.info.run_id).data.tags["error"]


@pytest.mark.slow
def test_a_run_whose_process_was_killed_is_marked_killed_by_the_next_one(tmp_path, small_kb_files):
    args, env = sweep_command(tmp_path, small_kb_files, "chunk=16", "chunking.overlap=0")  # MiniLM, many chunks
    process = processes.start(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(tmp_path / "mlflow.db", lambda runs: any(r["status"] == "RUNNING" for r in runs))
    process.kill()  # SIGKILL: no handler runs, as when native code aborts the process
    process.wait()
    [orphan] = wait_for(tmp_path / "mlflow.db", lambda runs: len(runs) == 1)
    assert orphan["status"] == "RUNNING"
    after = sweep(tmp_path, small_kb_files, "model=bm25", "chunk=0")
    assert after.returncode == 0, after.stderr[-2000:]
    client, runs = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    statuses = {r.info.run_id: r.info.status for r in runs}
    assert statuses[orphan["run_id"]] == "KILLED" and sorted(statuses.values()) == ["FINISHED", "KILLED"]
    assert f"its process ({process.pid} on " in client.get_run(orphan["run_id"]).data.tags["error"]


# ---------------------------------------------------------------- 5. signals and failed combinations


@pytest.mark.slow
@pytest.mark.parametrize(("number", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_a_sweep_kills_the_run_and_the_sweep_and_keeps_what_finished(
    tmp_path, small_kb_files, number, code
):
    # lexical, whole documents first: the signal comes within a poll (0.1 s) of the 2nd combination's start
    args, env = sweep_command(tmp_path, small_kb_files, "-m", "model=bm25", "chunk=0,40,48,64,96,128")
    process = processes.start(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(
        tmp_path / "mlflow.db",
        lambda runs: (
            any(r["status"] == "FINISHED" for r in runs) and any(r["status"] == "RUNNING" and r["child"] for r in runs)
        ),
    )  # one combination finished, the next one running
    process.send_signal(number)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == code, stderr[-3000:]
    client, runs = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    [parent] = [r for r in runs if r.data.tags.get("sweep.parent")]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    name = signal.Signals(number).name
    assert parent.info.status == "KILLED" and parent.data.tags["error"] == f"interrupted by {name}"
    finished = [c for c in children if c.info.status == "FINISHED"]
    killed = [c for c in children if c.info.status == "KILLED"]
    assert len(finished) + len(killed) == len(children) < 6 and len(killed) <= 1
    assert all(c.data.tags["error"] == f"interrupted by {name}" for c in killed)
    assert (
        one_error_line(stderr)
        == f"interrupted by {name}: {len(finished)} of 6 combinations finished; the sweep is marked KILLED"
    )
    assert "tables/leaderboard.json" in {a.path for a in client.list_artifacts(parent.info.run_id, "tables")}


@pytest.mark.slow
def test_sigterm_during_a_single_run_marks_it_killed(tmp_path, small_kb_files):
    args, env = sweep_command(tmp_path, small_kb_files, "chunk=16", "chunking.overlap=0")
    process = processes.start(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(tmp_path / "mlflow.db", lambda runs: any(r["status"] == "RUNNING" for r in runs))
    process.terminate()
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143
    assert one_error_line(stderr) == "interrupted by SIGTERM; the run in progress is marked KILLED"
    _, [run] = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert run.info.status == "KILLED" and run.data.tags["error"] == "interrupted by SIGTERM"


# ---------------------------------------------------------------- 6. tracking stores


@pytest.mark.slow
@pytest.mark.parametrize(
    ("store", "message"),
    [
        (
            "sqlite:////proc/golden-sweep.db",
            "sqlite:////proc/golden-sweep.db: cannot create the store (unable to open database file)",
        ),
        (
            "sqlite:///{tmp}/blocker/mlflow.db",
            "sqlite:///{tmp}/blocker/mlflow.db: cannot create the store: {tmp}/blocker is not a writable folder",
        ),
        (
            "sqlite:///{tmp}/garbage.db",
            "sqlite:///{tmp}/garbage.db: not a usable SQLite database (file is not a database)",
        ),
        ("sqlite:///{tmp}", "sqlite:///{tmp}: {tmp} is a folder, not an SQLite file"),
    ],
)
def test_a_store_that_cannot_be_used_is_one_line_within_seconds(tmp_path, small_kb_files, store, message):
    (tmp_path / "blocker").write_text("a file")
    (tmp_path / "garbage.db").write_bytes(b"garbage, not SQLite " * 100)
    start = time.monotonic()
    result = sweep(
        tmp_path, small_kb_files, "model=bm25", "chunk=0", env={"MLFLOW_TRACKING_URI": store.format(tmp=tmp_path)}
    )
    assert result.returncode == 2 and time.monotonic() - start < 30
    assert one_error_line(result.stderr) == message.format(tmp=tmp_path)
    assert (tmp_path / "garbage.db").read_bytes() == b"garbage, not SQLite " * 100  # left as it was


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory, small_kb_files) -> str:
    """Two sweeps started at the same moment on a store that does not exist yet (each would make
    it), both finished: the store (sqlite:///...)."""
    folder = tmp_path_factory.mktemp("two-sweeps")
    started = []
    for chunk in ("0", "64"):
        args, env = sweep_command(folder, small_kb_files, "-m", "model=bm25,tfidf", f"chunk={chunk}", new_store=True)
        started.append(
            processes.start(args, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    results = [(p, *p.communicate(timeout=300)) for p in started]
    assert [p.returncode for p, _, _ in results] == [0, 0], [e[-2000:] for _, _, e in results]
    return f"sqlite:///{folder / 'mlflow.db'}"


@pytest.mark.slow
def test_two_sweeps_starting_at_once_on_a_new_store_both_keep_all_their_runs(two_sweeps):
    _, runs = runs_in(two_sweeps)
    assert len(runs) == 6 and {r.info.status for r in runs} == {"FINISHED"}
    assert sorted(r.data.params.get("chunk", "parent") for r in runs) == ["0", "0", "64", "64", "parent", "parent"]


# ---------------------------------------------------------------- 7. sweep.best


def best(cwd: Path, *args: str, store: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"} | (
        {"MLFLOW_TRACKING_URI": store} if store else {}
    )
    return processes.run(
        [sys.executable, "-m", "sweep.best", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_a_lookup_creates_no_store(tmp_path):
    result = best(tmp_path)
    assert result.returncode == 2
    assert (
        one_error_line(result.stderr) == "sqlite:///mlflow.db: no MLflow store here yet (nothing has been logged to it)"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_best_checks_its_arguments_and_quotes_cannot_break_its_filter(tmp_path, two_sweeps):
    store = two_sweeps  # a store with sweeps in it, which sweep.best only reads
    cases = [
        (
            ["--output", str(tmp_path)],
            f"--output {tmp_path}: is a folder; give a file name, e.g. {tmp_path / 'best.yaml'}",
        ),
        (
            ["--sweep", "abc' or '1'='1"],
            "--sweep \"abc' or '1'='1\": not an MLflow run id (32 hexadecimal digits), nor 'latest'",
        ),
        (
            ["--metric", "ndcg`_at_10"],
            "--metric 'ndcg`_at_10': not a metric name (letters, digits and _ - . / : space)",
        ),
        (
            ["--metric", "ndcg'_at_10"],
            '--metric "ndcg\'_at_10": not a metric name (letters, digits and _ - . / : space)',
        ),
        (["--experiment", "it's mine"], 'no MLflow experiment named "it\'s mine" at ' + store),
    ]
    for args, message in cases:
        result = best(tmp_path, *args, store=store)
        assert result.returncode == 2 and one_error_line(result.stderr) == message, (args, result.stderr[-500:])
    good = best(tmp_path, "--metric", "ndcg_at_10", "--output", str(tmp_path / "best.yaml"), store=store)
    assert good.returncode == 0 and (tmp_path / "best.yaml").is_file()


# ---------------------------------------------------------------- 8. keys, engine folders, full disks, closed pipes

KEY = "sk-proj-4f9c2a7e1b3d5f6a8c0e2b4d6f8a1c3e5b7d9f0a"  # pasted where its variable's name belongs
NOT_A_NAME = (
    "{key}: not an environment variable's name (it looks like a key itself: give the variable that holds it, "
    "e.g. {example}); the value is not shown"
)
EMBEDDER = ("model/embedder=openai", "model.embedder.model=text-embedding-3-small")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            [*EMBEDDER, f"model.embedder.api_key_env={KEY}"],
            NOT_A_NAME.format(key="model.embedder.api_key_env", example="OPENAI_API_KEY"),
        ),
        (
            ["-m", *EMBEDDER, f"model.embedder.api_key_env=OPENAI_API_KEY,{KEY}"],
            NOT_A_NAME.format(key="model.embedder.api_key_env", example="OPENAI_API_KEY"),
        ),
        (
            ["model=bm25", "reranker=api", "reranker.model=rerank-v3.5", f"reranker.api_key_env={KEY}"],
            NOT_A_NAME.format(key="reranker.api_key_env", example="RERANK_API_KEY"),
        ),
        (
            ["--cfg", "job", *EMBEDDER, f"model.embedder.api_key_env={KEY}"],
            NOT_A_NAME.format(key="model.embedder.api_key_env", example="OPENAI_API_KEY"),
        ),
        (
            [*EMBEDDER, f"model.embedder.api_key_env='{KEY}"],  # not even an override: still not shown
            "model.embedder.api_key_env: cannot be read as an override; the value is not shown",
        ),
        (
            [*EMBEDDER, f"model.embedder.base_url=https://me:{KEY}@gateway.example/v1"],
            "model.embedder.base_url: the address carries credentials (https://***@gateway.example/v1); give it "
            "without them, and the key in the environment variable model.embedder.api_key_env names; the "
            "credentials are not shown",
        ),
    ],
)
def test_a_key_on_the_command_line_is_refused_before_anything_shows_or_writes_it(
    tmp_path, small_kb_files, overrides, message
):
    result = sweep(tmp_path, small_kb_files, *overrides)
    assert result.returncode == 2 and one_error_line(result.stderr) == message
    assert KEY not in result.stdout + result.stderr
    # nothing anywhere holds it: no MLflow param (the store is the blank one), resolved.yaml,
    # overrides.yaml, .hydra/ folder (outputs/, multirun/ were never made), cache
    holding = [p for p in tmp_path.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert holding == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"] and states(tmp_path / "mlflow.db") == {}


MS_RDONLY = 1  # linux/mount.h


def on_a_read_only_file_system(folder: Path) -> None:
    """In a command's process, before it runs: a read-only tmpfs at `folder`, in user and mount
    namespaces of its own (root there, so only the file system's own read-only flag stops writes)."""
    uid, gid = os.getuid(), os.getgid()
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0, os.strerror(ctypes.get_errno())
    for name, line in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        Path("/proc/self", name).write_text(line)
    assert libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) == 0, os.strerror(ctypes.get_errno())
    assert libc.mount(b"tmpfs", os.fsencode(folder), b"tmpfs", MS_RDONLY, b"size=1m") == 0, os.strerror(
        ctypes.get_errno()
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("engine", "message"),
    [
        (
            ["index=chroma", "index.path={fs}/chroma"],
            "index.path={fs}/chroma: Chroma cannot keep its database there ({fs}: Read-only file system); "
            "give index.path=<a writable folder>, or leave it null for a temporary one",
        ),
        (
            ["index=lancedb", "index.uri={fs}/lance"],
            "index.uri={fs}/lance: LanceDB cannot keep its database there ({fs}: Read-only file system); "
            "give index.uri=<a writable folder>, or leave it null for a temporary one",
        ),
    ],
)
def test_an_engine_folder_on_a_read_only_file_system_is_one_line_before_a_run_opens(
    tmp_path, small_kb_files, engine, message
):
    fs = tmp_path / "read-only"
    fs.mkdir()
    args, env = sweep_command(tmp_path, small_kb_files, *(e.format(fs=fs) for e in engine))
    result = processes.run(
        args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        preexec_fn=functools.partial(on_a_read_only_file_system, fs),
    )  # fmt: skip
    assert result.returncode == 2 and one_error_line(result.stderr) == message.format(fs=fs)
    assert states(tmp_path / "mlflow.db") == {}  # checked in the preflight: no run opened
    assert not (tmp_path / "cache").exists()  # nothing embedded


@pytest.mark.slow
@pytest.mark.parametrize(("multirun", "key"), [(False, "hydra.run.dir"), (True, "hydra.sweep.dir")])
def test_hydras_output_folder_on_a_full_disk_is_one_line_before_a_run_opens(tmp_path, small_kb_files, multirun, key):
    fs = tmp_path / "fs"
    args, env = sweep_command(tmp_path, small_kb_files, *(["-m", "model=bm25,tfidf"] if multirun else ["model=bm25"]))
    args = [f"{key}={fs / 'out'}" if a.startswith(f"{key}=") else a for a in args]
    code, stderr = on_a_full_disk(tmp_path, fs, args, env)
    assert code == 2
    assert one_error_line(stderr) == (
        f"{key}={fs / 'out'}: no space left for Hydra's output folder ({fs}: No space left on device); "
        f"free some, or give {key}=<a folder on a disk with room>"
    )
    assert states(tmp_path / "mlflow.db") == {}  # no run, no sweep opened


@pytest.mark.slow
def test_a_reader_gone_ends_nothing_and_nothing_computed_is_lost(tmp_path, small_kb_files):
    """`python -m sweep -m ... | head -1`, the reader gone before the first line: the sweep runs to
    its end and logs every run, its console goes to /dev/null, no "Logging error" or traceback,
    exit code 0. A real pipe, so a fresh interpreter (the preloaded server writes to files)."""
    args, env = sweep_command(tmp_path, small_kb_files, "-m", "model=bm25,tfidf")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            args, cwd=tmp_path, env=env, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=600
        )
    finally:
        os.close(write_end)
    assert result.returncode == 0, result.stderr[-3000:]
    for said in ("Logging error", "Traceback", "BrokenPipe", "error:"):
        assert said not in result.stderr, result.stderr[-3000:]
    _, runs = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert sorted(r.info.status for r in runs) == ["FINISHED"] * 3
    assert sorted(r.data.params.get("model") for r in runs if r.data.tags.get("mlflow.parentRunId")) == [
        "bm25",
        "tfidf",
    ]
