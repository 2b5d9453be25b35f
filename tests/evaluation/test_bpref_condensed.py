"""Holes measured without labelling them: `bpref` and condensed lists (trec_eval -J), against
pytrec_eval and trec_eval's own outputs.

The random cases (`random_judgments`: grades 0..3, unjudged documents in every ranking, tied
scores, questions the run left out) hold some 1,300 questions per evaluation; our runs rank ties as
trec_eval does (score descending, then document id descending), so every value must agree per
question to 1e-12.
"""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import pytrec_eval

from helpers.commands import compose_config
from helpers.data import golden_of, random_judgments, ranked
from helpers.paths import TREC_EVAL_REFERENCE as REFERENCE
from sweep.errors import InputError
from sweep.evaluate import evaluate, score_trec, to_json
from sweep.evaluation import score
from sweep.evaluation.registry import DEFAULT_METRICS, Metric, measure_of
from sweep.experiment.trial import check_settings
from sweep.formats.golden import GoldenSet, Question, load_golden
from sweep.formats.runs import Run
from sweep.formats.trec import read_qrels, read_run

GRADES, SCORES = range(4), (0.0, 0.5, 1.0, 1.5, 2.0, -1.0)  # few distinct scores: ties are common
OURS_TO_TREC = {
    "bpref": "bpref",
    "ndcg_at_10": "ndcg_cut_10",
    "precision_at_10": "P_10",
    "mrr": "recip_rank",
    "map": "map",
    "r_precision": "Rprec",
    "recall_at_5": "recall_5",
}
TREC_MEASURES = {"bpref", "ndcg_cut.10", "P.10", "recip_rank", "map", "Rprec", "recall.5"}


def both(qrels: dict, run: dict, relevance_level: int, condensed: bool) -> tuple[dict, dict]:
    """(ours per answerable question, pytrec_eval's per question) for the same qrels and run."""
    golden = GoldenSet(tuple(Question(qid, "", judged) for qid, judged in qrels.items()))
    evaluation = score(
        golden, Run.from_dict(run), list(OURS_TO_TREC), relevance_level=relevance_level, condensed=condensed
    )
    per_query = evaluation.per_query
    ours = per_query[per_query["answerable"]][list(OURS_TO_TREC)].to_dict("index")
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, TREC_MEASURES, relevance_level=relevance_level, judged_docs_only_flag=condensed
    )
    return ours, evaluator.evaluate(run)


def assert_agree(ours: dict, theirs: dict, names: list[str]) -> None:
    for qid, values in ours.items():
        for name in names:
            # trec_eval -c: a question the run left out retrieved nothing and scores 0
            expected = theirs[qid][OURS_TO_TREC[name]] if qid in theirs else 0.0
            assert values[name] == pytest.approx(expected, abs=1e-12), (qid, name)


@pytest.mark.parametrize("relevance_level", [1, 2, 3])
def test_bpref_agrees_with_pytrec_eval_per_question(relevance_level):
    ours, theirs = both(*random_judgments(40 + relevance_level, 300, GRADES, SCORES), relevance_level, False)
    assert len(ours) > 1000
    assert_agree(ours, theirs, ["bpref"])
    values = np.array([row["bpref"] for row in ours.values()])
    assert 0 < values.mean() < 1 and (values == 1).any() and (values == 0).any()  # every kind of case met


@pytest.mark.parametrize("relevance_level", [1, 2])
def test_condensed_lists_agree_with_trec_eval_judged_docs_only(relevance_level):
    """`condensed=True` is pytrec_eval's `judged_docs_only_flag` (trec_eval -J), metric by metric."""
    qrels, run = random_judgments(50 + relevance_level, 300, GRADES, SCORES)
    ours, theirs = both(qrels, run, relevance_level, condensed=True)
    assert_agree(ours, theirs, list(OURS_TO_TREC))
    as_retrieved, _ = both(qrels, run, relevance_level, condensed=False)
    changed = sum(ours[qid]["ndcg_at_10"] != as_retrieved[qid]["ndcg_at_10"] for qid in ours)
    assert changed > 100  # the random runs do have holes, and condensing closes them
    assert all(ours[qid]["bpref"] == as_retrieved[qid]["bpref"] for qid in ours)  # bpref never saw the holes


