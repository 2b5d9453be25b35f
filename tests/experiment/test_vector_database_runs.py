"""Chroma and LanceDB through `python -m sweep`, against a `chroma run` server started here on
127.0.0.1: a sweep on the server equals the embedded one; runs that finish, fail or get SIGTERM
leave no collection in the server, no table in the LanceDB folder and no temporary folder; killing
the server mid-sweep fails its combinations with one line each and the sweep exits 1, the store
consistent. The engines in process: tests/retrieval/test_vector_databases.py."""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers import processes
from helpers.commands import runs_in, sweep, sweep_command, wait_for
from helpers.servers import free_port

if TYPE_CHECKING:
    import chromadb

CHROMA = Path(sys.executable).parent / "chroma"  # chromadb's command, installed beside this Python
MEASURED_ELSEWHERE = (
    "time/",
    "latency/",
    "throughput/",
    "embed/",
    "cache/",
    "index/bytes",
    "index/build_s",
    "index/search_ms",
)


@functools.cache  # one per server: a client costs ~0.1 s of CPU (an SSL context), which polling would repeat
def client(port: int) -> chromadb.ClientAPI:
    import chromadb  # here, not at the top: the engines take seconds to import, and every worker collects this file
    from chromadb.config import Settings

    return chromadb.HttpClient(host="127.0.0.1", port=port, settings=Settings(anonymized_telemetry=False))


