"""Fusing several retrievers' hits for one question into one ranking: normalise, then combine.

Every method is a weighted sum over the members of a per-member term, `fused(c) = Σ_i w_i · t_i(c)`
(times the number of members that returned `c`, for `combmnz`):

- `convex`: `t_i` = the member's normalised score (`norm`); weights as given (equal by default).
- `combsum`, `combmnz` (Fox & Shaw): the normalised scores, unweighted; `combmnz` multiplies by the
  number of members that scored the chunk (all of them under `borda`, which scores every candidate).
- `rrf` (Cormack et al.): `t_i = 1 / (k + rank_i(c))`, rank from 1; ranks only, `norm` does not apply.
- `dbsf` (Qdrant's distribution-based score fusion): `t_i = (s − (μ − 3σ)) / 6σ`, μ and σ the
  member's mean and sample standard deviation over its list (0.5 when σ = 0 or the list has one
  hit); `norm` does not apply.

Normalisations, per member and question, over the scores it returned (ranx's formulas, so
`ranx.fuse` on the same runs gives the same fused scores; `ε` = 1e-9 guards a zero denominator):

- `none`: `s`;  `min-max`: `(s − min) / max(max − min, ε)`;  `max`: `s / max(max, ε)`;
- `sum`: `(s − min) / max(Σs − n·min, ε)`;  `z`: `(s − μ) / max(σ, ε)`, σ the population deviation;
- `rank`: `1 − i/n` for the hit at 0-based position `i` of `n`;
- `borda`: `1 − i/N`, `N` the number of distinct chunks any member returned.

The floor rule: a chunk a member did not return contributes 0 to that member's term (ranx's
rule), which is the member's floor under `min-max`, `sum` (its lowest hit maps to 0), `rank`,
`max` and `none` for non-negative scores, and RRF's limit; under `z` it is the member's mean.
`borda` alone gives missing chunks a value of its own, `0.5 − (n − 1) / 2N`, as Borda counting does.
Equal fused scores rank by the best rank a member with a non-zero weight gave the chunk, then by
chunk id, ascending: with one such member, the fused ranking is that member's own, ties included.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sweep.retrieval.retriever import Hits

NORMS = ("none", "min-max", "max", "sum", "z", "rank", "borda")
FUSIONS = ("convex", "combsum", "combmnz", "rrf", "dbsf")
WEIGHTED = ("convex", "rrf", "dbsf")  # the methods that take per-member weights
EPSILON = 1e-9


def normalised(scores: np.ndarray, norm: str, candidates: int) -> tuple[np.ndarray, float]:
    """One member's scores under `norm`, best first, and the value a chunk it did not return gets;
    `candidates`: how many distinct chunks all members returned (`borda` counts positions in it)."""
    s = np.asarray(scores, dtype=np.float64)
    n = len(s)
    if norm == "none" or n == 0:
        return s, 0.0
    if norm == "min-max":
        return (s - s.min()) / max(s.max() - s.min(), EPSILON), 0.0
    if norm == "max":
        return s / max(s.max(), EPSILON), 0.0
    if norm == "sum":
        return (s - s.min()) / max(s.sum() - n * s.min(), EPSILON), 0.0
    if norm == "z":
        return (s - s.mean()) / max(s.std(), EPSILON), 0.0
    if norm == "rank":
        return 1 - np.arange(n) / n, 0.0
    if norm == "borda":
        return 1 - np.arange(n) / candidates, 0.5 - (n - 1) / (2 * candidates)
    raise ValueError(f"unknown normalisation {norm!r} (one of {', '.join(NORMS)})")


def distribution_normalised(scores: np.ndarray) -> np.ndarray:
    """Qdrant's DBSF normalisation: μ ± 3σ (sample deviation) mapped to 0 and 1; 0.5 when σ is 0."""
    s = np.asarray(scores, dtype=np.float64)
    if len(s) < 2:
        return np.full(len(s), 0.5)
    spread = 6 * s.std(ddof=1)
    if spread == 0:
        return np.full(len(s), 0.5)
    return (s - (s.mean() - spread / 2)) / spread


def fuse(
    lists: Sequence[Hits],
    method: str = "convex",
    norm: str = "min-max",
    weights: Sequence[float] | None = None,
    k: float = 60.0,
) -> Hits:
    """One ranking from the members' `lists` (each best first): every chunk that a member with a
    non-zero weight returned, by `fused` score (module docstring), best first. `weights`: one per
    member (default 1 each; only for `WEIGHTED` methods)."""
    weights = np.ones(len(lists)) if weights is None else np.asarray(weights, dtype=np.float64)
    if len(weights) != len(lists):
        raise ValueError(f"{len(weights)} weights for {len(lists)} lists")
    taking_part = [hits.ids for hits, weight in zip(lists, weights) if weight != 0]
    if not taking_part:
        return Hits.empty()
    ids = np.unique(np.concatenate(taking_part)).astype(np.int64)
    terms = np.zeros((len(lists), len(ids)))
    listed = np.zeros((len(lists), len(ids)), dtype=bool)
    best_rank = np.full(len(ids), np.iinfo(np.int64).max)  # among the members with a non-zero weight
    for member, hits in enumerate(lists):
        inside = np.isin(hits.ids, ids)  # a zero-weight member's other chunks are not candidates
        where = np.searchsorted(ids, hits.ids[inside])
        values, missing = _terms(hits.scores, method, norm, len(ids), k)
        terms[member] = missing
        terms[member, where] = values[inside]
        listed[member, where] = True
        if weights[member] != 0:
            best_rank[where] = np.minimum(best_rank[where], np.flatnonzero(inside))
    fused = weights @ terms
    if method == "combmnz":  # under borda every member scores every candidate (ranx's count too)
        fused = fused * (len(lists) if norm == "borda" else listed.sum(axis=0))
    order = np.lexsort((ids, best_rank, -fused))
    return Hits(fused[order], ids[order])


def _terms(scores: np.ndarray, method: str, norm: str, candidates: int, k: float) -> tuple[np.ndarray, float]:
    """A member's term for each chunk it returned, and for one it did not."""
    if method == "rrf":
        return 1 / (k + np.arange(1, len(scores) + 1)), 0.0
    if method == "dbsf":
        return distribution_normalised(scores), 0.0
    if method in ("convex", "combsum", "combmnz"):
        return normalised(scores, norm, candidates)
    raise ValueError(f"unknown fusion {method!r} (one of {', '.join(FUSIONS)})")
