"""Benchmark: metadata filters (none / pre / post), on the bundled golden set and on synthetic vectors.

    python bench/filters.py                 # all three parts
    python bench/filters.py --part 3        # one part (1, 2, 3 or all)
    python bench/filters.py --quick         # part 3 on 20,000 vectors instead of 100,000

1. The filter x model sweep, `python -m sweep -m filter=none,pre,post model=minilm,hybrid`, as a
   subprocess with its own MLflow store and cache: one row per combination with the quality
   metrics, the per-question search latency, the reranking time, how many questions a filter
   restricted and how many of those came back short, and the suggested abstention threshold with
   the abstention rates it gives. The numbers for the README.
2. Post-filtering with a small k: `python -m sweep -m filter=post filter.overfetch=1,2,4,16` and
   `python -m sweep filter=pre`, both with chunk_depth=10 depth=10, so a question gets 10 chunk
   hits; once with the default 200-token chunks, once with chunk=0 (whole documents, so a chunk hit
   is a document). Post-filtering drops the hits its filter rejects and can leave a question with
   fewer chunk hits than k (`filter/short_result_rate`) unless it over-fetches enough;
   pre-filtering on the default flat index searches only the allowed chunks and never comes back
   short. Seen here: post is short for 100% / 26% / 12% / 0% of the 43 filtered questions at
   over-fetch 1 / 2 / 4 / 16 with 200-token chunks (100% / 28% / 19% / 0% with whole documents,
   where over-fetch 1 also loses recall@5, 0.8672 against 0.8750), pre for none.
3. HNSW under a selective filter, synthetic and in process (no MLflow): N random unit vectors
   (numpy seed 0) in an HNSW index with the harness's defaults (M=32, ef_construction=200,
   ef_search=128, conf/index/hnsw.yaml), one chunk per document, document i in group i % G. For
   allowed shares from 0.1% to 20% (G = 1/share), 200 random queries, k=10, one query at a time
   as the pipeline searches: the restriction from `PreFilter.restriction`, then the index's
   `search(query, k, allowed=..., exact=...)`, which is what `PreFilter.search` does: (a) the
   FAISS ID selector alone (`PreFilter(exact_below=0.0)`) against (b) the exact scan of the
   allowed vectors (`PreFilter(exact_below=1.1)`), both scored against (c) a flat index with the
   selector, the ground truth. Times are the best of 3 passes over all queries. The question it
   answers is where the exact scan is both exact and no slower, i.e. whether `exact_below`'s
   default of 0.1 is the right switch-over point. On 100,000 x 64 (2 cores), the selector alone loses results at
   every share, worst where the filter is selective (recall@10 about 0.3 at 0.1%, 0.6 at 1%, 0.8 at
   10-20%, against 0.91 unfiltered), while the exact scan is exact, faster up to 5% (15-18x at
   0.1%, 1.6x at 5%), level at 10% and slower only at 20% (about 1.5x): so below 0.1 the scan
   costs nothing and buys exactness. The crossover is a count of allowed vectors (about 10,000
   here) rather than a share: on 20,000 vectors (--quick) the scan was faster at every share.

Everything is written under one temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import faiss
import numpy as np
import yaml
from _common import best_of, evaluated_runs, machine, print_table, python_m_sweep, recall
from mlflow.entities import Run

from sweep.formats.corpus import Corpus, Document
from sweep.formats.golden import GoldenSet, Question
from sweep.retrieval.chunking import Chunk
from sweep.retrieval.filters import PreFilter
from sweep.retrieval.index import FaissIndex, FlatIndex, HNSWIndex
from sweep.retrieval.retriever import Restriction

PART1 = ("filter=none,pre,post", "model=minilm,hybrid")
PART1_COLUMNS = {
    "ndcg_at_10": "ndcg@10",
    "recall_at_5": "recall@5",
    "mrr": "mrr",
    "latency/search_ms_p50": "ms p50",
    "latency/search_ms_p95": "ms p95",
    "time/rerank_s": "rerank s",
    "filter/restricted_share": "restricted",
    "filter/short_result_rate": "short",
    "abstain/suggested_min_score": "suggested min_score",
    "abstain/at_suggested/abstain/correct_rate": "correct abstain",
    "abstain/at_suggested/abstain/false_rate": "false abstain",
}
SMALL_K = ("chunk_depth=10", "depth=10")
CHUNKINGS = ((), ("chunk=0",))  # default 200-token chunks, then whole documents (a chunk hit = a document)
SHARES = (0.001, 0.005, 0.01, 0.05, 0.1, 0.2)
N_QUERIES, K, REPEATS = 200, 10, 3
DISTINCT_GROUPS = 5  # queries cycle through groups 0..4: each distinct filter costs a Python pass over N documents


# ---------------------------------------------------------------- helpers


def label(run: Run) -> str:
    """The run's overrides without the bench's own cache_dir."""
    return " ".join(o for o in run.data.tags["sweep.overrides"].split() if not o.startswith("cache_dir=")) or "default"


def cell(metrics: dict[str, float], key: str, digits: int = 4) -> str:
    return f"{metrics[key]:.{digits}f}" if key in metrics else "—"


# ---------------------------------------------------------------- 1. the filter x reranker sweep


def filter_reranker_sweep(folder: Path) -> None:
    wall = python_m_sweep(folder, ["-m", *PART1])
    runs = sorted(evaluated_runs(folder), key=label)
    digits = {
        "latency/search_ms_p50": 2,
        "latency/search_ms_p95": 2,
        "time/rerank_s": 2,
        "filter/restricted_share": 3,
        "filter/short_result_rate": 3,
    }
    rows = [[label(r), *(cell(r.data.metrics, key, digits.get(key, 4)) for key in PART1_COLUMNS)] for r in runs]
    print_table(
        f"1. `python -m sweep -m {' '.join(PART1)}` on the bundled golden set ({len(runs)} runs)",
        ["overrides", *PART1_COLUMNS.values()],
        rows,
    )
    print(f"\nsweep wall time {wall:.1f} s (one process, cold embedding cache)")


# ---------------------------------------------------------------- 2. post-filtering with a small k


def post_with_small_k(folder: Path) -> None:
    before = {r.info.run_id for r in evaluated_runs(folder)} if (folder / "mlflow.db").exists() else set()
    walls = []
    for chunking in CHUNKINGS:
        post_s = python_m_sweep(folder, ["-m", "filter=post", "filter.overfetch=1,2,4,16", *SMALL_K, *chunking])
        pre_s = python_m_sweep(folder, ["filter=pre", *SMALL_K, *chunking])
        walls.append(
            f"{' '.join(chunking) or 'chunk=200 (default)'}: the post sweep (4 runs) {post_s:.1f} s, the pre run {pre_s:.1f} s"
        )
    runs = [r for r in evaluated_runs(folder) if r.info.run_id not in before]
    rows = []
    for r in runs:
        m = r.data.metrics
        rows.append(
            [
                label(r),
                cell(m, "filter/short_result_rate", 3),
                cell(m, "recall_at_5"),
                cell(m, "ndcg_at_10"),
                cell(m, "latency/search_ms_p50", 2),
            ]
        )
    print_table(
        f"2. Post-filtering with k = 10 chunk hits ({' '.join(SMALL_K)}), flat index, bundled golden set",
        ["config", "short", "recall@5", "ndcg@10", "ms p50"],
        rows,
    )
    print("\nwall time: " + "; ".join(walls))


# ---------------------------------------------------------------- 3. HNSW under a selective filter


def grouped(n: int, groups: int) -> tuple[Corpus, list[Chunk], GoldenSet]:
    """n documents, document i in group i % groups, one chunk each; N_QUERIES questions, question i
    restricted to group i % DISTINCT_GROUPS."""
    corpus = Corpus(tuple(Document(f"d{i}", "", metadata={"group": i % groups}) for i in range(n)), source="synthetic")
    chunks = [Chunk(f"d{i}", 0, 0, 0, "", 0) for i in range(n)]
    golden = GoldenSet(
        tuple(
            Question(f"q{i}", f"question {i}", {"d0": 1}, filters={"group": i % DISTINCT_GROUPS})
            for i in range(N_QUERIES)
        ),
        source="synthetic",
    )
    return corpus, chunks, golden


def searched(index: FaissIndex, queries: np.ndarray, plans: list[Restriction]) -> Callable[[], list[np.ndarray]]:
    """Each query's hits (chunk ids, without the -1 padding) under its restriction, one query at a
    time, as `PreFilter.search` asks a dense retriever's index."""

    def search() -> list[np.ndarray]:
        found = []
        for query, r in zip(queries, plans):
            ids = index.search(query[None, :], K, allowed=r.chunk_ids, exact=r.exact)[1][0]
            found.append(ids[ids >= 0])
        return found

    return search


