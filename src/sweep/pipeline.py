"""One retrieval run: chunk → embed (cached) → index → search (+ filter) → rerank →
documents (+ abstain) → Run.

Chunk hits collapse to documents (a document ranks at its best chunk). If the top score is
below `min_score` the system answers nothing, which is right for unanswerable questions.
Times, latencies and filter outcomes are measured here, where the work happens.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

from sweep.chunking import Chunk, TokenChunker
from sweep.corpus import Corpus
from sweep.embed import EmbeddingCache, SentenceTransformerEmbedder
from sweep.filters import Filter, Restriction
from sweep.golden import GoldenSet
from sweep.index import FaissIndex, Hits, Retriever
from sweep.rerank import Reranker
from sweep.runs import Run

log = logging.getLogger(__name__)


@dataclass
class DenseRetriever:
    """A sentence-transformers model over a FAISS index, with chunk vectors cached on disk."""

    embedder: SentenceTransformerEmbedder
    index: FaissIndex
    cache: EmbeddingCache | None = None
    chunking: dict[str, Any] = field(default_factory=dict)  # part of the cache key
    cache_hit: bool = False
    load_s: float = 0.0
    embed_s: float = 0.0

    def build(self, texts: Sequence[str]) -> None:
        start = time.perf_counter()
        self.embedder.model  # load it now, so neither embedding nor the first search pays for it
        self.load_s = time.perf_counter() - start
        start = time.perf_counter()

        def compute() -> np.ndarray:
            return self.embedder.encode_documents(texts, progress=True)

        if self.cache is None:
            vectors = compute()
        else:
            key = self.cache.key(self.embedder.identity, self.chunking, texts)
            vectors, self.cache_hit = self.cache.get_or_compute(key, compute)
        self.embed_s = time.perf_counter() - start
        self.index.build(vectors)

    def search(
        self, queries: Sequence[str], k: int, allowed: np.ndarray | None = None, exact: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.index.search(self.embedder.encode_queries(queries), k, allowed, exact)


def collapse_to_documents(hits: Hits, chunks: Sequence[Chunk], depth: int) -> list[tuple[str, float]]:
    """Best chunk per document, in hit order (hits arrive best first), at most `depth` documents."""
    ranking: dict[str, float] = {}
    for score, chunk_id in zip(hits.scores.tolist(), hits.ids.tolist()):
        ranking.setdefault(chunks[chunk_id].doc_id, score)
        if len(ranking) == depth:
            break
    return list(ranking.items())


@dataclass
class RunResult:
    run: Run
    chunks: list[Chunk]
    timings: dict[str, float]  # cost metrics: seconds, per-query latencies in ms, bytes, counts


@dataclass
class Pipeline:
    chunker: TokenChunker
    retriever: Retriever
    filter: Filter = field(default_factory=Filter)
    reranker: Reranker = field(default_factory=Reranker)
    depth: int = 100  # documents per question: deep enough for every metric cutoff
    chunk_depth: int = 400  # chunk hits fetched before collapsing to documents
    min_score: float | None = None  # abstain below this top score

    def run(self, corpus: Corpus, golden: GoldenSet, name: str = "run") -> RunResult:
        chunks = self.chunker.split(corpus)
        self.filter.prepare(corpus, chunks, golden, self.chunk_depth)  # bad filters fail before anything is embedded
        texts = [c.text for c in chunks]
        start = time.perf_counter()
        self.retriever.build(texts)
        build_s = time.perf_counter() - start
        start = time.perf_counter()
        self.reranker.build(texts)
        rerank_build_s, rerank_s = time.perf_counter() - start, 0.0

        rankings: dict[str, list[tuple[str, float]]] = {}
        latencies, restricted = [], []
        for question in tqdm(golden, desc="searching", unit="question", disable=None):  # None: only on a terminal
            start = time.perf_counter()
            restriction = self.filter.restriction(question)

            def search(retriever: Retriever) -> Hits:
                return self.filter.search(retriever, question.question, self.chunk_depth, restriction)

            hits = search(self.retriever)
            if restriction is not None:
                restricted.append((restriction, len(hits)))
            reranking = time.perf_counter()
            hits = self.reranker.rerank(question.question, hits, search)
            rerank_s += time.perf_counter() - reranking
            ranking = collapse_to_documents(hits, chunks, self.depth)
            latencies.append(1000 * (time.perf_counter() - start))
            if ranking and (self.min_score is None or ranking[0][1] >= self.min_score):
                rankings[question.id] = ranking
        costs = self._dense_costs(chunks) if isinstance(self.retriever, DenseRetriever) else {"time/embed_s": 0.0}
        timings = costs | self._filter_outcomes(restricted, len(golden)) | {
            "time/index_s": build_s - costs["time/embed_s"] - costs.get("time/model_load_s", 0.0),
            "time/search_s": sum(latencies) / 1000 - rerank_s,
            "time/rerank_s": rerank_build_s + rerank_s,
            "latency/search_ms_p50": float(np.percentile(latencies, 50)),
            "latency/search_ms_p95": float(np.percentile(latencies, 95)),
            "corpus/chunks": float(len(chunks)),
        }
        return RunResult(Run.from_ranked(rankings, name), chunks, timings)

    def _filter_outcomes(self, restricted: list[tuple[Restriction, int]], n_questions: int) -> dict[str, float]:
        """How many questions a filter restricted; of those, how many came back short (fewer chunk
        hits than `chunk_depth` or than the filter allows, whichever is smaller: what post-filtering
        with too little over-fetch loses, or an approximate index under a selector, or a lexical
        model when few allowed chunks share a term with the question), how many matched nothing,
        and how many were searched by exact scan."""
        outcomes = {"filter/restricted_share": len(restricted) / n_questions if n_questions else 0.0}
        if restricted:
            short = [n_hits < min(self.chunk_depth, len(r.chunk_ids)) for r, n_hits in restricted]
            outcomes |= {
                "filter/short_result_rate": float(np.mean(short)),
                "filter/empty_questions": float(sum(not len(r.chunk_ids) for r, _ in restricted)),
                "filter/exact_share": float(np.mean([r.exact for r, _ in restricted])),
            }
        return outcomes

    def _dense_costs(self, chunks: list[Chunk]) -> dict[str, float]:
        """Embedding time, index size, and the share of chunks the model silently truncates."""
        retriever = self.retriever
        limit = retriever.embedder.max_seq_length - 2  # [CLS] and [SEP] take two positions
        truncated = float(np.mean([c.n_tokens > limit for c in chunks])) if chunks else 0.0
        if truncated:
            log.warning(
                "%.0f%% of chunks are longer than the model's %d-token limit and are truncated when embedded",
                100 * truncated, limit + 2,
            )
        return {
            "time/model_load_s": retriever.load_s,
            "time/embed_s": retriever.embed_s,
            "index/bytes": float(retriever.index.nbytes),
            "corpus/truncated_share": truncated,
        }
