"""Property tests: every metric trec_eval also computes agrees with pytrec_eval to 1e-9.

Randomized graded qrels (grades 0..3), runs with tied scores, runs shorter than k,
unjudged documents and queries missing from the run, at relevance levels 1 and 2: 300 random
cases (about 1,300 questions) per test, scored in one evaluation each.
"""

from __future__ import annotations

import random

import pytest
import pytrec_eval

from helpers.data import random_judgments
from sweep.evaluation import score
from sweep.formats.golden import GoldenSet, Question
from sweep.formats.runs import Run

CUTOFFS = (1, 2, 3, 5, 10, 20)
TREC_MEASURES = {f"{m}.{','.join(map(str, CUTOFFS))}" for m in ("P", "recall", "success", "ndcg_cut", "map_cut")} | {
    "recip_rank", "map", "Rprec", "ndcg",
}  # fmt: skip
GRADES, SCORES = range(4), (0.0, 0.5, 1.0, 1.5, 2.0, -1.0)  # few distinct scores: ties are common
OURS_TO_TREC = {
    **{f"precision_at_{k}": f"P_{k}" for k in CUTOFFS},
    **{f"recall_at_{k}": f"recall_{k}" for k in CUTOFFS},
    **{f"hit_at_{k}": f"success_{k}" for k in CUTOFFS},
    **{f"ndcg_at_{k}": f"ndcg_cut_{k}" for k in CUTOFFS},
    **{f"map_at_{k}": f"map_cut_{k}" for k in CUTOFFS},
    "mrr": "recip_rank",
    "map": "map",
    "r_precision": "Rprec",
    "ndcg": "ndcg",
}


def ours(qrels, run, relevance_level):
    golden = GoldenSet(tuple(Question(qid, "", rel) for qid, rel in qrels.items()))
    return score(golden, Run.from_dict(run), list(OURS_TO_TREC), relevance_level=relevance_level)


# Grades start at 0: after a few hundred evaluations with negative grades, pytrec-eval-terrier
# 0.5.11 hangs inside evaluate(). trec_eval 10.0 handles them, and test_trec_eval_reference
# checks our metrics on its qrels with -1 grades.
@pytest.mark.parametrize("relevance_level", [1, 2])
def test_agrees_with_pytrec_eval(relevance_level):
    check_agreement(*random_judgments(relevance_level, 300, GRADES, SCORES), relevance_level=relevance_level)


def check_agreement(qrels, run, relevance_level):
    theirs = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES, relevance_level=relevance_level).evaluate(run)
    evaluation = ours(qrels, run, relevance_level)
    answerable = evaluation.per_query[evaluation.per_query["answerable"]]
    for qid, row in answerable.iterrows():
        for name, trec_name in OURS_TO_TREC.items():
            # trec_eval -c: a query the run does not mention retrieved nothing and scores 0
            expected = theirs[qid][trec_name] if qid in theirs else 0.0
            assert row[name] == pytest.approx(expected, abs=1e-9), (qid, name)
    for name in OURS_TO_TREC:
        expected = [theirs[q][OURS_TO_TREC[name]] if q in theirs else 0.0 for q in answerable.index]
        if expected:
            assert evaluation.mean[name] == pytest.approx(sum(expected) / len(expected), abs=1e-9)


def test_judged_at_k_counts_what_pytrec_eval_counts_as_judged():
    """judged_at_k is trec_eval's P@k with every judgment counted relevant (grades shifted up by
    one, since pytrec_eval takes no relevance level 0), over min(k, documents returned) rather than k."""
    qrels, run = random_judgments(3, 300, GRADES, SCORES)
    shifted = {qid: {doc: grade + 1 for doc, grade in rel.items()} for qid, rel in qrels.items()}
    theirs = pytrec_eval.RelevanceEvaluator(shifted, {f"P.{','.join(map(str, CUTOFFS))}"}).evaluate(run)
    golden = GoldenSet(tuple(Question(qid, "", rel) for qid, rel in qrels.items()))
    names = [f"judged_at_{k}" for k in CUTOFFS]
    per_query = score(golden, Run.from_dict(run), names).per_query
    for qid, row in per_query[per_query["answerable"]].iterrows():
        returned = len(run.get(qid, {}))
        for k in CUTOFFS:
            if not returned:  # nothing shown: nothing unjudged, and nothing to divide by
                assert row[f"judged_at_{k}"] != row[f"judged_at_{k}"], (qid, k)  # NaN
                continue
            expected = theirs[qid][f"P_{k}"] * k / min(k, returned)
            assert row[f"judged_at_{k}"] == pytest.approx(expected, abs=1e-9), (qid, k)


def test_a_ranking_handed_over_in_any_tie_order_agrees_with_pytrec_eval():
    """A retriever hands its results best first, ties in whatever order its corpus file had them
    (issue 49): the pipeline's run (`Run.from_ranked`) is scored as pytrec_eval scores the same
    documents and scores, ties by document id descending, whichever order the ties came in."""
    qrels, run = random_judgments(5, 300, GRADES, SCORES)
    rng = random.Random(5)
    for order in ("shuffled", "ascending ids"):
        rankings = {}
        for qid, docs in run.items():
            hits = list(docs.items())
            rng.shuffle(hits) if order == "shuffled" else hits.sort()
            rankings[qid] = sorted(hits, key=lambda hit: -hit[1])  # stable: ties stay as they came
        golden = GoldenSet(tuple(Question(qid, "", rel) for qid, rel in qrels.items()))
        evaluation = score(golden, Run.from_ranked(rankings), list(OURS_TO_TREC))
        theirs = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)
        for qid, row in evaluation.per_query[evaluation.per_query["answerable"]].iterrows():
            for name, trec_name in OURS_TO_TREC.items():
                expected = theirs[qid][trec_name] if qid in theirs else 0.0
                assert row[name] == pytest.approx(expected, abs=1e-9), (order, qid, name)


def test_exact_copies_that_tie_agree_with_pytrec_eval_whichever_copy_is_judged():
    """Each judged document and its unjudged copy score alike: trec_eval ranks the higher id
    first, and so does every run here, whichever of the two came first."""
    qrels = {"q1": {"doc": 1, "other": 2}, "q2": {"doc-copy": 1}, "q3": {"a": 1, "b": 1}}
    run = {
        "q1": {"doc": 2.0, "doc-copy": 2.0, "other": 1.0, "other-copy": 1.0},
        "q2": {"doc": 2.0, "doc-copy": 2.0},
        "q3": {"b": 0.5, "a": 0.5, "a-copy": 0.5, "c": 0.5},
    }
    theirs = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)
    golden = GoldenSet(tuple(Question(qid, "", rel) for qid, rel in qrels.items()))
    for rankings in (
        {qid: list(docs.items()) for qid, docs in run.items()},
        {qid: list(reversed(docs.items())) for qid, docs in run.items()},
    ):
        per_query = score(golden, Run.from_ranked(rankings), list(OURS_TO_TREC)).per_query
        for qid in qrels:
            for name, trec_name in OURS_TO_TREC.items():
                assert per_query.loc[qid, name] == pytest.approx(theirs[qid][trec_name], abs=1e-12), (qid, name)
    assert theirs["q1"]["recip_rank"] == 0.5 and theirs["q2"]["recip_rank"] == 1.0  # the copy's id sorts after
