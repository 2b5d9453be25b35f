"""Our metrics against trec_eval 10.0's own regression outputs (tests/data/trec_eval_reference)."""

from __future__ import annotations

import re

import pytest

from helpers.paths import TREC_EVAL_REFERENCE as REFERENCE
from sweep.evaluation import score
from sweep.formats.golden import load_golden
from sweep.formats.runs import Run

TREC_NAMES = {
    r"P_(\d+)": "precision_at_{}",
    r"recall_(\d+)": "recall_at_{}",
    r"success_(\d+)": "hit_at_{}",
    r"ndcg_cut_(\d+)": "ndcg_at_{}",
    r"map_cut_(\d+)": "map_at_{}",
    r"recip_rank": "mrr",
    r"map": "map",
    r"Rprec": "r_precision",
    r"ndcg": "ndcg",
}


def ours(trec_name: str) -> str | None:
    for pattern, name in TREC_NAMES.items():
        match = re.fullmatch(pattern, trec_name)
        if match:
            return name.format(*match.groups())
    return None


def expected(out_file: str) -> dict[tuple[str, str], float]:
    """{(our metric, qid or 'all'): value} for every measure we also compute."""
    values = {}
    for line in (REFERENCE / out_file).read_text().splitlines():
        measure, qid, value = line.split()
        name = ours(measure)
        if name is not None:
            values[name, qid] = float(value)
    return values


@pytest.mark.parametrize(
    ("out_file", "qrels", "run", "relevance_level"),
    [
        ("out.test.aq", "qrels.test", "results.test", 1),  # -m all_trec -q
        ("out.test.aqc", "qrels.test", "results.trunc", 1),  # -c: a query missing from the run scores 0
        ("out.test.aql", "qrels.rel_level", "results.test", 2),  # graded qrels with -1 grades, -l2
    ],
)
def test_matches_trec_eval_to_four_decimals(out_file, qrels, run, relevance_level):
    reference = expected(out_file)
    metrics = sorted({name for name, _ in reference})
    evaluation = score(
        load_golden(REFERENCE / qrels, warn=False), Run.read(REFERENCE / run), metrics, relevance_level=relevance_level
    )
    assert len(reference) > 100
    for (name, qid), value in reference.items():
        got = evaluation.mean[name] if qid == "all" else evaluation.per_query.loc[qid, name]
        assert got == pytest.approx(value, abs=5e-5), (name, qid)
