"""`python -m sweep` in a subprocess, the store it leaves, and what its command lines print."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import mlflow
from hydra import compose, initialize_config_module
from omegaconf import DictConfig

from helpers import processes
from helpers.stores import copy_blank_store


def sweep_command(
    cwd: Path, data: Path, *overrides: str, env: dict | None = None, new_store: bool = False, cache: Path | None = None
) -> tuple[list[str], dict]:
    """`python -m sweep OVERRIDES` on `data`, everything it writes under `cwd`: (argv, environment).
    Its embedding cache is `cache`, default `cwd`/cache (a cache several tests share holds the same
    vectors: its keys hash the model and the texts). Its store, `cwd`/mlflow.db unless `env` names another, is a copy of MLflow's blank store where it
    does not exist yet (MLflow takes seconds to make one); `new_store`: the command makes it, for a
    test of what a command creates or leaves uncreated."""
    if not new_store and "MLFLOW_TRACKING_URI" not in (env or {}) and not (cwd / "mlflow.db").exists():
        copy_blank_store(cwd)
    args = [
        sys.executable, "-m", "sweep", *overrides,
        f"golden.path={data / 'golden.jsonl'}", f"golden.corpus={data / 'corpus.jsonl'}",
        f"cache_dir={cache or cwd / 'cache'}", f"hydra.run.dir={cwd / 'outputs'}", f"hydra.sweep.dir={cwd / 'multirun'}",
    ]  # fmt: skip
    return args, {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"} | (env or {})


def sweep(
    cwd: Path, data: Path, *overrides: str, env: dict | None = None, new_store: bool = False, cache: Path | None = None
) -> subprocess.CompletedProcess:
    args, environment = sweep_command(cwd, data, *overrides, env=env, new_store=new_store, cache=cache)
    return processes.run(args, cwd=cwd, env=environment, capture_output=True, text=True, timeout=900)


def runs_in(store: str, experiment_name: str = "golden-sweep") -> tuple[mlflow.MlflowClient, list]:
    client = mlflow.MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name(experiment_name)
    return client, client.search_runs([experiment.experiment_id])


def compose_config(*overrides: str) -> DictConfig:
    """The config `python -m sweep OVERRIDES` runs, composed in process."""
    with initialize_config_module(version_base="1.3", config_module="sweep.conf"):
        return compose("config", overrides=list(overrides))


def one_error_line(stderr: str) -> str:
    """The command's only `error:` line; no traceback anywhere."""
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, stderr[-2000:]
    return lines[0].removeprefix("error: ")


def wait_for(store: Path, condition, timeout: float = 120) -> list[dict]:
    """Poll the other process's store, read-only and without MLflow (which would create tables
    while that process does), until `condition(runs)` holds; the runs as {run_id, status, child}."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as database:
                rows = database.execute(
                    "SELECT r.run_uuid, r.status, t.value FROM runs r LEFT JOIN tags t"
                    " ON t.run_uuid = r.run_uuid AND t.key = 'mlflow.parentRunId'"
                ).fetchall()
            runs = [
                {"run_id": run_id, "status": status, "child": parent is not None} for run_id, status, parent in rows
            ]
            if condition(runs):
                return runs
        except sqlite3.Error:  # not created yet, or its tables not yet
            pass
        time.sleep(0.1)
    raise AssertionError("the store never reached the expected state")
