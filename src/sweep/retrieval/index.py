"""FAISS indexes over unit-length chunk vectors (inner product = cosine), reproducible.

`flat` is exact; `hnsw` and `ivf` are approximate, with their knobs as config. Building is
single-threaded so the same vectors always give the same graph and the same clusters.
A search can be restricted to allowed chunk ids: inside FAISS with an ID selector, or
exactly over just those vectors (HNSW and IVF lose results under a selective selector); FAISS
keeps no metadata, so a filter's `where` is not used. The interface and the measurements
(recall against exact, latency, bytes) are `sweep.retrieval.vector_index.VectorIndex`'s;
`sweep.retrieval.dense.DenseRetriever` puts an embedding model in front of an index.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import faiss
import numpy as np

from sweep.errors import InputError
from sweep.retrieval.vector_index import VectorIndex, Where
from sweep.settings import Range, checked

SEED = 1234


@dataclass
class FaissIndex(VectorIndex):
    """Base: subclasses say how to make the empty index and how to set search-time knobs."""

    @abstractmethod
    def _make(self, dim: int, n_vectors: int) -> faiss.Index:
        """The empty index for `n_vectors` vectors of `dim` dimensions."""

    def _tune(self, index: faiss.Index) -> None:  # noqa: B027 (optional: flat has no knobs)
        """Search-time parameters (efSearch, nprobe)."""

    def _parameters(self, selector: faiss.IDSelector) -> faiss.SearchParameters:
        """Search-time parameters for a restricted search; they replace `_tune`'s for that call."""
        return faiss.SearchParameters(sel=selector)

    def _build(self, vectors: np.ndarray, metadata: Sequence[Mapping[str, Any]]) -> None:
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

    def _search(
        self, queries: np.ndarray, k: int, allowed: np.ndarray | None, exact: bool, where: Where | None
    ) -> tuple[np.ndarray, np.ndarray]:
        if allowed is None:
            return self.index.search(queries, k)
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
    ef_search: Annotated[int, Range(1)] = 128  # candidates per search, even below k (FAISS 1.15); 0 returns garbage

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
