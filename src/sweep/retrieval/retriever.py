"""What every retriever answers, one question's answer, and the chunks a filter lets it answer from.

The pipeline builds a retriever over the chunk texts, then asks it for the best k chunks of
each question, possibly restricted to the chunks a metadata filter allows. Dense
(`sweep.retrieval.dense`), lexical (`sweep.retrieval.lexical`) and a user's own retriever all implement this one
interface, so any of them plugs in through config: `model=custom model._target_=pkg.Class`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sweep.retrieval.vector_index import Where

if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True)
class Restriction:
    """The chunks one question may be answered from."""

    chunk_ids: np.ndarray  # sorted; empty when the filters match no document
    exact: bool = False  # scan them all instead of asking the index
    where: Where | None = None  # the same as field -> values, for an index that filters by itself


class Retriever(ABC):
    @abstractmethod
    def build(self, texts: Sequence[str]) -> None:
        """Index these chunk texts; a chunk's id is its position in `texts`."""

    @abstractmethod
    def search(
        self, queries: Sequence[str], k: int, allowed: np.ndarray | None = None, exact: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, chunk ids), each of shape (queries, k) or narrower, best first, id -1 past the
        last hit. `allowed`: sorted chunk ids the hits must come from; `exact`: score every allowed
        chunk rather than trust an approximate index."""

    def prepare_queries(self, queries: Sequence[str]) -> None:  # noqa: B027 (optional: lexical models need nothing)
        """Every question, once, before the batch of searches: a model may encode them all in one
        batch now, and its searches then look them up (what a run's metrics and its throughput
        come from)."""

    @contextmanager
    def alone(self, queries: Sequence[str]) -> Iterator[None]:
        """Within it, each search of one of `queries` does all its own work, as a live system's
        does for a question that comes alone: the pipeline times each question's whole path this
        way (its latency). A model that encodes questions encodes that one question then, rather
        than looking up its batch vector; work it replays from a cache instead (a remote model's
        timing, which would cost a request) it reports in `replayed_ms`. By default nothing
        changes: a lexical search does all its work anyway."""
        yield

    def replayed_ms(self, query: str) -> float:
        """Milliseconds of `query`'s last search inside `alone` that were replayed from a cache
        rather than spent (the pipeline adds them to its latency); 0 when everything was done."""
        return 0.0

    def part_hits(self, query: str) -> dict[str, Hits]:
        """What each of this retriever's parts found in its last search for `query`, by part name,
        best first; {} for a retriever without parts. A part is a retriever inside this one whose
        own answers are worth scoring beside the whole's (a hybrid's members): the pipeline ranks
        and scores each part's hits as it does the whole retriever's (`Retrieval.parts`)."""
        return {}

    def stats(self) -> dict[str, float]:
        """What building and searching cost and produced (seconds, bytes, shares), logged as MLflow
        metrics; asked for after the searches."""
        return {}

    def attach_metadata(self, metadata: Sequence[Mapping[str, Any]]) -> None:  # noqa: B027 (optional)
        """Each chunk's document metadata, in chunk order, before `build`: a retriever whose index
        filters by itself (a vector database) stores it beside the vectors."""

    def search_within(self, queries: Sequence[str], k: int, restriction: Restriction) -> tuple[np.ndarray, np.ndarray]:
        """`search` among the chunks a filter allows (`filter=pre`); a retriever whose index
        filters on metadata itself hands it the filter's `where` as well."""
        return self.search(queries, k, allowed=restriction.chunk_ids, exact=restriction.exact)

    def close(self) -> None:  # noqa: B027 (optional: most retrievers live in the process)
        """Remove what `build` made outside the process (a vector database's collection or table);
        called when the run ends, however it ends."""


@dataclass(frozen=True)
class Hits:
    """One question's chunk hits, best first."""

    scores: np.ndarray
    ids: np.ndarray

    @classmethod
    def first(cls, scores: np.ndarray, ids: np.ndarray) -> Hits:
        """The first query's row of a `search` answer, without the -1 padding."""
        found = ids[0] >= 0
        return cls(scores[0][found], ids[0][found])

    @classmethod
    def empty(cls) -> Hits:
        return cls(np.empty(0, dtype=np.float32), np.empty(0, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, selection: slice | np.ndarray) -> Hits:
        return Hits(self.scores[selection], self.ids[selection])
