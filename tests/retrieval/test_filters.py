"""Metadata filters on real indexes: pre and post against brute force, HNSW's selective-filter
loss and the exact fallback, empty filters, unknown fields, short results."""

from __future__ import annotations

import dataclasses
import logging
import re

import numpy as np
import pytest

from sweep.errors import InputError
from sweep.formats.corpus import Corpus, Document
from sweep.formats.golden import GoldenSet, Question
from sweep.retrieval.cache import EmbeddingCache
from sweep.retrieval.chunking import Chunk, TokenChunker
from sweep.retrieval.dense import DenseRetriever
from sweep.retrieval.embed import SentenceTransformerEmbedder
from sweep.retrieval.filters import NoFilter, PostFilter, PreFilter
from sweep.retrieval.index import FaissIndex, FlatIndex, HNSWIndex
from sweep.retrieval.lexical import BM25Retriever, TfidfRetriever
from sweep.retrieval.pipeline import Pipeline
from sweep.retrieval.retriever import Retriever

pytestmark = pytest.mark.usefixtures("torch_on_one_thread")  # MiniLM in process: see conftest

FILTERS = [
    {},
    {"department": "Finance"},
    {"department": "IT"},
    {"doc_type": ["policy", "faq"]},
    {"department": "IT", "doc_type": "howto"},
    {"status": "archived"},
]
NOT_TIMED = 1  # questions a dense run times alone (each one more encode): these tests assert no latency


@pytest.fixture(scope="module")
def filtered_kb(small_kb):
    """The small knowledge base, its questions each given one of FILTERS in turn."""
    corpus, golden = small_kb
    questions = tuple(dataclasses.replace(q, filters=FILTERS[i % len(FILTERS)]) for i, q in enumerate(golden))
    return corpus, GoldenSet(questions, source="small-kb")


