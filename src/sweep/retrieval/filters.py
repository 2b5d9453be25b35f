"""Metadata filters: which chunks a question may be answered from, and how the search obeys it.

A question's `filters` and the config-level `filter.where` are equality conditions on
document metadata (`field: value`, or `field: [values]` for any of them), all of which must
hold. `none` (`NoFilter`) ignores them; `pre` restricts the search itself (a FAISS ID selector, or an
exact scan of the allowed chunks when they are a small share of the corpus or no more than the
hits asked for, because HNSW and IVF lose results under a selective selector; a vector
database, `index=chroma` or `index=lancedb`, gets the filter as its own `where` and filters by
itself); `post` over-fetches and drops what does not match, which can leave fewer results than
asked for.
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np

from sweep.errors import InputError
from sweep.formats.corpus import SCALARS, Corpus
from sweep.formats.golden import GoldenSet, Question
from sweep.retrieval.chunking import Chunk
from sweep.retrieval.retriever import Hits, Restriction, Retriever
from sweep.retrieval.vector_index import Where
from sweep.settings import Range, checked

log = logging.getLogger(__name__)

Condition = dict[str, frozenset]  # field -> accepted values, as `_comparable` keys


def _comparable(value: Any) -> tuple[str, Any]:
    """Equality that YAML, JSON and Hydra agree on: 2026 == 2026.0, but True != 1 and "2026" != 2026."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", float(value))
    return (type(value).__name__, value)


def parse_condition(filters: Mapping[str, Any], source: str) -> Condition:
    """`{field: value | [values]}` as field -> accepted values; `source` names where it came from."""
    if not isinstance(filters, Mapping):
        raise InputError(f"{source}: filters must be a mapping of field to value, not {filters!r}")
    condition = {}
    for name, value in filters.items():
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        bad = [v for v in values if not isinstance(v, SCALARS)]
        if bad or not values:
            raise InputError(f"{source}: filter {name!r} needs a value or a list of values, not {value!r}")
        condition[str(name)] = frozenset(map(_comparable, values))
    return condition


@dataclass
class Filter(ABC):
    """Which chunks each question may be answered from, and a search that obeys it."""

    where: dict[str, Any] | None = None  # applied to every question by the filters that restrict

    def prepare(self, corpus: Corpus, chunks: Sequence[Chunk], golden: GoldenSet, k: int) -> None:
        """Check every filter against the corpus's metadata fields before anything is computed;
        `k` is how many chunk hits each search asks for."""
        self._conditions = {q.id: parse_condition(q.filters, f"{golden.source}: question {q.id!r}") for q in golden}
        for qid, condition in self._conditions.items():
            check_fields(condition, corpus, f"{golden.source}: question {qid!r}")

    @abstractmethod
    def restriction(self, question: Question) -> Restriction | None:
        """The chunks `question` may be answered from; None when nothing restricts it."""

    def search(self, retriever: Retriever, query: str, k: int, restriction: Restriction | None) -> Hits:
        """The best k chunks for `query` that obey `restriction`."""
        return Hits.first(*retriever.search([query], k))


@checked("filter")
@dataclass
class NoFilter(Filter):
    """Question filters are checked against the corpus, then ignored, and so is `where` (so
    `-m filter=none,pre 'filter.where={...}'` compares with the unfiltered baseline)."""

    def restriction(self, question: Question) -> Restriction | None:
        return None


