"""The sweep report's parts that follow a setting (sweep.reporting.curves, question_sections, html's
header and cost cells): the objective against each numeric setting with a hybrid's members alone,
the others held at the leader's values; the header naming the sweep; "cached" for a stage read
from the cache; and the page at MLflow's frame widths. Built from real SweepResults (records ranked
by sweep.evaluation.leaderboard.build) and from a real 11-weight hybrid sweep
(`python -m sweep -m model=hybrid model.weight=0.0,...,1.0` on the small knowledge base), both
laid out by headless Chromium."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest

from helpers.commands import runs_in, sweep
from sweep.evaluation.leaderboard import SweepResults, build
from sweep.evaluation.record import GOLDEN_DIGEST, TrialRecord
from sweep.reporting.configs import config_labels
from sweep.reporting.curves import curves
from sweep.reporting.html import render

if TYPE_CHECKING:
    from mlflow.entities import Run

OBJECTIVE = "ndcg_at_10"
WIDE, NARROW = 860, 586  # MLflow's artifact frame in a wide window, and at a 1024 px window
WEIGHTS = [f"{w / 10:.1f}" for w in range(11)]


def record(run_id: str, values: np.ndarray, params: dict[str, str], **metrics: float) -> TrialRecord:
    """A finished run's record: `values` of the objective per question (the last 2 unanswerable)."""
    n = len(values)
    per_query = pd.DataFrame(
        {
            "qid": [f"q{i:02d}" for i in range(n)],
            "question": [f"how is question number {i} answered by the policy documents" for i in range(n)],
            "type": [("lookup", "policy", "howto")[i % 3] for i in range(n)],
            OBJECTIVE: np.r_[values[:-2], [np.nan, np.nan]],
        }
    )
    overrides = tuple(f"{k}={v}" for k, v in params.items()) + ("golden.path=golden.jsonl",)
    return TrialRecord(
        run_id,
        {},
        overrides,
        metrics={OBJECTIVE: float(np.nanmean(per_query[OBJECTIVE])), **metrics},
        tables={"per_query": per_query},
        digests={GOLDEN_DIGEST: "f00d"},
        run_id=run_id,
        status="FINISHED",
        tags={"mlflow.source.git.commit": "c0ffee"},
        params=params | {"golden.path": "golden.jsonl"},
    )


def grid() -> SweepResults:
    """model.weight x chunk (3 x 2) with a member's own score, and a random-search pair of k1
    values that only one configuration shares with the leader's other settings."""
    rng = np.random.default_rng(3)
    base = rng.uniform(0.3, 0.9, 40)
    runs = []
    for weight in ("0.2", "0.5", "0.8"):
        for chunk in ("128", "512"):
            peak = -abs(float(weight) - 0.5) + (0.02 if chunk == "512" else 0.0)
            values = np.clip(base + peak + rng.normal(0, 0.01, 40), 0, 1)
            k1 = "0.9" if (weight, chunk) == ("0.8", "128") else "1.2"  # as a random search would leave it
            params = {"model.weight": weight, "chunk": chunk, "model.k1": k1}
            runs.append(record(f"w{weight}-c{chunk}", values, params, **{f"member/dense/{OBJECTIVE}": 0.6}))
    return build(OBJECTIVE, runs)


def test_each_numeric_setting_is_drawn_through_the_leader_with_the_others_held():
    results = grid()
    configs = dict(results.leaderboard["config"])
    found, left_out = curves(results, configs, config_labels(configs))
    assert results.leaderboard.index[0] == "w0.5-c512"
    by_setting = {curve.setting: curve for curve in found}
    assert sorted(by_setting) == ["chunk", "model.weight"]
    weight = by_setting["model.weight"]
    assert [p.run_id for p in weight.points] == ["w0.2-c512", "w0.5-c512", "w0.8-c512"]  # chunk held at 512
    assert [p.value for p in weight.points] == [0.2, 0.5, 0.8] and weight.held["chunk"] == "512"
    assert [p.role for p in weight.points][1] == "leader" and weight.members == {"dense": [0.6, 0.6, 0.6]}
    assert [p.run_id for p in by_setting["chunk"].points] == ["w0.5-c128", "w0.5-c512"]
    # k1 is 0.9 only where neither the weight nor the chunk is the leader's: with both held, one value
    assert left_out == ["model.k1"]


def test_the_leader_is_drawn_above_the_other_points():
    """In both plots the leader's group comes after every other point's (SVG paints in order)."""
    results = grid()
    page = render(results, "grid")
    for plot in re.findall(r"<svg.*?</svg>", page, re.DOTALL):
        order = re.findall(r'<g id="[^"]*" data-run-id="([^"]+)"', plot)
        assert len(order) >= 2 and order[-1] == results.leaderboard.index[0], order


