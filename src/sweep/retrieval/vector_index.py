"""What a dense retriever asks of a vector index, and what every index measures the same way.

An index (FAISS: `sweep.retrieval.index`; Chroma: `sweep.retrieval.chroma_index`; LanceDB:
`sweep.retrieval.lancedb_index`; or your own, plugged in by `index._target_=my_pkg.MyIndex`)
subclasses `VectorIndex` and implements three things:

    _build(vectors, metadata)                  store the chunk vectors (a chunk's id is its row) and
                                               each chunk's document metadata
    _search(queries, k, allowed, exact, where) (scores, chunk ids), each (queries, k), best first, id -1
                                               past the last hit; `allowed`: the chunk ids a filter lets
                                               through, `where`: the same filter as field -> values,
                                               for an engine that filters by itself
    nbytes                                     its size in bytes (on disk, or serialised); None when it
                                               cannot be known (a remote server's disk)

and, when `_build` made something outside the process (a folder, a collection on a server),
`close()` removes it. The base keeps the vectors and measures, for every index alike: the build's
seconds, the bytes, each search's milliseconds (p50/p95 of the searches a run made), and recall
against an exact search over the same vectors, unfiltered and under the filters the run used.
"""

from __future__ import annotations

import importlib
import logging
import math
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import faiss
import numpy as np

from sweep.errors import InputError, one_line

log = logging.getLogger(__name__)

Scalar = str | float | bool
Where = Mapping[str, tuple[Scalar, ...]]  # field -> the values it may have (numbers as floats): all must hold


def stored_value(value: Scalar) -> Scalar:
    """A metadata value as an engine stores it: every number a float, so that 2026 and 2026.0 are
    one value there as they are to the filters (`sweep.retrieval.filters`)."""
    return value if isinstance(value, (bool, str)) else float(value)


def folder_bytes(folder: str | Path) -> int:
    """The bytes of every file under `folder`."""
    return sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file())


def engine_package(name: str, option: str) -> ModuleType:
    """The engine's Python package, imported when first used; one line saying how to install it if missing."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise InputError(f"{option} needs the {name} package: pip install 'golden-sweep[engines]'") from None


class Cleanup:
    """What an index made outside the process (a folder, a collection, a client), removed once, last
    made first removed: when the index is closed, when it is garbage-collected, or when the
    interpreter exits (SIGINT and SIGTERM end `python -m sweep` through an exception, so its exit
    runs this too; SIGKILL leaves everything). A step that fails is a warning: removing must
    not hide why a run failed."""

    def __init__(self, owner: object) -> None:
        self._steps: list[tuple[Callable[[], object], str]] = []
        self._finalizer = weakref.finalize(owner, Cleanup._run, self._steps)

    def add(self, step: Callable[[], object], what: str) -> None:
        """`step` removes `what` (named in the warning if it cannot)."""
        self._steps.append((step, what))

    def __call__(self) -> None:
        self._finalizer()

    @staticmethod
    def _run(steps: list[tuple[Callable[[], object], str]]) -> None:
        for step, what in reversed(steps):
            try:
                step()
            except Exception as error:
                log.warning("could not remove %s (%s)", what, one_line(error))


def padded(rows: Sequence[tuple[Sequence[float], Sequence[int]]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-query (scores, ids) lists, each at most k long, as the (queries, k) arrays `search`
    returns: -inf and -1 past the last hit."""
    scores = np.full((len(rows), k), -np.inf, dtype=np.float32)
    ids = np.full((len(rows), k), -1, dtype=np.int64)
    for row, (row_scores, row_ids) in enumerate(rows):
        scores[row, : len(row_ids)], ids[row, : len(row_ids)] = row_scores[:k], row_ids[:k]
    return scores, ids


