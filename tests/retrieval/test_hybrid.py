"""`model=hybrid`: real member retrievers over the same chunks, fused per question, each member a
part of the retriever whose own hits the pipeline ranks and keeps for its metrics."""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd
import pytest

from helpers.commands import compose_config
from sweep.errors import InputError
from sweep.evaluation import score
from sweep.experiment.trial import build_pipeline, check_settings, warn_about_costly_settings
from sweep.retrieval.chunking import TokenChunker
from sweep.retrieval.filters import PreFilter
from sweep.retrieval.fusion import fuse
from sweep.retrieval.hybrid import HybridRetriever
from sweep.retrieval.lexical import BM25Retriever, TfidfRetriever
from sweep.retrieval.pipeline import Pipeline
from sweep.retrieval.retriever import Hits
from sweep.tracking.legacy import current_targets


def hybrid(**settings) -> HybridRetriever:
    return HybridRetriever({"bm25": BM25Retriever(), "tfidf": TfidfRetriever()}, **settings)


def retrieve(kb, retriever, **parts):
    corpus, golden = kb
    return Pipeline(TokenChunker(0), retriever, **parts).retrieve(corpus, golden)


def doc_rankings(retrieval) -> dict[str, list[str]]:
    return {qid: [doc for doc, _ in ranking] for qid, ranking in retrieval.results.rankings().items()}


def member_hits(retrieval, member: str, qid: str) -> Hits:
    """A member's chunk hits for a question, back from the part's rows to chunk ids and scores."""
    position = {(c.doc_id, c.start, c.end): i for i, c in enumerate(retrieval.chunks)}
    rows = retrieval.parts[member].hits[qid]
    ids = [position[doc, start, end] for doc, start, end, _ in rows]
    return Hits(np.array([row[3] for row in rows], dtype=np.float64), np.array(ids, dtype=np.int64))


@pytest.mark.parametrize(("weight", "alone"), [(1.0, BM25Retriever), (0.0, TfidfRetriever)])
@pytest.mark.parametrize(("fusion", "norm"), [("convex", "min-max"), ("convex", "z"), ("rrf", "none")])
def test_weight_one_or_zero_is_one_member_alone(small_kb, weight, alone, fusion, norm):
    fused = retrieve(small_kb, hybrid(weight=weight, fusion=fusion, norm=norm))
    assert doc_rankings(fused) == doc_rankings(retrieve(small_kb, alone()))


def test_both_members_shape_the_fused_ranking_and_each_keeps_its_own_hits(small_kb):
    fused = retrieve(small_kb, hybrid(weight=0.5))
    bm25, tfidf = retrieve(small_kb, BM25Retriever()), retrieve(small_kb, TfidfRetriever())
    assert doc_rankings(fused) != doc_rankings(bm25) and doc_rankings(fused) != doc_rankings(tfidf)
    parts = fused.parts
    assert list(parts) == ["bm25", "tfidf"]
    assert parts["bm25"].results.rankings() == bm25.results.rankings()  # 28 chunks: all within `candidates`
    assert parts["tfidf"].results.rankings() == tfidf.results.rankings()
    assert list(parts["bm25"].hits) == list(parts["tfidf"].hits) == list(fused.contexts)  # every question
    for qid in fused.contexts:  # the fused list is the fusion of exactly these hits
        lists = [member_hits(fused, "bm25", qid), member_hits(fused, "tfidf", qid)]
        expected = fuse(lists, "convex", "min-max", [0.5, 0.5])[:10]
        assert [i for i, _ in fused.contexts[qid]] == expected.ids.tolist(), qid
        np.testing.assert_allclose([score for _, score in fused.contexts[qid]], expected.scores, rtol=0, atol=1e-6)
    some_qid = next(iter(fused.contexts))
    top = bm25.delivered_chunks()[some_qid][0]  # the same chunk, in the evidence's coordinates
    assert parts["bm25"].hits[some_qid][0] == [top["doc"], top["start"], top["end"], top["score"]]
    by_question = fused.parts_by_question()
    assert list(by_question) == list(fused.contexts)
    assert all(list(members) == ["bm25", "tfidf"] for members in by_question.values())
    assert by_question[some_qid]["tfidf"] is parts["tfidf"].hits[some_qid]


def test_a_retriever_without_parts_has_none(small_kb):
    plain = retrieve(small_kb, BM25Retriever())
    assert plain.parts == {} and plain.parts_by_question() == {}


