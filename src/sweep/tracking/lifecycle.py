"""A run's life: opening a trial's run (`trial_run`), ending it KILLED or FAILED, and the orphans.

Every run is tagged with the process that runs it (`process_tags`), so that a later sweep can tell
that its process died (a crash in native code, kill -9) and mark it KILLED (`kill_orphans`).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow

from sweep.errors import Interrupted, interruption, one_line, raise_if_interrupted
from sweep.text import shortened
from sweep.tracking.store import connect, use_experiment

log = logging.getLogger(__name__)
PARENT_RUN = "SWEEP_PARENT_RUN_ID"  # set by the sweep's parent run for the trials it launches
MAX_RUN_NAME = 250  # MLflow's runs.name column: PostgreSQL and MySQL refuse a longer name, SQLite does not


@dataclass(frozen=True)
class RunIds:
    run_id: str
    experiment_id: str


@contextmanager
def trial_run(experiment: str, name: str, tags: Mapping[str, str] | None = None) -> Iterator[RunIds]:
    """One trial's MLflow run, tagged `tags` from its start, a child of the sweep's parent run
    when there is one. An error inside marks it FAILED with an `error` tag saying why (one line);
    a signal marks it KILLED; either goes on up."""
    parent = os.environ.get(PARENT_RUN)
    connect()
    experiment_id = use_experiment(experiment)
    if parent is None:  # a sweep's parent run did this for its children
        kill_orphans(experiment_id)
    # the process tags come with the run itself: a kill -9 a moment later still leaves them
    with mlflow.start_run(
        run_name=run_name(name), parent_run_id=parent, nested=parent is not None, tags=process_tags() | dict(tags or {})
    ) as active:
        with stopping_as_killed():
            yield RunIds(active.info.run_id, active.info.experiment_id)


def run_name(words: str) -> str:
    """`words` as a run name any store takes: at most `MAX_RUN_NAME` characters, an ellipsis where
    it was cut (the `sweep.overrides` tag keeps all of them)."""
    return shortened(words, MAX_RUN_NAME - 1, count=False)


@contextmanager
def stopping_as_killed() -> Iterator[None]:
    """Inside the active run: a signal ends it KILLED, an error FAILED (when the run's context
    exits), each with an `error` tag that says why in one line."""
    try:
        yield
        raise_if_interrupted()  # a signal whose raise a library swallowed: this run did not finish
    except BaseException as error:
        signal = interruption(error)
        if signal is None:
            if isinstance(error, Exception):
                mlflow.set_tag("error", one_line(error))
            raise
        try:
            mlflow.set_tag("error", str(signal))
            mlflow.end_run("KILLED")
        except Exception:  # the signal cut into MLflow's own write: the next sweep marks the run KILLED
            log.warning("could not mark the interrupted run KILLED; the next run on this store will")
        if isinstance(error, (Interrupted, KeyboardInterrupt)):
            raise
        raise signal from error  # a library's error about the signal it was handling is the signal


def process_tags() -> dict[str, str]:
    """Who runs this run: a later sweep can tell that its process died and mark it KILLED."""
    return {
        "sweep.host": socket.gethostname(),
        "sweep.pid": str(os.getpid()),
        "sweep.process_start": _started(os.getpid()),
    }


def _started(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _is_alive(tags: Mapping[str, str]) -> bool:
    """Whether the process that started a run (by its tags) still runs; True when unknown (another
    host, or a run logged by something else)."""
    if tags.get("sweep.host") != socket.gethostname() or not tags.get("sweep.pid", "").isdigit():
        return True
    pid = int(tags["sweep.pid"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: alive
    return _started(pid) == tags.get("sweep.process_start", "")


def kill_orphans(experiment_id: str, runs: Sequence[Any] | None = None) -> int:
    """Runs left RUNNING by a process that died (a crash in native code, kill -9): marked KILLED
    with an `error` tag saying so. `runs`: only these (default: every RUNNING run of the
    experiment). How many were marked."""
    client = mlflow.MlflowClient()
    if runs is None:
        runs = client.search_runs([experiment_id], filter_string="attributes.status = 'RUNNING'", max_results=1000)
    orphans = [r for r in runs if r.info.status == "RUNNING" and not _is_alive(r.data.tags)]
    for run in orphans:
        pid, host = run.data.tags.get("sweep.pid"), run.data.tags.get("sweep.host")
        client.set_tag(run.info.run_id, "error", f"its process ({pid} on {host}) ended while the run was RUNNING")
        client.set_terminated(run.info.run_id, "KILLED")
    return len(orphans)
