"""`model=hybrid`: real member retrievers over the same chunks, fused per question, each member's
own hits kept for its metrics."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.commands import compose_config
from sweep.errors import InputError
from sweep.experiment.trial import build_pipeline, check_settings
from sweep.retrieval.chunking import TokenChunker
from sweep.retrieval.filters import PreFilter
from sweep.retrieval.fusion import fuse
from sweep.retrieval.hybrid import HybridRetriever
from sweep.retrieval.lexical import BM25Retriever, TfidfRetriever
from sweep.retrieval.pipeline import Pipeline


def hybrid(**settings) -> HybridRetriever:
    return HybridRetriever({"bm25": BM25Retriever(), "tfidf": TfidfRetriever()}, **settings)


def retrieve(kb, retriever, **parts):
    corpus, golden = kb
    return Pipeline(TokenChunker(0), retriever, **parts).retrieve(corpus, golden)


def doc_rankings(retrieval) -> dict[str, list[str]]:
    return {qid: [doc for doc, _ in ranking] for qid, ranking in retrieval.results.rankings().items()}


@pytest.mark.parametrize(("weight", "alone"), [(1.0, BM25Retriever), (0.0, TfidfRetriever)])
@pytest.mark.parametrize(("fusion", "norm"), [("convex", "min-max"), ("convex", "z"), ("rrf", "none")])
def test_weight_one_or_zero_is_one_member_alone(small_kb, weight, alone, fusion, norm):
    fused = retrieve(small_kb, hybrid(weight=weight, fusion=fusion, norm=norm))
    assert doc_rankings(fused) == doc_rankings(retrieve(small_kb, alone()))


def test_both_members_shape_the_fused_ranking_and_each_keeps_its_own_hits(small_kb):
    fused = retrieve(small_kb, hybrid(weight=0.5))
    bm25, tfidf = retrieve(small_kb, BM25Retriever()), retrieve(small_kb, TfidfRetriever())
    assert doc_rankings(fused) != doc_rankings(bm25) and doc_rankings(fused) != doc_rankings(tfidf)
    members = fused.member_results
    assert set(members) == {"bm25", "tfidf"}
    assert members["bm25"].rankings() == bm25.results.rankings()  # 28 chunks: all within `candidates`
    assert members["tfidf"].rankings() == tfidf.results.rankings()
    for qid, hits in fused.members.items():  # the fused list is the fusion of exactly these hits
        expected = fuse([hits["bm25"], hits["tfidf"]], "convex", "min-max", [0.5, 0.5])[:10]
        assert [i for i, _ in fused.contexts[qid]] == expected.ids.tolist(), qid
    table = fused.member_hits()
    some_qid = next(iter(table))
    top = bm25.delivered_chunks()[some_qid][0]  # the same chunk, in the evidence's coordinates
    assert table[some_qid]["bm25"][0] == [top["doc"], top["start"], top["end"], top["score"]]


def test_members_search_under_the_question_s_filter(small_kb):
    corpus, _ = small_kb
    it_only = PreFilter(where={"department": "IT"})
    fused = retrieve(small_kb, hybrid(fusion="rrf"), filter=it_only)
    for members in fused.members.values():
        for hits in members.values():
            chunks = [fused.chunks[i] for i in hits.ids.tolist()]
            assert all(corpus.by_id[c.doc_id].metadata["department"] == "IT" for c in chunks)
    assert all(corpus.by_id[d].metadata["department"] == "IT" for docs in doc_rankings(fused).values() for d in docs)


def test_candidates_caps_what_each_member_contributes(small_kb):
    fused = retrieve(small_kb, hybrid(candidates=3))
    assert all(len(hits) <= 3 for members in fused.members.values() for hits in members.values())
    assert all(len(docs) <= 6 for docs in doc_rankings(fused).values())


def test_the_retriever_stats_are_each_member_s_under_its_name(small_kb):
    stats = retrieve(small_kb, hybrid()).stats
    assert stats["member/bm25/time/index_s"] > 0 and stats["member/tfidf/time/index_s"] > 0


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"weight": 0.3, "weights": [1, 1]}, "model.weight and model.weights are both set"),
        ({"weight": 0.3, "fusion": "combsum"}, "model.weight: model.fusion=combsum is unweighted"),
        ({"weights": [1, 2, 3]}, r"model.weights=\[1, 2, 3\]: 3 weights for 2 members \(bm25, tfidf\)"),
        ({"weights": [0, 0]}, "must be numbers >= 0, not all 0"),
        ({"weight": 1.5}, "model.weight=1.5: must be a number from 0 to 1"),
        ({"norm": "minmax"}, "model.norm='minmax': must be one of none, min-max"),
        ({"fusion": "wsum"}, "model.fusion='wsum': must be one of convex, combsum"),
    ],
)
def test_bad_settings_are_one_line_errors(settings, message):
    with pytest.raises(InputError, match=message):
        hybrid(**settings)


def test_one_member_or_weight_with_three_is_refused():
    with pytest.raises(InputError, match="a hybrid needs two or more members, not 1"):
        HybridRetriever({"bm25": BM25Retriever()})
    three = {"bm25": BM25Retriever(), "tfidf": TfidfRetriever(), "bm25l": BM25Retriever(method="bm25l")}
    with pytest.raises(InputError, match="model.weight=0.5: the first member's share needs two members, not 3"):
        HybridRetriever(three, weight=0.5)
    assert HybridRetriever(three, weights=[1, 0, 2]).weights.tolist() == [1, 0, 2]


def test_the_config_composes_members_from_the_model_group():
    cfg = compose_config("model=hybrid", "model@model.members.bm25=tfidf", "+model@model.members.extra=bm25")
    check_settings(cfg)
    retriever = build_pipeline(cfg).retriever
    assert list(retriever.members) == ["minilm", "bm25", "extra"]
    assert [type(m).__name__ for m in retriever.members.values()] == [
        "DenseRetriever",
        "TfidfRetriever",
        "BM25Retriever",
    ]
    np.testing.assert_allclose(retriever.weights, [1 / 3] * 3)  # convex, no weight given: equal shares
    with pytest.raises(InputError, match=r"model.members.bm25.k1=-1: must be a number >= 0"):
        check_settings(compose_config("model=hybrid", "model.members.bm25.k1=-1"))
