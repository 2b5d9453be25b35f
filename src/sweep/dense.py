"""Dense retrieval: an embedding model in front of a FAISS index, chunk vectors cached on disk.

Composed in `conf/model/minilm.yaml` from its parts, the way lightning-hydra-template nests a
network inside its model config:

    _target_: sweep.dense.DenseRetriever
    embedder: {_target_: sweep.embed.SentenceTransformerEmbedder, path: null}
    index: ${index}
    cache: {_target_: sweep.embed.EmbeddingCache, folder: ${cache_dir}}
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np

from sweep.embed import EmbeddingCache, SentenceTransformerEmbedder
from sweep.index import FaissIndex
from sweep.retriever import Retriever

log = logging.getLogger(__name__)


class DenseRetriever(Retriever):
    def __init__(
        self, embedder: SentenceTransformerEmbedder, index: FaissIndex, cache: EmbeddingCache | None = None
    ) -> None:
        self.embedder, self.index, self.cache = embedder, index, cache
        self._stats: dict[str, float] = {}

    def build(self, texts: Sequence[str]) -> None:
        start = time.perf_counter()
        self.embedder.load()  # now, so neither embedding nor the first search pays for it
        loaded = time.perf_counter()
        cache_hit = False

        def compute() -> np.ndarray:
            return self.embedder.encode_documents(texts, progress=True)

        if self.cache is None:
            vectors = compute()
        else:
            vectors, cache_hit = self.cache.get_or_compute(self.cache.key(self.embedder.identity, texts), compute)
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
            "embed/cache_hit": float(cache_hit),
            "index/bytes": float(self.index.nbytes),
            "corpus/truncated_share": truncated,
        }

    def search(
        self, queries: Sequence[str], k: int, allowed: np.ndarray | None = None, exact: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.index.search(self.embedder.encode_queries(queries), k, allowed, exact)

    def stats(self) -> dict[str, float]:
        return dict(self._stats)
