"""The metric contract of DESIGN.md, pinned on small hand-checked cases."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.data import golden_of, ranked
from sweep.errors import InputError
from sweep.evaluation import ABSTAIN_CORRECT, ABSTAIN_FALSE, Metric, score
from sweep.evaluation.context import CONTEXT_N, ContextScores
from sweep.evaluation.record import evaluation_tables
from sweep.formats.golden import doc_grades, load_golden
from sweep.formats.runs import Run


def test_seed_worked_example(seed_example):
    golden, run = seed_example
    evaluation = score(golden, run, ["recall_at_1", "recall_at_3", "mrr"])
    per_query = evaluation.per_query
    assert per_query["recall_at_1"].tolist() == [0, 1, 0]
    assert per_query["recall_at_3"].tolist() == [1, 1, 0]
    assert per_query["mrr"].tolist() == [0.5, 1, 0]
    assert round(evaluation.mean["recall_at_3"], 3) == 0.667
    assert evaluation.mean["mrr"] == 0.5


def values(relevant, docs, metric, **kwargs):
    return score(golden_of({"q": relevant}), ranked({"q": docs}), [metric], **kwargs).per_query.loc["q", metric]


def test_precision_divides_by_k_even_when_fewer_were_returned():
    assert values({"a": 1}, ["a"], "precision_at_5") == pytest.approx(1 / 5)
    assert values({"a": 1, "b": 1}, ["x", "a", "b"], "precision_at_2") == pytest.approx(1 / 2)


def test_recall_hit_and_reciprocal_rank_cutoffs():
    relevant, docs = {"a": 1, "b": 2, "c": 1}, ["x", "y", "b", "z", "a"]
    assert values(relevant, docs, "recall_at_3") == pytest.approx(1 / 3)
    assert values(relevant, docs, "recall_at_100") == pytest.approx(2 / 3)
    assert values(relevant, docs, "hit_at_2") == 0
    assert values(relevant, docs, "hit_at_3") == 1
    assert values(relevant, docs, "mrr") == pytest.approx(1 / 3)
    assert values(relevant, docs, "mrr_at_2") == 0
    assert values(relevant, docs, "mrr_at_3") == pytest.approx(1 / 3)


def test_ndcg_uses_grades_as_gains_and_an_ideal_from_all_judgments():
    relevant, docs = {"a": 3, "b": 1, "c": 2, "n": 0}, ["b", "n", "a"]
    dcg = 1 / math.log2(2) + 3 / math.log2(4)
    ideal = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert values(relevant, docs, "ndcg_at_3") == pytest.approx(dcg / ideal)
    ideal_at_2 = 3 + 2 / math.log2(3)
    assert values(relevant, docs, "ndcg_at_2") == pytest.approx(1 / ideal_at_2)
    exp_dcg = 1 + 7 / 2
    exp_ideal = 7 + 3 / math.log2(3) + 1 / 2
    assert values(relevant, docs, "ndcg_at_3", gain="exponential") == pytest.approx(exp_dcg / exp_ideal)


def test_average_precision_and_its_cutoff_divide_by_all_relevant():
    relevant, docs = {"a": 1, "b": 1, "c": 1}, ["a", "x", "b", "y"]
    assert values(relevant, docs, "map") == pytest.approx((1 + 2 / 3) / 3)
    assert values(relevant, docs, "map_at_2") == pytest.approx(1 / 3)


def test_r_precision_with_more_relevant_than_retrieved():
    assert values({"a": 1, "b": 1, "c": 1, "d": 1}, ["a", "x", "b"], "r_precision") == pytest.approx(2 / 4)
    assert values({"a": 1, "b": 1}, ["x", "a", "b"], "r_precision") == pytest.approx(1 / 2)


def test_relevance_level_applies_to_binary_metrics_but_not_to_ndcg():
    relevant, docs = {"a": 1, "b": 2}, ["a", "b"]
    assert values(relevant, docs, "recall_at_1", relevance_level=2) == 0
    assert values(relevant, docs, "mrr", relevance_level=2) == 0.5
    assert values(relevant, docs, "ndcg_at_2", relevance_level=2) == values(relevant, docs, "ndcg_at_2")


def test_unanswerable_questions_are_scored_by_abstention_only():
    golden = golden_of({"answered": {"a": 1}, "empty": {"b": 1}, "none1": {}, "none2": {"x": 0}})
    run = ranked({"answered": ["a"], "none1": ["z"]})  # "empty" and "none2" returned nothing
    evaluation = score(golden, run, ["recall_at_1", ABSTAIN_CORRECT, ABSTAIN_FALSE])
    assert evaluation.per_query.loc["none1", "recall_at_1"] != evaluation.per_query.loc["none1", "recall_at_1"]  # NaN
    assert evaluation.mean["recall_at_1"] == 0.5  # answered 1, empty 0; unanswerable not averaged in as 0
    assert evaluation.mean[ABSTAIN_CORRECT] == 0.5  # none2 got nothing, none1 got something
    assert evaluation.mean[ABSTAIN_FALSE] == 0.5  # "empty" is answerable and got nothing


def test_default_metrics_add_abstention_rates_that_apply(seed_example):
    golden, run = seed_example
    assert ABSTAIN_CORRECT not in score(golden, run).mean  # no unanswerable question
    with_unanswerable = golden_of({"q": {"a": 1}, "u": {}})
    mean = score(with_unanswerable, ranked({"q": ["a"]})).mean
    assert mean[ABSTAIN_CORRECT] == 1.0 and mean[ABSTAIN_FALSE] == 0.0 and mean["ndcg_at_10"] == 1.0


def test_every_run_breaks_ties_by_doc_id_descending_whatever_order_it_came_in():
    frame = pd.DataFrame({"qid": ["q"] * 3, "docid": ["d1", "d3", "d2"], "score": [1.0, 1.0, 2.0]})
    assert [d for d, _ in Run.from_scored(frame).rankings()["q"]] == ["d2", "d3", "d1"]
    for given in ([("d2", 2.0), ("d1", 1.0), ("d3", 1.0)], [("d2", 2.0), ("d3", 1.0), ("d1", 1.0)]):
        pipeline = Run.from_ranked({"q": given})  # a retriever's order, ties as the corpus file had them
        assert [d for d, _ in pipeline.rankings()["q"]] == ["d2", "d3", "d1"]


TIES = {"q1": [("a", 3.0), ("x", 2.0), ("b", 2.0), ("c", 1.0)], "q2": [("y", 2.0), ("z", 2.0)], "q3": [("d", 1.0)]}


@pytest.mark.parametrize(
    ("relevant", "metrics", "expected"),
    [
        # ranks 2-3 tie (x, b; b relevant): recall_at_2 holds x, the higher id, not b
        ({"q1": {"b": 1}}, ["recall_at_2"], "run: on 1 of 1 questions a metric's cutoff splits documents of the same "
         "score with a relevant one among them, e.g. question 'q1': ranks 2-3 tie at 2.0 ('x', 'b') across the cutoff "
         "at 2; which of them count within it is the tie rule's choice (document id, highest first, as trec_eval), not "
         "the scores'"),
        ({"q1": {"b": 1}, "q2": {"z": 2}}, ["recall_at_1", "ndcg_at_2"], "run: on 2 of 2 questions"),
        ({"q1": {"b": 1}}, ["recall_at_1", "recall_at_3", "mrr"], None),  # no cutoff inside the tie
        ({"q1": {"x": 1, "b": 1}}, ["recall_at_2"], None),  # both relevant alike: the cutoff holds as much either way
        ({"q1": {"a": 1}, "q2": {"q": 1}}, ["recall_at_1"], None),  # no relevant document among the tied
    ],
)  # fmt: skip
def test_a_cutoff_that_splits_tied_scores_around_a_relevant_document_is_named_once(caplog, relevant, metrics, expected):
    golden = golden_of(relevant)
    run = Run.from_ranked({q: hits for q, hits in TIES.items() if q in relevant})
    with caplog.at_level(logging.WARNING):
        evaluation = score(golden, run, metrics)
        score(golden, run.restrict(golden.ids), metrics)  # scored again (as calibration does): not said again
    said = [m for m in caplog.messages if "cutoff splits" in m]
    if expected is None:
        assert said == []
    else:
        assert len(said) == 1 and said[0].startswith(expected)
    assert evaluation.per_query.loc["q1", metrics[0]] == score(golden, run, metrics).per_query.loc["q1", metrics[0]]


def test_a_document_listed_twice_keeps_its_best_score_with_one_warning(caplog):
    frame = pd.DataFrame({"qid": ["q"] * 4, "docid": ["a", "b", "a", "b"], "score": [1.0, 3.0, 5.0, 0.5]})
    with caplog.at_level(logging.WARNING):
        run = Run.from_scored(frame)
    assert run.rankings()["q"] == [("a", 5.0), ("b", 3.0)]
    assert len([r for r in caplog.records if "more than once" in r.message]) == 1


def test_missing_and_extra_queries(caplog):
    golden = golden_of({"q1": {"a": 1}, "q2": {"b": 1}})
    with caplog.at_level(logging.WARNING):
        evaluation = score(golden, ranked({"q1": ["a"], "stray": ["a"], "stray2": ["b"]}), ["recall_at_1"])
    assert evaluation.per_query["recall_at_1"].to_dict() == {"q1": 1.0, "q2": 0.0}
    assert evaluation.per_query.loc["q2", "abstained"] == 1.0
    assert len([r for r in caplog.records if "not in the golden set" in r.message]) == 1


def test_many_cutoffs_past_the_deepest_result():
    evaluation = score(
        golden_of({"q": {"a": 1, "b": 1}}), ranked({"q": ["a"]}), ["recall_at_1", "recall_at_1000", "ndcg_at_1000"]
    )
    assert evaluation.mean["recall_at_1000"] == 0.5
    assert evaluation.mean["ndcg_at_1000"] == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_an_empty_run_scores_zero_everywhere():
    evaluation = score(golden_of({"q": {"a": 1}}), Run.from_ranked({}), ["ndcg_at_10", "map", "r_precision", "mrr"])
    assert all(v == 0 for v in evaluation.mean.values())


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("ndcg_at_0", "k must be a positive integer"),
        ("recall_at_-3", "k must be a positive integer"),
        ("recall", "needs a cutoff"),
        ("r_precision_at_5", "takes no cutoff"),
        ("bleu", "valid metrics: recall_at_K"),
        ("ndcg@10", "unknown metric"),
    ],
)
def test_bad_metric_names(name, problem):
    with pytest.raises(InputError, match=problem):
        Metric.parse(name)


def test_relevance_level_must_be_positive(seed_example):
    with pytest.raises(InputError, match="relevance level"):
        score(*seed_example, ["mrr"], relevance_level=0)


def test_groups_by_type_and_tag_and_the_worst_questions():
    golden = golden_of(
        {"a": {"x": 1}, "b": {"y": 1}, "c": {"z": 1}, "u": {}}, types={"a": "t1", "b": "t1", "c": "t2", "u": "none"}
    )
    golden = type(golden)(tuple(q if q.id != "c" else type(q)(**{**q.__dict__, "tags": ("hard",)}) for q in golden))
    evaluation = score(golden, ranked({"a": ["x"], "b": ["q", "y"], "c": ["q"]}), ["mrr"])
    by_type = evaluation.by("type")
    assert by_type.loc["t1", "mrr"] == 0.75 and by_type.loc["t2", "mrr"] == 0 and by_type.loc["t1", "n"] == 2
    assert by_type.loc["none", ABSTAIN_CORRECT] == 1.0 and np.isnan(by_type.loc["none", "mrr"])
    assert evaluation.by_tag().loc["hard", "mrr"] == 0
    worst = evaluation.worst(2)
    assert worst.index.tolist() == ["c"]  # below the median (b's 0.5), never a perfect one
    assert worst.loc["c", "retrieved"] == [("q", None)] and worst.loc["c", "relevant"] == {"z": 1}


def test_the_worst_questions_are_below_the_median_and_never_perfect():
    golden = golden_of({"a": {"x": 1}, "b": {"x": 1}, "c": {"x": 1}, "d": {"y": 1, "q": 0}, "e": {"z": 1}})
    results = ranked({"a": ["x"], "b": ["x"], "c": ["x"], "d": ["q", "n", "y"], "e": ["z"]})
    assert score(golden, results, ["mrr"]).worst(5).index.tolist() == ["d"]  # not the four perfect ones
    results = ranked({"a": ["x"], "b": ["x"], "c": ["x"], "d": ["y"], "e": ["z"]})
    assert score(golden, results, ["mrr"]).worst(5).index.tolist() == []  # all perfect: none below the median
    results = ranked({"a": ["x"], "b": ["n", "x"], "c": ["m"], "d": ["q", "n", "y"], "e": ["z"]})
    worst = score(golden, results, ["mrr"]).worst(5)  # mrr 1, 0.5, 0, 1/3, 1: median 0.5
    assert worst.index.tolist() == ["c", "d"] and worst["mrr"].tolist() == pytest.approx([0, 1 / 3])
    assert worst.loc["d", "retrieved"] == [("q", 0), ("n", None), ("y", 1)]  # q judged not relevant, n unjudged
    assert doc_grades(worst.loc["d", "retrieved"]) == "q:0, n:?, y:1"
    table = evaluation_tables(score(golden, results, ["mrr"]), per_source=False)["worst_queries"]
    assert table.set_index("qid").loc["d", "retrieved"] == "q:0, n:?, y:1"


def test_a_run_written_as_trec_reads_back_identically(tmp_path):
    run = Run.from_ranked({"q1": [("b", 2.5), ("a", 2.5), ("c", 0.1)], "q2": [("007", 1.0)]})
    run.to_trec(tmp_path / "run.trec")
    assert Run.read(tmp_path / "run.trec").rankings() == run.rankings()
    assert (tmp_path / "run.trec").read_text().splitlines()[0] == "q1 Q0 b 1 2.5 golden-sweep"


def test_holes_in_the_golden_set_are_named_with_how_many_questions_they_touch(caplog):
    from sweep.experiment.trial import warn_about_holes

    golden = golden_of({"a": {"d1": 1, "d2": 0}, "b": {"d3": 1}, "c": {"d4": 1}, "u": {}})
    run = ranked({"a": ["d1", "x", "d2"], "b": ["d3", "y", "z"], "c": ["d4"], "u": ["w"]})
    evaluation = score(golden, run)
    assert evaluation.per_query["judged_at_10"].to_dict() == pytest.approx(
        {"a": 2 / 3, "b": 1 / 3, "c": 1.0, "u": float("nan")}, nan_ok=True
    )  # the unanswerable question is scored by abstention, like every rank metric
    with caplog.at_level("WARNING"):
        warn_about_holes(evaluation, floor=0.5)
    assert "1 of 3 answerable questions have judged_at_10 below 0.5" in caplog.text
    caplog.clear()
    warn_about_holes(evaluation, floor=0.3)
    assert caplog.text == ""


# ---------------------------------------------------------------- provenance: pending questions, sources


def with_provenance(golden, sources=None, statuses=None):
    """`golden` with some questions' source and status set ({qid: value})."""
    sources, statuses = sources or {}, statuses or {}
    return replace(
        golden,
        questions=tuple(
            replace(q, source=sources.get(q.id, q.source), status=statuses.get(q.id, q.status)) for q in golden
        ),
    )