@pytest.mark.parametrize(
    ("out_file", "qrels", "run", "relevance_level"),
    [
        ("out.test.aq", "qrels.test", "results.test", 1),
        ("out.test.aqc", "qrels.test", "results.trunc", 1),  # -c: a query missing from the run scores 0
        ("out.test.aql", "qrels.rel_level", "results.test", 2),  # -1 grades: pooled, not judged; -l2
    ],
)
def test_bpref_matches_trec_eval_to_four_decimals(out_file, qrels, run, relevance_level):
    reference = {
        qid: float(value)
        for measure, qid, value in (line.split() for line in (REFERENCE / out_file).read_text().splitlines())
        if measure == "bpref"
    }
    evaluation = score(
        load_golden(REFERENCE / qrels, warn=False),
        Run.read(REFERENCE / run),
        ["bpref"],
        relevance_level=relevance_level,
    )
    assert len(reference) == 4 and 0 < reference["all"] < 1
    for qid, value in reference.items():
        got = evaluation.mean["bpref"] if qid == "all" else evaluation.per_query.loc[qid, "bpref"]
        assert got == pytest.approx(value, abs=5e-5), qid


def test_bpref_by_hand():
    """R = {a, b}, N = {n1, n2, n3}, u unjudged: ranking n1 a u n2 b. a has 1 non-relevant above
    it, b 2; min(R, N) = 2: (1 - 1/2 + 1 - 2/2) / 2 = 0.25. Without judged non-relevant documents
    nothing ranks a relevant one down: 1 per relevant document retrieved, over R."""
    golden = golden_of({"q": {"a": 1, "b": 1, "n1": 0, "n2": 0, "n3": 0}, "few": {"a": 1, "b": 1}})
    run = ranked({"q": ["n1", "a", "u", "n2", "b"], "few": ["u", "a"]})
    per_query = score(golden, run, ["bpref"]).per_query
    assert per_query.loc["q", "bpref"] == pytest.approx(0.25) and per_query.loc["few", "bpref"] == 0.5


def test_condensed_by_hand_abstention_and_judged_see_the_ranking_as_retrieved():
    """Condensing moves `a` from rank 2 to 1; a question whose ranking holds no judged document
    scores 0 on it but did not abstain (it answered, with nothing we can grade), and the holes
    `judged_at_k` counts are those of the ranking as retrieved."""
    golden = golden_of({"q": {"a": 1, "b": 0}, "holes": {"c": 1}, "none": {}})
    run = ranked({"q": ["u1", "a", "u2", "b"], "holes": ["u1", "u2"], "none": ["u3"]})
    names = ["mrr", "precision_at_1", "judged_at_2", "abstain/correct_rate", "abstain/false_rate"]
    as_retrieved, condensed = (score(golden, run, names, condensed=c) for c in (False, True))
    assert as_retrieved.per_query.loc["q", "mrr"] == 0.5 and condensed.per_query.loc["q", "mrr"] == 1.0
    assert condensed.per_query.loc["q", "precision_at_1"] == 1.0 and condensed.per_query.loc["holes", "mrr"] == 0.0
    for column in ("n_retrieved", "top_score", "abstained", "judged_at_2"):
        assert condensed.per_query[column].equals(as_retrieved.per_query[column]), column
    assert condensed.per_query.loc["q", "judged_at_2"] == 0.5 and condensed.per_query.loc["holes", "n_retrieved"] == 2
    assert condensed.mean["abstain/false_rate"] == 0.0 and condensed.mean["abstain/correct_rate"] == 0.0


