"""Stores made hostile on purpose, and commands run against them: a hot journal (kill -9 in the
middle of a write), a small full filesystem of a test's own, and a process bound by file modes
(root without its override), each as a real process."""

from __future__ import annotations

import atexit
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
from sweep.tracking import PARENT_RUN

# root ignores file modes: a command that must meet a read-only file runs without that power
READ_ONLY_POWER = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]


def command(cwd: Path, *args: str, env: dict | None = None, reader: bool = False) -> subprocess.CompletedProcess:
    """`python -m ARGS` in `cwd`, the store `./mlflow.db` unless `env` says otherwise; `reader`: as
    a process that file modes bind (root without its override)."""
    prefix = READ_ONLY_POWER if reader and os.geteuid() == 0 else []
    if prefix and shutil.which("setpriv") is None:
        pytest.fail("running as root, this test needs setpriv (util-linux) to meet a read-only file")
    environment = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", PARENT_RUN)}
    return processes.run(
        [*prefix, sys.executable, "-m", *args], cwd=cwd, env=environment | (env or {}),
        capture_output=True, text=True, timeout=600,
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


FULL_DISK = """set -e
mount -t tmpfs -o size=4m tmpfs "$FS"
eval "$PREPARE"
free=$(df -k --output=avail "$FS" | tail -1)
dd if=/dev/zero of="$FS/filler" bs=1k count=$((free - 30)) status=none
set +e
"$@" > out.txt 2> err.txt
echo $? > rc
rm "$FS/filler"
eval "$AFTER"
"""


def on_a_full_disk(
    cwd: Path, fs: Path, args: list[str], env: dict, prepare: str = "", after: str = ""
) -> tuple[int, str]:
    """`args` in `cwd` with a 4 MiB tmpfs at `fs` that has 30 KiB left, in a user and mount
    namespace of its own (unshare: no root needed; the mount ends with it). (exit code, stderr)."""
    if shutil.which("unshare") is None:
        pytest.fail("this test needs unshare (util-linux) for a small filesystem of its own")
    fs.mkdir(exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", PARENT_RUN)}
    environment |= env | {"FS": str(fs), "PREPARE": prepare, "AFTER": after}
    processes.run(
        ["unshare", "-rm", "sh", "-c", FULL_DISK, "sh", *args], cwd=cwd, env=environment, check=True, timeout=600
    )
    return int((cwd / "rc").read_text()), (cwd / "err.txt").read_text()


@functools.cache
def blank_store() -> Path:
    """An empty SQLite store made by MLflow (its tables, the Default experiment), once per test
    process, in a temporary folder removed at exit."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore  # what MLflow opens a sqlite:// store with

    folder = Path(tempfile.mkdtemp(prefix="blank-store-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    SqlAlchemyStore(f"sqlite:///{folder / 'mlflow.db'}", (folder / "mlruns").as_uri()).engine.dispose()
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
