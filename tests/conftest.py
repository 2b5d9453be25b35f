from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from sweep.golden import GoldenSet, Question
from sweep.runs import Run


def golden_of(relevant: Mapping[str, Mapping[str, int]], types: Mapping[str, str] | None = None) -> GoldenSet:
    """A golden set straight from {qid: {doc: grade}}."""
    types = types or {}
    return GoldenSet(
        tuple(Question(qid, f"question {qid}", dict(rel), type=types.get(qid, "untyped")) for qid, rel in relevant.items())
    )


def ranked(rankings: Mapping[str, Sequence[str]]) -> Run:
    """A pipeline run from {qid: [doc, ...]} in rank order, scores descending."""
    return Run.from_ranked({q: [(d, float(len(docs) - i)) for i, d in enumerate(docs)] for q, docs in rankings.items()})


@pytest.fixture
def seed_example() -> tuple[GoldenSet, Run]:
    """DESIGN.md's worked example."""
    golden = golden_of({"vacation days": {"d1": 1}, "hotel limit": {"d6": 1}, "stolen laptop": {"d10": 1}})
    run = ranked({"vacation days": ["d2", "d1", "d9"], "hotel limit": ["d6", "d5", "d7"], "stolen laptop": ["d3", "d4", "d8"]})
    return golden, run