@pytest.fixture(scope="module")
def minilm(tmp_path_factory) -> tuple[SentenceTransformerEmbedder, EmbeddingCache]:
    """One MiniLM and one embedding cache for this file's dense tests, which embed the same chunks."""
    return SentenceTransformerEmbedder(), EmbeddingCache(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def straight_from_the_model(minilm):
    """Chunk texts -> their vectors, and a question -> its vector, from the model itself, not the
    cache; each list and each question encoded once (alone, as a question is searched)."""
    embedder, _ = minilm
    encoded: dict[tuple[str, ...], np.ndarray] = {}
    questions: dict[str, np.ndarray] = {}

    def encode(texts: list[str]) -> np.ndarray:
        if tuple(texts) not in encoded:
            encoded[tuple(texts)] = embedder.encode_documents(texts)
        return encoded[tuple(texts)]

    def encode_question(question: str) -> np.ndarray:
        if question not in questions:
            questions[question] = embedder.encode_queries([question])[0]
        return questions[question]

    return encode, encode_question


class NamedVectors(Retriever):
    """Chunk vectors given up front go into `index`; a query is the name of its vector."""

    def __init__(self, index: FaissIndex, chunks: np.ndarray, queries: dict[str, np.ndarray]) -> None:
        self.index, self.chunks, self.queries = index, chunks, queries

    def build(self, texts):
        self.index.build(self.chunks)

    def search(self, queries, k, allowed=None, exact=False):
        return self.index.search(np.stack([self.queries[q] for q in queries]), k, allowed, exact)


def matches(doc: Document, condition: dict) -> bool:
    return all(doc.metadata.get(k) in (v if isinstance(v, list) else [v]) for k, v in condition.items())


def brute_force(scores: np.ndarray, chunks: list[Chunk], corpus: Corpus, *conditions: dict) -> list[str]:
    """Every chunk scored, those of documents failing any condition dropped, best chunk per document."""
    ranking: list[str] = []
    for chunk_id in np.lexsort((np.arange(len(scores)), -scores)):
        doc = chunks[chunk_id].doc_id
        if all(matches(corpus.by_id[doc], c) for c in conditions) and doc not in ranking:
            ranking.append(doc)
    return ranking


def documents(result, qid: str) -> list[str]:
    return [doc for doc, _ in result.results.rankings().get(qid, [])]


@pytest.mark.slow
@pytest.mark.parametrize("where", [{}, {"status": "current"}])
def test_pre_and_post_on_flat_equal_brute_force_filtering(filtered_kb, minilm, straight_from_the_model, where):
    corpus, golden = filtered_kb
    embedder, cache = minilm
    chunker = TokenChunker(96, overlap=16)

    def run(search_filter):
        retriever = DenseRetriever(embedder, FlatIndex(), cache)
        return Pipeline(chunker, retriever, search_filter, latency_sample=NOT_TIMED).retrieve(corpus, golden)

    pre = run(PreFilter(where=where, exact_below=0.0))  # the FAISS selector, never the exact scan
    pre_exact = run(PreFilter(where=where, exact_below=1.1))  # always the exact scan
    post = run(PostFilter(where=where, overfetch=100))
    chunks = pre.chunks
    encode, encode_question = straight_from_the_model
    vectors = encode([c.text for c in chunks])
    assert len(chunks) > 60
    for question in golden:
        scores = vectors @ encode_question(question.question)
        expected = brute_force(scores, chunks, corpus, question.filters, where)
        assert documents(pre, question.id) == expected, question.id
        assert documents(pre_exact, question.id) == expected, question.id
        assert documents(post, question.id) == expected, question.id
    restricted = sum(bool(q.filters or where) for q in golden) / len(golden)
    assert pre.stats["filter/restricted_share"] == pytest.approx(restricted)
    assert pre.stats["filter/short_result_rate"] == post.stats["filter/short_result_rate"] == 0.0


@pytest.mark.parametrize("make", [BM25Retriever, TfidfRetriever])
def test_lexical_retrievers_filter_with_the_same_semantics(filtered_kb, make):
    corpus, golden = filtered_kb
    chunker = TokenChunker(0)
    pre = Pipeline(chunker, make(), PreFilter()).retrieve(corpus, golden)
    post = Pipeline(chunker, make(), PostFilter(overfetch=100)).retrieve(corpus, golden)
    unfiltered = Pipeline(chunker, make(), NoFilter()).retrieve(corpus, golden)
    for question in golden:
        expected = [d for d in documents(unfiltered, question.id) if matches(corpus.by_id[d], question.filters)]
        assert documents(pre, question.id) == documents(post, question.id) == expected, question.id
    assert any(documents(unfiltered, q.id) != documents(pre, q.id) for q in golden)  # the filters did something


def grouped_corpus(n_documents: int, n_groups: int) -> tuple[Corpus, list[Chunk]]:
    corpus = Corpus(tuple(Document(f"d{i}", f"text {i}", metadata={"group": i % n_groups}) for i in range(n_documents)))
    return corpus, [Chunk(doc.id, 0, 0, 1, doc.text, 1) for doc in corpus]


@pytest.mark.slow  # builds HNSW graphs: 2 s
def test_pre_on_hnsw_with_a_selective_filter_falls_back_to_exact_search():
    corpus, chunks = grouped_corpus(20_000, 500)  # group 7: 40 documents, 0.2% of the corpus
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(chunks), 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = rng.normal(size=(30, 32)).astype(np.float32)
    golden = GoldenSet(tuple(Question(f"q{i}", f"q{i}", {"d7": 1}, filters={"group": 7}) for i in range(30)))
    named = dict(zip((q.question for q in golden), queries))
    hnsw = NamedVectors(HNSWIndex(M=8, ef_construction=40, ef_search=16), vectors, named)
    hnsw.build([])
    allowed = np.arange(7, len(chunks), 500)

    def found(search_filter, retriever) -> list[set]:
        search_filter.prepare(corpus, chunks, golden, 10)
        return [
            set(search_filter.search(retriever, q.question, 10, search_filter.restriction(q)).ids.tolist())
            for q in golden
        ]

    exact = [set(allowed[np.argsort(-(vectors[allowed] @ q))[:10]].tolist()) for q in queries]
    with_fallback = found(PreFilter(exact_below=0.1), hnsw)
    selector_only = found(PreFilter(exact_below=0.0), hnsw)
    assert with_fallback == exact
    # what the fallback is for: the graph walk under this selector misses most of the answers
    assert np.mean([len(s & e) / 10 for s, e in zip(selector_only, exact)]) < 0.5
    flat = NamedVectors(FlatIndex(), vectors, named)
    flat.build([])
    assert found(PreFilter(exact_below=0.0), flat) == exact  # a flat index needs no fallback


def test_pre_scans_exactly_when_the_allowed_chunks_fit_in_k():
    corpus, chunks = grouped_corpus(5_000, 125)  # 40 documents a group: 0.8%, but k=40 asks for all of them
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(len(chunks), 32)).astype(np.float32)
    query = rng.normal(size=32).astype(np.float32)
    hnsw = NamedVectors(
        HNSWIndex(M=8, ef_construction=40, ef_search=16),
        vectors / np.linalg.norm(vectors, axis=1, keepdims=True),
        {"question": query},
    )
    hnsw.build([])
    golden = GoldenSet((Question("q", "question", {"d3": 1}, filters={"group": 3}),))
    search_filter = PreFilter(exact_below=0.0)
    search_filter.prepare(corpus, chunks, golden, 40)
    restriction = search_filter.restriction(golden.questions[0])
    assert restriction.exact
    hits = search_filter.search(hnsw, "question", 40, restriction)
    assert sorted(hits.ids.tolist()) == list(range(3, 5_000, 125))


