"""Chroma and LanceDB as the index, in process (embedded Chroma, LanceDB in a folder): they find
what an exact search finds, filter by themselves on the chunks' metadata, measure their recall
against exact as FAISS does, and remove what they made; a third engine, scikit-learn's
NearestNeighbors (defined here, shown in docs/indexes.md), plugs in by `index._target_` alone.
Servers, the command line, failures and signals: tests/experiment/test_vector_database_runs.py."""

from __future__ import annotations

import dataclasses
import gc
import pickle
import socket
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from helpers.commands import compose_config
from sweep.errors import InputError
from sweep.experiment.trial import build_pipeline, check_settings
from sweep.formats.golden import GoldenSet
from sweep.retrieval.cache import EmbeddingCache
from sweep.retrieval.chroma_index import ChromaIndex
from sweep.retrieval.chunking import TokenChunker
from sweep.retrieval.dense import DenseRetriever
from sweep.retrieval.embed import SentenceTransformerEmbedder
from sweep.retrieval.filters import PreFilter
from sweep.retrieval.index import FlatIndex
from sweep.retrieval.lancedb_index import LanceDBIndex
from sweep.retrieval.pipeline import Pipeline
from sweep.retrieval.vector_index import VectorIndex

N, DIM = 600, 32


# --8<-- [start:neighbors]
@dataclass
class NeighborsIndex(VectorIndex):
    """scikit-learn's NearestNeighbors as the index: exact, in memory, no metadata of its own."""

    algorithm: str = "ball_tree"  # ball_tree, kd_tree or brute
    leaf_size: int = 30

    approximate = False  # the trees are exact: no recall against exact to measure

    def _build(self, vectors, metadata):
        from sklearn.neighbors import NearestNeighbors

        self.tree = NearestNeighbors(algorithm=self.algorithm, leaf_size=self.leaf_size).fit(vectors)

    def _search(self, queries, k, allowed, exact, where):
        if allowed is not None:  # it cannot filter: score the allowed chunks (self.vectors: the base keeps them)
            scores = queries @ self.vectors[allowed].T
            order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
            return np.take_along_axis(scores, order, axis=1), allowed[order]
        distances, ids = self.tree.kneighbors(queries, k)
        return 1 - distances**2 / 2, ids  # unit vectors: |a - b|² = 2 - 2 a·b

    @property
    def nbytes(self):
        return len(pickle.dumps(self.tree))


# --8<-- [end:neighbors]


def chroma(**settings) -> ChromaIndex:
    return ChromaIndex(**{"ef_search": 400, "ef_construction": 200, "max_neighbors": 32} | settings)


def lance(**settings) -> LanceDBIndex:
    return LanceDBIndex(**{"index_type": "IVF_FLAT", "num_partitions": 4, "nprobes": 4} | settings)


