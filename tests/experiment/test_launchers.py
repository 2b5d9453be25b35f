"""Hydra's launchers run a sweep's combinations elsewhere: `hydra/launcher=joblib` in worker
processes, logging to a team's tracking server (`mlflow server` on a throwaway PostgreSQL cluster,
started and stopped here, once for the module), and `hydra/launcher=ray` on a Ray cluster (the
session's local one, tests/conftest.py). Each gives 1 parent and a FINISHED child per combination
with a complete leaderboard, the children logged by the workers, not by the sweep's own process.
Marked slow: each starts `python -m sweep` (and servers) in subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest
from omegaconf import OmegaConf

from helpers import processes
from helpers.commands import runs_in, sweep, sweep_command, wait_for
from helpers.processes import start_code
from helpers.servers import free_port, stop_group, wait_until_answering
from sweep.experiment.cli import ParentRunCallback, connecting_to_a_ray_cluster
from sweep.experiment.preflight import preflight
from sweep.experiment.workers import GRACE_S
from sweep.retrieval.cache import EmbeddingCache
from sweep.tracking.lifecycle import MAX_RUN_NAME, run_name

TWO_BY_TWO = ("chunk=64,128", "index=flat,hnsw")
JOBLIB = ("hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
ONE_CHUNKING = ("chunk=64", "index=flat,hnsw")  # two combinations, one set of chunks: two workers at once on it


def one_sweep(store: str, where: Path, chunks: tuple[str, ...]) -> tuple[mlflow.entities.Run, list]:
    """The store's only sweep, checked: 1 parent + a FINISHED child for each combination of `chunks`
    and index=flat,hnsw, each once, and a leaderboard of a row each. (parent, children)."""
    client, runs = runs_in(store)
    [parent] = [r for r in runs if r.data.tags.get("sweep.parent") == "true"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(runs) == 1 + 2 * len(chunks) and parent.info.status == "FINISHED"
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert {c.info.status for c in children} == {"FINISHED"}
    assert sorted((c.data.params["chunk"], c.data.params["index"]) for c in children) == sorted(
        (chunk, index) for chunk in chunks for index in ("flat", "hnsw")
    )
    table = client.download_artifacts(parent.info.run_id, "tables/leaderboard.json", str(where))
    assert len(json.loads(Path(table).read_text())["data"]) == 2 * len(chunks)
    return parent, children


def ran_in_workers(parent: mlflow.entities.Run, children: list) -> set[str]:
    """The processes that logged the children: none of them the sweep's own."""
    workers = {c.data.tags["sweep.pid"] for c in children}
    assert parent.data.tags["sweep.pid"] not in workers
    return workers