def test_filter_values_compare_as_json_and_yaml_mean_them():
    documents = [
        Document("flag-true", "a", metadata={"flag": True, "year": 2026}),
        Document("flag-one", "b", metadata={"flag": 1, "year": 2026.0}),
        Document("flag-text", "c", metadata={"flag": "1", "year": "2026"}),
    ]
    corpus = Corpus(tuple(documents))
    chunks = [Chunk(d.id, 0, 0, 1, d.text, 1) for d in corpus]
    questions = {"true": {"flag": True}, "one": {"flag": 1}, "text": {"flag": "1"}, "year": {"year": 2026}}
    golden = GoldenSet(tuple(Question(qid, qid, {"flag-true": 1}, filters=f) for qid, f in questions.items()))
    search_filter = PreFilter()
    search_filter.prepare(corpus, chunks, golden, 10)
    allowed = {q.id: [chunks[i].doc_id for i in search_filter.restriction(q).chunk_ids] for q in golden}
    assert allowed == {
        "true": ["flag-true"],
        "one": ["flag-one"],
        "text": ["flag-text"],
        "year": ["flag-true", "flag-one"],
    }


def test_a_where_that_matches_no_document_is_an_error_and_one_that_matches_all_restricts_nothing(filtered_kb):
    corpus, golden = filtered_kb
    chunks = TokenChunker(0).split(corpus)
    with pytest.raises(InputError, match=r"filter.where: year=\['2026'\] matches no document"):
        PreFilter(where={"year": "2026"}).prepare(corpus, chunks, golden, 10)
    everything = PostFilter(where={"status": ["current", "archived"]})
    everything.prepare(corpus, chunks, golden, 10)
    assert everything.restriction(next(q for q in golden if not q.filters)) is None


@pytest.mark.parametrize("make_filter", [PreFilter, PostFilter])
def test_a_filter_that_matches_nothing_gives_an_empty_result_and_names_the_question(filtered_kb, caplog, make_filter):
    corpus, golden = filtered_kb
    nowhere = dataclasses.replace(golden.questions[0], id="q-nowhere", filters={"department": "Nowhere"})
    golden = GoldenSet((*golden.questions[1:6], nowhere), source="small-kb")
    with caplog.at_level(logging.WARNING, logger="sweep.retrieval.filters"):
        result = Pipeline(TokenChunker(0), BM25Retriever(), make_filter()).retrieve(corpus, golden)
    assert "q-nowhere" not in result.results.qids
    assert any("'q-nowhere'" in r.getMessage() and "match no document" in r.getMessage() for r in caplog.records)
    assert result.stats["filter/empty_questions"] == 1.0


@pytest.mark.parametrize(
    "make_filter, question_filters, message",
    [
        (
            PreFilter,
            {"colour": "red"},
            "question 'q1': filters on 'colour', a field no document has (fields: department, doc_type, status, year)",
        ),
        (NoFilter, {"colour": "red"}, "filters on 'colour', a field no document has"),
        (lambda: PostFilter(where={"stat": "current"}), {}, "filter.where: filters on 'stat', a field no document has"),
        (PreFilter, {"year": {"from": 2020}}, "filter 'year' needs a value or a list of values"),
    ],
)
def test_bad_filters_are_clear_errors_before_anything_is_embedded(filtered_kb, make_filter, question_filters, message):
    corpus, _ = filtered_kb
    golden = GoldenSet(
        (Question("q1", "expenses", {corpus.documents[0].id: 1}, filters=question_filters),), source="g.jsonl"
    )
    retriever = BM25Retriever()
    with pytest.raises(InputError, match=re.escape(message)):
        Pipeline(TokenChunker(0), retriever, make_filter()).retrieve(corpus, golden)
    assert not hasattr(retriever, "model")  # the filters failed before the index was built


@pytest.mark.slow
def test_post_filtering_with_little_over_fetch_comes_back_short(filtered_kb, minilm):
    corpus, golden = filtered_kb
    chunker = TokenChunker(0)
    embedder, cache = minilm

    def run(search_filter):
        retriever = DenseRetriever(embedder, FlatIndex(), cache)
        pipeline = Pipeline(chunker, retriever, search_filter, chunk_depth=5, depth=5, latency_sample=NOT_TIMED)
        return pipeline.retrieve(corpus, golden).stats

    assert run(PostFilter(overfetch=1))["filter/short_result_rate"] > 0.3
    assert run(PreFilter())["filter/short_result_rate"] == 0.0  # a dense search always fills k
    assert "filter/short_result_rate" not in run(NoFilter())


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: PostFilter(overfetch=0.5), "filter.overfetch=0.5: must be a number >= 1"),
        (lambda: PostFilter(overfetch=float("inf")), "filter.overfetch=inf: must be a number >= 1"),
        (lambda: PreFilter(exact_below="abc"), "filter.exact_below='abc': must be a number >= 0"),
    ],
)
def test_bad_filter_settings_are_clear_errors(make, message):
    with pytest.raises(InputError, match=re.escape(message)):
        make()