def test_pending_questions_are_not_scored_and_one_warning_counts_them(caplog):
    golden = with_provenance(
        golden_of({"a": {"x": 1}, "b": {"y": 1}, "c": {"z": 1}}), statuses={"b": "pending", "c": "pending"}
    )
    run = ranked({"a": ["x"], "b": ["y"], "c": ["q", "z"]})  # the pending questions' rankings are kept, for pooling
    with caplog.at_level(logging.WARNING):
        evaluation = score(golden, run, ["mrr"])
        again = score(golden, run.restrict(["a", "b"]), ["mrr"])  # a hybrid's member, scored on the same set
    assert evaluation.per_query.index.tolist() == ["a"] and evaluation.mean["mrr"] == 1.0
    assert [q.id for q in evaluation.golden] == ["a"] and again.per_query.index.tolist() == ["a"]
    assert [r.message for r in caplog.records] == [
        "<memory>: 2 of 3 questions are pending review (status: pending) and are not scored until a person reviews them"
    ]  # and no word of the pending questions' rankings as queries the golden set lacks
    with pytest.raises(InputError, match=r"<memory>: every question is pending review"):
        score(with_provenance(golden, statuses={"a": "pending"}), run)


def test_context_scored_on_pending_questions_is_left_out():
    golden = with_provenance(golden_of({"a": {"x": 1}, "b": {"y": 1}}), statuses={"b": "pending"})
    evaluation = score(golden, ranked({"a": ["x"], "b": ["y"]}), ["mrr"])
    recall = "context/recall_at_5"
    context = ContextScores(pd.DataFrame({recall: [0.5, 1.0]}, index=["a", "b"]), {"a": "d: text", "b": ""}, (5,))
    with_context = evaluation.with_context(context)
    assert with_context.per_query[recall].to_dict() == {"a": 0.5}
    assert with_context.mean[recall] == 0.5 and with_context.mean[CONTEXT_N] == 1.0
    assert dict(with_context.context.missing) == {"a": "d: text"}