# importing lancedb takes some 4 s (its REST client's generated models): its tests are `slow`
LANCE_IS_SLOW = pytest.mark.slow
ENGINES = {"chroma": chroma, "lancedb": lance}
ENGINE_PARAMS = ["chroma", pytest.param("lancedb", marks=LANCE_IS_SLOW)]


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, list[dict], np.ndarray]:
    """Unit vectors, their documents' metadata (a missing field, ints, booleans, a field whose
    values mix strings and numbers) and near-duplicate queries of the first 20."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(N, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    metadata = [
        {"year": 2025 + i % 2, "current": i % 5 != 0, "code": "7" if i % 4 == 0 else 7}
        | ({"department": ["HR", "IT", "Legal"][i % 3]} if i % 7 else {})
        for i in range(N)
    ]
    queries = vectors[:20] + 0.05 * rng.normal(size=(20, DIM)).astype(np.float32)
    return vectors, metadata, queries / np.linalg.norm(queries, axis=1, keepdims=True)


def allowed_by(metadata: list[dict], **condition) -> np.ndarray:
    return np.array([i for i, m in enumerate(metadata) if all(m.get(k) in v for k, v in condition.items())])


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int, allowed: np.ndarray | None = None) -> np.ndarray:
    pool = np.arange(len(vectors)) if allowed is None else allowed
    return pool[np.argsort(-(queries @ vectors[pool].T), axis=1, kind="stable")[:, :k]]


@pytest.mark.parametrize("engine", ENGINE_PARAMS)
def test_an_engine_finds_what_exact_search_finds_and_filters_by_itself(engine, data):
    vectors, metadata, queries = data
    index = ENGINES[engine]()
    index.build(vectors, metadata)
    try:
        scores, ids = index.search(queries, 10)
        np.testing.assert_array_equal(ids, exact_top(vectors, queries, 10))
        np.testing.assert_allclose(scores, np.einsum("qd,qkd->qk", queries, vectors[ids]), atol=1e-4)
        it_2026 = allowed_by(metadata, department=["IT"], year=[2026])
        where = {"department": ("IT",), "year": (2026.0,)}
        _, found = index.search(queries, 10, it_2026, where=where)
        np.testing.assert_array_equal(found, exact_top(vectors, queries, 10, it_2026))
        np.testing.assert_array_equal(index.search(queries, 10, it_2026)[1], found)  # by ids alone: the same
        # the engine follows `where`, not the ids beside it: it filters, not us
        hr = allowed_by(metadata, department=["HR"])
        _, by_where = index.search(queries[:3], 10, it_2026, where={"department": ("HR",)})
        np.testing.assert_array_equal(by_where, exact_top(vectors, queries[:3], 10, hr))
        for condition, kept in [
            ({"code": ("7", 7.0)}, allowed_by(metadata, code=["7", 7])),  # one field, two types
            ({"code": (7.0,)}, allowed_by(metadata, code=[7])),
            ({"current": (False,)}, allowed_by(metadata, current=[False])),
            ({"department": ("Nowhere",)}, np.array([], dtype=np.int64)),
        ]:
            _, hits = index.search(queries[:3], 10, kept, where=condition)
            np.testing.assert_array_equal(hits, exact_top(vectors, queries[:3], 10, kept) if len(kept) else -1)
    finally:
        index.close()


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: ChromaIndex(ef_search=1, max_neighbors=2, ef_construction=2), id="chroma"),
        pytest.param(lambda: lance(nprobes=1), id="lancedb", marks=LANCE_IS_SLOW),
    ],
)
def test_recall_against_exact_is_what_brute_force_says_filtered_or_not(make, data):
    vectors, metadata, _ = data
    hard = np.random.default_rng(5).normal(size=(40, DIM)).astype(np.float32)  # far from every vector
    hard /= np.linalg.norm(hard, axis=1, keepdims=True)
    index = make()
    index.build(vectors, metadata)
    try:
        legal = allowed_by(metadata, department=["Legal"])
        for query in hard:
            index.search(query[None, :], 400, legal, where={"department": ("Legal",)})
        stats = index.stats(hard)
        found = index.search(hard, 10)[1]
        filtered = index.search(hard, 10, legal, where={"department": ("Legal",)})[1]
    finally:
        index.close()

    def share(found: np.ndarray, exact: np.ndarray) -> float:
        return float(np.mean([len(set(f) & set(e)) / 10 for f, e in zip(found.tolist(), exact.tolist())]))

    assert stats["index/recall_vs_exact_at_10"] == pytest.approx(share(found, exact_top(vectors, hard, 10)))
    filtered_recall = share(filtered, exact_top(vectors, hard, 10, legal))
    assert stats["index/recall_vs_exact_at_10_filtered"] == pytest.approx(filtered_recall)
    assert stats["index/recall_vs_exact_at_10"] < 0.9  # a 2-link graph searched with ef 10, one list of 4
    assert stats["index/bytes"] > vectors.nbytes / 2 and stats["index/build_s"] > 0
    assert 0 < stats["index/search_ms_p50"] <= stats["index/search_ms_p95"]


@LANCE_IS_SLOW
def test_lancedb_filtering_after_the_search_returns_fewer_hits(data):
    vectors, metadata, queries = data
    where = {"department": ("IT",)}
    counts = {}
    for prefilter in (True, False):
        index = lance(prefilter=prefilter)
        index.build(vectors, metadata)
        counts[prefilter] = index.search(queries, 10, allowed_by(metadata, department=["IT"]), where=where)[1] >= 0
        index.close()
    assert counts[True].all() and counts[False].sum(axis=1).mean() < 6  # IT is 2 in 7 of the chunks


def lance_tables(folder: Path) -> int:
    import lancedb

    return len(lancedb.connect(folder).list_tables().tables)


def chroma_collections(path: Path) -> list[str]:
    import chromadb  # here, not at the top: the engines take seconds to import, and every worker collects this file
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    try:
        return [c.name for c in client.list_collections()]
    finally:
        client.close()


@LANCE_IS_SLOW
def test_what_an_engine_made_is_removed_unless_kept(data, tmp_path):
    vectors, metadata, _ = data
    temporary = ChromaIndex()
    temporary.build(vectors[:50], metadata[:50])
    folder = Path(temporary._folder)
    assert chroma_collections(folder) and folder.name.startswith("golden-sweep-chroma-")
    temporary.close()
    temporary.close()  # once is enough; twice is harmless
    assert not folder.exists()
    forgotten = LanceDBIndex(index_type="IVF_FLAT")
    forgotten.build(vectors[:50], metadata[:50])
    folder = forgotten._table_folder.parent
    del forgotten
    gc.collect()  # an index nobody closed is removed when it is collected (or when the interpreter exits)
    assert not folder.exists()

    for keep in (False, True):
        kept = ChromaIndex(path=str(tmp_path / "chroma"), keep=keep)
        kept.build(vectors[:50], metadata[:50])
        kept.close()
        table = LanceDBIndex(index_type="IVF_FLAT", uri=str(tmp_path / "lance"), keep=keep)
        table.build(vectors[:50], metadata[:50])
        table.close()
    assert [name.startswith("golden-sweep-") for name in chroma_collections(tmp_path / "chroma")] == [True]
    assert lance_tables(tmp_path / "lance") == 1
    with pytest.raises(InputError, match=r"index.keep=true: a temporary folder .* give index.path="):
        ChromaIndex(keep=True)
    with pytest.raises(InputError, match=r"index.keep=true: a temporary folder .* give index.uri="):
        LanceDBIndex(keep=True)


@LANCE_IS_SLOW
def test_settings_an_engine_cannot_use_are_one_line_before_anything_is_made(data, tmp_path):
    vectors, metadata, _ = data
    with pytest.raises(InputError, match=r"^index.num_sub_vectors=7: must divide the vectors' 32 dimensions$"):
        LanceDBIndex(index_type="IVF_PQ", num_sub_vectors=7, uri=str(tmp_path)).build(vectors, metadata)
    assert lance_tables(tmp_path) == 0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free: nothing listens there
    with pytest.raises(InputError, match=rf"index.port={port}: no Chroma server answers there .* chroma run --path"):
        ChromaIndex(mode="server", port=port).build(vectors, metadata)
    with pytest.raises(InputError, match=r"a metadata field named '_vector' clashes"):
        LanceDBIndex().build(vectors[:5], [{"_vector": 1}] * 5)


def test_a_third_engine_plugs_in_by_its_target_alone(data):
    cfg = compose_config(f"index._target_={__name__}.NeighborsIndex", "+index.algorithm=brute")
    check_settings(cfg)
    index = build_pipeline(cfg).retriever.index
    assert isinstance(index, NeighborsIndex) and index.algorithm == "brute"
    vectors, metadata, queries = data
    index.build(vectors, metadata)
    np.testing.assert_array_equal(index.search(queries, 10)[1], exact_top(vectors, queries, 10))
    legal = allowed_by(metadata, department=["Legal"])
    np.testing.assert_array_equal(index.search(queries, 5, legal)[1], exact_top(vectors, queries, 5, legal))
    stats = index.stats(queries)
    assert stats["index/bytes"] > vectors.nbytes and "index/recall_vs_exact_at_10" not in stats  # exact


FILTERS = [{}, {"department": "Finance"}, {"department": "IT"}, {"doc_type": ["policy", "faq"]}]


@pytest.fixture(scope="module")
def filtered_pipeline_runs(small_kb, tmp_path_factory):
    """The small knowledge base and 12 of its questions, given FILTERS in turn, run with
    filter=pre over a flat index and over each engine (MiniLM, vectors cached once)."""
    corpus, golden = small_kb
    questions = tuple(
        dataclasses.replace(q, filters=FILTERS[i % len(FILTERS)]) for i, q in enumerate(golden.questions[:12])
    )
    golden = GoldenSet(questions, source="small-kb")
    embedder, cache = SentenceTransformerEmbedder(), EmbeddingCache(tmp_path_factory.mktemp("cache"))
    runs = {}
    for name, index in [("flat", FlatIndex()), ("chroma", chroma()), ("lancedb", lance(refine_factor=4))]:
        retriever = DenseRetriever(embedder, index, cache)
        pipeline = Pipeline(TokenChunker(200), retriever, PreFilter(), latency_sample=1)  # no latency asserted
        runs[name] = pipeline.retrieve(corpus, golden)
        retriever.close()
    return golden, runs


@pytest.mark.slow  # the real model embeds the chunks
@pytest.mark.usefixtures("torch_on_one_thread")  # MiniLM in process: see conftest
@pytest.mark.parametrize("engine", ENGINES)
def test_a_pipeline_on_an_engine_ranks_as_the_flat_index_does(filtered_pipeline_runs, engine):
    golden, runs = filtered_pipeline_runs
    flat, run = runs["flat"].results.rankings(), runs[engine].results.rankings()
    assert run.keys() == flat.keys() == {q.id for q in golden}
    for qid, ranking in flat.items():
        assert [doc for doc, _ in run[qid]] == [doc for doc, _ in ranking], qid
        np.testing.assert_allclose([s for _, s in run[qid]], [s for _, s in ranking], atol=1e-5)
    flat, run = runs["flat"], runs[engine]
    assert run.stats["index/recall_vs_exact_at_10"] == 1.0 and run.stats["index/recall_vs_exact_at_10_filtered"] == 1.0
    assert run.stats["filter/hits_mean"] == flat.stats["filter/hits_mean"] > 0
    assert run.stats["filter/short_result_rate"] == 0.0
