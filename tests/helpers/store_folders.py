"""A folder's mlflow.db as the tracking store of a test, a copy of a store logged once, and a sweep
killed with SIGKILL right after its first combination finished."""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from helpers import processes
from helpers.commands import sweep_command, wait_for
from helpers.stores import relocate, states
from sweep.tracking.lifecycle import PARENT_RUN


def tracking_in(folder: Path, patch: pytest.MonkeyPatch) -> None:
    """`folder` the working folder and its mlflow.db the tracking store, outside any sweep."""
    patch.chdir(folder)
    patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{folder / 'mlflow.db'}")
    patch.delenv(PARENT_RUN, raising=False)


def copied_store(template: Path, folder: Path, patch: pytest.MonkeyPatch) -> Path:
    """`template` (a folder with mlflow.db and mlruns/, logged once for a module's tests) copied to
    `folder` and relocated there, which becomes the working folder and the tracking store."""
    shutil.copytree(template, folder)
    relocate(folder, template)
    tracking_in(folder, patch)
    return folder


def killed_after_the_first_combination(cwd: Path, data: Path, *overrides: str) -> str:
    """`python -m sweep OVERRIDES` on `data` in `cwd`, killed with SIGKILL once a combination
    finished; that combination's run id."""
    args, env = sweep_command(cwd, data, *overrides)
    process = processes.start(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(cwd / "mlflow.db", lambda runs: any(r["child"] and r["status"] == "FINISHED" for r in runs))
    process.send_signal(signal.SIGKILL)
    process.wait()
    [finished] = [run for run, (status, _) in states(cwd / "mlflow.db").items() if status == "FINISHED"]
    return finished
