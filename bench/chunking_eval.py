"""Benchmark: chunking strategies on Chroma's chunking benchmark, and what the context metrics cost.

    python bench/chunking_eval.py                    # both parts
    python bench/chunking_eval.py --part 1           # the chunking table only
    python bench/chunking_eval.py --cache DIR        # keep the embeddings between runs

Reads the bundled data/chunking_eval (5 corpora as one document each, 472 questions with
character spans; its README.md), exactly as `python -m sweep golden=chunking_eval` does: the
configuration is composed by Hydra from
conf/, the pipeline is the harness's own, and all corpora are retrieved from at once.

1. `chunking=tokens,recursive` x `chunk=200,400,800` x overlap 0 and half the size, k = 5 and
   10, with MiniLM (all-MiniLM-L6-v2) on a flat index: per configuration, context recall,
   precision, precision_omega and IoU (mean ± standard deviation over the questions, in %, as
   Chroma's report prints them), the number of chunks and the wall time (chunking, embedding,
   search and scoring; embeddings come from the cache when --cache holds them already).
   MiniLM reads at most 256 word pieces: larger chunks are embedded from their first 256
   (`corpus/truncated_share`), but delivered and scored whole.
2. The context metrics' cost: 500 questions (the 472, then the first 28 again under new ids),
   top 10 chunks each, `chunking=tokens chunk=200`: the pipeline's search time against
   `score_contexts` (best of 5), the issue's bound being 5%.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from _common import best_of, machine, print_table
from hydra import compose, initialize_config_module

from sweep.evaluation.context import score_contexts
from sweep.experiment.trial import build_pipeline, load_data
from sweep.formats.golden import GoldenSet

STRATEGIES = ("tokens", "recursive")
SIZES = (200, 400, 800)
CUTOFFS = (5, 10)


def configure(cache: Path, *overrides: str):
    with initialize_config_module("sweep.conf", version_base=None):
        return compose(
            "config",
            overrides=["golden=chunking_eval", f"cache_dir={cache}", *overrides],
        )


def percent(values: np.ndarray) -> str:
    return f"{100 * values.mean():.1f} ± {100 * values.std():.1f}"


def chunking_table(cache: Path) -> None:
    rows = []
    for strategy in STRATEGIES:
        for size in SIZES:
            for overlap in (0, size // 2):
                cfg = configure(
                    cache,
                    f"chunking={strategy}",
                    f"chunk={size}",
                    f"chunking.overlap={overlap}",
                    f"context.k={list(CUTOFFS)}",
                )
                start = time.perf_counter()
                corpus, golden = load_data(cfg)
                retrieval = build_pipeline(cfg).retrieve(corpus, golden)
                frame = score_contexts(golden, retrieval.contexts, retrieval.chunks, corpus, CUTOFFS).frame
                wall = time.perf_counter() - start
                for k in CUTOFFS:
                    rows.append([
                        f"{strategy} {size}/{overlap}", str(k), percent(frame[f"context/recall_at_{k}"].to_numpy()),
                        percent(frame[f"context/precision_at_{k}"].to_numpy()), percent(frame["context/precision_omega"].to_numpy()),
                        percent(frame[f"context/iou_at_{k}"].to_numpy()), str(len(retrieval.chunks)),
                        f"{retrieval.stats['corpus/truncated_share']:.0%}", f"{wall:.1f}",
                    ])  # fmt: skip
                print(f"{strategy} {size}/{overlap}: {wall:.1f} s", file=sys.stderr)
    print_table(
        f"Chroma's chunking benchmark: {len(golden)} questions, MiniLM, flat index (%, mean ± std over questions)",
        ["chunking size/overlap", "k", "recall", "precision", "precision_Ω", "IoU", "chunks", "truncated", "wall s"],
        rows,
    )


def cost_table(cache: Path) -> None:
    cfg = configure(cache, "chunking=tokens", "chunk=200", "context.k=[1,3,5,10]")
    corpus, golden = load_data(cfg)
    extra = tuple(replace(q, id=f"{q.id}-again") for q in golden.questions[: 500 - len(golden)])
    golden = GoldenSet(golden.questions + extra, source=golden.source)
    retrieval = build_pipeline(cfg).retrieve(corpus, golden)
    seconds, _ = best_of(5, lambda: score_contexts(golden, retrieval.contexts, retrieval.chunks, corpus, (1, 3, 5, 10)))
    search = retrieval.stats["time/search_s"]
    print_table(
        "Context metrics against search, tokens 200, k = 1, 3, 5, 10",
        ["questions", "chunks delivered each", "search s", "context metrics s", "share of search"],
        [[str(len(golden)), "10", f"{search:.2f}", f"{seconds:.4f}", f"{seconds / search:.2%}"]],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["1", "2", "all"], default="all")
    parser.add_argument("--cache", type=Path, help="embedding cache folder (default: a temporary one)")
    args = parser.parse_args()
    import torch

    print(machine(["sentence-transformers", "faiss-cpu", "semchunk"], {"torch": torch.get_num_threads()}))
    with tempfile.TemporaryDirectory() as folder:
        cache = args.cache or Path(folder)
        if args.part in ("1", "all"):
            chunking_table(cache)
        if args.part in ("2", "all"):
            cost_table(cache)


if __name__ == "__main__":
    main()
