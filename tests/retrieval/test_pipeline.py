"""One real retrieval run on a slice of the bundled knowledge base: MiniLM, FAISS, BM25, metrics;
a retriever's parts answered beside it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from sweep.evaluation import score
from sweep.retrieval.cache import EmbeddingCache
from sweep.retrieval.chunking import Chunk, TokenChunker
from sweep.retrieval.dense import DenseRetriever
from sweep.retrieval.embed import SentenceTransformerEmbedder
from sweep.retrieval.index import FlatIndex, HNSWIndex
from sweep.retrieval.lexical import BM25Retriever
from sweep.retrieval.pipeline import (
    LATENCY_SAMPLE,
    Pipeline,
    TieOrder,
    latency_sample,
    one_torch_thread,
)
from sweep.retrieval.retriever import Hits


@pytest.fixture(scope="module")
def embedder():
    return SentenceTransformerEmbedder()


def test_best_chunk_stands_for_its_document():
    chunks = [Chunk("a", 0, 0, 1, "x", 1), Chunk("b", 0, 0, 1, "y", 1), Chunk("a", 1, 1, 2, "z", 1)]
    hits = Hits.first(np.array([[0.9, 0.8, 0.7, 0.0]]), np.array([[2, 1, 0, -1]]))  # -1: FAISS found no more
    order = TieOrder.of(chunks)
    assert order.documents(hits, depth=10) == [("a", 0.9), ("b", 0.8)]
    assert order.documents(hits, depth=1) == [("a", 0.9)]


def test_the_latency_sample_is_seeded_sorted_and_all_questions_when_few():
    drawn = latency_sample(1000, 200)
    assert len(set(drawn.tolist())) == 200 and (np.diff(drawn) > 0).all() and drawn.max() < 1000
    np.testing.assert_array_equal(drawn, latency_sample(1000, 200))  # the same golden set, the same questions
    assert latency_sample(150, 200).tolist() == list(range(150))


@pytest.mark.slow  # imports torch: 3 s
def test_questions_alone_are_timed_on_one_torch_thread():
    import torch  # here, not at the top: every worker collects this file

    before = torch.get_num_threads()
    torch.set_num_threads(2)  # more than one, whatever the machine (or a fixture) set: the restore shows
    try:
        with one_torch_thread():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow  # a process of its own, where torch is not imported
def test_a_process_without_torch_times_its_questions_without_importing_it():
    code = "import sys; from sweep.retrieval.pipeline import one_torch_thread\nwith one_torch_thread(): pass\nprint('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


@pytest.mark.slow
@pytest.mark.usefixtures("torch_on_one_thread")  # MiniLM in process: see conftest
def test_dense_run_finds_answers_embeds_once_and_reports_its_costs(small_kb, embedder, tmp_path):
    corpus, golden = small_kb
    cache = EmbeddingCache(tmp_path / "cache")
    chunker = TokenChunker(256, overlap=32)
    first = Pipeline(chunker, DenseRetriever(embedder, FlatIndex(), cache)).retrieve(corpus, golden)
    evaluation = score(golden, first.results, ["recall_at_5", "ndcg_at_10", "mrr"])
    assert evaluation.mean["recall_at_5"] > 0.5 and evaluation.mean["mrr"] > 0.4
    stats = first.stats
    assert (
        stats["embed/cache_hit"] == 0.0
        and stats["time/embed_s"] > 0
        and stats["index/bytes"] >= 384 * 4 * len(first.chunks)
    )
    # the parts the retriever timed itself fit inside the whole build the pipeline timed
    parts = stats["time/model_load_s"] + stats["time/embed_s"] + stats["time/index_s"]
    assert 0 < parts <= stats["time/build_s"]
    assert "index/recall_vs_exact_at_10" not in stats  # exact: nothing to measure
    assert stats["time/query_encode_s"] > 0  # every question encoded once, in batches, before the searches
    # each question's path timed alone, its own encode inside the clock: a spread, not one constant added
    assert stats["latency/questions"] == len(golden) < LATENCY_SAMPLE
    assert stats["latency/search_ms_p99"] >= stats["latency/search_ms_p95"] > stats["latency/search_ms_p50"]
    # each path holds its question's encode alone (the order statistics of the sums exceed the parts')
    assert stats["latency/search_ms_p50"] > stats["latency/query_encode_ms_p50"] > 0
    # the batch path: questions over its wall time, which holds the batch encode and the searches
    batch_s = stats["time/query_encode_s"] + stats["time/search_s"]
    assert len(golden) / batch_s >= stats["throughput/questions_per_s"] > 0
    # the runs after the first time one question alone, not all (their latency is not asserted)
    second = Pipeline(chunker, DenseRetriever(embedder, FlatIndex(), cache), latency_sample=1).retrieve(corpus, golden)
    assert second.stats["embed/cache_hit"] == 1.0
    assert second.results.rankings() == first.results.rankings()  # same config, same numbers
    hnsw = DenseRetriever(embedder, HNSWIndex(M=2, ef_search=1), cache)
    graph = Pipeline(chunker, hnsw, latency_sample=1).retrieve(corpus, golden)
    assert 0 < graph.stats["index/recall_vs_exact_at_10"] <= 1


def test_min_score_abstains_and_bm25_runs_through_the_same_pipeline(small_kb, tmp_path):
    corpus, golden = small_kb
    chunker = TokenChunker(0)  # whole documents
    always = Pipeline(chunker, BM25Retriever()).retrieve(corpus, golden)
    assert score(golden, always.results, ["recall_at_10"]).mean["recall_at_10"] > 0.5
    assert always.stats["time/index_s"] > 0 and "time/embed_s" not in always.stats
    sampled = Pipeline(chunker, BM25Retriever(), latency_sample=3).retrieve(corpus, golden)
    assert sampled.stats["latency/questions"] == 3 and always.stats["latency/questions"] == len(golden)
    assert sampled.results.rankings() == always.results.rankings()  # timing questions alone changes no answer
    silent = Pipeline(chunker, BM25Retriever(), min_score=1e9).retrieve(corpus, golden)
    assert len(silent.results.frame) == 0
    assert score(golden, silent.results, ["abstain/correct_rate"]).mean["abstain/correct_rate"] == 1.0
    silent.results.to_trec(tmp_path / "silent.trec")  # an empty run is still a run file
    assert (tmp_path / "silent.trec").read_text() == ""


class BM25WithParts(BM25Retriever):
    """BM25 whose parts are its own top 2 hits and a part that never finds anything: the pipeline
    knows parts by name only, whatever retriever has them."""

    def search(self, queries, k, allowed=None, exact=False):
        scores, ids = super().search(queries, k, allowed, exact)
        self.top2 = {
            query: Hits.first(scores[row : row + 1], ids[row : row + 1])[:2] for row, query in enumerate(queries)
        }
        return scores, ids

    def part_hits(self, query: str) -> dict[str, Hits]:
        return {"top2": self.top2[query], "nothing": Hits.empty()}


def test_a_retriever_s_parts_are_ranked_and_kept_beside_it(small_kb):
    corpus, golden = small_kb
    retrieval = Pipeline(TokenChunker(0), BM25WithParts()).retrieve(corpus, golden)  # a chunk is a document
    assert list(retrieval.parts) == ["top2", "nothing"]
    top2, nothing = retrieval.parts["top2"], retrieval.parts["nothing"]
    whole = retrieval.results.rankings()
    assert top2.results.rankings() == {qid: ranking[:2] for qid, ranking in whole.items()}
    assert list(top2.hits) == list(nothing.hits) == [question.id for question in golden]
    for qid, rows in top2.hits.items():
        assert [
            [hit["doc"], hit["start"], hit["end"], hit["score"]] for hit in retrieval.delivered_chunks()[qid][:2]
        ] == rows
    assert len(nothing.results.frame) == 0 and all(rows == [] for rows in nothing.hits.values())
    assert retrieval.parts_by_question() == {qid: {"top2": rows, "nothing": []} for qid, rows in top2.hits.items()}
