"""One real retrieval run on a slice of the bundled knowledge base: MiniLM, FAISS, BM25, metrics."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.chunking import TokenChunker
from sweep.corpus import Corpus, load_corpus
from sweep.embed import EmbeddingCache, SentenceTransformerEmbedder
from sweep.golden import GoldenSet, load_golden
from sweep.index import FlatIndex
from sweep.metrics import evaluate
from sweep.pipeline import DenseRetriever, Pipeline, collapse_to_documents
from sweep.sparse import BM25Retriever

KB = Path(__file__).resolve().parents[1] / "data" / "kb"


@pytest.fixture(scope="module")
def small_kb():
    """Finance and IT documents and the questions about them (about 28 documents)."""
    full = load_corpus(KB / "corpus.jsonl")
    corpus = Corpus(tuple(d for d in full if d.metadata["department"] in {"Finance", "IT"}), source="small-kb")
    golden = load_golden(KB / "golden.jsonl", warn=False)
    keep = [q for q in golden if q.relevant and set(q.relevant) <= set(corpus.by_id)]
    unanswerable = [q for q in golden if not q.answerable][:3]
    return corpus, GoldenSet(tuple(keep + unanswerable), source="small-kb")


@pytest.fixture(scope="module")
def embedder():
    return SentenceTransformerEmbedder()


def test_best_chunk_stands_for_its_document():
    import numpy as np

    from sweep.chunking import Chunk
    from sweep.index import Hits

    chunks = [Chunk("a", 0, 0, 1, "x", 1), Chunk("b", 0, 0, 1, "y", 1), Chunk("a", 1, 1, 2, "z", 1)]
    hits = Hits.first(np.array([[0.9, 0.8, 0.7, 0.0]]), np.array([[2, 1, 0, -1]]))  # -1: FAISS found no more
    assert collapse_to_documents(hits, chunks, depth=10) == [("a", 0.9), ("b", 0.8)]
    assert collapse_to_documents(hits, chunks, depth=1) == [("a", 0.9)]


def test_dense_run_finds_answers_and_embeds_once(small_kb, embedder, tmp_path):
    corpus, golden = small_kb
    cache = EmbeddingCache(tmp_path / "cache")
    chunker = TokenChunker(256, overlap=32)
    pipeline = Pipeline(chunker, DenseRetriever(embedder, FlatIndex(), cache, chunker.identity))
    result = pipeline.run(corpus, golden)
    evaluation = evaluate(golden, result.run, ["recall_at_5", "ndcg_at_10", "mrr"])
    assert evaluation.mean["recall_at_5"] > 0.5 and evaluation.mean["mrr"] > 0.4
    assert result.timings["time/embed_s"] > 0 and result.timings["latency/search_ms_p95"] >= result.timings["latency/search_ms_p50"]
    assert not pipeline.retriever.cache_hit
    again = Pipeline(chunker, DenseRetriever(embedder, FlatIndex(), cache, chunker.identity))
    second = again.run(corpus, golden)
    assert again.retriever.cache_hit
    assert second.run.rankings() == result.run.rankings()  # same config, same numbers


def test_min_score_abstains_and_bm25_runs_through_the_same_pipeline(small_kb, tmp_path):
    corpus, golden = small_kb
    chunker = TokenChunker(0)  # whole documents
    always = Pipeline(chunker, BM25Retriever()).run(corpus, golden)
    assert evaluate(golden, always.run, ["recall_at_10"]).mean["recall_at_10"] > 0.5
    silent = Pipeline(chunker, BM25Retriever(), min_score=1e9).run(corpus, golden)
    assert len(silent.run.frame) == 0
    assert evaluate(golden, silent.run, ["abstain/correct_rate"]).mean["abstain/correct_rate"] == 1.0
    silent.run.to_trec(tmp_path / "silent.trec")  # an empty run is still a run file
    assert (tmp_path / "silent.trec").read_text() == ""