def test_members_search_under_the_question_s_filter(small_kb):
    corpus, _ = small_kb
    it_only = PreFilter(where={"department": "IT"})
    fused = retrieve(small_kb, hybrid(fusion="rrf"), filter=it_only)
    for part in fused.parts.values():
        for rows in part.hits.values():
            assert all(corpus.by_id[doc].metadata["department"] == "IT" for doc, *_ in rows)
    assert all(corpus.by_id[d].metadata["department"] == "IT" for docs in doc_rankings(fused).values() for d in docs)


@pytest.mark.parametrize(("weight", "alone"), [(1.0, "bm25"), (0.0, "tfidf")])
def test_weight_one_or_zero_equals_its_member_on_every_per_question_metric_at_full_depth(small_kb, weight, alone):
    """Issue 49, item 2. At chunk=50 the small knowledge base has 585 chunks, and a member returns up
    to 353 hits of a question: more than the 100 each member used to hand the fusion (the old
    `candidates` default), which cut recall, judged_at_20 and n_retrieved below the member's own.
    By default each member now hands over its whole answer at `chunk_depth`."""
    corpus, golden = small_kb
    chunker = TokenChunker(50)
    fused = Pipeline(chunker, hybrid(weight=weight)).retrieve(corpus, golden)
    member = Pipeline(chunker, {"bm25": BM25Retriever, "tfidf": TfidfRetriever}[alone]()).retrieve(corpus, golden)
    assert max(len(rows) for rows in fused.parts[alone].hits.values()) > 100
    assert doc_rankings(fused) == doc_rankings(member)
    assert fused.parts[alone].results.rankings() == member.results.rankings()  # the member inside is the member alone
    ours, its = score(golden, fused.results).per_query, score(golden, member.results).per_query
    assert list(ours.columns) == list(its.columns)
    # every metric and question column; the top score is the fused one (min-max: 1 at the top)
    compared = [column for column in ours.columns if column != "top_score"]
    assert {"recall_at_100", "map", "ndcg_at_10", "mrr", "judged_at_20", "n_retrieved"} <= set(compared)
    pd.testing.assert_frame_equal(ours[compared], its[compared], check_exact=True)


def test_a_capped_hybrid_is_warned_about_and_the_default_is_not(caplog):
    with caplog.at_level(logging.WARNING, logger="sweep.experiment.trial"):
        warn_about_costly_settings(compose_config("model=hybrid"))
        warn_about_costly_settings(compose_config("model=hybrid", "model.candidates=400"))
        assert not [r for r in caplog.records if r.name == "sweep.experiment.trial"]
        warn_about_costly_settings(compose_config("model=hybrid", "model.candidates=100"))
    assert [r.getMessage() for r in caplog.records if r.name == "sweep.experiment.trial"] == [
        "model.candidates=100 is smaller than chunk_depth=400: each member hands the fusion at most 100 chunk hits, "
        "fewer than it returns alone, so weight 0 or 1 is not the other member alone and deeper metrics are capped "
        "(null, the default, takes chunk_depth); see docs/commands.md#warnings"
    ]


def test_equal_fused_scores_keep_the_order_the_weighted_member_gave_them():
    """A member's tied hits (exact copies of a chunk) come back in its own order, not by chunk id."""
    tied = Hits(np.array([3.0, 2.0, 2.0, 2.0, 1.0]), np.array([8, 6, 2, 4, 5]))
    other = Hits(np.array([0.9, 0.1]), np.array([2, 7]))
    for method, norm in [("convex", "min-max"), ("convex", "z"), ("convex", "none"), ("dbsf", "none")]:
        assert fuse([other, tied], method, norm, weights=[0.0, 1.0]).ids.tolist() == [8, 6, 2, 4, 5], method
    both = fuse([other, tied], "convex", "none", weights=[0.5, 0.5])  # 2 scores 1.45; 6 and 4 tie at 1.0
    assert both.ids.tolist() == [8, 2, 6, 4, 5, 7]


def test_candidates_caps_what_each_member_contributes(small_kb):
    fused = retrieve(small_kb, hybrid(candidates=3))
    assert all(len(rows) <= 3 for part in fused.parts.values() for rows in part.hits.values())
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


@pytest.mark.parametrize("target", ["sweep.rerank.HybridReranker", "sweep.retrieval.rerank.HybridReranker"])
def test_a_stored_config_with_the_removed_hybrid_reranker_names_its_replacement(target):
    """A run logged with `reranker=hybrid` (before the subpackages or after) is read as ever, but
    its config cannot be rebuilt (`sweep.best`): one line says what does its job now."""
    stored = {"model": {"_target_": "sweep.lexical.BM25Retriever"}, "reranker": {"_target_": target, "k": 60}}
    message = f"reranker=hybrid was removed: use model=hybrid model.fusion=rrf (the run's config names {target})"
    with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
        current_targets(stored)
