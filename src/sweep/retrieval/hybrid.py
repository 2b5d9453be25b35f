"""A hybrid retriever: two or more member retrievers over the same chunks, fused per question.

Composed in `conf/model/hybrid.yaml` from the model group's own options, one per member:

    defaults:
      - /model@members.minilm: minilm
      - /model@members.bm25: bm25
    _target_: sweep.retrieval.hybrid.HybridRetriever
    norm: min-max
    fusion: convex
    weight: null        # two members: the first one's share, 0 to 1 (null: equal)

Each member searches as deep as the pipeline asks the hybrid to (`chunk_depth`), under the
question's filter, so it hands the fusion exactly the hits it would return alone;
`sweep.retrieval.fusion` normalises and combines them. A member with weight 0 is still built and
searched (its own metrics are logged) but adds no candidates, and equal fused scores keep the order
the members gave them, so weight 0 and weight 1 are exactly the other member alone, ties included.
`candidates` caps each member's hits below that depth (cheaper; a warning says what it costs).
The members are the retriever's parts (`Retriever.part_hits`): what each returned in the last
search of a question stays readable, and the pipeline scores it as the member's own answer (the
run's `member/<name>/...` metrics and `tables/member_hits.json`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Annotated, Any

import numpy as np

from sweep.errors import InputError
from sweep.retrieval.fusion import FUSIONS, NORMS, WEIGHTED, fuse
from sweep.retrieval.retriever import Hits, Retriever
from sweep.retrieval.stages import reused
from sweep.settings import OneOf, Range, checked

# a cost the members report, as the whole's: how their values combine
MEMBERS_COMBINED = {"index/bytes": sum, "time/embed_s": sum, "embed/cache_hit": min, "corpus/truncated_share": max}


@checked("model")
class HybridRetriever(Retriever):
    """`members`: name -> retriever (the name prefixes its metrics); `norm`, `fusion`, `k` (RRF's
    constant): `sweep.retrieval.fusion`; `weight`: with two members, the first one's share
    (the second gets 1 − weight); `weights`: one per member, in order, instead; null for both:
    equal weights. `candidates`: chunk hits each member contributes per question (null: as many
    as the pipeline asks for, `chunk_depth`: each member's whole answer)."""

    def __init__(
        self,
        members: dict[str, Retriever],  # name -> a model option, one per member (the YAML's defaults list)
        norm: Annotated[str, OneOf(NORMS)] = "min-max",
        fusion: Annotated[str, OneOf(FUSIONS)] = "convex",
        weight: Annotated[float | None, Range(0, 1)] = None,
        weights: list[float] | None = None,
        k: Annotated[float, Range(0)] = 60.0,
        candidates: Annotated[int | None, Range(1)] = None,
    ) -> None:
        if len(members) < 2:
            raise InputError(f"model.members: a hybrid needs two or more members, not {len(members)}")
        self.norm, self.fusion, self.k, self.candidates = norm, fusion, k, candidates
        self.members = dict(members)
        self._members = {name: reused(member) for name, member in members.items()}  # each one's answers kept
        self.weights = member_weights(list(self.members), fusion, weight, weights)
        self._last: dict[str, dict[str, Hits]] = {}  # query -> each member's hits in its last search

    def build(self, texts: Sequence[str]) -> None:
        for member in self._members.values():
            member.build(texts)

    def prepare_queries(self, queries: Sequence[str]) -> None:
        for member in self._members.values():
            member.prepare_queries(queries)

    @contextmanager
    def alone(self, queries: Sequence[str]) -> Iterator[None]:
        """Every member alone: a question alone costs them all, one after the other."""
        with ExitStack() as stack:
            for member in self._members.values():
                stack.enter_context(member.alone(queries))
            yield

    def replayed_ms(self, query: str) -> float:
        return sum(member.replayed_ms(query) for member in self._members.values())

    def search(
        self, queries: Sequence[str], k: int, allowed: np.ndarray | None = None, exact: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        depth = k if self.candidates is None else self.candidates  # null: each member's whole answer at this depth
        answers = {name: m.search(queries, depth, allowed, exact) for name, m in self._members.items()}
        scores = np.full((len(queries), k), -np.inf)
        ids = np.full((len(queries), k), -1, dtype=np.int64)
        for row, query in enumerate(queries):
            lists = {name: Hits.first(s[row : row + 1], i[row : row + 1]) for name, (s, i) in answers.items()}
            self._last[query] = lists
            fused = fuse(list(lists.values()), self.fusion, self.norm, self.weights, self.k)[:k]
            scores[row, : len(fused)], ids[row, : len(fused)] = fused.scores, fused.ids
        return scores, ids

    def part_hits(self, query: str) -> dict[str, Hits]:
        return self._last.get(query, {})

    def attach_metadata(self, metadata: Sequence[Mapping[str, Any]]) -> None:
        for member in self._members.values():
            member.attach_metadata(metadata)

    def close(self) -> None:
        for member in self._members.values():
            member.close()

    def stats(self) -> dict[str, float]:
        """Each member's own, under `member/<name>/`, and the whole's costs as the leaderboard reads
        them (`MEMBERS_COMBINED`): the members' index bytes and embedding time summed, the cache hit
        only where every member's embedding hit, the largest share of truncated chunks."""
        own = {name: member.stats() for name, member in self._members.items()}  # an HNSW's recall check is costly: once
        stats = {f"member/{name}/{key}": value for name, values in own.items() for key, value in values.items()}
        for key, combine in MEMBERS_COMBINED.items():
            values = [values[key] for values in own.values() if key in values]
            if values:
                stats[key] = float(combine(values))
        return stats


def member_weights(
    names: Sequence[str], fusion: str, weight: float | None, weights: Sequence[float] | None
) -> np.ndarray | None:
    """Each member's weight from `weight` (two members) or `weights`; None: the method's default
    (1 each: RRF, DBSF, CombSUM, CombMNZ) or equal shares (convex)."""
    if weight is not None and weights is not None:
        raise InputError("model.weight and model.weights are both set: give one (weight: two members only)")
    given = "model.weight" if weight is not None else "model.weights"
    if (weight is not None or weights is not None) and fusion not in WEIGHTED:
        raise InputError(f"{given}: model.fusion={fusion} is unweighted; weights apply to {', '.join(WEIGHTED)}")
    if weight is not None:
        if len(names) != 2:
            raise InputError(
                f"model.weight={weight}: the first member's share needs two members, not {len(names)}; "
                "give model.weights=[...] (one per member)"
            )
        return np.array([weight, 1 - weight])
    if weights is not None:
        values = np.asarray(list(weights), dtype=np.float64)
        if len(values) != len(names):
            raise InputError(
                f"model.weights={list(weights)}: {len(values)} weights for {len(names)} members ({', '.join(names)})"
            )
        if not np.isfinite(values).all() or (values < 0).any() or not values.sum() > 0:
            raise InputError(f"model.weights={list(weights)}: must be numbers >= 0, not all 0")
        return values
    return np.full(len(names), 1 / len(names)) if fusion == "convex" else None
