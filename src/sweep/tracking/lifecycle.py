"""A run's life: opening a trial's run (`trial_run`), ending it KILLED or FAILED, and the orphans.

Every run is tagged with the process that runs it (`process_tags`), so that a later sweep can tell
that its process died (a crash in native code, kill -9) and mark it KILLED (`kill_orphans`).
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import sqlite3
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow

from sweep.errors import InputError, Interrupted, interruption, one_line, raise_if_interrupted
from sweep.text import shortened
from sweep.tracking.store import RUN_ID, connect, tracking_uri, use_experiment

log = logging.getLogger(__name__)
PARENT_RUN = "SWEEP_PARENT_RUN_ID"  # set by the sweep's parent run for the trials it launches
MAX_RUN_NAME = 250  # MLflow's runs.name column: PostgreSQL and MySQL refuse a longer name, SQLite does not
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # no space left, quota exceeded, file too large


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
    with reporting_full_disk("open a run"):
        connect()
        experiment_id = use_experiment(experiment)
        if parent is None:  # a sweep's parent run did this for its children
            kill_orphans(experiment_id)
        else:
            check_parent(parent)
        # the process tags come with the run itself: a kill -9 a moment later still leaves them
        active = mlflow.start_run(
            run_name=run_name(name),
            parent_run_id=parent,
            nested=parent is not None,
            tags=process_tags() | dict(tags or {}),
        )
    with active, stopping_as_killed():
        yield RunIds(active.info.run_id, active.info.experiment_id)


@contextmanager
def reporting_full_disk(doing: str) -> Iterator[None]:
    """A full disk (`out_of_space`) inside the block is one line saying what could not be done."""
    try:
        yield
    except Exception as error:
        full = out_of_space(error)
        if full is None:
            raise
        raise InputError(f"no space left to {doing} ({full}); nothing was logged") from error


def check_parent(parent: str) -> None:
    """That `parent` (`SWEEP_PARENT_RUN_ID`, which a sweep sets for its combinations) is a sweep's
    run: one line otherwise, before a run is opened under it."""
    unset = "a sweep sets it for its combinations; unset it to log a run of your own"
    if not RUN_ID.fullmatch(parent):
        raise InputError(f"{PARENT_RUN}={parent!r}: not an MLflow run id (32 hexadecimal digits); {unset}")
    try:
        run = mlflow.MlflowClient().get_run(parent)
    except mlflow.exceptions.MlflowException as error:
        if error.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        raise InputError(f"{PARENT_RUN}={parent}: no such run at {tracking_uri()}; {unset}") from None
    if run.data.tags.get("sweep.parent") != "true":
        raise InputError(f"{PARENT_RUN}={parent}: run {parent} is not a sweep's run; {unset}")


def run_name(words: str) -> str:
    """`words` as a run name any store takes: at most `MAX_RUN_NAME` characters, an ellipsis where
    it was cut (the `sweep.overrides` tag keeps all of them)."""
    return shortened(words, MAX_RUN_NAME - 1, count=False)


@contextmanager
def stopping_as_killed() -> Iterator[None]:
    """Inside the active run: a signal ends it KILLED, an error FAILED (when the run's context
    exits), each with an `error` tag that says why in one line. A full disk (the store's or the
    artifacts') is bad input, one line naming where (`out_of_space`), not a traceback."""
    try:
        yield
        raise_if_interrupted()  # a signal whose raise a library swallowed: this run did not finish
    except BaseException as error:
        signal = interruption(error)
        if signal is None:
            if not isinstance(error, Exception):
                raise
            full = out_of_space(error)
            message = one_line(error) if full is None else f"no space left to log it ({full})"
            try:
                mlflow.set_tag("error", message)
            except Exception:  # the store itself is full or gone: the run still ends FAILED if it can
                log.warning("could not tag the failed run with its error (%s)", message)
            if full is None:
                raise
            run_id = mlflow.active_run().info.run_id
            raise InputError(f"run {run_id}: {message}; the run is marked FAILED") from error
        try:
            mlflow.set_tag("error", str(signal))
            mlflow.end_run("KILLED")
        except Exception:  # the signal cut into MLflow's own write: the next sweep marks the run KILLED
            log.warning("could not mark the interrupted run KILLED; the next run on this store will")
        if isinstance(error, (Interrupted, KeyboardInterrupt)):
            raise
        raise signal from error  # a library's error about the signal it was handling is the signal


def out_of_space(error: BaseException) -> str | None:
    """Where the disk (or quota) that `error` ran into is full, and what said so; None when
    nothing behind `error` is about space: the store's SQLite file, a file, or the run's artifacts."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, sqlite3.Error) and "disk is full" in str(error):
            return f"{tracking_uri()}: {error}"
        if isinstance(error, OSError) and error.errno in _FULL:
            # MLflow copies an artifact from a temporary file: the file it names is not where space ran out
            active = mlflow.active_run()
            if active is not None and _raised_in(error, "mlflow.store.artifact", "mlflow.utils.file_utils"):
                return f"its artifacts in {active.info.artifact_uri}: {error.strerror}"
            if error.filename:
                return f"{error.filename}: {error.strerror}"
            return str(error.strerror)
        error = error.__cause__ or error.__context__
    return None


def _raised_in(error: BaseException, *modules: str) -> bool:
    """Whether code of one of `modules` (prefixes of module names) is on `error`'s traceback."""
    frames = traceback.walk_tb(error.__traceback__)
    return any(str(frame.f_globals.get("__name__", "")).startswith(modules) for frame, _ in frames)


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
