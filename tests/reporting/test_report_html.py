"""The sweep's report.html: built from real SweepResults (synthetic per-question values ranked by
sweep.evaluation.leaderboard) and from a real sweep, checked as text (self-contained, deterministic,
escaped, labels and config keys), its plot as matplotlib drew it (log axis, labels apart), and as
pages rendered by headless Chromium at the width of MLflow's artifact viewer (no sideways scroll of
the leaderboard, AA contrast computed from the page's colours, the plot's points, tooltips, front and
labels as the browser lays them out)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from sweep.evaluation.leaderboard import (
    SweepResults,
    build,
    differing_keys,
    minimum_detectable_effect,
    rank,
)
from sweep.evaluation.record import TrialRecord
from sweep.reporting.configs import config_labels, settings_that_differ, shared_overrides, split_overrides
from sweep.reporting.formatting import number
from sweep.reporting.html import render
from sweep.reporting.html_parts import contrast
from sweep.reporting.svg import Point, pareto_figure, pareto_svg

OBJECTIVE = "ndcg_at_10"
TYPES = ("lookup", "policy", "procedure")
HOSTILE = '<script>window.injected = true; alert("x")</script> Travel & expenses: who signs?'
SHARED = "golden.path=golden.jsonl golden.corpus=docs cache_dir=cache"  # every configuration's
VIEWER_WIDTH = 860  # MLflow's artifact viewer shows an HTML artifact about this wide

# run id -> (overrides, status, latency p50 in ms or None)
CONFIGS = {
    "run-hnsw": (f"model=minilm index=hnsw {SHARED}", "FINISHED", 12.5),
    "run-flat": (f"model=minilm index=flat {SHARED}", "FINISHED", 4.0),  # tied with the leader and faster: the front
    "run-bm25": (f"model=bm25 {SHARED}", "FINISHED", 9.0),  # worse and slower than run-flat: dominated
    "run-tfidf": (f"model=tfidf {SHARED}", "FINISHED", None),  # worse, no latency logged: not placed
    "run-broken": (f"model=broken {SHARED}", "FAILED", None),
}
LABELS = {
    "run-hnsw": "model=minilm index=hnsw",
    "run-flat": "model=minilm index=flat",
    "run-bm25": "model=bm25",
    "run-tfidf": "model=tfidf",
    "run-broken": "model=broken",
}
DENSE = {"model._target_": "sweep.retrieval.dense.DenseRetriever", "model.cache.folder": "/home/me/cache"}
DENSE |= {"model.embed.address": "None", "model.embedder.query_prompt": ""}  # unset: as absent as a lexical run's


def params(model: str, index: str, chunk: str = "256", **more: str) -> dict[str, str]:
    """What a run logs: each group's option, the resolved config flattened (chunking.size is
    ${chunk}, a dense model's index is ${index})."""
    target = {"flat": "FlatIndex", "hnsw": "HNSWIndex"}[index]
    logged = {"model": model, "index": index, "index._target_": f"sweep.retrieval.index.{target}", "seed": "0"}
    logged |= {"chunk": chunk, "chunking.size": chunk, "cache_dir": "cache"} | (
        {"index.M": "32"} if index == "hnsw" else {}
    )
    return logged | more


PARAMS = {
    "run-hnsw": params("minilm", "hnsw", **DENSE, **{"model.index._target_": "sweep.retrieval.index.HNSWIndex"}),
    "run-flat": params("minilm", "flat", **DENSE, **{"model.index._target_": "sweep.retrieval.index.FlatIndex"}),
    "run-bm25": params(
        "bm25", "flat", **{"model._target_": "sweep.retrieval.lexical.BM25Retriever", "model.k1": "1.5"}
    ),
    "run-tfidf": params("tfidf", "flat", **{"model._target_": "sweep.retrieval.lexical.TfidfRetriever"}),
    "run-broken": params("broken", "flat", chunk="512"),
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
            "time/embed_s": [1234.5, 1234.5, np.nan, np.nan, np.nan],
        },
        index=EXPECTED_ORDER,
    )
    leaderboard = described.join(ranked).join(costs)
    leaderboard["on_front"] = leaderboard.index.isin(["run-hnsw", "run-flat"])  # as latency.marks: significantly faster
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
    # no link (MLflow's sandboxed viewer follows none): the only references are the plot's to its own parts
    references = re.findall(r'\b(?:src|href)\s*=\s*"([^"]*)"|url\(([^)]*)\)', page, re.IGNORECASE)
    targets = {link or address for link, address in references}
    assert targets and all(t.startswith("#") and f'id="{t[1:]}"' in page for t in targets), targets
    assert "<a " not in page and "<nav" not in page and "@import" not in page
    assert "<script" not in page  # not even the question's: it is escaped
    assert html_escaped(HOSTILE) in page
    assert "<title>Sweep &lt;golden&gt; &amp; co</title>" in page
    assert results.mde_line() in page
    assert "5.1 MiB" in page and "800 B" in page  # index size in a human unit


