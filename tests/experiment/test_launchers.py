"""Hydra's launchers run a sweep's combinations elsewhere: `hydra/launcher=joblib` in worker
processes, `hydra/launcher=ray` on a Ray cluster (a local one, started and stopped here), and the
joblib sweep against a team's tracking server (`mlflow server` on a throwaway PostgreSQL cluster,
started and stopped here). Each gives 1 parent + 4 FINISHED children with a complete leaderboard,
the children logged by the workers, not by the sweep's own process. Marked slow: each starts
`python -m sweep` (and servers) in subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest
from omegaconf import OmegaConf

from helpers.commands import runs_in, sweep
from sweep import tracking
from sweep.experiment.cli import ParentRunCallback, connecting_to_a_ray_cluster, preflight
from sweep.retrieval.cache import EmbeddingCache
from sweep.tracking import MAX_RUN_NAME, run_name

TWO_BY_TWO = ("chunk=64,128", "index=flat,hnsw")
JOBLIB = ("hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
# Ray on loopback only: without the last one Ray binds the machine's own address, not 127.0.0.1
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_sweep(store: str, where: Path, chunks: tuple[str, str] = ("64", "128")) -> tuple[mlflow.entities.Run, list]:
    """The store's only sweep, checked: 1 parent + 4 FINISHED children (the 2×2 combinations, each
    once) and a leaderboard of 4 rows. (parent, children)."""
    client, runs = runs_in(store)
    [parent] = [r for r in runs if r.data.tags.get("sweep.parent") == "true"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(runs) == 5 and parent.info.status == "FINISHED"
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert {c.info.status for c in children} == {"FINISHED"}
    assert sorted((c.data.params["chunk"], c.data.params["index"]) for c in children) == sorted(
        (chunk, index) for chunk in chunks for index in ("flat", "hnsw")
    )
    table = client.download_artifacts(parent.info.run_id, "tables/leaderboard.json", str(where))
    assert len(json.loads(Path(table).read_text())["data"]) == 4
    return parent, children


def ran_in_workers(parent: mlflow.entities.Run, children: list) -> set[str]:
    """The processes that logged the children: none of them the sweep's own."""
    workers = {c.data.tags["sweep.pid"] for c in children}
    assert parent.data.tags["sweep.pid"] not in workers
    return workers


@pytest.mark.slow
def test_joblib_workers_run_the_sweep_and_share_the_embedding_cache(tmp_path, small_kb_files):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="pip install 'golden-sweep[scale]'")
    result = sweep(tmp_path, small_kb_files, "-m", *JOBLIB, *TWO_BY_TWO)  # MiniLM
    assert result.returncode == 0, result.stderr[-3000:]
    said = result.stdout + result.stderr
    assert "database is locked" not in said and "damaged embedding cache entry" not in said
    parent, children = one_sweep(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path)
    assert len(ran_in_workers(parent, children)) == 2
    # the two combinations of chunk=64 ran at once in two workers: one embedded the texts, the
    # other waited for its claim on them and read them from the cache
    first, second = sorted((c for c in children if c.data.params["chunk"] == "64"), key=lambda c: c.info.start_time)
    assert second.info.start_time < first.info.end_time
    assert first.data.tags["sweep.pid"] != second.data.tags["sweep.pid"]
    assert sorted(c.data.metrics["embed/cache_hit"] for c in (first, second)) == [0.0, 1.0]
    # and the cache holds one intact entry per chunk size (and its lock file), no temporary file
    cache = EmbeddingCache(tmp_path / "cache")
    entries = sorted((tmp_path / "cache").glob("*.npz"))
    assert len(entries) == 2 and all(cache.get(e.stem) is not None for e in entries)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir() if p not in entries) == sorted(
        f".{e.stem}.lock" for e in entries
    )


@pytest.fixture
def ray_cluster(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """A local Ray cluster on 127.0.0.1 (`ray start --head`), stopped afterwards: (its address,
    its workers' working directory). Ray's temporary folder is a short one under pytest's, as
    Ray's socket paths must stay under 108 bytes."""
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="pip install 'golden-sweep[scale]'")
    temporary, folder = tmp_path_factory.mktemp("ray"), tmp_path_factory.mktemp("cluster")
    port = free_port()
    ports = {
        "--dashboard-port": free_port(),
        "--ray-client-server-port": free_port(),
        "--dashboard-agent-listen-port": free_port(),
    }
    head = subprocess.Popen(
        [Path(sys.executable).with_name("ray"), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
         f"--temp-dir={temporary}", "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats",
         *(f"{flag}={number}" for flag, number in ports.items())],
        cwd=folder, env=os.environ | RAY_ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # the cluster's processes share this process group: stopped by it alone
    )  # fmt: skip
    try:
        said, _ = head.communicate(timeout=180)
        assert head.returncode == 0, said[-3000:]
        yield f"127.0.0.1:{port}", folder
    finally:
        stop_group(head.pid)


def stop_group(group: int) -> None:
    """SIGTERM to the process group, SIGKILL to what is left of it after 5 s."""
    for number in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(group, number)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 5
        while live_members(group) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not live_members(group):
            return


def live_members(group: int) -> list[int]:
    """The processes of a process group that have not ended (a zombie has: only its parent's wait is missing)."""
    members = []
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, process_group = status.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):  # ended while we looked
            continue
        if state != "Z" and int(process_group) == group:
            members.append(int(status.parent.name))
    return members