def test_a_tie_is_looked_for_at_the_condensed_cutoff():
    """As retrieved, `b` and `a` tie at ranks 2-3, which no cutoff at 1 splits; condensed they are
    ranks 1-2 (b first: ids descending), and the cutoff at 1 splits them."""
    golden = golden_of({"q": {"a": 1, "b": 0}})
    run = Run.from_ranked({"q": [("u", 3.0), ("b", 2.0), ("a", 2.0)]})
    assert score(golden, run, ["precision_at_1"]).scores.tied is None
    tied = score(golden, run, ["precision_at_1"], condensed=True).scores.tied
    assert (tied.k, tied.first_rank, tied.last_rank, tied.docs) == (1, 1, 2, ("b", "a"))


def test_trec_files_in_columns_score_condensed_lists_as_through_pandas(tmp_path):
    """`python -m sweep.evaluate --condensed`: the fast route (TREC files in columns) and the pandas
    route give the same JSON, per question and per type, negative grades included."""
    qrels, run = random_judgments(60, 80, range(-1, 4), SCORES)
    qrels_path, run_path = tmp_path / "qrels.txt", tmp_path / "run.trec"
    qrels_path.write_text("".join(f"{q} 0 {d} {g}\n" for q, judged in qrels.items() for d, g in judged.items()))
    run_path.write_text(
        "".join(f"{q} Q0 {d} 1 {s} t\n" for q, scores in run.items() for d, s in scores.items())  # trec_eval sorts
    )
    for metrics in (None, ",".join(OURS_TO_TREC)):
        args = argparse.Namespace(
            qrels=str(qrels_path), run=str(run_path), metrics=metrics, relevance_level=2, gain="linear",
            split="test", condensed=True,
        )  # fmt: skip
        in_columns = to_json(score_trec(read_qrels(qrels_path), read_run(run_path), args), True, True)
        assert in_columns == to_json(evaluate(args).scores, True, True)
        args.condensed = False
        assert in_columns != to_json(evaluate(args).scores, True, True)


def test_bpref_is_a_default_rank_metric_without_a_cutoff():
    assert "bpref" in DEFAULT_METRICS and Metric.parse("bpref").k is None
    assert measure_of("bpref").formula.startswith("Σ over the relevant documents retrieved")
    with pytest.raises(InputError, match="takes no cutoff"):
        Metric.parse("bpref_at_10")


def test_golden_condensed_composes_for_every_golden_set(tmp_path):
    for golden in ("bundled", "beir", "chunking_eval"):
        extra = [] if golden == "bundled" else [f"golden.path={tmp_path}"]
        assert compose_config(f"golden={golden}", *extra).golden.condensed is False
        assert compose_config(f"golden={golden}", *extra, "golden.condensed=true").golden.condensed is True
    check_settings(compose_config("golden.condensed=true"))
    with pytest.raises(InputError, match=r"golden.condensed='sometimes': must be true or false"):
        check_settings(compose_config("golden.condensed=sometimes"))


@pytest.mark.slow
def test_a_trial_with_golden_condensed_scores_condensed_lists(tmp_path, small_kb_files, monkeypatch):
    """A whole BM25 trial on the small knowledge base, logged to a store of its own."""
    from helpers.stores import copy_blank_store
    from sweep.experiment.trial import run_trial

    copy_blank_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.chdir(tmp_path)
    cfg = compose_config(
        "model=bm25", "golden.condensed=true", f"golden.path={small_kb_files / 'golden.jsonl'}",
        f"golden.corpus={small_kb_files / 'corpus.jsonl'}", f"cache_dir={tmp_path / 'cache'}",
    )  # fmt: skip
    trial = run_trial(cfg)
    golden, run = trial.evaluation.golden, trial.evaluation.run
    condensed, as_retrieved = (score(golden, run, condensed=c).scores.rank_means for c in (True, False))
    assert trial.evaluation.scores.rank_means == condensed != as_retrieved
    assert trial.objective == condensed["ndcg_at_10"] and trial.record.metrics["bpref"] == condensed["bpref"]
