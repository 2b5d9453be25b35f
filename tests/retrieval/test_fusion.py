"""Fusion kernels against ranx's `fuse` on the same member runs, every method and normalisation."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import numpy as np
import pytest

from sweep.retrieval.fusion import FUSIONS, NORMS, fuse
from sweep.retrieval.retriever import Hits

RANX_NORM = {
    "none": None,
    "min-max": "min-max",
    "max": "max",
    "sum": "sum",
    "z": "zmuv",
    "rank": "rank",
    "borda": "borda",
}
QUESTIONS = 40
SCORE_FUSIONS = {"convex": "wsum", "combsum": "sum", "combmnz": "mnz"}  # ours: ranx's name
MEMBERS = [2, 3]
RRF_WEIGHTS = [0.3, 1.2, 0.5]
DBSF_WEIGHTS = [0.7, 0.2, 1.0]


def member_lists(seed: int, members: int) -> list[list[Hits]]:
    """Per question, each member's hits: 1 to 40 of 60 chunks, distinct scores best first, some
    negative (as cosines can be), lists overlapping in part."""
    rng = np.random.default_rng(seed)
    questions = []
    for _ in range(QUESTIONS):
        lists = []
        for _ in range(members):
            n = int(rng.integers(1, 41))
            ids = rng.choice(60, size=n, replace=False).astype(np.int64)
            scores = np.sort(rng.normal(rng.uniform(-1, 10), rng.uniform(0.1, 5), size=n))[::-1]
            lists.append(Hits(scores, ids))
        questions.append(lists)
    return questions


def member_runs(questions: list[list[Hits]], term=None) -> list[dict]:
    """Each member's run as ranx.Run takes it (scores replaced by `term(hits)` when given)."""
    runs = []
    for member in range(len(questions[0])):
        run = {}
        for q, lists in enumerate(questions):
            hits = lists[member]
            scores = hits.scores if term is None else term(hits)
            run[f"q{q}"] = {f"c{i}": float(s) for i, s in zip(hits.ids.tolist(), scores)}
        runs.append(run)
    return runs


def qdrant_dbsf(hits: Hits) -> list[float]:
    """Qdrant's distribution normalisation, written out: μ ± 3σ (sample) as 0 and 1."""
    scores = hits.scores.tolist()
    if len(scores) < 2 or statistics.stdev(scores) == 0:
        return [0.5] * len(scores)
    low, high = (
        statistics.mean(scores) - 3 * statistics.stdev(scores),
        statistics.mean(scores) + 3 * statistics.stdev(scores),
    )
    return [(s - low) / (high - low) for s in scores]


def score_fusion_inputs(method: str, norm: str, members: int) -> tuple[list[list[Hits]], np.ndarray | None]:
    questions = member_lists(seed=members * 100 + NORMS.index(norm), members=members)
    weights = np.random.default_rng(7).uniform(0.1, 1, size=members) if method == "convex" else None
    return questions, weights


def ranx_requests() -> dict[str, dict]:
    """Every `ranx.fuse` the tests below compare with, by name: its member runs and arguments."""
    requests = {}
    for method, ranx_method in SCORE_FUSIONS.items():
        for norm in NORMS:
            for members in MEMBERS:
                questions, weights = score_fusion_inputs(method, norm, members)
                params = {"weights": weights.tolist()} if weights is not None else {}
                requests[f"{method}-{norm}-{members}"] = dict(
                    runs=member_runs(questions), norm=RANX_NORM[norm], method=ranx_method, params=params
                )
    for members in MEMBERS:
        questions = member_lists(seed=members, members=members)
        requests[f"rrf-{members}"] = dict(runs=member_runs(questions), norm=None, method="rrf", params={"k": 20})
        reciprocal = member_runs(questions, term=lambda hits: 1 / (60 + np.arange(1, len(hits) + 1)))
        weights = {"weights": RRF_WEIGHTS[:members]}
        requests[f"weighted-rrf-{members}"] = dict(runs=reciprocal, norm=None, method="wsum", params=weights)
        dbsf = member_runs(member_lists(seed=10 + members, members=members), term=qdrant_dbsf)
        weights = {"weights": DBSF_WEIGHTS[:members]}
        requests[f"dbsf-{members}"] = dict(runs=dbsf, norm=None, method="wsum", params=weights)
    return requests


RANX_FUSE = """
import json, sys
import ranx
requests = json.load(sys.stdin)
fused = {name: ranx.fuse([ranx.Run(run) for run in request.pop("runs")], **request).to_dict()
         for name, request in requests.items()}
json.dump(fused, sys.stdout)
"""


