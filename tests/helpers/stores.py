"""Stores made hostile on purpose, and commands run against them: a hot journal (kill -9 in the
middle of a write), a small full filesystem of a command's own, and a process bound by file modes
(root without its powers over them), each as a real process."""

from __future__ import annotations

import atexit
import ctypes
import functools
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from contextlib import closing
from pathlib import Path

import pytest

from helpers import processes
from sweep.tracking.lifecycle import PARENT_RUN

# root ignores file modes: a command that must meet a read-only file runs without these powers
FILE_MODE_POWERS = (1, 2, 3)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER (linux/capability.h)
PR_CAPBSET_DROP, CAPABILITY_VERSION_3 = 24, 0x20080522  # linux/prctl.h; capget's 64-bit sets, two words


class _CapabilityHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapabilitySets(ctypes.Structure):  # one 32-bit word of each set
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def without_file_mode_powers() -> None:
    """In a command's process, before it runs: root's powers over file modes gone from its
    bounding, permitted, effective and inheritable sets, as `setpriv --bounding-set=-dac_override,
    -dac_read_search,-fowner` leaves the program it starts (the kernel's calls through ctypes: the
    standard library has none)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for power in FILE_MODE_POWERS:
        _succeeded(libc.prctl(PR_CAPBSET_DROP, power, 0, 0, 0), "prctl(PR_CAPBSET_DROP)")
    header, sets = _CapabilityHeader(CAPABILITY_VERSION_3, 0), (_CapabilitySets * 2)()
    _succeeded(libc.capget(ctypes.byref(header), sets), "capget")
    kept = ~sum(1 << power for power in FILE_MODE_POWERS)
    sets[0].effective &= kept
    sets[0].permitted &= kept
    sets[0].inheritable &= kept
    _succeeded(libc.capset(ctypes.byref(header), sets), "capset")


def _succeeded(result: int, call: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{call}: {os.strerror(error)}")


def command(cwd: Path, *args: str, env: dict | None = None, reader: bool = False) -> subprocess.CompletedProcess:
    """`python -m ARGS` in `cwd`, the store `./mlflow.db` unless `env` says otherwise; `reader`: as
    a process that file modes bind (root without its powers over them)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", PARENT_RUN)}
    return processes.run(
        [sys.executable, "-m", *args], cwd=cwd, env=environment | (env or {}), capture_output=True, text=True,
        timeout=600, preexec_fn=without_file_mode_powers if reader and os.geteuid() == 0 else None,
    )  # fmt: skip


