"""FAISS indexes over unit-length chunk vectors (inner product = cosine), reproducible.

`flat` is exact; `hnsw` and `ivf` are approximate, with their knobs as config. Building is
single-threaded so the same vectors always give the same graph and the same clusters.
A search can be restricted to allowed chunk ids: inside FAISS with an ID selector, or
exactly over just those vectors (HNSW and IVF lose results under a selective selector).
An index searches vectors; `sweep.retrieval.dense.DenseRetriever` puts an embedding model in front of it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Annotated

import faiss
import numpy as np

from sweep.errors import InputError
from sweep.settings import Range, checked

SEED = 1234


@dataclass
class FaissIndex(ABC):
    """Base: subclasses say how to make the empty index and how to set search-time knobs."""

    @abstractmethod
    def _make(self, dim: int, n_vectors: int) -> faiss.Index:
        """The empty index for `n_vectors` vectors of `dim` dimensions."""

    def _tune(self, index: faiss.Index) -> None:  # noqa: B027 (optional: flat has no knobs)
        """Search-time parameters (efSearch, nprobe)."""

    def _parameters(self, selector: faiss.IDSelector) -> faiss.SearchParameters:
        """Search-time parameters for a restricted search; they replace `_tune`'s for that call."""
        return faiss.SearchParameters(sel=selector)

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
        self.vectors = vectors  # for exact search over an allowed subset

    def search(
        self, queries: np.ndarray, k: int, allowed: np.ndarray | None = None, exact: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, chunk ids), each (queries, k); id -1 where fewer than k were found.
        `allowed`: sorted chunk ids to search among; `exact`: score all of them, not the index."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if allowed is None:
            return self.index.search(queries, min(k, self.index.ntotal))
        allowed = np.asarray(allowed, dtype=np.int64)
        if exact or not len(allowed):
            # faiss.knn scores and orders exactly as IndexFlatIP does, ties included
            scores, positions = faiss.knn(
                queries, self.vectors[allowed], min(k, len(allowed)), metric=faiss.METRIC_INNER_PRODUCT
            )
            return scores, np.where(positions >= 0, allowed[np.maximum(positions, 0)], -1)
        selector = faiss.IDSelectorBatch(allowed)  # a hash set: O(1) per candidate
        return self.index.search(queries, min(k, len(allowed)), params=self._parameters(selector))

    @property
    def nbytes(self) -> int:
        return int(faiss.serialize_index(self.index).nbytes)

    approximate = True  # whether a search may miss a nearer vector (flat: no)

    def recall_vs_exact(self, queries: np.ndarray, k: int = 10) -> float:
        """What approximation costs: the share of the exact top k (brute force over the same
        vectors) that the index's own top-k search returns, averaged over `queries`. A returned
        chunk counts when it scores at least the exact k-th score, so ties at the k-th place count
        whichever of the tied chunks came back."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        k = min(k, self.index.ntotal)
        if not len(queries) or not k:
            return float("nan")
        _, found = self.index.search(queries, k)
        kth_score = faiss.knn(queries, self.vectors, k, metric=faiss.METRIC_INNER_PRODUCT)[0][:, -1:]
        scores = np.einsum("qd,qkd->qk", queries, self.vectors[np.maximum(found, 0)])
        in_exact_top_k = (found >= 0) & (scores >= kth_score - 1e-6)
        return float(in_exact_top_k.sum(axis=1).mean() / k)


@checked("index")
@dataclass
class FlatIndex(FaissIndex):
    approximate = False

    def _make(self, dim: int, n_vectors: int) -> faiss.Index:
        return faiss.IndexFlatIP(dim)


@checked("index")
@dataclass
class HNSWIndex(FaissIndex):
    M: Annotated[int, Range(2, 1024)] = 32  # FAISS crashes the process below 2
    ef_construction: Annotated[int, Range(1)] = 200
    ef_search: Annotated[int, Range(1)] = 128  # FAISS looks at max(ef_search, k) candidates; 0 returns garbage

    def _make(self, dim: int, n_vectors: int) -> faiss.Index:
        index = faiss.IndexHNSWFlat(dim, self.M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.ef_construction
        return index

    def _tune(self, index: faiss.Index) -> None:
        index.hnsw.efSearch = self.ef_search

    def _parameters(self, selector: faiss.IDSelector) -> faiss.SearchParameters:
        return faiss.SearchParametersHNSW(sel=selector, efSearch=self.ef_search)


@checked("index")
@dataclass
class IVFIndex(FaissIndex):
    nlist: Annotated[int, Range(1)] = 16
    nprobe: Annotated[int, Range(1)] = 4

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

    def _parameters(self, selector: faiss.IDSelector) -> faiss.SearchParameters:
        return faiss.SearchParametersIVF(sel=selector, nprobe=self.nprobe)