def test_a_stage_read_from_the_cache_says_cached():
    """A run whose corpus vectors all came from the cache took ~0 s to embed: "cached", not 0.00."""
    rng = np.random.default_rng(5)
    base = rng.uniform(0.3, 0.9, 30)
    runs = [
        record(f"r{share}", np.clip(base + 0.01 * share, 0, 1), {"chunk": str(128 * (share + 1))}, **costs)
        for share, costs in enumerate(
            [
                {"time/embed_s": 0.004, "embed/cache_hit": 1.0},
                {"time/embed_s": 6.5, "embed/cache_hit": 0.4},
                {"time/embed_s": 11.25, "embed/cache_hit": 0.0},
            ]
        )
    ]
    page = render(build(OBJECTIVE, runs), "cache")
    cells = re.findall(r'<td class="num" data-label="embedding \(s\)">(.*?)</td>', page)
    assert [re.sub(r"<[^>]+>", "", c) for c in cells] == ["11.25", "6.50 (40% cached)", "cached"]


def twenty_configurations() -> SweepResults:
    rng = np.random.default_rng(11)
    base = rng.uniform(0.2, 0.95, 50)
    runs = [
        record(
            f"run-{size}",
            np.clip(base - abs(np.log2(size / 512)) * 0.02 + rng.normal(0, 0.03, 50), 0, 1),
            {"chunk": str(size), "chunking": "recursive"},
        )
        for size in (64 + 48 * i for i in range(20))
    ]
    return build(OBJECTIVE, runs)


# every element whose box reaches past the viewport's right edge (or starts left of it)
TOO_WIDE_JS = """
return [...document.querySelectorAll('body *')].filter((e) => {
  const box = e.getBoundingClientRect();
  return box.width > 0 && (box.right > window.innerWidth + 0.5 || box.left < -0.5);
}).map((e) => e.tagName + '#' + e.id + ' ' + Math.round(e.getBoundingClientRect().right));
"""


# the run id of the point the browser finds at the centre of a point's group (scrolled into view)
TOP_AT_CENTRE_JS = """
const group = arguments[0];
group.scrollIntoView({block: 'center'});
const box = group.getBoundingClientRect();
const found = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
const point = found && found.closest('g[data-run-id]');
return point ? point.getAttribute('data-run-id') : null;
"""


def at_width(browser, width: int) -> None:
    inner = browser.execute_script("return window.innerWidth")
    browser.set_window_size(width + browser.get_window_size()["width"] - inner, 1000)
    assert browser.execute_script("return window.innerWidth") == width


def scrolls_sideways(browser, table_id: str) -> bool:
    return browser.execute_script(
        "const box = document.getElementById(arguments[0]).parentElement; return box.scrollWidth > box.clientWidth",
        table_id,
    )


@pytest.mark.slow
def test_twenty_configurations_keep_the_worst_questions_readable(browser, tmp_path):
    """At 860 px: no sideways scroll anywhere, the worst questions in 3 configuration columns with
    every one of the 20 in each question's details; at 586 px the page and the leaderboard do not
    scroll sideways either."""
    from selenium.webdriver.common.by import By

    results = twenty_configurations()
    page = tmp_path / "report.html"
    page.write_text(render(results, "Sweep chunk=64,...,976"), encoding="utf-8")
    browser.get(page.as_uri())
    at_width(browser, WIDE)
    assert not browser.execute_script(TOO_WIDE_JS) and not scrolls_sideways(browser, "worst")
    ranked = list(results.leaderboard.index)
    columns = [th.get_attribute("data-run-id") for th in browser.find_elements(By.CSS_SELECTOR, "#worst th")[2:]]
    assert columns == [ranked[0], ranked[1], ranked[-1]]
    rows = browser.find_elements(By.CSS_SELECTOR, "#worst tbody tr")
    assert len(rows) == 10
    # a question wraps between words: at most 3 lines at this width, not a word per line
    lines = browser.execute_script(
        "const t = arguments[0]; return t.getBoundingClientRect().height / parseFloat(getComputedStyle(t).lineHeight)",
        rows[0].find_element(By.CSS_SELECTOR, "span.text"),
    )
    assert lines <= 3, lines
    rows[0].find_element(By.TAG_NAME, "summary").click()
    every = rows[0].find_elements(By.CSS_SELECTOR, "details li")
    assert [li.get_attribute("data-run-id") for li in every] == ranked
    assert not browser.execute_script(TOO_WIDE_JS)
    curve = browser.find_elements(By.CSS_SELECTOR, 'figure.curve[data-setting="chunk"] svg g[data-run-id]')
    assert len(curve) == 20
    at_width(browser, NARROW)
    assert not browser.execute_script(TOO_WIDE_JS) and not scrolls_sideways(browser, "leaderboard")


@pytest.fixture(scope="module")
def weight_sweep(tmp_path_factory, small_kb_files) -> tuple[str, dict[str, Run], str, Path]:
    """`python -m sweep -m model=hybrid model.weight=0.0,0.1,...,1.0` on the small knowledge base
    (about 40 s: MiniLM embeds the 34 chunks once, the cache serves the other ten): (store,
    {weight: its MLflow run}, the sweep's run id, its report.html)."""
    cwd = tmp_path_factory.mktemp("weight-sweep")
    result = sweep(cwd, small_kb_files, "-m", "model=hybrid", f"model.weight={','.join(WEIGHTS)}")
    assert result.returncode == 0, result.stderr[-3000:]
    store = f"sqlite:///{cwd / 'mlflow.db'}"
    _, runs = runs_in(store)
    [parent] = [r.info.run_id for r in runs if r.data.tags.get("sweep.parent") == "true"]
    children = {r.data.params["model.weight"]: r for r in runs if r.data.tags.get("mlflow.parentRunId")}
    assert sorted(children) == WEIGHTS
    return store, children, parent, cwd / "multirun" / "report.html"