@pytest.mark.slow
def test_ray_runs_the_sweep_on_a_local_cluster(tmp_path, small_kb_files, ray_cluster):
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="pip install 'golden-sweep[scale]'")
    address, workers_folder = ray_cluster  # the session's (tests/conftest.py)
    ray = ("hydra/launcher=ray", f"hydra.launcher.ray.init.address={address}")
    result = sweep(tmp_path, small_kb_files, "-m", *ray, "model=bm25", "chunk=0,64", "index=flat,hnsw")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "database is locked" not in result.stdout + result.stderr
    parent, children = one_sweep(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path, chunks=("0", "64"))
    ran_in_workers(parent, children)
    # Ray's workers run in the cluster's folder and inherit none of the sweep's environment: the
    # parent's id and the store (made absolute) reached them through the jobs' configs
    assert not (workers_folder / "mlflow.db").exists() and not (workers_folder / "mlruns").exists()


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on a free port of 127.0.0.1, stopped and removed after this
    module's tests (each keeps to an experiment of its own): its database `mlflow`'s URI. As root, its programs run as the user `postgres` (PostgreSQL
    refuses root); its folder is a fresh one directly in the system's temporary folder, so no
    other pytest session resetting the permissions of pytest's own folders can lock it out."""
    binaries = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not binaries:
        pytest.skip("no PostgreSQL here (Debian's /usr/lib/postgresql/*/bin): apt-get install -y postgresql")
    bin_folder = binaries[-1].parent
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            pytest.skip("running as root, PostgreSQL needs another user: no runuser here")
        as_postgres = ["runuser", "-u", "postgres", "--"]
    home, port = Path(tempfile.mkdtemp(prefix="golden-sweep-postgres-")), free_port()
    (home / "sockets").mkdir()
    if as_postgres:
        shutil.chown(home, "postgres")
        shutil.chown(home / "sockets", "postgres")

    def pg(program: str, *args: str) -> None:
        subprocess.run([*as_postgres, bin_folder / program, *args], check=True, capture_output=True, timeout=120)

    try:
        pg("initdb", "-D", str(home / "data"), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
        options = f"-h 127.0.0.1 -p {port} -k {home / 'sockets'} -F"  # -F: no fsync, the cluster is thrown away
        pg("pg_ctl", "-D", str(home / "data"), "-l", str(home / "log"), "-o", options, "-w", "start")
        try:
            pg("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "mlflow")
            yield f"postgresql://postgres@127.0.0.1:{port}/mlflow"
        finally:
            pg("pg_ctl", "-D", str(home / "data"), "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory, postgres) -> Iterator[str]:
    """`mlflow server` on PostgreSQL, on a free port of 127.0.0.1, stopped after this module's
    tests: its URL. The driver is named: SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3,
    not psycopg2."""
    folder, port = tmp_path_factory.mktemp("server"), free_port()
    with (folder / "server.log").open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", postgres.replace("postgresql:", "postgresql+psycopg2:"),
             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env=os.environ | {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},  # GenAI jobs: seconds to start and stop
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        # the first start creates MLflow's tables
        wait_until_answering(f"{url}/health", server, lambda: (folder / "server.log").read_text(), timeout=180)
        yield url
    finally:
        stop_group(server.pid)  # its workers with it


@pytest.mark.slow
def test_joblib_workers_share_the_embedding_cache_and_log_to_a_tracking_server_on_postgresql(
    tmp_path, small_kb_files, tracking_server, postgres
):
    """One joblib sweep (its workers import torch and MLflow afresh: seconds each) checked for both:
    the workers share the embedding cache, and log to a team's server on PostgreSQL."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="pip install 'golden-sweep[scale]'")
    psycopg2 = pytest.importorskip("psycopg2", reason="pip install 'golden-sweep[scale]'")
    work = tmp_path / "work"
    work.mkdir()
    result = sweep(work, small_kb_files, "-m", *JOBLIB, *ONE_CHUNKING, env={"MLFLOW_TRACKING_URI": tracking_server})
    assert result.returncode == 0, result.stderr[-3000:]
    said = result.stdout + result.stderr
    assert "database is locked" not in said and "damaged embedding cache entry" not in said
    parent, children = one_sweep(tracking_server, tmp_path, chunks=("64",))
    assert len(ran_in_workers(parent, children)) == 2
    assert not (work / "mlflow.db").exists() and not (work / "mlruns").exists()  # no local store
    with psycopg2.connect(postgres) as database, database.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM runs WHERE experiment_id = %s", (int(parent.info.experiment_id),))
        assert cursor.fetchone() == (3,)  # the runs are in PostgreSQL itself
    # the two combinations ran at once in two workers: one embedded the texts, the other waited for
    # its claim on them and read them from the cache
    first, second = sorted(children, key=lambda c: c.info.start_time)
    assert second.info.start_time < first.info.end_time
    assert first.data.tags["sweep.pid"] != second.data.tags["sweep.pid"]
    assert sorted(c.data.metrics["embed/cache_hit"] for c in (first, second)) == [0.0, 1.0]
    # and the cache holds two intact entries, the corpus's and the questions' (each with its lock file), no temporary file
    cache = EmbeddingCache(work / "cache")
    entries = sorted((work / "cache").glob("*.npz"))
    assert len(entries) == 2 and all(cache.get(e.stem) is not None for e in entries)
    assert sorted(p.name for p in (work / "cache").iterdir() if p not in entries) == sorted(
        f".{e.stem}.lock" for e in entries
    )


def started(pid: int) -> str | None:
    """When the process `pid` started (clock ticks since boot, /proc/PID/stat's field 22), None once it
    has ended (gone, or a zombie nobody reaped): with the pid, which process it is, even if the pid is
    used again."""
    try:
        after_name = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return None if after_name[0] in ("Z", "X") else after_name[19]


def children_of(pid: int) -> dict[int, str]:
    """The live processes whose parent is `pid`, with when each started (read from /proc: psutil is
    not a dependency)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            after_name = stat.read_text().rpartition(")")[2].split()
        except OSError:  # ended meanwhile
            continue
        if int(after_name[1]) == pid and after_name[0] not in ("Z", "X"):
            found[int(stat.parent.name)] = after_name[19]
    return found


@pytest.mark.slow
def test_kill_9_of_a_joblib_sweeps_process_ends_its_workers(tmp_path, small_kb_files):
    """The sweep's own process killed (kill -9: no handler runs) while both workers run a
    combination: every process it started (the loky workers, about 0.5 GB each, and the resource
    trackers) ends within seconds, and each worker's run is marked KILLED on its way out."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="pip install 'golden-sweep[scale]'")
    slow = ("model=minilm", "chunk=16,24", "chunking.overlap=0")  # a few thousand chunks to embed each
    args, env = sweep_command(tmp_path, small_kb_files, "-m", *JOBLIB, *slow)
    main = processes.start(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    workers: dict[int, str] = {}
    try:
        wait_for(tmp_path / "mlflow.db", lambda runs: sum(r["child"] and r["status"] == "RUNNING" for r in runs) == 2)
        workers = children_of(main.pid)
        assert len(workers) >= 2  # the two workers, and loky's and multiprocessing's resource trackers
        main.kill()
        main.wait(30)
        killed = time.monotonic()
        while any(started(pid) == when for pid, when in workers.items()) and time.monotonic() - killed < 60:
            time.sleep(0.1)
        took = time.monotonic() - killed
        left = [pid for pid, when in workers.items() if started(pid) == when]
    finally:
        for pid, when in workers.items():  # what a failed test would leave running
            if started(pid) == when:
                os.kill(pid, 9)
    # seconds alone; under a loaded machine's other tests, the worker's embedding batch ends first
    assert left == [] and took < GRACE_S, (left, took)
    runs = wait_for(tmp_path / "mlflow.db", lambda runs: all(r["status"] != "RUNNING" for r in runs if r["child"]))
    assert sorted(r["status"] for r in runs if r["child"]) == ["KILLED", "KILLED"]
    _, logged = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert {r.data.tags.get("error") for r in logged if r.data.tags.get("mlflow.parentRunId")} == {
        "interrupted by SIGTERM"
    }


# argv: the KB folder, the experiment, a barrier folder: the worker writes ready-<pid> there once its
# run is started, then logs the golden set at the moment the file `go` names (epoch seconds)
LOG_THE_GOLDEN_SET = """
import os, sys, time
from pathlib import Path
import mlflow
from sweep.evaluation.record import TrialRecord
from sweep.formats.corpus import load_corpus
from sweep.tracking.records import save_record
from sweep.formats.golden import load_golden
folder, experiment_id, barrier = sys.argv[1], sys.argv[2], Path(sys.argv[3])
corpus = load_corpus(f"{folder}/corpus.jsonl")
golden = load_golden(f"{folder}/golden.jsonl", corpus, warn=False)
with mlflow.start_run(experiment_id=experiment_id):
    (barrier / f"ready-{os.getpid()}").touch()
    while not (barrier / "go").exists():
        time.sleep(0.01)
    time.sleep(max(0.0, float((barrier / "go").read_text()) - time.time()))
    save_record(TrialRecord("worker", {}, golden=golden, corpus=corpus))
"""


@pytest.mark.slow
def test_workers_logging_the_golden_set_at_the_same_moment_on_postgresql(
    tmp_path, small_kb_files, tracking_server, postgres
):
    """MLflow looks for the dataset, then inserts it: workers that log the same golden set at once
    all insert, and PostgreSQL refuses all but one. Each worker's run still gets its input."""
    psycopg2 = pytest.importorskip("psycopg2", reason="pip install 'golden-sweep[scale]'")
    env = os.environ | {"MLFLOW_TRACKING_URI": tracking_server}
    experiment_id = mlflow.MlflowClient(tracking_server).create_experiment("at the same moment")
    arguments = (str(small_kb_files), experiment_id, str(tmp_path))
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    # real processes, forked with MLflow imported (helpers.processes)
    workers = [start_code(LOG_THE_GOLDEN_SET, *arguments, env=env, **pipes) for _ in range(6)]
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("ready-*"))) < 6:  # every worker has started its run
            ended = ["".join(w.communicate()) for w in workers if w.poll() is not None]
            assert not ended and time.monotonic() < deadline, f"not every worker started its run: {ended}"[-3000:]
            time.sleep(0.05)
        # one moment for all, a little ahead: each worker sees it within its 10 ms poll, then sleeps to it
        (tmp_path / "go.partial").write_text(str(time.time() + 0.5))
        (tmp_path / "go.partial").rename(tmp_path / "go")
        said = ["".join(worker.communicate(timeout=120)) for worker in workers]
    finally:
        for worker in workers:  # those left waiting for `go` when the test failed
            worker.kill()
    assert [worker.returncode for worker in workers] == [0] * 6, "\n".join(said)[-3000:]
    with psycopg2.connect(postgres) as database, database.cursor() as cursor:
        # this test's experiment: the module's other test logs its own sweep's golden set to the same database
        cursor.execute("SELECT count(*) FROM datasets WHERE experiment_id = %s", (int(experiment_id),))
        assert cursor.fetchone() == (1,)
        cursor.execute(
            "SELECT count(DISTINCT i.destination_id) FROM inputs i JOIN runs r ON r.run_uuid = i.destination_id"
            " WHERE i.destination_type = 'RUN' AND r.experiment_id = %s",
            (int(experiment_id),),
        )
        assert cursor.fetchone() == (6,)


def test_a_long_run_name_is_cut_to_what_postgresql_takes():
    overrides = "chunk=64 golden.path=/" + "deep/" * 60 + "golden.jsonl"
    assert len(run_name(overrides)) == MAX_RUN_NAME and run_name(overrides).endswith("…")
    assert run_name("chunk=64 index=hnsw") == "chunk=64 index=hnsw"


@pytest.mark.slow  # composes ten combinations: 2 s
def test_launcher_overrides_pass_the_preflight_and_a_missing_launcher_says_what_to_install(capsys):
    assert preflight(["-m", *JOBLIB, *TWO_BY_TWO]) == 4
    assert preflight(["-m", "hydra/launcher=ray", "hydra.launcher.ray.init.address=127.0.0.1:6379", *TWO_BY_TWO]) == 4
    with pytest.raises(SystemExit) as exited:
        preflight(["-m", "hydra/launcher=dask", *TWO_BY_TWO])
    assert exited.value.code == 2
    said = capsys.readouterr().err
    assert said.startswith("error: hydra/launcher=dask: no such option (the options: basic, ")
    assert "; pip install 'golden-sweep[scale]' for joblib and ray" in said


def test_joining_a_ray_cluster_leaves_the_object_store_to_it(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    joining = ["-m", "hydra/launcher=ray", "hydra.launcher.ray.init.address=127.0.0.1:6379"]
    assert connecting_to_a_ray_cluster(joining)[-1] == "+hydra.launcher.ray.init.object_store_memory=null"
    told = [*joining, "+hydra.launcher.ray.init.object_store_memory=1000000000"]
    assert connecting_to_a_ray_cluster(told) == told
    assert connecting_to_a_ray_cluster(["-m", "hydra/launcher=ray"]) == ["-m", "hydra/launcher=ray"]  # a new local one
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert connecting_to_a_ray_cluster(["-m", "hydra/launcher=ray"])[-1].endswith("object_store_memory=null")


SWEEP_CONFIG = {
    "experiment": "e", "objective": "ndcg_at_10", "resume": False, "verbosity": "normal", "hydra": {"overrides": {"task": []}}
}  # fmt: skip


def test_a_parent_run_the_store_refuses_stops_the_sweep_before_any_combination(monkeypatch, capsys):
    def refused(*args, **kwargs):
        raise RuntimeError("value too long for type character varying(250)\nSQL: INSERT INTO runs ...")

    monkeypatch.setattr("sweep.experiment.cli.start_sweep", refused)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    with pytest.raises(SystemExit) as exited:  # not a warning from Hydra and a sweep of orphans
        ParentRunCallback().on_multirun_start(OmegaConf.create(SWEEP_CONFIG))
    assert exited.value.code == 1
    assert capsys.readouterr().err == (
        "error: cannot open the sweep's run at http://127.0.0.1:5000 "
        "(RuntimeError: value too long for type character varying(250))\n"
    )