@pytest.mark.slow
def test_ray_runs_the_sweep_on_a_local_cluster(tmp_path, small_kb_files, ray_cluster):
    address, workers_folder = ray_cluster
    ray = ("hydra/launcher=ray", f"hydra.launcher.ray.init.address={address}")
    result = sweep(tmp_path, small_kb_files, "-m", *ray, "model=bm25", "chunk=0,64", "index=flat,hnsw", env=RAY_ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "database is locked" not in result.stdout + result.stderr
    parent, children = one_sweep(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path, chunks=("0", "64"))
    ran_in_workers(parent, children)
    # Ray's workers run in the cluster's folder and inherit none of the sweep's environment: the
    # parent's id and the store (made absolute) reached them through the jobs' configs
    assert not (workers_folder / "mlflow.db").exists() and not (workers_folder / "mlruns").exists()


@pytest.fixture
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on a free port of 127.0.0.1, stopped and removed afterwards:
    its database `mlflow`'s URI. As root, its programs run as the user `postgres` (PostgreSQL
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


@pytest.fixture
def tracking_server(tmp_path, postgres) -> Iterator[str]:
    """`mlflow server` on PostgreSQL, on a free port of 127.0.0.1, stopped afterwards: its URL.
    The driver is named: SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3, not psycopg2."""
    folder, port = tmp_path / "server", free_port()
    folder.mkdir()
    with (folder / "server.log").open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", postgres.replace("postgresql:", "postgresql+psycopg2:"),
             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # the first start creates MLflow's tables
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, (folder / "server.log").read_text()[
                    -3000:
                ]
                time.sleep(0.5)
        yield url
    finally:
        stop_group(server.pid)  # its workers with it


@pytest.mark.slow
def test_joblib_sweep_logs_to_a_tracking_server_on_postgresql(tmp_path, small_kb_files, tracking_server, postgres):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="pip install 'golden-sweep[scale]'")
    psycopg2 = pytest.importorskip("psycopg2", reason="pip install 'golden-sweep[scale]'")
    work = tmp_path / "work"
    work.mkdir()
    result = sweep(
        work, small_kb_files, "-m", *JOBLIB, "model=bm25", "chunk=0,64", "index=flat,hnsw",
        env={"MLFLOW_TRACKING_URI": tracking_server},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    parent, children = one_sweep(tracking_server, tmp_path, chunks=("0", "64"))
    ran_in_workers(parent, children)
    assert not (work / "mlflow.db").exists() and not (work / "mlruns").exists()  # no local store
    with psycopg2.connect(postgres) as database, database.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM runs")
        assert cursor.fetchone() == (5,)  # the runs are in PostgreSQL itself


LOG_THE_GOLDEN_SET = """
import sys, time
import mlflow
from sweep import tracking
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden
folder, experiment_id, start_at = sys.argv[1], sys.argv[2], float(sys.argv[3])
corpus = load_corpus(f"{folder}/corpus.jsonl")
golden = load_golden(f"{folder}/golden.jsonl", corpus, warn=False)
with mlflow.start_run(experiment_id=experiment_id):
    time.sleep(max(0.0, start_at - time.time()))
    tracking.log_golden_input(golden, corpus)
"""


@pytest.mark.slow
def test_workers_logging_the_golden_set_at_the_same_moment_on_postgresql(small_kb_files, tracking_server, postgres):
    """MLflow looks for the dataset, then inserts it: workers that log the same golden set at once
    all insert, and PostgreSQL refuses all but one. Each worker's run still gets its input."""
    psycopg2 = pytest.importorskip("psycopg2", reason="pip install 'golden-sweep[scale]'")
    env = os.environ | {"MLFLOW_TRACKING_URI": tracking_server}
    experiment_id = mlflow.MlflowClient(tracking_server).create_experiment("at the same moment")
    start_at = str(time.time() + 15)  # after every worker has imported and started its run
    workers = [
        subprocess.Popen([sys.executable, "-c", LOG_THE_GOLDEN_SET, str(small_kb_files), experiment_id, start_at], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(6)
    ]  # fmt: skip
    said = [worker.communicate(timeout=120)[0] for worker in workers]
    assert [worker.returncode for worker in workers] == [0] * 6, "\n".join(said)[-3000:]
    with psycopg2.connect(postgres) as database, database.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM datasets")
        assert cursor.fetchone() == (1,)
        cursor.execute("SELECT count(DISTINCT destination_id) FROM inputs WHERE destination_type = 'RUN'")
        assert cursor.fetchone() == (6,)


def test_a_long_run_name_is_cut_to_what_postgresql_takes():
    overrides = "chunk=64 golden.path=/" + "deep/" * 60 + "golden.jsonl"
    assert len(run_name(overrides)) == MAX_RUN_NAME and run_name(overrides).endswith("…")
    assert run_name("chunk=64 index=hnsw") == "chunk=64 index=hnsw"


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

    monkeypatch.setattr(tracking, "start_sweep", refused)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    with pytest.raises(SystemExit) as exited:  # not a warning from Hydra and a sweep of orphans
        ParentRunCallback().on_multirun_start(OmegaConf.create(SWEEP_CONFIG))
    assert exited.value.code == 1
    assert capsys.readouterr().err == (
        "error: cannot open the sweep's run at http://127.0.0.1:5000 "
        "(RuntimeError: value too long for type character varying(250))\n"
    )
