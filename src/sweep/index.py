"""FAISS indexes over unit-length chunk vectors (inner product = cosine), reproducible.

`flat` is exact; `hnsw` and `ivf` are approximate, with their knobs as config. Building is
single-threaded so the same vectors always give the same graph and the same clusters.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import faiss
import numpy as np

from sweep.errors import InputError

SEED = 1234


@dataclass
class FaissIndex(ABC):
    """Base: subclasses say how to make the empty index and how to set search-time knobs."""

    @abstractmethod
    def _make(self, dim: int, n_vectors: int) -> faiss.Index:
        """The empty index for `n_vectors` vectors of `dim` dimensions."""

    def _tune(self, index: faiss.Index) -> None:
        """Search-time parameters (efSearch, nprobe)."""

    def build(self, vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)  # deterministic construction
        try:
            index = self._make(vectors.shape[1], len(vectors))
            if not index.is_trained:
                index.train(vectors)
            index.add(vectors)
        finally:
            faiss.omp_set_num_threads(threads)
        self._tune(index)
        self.index = index

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, chunk ids), each (queries, k); id -1 where fewer than k were found."""
        k = min(k, self.index.ntotal)
        return self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)

    @property
    def nbytes(self) -> int:
        return int(faiss.serialize_index(self.index).nbytes)


@dataclass
class FlatIndex(FaissIndex):
    def _make(self, dim: int, n_vectors: int) -> faiss.Index:
        return faiss.IndexFlatIP(dim)


@dataclass
class HNSWIndex(FaissIndex):
    M: int = 32
    ef_construction: int = 200
    ef_search: int = 128

    def _make(self, dim: int, n_vectors: int) -> faiss.Index:
        index = faiss.IndexHNSWFlat(dim, self.M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.ef_construction
        return index

    def _tune(self, index: faiss.Index) -> None:
        index.hnsw.efSearch = self.ef_search


@dataclass
class IVFIndex(FaissIndex):
    nlist: int = 64
    nprobe: int = 8

    def _make(self, dim: int, n_vectors: int) -> faiss.Index:
        if self.nlist > n_vectors:
            raise InputError(
                f"index.nlist={self.nlist} is larger than the number of chunks ({n_vectors}); "
                f"use index.nlist<={n_vectors} (about sqrt(chunks) = {max(1, int(np.sqrt(n_vectors)))} is typical)"
            )
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, self.nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = SEED
        return index

    def _tune(self, index: faiss.Index) -> None:
        index.nprobe = self.nprobe