def hnsw_selective(n: int, dim: int) -> None:
    defaults = yaml.safe_load((resources.files("sweep.conf") / "index/hnsw.yaml").read_text())
    knobs = {"M": 32, "ef_construction": 200, "ef_search": 128}
    assert {k: defaults[k] for k in knobs} == knobs, f"conf/index/hnsw.yaml has changed: {defaults}"
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = rng.normal(size=(N_QUERIES, dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    hnsw = HNSWIndex(**knobs)
    start = time.perf_counter()
    hnsw.build(vectors)
    build_s = time.perf_counter() - start
    flat = FlatIndex()
    flat.build(vectors)
    unfiltered = recall(list(hnsw.search(queries, K)[1]), list(flat.search(queries, K)[1]))
    print(
        f"\n3. HNSW index over {n:,} x {dim} random unit vectors (M=32, ef_construction=200): built in {build_s:.1f} s (single-threaded); "
        f"unfiltered recall@10 {unfiltered:.3f}"
    )

    rows = []
    for share in SHARES:
        groups = round(1 / share)
        corpus, chunks, golden = grouped(n, groups)
        selector, exact = PreFilter(exact_below=0.0), PreFilter(exact_below=1.1)
        for search_filter in (selector, exact):
            search_filter.prepare(corpus, chunks, golden, 10)
        # restrictions are built once per distinct filter, outside the timing
        by_selector_plan = [selector.restriction(q) for q in golden]
        by_exact_plan = [exact.restriction(q) for q in golden]
        assert all(r.exact for r in by_exact_plan) and not any(r.exact for r in by_selector_plan)

        truth = searched(flat, queries, by_selector_plan)()
        selector_s, by_selector = best_of(REPEATS, searched(hnsw, queries, by_selector_plan))
        exact_s, by_exact = best_of(REPEATS, searched(hnsw, queries, by_exact_plan))
        same = all(np.array_equal(e, t) for e, t in zip(by_exact, truth))
        allowed = len(by_exact_plan[0].chunk_ids)
        rows.append(
            [
                f"{100 * share:g}%",
                f"{allowed:,}",
                f"{recall(by_selector, truth):.3f}",
                f"{recall(by_exact, truth):.3f}" + ("" if same else " (order differs)"),
                f"{1000 * selector_s / N_QUERIES:.3f}",
                f"{1000 * exact_s / N_QUERIES:.3f}",
                f"{selector_s / exact_s:.2f}",
            ]
        )
    print_table(
        f"   {N_QUERIES} queries, k={K}, as PreFilter.search does; recall against a flat index with the selector; "
        f"ms = mean per query, best of {REPEATS} passes",
        [
            "allowed share",
            "allowed chunks",
            "(a) selector recall@10",
            "(b) exact recall@10",
            "(a) ms/query",
            "(b) ms/query",
            "(a)/(b) time",
        ],
        rows,
    )


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["1", "2", "3", "all"], default="all", help="which part to run (default all)")
    parser.add_argument("--quick", action="store_true", help="part 3 on 20,000 vectors instead of 100,000")
    parser.add_argument("--n", type=int, help="part 3's number of vectors (default 100,000; 20,000 with --quick)")
    parser.add_argument("--dim", type=int, default=64, help="part 3's vector dimension (default 64)")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # partial results show as they come

    print(machine(["faiss-cpu", "numpy", "mlflow", "hydra-core"], {"faiss": faiss.omp_get_max_threads()}))
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sweep-bench-filters-") as tmp:
        folder = Path(tmp).resolve()
        if args.part in ("1", "all"):
            filter_reranker_sweep(folder)
        if args.part in ("2", "all"):
            post_with_small_k(folder)
        if args.part in ("3", "all"):
            hnsw_selective(args.n or (20_000 if args.quick else 100_000), args.dim)
    print(f"\nbenchmark took {time.perf_counter() - start:.0f} s; load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