def test_every_metric_splits_by_source_once_a_question_is_generated():
    types = {"h1": "t1", "h2": "t2", "s1": "t1", "u": "none"}
    golden = golden_of({"h1": {"x": 1}, "h2": {"y": 1}, "s1": {"z": 1}, "u": {}}, types=types)
    run = ranked({"h1": ["x"], "h2": ["q", "y"], "s1": ["q"], "u": ["w"]})
    human_only = score(golden, run, ["mrr"])
    assert human_only.source_means() == {}  # one source: no split, and the per-type means as before
    two = score(with_provenance(golden, sources={"s1": "synthetic"}), run, ["mrr"])
    assert two.type_means() == human_only.type_means()
    assert two.source_means() == {
        "source/human/n": 3, "source/human/mrr": 0.75, "source/synthetic/n": 1, "source/synthetic/mrr": 0.0
    }  # fmt: skip
    abstention = score(with_provenance(golden, sources={"s1": "synthetic"}), run, ["mrr", ABSTAIN_CORRECT])
    assert abstention.source_means()[f"source/human/{ABSTAIN_CORRECT}"] == 0.0  # "u" got something
    assert f"source/synthetic/{ABSTAIN_CORRECT}" not in abstention.source_means()  # no unanswerable: undefined
    assert two.by("source").loc["human", "mrr"] == 0.75 and two.by("source").loc["synthetic", "n"] == 1
    recall = "context/recall_at_5"
    context = ContextScores(pd.DataFrame({recall: [1.0, 0.5, 0.0]}, index=["h1", "h2", "s1"]), {}, (5,))
    split = two.with_context(context).source_means()
    assert split[f"source/human/{recall}"] == 0.75 and split[f"source/synthetic/{recall}"] == 0.0
    assert split[f"source/human/{CONTEXT_N}"] == 2
    # a synthetic question still pending review leaves people's questions only scored: no split
    pending = with_provenance(golden, sources={"s1": "synthetic"}, statuses={"s1": "pending"})
    assert score(pending, run, ["mrr"]).source_means() == {}
    # generated questions alone are still told apart (what sweep.generate writes, once reviewed)
    generated = with_provenance(golden, sources=dict.fromkeys(golden.by_id, "synthetic"))
    assert score(generated, run, ["mrr"]).source_means() == {"source/synthetic/n": 4, "source/synthetic/mrr": 0.5}


def test_the_bundled_example_scores_as_before_and_the_same_with_every_field_spelled_out(tmp_path):
    example = Path(__file__).resolve().parents[2] / "data" / "example"
    golden, run = load_golden(example / "golden.jsonl", warn=False), Run.read(example / "run.trec")
    evaluation = score(golden, run)
    assert round(evaluation.mean["ndcg_at_10"], 6) == 0.628784 and evaluation.mean["recall_at_5"] == 0.6875
    spelled = [json.loads(line) for line in (example / "golden.jsonl").read_text().splitlines()]
    for record in spelled:
        record |= {"source": "human", "status": "reviewed"}
        record["relevant"] = {
            d: {"grade": g, "by": "ana", "at": "2026-12-06T10:00:00Z"} for d, g in record["relevant"].items()
        }
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in spelled))
    spelled_out = score(load_golden(tmp_path / "golden.jsonl", warn=False), run)
    pd.testing.assert_frame_equal(spelled_out.per_query, evaluation.per_query)
    assert spelled_out.type_means() == evaluation.type_means() and spelled_out.source_means() == {}