@contextmanager
def chroma_server(folder: Path) -> Iterator[tuple[subprocess.Popen, int]]:
    """`chroma run --path folder` on a free port of 127.0.0.1, answering; stopped afterwards."""
    port = free_port()
    command = [str(CHROMA), "run", "--path", str(folder), "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                client(port).heartbeat()
                break
            except ValueError:  # chromadb's "Could not connect": not up yet
                assert server.poll() is None and time.monotonic() < deadline, "chroma run did not start"
                time.sleep(0.2)
        yield server, port
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[int]:
    with chroma_server(tmp_path_factory.mktemp("chroma-server")) as (_, port):
        yield port


def engine_options(folder: Path, port: int) -> str:
    """A Hydra search path with index options `chroma_server` (on `port`) and `lance_here` (a LanceDB
    folder under `folder`), a reranker that fails after the index is built (`broken`: a folder that
    is no CrossEncoder) and a hybrid of both engines (`two_engines`)."""
    conf = folder / "conf"
    for group in ("index", "reranker", "model"):
        (conf / group).mkdir(parents=True, exist_ok=True)
    (folder / "not-a-model").mkdir(exist_ok=True)
    chroma_server_yaml = (
        f"_target_: sweep.retrieval.chroma_index.ChromaIndex\nmode: server\nport: {port}\nef_search: 100\n"
    )
    lance_yaml = f"_target_: sweep.retrieval.lancedb_index.LanceDBIndex\nuri: {folder / 'lance'}\n"
    (conf / "index" / "chroma_server.yaml").write_text(chroma_server_yaml)
    (conf / "index" / "lance_here.yaml").write_text(lance_yaml)
    (conf / "reranker" / "broken.yaml").write_text(
        f"_target_: sweep.retrieval.rerank.CrossEncoderReranker\nmodel: {folder / 'not-a-model'}\n"
    )
    indent = lambda text: "".join(f"      {line}\n" for line in text.splitlines())  # noqa: E731
    (conf / "model" / "two_engines.yaml").write_text(
        "defaults:\n  - /model@members.chroma: minilm\n  - /model@members.lance: minilm\n  - _self_\n"
        "_target_: sweep.retrieval.hybrid.HybridRetriever\n_convert_: all\nmembers:\n"
        f"  chroma:\n    index:\n{indent(chroma_server_yaml)}  lance:\n    index:\n{indent(lance_yaml)}"
    )
    return f"hydra.searchpath=[file://{conf}]"


def left_behind(folder: Path, port: int | None) -> dict[str, list[str]]:
    """What the runs left: collections in the server, tables in the LanceDB folder, temporary folders."""
    import lancedb

    return {
        "collections": [c.name for c in client(port).list_collections()] if port else [],
        "tables": list(lancedb.connect(folder / "lance").list_tables().tables),
        "temporary": sorted(p.name for p in (folder / "tmp").glob("golden-sweep-*")),
    }


def in_tmp(folder: Path) -> dict[str, str]:
    (folder / "tmp").mkdir(exist_ok=True)
    return {"TMPDIR": str(folder / "tmp")}


def comparable(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not k.startswith(MEASURED_ELSEWHERE)}


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> Path:
    """One embedding cache for this file's sweeps: the small knowledge base is embedded once."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def cwd(tmp_path, shared_cache) -> Path:
    (tmp_path / "cache").symlink_to(shared_cache, target_is_directory=True)  # where sweep_command points cache_dir
    return tmp_path


@pytest.mark.slow
def test_a_sweep_on_the_server_equals_embedded_and_finished_runs_leave_nothing(cwd, small_kb_files, server):
    options = engine_options(cwd, server)
    result = sweep(
        cwd, small_kb_files, "-m", options, "index=chroma,chroma_server,lance_here", "filter=pre", env=in_tmp(cwd)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    _, runs = runs_in(f"sqlite:///{cwd / 'mlflow.db'}")
    children = {r.data.params["index"]: r for r in runs if r.data.tags.get("mlflow.parentRunId")}
    assert {index: run.info.status for index, run in children.items()} == dict.fromkeys(
        ("chroma", "chroma_server", "lance_here"), "FINISHED"
    )
    embedded, served = children["chroma"].data.metrics, children["chroma_server"].data.metrics
    assert comparable(served) == comparable(embedded)
    assert embedded["index/bytes"] > 0 and "index/bytes" not in served  # a server's disk is not ours to read
    for metrics in (embedded, children["lance_here"].data.metrics):
        assert {"index/recall_vs_exact_at_10", "index/search_ms_p50", "index/search_ms_p95"} <= metrics.keys()
        assert metrics["filter/restricted_share"] > 0 and metrics["filter/short_result_rate"] == 0
    assert left_behind(cwd, server) == {"collections": [], "tables": [], "temporary": []}


@pytest.mark.slow
def test_a_failed_run_and_sigterm_leave_no_collection_no_table_no_folder(cwd, small_kb_files, server):
    """Both engines at once (a hybrid of two dense members): the first combination fails after
    both are built (its reranker is no model); the signal comes once both are built again."""
    options = engine_options(cwd, server)
    args, env = sweep_command(cwd, small_kb_files, "-m", options, "model=two_engines", "reranker=broken,none")
    run = processes.start(
        args, cwd=cwd, env=env | in_tmp(cwd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    store = cwd / "mlflow.db"
    wait_for(store, lambda runs: any(r["status"] == "FAILED" for r in runs), timeout=300)
    deadline = time.monotonic() + 300
    while not all(left_behind(cwd, server)[kind] for kind in ("collections", "tables")):
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()[1][-3000:]
        time.sleep(0.05)
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    # the signal finds both engines built in the second combination's run, or in the sweep's latency pass
    # after it (which builds the finished configuration again): either way nothing is left behind
    finished = re.search(r"error: interrupted by SIGTERM: ([01]) of 2 combinations finished", stderr)
    assert finished, stderr[-3000:]
    assert left_behind(cwd, server) == {"collections": [], "tables": [], "temporary": []}
    statuses = sorted(r["status"] for r in wait_for(store, lambda runs: all(r["status"] != "RUNNING" for r in runs)))
    second = "FINISHED" if finished.group(1) == "1" else "KILLED"
    assert statuses == sorted(["FAILED", second, "KILLED"])  # the broken combination, the second one, the sweep


@pytest.mark.slow
def test_killing_the_server_fails_its_combination_with_one_line_and_the_sweep_goes_on(cwd, small_kb_files):
    with chroma_server(cwd / "server") as (chroma, port):
        options = engine_options(cwd, port)
        args, env = sweep_command(cwd, small_kb_files, "-m", options, "index=chroma_server,lance_here")
        run = processes.start(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while not client(port).list_collections():
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()[1][-3000:]
            time.sleep(0.05)
        os.kill(chroma.pid, signal.SIGKILL)
        stdout, stderr = run.communicate(timeout=300)
    assert run.returncode == 1, stderr[-3000:]
    failed = stderr[stderr.index("error: 1 of 2 combinations failed:") :].splitlines()[1:]
    assert len(failed) == 1 and failed[0].startswith("  index=chroma_server ")
    assert f": index.host=127.0.0.1 index.port={port}: the Chroma server stopped answering (" in failed[0]
    assert "Traceback" not in stderr
    assert "could not remove the Chroma collection golden-sweep-" in stdout + stderr  # what it left, named
    _, runs = runs_in(f"sqlite:///{cwd / 'mlflow.db'}")
    children = {r.data.params["index"]: r.info.status for r in runs if r.data.tags.get("mlflow.parentRunId")}
    assert children == {"chroma_server": "FAILED", "lance_here": "FINISHED"}
    assert all(r.info.status != "RUNNING" for r in runs)
