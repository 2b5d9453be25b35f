"""The scorer's fast path: TREC files read in columns and scored by the numpy core, without pandas.

It must give what the pandas path (`load_golden`, `Run.read`, `score`) gives, to the last bit,
and hand every file it does not read cleanly to that path.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
import pytest

from helpers.data import random_judgments
from sweep.evaluate import Scores, evaluate, score_trec, to_json
from sweep.evaluation.measures import RankedJudgments
from sweep.formats.columns import repeats_within, trec_order
from sweep.formats.trec import qrels_columns, run_columns

METRICS = "recall_at_2,precision_at_3,hit_at_1,mrr,mrr_at_2,ndcg,ndcg_at_3,map,map_at_2,r_precision"


def trec_files(seed: int, cases: int, stranger: bool) -> tuple[list[str], list[str]]:
    """(qrels lines, run lines) of `cases` random cases (`random_judgments`): graded and negative
    judgments, unanswerable questions, tied scores, qrels queries missing from the run and, with
    `stranger`, a run query missing from the qrels."""
    qrels, run = random_judgments(seed, cases, range(-1, 4), (0.0, 0.5, 1.0, -1.0))
    qrels_lines = [f"{qid} 0 {doc} {grade}" for qid, judged in qrels.items() for doc, grade in judged.items()]
    run_lines = [
        f"{qid} Q0 {doc} {rank} {score} t"
        for qid, scores in run.items()
        for rank, (doc, score) in enumerate(sorted(scores.items(), key=lambda item: -item[1]), start=1)
    ]
    return qrels_lines, run_lines + (["stranger Q0 d1 1 1.0 t"] if stranger else [])


def args(qrels: Path, run: Path, **options) -> argparse.Namespace:
    defaults = {"metrics": None, "relevance_level": 1, "gain": "linear", "split": "test"}
    return argparse.Namespace(qrels=str(qrels), run=str(run), **(defaults | options))


def both_paths(qrels: Path, run: Path, **options) -> tuple[dict, dict]:
    """(fast path's JSON, pandas path's JSON), per question and per type included."""
    fast = score_trec(qrels_columns(qrels), run_columns(run), args(qrels, run, **options))
    slow = Scores.of(evaluate(args(qrels, run, **options)))
    return to_json(fast, True, True), to_json(slow, True, True)


@pytest.mark.parametrize("layout", ["sorted", "shuffled", "tabs"])
@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("gain", ["linear", "exponential"])
def test_the_fast_path_gives_exactly_what_the_pandas_path_gives(tmp_path, layout, level, gain):
    """On files of one, two and sixty random cases (about 270 questions), every metric and the
    per-question and per-type scores, bit for bit."""
    separator = "\t" if layout == "tabs" else " "
    for seed, cases in enumerate((1, 2, 60)):
        qrels_lines, run_lines = trec_files(seed, cases, stranger=seed != 1)
        if layout == "shuffled":  # trec_eval orders a run itself; files need not be in rank order
            random.Random(seed).shuffle(run_lines)
        qrels, run = tmp_path / f"qrels-{seed}.txt", tmp_path / f"run-{seed}.txt"
        qrels.write_text("".join(line.replace(" ", separator) + "\n" for line in qrels_lines))
        run.write_text("".join(line.replace(" ", separator) + "\n" for line in run_lines))
        for metrics in (None, METRICS + ",abstain/correct_rate"):
            fast, slow = both_paths(qrels, run, metrics=metrics, relevance_level=level, gain=gain)
            assert fast == slow, (seed, metrics)


@pytest.mark.parametrize(
    ("run_text", "why"),
    [
        ("q1 Q0 d1 1 2.0 t\nq1  Q0 d2 2 1.0 t\n", "runs of spaces"),
        ("q1 Q0 d1 1 2.0 t\nq1 Q0 d1 2 1.0 t\n", "a document listed twice"),
        ("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 nan t\n", "a score that is not finite"),
        ("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0\n", "a missing field"),
        ("q1\tQ0\td 1\t1\t2.0\tt\n", "a space inside a tab-separated field"),
    ],
)
def test_a_run_the_column_reader_does_not_take_goes_through_pandas(tmp_path, run_text, why):
    run = tmp_path / "run.trec"
    run.write_text(run_text)
    assert run_columns(run) is None, why


@pytest.mark.parametrize(
    ("qrels_text", "why"),
    [
        ("q1 0 d1 1\nq1 0 d1 2\n", "a document judged twice"),
        ("q1 0 d1 1\nq1 0 d2 1.5\n", "a grade that is not an integer"),
        ("q1 0 d1 1\nq1 0 d2 101\n", "a grade out of range"),
        ("q1 0 d1 1\nq1 0 d2\n", "a missing field"),
    ],
)
def test_qrels_the_column_reader_does_not_take_go_through_pandas(tmp_path, qrels_text, why):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(qrels_text)
    assert qrels_columns(qrels) is None, why


def test_trec_order_is_trec_evals_order():
    """Each query's rows together, score descending, then document id descending; None when the
    rows already are so (the usual run file)."""
    rng = np.random.default_rng(0)
    for _ in range(500):
        n = int(rng.integers(1, 30))
        query, score, doc = rng.integers(0, 4, n), rng.integers(0, 3, n).astype(float), rng.integers(0, 9, n)
        if rng.random() < 0.5:  # grouped and score-sorted, as files usually are, ties in any order
            rows = np.lexsort((rng.random(n), -score, query))
            query, score, doc = query[rows], score[rows], doc[rows]
        moves = trec_order(query, score, lambda rows, doc=doc: doc[rows])
        ordered = np.arange(n)
        if moves is not None:
            ordered[moves[0]] = moves[1]
        assert sorted(ordered.tolist()) == list(range(n))
        q, s, d = query[ordered], score[ordered], doc[ordered]
        assert len(np.unique(q)) == 1 + np.count_nonzero(q[1:] != q[:-1])  # each query's rows together
        same = q[1:] == q[:-1]
        assert np.all(((s[1:] < s[:-1]) | ((s[1:] == s[:-1]) & (d[1:] <= d[:-1])))[same])
        if moves is not None:
            assert not np.array_equal(ordered, np.arange(n))


@pytest.mark.parametrize("n_docs", [300, 10**9])  # keys of (query, document) fit in int32, or need int64
@pytest.mark.parametrize("n_judged", [0, 1, 50, 5_000])
def test_the_join_finds_exactly_the_judged_documents_each_query_retrieved(n_judged, n_docs):
    rng = np.random.default_rng(n_judged)
    n_queries = 40
    query_row = rng.permutation(n_queries)  # the run numbers its queries its own way ...
    query_row[query_row == 0] = -1  # ... and has one that the golden set does not
    run_query = np.sort(rng.integers(0, n_queries, 4_000))
    run_doc = rng.integers(0, n_docs, len(run_query))
    retrieved = rng.integers(0, len(run_query), n_judged // 2)  # half of the judgments hit
    pairs = {(int(query_row[q]), int(d)) for q, d in zip(run_query[retrieved], run_doc[retrieved])}
    pairs |= {
        (int(q), int(d)) for q, d in zip(rng.integers(0, n_queries, n_judged), rng.integers(-1, n_docs, n_judged))
    }
    pairs = sorted(pair for pair in pairs if pair[0] >= 0)
    judged_query, judged_doc = (np.array([p[i] for p in pairs], np.int64) for i in (0, 1))
    judged_grade = rng.integers(-1, 4, len(pairs))
    ranked = RankedJudgments.join(
        n_queries, query_row, run_query, run_doc, rng.random(len(run_query)), judged_query, judged_doc, judged_grade
    )
    grade_of = dict(zip(pairs, judged_grade.tolist()))
    first = {q: int(np.flatnonzero(run_query == q)[0]) for q in np.unique(run_query).tolist()}
    expected = [
        (int(query_row[q]), row - first[q] + 1, grade_of[(int(query_row[q]), d)])
        for row, (q, d) in enumerate(zip(run_query.tolist(), run_doc.tolist()))
        if (int(query_row[q]), d) in grade_of
    ]
    assert len(expected) >= n_judged // 5
    assert list(zip(ranked.hit_query.tolist(), ranked.hit_rank.tolist(), ranked.hit_grade.tolist())) == expected
    assert ranked.n_retrieved.tolist() == [int((query_row[run_query] == row).sum()) for row in range(n_queries)]


@pytest.mark.parametrize("seed", range(3))
def test_per_type_means_are_the_ones_a_run_logs(tmp_path, seed):
    """`sweep.evaluate --per-type` and the type means logged to MLflow (`Evaluation.type_means`),
    to the last digit, on 300 questions of 3 types (enough for sums to round differently)."""
    rng = np.random.default_rng(seed)
    golden, run = tmp_path / "golden.jsonl", tmp_path / "run.txt"
    questions, lines = [], []
    for n in range(300):
        docs = rng.choice(50, size=12, replace=False)
        relevant = {f"d{d}": int(rng.integers(0, 3)) for d in docs[: rng.integers(0, 4)]}
        questions.append(
            {"id": f"q{n}", "question": f"q{n}", "type": ["factoid", "howto", "numeric"][n % 3], "relevant": relevant}
        )
        lines += [
            f"q{n} Q0 d{d} {rank} {1 - rank / 20} t" for rank, d in enumerate(rng.choice(50, size=10, replace=False), 1)
        ]
    golden.write_text("".join(json.dumps(q) + "\n" for q in questions))
    run.write_text("".join(line + "\n" for line in lines))
    options = args(golden, run)
    logged = evaluate(options).type_means()
    printed = to_json(Scores.of(evaluate(options)), False, True)["mean"]
    assert {name: value for name, value in printed.items() if name.startswith("type/")} == logged


@pytest.mark.parametrize("n_items", [9, 10**9])  # (group, item) keys fit in int32, or need int64
def test_repeats_within_finds_an_item_twice_in_one_group(n_items):
    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.integers(0, 40))
        group, item = rng.integers(0, 5, n), rng.integers(n_items - 9, n_items, n)
        pairs = list(zip(group.tolist(), item.tolist()))
        assert repeats_within(group, item, n_items) == (len(set(pairs)) < len(pairs))