def html_escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def test_configurations_are_named_by_the_overrides_that_vary():
    configs = {run_id: overrides for run_id, (overrides, _, _) in CONFIGS.items()}
    assert config_labels(configs) == LABELS
    assert shared_overrides(configs) == SHARED.split()
    assert split_overrides("a=1 b='x y' c=\"p q\" d=it's") == ["a=1", "b='x y'", 'c="p q"', "d=it's"]
    # a sweep of one keeps its whole overrides; one without any is its run id; a repeated label gets the run id
    assert config_labels({"r1": SHARED}) == {"r1": SHARED} and config_labels({"r1": ""}) == {"r1": "r1"}
    assert config_labels({"r1": "model=bm25", "r2": "model=bm25"}) == {
        "r1": "model=bm25 (run r1)",
        "r2": "model=bm25 (run r2)",
    }


def test_config_table_shows_the_keys_that_differ_once():
    """Not the class paths, the interpolated copies (chunking.size, model.index.*), the settings one
    option brings (model.k1, model.cache.folder, index.M) or unset values (None, "")."""
    configs = {run_id: overrides for run_id, (overrides, _, _) in CONFIGS.items()}
    table = settings_that_differ(differing_keys(PARAMS), configs)
    assert list(table.columns) == ["model", "index", "chunk"]
    assert table["chunk"].tolist() == ["256", "256", "256", "256", "512"]
    # two settings a sweeper varied together are both shown, though they change together
    tuned = {"t1": {"model.k1": "1.2", "model.b": "0.75"}, "t2": {"model.k1": "1.5", "model.b": "0.6"}}
    overrides = {"t1": "model.k1=1.2 model.b=0.75", "t2": "model.k1=1.5 model.b=0.6"}
    assert list(settings_that_differ(differing_keys(tuned), overrides).columns) == ["model.k1", "model.b"]


def test_heat_cells_read_black_or_white_whichever_contrasts_more(results):
    page = render(results, "sweep")
    styles = re.findall(r'class="heat"[^>]*style="background-color:#(\w{6});color:#(\w{6})"', page)
    assert len(styles) > 30
    for background, text in styles:
        pair = [tuple(int(colour[i : i + 2], 16) for i in (0, 2, 4)) for colour in (background, text)]
        assert contrast(*pair) >= 4.5, (background, text)


def test_latency_axis_is_logarithmic_when_the_spread_exceeds_ten_times():
    def plotted(latencies: list[float]) -> list[Point]:
        return [Point(f"r{i}", f"model={i}", i + 1, 0.8, 0.7, 0.9, ms, "other") for i, ms in enumerate(latencies)]

    spread = plotted([0.3, 1.4, 173.0])  # bm25, tf-idf, MiniLM on the bundled set
    axes = pareto_figure(spread, OBJECTIVE).axes[0]
    assert axes.get_xscale() == "log" and axes.get_xlabel() == "search latency p50 (ms, log scale)"
    to_share = axes.transAxes.inverted().transform
    bm25, tfidf, minilm = (to_share(axes.transData.transform((p.latency, p.mean)))[0] for p in spread)
    assert tfidf - bm25 > 0.2 and minilm - tfidf > 0.4  # a linear axis puts the first two 0.6% of its width apart
    ticks = re.findall(r">([^<>]+)</text>", pareto_svg(spread, OBJECTIVE))
    assert {"0.5", "1", "2", "10", "100", "200"} <= set(ticks)  # numbers as written, not powers of ten
    assert pareto_figure(plotted([4.0, 9.0, 12.5]), OBJECTIVE).axes[0].get_xscale() == "linear"


