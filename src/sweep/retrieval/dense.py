"""Dense retrieval: an embedding model in front of a FAISS index, chunk vectors cached on disk.

Composed in `conf/model/minilm.yaml` from its parts, the way lightning-hydra-template nests a
network inside its model config:

    _target_: sweep.retrieval.dense.DenseRetriever
    embedder: {_target_: sweep.retrieval.embed.SentenceTransformerEmbedder, path: null}
    index: ${index}
    cache: {_target_: sweep.retrieval.cache.EmbeddingCache, folder: ${cache_dir}}
    embed: {_target_: sweep.retrieval.embed.CorpusEmbedding, shard_size: 1024, backend: local}

The corpus is embedded shard by shard (`CorpusEmbedding`: here or on a Ray cluster), each shard
cached as it finishes; `embed/cache_hit` is the share of chunks whose vectors came from the cache.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np

from sweep.retrieval.base import Retriever
from sweep.retrieval.embed import CorpusEmbedding, Embedder, EmbeddingCache
from sweep.retrieval.index import FaissIndex

log = logging.getLogger(__name__)
ALONE_SAMPLE = 32  # questions encoded one at a time for the per-question latency: about 0.3 s on 2 cores


class DenseRetriever(Retriever):
    def __init__(
        self,
        embedder: Embedder,
        index: FaissIndex,
        cache: EmbeddingCache | None = None,
        embed: CorpusEmbedding | None = None,
    ) -> None:
        self.embedder, self.index, self.cache = embedder, index, cache
        self.embed = embed or CorpusEmbedding()
        self._stats: dict[str, float] = {}
        self._queries: dict[str, np.ndarray] = {}  # question text -> its vector, from prepare_queries

    def build(self, texts: Sequence[str]) -> None:
        start = time.perf_counter()
        self.embedder.load()  # now, so neither embedding nor the first search pays for it
        loaded = time.perf_counter()
        vectors, cached_share = self.embed.embed(self.embedder, texts, self.cache)
        embedded = time.perf_counter()
        self.index.build(vectors)
        indexed = time.perf_counter()
        truncated = self.embedder.truncated_share(texts)
        if truncated:
            log.warning(
                "%.0f%% of chunks are longer than the model's %d-token limit and are truncated when embedded",
                100 * truncated, self.embedder.max_seq_length,
            )  # fmt: skip
        self._stats = {
            "time/model_load_s": loaded - start,
            "time/embed_s": embedded - loaded,
            "time/index_s": indexed - embedded,
            "embed/cache_hit": cached_share,
            "index/bytes": float(self.index.nbytes),
            "corpus/truncated_share": truncated,
        }

    def prepare_queries(self, queries: Sequence[str]) -> float:
        """Encode every question in batches now; a search then looks its vector up. Returns the
        median time to encode one question alone (timed on the first `ALONE_SAMPLE` questions):
        what a live system pays per question, which a batch hides. A remote embedder's question
        vectors and those timings are cached as its corpus vectors are (they cost requests), so a
        second run on the same questions makes none."""
        start = time.perf_counter()
        unique = list(dict.fromkeys(queries))
        sample = unique[:ALONE_SAMPLE]
        keys = self._query_keys(unique, sample)
        stored = [self.cache.get(key) for key in keys] if keys else [None, None]
        vectors = stored[0] if stored[0] is not None else self.embedder.encode_queries(unique)
        self._queries = dict(zip(unique, vectors))
        self._stats["time/query_encode_s"] = time.perf_counter() - start
        self._stats["latency/query_encode_ms_mean"] = 1000 * self._stats["time/query_encode_s"] / max(1, len(unique))
        alone = (
            stored[1] if stored[1] is not None else np.array([self._time_alone(q) for q in sample], dtype=np.float32)
        )
        if keys and stored[0] is None:
            self.cache.put(keys[0], np.asarray(vectors, dtype=np.float32))
        if keys and stored[1] is None and len(alone):
            self.cache.put(keys[1], alone.reshape(-1, 1))
        self._stats["latency/query_encode_ms_p50"] = float(np.median(alone)) if len(alone) else 0.0
        return self._stats["latency/query_encode_ms_p50"]

    def _query_keys(self, unique: list[str], sample: list[str]) -> list[str]:
        """Cache keys of a remote embedder's question vectors and of its one-at-a-time timings; []
        for a local model (it is timed afresh: its cost is this machine's)."""
        if not (self.embedder.remote and self.cache is not None and unique):
            return []
        identity = self.embedder.identity
        return [
            self.cache.key(identity | {"role": "queries"}, unique),
            self.cache.key(identity | {"role": "query ms"}, sample),
        ]

    def _time_alone(self, query: str) -> float:
        start = time.perf_counter()
        self.embedder.encode_queries([query])
        return 1000 * (time.perf_counter() - start)

    def search(
        self, queries: Sequence[str], k: int, allowed: np.ndarray | None = None, exact: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        missing = [q for q in queries if q not in self._queries]
        vectors = dict(zip(missing, self.embedder.encode_queries(missing))) if missing else {}
        matrix = np.stack([self._queries[q] if q in self._queries else vectors[q] for q in queries])
        return self.index.search(matrix, k, allowed, exact)

    def stats(self) -> dict[str, float]:
        """Build costs, query encoding and, on an approximate index, `index/recall_vs_exact_at_10`
        over the prepared questions."""
        stats = dict(self._stats) | self.embedder.stats()
        if self.index.approximate and self._queries:
            stats["index/recall_vs_exact_at_10"] = self.index.recall_vs_exact(np.stack(list(self._queries.values())))
        return stats