def states(database: Path) -> dict[str, tuple[str, str | None]]:
    """{run id: (status, its `error` tag)} read straight from the SQLite file, read-only."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        rows = connection.execute(
            "SELECT r.run_uuid, r.status, t.value FROM runs r LEFT JOIN tags t ON t.run_uuid = r.run_uuid AND t.key = 'error'"
        ).fetchall()
    connection.close()
    return {run_id: (status, error) for run_id, status, error in rows}


HOT_JOURNAL = """
import os, signal, sqlite3, sys
database = sqlite3.connect(sys.argv[1], isolation_level=None)
database.execute("PRAGMA cache_size = 2")  # a tiny cache spills the write into the file before any commit
database.execute("BEGIN IMMEDIATE")
database.execute("UPDATE metrics SET value = value + 1")
database.execute("UPDATE runs SET status = 'FAILED'")
os.kill(os.getpid(), signal.SIGKILL)  # as kill -9 in the middle of MLflow's write
"""


def leave_a_hot_journal(database: Path) -> None:
    """A process killed in the middle of a write to `database`: its `-journal` is hot."""
    killed = processes.run([sys.executable, "-c", HOT_JOURNAL, str(database)], capture_output=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL
    assert database.with_name(f"{database.name}-journal").stat().st_size > 0
    with pytest.raises(sqlite3.OperationalError, match="attempt to write a readonly database"):
        states(database)  # what the store check met: a read-only open cannot roll it back


CLONE_NEWNS, CLONE_NEWUSER, MS_REC, MS_PRIVATE = 0x20000, 0x10000000, 0x4000, 0x40000  # linux/sched.h, mount.h
LEFT = 30 * 1024  # bytes left on the full filesystem: a new store's first run does not fit


def on_a_full_disk(
    cwd: Path, fs: Path, args: list[str], env: dict, store: Path | None = None, keep: Path | None = None
) -> tuple[int, str]:
    """`args` (`python -m sweep...`) in `cwd` with a 4 MiB tmpfs at `fs` that has 30 KiB left, in a
    user and mount namespace of its own (no root needed; the mount ends with it): `store` copied
    there as mlflow.db before it fills up, and mlflow.db copied from there to `keep` at the
    command's exit. (exit code, stderr)."""
    fs.mkdir(exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", PARENT_RUN)}
    ran = processes.run(
        args, cwd=cwd, env=environment | env, capture_output=True, text=True, timeout=600,
        preexec_fn=functools.partial(_on_a_full_disk_of_its_own, fs, store, keep),
    )  # fmt: skip
    return ran.returncode, ran.stderr


def _on_a_full_disk_of_its_own(fs: Path, store: Path | None, keep: Path | None) -> None:
    """In the command's process, before it runs: what `unshare --map-root-user --mount` gives the
    program it starts (root in user and mount namespaces of its own, mounts private), then the
    tmpfs at `fs`, filled; at its exit, the filler removed and the store copied to `keep`."""
    uid, gid = os.getuid(), os.getgid()
    libc = ctypes.CDLL(None, use_errno=True)
    _succeeded(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare")
    for name, line in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        Path("/proc/self", name).write_text(line)
    _succeeded(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    _succeeded(libc.mount(b"tmpfs", os.fsencode(fs), b"tmpfs", 0, b"size=4m"), "mount tmpfs")
    if store is not None:
        shutil.copyfile(store, fs / "mlflow.db")
    free = os.statvfs(fs)
    (fs / "filler").write_bytes(bytes(free.f_bavail * free.f_frsize - LEFT))

    def after() -> None:
        (fs / "filler").unlink()
        if keep is not None:
            shutil.copyfile(fs / "mlflow.db", keep)

    atexit.register(after)


KEPT_BLANK_STORES: Path | None = None  # pytest's cache folder for them, set by conftest; None: none kept


@functools.cache
def blank_store() -> Path:
    """An empty SQLite store made by MLflow (its tables, the Default experiment): made once per
    MLflow and SQLAlchemy version and kept between sessions in pytest's cache folder (MLflow takes
    some 3 s to create its tables, in each test process), or once per test process in a temporary
    folder where pytest keeps no cache."""
    from importlib.metadata import version

    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore  # what MLflow opens a sqlite:// store with

    name = f"mlflow-{version('mlflow')}-sqlalchemy-{version('sqlalchemy')}.db"
    if KEPT_BLANK_STORES is not None and (KEPT_BLANK_STORES / name).is_file():
        return KEPT_BLANK_STORES / name
    folder = Path(tempfile.mkdtemp(prefix="blank-store-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    SqlAlchemyStore(f"sqlite:///{folder / 'mlflow.db'}", (folder / "mlruns").as_uri()).engine.dispose()
    if KEPT_BLANK_STORES is not None:  # whole or not at all: the other worker may be making it too
        descriptor, partial = tempfile.mkstemp(dir=KEPT_BLANK_STORES, suffix=".partial")
        os.close(descriptor)
        shutil.copyfile(folder / "mlflow.db", partial)
        os.replace(partial, KEPT_BLANK_STORES / name)
    return folder / "mlflow.db"


def copy_blank_store(folder: Path) -> Path:
    """`folder`/mlflow.db as MLflow makes a new store there, copied from `blank_store()` rather
    than made: MLflow takes seconds per store to create its tables. The one thing MLflow writes
    that depends on the folder, the Default experiment's artifact location, is rewritten."""
    database = folder / "mlflow.db"
    shutil.copyfile(blank_store(), database)
    with closing(sqlite3.connect(database)) as connection, connection:
        connection.execute(
            "UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0", (str(folder / "mlruns" / "0"),)
        )
    return database


def relocate(folder: Path, written_in: str | Path) -> None:
    """`folder`/mlflow.db, copied with its mlruns/ from `written_in`, pointed at the artifacts beside
    it: MLflow keeps each experiment's and run's artifact location as an absolute path or URI in
    the database, so moving a store means rewriting that prefix (a plain SQL UPDATE on the copy)."""
    with closing(sqlite3.connect(folder / "mlflow.db")) as connection, connection:
        for table, column in (("experiments", "artifact_location"), ("runs", "artifact_uri")):
            connection.execute(f"UPDATE {table} SET {column} = replace({column}, ?, ?)", (str(written_in), str(folder)))