def test_labels_of_close_configurations_do_not_overlap():
    """Twelve configurations within a few thousandths and milliseconds of each other (ties, by
    design): each label in the plot, none over another, all inside the axes, written as given."""
    points = [
        Point(f"r{i}", f"model=m{i} prompt=$q$ & <b>", i + 1, 0.8 + 0.002 * (i % 4), 0.75, 0.85, lat, "tied", i < 2)
        for i, lat in enumerate([0.3, 0.32, 0.35, 1.4, 1.5, 1.6, 170, 175, 180, 185, 0.31, 1.45])
    ]
    figure = pareto_figure(points, OBJECTIVE)
    axes = figure.axes[0]
    figure.draw_without_rendering()
    labels = {text.get_gid(): text for text in axes.texts if text.get_gid()}
    assert sorted(labels) == sorted(f"configuration-{i}-label" for i in range(12))
    boxes = [label.get_window_extent() for label in labels.values()]
    inside = axes.get_window_extent()
    assert all(inside.x0 <= b.x0 and b.x1 <= inside.x1 and inside.y0 <= b.y0 and b.y1 <= inside.y1 for b in boxes)
    assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :] if a.overlaps(b)]
    svg = pareto_svg(points, OBJECTIVE)
    assert "#1 model=m0 prompt=$q$ &amp; &lt;b&gt;</text>" in svg  # not TeX, escaped once
    assert svg == pareto_svg(points, OBJECTIVE)


def test_a_sweep_whose_finished_runs_have_no_value_says_so():
    """The walkthrough's first sweep: two runs finished on a golden set nothing is labelled in yet."""
    unlabelled = pd.DataFrame(
        {"qid": ["q1", "q2"], "question": ["a", "b"], "type": ["factoid"] * 2, OBJECTIVE: [np.nan, np.nan]}
    )
    runs = [
        TrialRecord(
            f"r-{m}",
            {},
            (f"model={m}", SHARED),
            tables={"per_query": unlabelled},
            run_id=f"r-{m}",
            status="FINISHED",
            params={"model": m},
        )
        for m in ("x", "y")
    ]
    results = build(OBJECTIVE, runs)
    page = render(results, "unlabelled")
    assert "needs two finished configurations" not in page
    assert "it needs two configurations with a value of ndcg_at_10, and 0 of the 2 finished have one" in page
    assert "Nothing to plot" in page and page.count(">no value</td>") == 2


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
    assert "Nothing to plot" in page and "<svg" not in page
    assert '<td class="num" data-label="#">-</td>' in page and ">FAILED</td>" in page


# ---------------------------------------------------------------- in Chromium

RGB = re.compile(r"rgba?\((\d+), (\d+), (\d+)(?:, ([\d.]+))?\)")

# each element's text colour and the colour behind it: its own background, or the nearest opaque
# one of an ancestor (white at the top)
COLOURS_JS = """
const background = (element) => {
  for (let e = element; e; e = e.parentElement) {
    const colour = getComputedStyle(e).backgroundColor;
    if (!/^rgba\\(.*, 0\\)$/.test(colour) && colour !== 'transparent') return colour;
  }
  return 'rgb(255, 255, 255)';
};
return [...document.querySelectorAll(arguments[0])]
  .filter((e) => e.innerText.trim())
  .map((e) => [e.innerText.trim().slice(0, 40), getComputedStyle(e).color, background(e)]);
"""


# the plot's texts (axes, legend, labels: all on white) and their fill
PLOT_TEXT_JS = """
return [...document.querySelectorAll('#pareto text')].map((t) => [t.textContent, getComputedStyle(t).fill]);
"""

# each label of a point in the plot and the box it covers on the page
LABEL_BOXES_JS = """
return [...document.querySelectorAll('#pareto g[id$="-label"] text')].map((t) => {
  const box = t.getBoundingClientRect();
  return [t.textContent, box.left, box.top, box.right, box.bottom];
});
"""


