"""The sweep's leaderboard (sweep.evaluation.leaderboard): intervals, ties, the MDE and the order, in process and
on a sweep logged to a real SQLite store; best_config(among="tied")."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

from helpers.logged import BROKEN, EXPERIMENT, golden, log_run, rankings
from helpers.store_folders import tracking_in
from helpers.stores import copy_blank_store
from sweep import best
from sweep.best import best_config, find_best
from sweep.evaluation.leaderboard import build, differing_keys, minimum_detectable_effect, rank
from sweep.evaluation.record import TrialRecord
from sweep.evaluation.significance import randomization_p
from sweep.experiment.cli import close_sweep
from sweep.tracking.sweeps import SweepSummary, start_sweep


def per_question(values: np.ndarray, start: int = 0) -> pd.Series:
    return pd.Series(values, index=[f"q{i}" for i in range(start, start + len(values))], dtype=float)


def sweep_values(seed: int = 7, n: int = 120) -> dict[str, pd.Series]:
    """Three configurations: a leader, one a hair behind it (tied), one far behind."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.3, 0.9, n)
    return {
        "leader": per_question(np.clip(base + 0.05, 0, 1)),
        "close": per_question(np.clip(base + 0.05 + rng.normal(0, 0.05, n), 0, 1)),
        "far": per_question(np.clip(base - 0.25 + rng.normal(0, 0.05, n), 0, 1)),
    }


def test_the_leader_is_first_ties_are_marked_and_a_clear_loser_is_not_tied():
    table = rank(sweep_values())
    assert list(table.index) == ["leader", "close", "far"] or list(table.index) == ["close", "leader", "far"]
    best = table.index[0]
    assert table.at[best, "delta"] == 0 and table.at[best, "p_holm"] == 1 and table.at[best, "tied_with_best"]
    assert table.loc[table.index[1], "tied_with_best"]
    assert table.at["far", "p_holm"] < 0.01 and not table.at["far", "tied_with_best"]
    assert (table["ci_low"] <= table["mean"]).all() and (table["mean"] <= table["ci_high"]).all()
    assert table.at["far", "n"] == 120


def test_the_difference_from_the_leader_has_its_paired_interval():
    """The interval of the mean per-question difference, narrower than either configuration's own
    (the questions' spread cancels out): it excludes 0 for the clear loser, whose own interval
    overlaps nothing of the leader's only because the loser is far behind."""
    values = sweep_values()
    table = rank(values)
    best = table.index[0]
    assert table.at[best, "delta_low"] == table.at[best, "delta_high"] == 0
    assert (table["delta_low"] <= table["delta"] + 1e-12).all() and (
        table["delta"] <= table["delta_high"] + 1e-12
    ).all()
    close = table.index[1]
    assert table.at[close, "delta_low"] < 0 < table.at[close, "delta_high"]  # tied: 0 is inside
    assert table.at["far", "delta_high"] < 0  # worse: 0 is outside
    own = table.at["far", "ci_high"] - table.at["far", "ci_low"]
    assert table.at["far", "delta_high"] - table.at["far", "delta_low"] < own / 2


def test_holm_correction_is_across_the_sweeps_comparisons():
    values = sweep_values()
    table = rank(values)
    leader, others = table.index[0], table.index[1:]
    raw = sorted(randomization_p((values[o] - values[leader]).to_numpy()) for o in others)
    # the smallest p is multiplied by the number of comparisons, the next by one less (monotone)
    assert sorted(table.loc[others, "p_holm"]) == pytest.approx([min(1, 2 * raw[0]), min(1, max(2 * raw[0], raw[1]))])


def test_the_same_values_give_the_same_table():
    pd.testing.assert_frame_equal(rank(sweep_values()), rank(sweep_values()))


def test_ranking_without_intervals_is_the_same_ranking_less_the_intervals():
    """What `sweep.best --among tied` ranks by: the same order, means, tests and ties, to the bit,
    with a NaN-holed question; only the bootstrap columns are left empty."""
    values = sweep_values(seed=3) | {"holed": per_question(np.r_[np.nan, np.linspace(0.2, 0.8, 119)])}
    full, bare = rank(values), rank(values, intervals=False)
    intervals = ["ci_low", "ci_high", "delta_low", "delta_high"]
    pd.testing.assert_frame_equal(bare.drop(columns=intervals), full.drop(columns=intervals))
    assert bare[intervals].isna().all().all() and full[intervals].notna().all().all()