@pytest.mark.slow
def test_a_weight_sweeps_report_draws_the_objective_against_the_weight(weight_sweep, browser):
    """The chart of ndcg_at_10 against model.weight: 11 points in the weight's order at their
    runs' means, the leader on top, the two members alone as flat lines at their own logged
    scores; the header names the sweep; nothing wider than the frame at 860 px, and at 586 px the
    leaderboard's cells stacked within it."""
    from selenium.webdriver.common.by import By

    _, children, parent, report = weight_sweep
    browser.get(report.as_uri())
    at_width(browser, WIDE)
    assert not browser.execute_script(TOO_WIDE_JS)
    assert browser.execute_script("return document.documentElement.scrollWidth") <= WIDE

    chart = browser.find_element(By.CSS_SELECTOR, 'figure.curve[data-setting="model.weight"] svg')
    groups = chart.find_elements(By.CSS_SELECTOR, "g[data-run-id]")
    by_value = {g.get_attribute("data-value"): g for g in groups}
    assert len(groups) == 11 and sorted(by_value, key=float) == [f"{float(w):g}" for w in WEIGHTS]
    points = [by_value[f"{float(w):g}"] for w in WEIGHTS]
    assert [p.get_attribute("data-run-id") for p in points] == [children[w].info.run_id for w in WEIGHTS]
    centres = [(p.rect["x"] + p.rect["width"] / 2, p.rect["y"] + p.rect["height"] / 2) for p in points]
    assert all(a[0] < b[0] for a, b in zip(centres, centres[1:]))  # left to right in the weight's order
    means = [children[w].data.metrics[OBJECTIVE] for w in WEIGHTS]
    higher = [(i, j) for i in range(11) for j in range(11) if means[i] > means[j] + 1e-9]
    assert all(centres[i][1] < centres[j][1] for i, j in higher)  # a higher mean is drawn higher
    members = {g.get_attribute("data-member"): g for g in chart.find_elements(By.CSS_SELECTOR, "g[data-member]")}
    assert sorted(members) == ["bm25", "minilm"]
    for name, line in members.items():
        own = children["0.5"].data.metrics[f"member/{name}/{OBJECTIVE}"]
        title = browser.execute_script("return arguments[0].querySelector(':scope > title').textContent", line)
        assert title == f"{name} alone: {OBJECTIVE} {own:.4f}"
        assert line.rect["width"] > 0.6 * chart.rect["width"] and line.rect["height"] < 3  # flat, across the axes

    # the leader's point is what the browser finds at its centre, in both plots
    leader = browser.find_element(By.CSS_SELECTOR, "#leaderboard tbody tr").get_attribute("data-run-id")
    for plot in ("figure.curve svg", "#pareto"):
        group = browser.find_element(By.CSS_SELECTOR, f'{plot} g[data-run-id="{leader}"]')
        assert browser.execute_script(TOP_AT_CENTRE_JS, group) == leader, plot

    # the header: the sweep's run, the golden set, the commit, when it started
    child = children["0.0"]
    assert browser.find_element(By.ID, "sweep-run").text == parent
    golden = browser.find_element(By.ID, "golden").text
    assert child.data.params["golden.path"] in golden.replace("\n", "")
    assert child.data.tags[GOLDEN_DIGEST] in golden and "15 questions scored, 12 answerable" in golden
    commits = {
        c.data.tags["mlflow.source.git.commit"] for c in children.values()
    }  # one, unless a commit came mid-sweep
    assert set(browser.find_element(By.ID, "commit").text.split(", ")) == commits
    first = min(c.info.start_time for c in children.values()) / 1000
    assert browser.find_element(By.ID, "started").text == datetime.fromtimestamp(first, UTC).strftime(
        "%Y-%m-%d %H:%M UTC"
    )

    at_width(browser, NARROW)
    assert not browser.execute_script(TOO_WIDE_JS) and not scrolls_sideways(browser, "leaderboard")
    cells = browser.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr:first-child td")
    assert all(0 <= c.rect["x"] and c.rect["x"] + c.rect["width"] <= NARROW for c in cells)
    # each cell under its column's name (the headings' row is hidden)
    shown = [browser.execute_script("return getComputedStyle(arguments[0], '::before').content", c) for c in cells[1:]]
    headings = browser.find_elements(By.CSS_SELECTOR, "#leaderboard thead th")
    assert not headings[0].is_displayed()
    assert shown == [f'"{h.get_attribute("textContent")}"' for h in headings[1:]] and '"latency p95 (ms)"' in shown