def plot_labels(browser) -> list[str]:
    """The labels of the plot's points, sorted, after checking that no two of them overlap on the page."""
    boxes = browser.execute_script(LABEL_BOXES_JS)  # text, left, top, right, bottom
    overlapping = [
        (a, b)
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]
    ]
    assert not overlapping, overlapping
    return sorted(text for text, *_ in boxes)


def rgb(colour: str) -> tuple[int, int, int]:
    match = RGB.fullmatch(colour)
    assert match and match.group(4) in (None, "1"), colour  # opaque: the ratio needs no blending
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def check_in_the_viewer_width(browser, page) -> None:
    """At MLflow's viewer width: nothing scrolls sideways, no link, every text (the heat cells'
    included) at least 4.5:1 against its background, computed from the page's computed colours."""
    browser.get(page.as_uri())
    inner = browser.execute_script("return window.innerWidth")
    browser.set_window_size(VIEWER_WIDTH + browser.get_window_size()["width"] - inner, 1000)
    assert browser.execute_script("return window.innerWidth") == VIEWER_WIDTH
    box = browser.execute_script(
        "const b = document.getElementById('leaderboard').parentElement; return [b.scrollWidth, b.clientWidth]"
    )
    assert box[0] <= box[1], f"the leaderboard scrolls sideways at {VIEWER_WIDTH} px: {box}"
    assert browser.execute_script("return document.documentElement.scrollWidth") <= VIEWER_WIDTH
    assert browser.execute_script("return document.querySelectorAll('a, script, iframe').length") == 0
    heat = browser.execute_script(COLOURS_JS, "td.heat")
    assert len(heat) == len(browser.find_elements("css selector", "td.heat"))  # every cell has a number
    texts = heat + browser.execute_script(COLOURS_JS, "h1, h2, p, th, td, span.mark, span.ci")
    texts += [(text, fill, "rgb(255, 255, 255)") for text, fill in browser.execute_script(PLOT_TEXT_JS)]
    low = [(text, colour, back) for text, colour, back in texts if contrast(rgb(colour), rgb(back)) < 4.5]
    assert not low, low