class VectorIndex(ABC):
    """The index interface (see the module's docstring) and its measurements."""

    approximate: ClassVar[bool] = True  # whether a search may miss a nearer vector (recall is measured then)

    @abstractmethod
    def _build(self, vectors: np.ndarray, metadata: Sequence[Mapping[str, Any]]) -> None:
        """Store `vectors` (float32, one row per chunk) with each chunk's document `metadata`."""

    @abstractmethod
    def _search(
        self, queries: np.ndarray, k: int, allowed: np.ndarray | None, exact: bool, where: Where | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The best k chunks per query (k is at most the number of chunks); among `allowed` when
        given (`where` says the same as a condition on the metadata, when the filter has one);
        `exact`: score every allowed chunk rather than trust an approximate index (where the
        engine lets one choose)."""

    @property
    @abstractmethod
    def nbytes(self) -> int | None:
        """The index's size in bytes; None when it cannot be known here."""

    def close(self) -> None:  # noqa: B027 (optional: an index inside the process has nothing to remove)
        """Remove what `_build` made outside this process (a folder, a collection, a table)."""

    def build(self, vectors: np.ndarray, metadata: Sequence[Mapping[str, Any]] | None = None) -> None:
        """Index `vectors` (chunk id = row); `metadata`: each chunk's document metadata, for an
        engine that filters on it."""
        self.close()  # a second build replaces the first
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        metadata = list(metadata) if metadata is not None else [{}] * len(vectors)
        if len(metadata) != len(vectors):
            raise ValueError(f"{len(vectors)} vectors but metadata for {len(metadata)} chunks")
        self.vectors = vectors  # the exact reference, and FAISS's scan of an allowed subset
        self._search_ms: list[float] = []
        self._restricted: dict[tuple[bytes, int], tuple[np.ndarray, np.ndarray, bool, Where | None]] = {}
        start = time.perf_counter()
        self._build(vectors, metadata)
        self._build_s = time.perf_counter() - start

    def search(
        self,
        queries: np.ndarray,
        k: int,
        allowed: np.ndarray | None = None,
        exact: bool = False,
        where: Where | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, chunk ids), each (queries, k) or narrower, best first, id -1 where fewer than k
        were found. `allowed`: sorted chunk ids to search among; `exact`: score all of them;
        `where`: the filter behind `allowed`, for an engine that filters on metadata itself."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=np.int64)
        start = time.perf_counter()
        answer = self._search(queries, min(k, len(self.vectors)), allowed, exact, where)
        self._search_ms.append(1000 * (time.perf_counter() - start) / max(1, len(queries)))
        if allowed is not None:  # remembered (once per question and filter) for the filtered recall
            for query in queries:
                self._restricted.setdefault((query.tobytes(), id(allowed)), (query, allowed, exact, where))
        return answer

    def recall_vs_exact(
        self,
        queries: np.ndarray,
        k: int = 10,
        allowed: np.ndarray | None = None,
        exact: bool = False,
        where: Where | None = None,
    ) -> float:
        """What approximation costs: the share of the exact top k (brute force over the same
        vectors, among `allowed` when given) that the index's own top-k search (asked as the run
        asked it) returns, averaged over `queries`. A returned chunk counts when it is allowed and
        scores at least the exact k-th score, so ties at the k-th place count whichever of the
        tied chunks came back."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        pool = self.vectors if allowed is None else self.vectors[allowed]
        k = min(k, len(pool))
        if not len(queries) or not k:
            return math.nan
        _, found = self._search(queries, k, allowed, exact, where)
        kth_score = faiss.knn(queries, pool, k, metric=faiss.METRIC_INNER_PRODUCT)[0][:, -1:]
        scores = np.einsum("qd,qkd->qk", queries, self.vectors[np.maximum(found, 0)])
        counted = (found >= 0) & (scores >= kth_score - 1e-6)
        if allowed is not None:
            counted &= np.isin(found, allowed)
        return float(counted.sum(axis=1).mean() / k)

    def stats(self, queries: np.ndarray | None = None, k: int = 10) -> dict[str, float]:
        """`index/build_s`, `index/bytes`, the searches' `index/search_ms_p50` and `_p95` (per query,
        the engine alone: no encoding), and on an approximate index `index/recall_vs_exact_at_<k>`
        over `queries` and `index/recall_vs_exact_at_<k>_filtered` over the restricted searches made."""
        stats = {"index/build_s": self._build_s}
        size = self.nbytes
        if size is not None:
            stats["index/bytes"] = float(size)
        if self._search_ms:
            stats |= {f"index/search_ms_p{q}": float(np.percentile(self._search_ms, q)) for q in (50, 95)}
        if self.approximate and queries is not None and len(queries):
            stats[f"index/recall_vs_exact_at_{k}"] = self.recall_vs_exact(queries, k)
        if self.approximate and self._restricted:
            recalls = [self.recall_vs_exact(q[None, :], k, *rest) for q, *rest in self._restricted.values()]
            stats[f"index/recall_vs_exact_at_{k}_filtered"] = float(np.nanmean(recalls))
        return stats
