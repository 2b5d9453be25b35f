"""What the benchmark scripts share: the machine line, markdown tables, timing, `python -m sweep`
in a subprocess, and reading back the runs it logged.

The scripts import it as `from _common import ...`: `python bench/x.py` puts bench/ first on sys.path.
"""

from __future__ import annotations

import gc
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import numpy as np
    from mlflow.entities import Run

T = TypeVar("T")


def machine(libs: Sequence[str], threads: Mapping[str, int]) -> str:
    """Two lines: the interpreter, CPU, cores, `threads` (what each library will use: {"torch": 2})
    and the load average; then golden-sweep's version and each of `libs`'."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.machine())
    used = "".join(f", {name} threads {n}" for name, n in threads.items())
    return (
        f"python {platform.python_version()} on {platform.system()} {cpu}, nproc {len(os.sched_getaffinity(0))}"
        f"{used}, load average {os.getloadavg()[0]:.2f}\n"
        + ", ".join(f"{lib} {version(lib)}" for lib in ("golden-sweep", *libs))
    )


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A markdown table under a title: the first column left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return (
            "| "
            + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
            + " |"
        )

    rule = "| " + " | ".join("-" * w if i == 0 else "-" * (w - 1) + ":" for i, w in enumerate(widths)) + " |"
    print(f"\n{title}\n\n{line(header)}\n{rule}")
    for r in rows:
        print(line(r))


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """(wall time of one call, its result), garbage collected first."""
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def best_of(repeats: int, fn: Callable[[], T]) -> tuple[float, T]:
    """(fastest wall time of `repeats` calls, the last call's result)."""
    times, result = taking_turns(repeats, fn)[0]
    return min(times), result


def taking_turns(repeats: int, *fns: Callable[[], T]) -> list[tuple[list[float], T]]:
    """For each of `fns`: (wall times of `repeats` calls, its last call's result). The functions
    take turns, so that load from other processes on the machine falls on each of them alike."""
    times: list[list[float]] = [[] for _ in fns]
    results: list = [None] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            seconds, results[i] = timed(fn)
            times[i].append(seconds)
    return list(zip(times, results))


def recall(found: Sequence[np.ndarray], truth: Sequence[np.ndarray]) -> float:
    """Mean over queries of the share of the query's `truth` ids that `found` has too."""
    import numpy as np  # here, like mlflow below: _common itself imports only the standard library

    return float(np.mean([len(set(f.tolist()) & set(t.tolist())) / len(t) for f, t in zip(found, truth)]))


def store(folder: Path) -> str:
    """The MLflow tracking URI of folder/mlflow.db."""
    return f"sqlite:///{folder}/mlflow.db"


def python_m_sweep(folder: Path, args: Sequence[str], cache: Path | None = None) -> float:
    """Wall time of `python -m sweep ARGS` with cwd = folder, its MLflow store folder/mlflow.db,
    its Hydra run and sweep folders folder/outputs and folder/multirun, and its embedding cache
    `cache` (default folder/cache). Exits with the command's error output if it fails."""
    folder.mkdir(parents=True, exist_ok=True)
    env = os.environ | {"MLFLOW_TRACKING_URI": store(folder)}
    command = [
        sys.executable, "-m", "sweep", *args,
        f"cache_dir={cache or folder / 'cache'}", f"hydra.sweep.dir={folder / 'multirun'}", f"hydra.run.dir={folder / 'outputs'}",
    ]  # fmt: skip
    wall, done = timed(lambda: subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True))
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall


def evaluated_runs(folder: Path) -> list[Run]:
    """The runs in folder/mlflow.db that evaluated a configuration (not sweep parents), oldest
    first. Creates the store if there is none."""
    import mlflow  # here: bench/metrics.py has no use for it

    client = mlflow.MlflowClient(store(folder))
    runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], order_by=["attributes.start_time ASC"]
    )
    return [r for r in runs if r.data.tags.get("sweep.parent") != "true"]