def test_an_undefined_question_is_left_out_of_a_configurations_pairs():
    values = sweep_values()
    values["far"].iloc[:20] = np.nan
    table = rank(values)
    assert table.at["far", "n"] == 100
    assert table.at["far", "mean"] == pytest.approx(values["far"].iloc[20:].mean())


def test_the_mde_is_the_paired_tests_normal_approximation():
    values = sweep_values()
    leader = rank(values).index[0]
    spreads = [(values[o] - values[leader]).std(ddof=1) for o in values if o != leader]
    expected = (1.959963984540054 + 0.8416212335729143) * np.median(spreads) / np.sqrt(120)
    assert minimum_detectable_effect(values, leader) == pytest.approx(expected)
    assert np.isnan(minimum_detectable_effect({"only": values["leader"]}, "only"))


@pytest.mark.slow
def test_a_true_difference_of_one_mde_is_detected_about_80_percent_of_the_time():
    """The MDE means what it says: simulated paired differences whose true mean is the MDE are
    significant at 0.05 in about 80% of golden sets of the same size and spread."""
    rng = np.random.default_rng(11)
    n, sd = 100, 0.2
    reference = {"a": per_question(np.zeros(n)), "b": per_question(rng.normal(0, sd, n))}
    mde = minimum_detectable_effect(reference, "a")
    detected = [randomization_p(rng.normal(mde, sd, n), n_resamples=999, seed=i) < 0.05 for i in range(300)]
    assert 0.72 <= np.mean(detected) <= 0.88


def config_run(run_id: str, status: str, values: pd.Series | None, **params: str) -> TrialRecord:
    per_query = None
    if values is not None:
        per_query = pd.DataFrame(
            {"qid": values.index, "question": [f"text of {q}" for q in values.index], "type": "how-to"}
        ).assign(ndcg_at_10=values.to_numpy())
    metrics = (
        {"latency/search_ms_p50": 3.0, "type/how-to/ndcg_at_10": float(np.nanmean(values))}
        if status == "FINISHED"
        else {}
    )
    tables = {} if per_query is None else {"per_query": per_query}
    overrides = tuple(f"{k}={v}" for k, v in params.items())
    return TrialRecord(
        run_id, {}, overrides, metrics=metrics, tables=tables, run_id=run_id, status=status, params=params
    )


def test_build_ranks_finished_runs_then_lists_the_others_in_start_order():
    values = sweep_values()
    runs = [
        config_run("r-far", "FINISHED", values["far"], chunk="100", index="flat"),
        config_run("r-broken", "FAILED", None, chunk="200", index="flat"),
        config_run("r-leader", "FINISHED", values["leader"], chunk="300", index="flat"),
    ]
    results = build("ndcg_at_10", runs)
    board = results.leaderboard
    assert list(board.index) == ["r-leader", "r-far", "r-broken"]
    assert list(board["status"]) == ["FINISHED", "FINISHED", "FAILED"]
    assert np.isnan(board.at["r-broken", "mean"]) and board.at["r-far", "latency/search_ms_p50"] == 3.0
    assert list(results.differing.columns) == ["chunk"]  # index is the same everywhere
    assert list(results.per_type.columns) == ["how-to"] and list(results.per_type.index) == ["r-leader", "r-far"]
    assert results.n_questions == 120 and np.isfinite(results.mde)
    worst = results.worst(3)
    assert list(worst.columns[:3]) == ["question", "type", "mean"] and worst["mean"].is_monotonic_increasing
    assert "not detectable" in results.mde_line()


def test_differing_keys_counts_a_missing_key_as_different():
    frame = differing_keys({"a": {"x": "1", "y": "2"}, "b": {"x": "1", "y": "3", "z": "4"}})
    assert list(frame.columns) == ["y", "z"]


# ---------------------------------------------------------------- a sweep's parent run, best_config(among="tied")


