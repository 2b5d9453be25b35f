"""The metric registry (one declaration per metric), the one pairing function and the one per-group
aggregation: what compare, check, the leaderboard and the reports read."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from helpers.data import ranked
from helpers.logged import BROKEN, golden, rankings
from sweep.evaluation import score
from sweep.evaluation.context import context_metric_names
from sweep.evaluation.registry import (
    COSTS,
    DEFAULT_METRICS,
    MEASURES,
    is_cost,
    label,
    lower_is_better,
    measure_of,
)
from sweep.evaluation.significance import paired


def test_every_metric_a_run_logs_is_declared_once_with_a_formula():
    names = [*DEFAULT_METRICS, "abstain/correct_rate", "abstain/false_rate", *context_metric_names([1, 5]), *COSTS]
    assert all(measure_of(name) is not None for name in names)
    assert len({m.name for m in MEASURES}) == len(MEASURES)
    assert all(m.formula and m.label for m in MEASURES)
    assert measure_of("ndcg_at_10").formula.startswith("DCG@k / IDCG@k")  # the numpy function's docstring
    assert measure_of("not_a_metric") is None and measure_of("r_precision_at_5") is None


@pytest.mark.parametrize(
    "name",
    [
        "abstain/false_rate",
        "context/tokens_at_5",
        "latency/search_ms_p50",
        "index/bytes",
        "type/howto/abstain/false_rate",
    ],
)
def test_lower_is_better(name):
    assert lower_is_better(name)


@pytest.mark.parametrize(
    "name", ["ndcg_at_10", "mrr", "abstain/correct_rate", "context/recall_at_5", "judged_at_10", "unknown/metric"]
)
def test_higher_is_better(name):
    assert not lower_is_better(name)


def test_costs_labels_and_the_leaderboards_columns():
    assert COSTS == (
        "latency/search_ms_p50", "latency/search_ms_p95", "index/bytes", "time/embed_s", "corpus/truncated_share"
    )  # fmt: skip
    assert lower_is_better("corpus/truncated_share") and label("corpus/truncated_share") == "chunks truncated"
    assert is_cost("context/tokens_at_3") and not is_cost("ndcg_at_10")
    assert label("ndcg_at_10") == "nDCG@10" and label("mrr") == "MRR" and label("index/bytes") == "index size"
    assert label("something/else") == "something/else"


def test_pairing_aligns_on_question_id_and_keeps_the_questions_both_define():
    a = pd.Series([1.0, np.nan, 0.5, 0.25], index=["q1", "q2", "q3", "q4"])
    b = pd.Series([0.0, 1.0, np.nan, 1.0, 0.7], index=["q4", "q2", "q3", "q1", "q9"])
    pair = paired(a, b)
    assert list(pair.index) == ["q1", "q4"] and list(pair.columns) == ["a", "b"]
    assert pair.loc["q1"].tolist() == [1.0, 1.0] and pair.loc["q4"].tolist() == [0.25, 0.0]


def test_the_per_type_table_and_the_logged_type_means_are_one_aggregation():
    g = golden()
    evaluation = score(g, ranked(rankings(g, BROKEN, abstain=True)))
    table, logged = evaluation.by("type"), evaluation.type_means()
    for qtype, row in table.iterrows():
        assert logged[f"type/{qtype}/n"] == row["n"]
        for name in [*evaluation.metrics, *evaluation.abstain_metrics]:
            key = f"type/{qtype}/{name}"
            assert (key not in logged and np.isnan(row[name])) or logged[key] == row[name]  # to the last digit
    assert table.loc["howto", "answerable"] == 20 and table.loc["unanswerable", "abstain/correct_rate"] == 1.0
