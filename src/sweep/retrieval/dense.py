"""Dense retrieval: an embedding model in front of a vector index, chunk vectors cached on disk.

Composed in `conf/model/minilm.yaml` from its parts, the way lightning-hydra-template nests a
network inside its model config:

    _target_: sweep.retrieval.dense.DenseRetriever
    embedder: {_target_: sweep.retrieval.embed.SentenceTransformerEmbedder, path: null}
    index: ${index}
    cache: {_target_: sweep.retrieval.cache.EmbeddingCache, folder: ${cache_dir}}
    embed: {_target_: sweep.retrieval.embed.CorpusEmbedding, shard_size: 1024, backend: local}

The corpus is embedded shard by shard (`CorpusEmbedding`: here or on a Ray cluster), each shard
cached as it finishes; `embed/cache_hit` is the share of chunks whose vectors came from the cache.
The index is any `sweep.retrieval.vector_index.VectorIndex` (FAISS, Chroma, LanceDB, your own); it
gets each chunk's document metadata, and under `filter=pre` the question's filter, for an engine
that filters by itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from sweep.retrieval.embed import CorpusEmbedding, Embedder, EmbeddingCache
from sweep.retrieval.retriever import Restriction, Retriever
from sweep.retrieval.stages import reuse_on, truncated_share
from sweep.retrieval.vector_index import VectorIndex, Where

log = logging.getLogger(__name__)


class DenseRetriever(Retriever):
    def __init__(
        self,
        embedder: Embedder,
        index: VectorIndex,
        cache: EmbeddingCache | None = None,
        embed: CorpusEmbedding | None = None,
    ) -> None:
        self.embedder, self.index, self.cache = embedder, index, cache
        self.embed = embed or CorpusEmbedding()
        self._metadata: Sequence[Mapping[str, Any]] | None = None  # each chunk's document's, from attach_metadata
        self._stats: dict[str, float] = {}
        self._queries: dict[str, np.ndarray] = {}  # question text -> its vector, from prepare_queries
        self._alone_ms: dict[str, float] | None = None  # inside `alone`: question -> its encode alone, in ms
        self._replay: dict[str, float] | None = None  # inside `alone`, remote: the cached one-question times

    def build(self, texts: Sequence[str]) -> None:
        start = time.perf_counter()
        self.embedder.load()  # now, so neither embedding nor the first search pays for it
        loaded = time.perf_counter()
        vectors, cached_share = self.embed.embed(self.embedder, texts, self.cache)
        embedded = time.perf_counter()
        self.index.build(vectors, self._metadata)
        indexed = time.perf_counter()
        truncated = truncated_share(self.embedder, texts)
        if truncated:
            log.warning(
                "%.0f%% of chunks are longer than the model's %d-token limit (its special tokens included) and are "
                "truncated when embedded: their end is never searched (a sweep's leaderboard shows every "
                "configuration's share); see docs/commands.md#warnings",
                100 * truncated, self.embedder.max_seq_length, extra={"once": "truncation"},
            )  # fmt: skip
        self._stats = {
            "time/model_load_s": loaded - start,
            "time/embed_s": embedded - loaded,
            "time/index_s": indexed - embedded,
            "embed/cache_hit": cached_share,
            "corpus/truncated_share": truncated,
        }

    def prepare_queries(self, queries: Sequence[str]) -> None:
        """Encode every question in batches now; a search then looks its vector up. The question
        vectors are cached as the corpus vectors are, computed under the entry's claim
        (`cache/query_vectors`: 1 when read from the cache), so a second run on the same questions
        encodes none: always for a remote embedder (they cost requests), for a local model where
        stages are reused (`sweep.retrieval.stages.reuse_on`: a sweep's process)."""
        start = time.perf_counter()
        unique = list(dict.fromkeys(queries))
        key = self._cache_key("queries", unique, local=reuse_on())
        stored = self.cache.get(key) if key else None
        if stored is not None or not key:
            vectors = stored if stored is not None else self.embedder.encode_queries(unique)
        else:
            with self.cache.claimed(key):  # another worker encoding them: wait, then read its vectors
                stored = self.cache.get(key)
                vectors = stored if stored is not None else self.embedder.encode_queries(unique)
                if stored is None:
                    self.cache.put(key, np.asarray(vectors, dtype=np.float32))
        self._queries = dict(zip(unique, vectors))
        if key:
            self._stats["cache/query_vectors"] = float(stored is not None)
        self._stats["time/query_encode_s"] = time.perf_counter() - start
        self._stats["latency/query_encode_ms_mean"] = 1000 * self._stats["time/query_encode_s"] / max(1, len(unique))

    @contextmanager
    def alone(self, queries: Sequence[str]) -> Iterator[None]:
        """A search encodes its question alone, as a live system does (`latency/query_encode_ms_p50`:
        the median of those encodes). A remote embedder's one-question times are cached like its
        vectors (each costs a request): the first run measures them, later runs replay them (the
        search takes the batch's vector; `replayed_ms` says what the encode took)."""
        unique = list(dict.fromkeys(queries))
        key = self._cache_key("query ms", unique)
        stored = self.cache.get(key) if key else None
        self._alone_ms = {}
        self._replay = dict(zip(unique, stored[:, 0].tolist())) if stored is not None else None
        try:
            yield
        finally:
            measured, self._alone_ms, self._replay = self._alone_ms, None, None
        if key and stored is None and all(q in measured for q in unique):
            self.cache.put(key, np.array([measured[q] for q in unique], dtype=np.float32).reshape(-1, 1))
        if measured:
            self._stats["latency/query_encode_ms_p50"] = float(np.median(list(measured.values())))

    def replayed_ms(self, query: str) -> float:
        return self._replay.get(query, 0.0) if self._replay is not None else 0.0

    def _cache_key(self, role: str, queries: list[str], local: bool = False) -> str | None:
        """The cache key of the embedder's `role` for these questions (their vectors, their
        one-at-a-time timings); None for a local model unless `local` (its one-question timings
        are measured afresh: their cost is this machine's)."""
        if not ((self.embedder.remote or local) and self.cache is not None and queries):
            return None
        return self.cache.key(self.embedder.identity | {"role": role}, queries)

    def attach_metadata(self, metadata: Sequence[Mapping[str, Any]]) -> None:
        self._metadata = metadata

    def search_within(self, queries: Sequence[str], k: int, restriction: Restriction) -> tuple[np.ndarray, np.ndarray]:
        return self.search(queries, k, restriction.chunk_ids, restriction.exact, restriction.where)

    def search(
        self,
        queries: Sequence[str],
        k: int,
        allowed: np.ndarray | None = None,
        exact: bool = False,
        where: Where | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.index.search(self._vectors(queries), k, allowed, exact, where)

    def _vectors(self, queries: Sequence[str]) -> np.ndarray:
        """The questions' vectors: inside `alone`, each encoded now on its own (or, replaying, the
        batch's); otherwise the batch's, and any question not prepared encoded now."""
        if self._alone_ms is None:
            missing = [q for q in queries if q not in self._queries]
            vectors = dict(zip(missing, self.embedder.encode_queries(missing))) if missing else {}
            return np.stack([self._queries[q] if q in self._queries else vectors[q] for q in queries])
        rows = []
        for query in queries:
            if self._replay is not None:
                rows.append(self._queries[query])
                self._alone_ms[query] = self._replay[query]
                continue
            start = time.perf_counter()
            rows.append(self.embedder.encode_queries([query])[0])
            self._alone_ms[query] = 1000 * (time.perf_counter() - start)
        return np.stack(rows)

    def stats(self) -> dict[str, float]:
        """Build costs, query encoding and the index's own (`VectorIndex.stats`: bytes, search
        latency and, on an approximate index, recall against exact over the prepared questions)."""
        questions = np.stack(list(self._queries.values())) if self._queries else None
        return dict(self._stats) | self.embedder.stats() | self.index.stats(questions)

    def close(self) -> None:
        self.index.close()