@pytest.fixture(scope="module")
def tied_store(tmp_path_factory) -> tuple[Path, tuple[str, dict[str, str], SweepSummary]]:
    """A sweep logged in process on a real SQLite store, once for the tests that read it: `good`,
    `twin` (the same rankings: tied, and faster) and `worse` (8 of 40 questions' relevant document
    at rank 3: not tied, fastest)."""
    folder = tmp_path_factory.mktemp("tied-sweep")
    copy_blank_store(folder)
    with pytest.MonkeyPatch.context() as patch:
        tracking_in(folder, patch)
        g = golden()
        good, worse = rankings(g), rankings(g, BROKEN)
        parent = start_sweep(EXPERIMENT, ["-m", "model=good,twin,worse"], "ndcg_at_10")
        runs = {
            name: log_run(
                name, g, results, costs={"latency/search_ms_p50": latency, "latency/search_ms_p95": latency * 2}
            )
            for name, results, latency in (("good", good, 5.0), ("twin", good, 2.0), ("worse", worse, 1.0))
        }
        summary, _ = close_sweep()  # as the command closes it: the leaderboard, then the report
        mlflow.set_tracking_uri(None)
    return folder, (parent, runs, summary)


@pytest.fixture
def tied_sweep(tied_store, monkeypatch) -> tuple[str, dict[str, str], SweepSummary]:
    """`tied_store`'s sweep, its store the tracking store and its folder the working folder."""
    folder, sweep = tied_store
    tracking_in(folder, monkeypatch)
    yield sweep
    mlflow.set_tracking_uri(None)


def test_the_sweeps_parent_run_holds_the_leaderboard_the_mde_and_the_report(tied_sweep, tmp_path):
    parent, runs, summary = tied_sweep
    client = mlflow.MlflowClient()
    board = pd.DataFrame(**{k: v for k, v in load_table(client, parent).items() if k in ("columns", "data")})
    assert list(board["run_id"]) == [runs["good"], runs["twin"], runs["worse"]]
    assert list(board["tied_with_best"]) == [True, True, False]
    assert board["p_holm"].iloc[1] == 1 and board["p_holm"].iloc[2] < 0.05
    assert board["delta"].iloc[2] == pytest.approx(-8 * 0.5 / 40)
    assert {"ci_low", "ci_high", "latency/search_ms_p50", "latency/search_ms_p95", "config"} <= set(board.columns)
    metrics = client.get_run(parent).data.metrics
    assert metrics["stats/mde_ndcg_at_10"] == pytest.approx(summary.results.mde) and 0 < summary.results.mde < 1
    artifacts = {a.path for a in client.list_artifacts(parent)}
    assert "report.html" in artifacts
    assert client.get_run(parent).info.status == "FINISHED"


def load_table(client: mlflow.MlflowClient, run_id: str) -> dict:
    """The parent run's `tables/leaderboard.json` (MLflow's table format: columns, data)."""
    return json.loads(Path(client.download_artifacts(run_id, "tables/leaderboard.json")).read_text())


def test_best_config_among_tied_takes_the_cheapest_of_the_tied_not_the_cheapest_overall(tied_sweep, capsys):
    parent, runs, _ = tied_sweep
    assert find_best("ndcg_at_10", sweep=parent).run_id == runs["good"]  # equal means: the earlier run
    tied = find_best("ndcg_at_10", sweep=parent, among="tied", prefer="latency/search_ms_p50")
    assert tied.run_id == runs["twin"]  # `worse` is faster still, but significantly worse
    assert "2 of 3 runs tied with the best" in tied.why
    assert best_config("ndcg_at_10", among="tied", prefer="latency/search_ms_p95") == tied.config
    # without --sweep: the runs of the experiment scored on the same golden set
    assert find_best("ndcg_at_10", among="tied").run_id == runs["twin"]
    assert best.main(["--metric", "ndcg_at_10", "--among", "tied", "--sweep", parent]) == 0
    out, err = capsys.readouterr()
    assert f"run {runs['twin']}: ndcg_at_10 = 1.0000, the lowest latency/search_ms_p50 (2)" in out
    assert err == "" and tied.note == ""  # one golden set: nothing left out, nothing said


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--among", "tied", "--minimize"], "cannot be combined with --minimize"),
        (["--among", "tied", "--metric", "latency/search_ms_p50"], "is not a per-question metric"),
        (["--prefer", "p@50"], "--prefer 'p@50': not a metric name"),
    ],
)
def test_best_among_tied_bad_input_is_one_line_and_exit_2(tied_sweep, capsys, argv, message):
    with pytest.raises(SystemExit) as exit:
        best.main(argv)
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


