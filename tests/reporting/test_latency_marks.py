"""The latency marks as a person reads them: the console's leaderboard and report.html, from a
leaderboard built of records whose questions were timed together (sweep.evaluation.latency)."""

from __future__ import annotations

import io
import re

import numpy as np
import pandas as pd
from rich.console import Console

from sweep.evaluation.leaderboard import build
from sweep.evaluation.record import TrialRecord
from sweep.reporting.console import latency_line, print_leaderboard
from sweep.reporting.html import render

N = 60


def record(name: str, quality: np.ndarray, ms: np.ndarray) -> TrialRecord:
    qids = [f"q{i}" for i in range(N)]
    per_query = pd.DataFrame({"qid": qids, "question": qids, "type": ["lookup"] * N, "ndcg_at_10": quality})
    timed = pd.DataFrame({"qid": qids, "ms": ms})
    return TrialRecord(
        name, {}, (name,), metrics={"latency/search_ms_p50": float(np.median(ms))},
        tables={"per_query": per_query, "latency": timed}, run_id=name, status="FINISHED",
    )  # fmt: skip


def results(slow_factor: float):
    """model=a and model=b share their work; model=c costs `slow_factor` times as much per question."""
    rng = np.random.default_rng(11)
    quality = rng.uniform(0.2, 0.9, N)
    base = rng.lognormal(np.log(12), 0.3, N) * rng.lognormal(0, 0.3, N)  # the question's cost and the moment's load
    runs = [
        record("model=a", np.clip(quality + 0.05, 0, 1), base * rng.lognormal(0, 0.05, N)),
        record("model=b", quality, base * rng.lognormal(0, 0.05, N)),
        record("model=c", np.clip(quality + 0.1, 0, 1), slow_factor * base * rng.lognormal(0, 0.05, N)),
    ]
    return build("ndcg_at_10", runs)


def printed(sweep) -> str:
    out = io.StringIO()
    print_leaderboard(sweep, Console(file=out, width=160, color_system=None))
    return out.getvalue()


def test_the_console_marks_the_significantly_slower_configuration_and_names_it():
    sweep = results(slow_factor=2.0)
    board = sweep.leaderboard
    assert board.index[board["slower"].astype(bool)].tolist() == ["model=c"]
    text = printed(sweep)
    rows = {name: next(line for line in text.splitlines() if f"model={name} " in line) for name in "abc"}
    assert re.search(r"\d\*", rows["c"])  # its p50 carries the mark
    assert "*" not in rows["a"] and "*" not in rows["b"]
    assert "* significantly slower than the fastest" in text and "model=c (x2." in latency_line(sweep)


def test_no_mark_where_the_work_is_shared_and_the_line_says_the_differences_are_noise():
    sweep = results(slow_factor=1.0)
    assert not sweep.leaderboard["slower"].astype(bool).any()
    assert "Latency: no configuration is significantly slower than the fastest" in printed(sweep)


def test_the_report_marks_it_and_draws_the_front_through_significant_differences_only():
    sweep = results(slow_factor=2.0)
    page = render(sweep, "Sweep")
    row = re.search(r'<tr data-run-id="model=c".*?</tr>', page, re.S).group(0)
    assert "significantly slower than the fastest" in row and "latency_low" not in row
    assert page.count("significantly slower than the fastest") == 1
    # c: best quality, slow; a: a bit worse and significantly faster: both on the front; b: as fast as a, worse
    assert set(sweep.leaderboard.index[sweep.leaderboard["on_front"]]) == {"model=c", "model=a"}
    on_front = re.findall(r'data-run-id="([^"]+)"><title>[^<]*, on the Pareto front</title>', page)
    assert sorted(on_front) == ["model=a", "model=c"]
