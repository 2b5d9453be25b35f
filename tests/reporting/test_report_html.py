"""The sweep's report.html: built from real SweepResults (synthetic per-question values ranked by
sweep.evaluation.leaderboard), checked as text (self-contained, deterministic, escaped) and as a page
rendered by headless Chromium."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from sweep.evaluation.leaderboard import SweepResults, differing_keys, minimum_detectable_effect, rank
from sweep.reporting.html import render

OBJECTIVE = "ndcg_at_10"
TYPES = ("lookup", "policy", "procedure")
HOSTILE = '<script>window.injected = true; alert("x")</script> Travel & expenses: who signs?'

# run id -> (overrides label, status, latency p50 in ms or None)
CONFIGS = {
    "run-hnsw": ("model=minilm index=hnsw", "FINISHED", 12.5),
    "run-flat": ("model=minilm index=flat", "FINISHED", 4.0),  # tied with the leader and faster: the front
    "run-bm25": ("model=bm25", "FINISHED", 9.0),  # worse and slower than run-flat: dominated
    "run-tfidf": ("model=tfidf", "FINISHED", None),  # worse, no latency logged: not placed
    "run-broken": ("model=broken", "FAILED", None),
}
PARAMS = {
    "run-hnsw": {"model": "minilm", "index": "hnsw", "seed": "0", "chunk.size": "256"},
    "run-flat": {"model": "minilm", "index": "flat", "seed": "0", "chunk.size": "256"},
    "run-bm25": {"model": "bm25", "index": "flat", "seed": "0", "chunk.size": "256"},
    "run-tfidf": {"model": "tfidf", "index": "flat", "seed": "0", "chunk.size": "256"},
    "run-broken": {"model": "broken", "index": "flat", "seed": "0", "chunk.size": "512"},
}
EXPECTED_ORDER = ["run-hnsw", "run-flat", "run-bm25", "run-tfidf", "run-broken"]


def sweep_results() -> SweepResults:
    """Five configurations over 60 questions (4 unanswerable, NaN), assembled as
    sweep.evaluation.leaderboard.build does from its runs."""
    rng = np.random.default_rng(7)
    n = 60
    qids = [f"q{i:02d}" for i in range(n)]
    questions = pd.DataFrame(
        {"question": [f"question {i}" for i in range(n)], "type": [TYPES[i % 3] for i in range(n)]}, index=qids
    )
    questions.loc["q05", "question"] = HOSTILE
    base = rng.uniform(0.3, 0.95, n)
    shifts = {"run-hnsw": 0.0, "run-flat": -0.003, "run-bm25": -0.2, "run-tfidf": -0.3}
    per_query = {}
    for run_id, shift in shifts.items():
        values = np.clip(base + shift + rng.normal(0, 0.05, n), 0, 1)
        values[5] = 0.0  # the hostile question is the worst everywhere
        values[-4:] = np.nan  # unanswerable
        per_query[run_id] = pd.Series(values, index=qids)
    ranked = rank(per_query)
    described = pd.DataFrame(
        {"config": [CONFIGS[r][0] for r in EXPECTED_ORDER], "status": [CONFIGS[r][1] for r in EXPECTED_ORDER]},
        index=EXPECTED_ORDER,
    )
    costs = pd.DataFrame(
        {
            "latency/search_ms_p50": [CONFIGS[r][2] if CONFIGS[r][2] is not None else np.nan for r in EXPECTED_ORDER],
            "latency/search_ms_p95": [3 * CONFIGS[r][2] if CONFIGS[r][2] else np.nan for r in EXPECTED_ORDER],
            "index/bytes": [5_400_000.0, 1_200_000.0, 80_000.0, 800.0, np.nan],
        },
        index=EXPECTED_ORDER,
    )
    leaderboard = described.join(ranked).join(costs)
    leaderboard.index.name = "run_id"
    per_query_frame = pd.DataFrame(per_query)
    per_type = per_query_frame.groupby(questions["type"]).mean().T.loc[list(ranked.index)]
    return SweepResults(
        objective=OBJECTIVE,
        leaderboard=leaderboard,
        per_type=per_type,
        per_query=per_query_frame,
        questions=questions,
        differing=differing_keys(PARAMS),
        mde=minimum_detectable_effect(per_query, ranked.index[0]),
    )


@pytest.fixture(scope="module")
def results() -> SweepResults:
    results = sweep_results()
    board = results.leaderboard
    # the synthetic data does what the assertions below rely on
    assert list(board.index) == EXPECTED_ORDER
    assert board["tied_with_best"].tolist()[:4] == [True, True, False, False]
    return results


def test_page_is_self_contained_escaped_and_deterministic(results):
    page = render(results, "Sweep <golden> & co")
    assert page == render(results, "Sweep <golden> & co")
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"\bsrc\s*=", page, re.IGNORECASE)
    assert all(href.startswith("#") for href in re.findall(r'href="([^"]*)"', page))  # in-page anchors only
    assert "@import" not in page and "url(" not in page
    assert "<script" not in page  # not even the question's: it is escaped
    assert html_escaped(HOSTILE) in page
    assert "<title>Sweep &lt;golden&gt; &amp; co</title>" in page
    assert results.mde_line() in page
    assert "5.1 MiB" in page and "800 B" in page  # index size in a human unit


def html_escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def test_page_without_scored_configurations(results):
    """Every run failed: the page still renders, saying there is nothing to plot."""
    board = results.leaderboard.loc[["run-broken"]]
    empty = SweepResults(
        objective=OBJECTIVE,
        leaderboard=board,
        per_type=results.per_type.iloc[:0],
        per_query=pd.DataFrame(),
        questions=results.questions.iloc[:0],
        differing=differing_keys({"run-broken": PARAMS["run-broken"]}),
        mde=float("nan"),
    )
    page = render(empty, "failed sweep")
    assert "Nothing to plot" in page and 'class="point' not in page
    assert '<td class="num">-</td>' in page


def test_report_in_a_browser(results, browser, tmp_path):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    path = tmp_path / "report.html"
    path.write_text(render(results, "golden-sweep: model x index"), encoding="utf-8")
    browser.get(path.as_uri())

    def texts(selector: str) -> list[str]:
        return [element.text for element in browser.find_elements(By.CSS_SELECTOR, selector)]

    def attributes(selector: str, name: str) -> list[str]:
        return [element.get_attribute(name) for element in browser.find_elements(By.CSS_SELECTOR, selector)]

    # no script ran: no alert is open, the question's script set nothing, the DOM holds no script
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    assert browser.execute_script("return window.injected === undefined")
    assert browser.execute_script("return document.getElementsByTagName('script').length") == 0

    # 1. leaderboard: one row per configuration, best first, failed last; marks on the leader and its tie
    assert attributes("#leaderboard tbody tr", "data-run-id") == EXPECTED_ORDER
    marks = dict(zip(attributes("#leaderboard tbody tr", "data-run-id"), texts("#leaderboard td.tie-cell")))
    assert marks == {"run-hnsw": "best", "run-flat": "= tied", "run-bm25": "", "run-tfidf": "", "run-broken": ""}
    assert texts("#leaderboard tbody tr td:first-child") == ["1", "2", "3", "4", "-"]
    failed = browser.find_element(By.CSS_SELECTOR, '#leaderboard tr[data-run-id="run-broken"]').text
    assert "FAILED" in failed and "model=broken" in failed
    headers = texts("#leaderboard thead th")
    assert {"latency p50 (ms)", "latency p95 (ms)", "index size", "p (Holm)", "n"} <= set(headers)
    assert "embedding (s)" not in headers  # not logged, not shown
    assert "are not detectable" in browser.find_element(By.CSS_SELECTOR, "p.mde").text

    # 2. Pareto plot: a point per finished configuration with latency; the front is the leader and its tie
    points = browser.find_elements(By.CSS_SELECTOR, "#pareto circle.point")
    assert sorted(p.get_attribute("data-run-id") for p in points) == ["run-bm25", "run-flat", "run-hnsw"]
    assert all(p.is_displayed() and p.size["width"] > 0 for p in points)
    assert sorted(attributes("#pareto circle.point.on-front", "data-run-id")) == ["run-flat", "run-hnsw"]
    assert attributes("#pareto circle.point.leader", "data-run-id") == ["run-hnsw"]
    assert attributes("#pareto circle.point.tied", "data-run-id") == ["run-flat"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#pareto polyline.pareto-front")) == 1
    assert any("model=tfidf" in note and "not placed" in note for note in texts("#pareto-section p.note"))

    # 3. heatmap: finished configurations x question types, a number in each cell
    assert texts("#heatmap thead th")[1:] == list(TYPES)
    cells = texts("#heatmap td.heat")
    assert len(cells) == 4 * len(TYPES)
    assert all(re.fullmatch(r"\d\.\d{4}", cell) for cell in cells)

    # 4. worst questions: the hostile question first, shown as text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#worst tbody tr")) == 10
    assert texts("#worst td.question")[0] == HOSTILE
    assert texts("#worst tbody tr:first-child td.heat") == ["0.0000"] * 4

    # 5. only the keys that differ (seed is the same everywhere), a row per configuration
    assert texts("#differing thead th") == ["config", "chunk.size", "index", "model"]
    assert attributes("#differing tbody tr", "data-run-id") == EXPECTED_ORDER

    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, height + 150)  # the window's chrome takes some of it
    screenshot = tmp_path / "report.png"
    assert browser.save_screenshot(str(screenshot))
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 10_000
