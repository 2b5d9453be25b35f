"""A job in a worker process that the sweep's own process started (joblib's loky workers) ends
when that process dies, even by kill -9: its run is marked KILLED and the worker exits."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time

from sweep.errors import stop_on_signals

log = logging.getLogger("sweep")
SWEEP_PID = "SWEEP_MAIN_PID"  # the sweep's own process, set in its jobs: a worker it started ends with it
GRACE_S = 30.0  # after the sweep's process died, how long a worker's run has to be marked KILLED (a busy machine's embedding batch ends first)
WATCH_EVERY_S = 0.2  # how often a worker looks whether the sweep's process is still its parent
_WATCHING: list[int] = []  # the sweep process this worker watches, once watched
SWEEP_GONE: list[int] = []  # that process, once it is gone


def end_with_the_sweep() -> None:
    """In a worker process that the sweep's own process started (joblib's loky workers; not the
    sweep's process, not a Ray worker, whose cluster ends it): end with the sweep, even when it dies
    by kill -9. A thread looks at the worker's parent every `WATCH_EVERY_S` (a process whose parent
    dies is handed to another: its parent pid changes; loky's workers have no sentinel of their
    parent to wait on); then SIGTERM, whose handler marks the run in progress KILLED
    (`stop_on_signals`, installed here), the job ends the worker (`task`), and SIGKILL ends it if it
    is still there `GRACE_S` later (between jobs, or stuck). Idempotent: once per worker."""
    parent = multiprocessing.parent_process()
    main = os.environ.get(SWEEP_PID)
    if _WATCHING or parent is None or main != str(parent.pid) or main == str(os.getpid()):
        return
    _WATCHING.append(parent.pid)
    if threading.current_thread() is threading.main_thread():
        stop_on_signals()
    threading.Thread(target=_end_when_gone, args=(parent.pid,), name="end-with-the-sweep", daemon=True).start()


def _end_when_gone(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_EVERY_S)
    SWEEP_GONE.append(parent)
    log.warning("the sweep's process (pid %d) is gone: this worker (pid %d) stops", parent, os.getpid())
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE_S)
    os.kill(os.getpid(), signal.SIGKILL)