@pytest.mark.slow
def test_reports_in_a_browser(results, real_sweep, browser, tmp_path):
    """The synthetic sweep's page (every kind of row) and the real sweep's (`python -m sweep -m
    model=bm25,tfidf` on the small knowledge base, written by the command itself)."""
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    path = tmp_path / "report.html"
    path.write_text(render(results, "golden-sweep: model x index"), encoding="utf-8")
    check_in_the_viewer_width(browser, path)

    def texts(selector: str) -> list[str]:
        return [element.text for element in browser.find_elements(By.CSS_SELECTOR, selector)]

    def attributes(selector: str, name: str) -> list[str]:
        return [element.get_attribute(name) for element in browser.find_elements(By.CSS_SELECTOR, selector)]

    # no script ran: no alert is open, the question's script set nothing
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    assert browser.execute_script("return window.injected === undefined")

    # 1. leaderboard: one row per configuration, best first, failed last; a verdict on each
    assert attributes("#leaderboard tbody tr", "data-run-id") == EXPECTED_ORDER
    assert texts("#leaderboard td.config") == [LABELS[r] for r in EXPECTED_ORDER]
    verdicts = dict(zip(attributes("#leaderboard tbody tr", "data-run-id"), texts("#leaderboard td.verdict")))
    assert verdicts == {
        "run-hnsw": "best",
        "run-flat": "= tied",
        "run-bm25": "worse",
        "run-tfidf": "worse",
        "run-broken": "FAILED",
    }
    assert texts("#leaderboard tbody tr td:first-child") == ["1", "2", "3", "4", "-"]
    headers = texts("#leaderboard thead th")
    assert {"latency p50 (ms)", "latency p95 (ms)", "index size", "embedding (s)", "p (Holm)", "n"} <= {
        " ".join(h.split()) for h in headers
    }
    assert "are not detectable" in browser.find_element(By.CSS_SELECTOR, "p.mde").text
    assert SHARED in " ".join(browser.find_element(By.CSS_SELECTOR, "p.summary").text.split())

    # 2. Pareto plot: a point per finished configuration with latency, its tooltip naming it and its
    # numbers; the front through the leader and its tie; labels apart
    points = {
        p.get_attribute("data-run-id"): p for p in browser.find_elements(By.CSS_SELECTOR, "#pareto g[data-run-id]")
    }
    assert sorted(points) == ["run-bm25", "run-flat", "run-hnsw"]
    assert all(p.is_displayed() and p.size["width"] > 0 for p in points.values())
    roles = {"run-hnsw": "leader (best mean)", "run-flat": "tied with the leader", "run-bm25": "significantly worse"}
    for run_id, point in points.items():
        tooltip = browser.execute_script("return arguments[0].querySelector(':scope > title').textContent", point)
        mean, low, high = (number(results.leaderboard.loc[run_id, column]) for column in ("mean", "ci_low", "ci_high"))
        rank = EXPECTED_ORDER.index(run_id) + 1
        numbers = f"#{rank} {LABELS[run_id]}: {OBJECTIVE} {mean} [{low}, {high}], latency p50 "
        assert tooltip.startswith(numbers), tooltip
        assert tooltip.endswith(roles[run_id] + (", on the Pareto front" if rank < 3 else "")), tooltip
    front = browser.find_element(By.CSS_SELECTOR, "#pareto-front path").rect  # from the tie (faster) to the leader
    ends = [points[r].rect["x"] + points[r].rect["width"] / 2 for r in ("run-flat", "run-hnsw")]
    assert abs(front["x"] - ends[0]) < 1.5 and abs(front["x"] + front["width"] - ends[1]) < 1.5
    assert plot_labels(browser) == ["#1 model=minilm index=hnsw", "#2 model=minilm index=flat", "#3 model=bm25"]
    assert any("model=tfidf" in note and "not placed" in note for note in texts("#pareto-section p.note"))

    # 3. heatmap: finished configurations x question types, each headed by its answerable questions
    # (20 of each type, less the 4 unanswerable: q57 a lookup, q58 a policy, q56 and q59 procedures)
    assert texts("#heatmap thead th")[1:] == ["lookup\n19 q", "policy\n19 q", "procedure\n18 q"]
    cells = texts("#heatmap td.heat")
    assert len(cells) == 4 * len(TYPES)
    assert all(re.fullmatch(r"\d\.\d{4}", cell) for cell in cells)

    # 4. worst questions: the hostile question first, shown as text; the best, the runner-up and the
    # last configuration as columns, every configuration's value a click away
    assert len(browser.find_elements(By.CSS_SELECTOR, "#worst tbody tr")) == 10
    assert texts("#worst td.question span.text")[0] == HOSTILE
    assert attributes("#worst thead th[data-run-id]", "data-run-id") == ["run-hnsw", "run-flat", "run-tfidf"]
    assert texts("#worst tbody tr:first-child td.heat") == ["0.0000"] * 3
    first = browser.find_element(By.CSS_SELECTOR, "#worst tbody tr:first-child details")
    assert first.find_element(By.CSS_SELECTOR, "ol").text == ""  # closed
    first.find_element(By.TAG_NAME, "summary").click()
    assert attributes("#worst tbody tr:first-child details li", "data-run-id") == EXPECTED_ORDER[:4]

    # 5. only the keys that differ, once, a row per configuration; no word broken inside
    assert texts("#differing thead th") == ["config", "model", "index", "chunk"]
    assert attributes("#differing tbody tr", "data-run-id") == EXPECTED_ORDER
    assert all("\n" not in label for label in texts("#differing td.config"))
    assert browser.save_screenshot(str(tmp_path / "report.png"))

    # the real sweep's page: labels without the overrides both runs share (long temporary paths)
    _, children, cwd, _ = real_sweep
    check_in_the_viewer_width(browser, cwd / "multirun" / "report.html")
    assert sorted(texts("#leaderboard td.config")) == ["model=bm25", "model=tfidf"]
    assert sorted(label.split(" ", 1)[1] for label in plot_labels(browser)) == ["model=bm25", "model=tfidf"]
    assert texts("#differing thead th") == ["config", "model"]
    assert browser.find_element(By.CSS_SELECTOR, "p.mde").text.startswith("with 12 answerable questions")
    assert sorted(attributes("#leaderboard tbody tr", "data-run-id")) == sorted(children.values())
