"""Per-question values go into MLflow and come back bit for bit (issue 49, item 4): pandas wrote
them to 10 significant digits, so recall's thirds came back as 0.3333333333 and 0.6666666667,
differences equal in theory were no longer equal, and the sign-flip test that `sweep.compare` and
`sweep.check` read from them counted ties wrongly (p 0.0469 where the exact test gives 0.0625,
across alpha 0.05). Real SQLite stores in tmp_path, logged in process as trials log."""

from __future__ import annotations

import json
from itertools import product
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

from helpers.data import golden_of, ranked
from helpers.logged import EXPERIMENT, scored_record
from sweep import check, compare
from sweep.evaluation import score
from sweep.evaluation.significance import randomization_p
from sweep.formats.corpus import Corpus, Document
from sweep.tracking.lifecycle import trial_run
from sweep.tracking.records import load_record, log_tables, save_record, table_json

# recall@5 per question, each with three relevant documents: A 1, 0, 0, 0, 0, 0, 1/3; B 2/3 five
# times, 1/3, 2/3. B - A: -1/3, 2/3 four times, 1/3, 1/3: the flips of {-1/3, 1/3} tie the observed mean
FOUND_A = (3, 0, 0, 0, 0, 0, 1)
FOUND_B = (2, 2, 2, 2, 2, 1, 2)
EXACT_P = 0.0625  # 8 of the 128 sign flips: 4 at least as high as observed, doubled
ROUNDED_P = 0.046875  # what the values pandas kept gave: one tie lost to rounding


def log_thirds(name: str, found: tuple[int, ...]) -> str:
    """A run whose question i finds `found[i]` of its 3 relevant documents in the top 5."""
    relevant = {f"q{i}": {f"q{i}-{d}": 1 for d in "abc"} for i in range(len(found))}
    golden = golden_of(relevant)
    results = {q: [*list(docs)[:k], "noise-1", "noise-2"] for (q, docs), k in zip(relevant.items(), found)}
    corpus = Corpus(tuple(Document(d, "text") for docs in relevant.values() for d in docs))
    with trial_run(EXPERIMENT, name) as run:
        save_record(scored_record(name, golden, corpus, score(golden, ranked(results))))
    return run.run_id


def exact_sign_flip_p(delta: np.ndarray) -> float:
    """The two-sided sign-flip p-value by enumerating all 2^n flips in exact integer arithmetic
    (`delta` in thirds): the share at least as far out as observed on either side, doubled."""
    thirds = np.rint(delta * 3).astype(int)
    assert np.allclose(thirds / 3, delta)
    observed = thirds.sum()
    sums = np.array([np.dot(signs, thirds) for signs in product((1, -1), repeat=len(thirds))])
    return min(1.0, 2 * min(np.mean(sums <= observed), np.mean(sums >= observed)))


def test_per_question_values_come_back_bit_for_bit_and_mlflow_still_reads_them(tracking):
    a = log_thirds("a", FOUND_A)
    record = load_record(a)
    recall = record.per_query.set_index("qid")["recall_at_5"]
    assert recall.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1 / 3]  # == : the same floats, not 0.3333333333
    assert 2 / 3 in load_record(log_thirds("b", FOUND_B)).per_query["recall_at_5"].tolist()
    # MLflow's own reader takes the file as before: the same columns and rows (pandas parses floats its way)
    table = mlflow.load_table("tables/per_query.json", run_ids=[a])
    assert list(table.columns[: len(record.per_query.columns)]) == list(record.per_query.columns)
    assert len(table) == 7 and table["recall_at_5"].tolist() == pytest.approx(recall.tolist(), abs=1e-15)


def test_a_table_is_pandas_split_json_with_exact_numbers():
    table = pd.DataFrame(
        {
            "qid": ["q1", "q2", "q3"],
            "value": [1 / 3, np.nan, np.inf],
            "nested": [[2 / 3, 1], [np.nan], {"x": 0.1 + 0.2}],
            "flag": [True, False, None],
            "count": [1, 2, 3],
        }
    )
    written = json.loads(table_json(table))
    assert written == {
        "columns": ["qid", "value", "nested", "flag", "count"],
        "data": [
            ["q1", 1 / 3, [2 / 3, 1], True, 1],
            ["q2", None, [None], False, 2],
            ["q3", None, {"x": 0.30000000000000004}, None, 3],
        ],
    }
    pandas = json.loads(table.to_json(orient="split", index=False))
    assert pandas["columns"] == written["columns"] and pandas["data"][0][1] == 0.3333333333  # what it was


def test_compare_and_check_test_the_exact_values(tracking, capsys):
    """Before: p 0.0469 from the rounded values, "significant"; the exact enumeration says 0.0625."""
    a, b = log_thirds("a", FOUND_A), log_thirds("b", FOUND_B)
    exact_delta = np.array(FOUND_B) / 3 - np.array(FOUND_A) / 3
    assert exact_sign_flip_p(exact_delta) == EXACT_P
    rounded = np.round(np.array(FOUND_B) / 3, 10) - np.round(np.array(FOUND_A) / 3, 10)
    assert randomization_p(rounded) == ROUNDED_P  # the wrong number, from the values pandas kept
    comparison = compare.compare_runs(a, b, metrics=["recall_at_5"])
    assert comparison.metrics.at["recall_at_5", "p_value"] == EXACT_P
    assert compare.main([a, b, "--metrics", "recall_at_5", "--no-log"]) == 0
    assert "| recall_at_5 | 0.1905 | 0.6190 | +0.4286 | [+0.1429, +0.6190] | 0.0625 | 0.0625 | 6/0/1 | 7 |" in (
        capsys.readouterr().out
    )
    # the reverse direction: worse by 0.43 but not significantly so at 0.05, so not a regression
    assert check.main(["--baseline", b, "--candidate", a, "--metric", "recall_at_5"]) == 0
    assert "p 0.0625" in capsys.readouterr().out


def test_a_leaderboard_table_keeps_its_numbers_too(tracking):
    """`log_tables` writes every table so: the sweep's leaderboard as well."""
    with trial_run(EXPERIMENT, "parent") as run:
        log_tables({"tables/leaderboard.json": pd.DataFrame({"run_id": ["r"], "mean": [2 / 3]})})
    path = mlflow.MlflowClient().download_artifacts(run.run_id, "tables/leaderboard.json", str(tracking))
    assert json.loads(Path(path).read_text())["data"] == [["r", 2 / 3]]
