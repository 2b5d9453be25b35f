"""Servers a test starts on 127.0.0.1 and stops: a free port, waiting until one answers, a local
Ray cluster, and a server's whole process group stopped."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

# Ray on loopback only: without the last one Ray binds the machine's own address, not 127.0.0.1
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_answering(url: str, process, said: Callable[[], str], timeout: float) -> None:
    """Until a GET of `url` succeeds; when `process` (Popen or helpers.processes' Started) ends first
    or `timeout` seconds pass, it is killed and the test fails with `said()`, what it printed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:  # not listening yet, or an error status
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(f"{url} did not answer: {said()[-3000:]}") from None
            time.sleep(0.1)


@contextlib.contextmanager
def ray_cluster(folder: Path) -> Iterator[str]:
    """A local Ray cluster of 2 CPUs on 127.0.0.1 (`ray start --head`), its workers in `folder`,
    stopped and its temporary folder removed afterwards: its address. That folder is a new one
    directly in the system's temporary folder, as Ray's socket paths in it must stay under 108
    bytes (under pytest's, e.g. /dev/shm/pytest-of-root/pytest-66/popen-gw0/, they do not)."""
    temporary, port = tempfile.mkdtemp(prefix="ray-"), free_port()
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
        yield f"127.0.0.1:{port}"
    finally:
        # as `ray stop --force`: on SIGTERM, Ray's processes took over 5 s to end, and a cluster
        # thrown away needs no graceful end (its object store's files are unlinked as they are made)
        stop_group(head.pid, first=signal.SIGKILL)
        shutil.rmtree(temporary, ignore_errors=True)


def stop_group(group: int, first: signal.Signals = signal.SIGTERM) -> None:
    """`first` to the process group, SIGKILL to what is left of it after 5 s."""
    for number in dict.fromkeys((first, signal.SIGKILL)):
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
