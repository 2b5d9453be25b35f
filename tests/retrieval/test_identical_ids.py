"""`golden.ignore_identical_ids`: BEIR's rule for golden sets whose questions are documents of the
corpus (ArguAna, Quora): a retrieved document whose id is the question's own is dropped from that
question's results before anything is scored."""

from __future__ import annotations

import pytest

from helpers.commands import compose_config
from sweep.errors import InputError
from sweep.evaluation import score
from sweep.experiment.trial import build_pipeline, check_settings
from sweep.formats.corpus import Corpus, Document
from sweep.formats.golden import GoldenSet, Question
from sweep.retrieval.chunking import RecursiveChunker, TokenChunker
from sweep.retrieval.hybrid import HybridRetriever
from sweep.retrieval.lexical import BM25Retriever, TfidfRetriever
from sweep.retrieval.pipeline import Pipeline

# ArguAna's shape: each question is an argument of the corpus, its relevant document the counter-argument
ARGUMENTS = {
    "homework-con": "Homework should be banned: children need rest after school, and homework steals their evenings.",
    "homework-pro": "Homework should not be banned: practice at home after school builds the habits children need.",
    "uniforms-con": "School uniforms should be dropped: they cost parents money and stifle pupils' expression.",
    "uniforms-pro": "School uniforms should stay: they cost parents less than fashion and spare pupils' teasing.",
    "zoo": "Zoos protect endangered species through breeding programmes.",
}
CORPUS = Corpus(tuple(Document(doc_id, text) for doc_id, text in ARGUMENTS.items()))
GOLDEN = GoldenSet(
    (
        Question("homework-con", ARGUMENTS["homework-con"], {"homework-pro": 1}),
        Question("uniforms-con", ARGUMENTS["uniforms-con"], {"uniforms-pro": 1}),
    )
)


def retrieve(ignore: bool, chunker=None, **parts):
    retriever = parts.pop("retriever", BM25Retriever())
    pipeline = Pipeline(chunker or TokenChunker(0), retriever, ignore_identical_ids=ignore, **parts)
    return pipeline.retrieve(CORPUS, GOLDEN)


def test_the_question_s_own_document_is_dropped_before_scoring():
    kept, dropped = retrieve(False), retrieve(True)
    for question in GOLDEN:
        ranking = [doc for doc, _ in kept.results.rankings()[question.id]]
        assert ranking[0] == question.id  # its own text matches best
        without = [doc for doc, _ in dropped.results.rankings()[question.id]]
        assert without == [doc for doc in ranking if doc != question.id]  # the rest, in the same order
        assert without[0] == next(iter(question.relevant))
    assert score(GOLDEN, kept.results, ["ndcg_at_10"]).mean["ndcg_at_10"] < 1
    assert score(GOLDEN, dropped.results, ["ndcg_at_10"]).mean["ndcg_at_10"] == 1


def test_the_context_metrics_never_see_its_chunks():
    chunker = RecursiveChunker(8)  # several chunks per document: every one of them goes
    kept, dropped = retrieve(False, chunker), retrieve(True, chunker)
    for question in GOLDEN:
        own = [hit for hit in kept.delivered_chunks()[question.id] if hit["doc"] == question.id]
        assert len(own) > 1
        delivered = dropped.delivered_chunks()[question.id]
        assert delivered and all(hit["doc"] != question.id for hit in delivered)


def test_a_fused_ranking_does_not_bring_it_back():
    """A hybrid fuses its members' hits: the rule applies to what comes out of the fusion, and to each member's own."""
    fused = retrieve(
        True, retriever=HybridRetriever({"tfidf": TfidfRetriever(), "bm25": BM25Retriever()}, fusion="rrf")
    )
    for question in GOLDEN:
        assert question.id not in dict(fused.results.rankings()[question.id])
        for part in fused.parts.values():
            assert question.id not in dict(part.results.rankings().get(question.id, []))


def test_the_setting_reaches_the_pipeline_and_is_checked():
    assert build_pipeline(compose_config()).ignore_identical_ids is False  # the default: as in the data
    assert build_pipeline(compose_config("golden.ignore_identical_ids=true")).ignore_identical_ids is True
    with pytest.raises(InputError, match=r"golden.ignore_identical_ids='sometimes': must be true or false"):
        check_settings(compose_config("golden.ignore_identical_ids=sometimes"))