@pytest.fixture(scope="module")
def ranx_fused() -> dict[str, dict]:
    """ranx's fusion of every request, by name, from one process of its own in which numba compiles
    nothing (NUMBA_DISABLE_JIT=1): ranx's kernels run as the Python they are written in, with the
    same float64 arithmetic, where compiling them took about two minutes on a fresh machine."""
    done = subprocess.run(
        [sys.executable, "-c", RANX_FUSE], input=json.dumps(ranx_requests()), capture_output=True, text=True,
        env=os.environ | {"NUMBA_DISABLE_JIT": "1"}, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def assert_same(questions, ours, expected: dict) -> None:
    for q, lists in enumerate(questions):
        fused = ours(lists)
        got = {f"c{i}": s for i, s in zip(fused.ids.tolist(), fused.scores.tolist())}
        want = expected.get(f"q{q}", {})
        assert got.keys() == want.keys(), q
        np.testing.assert_allclose([got[c] for c in want], list(want.values()), rtol=0, atol=1e-9)
        assert np.all(np.diff(fused.scores) <= 0)  # best first


@pytest.mark.slow  # ranx's process imports numba: about 5 s
@pytest.mark.parametrize("members", MEMBERS)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("method", SCORE_FUSIONS)
def test_score_fusions_equal_ranx(method, norm, members, ranx_fused):
    questions, weights = score_fusion_inputs(method, norm, members)
    assert_same(questions, lambda lists: fuse(lists, method, norm, weights), ranx_fused[f"{method}-{norm}-{members}"])


@pytest.mark.slow
@pytest.mark.parametrize("members", MEMBERS)
def test_rrf_equals_ranx_and_its_weighted_form_a_weighted_sum_of_reciprocal_ranks(members, ranx_fused):
    questions = member_lists(seed=members, members=members)
    assert_same(questions, lambda lists: fuse(lists, "rrf", k=20), ranx_fused[f"rrf-{members}"])
    weights = RRF_WEIGHTS[:members]
    assert_same(questions, lambda lists: fuse(lists, "rrf", weights=weights), ranx_fused[f"weighted-rrf-{members}"])


@pytest.mark.slow
@pytest.mark.parametrize("members", MEMBERS)
def test_dbsf_is_qdrants_normalisation_summed_as_ranx_sums(members, ranx_fused):
    questions = member_lists(seed=10 + members, members=members)
    weights = DBSF_WEIGHTS[:members]
    assert_same(questions, lambda lists: fuse(lists, "dbsf", weights=weights), ranx_fused[f"dbsf-{members}"])


def test_every_offered_method_and_norm_is_covered_above():
    assert set(FUSIONS) == {"convex", "combsum", "combmnz", "rrf", "dbsf"}
    assert set(NORMS) == set(RANX_NORM)


def test_reciprocal_ranks_sum_and_ties_go_to_the_lower_id():
    fused = fuse([Hits(np.zeros(3), np.array([1, 2, 3])), Hits(np.zeros(2), np.array([3, 1]))], "rrf", k=60)
    assert fused.ids.tolist() == [1, 3, 2]
    np.testing.assert_allclose(fused.scores, [1 / 61 + 1 / 62, 1 / 63 + 1 / 61, 1 / 62])
    tied = fuse([Hits(np.zeros(2), np.array([5, 4])), Hits(np.zeros(2), np.array([4, 5]))], "rrf")
    assert tied.ids.tolist() == [4, 5]


def test_a_zero_weight_member_adds_no_candidates_so_the_other_member_stands_alone():
    dense = Hits(np.array([0.9, 0.8, 0.1]), np.array([7, 3, 9]))
    lexical = Hits(np.array([12.0, 5.0, 4.0, 1.0]), np.array([3, 1, 2, 8]))
    for method, norm in [("convex", "min-max"), ("convex", "z"), ("rrf", "none"), ("dbsf", "none")]:
        alone = fuse([dense, lexical], method, norm, weights=[0.0, 1.0])
        assert alone.ids.tolist() == [3, 1, 2, 8], method
    assert fuse([dense, lexical], "convex", weights=[0.0, 0.0]).ids.tolist() == []


def test_missing_chunks_get_the_floor_of_the_norm():
    dense = Hits(np.array([0.9, 0.5]), np.array([1, 2]))
    lexical = Hits(np.array([8.0, 2.0]), np.array([2, 3]))
    fused = fuse([dense, lexical], "convex", "min-max", weights=[0.5, 0.5])
    # min-max: each list's lowest maps to 0, as does a chunk the list lacks
    assert dict(zip(fused.ids.tolist(), fused.scores.tolist())) == {2: 0.5, 1: 0.5, 3: 0.0}
    assert fused.ids.tolist() == [1, 2, 3]  # a tie goes to the lower id
    borda = fuse([dense, lexical], "combsum", "borda")
    # three candidates: listed at i scores 1 - i/3; missing from a 2-long list, 0.5 - 1/6
    np.testing.assert_allclose(dict(zip(borda.ids.tolist(), borda.scores.tolist()))[1], 1 + (0.5 - 1 / 6))


def test_empty_lists_fuse_to_nothing_and_one_empty_member_leaves_the_other():
    empty = Hits.empty()
    assert len(fuse([empty, empty], "convex")) == 0
    one = Hits(np.array([3.0, 1.0]), np.array([4, 2]))
    assert fuse([empty, one], "convex", "z").ids.tolist() == [4, 2]