@dataclass
class MetadataFilter(Filter):
    """Each question's filters and `where`, all of which must hold, as a `Restriction` (built once
    per distinct condition)."""

    def prepare(self, corpus: Corpus, chunks: Sequence[Chunk], golden: GoldenSet, k: int) -> None:
        self._where = parse_condition(self.where or {}, "filter.where")
        check_fields(self._where, corpus, "filter.where")
        super().prepare(corpus, chunks, golden, k)
        self._k = k
        self._documents = list(corpus)
        position = {doc.id: i for i, doc in enumerate(corpus)}
        self._chunk_document = np.array([position[c.doc_id] for c in chunks], dtype=np.int64)
        self._restrictions: dict[tuple, Restriction | None] = {}
        if self._where and not len(self._restrict(self._where).chunk_ids):
            raise InputError(
                f"filter.where: {_shown(self._where)} matches no document (values must match in type too: 2026 is not '2026')"
            )

    def restriction(self, question: Question) -> Restriction | None:
        """An empty restriction (with a warning naming the question) when its filters match no document."""
        condition = dict(self._where)
        for name, values in self._conditions[question.id].items():
            condition[name] = condition[name] & values if name in condition else values
        if not condition:
            return None
        key = tuple(sorted((name, tuple(sorted(values, key=repr))) for name, values in condition.items()))
        if key not in self._restrictions:
            restriction = self._restrict(condition)
            everything = len(restriction.chunk_ids) == len(self._chunk_document)
            self._restrictions[key] = None if everything else restriction
        restriction = self._restrictions[key]
        if restriction is not None and not len(restriction.chunk_ids):
            log.warning(
                "question %r: its filters %s match no document; it gets an empty result", question.id, _shown(condition)
            )
        return restriction

    def search(self, retriever: Retriever, query: str, k: int, restriction: Restriction | None) -> Hits:
        if restriction is None:
            return super().search(retriever, query, k, restriction)
        if not len(restriction.chunk_ids):
            return Hits.empty()
        return self._search_within(retriever, query, k, restriction)

    @abstractmethod
    def _search_within(self, retriever: Retriever, query: str, k: int, restriction: Restriction) -> Hits:
        """The best k chunks among the (non-empty) restriction's."""

    def _restrict(self, condition: Condition) -> Restriction:
        matches = np.array(
            [
                all(_comparable(doc.metadata.get(name)) in values for name, values in condition.items())
                for doc in self._documents
            ],
            dtype=bool,
        )
        where = {name: tuple(sorted((value for _, value in values), key=repr)) for name, values in condition.items()}
        return self._plan(np.flatnonzero(matches[self._chunk_document]), where)

    def _plan(self, chunk_ids: np.ndarray, where: Where) -> Restriction:
        return Restriction(chunk_ids, where=where)


@checked("filter")
@dataclass
class PreFilter(MetadataFilter):
    """Only allowed chunks are searched. They are scanned exactly when they are fewer than
    `exact_below` of all chunks, or no more than the k hits asked for (an index walk could only
    lose some of them)."""

    exact_below: Annotated[float, Range(0)] = 0.1  # share of all chunks (above 1: always scan)

    def _plan(self, chunk_ids: np.ndarray, where: Where) -> Restriction:
        share = len(chunk_ids) / len(self._chunk_document) if len(self._chunk_document) else 0.0
        return Restriction(chunk_ids, exact=share < self.exact_below or len(chunk_ids) <= self._k, where=where)

    def _search_within(self, retriever: Retriever, query: str, k: int, restriction: Restriction) -> Hits:
        return Hits.first(*retriever.search_within([query], k, restriction))


@checked("filter")
@dataclass
class PostFilter(MetadataFilter):
    """`overfetch` × k hits are fetched unrestricted, then those that do not match are dropped."""

    overfetch: Annotated[float, Range(1)] = 4.0  # hits fetched per hit kept

    def _search_within(self, retriever: Retriever, query: str, k: int, restriction: Restriction) -> Hits:
        hits = Hits.first(*retriever.search([query], math.ceil(k * self.overfetch)))
        return hits[np.isin(hits.ids, restriction.chunk_ids)][:k]


def filter_stats(searched: Sequence[tuple[Restriction, int]], n_questions: int, k: int) -> dict[str, float]:
    """From (restriction, chunk hits found) of every restricted question: how many questions a
    filter restricted; of those, how many came back short (fewer chunk hits than `k` or than the
    filter allows, whichever is smaller: what post-filtering with too little over-fetch loses, or
    an approximate index under a selector, or a lexical model when few allowed chunks share a term
    with the question), the chunk hits they got on average, how many matched nothing, and how
    many were searched by exact scan."""
    stats = {"filter/restricted_share": len(searched) / n_questions if n_questions else 0.0}
    if searched:
        short = [n_hits < min(k, len(r.chunk_ids)) for r, n_hits in searched]
        stats |= {
            "filter/short_result_rate": float(np.mean(short)),
            "filter/hits_mean": float(np.mean([n_hits for _, n_hits in searched])),
            "filter/empty_questions": float(sum(not len(r.chunk_ids) for r, _ in searched)),
            "filter/exact_share": float(np.mean([r.exact for r, _ in searched])),
        }
    return stats


def check_fields(condition: Condition, corpus: Corpus, source: str = "") -> None:
    """Refuse a condition on a field no document of `corpus` has; `source`, when given, starts the message."""
    unknown = sorted(condition.keys() - corpus.metadata_fields)
    if unknown:
        fields = ", ".join(sorted(corpus.metadata_fields)) or "none"
        prefix = f"{source}: " if source else ""
        raise InputError(f"{prefix}filters on {unknown[0]!r}, a field no document has (fields: {fields})")


def _shown(condition: Condition) -> str:
    return ", ".join(f"{name}={sorted((v for _, v in values), key=repr)}" for name, values in sorted(condition.items()))
