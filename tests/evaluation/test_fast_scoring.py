"""TREC files read in columns and scored without pandas, as `python -m sweep.evaluate --json` scores them.

They must give what pytrec_eval gives on the same files, and what the route through pandas
(`load_golden`, `Run.read`, `score`: other readers and conversions to the same scorer) gives, to
the last bit.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

from helpers.data import random_judgments
from sweep.errors import InputError
from sweep.evaluate import evaluate, score_trec, to_json
from sweep.evaluation.measures import RankedJudgments
from sweep.formats.columns import repeated_rows, repeats_within, single_spaced, trec_order
from sweep.formats.trec import read_qrels, read_run

METRICS = "recall_at_2,precision_at_3,hit_at_1,mrr,mrr_at_2,ndcg,ndcg_at_3,map,map_at_2,r_precision"
TREC_NAMES = {
    "recall_at_2": "recall_2",
    "precision_at_3": "P_3",
    "hit_at_1": "success_1",
    "mrr": "recip_rank",
    "ndcg": "ndcg",
    "ndcg_at_3": "ndcg_cut_3",
    "map": "map",
    "map_at_2": "map_cut_2",
    "r_precision": "Rprec",
}


def trec_files(seed: int, cases: int, stranger: bool, grades: range = range(-1, 4)) -> tuple[list[str], list[str]]:
    """(qrels lines, run lines) of `cases` random cases (`random_judgments`): graded and negative
    judgments, unanswerable questions, tied scores, qrels queries missing from the run and, with
    `stranger`, a run query missing from the qrels."""
    qrels, run = random_judgments(seed, cases, grades, (0.0, 0.5, 1.0, -1.0))
    qrels_lines = [f"{qid} 0 {doc} {grade}" for qid, judged in qrels.items() for doc, grade in judged.items()]
    run_lines = [
        f"{qid} Q0 {doc} {rank} {score} t"
        for qid, scores in run.items()
        for rank, (doc, score) in enumerate(sorted(scores.items(), key=lambda item: -item[1]), start=1)
    ]
    return qrels_lines, run_lines + (["stranger Q0 d1 1 1.0 t"] if stranger else [])


def write_files(folder: Path, name: str, qrels_lines: list[str], run_lines: list[str], separator: str = " "):
    qrels, run = folder / f"qrels-{name}.txt", folder / f"run-{name}.txt"
    qrels.write_text("".join(line.replace(" ", separator) + "\n" for line in qrels_lines))
    run.write_text("".join(line.replace(" ", separator) + "\n" for line in run_lines))
    return qrels, run


def args(qrels: Path, run: Path, **options) -> argparse.Namespace:
    defaults = {"metrics": None, "relevance_level": 1, "gain": "linear", "split": "test", "condensed": False}
    return argparse.Namespace(qrels=str(qrels), run=str(run), **(defaults | options))


def both_routes(qrels: Path, run: Path, **options) -> tuple[dict, dict]:
    """(the columns' JSON, the pandas route's JSON), per question and per type included."""
    in_columns = score_trec(read_qrels(qrels), read_run(run), args(qrels, run, **options))
    through_pandas = evaluate(args(qrels, run, **options)).scores
    return to_json(in_columns, True, True), to_json(through_pandas, True, True)


@pytest.mark.parametrize("layout", ["sorted", "shuffled", "tabs", "runs of blanks"])
@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("gain", ["linear", "exponential"])
def test_trec_files_in_columns_score_exactly_as_through_pandas(tmp_path, layout, level, gain):
    """On files of one, two and sixty random cases (about 270 questions), every metric and the
    per-question and per-type scores, bit for bit."""
    separator = {"tabs": "\t", "runs of blanks": " \t "}.get(layout, " ")
    for seed, cases in enumerate((1, 2, 60)):
        qrels_lines, run_lines = trec_files(seed, cases, stranger=seed != 1)
        if layout == "shuffled":  # trec_eval orders a run itself; files need not be in rank order
            random.Random(seed).shuffle(run_lines)
        qrels, run = write_files(tmp_path, str(seed), qrels_lines, run_lines, separator)
        for metrics in (None, METRICS + ",abstain/correct_rate"):
            in_columns, through_pandas = both_routes(qrels, run, metrics=metrics, relevance_level=level, gain=gain)
            assert in_columns == through_pandas, (seed, metrics)


@pytest.mark.parametrize("level", [1, 2])
def test_trec_files_in_columns_score_as_pytrec_eval_scores_them(tmp_path, level):
    """The reference outside this code base: pytrec_eval's parsers and trec_eval's measures on the
    same shuffled files (grades from 0: pytrec_eval hangs on negative ones, test_pytrec_eval_agreement)."""
    qrels_lines, run_lines = trec_files(7, 120, stranger=True, grades=range(4))
    random.Random(7).shuffle(run_lines)
    qrels, run = write_files(tmp_path, "ref", qrels_lines, run_lines)
    ours = to_json(
        score_trec(read_qrels(qrels), read_run(run), args(qrels, run, metrics=METRICS, relevance_level=level)),
        True,
        False,
    )
    with qrels.open() as q, run.open() as r:
        reference_qrels, reference_run = pytrec_eval.parse_qrel(q), pytrec_eval.parse_run(r)
    theirs = pytrec_eval.RelevanceEvaluator(reference_qrels, set(TREC_NAMES.values()), relevance_level=level)
    per_query = theirs.evaluate(reference_run)
    answerable = [qid for qid, values in ours["per_query"].items() if "abstain/correct" not in values]
    assert len(answerable) > 200
    for qid in answerable:
        for name, trec_name in TREC_NAMES.items():
            expected = per_query[qid][trec_name] if qid in per_query else 0.0  # trec_eval -c
            assert ours["per_query"][qid][name] == pytest.approx(expected, abs=1e-12), (qid, name)


@pytest.mark.parametrize(
    ("run_text", "rankings"),
    [
        ("q1 Q0 d1 1 2.0 t\nq1  Q0 d2 2 1.0 t\n", {"q1": ["d1", "d2"]}),
        ("\ufeffq1\t Q0 d1 1 2.0 t \r\n\r\n  \nq1 Q0 d2 2 3.0 t\r\n", {"q1": ["d2", "d1"]}),
        ("q1 Q0 d1 1 2.0 t extra fields\nq1 Q0 d2 2 1.0 t\n", {"q1": ["d1", "d2"]}),
        ("q1\tQ0\td 1\t1\t2.0\tt\n", {"q1": ["d"]}),  # trec_eval splits on the space too: score 1
        ("q1 Q0 d1 1 2.0 t\nq1 Q0 d1 2 1.0 t\nq2 Q0 d1 1 1.0 t\n", {"q1": ["d1"], "q2": ["d1"]}),
    ],
    ids=[
        "runs of spaces",
        "blanks, CRLF, a byte order mark",
        "fields past the sixth",
        "a space in a tab-separated field",
        "a document listed twice",
    ],
)
def test_a_run_is_read_as_trec_eval_reads_it(tmp_path, run_text, rankings):
    path = tmp_path / "run.trec"
    path.write_bytes(run_text.encode())
    run = read_run(path)
    read: dict[str, list[str]] = {}
    for qid, docid in zip(run.qid.codes.tolist(), run.docid.codes.tolist()):
        read.setdefault(run.qid.values[qid], []).append(run.docid.values[docid])
    assert read == rankings


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("run.trec", "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 nan t\n", "run.trec:2: score is nan; scores must be finite numbers"),
        ("run.trec", "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1e999 t\n", "run.trec:2: score is 1e999; scores must be finite numbers"),
        ("run.trec", "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1_0 t\n", "run.trec:2: score '1_0' is not a number"),
        ("run.trec", "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0\n", "run.trec:2: expected 6 fields 'qid Q0 docid rank score tag', found 5"),
        ("run.trec", "q1 Q0 d1 1 2.0 t\nq1 Q0 d\u00a02 2 1.0 t\n", "run.trec:2: document id 'd\\xa02' contains U+00A0"),
        ("qrels.txt", "q1 0 d1 1\nq1 0 d1 2\n", "qrels.txt:2: document 'd1' is judged twice for query 'q1' (first on line 1)"),
        ("qrels.txt", "q1 0 d1 1\nq1 0 d2 1.5\n", "qrels.txt:2: grade '1.5' is not an integer"),
        ("qrels.txt", "q1 0 d1 1\nq1 0 d2 101\n", "qrels.txt:2: grade 101 is out of range (-100 to 100)"),
        ("qrels.txt", "q1 0 d1 1\nq1 0 d2\n", "qrels.txt:2: expected 4 fields, found 3"),
        ("qrels.txt", "q1 0 d1 1\nq1 0 d2 1 x\n", "qrels.txt:2: expected 4 fields, found 5"),
    ],
)  # fmt: skip
def test_a_bad_line_is_named_with_what_is_wrong(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as raised:
        (read_run if name == "run.trec" else read_qrels)(path)
    assert str(raised.value).removeprefix(f"{tmp_path}/").startswith(message), str(raised.value)


def test_qrels_with_runs_of_blanks_and_signs_read_as_the_grades_they_say(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("q2  0\td1 +2\nq1 0 d1 -1 \n\nq1 0 d2 007\n")
    qrels = read_qrels(path)
    assert [(qrels.qid.values[q], qrels.docid.values[d]) for q, d in zip(qrels.qid.codes, qrels.docid.codes)] == [
        ("q2", "d1"), ("q1", "d1"), ("q1", "d2"),
    ]  # fmt: skip
    assert qrels.grade.tolist() == [2, -1, 7]


def test_single_spaced_rewrites_blanks_as_trec_eval_reads_them():
    assert single_spaced(b"\xef\xbb\xbf a \t b\t\r\n \t\n c  d  ") == b"a b\r\n\nc d"
    assert single_spaced(b"a b c d e f g h\nx y\n", max_fields=6) == b"a b c d e f\nx y\n"
    assert single_spaced(b"") == b""


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
    printed = to_json(evaluate(options).scores, False, True)["mean"]
    assert {name: value for name, value in printed.items() if name.startswith("type/")} == logged


@pytest.mark.parametrize("n_items", [9, 10**9])  # (group, item) keys fit in int32, or need int64
def test_repeats_within_finds_an_item_twice_in_one_group(n_items):
    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.integers(0, 40))
        group, item = rng.integers(0, 5, n), rng.integers(n_items - 9, n_items, n)
        pairs = list(zip(group.tolist(), item.tolist()))
        assert repeats_within(group, item, n_items) == (len(set(pairs)) < len(pairs))
        repeated = repeated_rows(group, item, n_items)
        expected = [pair in pairs[:row] for row, pair in enumerate(pairs)]  # an earlier row holds it
        assert (repeated.tolist() if repeated is not None else [False] * n) == expected