@pytest.mark.slow
def test_a_real_sweep_prints_the_leaderboard_and_its_report_opens_in_chromium(real_sweep, browser, tmp_path):
    """`python -m sweep -m model=bm25,tfidf`: the console leaderboard and MDE line, and the report
    (in the sweep folder and as the parent run's artifact, the same page) rendered by Chromium."""
    from selenium.webdriver.common.by import By

    store, runs, cwd, printed = real_sweep
    assert "Leaderboard by ndcg_at_10" in printed and "answerable questions, differences below" in printed
    rows = [line for line in printed.splitlines() if line.startswith(" model=")]  # named by what varies only
    assert len(rows) == 2 and max(map(len, rows)) <= 120 and "golden.path" not in "".join(rows)
    client = mlflow.MlflowClient(store)
    [parent] = [r for r in client.search_runs(["1"]) if r.data.tags.get("sweep.parent")]
    report = cwd / "multirun" / "report.html"
    assert f"Report: {report.relative_to(cwd)}" in printed or f"Report: {report}" in printed
    logged = Path(client.download_artifacts(parent.info.run_id, "report.html", str(tmp_path)))
    assert logged.read_text() == report.read_text()
    order = [row[0] for row in load_table(client, parent.info.run_id)["data"]]
    assert sorted(order) == sorted(runs.values())
    browser.get(report.as_uri())
    rows = browser.find_elements(By.CSS_SELECTOR, "#leaderboard tbody tr")
    assert [row.get_attribute("data-run-id") for row in rows] == order
    assert len(browser.find_elements(By.CSS_SELECTOR, "#pareto g[data-run-id]")) == 2
    assert len(browser.find_elements(By.CSS_SELECTOR, "#heatmap td.heat")) == 2 * 3  # 2 models x 3 answerable types
    assert browser.find_element(By.CSS_SELECTOR, "p.mde").text.startswith("with 12 answerable questions")
    browser.set_window_size(1280, browser.execute_script("return document.body.scrollHeight") + 100)
    assert browser.save_screenshot(str(tmp_path / "report.png")) and (tmp_path / "report.png").stat().st_size > 10_000


def test_the_mde_line_says_how_many_questions_would_detect_a_difference_of_0_02():
    from scipy.stats import norm

    values = sweep_values()
    runs = [config_run(name, "FINISHED", values[name], model=name) for name in ("leader", "close", "far")]
    results = build("ndcg_at_10", runs)
    leader = results.leaderboard.index[0]
    spreads = [(values[o] - values[leader]).std(ddof=1) for o in values if o != leader]
    z = norm.ppf(0.975) + norm.ppf(0.8)
    mde, needed = z * np.median(spreads) / np.sqrt(120), (z * np.median(spreads) / 0.02) ** 2
    assert results.mde_line() == (
        f"with 120 answerable questions, differences below {mde:.3f} ndcg_at_10 are not detectable (paired test, "
        f"alpha 0.05, power 80%); detecting 0.02 would take about {int(np.ceil(needed))} answerable questions"
    )
    assert results.mde_line() == (
        "with 120 answerable questions, differences below 0.012 ndcg_at_10 are not detectable (paired test, "
        "alpha 0.05, power 80%); detecting 0.02 would take about 43 answerable questions"
    )


def test_the_mde_line_never_reads_0_000():
    same = per_question(np.linspace(0.2, 0.8, 30))
    runs = [config_run("a", "FINISHED", same, model="a"), config_run("b", "FINISHED", same - 0.1, model="b")]
    assert build("ndcg_at_10", runs).mde_line() == (
        "with 30 answerable questions, differences in ndcg_at_10 as small as 0.001 are detectable (paired test, "
        "alpha 0.05, power 80%); detecting 0.02 would take about 2 answerable questions"
    )  # every question differs by 0.1: no spread
