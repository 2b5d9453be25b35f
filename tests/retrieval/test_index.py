"""Real FAISS indexes: exact flat search, HNSW and IVF recall and reproducibility, nlist checks."""

from __future__ import annotations

import numpy as np
import pytest

from sweep.errors import InputError
from sweep.retrieval.index import FlatIndex, HNSWIndex, IVFIndex


@pytest.fixture(scope="module")
def vectors():
    rng = np.random.default_rng(0)
    data = rng.normal(size=(600, 32)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    queries = data[:20] + 0.05 * rng.normal(size=(20, 32)).astype(np.float32)
    return data, queries


def test_flat_is_exact_inner_product(vectors):
    data, queries = vectors
    index = FlatIndex()
    index.build(data)
    scores, ids = index.search(queries, 5)
    expected = np.argsort(-(queries @ data.T), axis=1, kind="stable")[:, :5]
    np.testing.assert_array_equal(ids, expected)
    np.testing.assert_allclose(scores[:, 0], (queries * data[ids[:, 0]]).sum(1), rtol=1e-5)
    assert index.nbytes >= data.nbytes


@pytest.mark.parametrize("make", [lambda: HNSWIndex(M=16, ef_search=64), lambda: IVFIndex(nlist=16, nprobe=16)])
def test_approximate_indexes_find_the_near_duplicates_and_are_reproducible(vectors, make):
    data, queries = vectors
    first, second = make(), make()
    first.build(data)
    second.build(data)
    _, ids = first.search(queries, 10)
    assert (ids[:, 0] == np.arange(20)).all()
    np.testing.assert_array_equal(ids, second.search(queries, 10)[1])


def test_ivf_nlist_larger_than_the_corpus_is_a_clear_error(vectors):
    with pytest.raises(InputError, match=r"index.nlist=1000 is larger than the number of chunks \(600\)"):
        IVFIndex(nlist=1000).build(vectors[0])


def test_k_larger_than_the_index_returns_what_there_is(vectors):
    index = FlatIndex()
    index.build(vectors[0][:3])
    scores, ids = index.search(vectors[1][:1], 10)
    assert ids.shape == (1, 3) and sorted(ids[0]) == [0, 1, 2]


def brute_force_recall(index, queries: np.ndarray, data: np.ndarray, k: int) -> float:
    """The share of each query's exact top-k chunk ids (a plain sort, no FAISS) in the index's top k."""
    exact = np.argsort(-(queries @ data.T), axis=1, kind="stable")[:, :k]
    _, found = index.search(queries, k)
    return float(np.mean([len(set(f) & set(e)) / k for f, e in zip(found.tolist(), exact.tolist())]))


@pytest.mark.parametrize(
    "make",
    [
        FlatIndex,
        lambda: IVFIndex(nlist=16, nprobe=16),
        lambda: IVFIndex(nlist=32, nprobe=1),
        lambda: HNSWIndex(M=2, ef_search=1),
    ],
)
def test_recall_vs_exact_is_the_share_of_the_exact_top_k_the_index_returns(vectors, make):
    data, _ = vectors
    queries = np.random.default_rng(5).normal(size=(50, 32)).astype(np.float32)  # far from any vector: hard
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    index = make()
    index.build(data)
    recall = index.recall_vs_exact(queries, k=10)
    assert recall == pytest.approx(brute_force_recall(index, queries, data, 10))
    if isinstance(index, FlatIndex) or getattr(index, "nprobe", 0) == 16:  # searches everything: exact
        assert recall == 1.0
    else:
        assert recall < 0.9  # one list of 32, or a 2-link graph searched with ef 1, misses neighbours
