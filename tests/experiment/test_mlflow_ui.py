"""A weight sweep of a hybrid, logged to a real `mlflow server` and read in its UI by headless
Chromium: the runs list names each run by what varies (apart within 20 characters, not cut), the
compare view opens on the objective, a member's hits are a table the artifact viewer shows, and
every address the command printed opens the UI's runs (not its GenAI mode); MLflow prints none of
its own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator

import mlflow
import pytest

from helpers.commands import sweep
from helpers.servers import free_port, stop_group, wait_until_answering

WEIGHTS = ("0.3", "0.5", "0.7")
RUN_NAME = "div[col-id='attributes.`Run Name`']"  # the runs list's name column


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    """`mlflow server` on a SQLite store, on a free port of 127.0.0.1, stopped after this module: its URL."""
    folder, port = tmp_path_factory.mktemp("ui-server"), free_port()
    with (folder / "server.log").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env=os.environ | {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},  # GenAI jobs: seconds to start
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(f"{url}/health", process, lambda: (folder / "server.log").read_text(), timeout=180)
        yield url
    finally:
        stop_group(process.pid)


@pytest.fixture(scope="module")
def weight_sweep(server, tmp_path_factory, small_kb_files) -> tuple[str, str]:
    """`python -m sweep -m model=hybrid model.weight=0.3,0.5,0.7` on the small knowledge base,
    logged to the server: (what it printed, the sweep run's id)."""
    cwd = tmp_path_factory.mktemp("weight-sweep")
    grid = ("-m", "model=hybrid", f"model.weight={','.join(WEIGHTS)}")
    result = sweep(cwd, small_kb_files, *grid, env={"MLFLOW_TRACKING_URI": server})
    assert result.returncode == 0, result.stderr[-3000:]
    [parent] = re.findall(r"^Sweep run: ([0-9a-f]{32}) ", result.stdout, re.MULTILINE)
    return result.stdout, parent


@pytest.mark.slow
def test_a_sweep_names_its_runs_by_what_varies_and_its_run_says_what_they_share(server, weight_sweep, small_kb_files):
    _, parent_id = weight_sweep
    client = mlflow.MlflowClient(server)
    parent = client.get_run(parent_id)
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent_id}'")
    assert sorted(c.info.run_name for c in children) == [f"weight={w}" for w in WEIGHTS]
    assert parent.info.run_name == f"sweep weight={','.join(WEIGHTS)}"
    # what every run has, which the names leave out: a tag and the sweep's description
    shared = parent.data.tags["sweep.shared_overrides"]
    assert shared.startswith("model=hybrid golden.path=") and f"golden.corpus={small_kb_files}" in shared
    assert f"`{shared}`" in parent.data.tags["mlflow.note.content"]
    for child in children:  # the whole command line stays the run's, for resume and the report
        assert child.data.tags["sweep.overrides"].startswith(f"model=hybrid model.weight={child.info.run_name[7:]} ")
        assert next(iter(child.data.metrics)) == "ndcg_at_10"  # the objective, logged first
    experiment = client.get_experiment(parent.info.experiment_id)
    assert experiment.tags["mlflow.experiment.primaryMetric.name"] == "ndcg_at_10"


@pytest.mark.slow
def test_every_address_printed_opens_the_runs_not_genai_mode(server, weight_sweep):
    printed, parent_id = weight_sweep
    experiment_id = mlflow.MlflowClient(server).get_run(parent_id).info.experiment_id
    assert "View run" not in printed and "View experiment" not in printed  # MLflow's own, without the mode
    assert re.findall(r"https?://\S+", printed) == [
        f"{server}/#/experiments/{experiment_id}/runs?workflowType=machine_learning",
        f"{server}/#/experiments/{experiment_id}/runs/{parent_id}?workflowType=machine_learning",
    ]


@pytest.mark.slow
def test_the_ui_shows_names_apart_the_objective_in_the_compare_view_and_the_member_hits(server, weight_sweep, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    printed, parent_id = weight_sweep
    wait = WebDriverWait(browser, 60)
    runs_view, run_view = re.findall(r"^Runs? view: (\S+)$", printed, re.MULTILINE)

    # the runs list, at the address printed: the sweep's run, opened, lists its runs by name
    browser.get(runs_view)
    wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, f"{RUN_NAME} button"))
    assert "Model training" in browser.find_element(By.TAG_NAME, "body").text
    browser.find_element(By.CSS_SELECTOR, f"{RUN_NAME} button").click()  # the sweep's run: show its runs
    wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, f"{RUN_NAME} a[href*='/runs/']")) == 4)
    links = browser.find_elements(By.CSS_SELECTOR, f"{RUN_NAME} a[href*='/runs/']")[1:]
    names = [link.text for link in links]
    assert sorted(names) == [f"weight={w}" for w in WEIGHTS]
    assert len({name[:20] for name in names}) == len(names)
    for link in links:  # shown whole, not cut with an ellipsis
        shown = link.find_element(By.TAG_NAME, "span")
        assert shown.get_property("scrollWidth") <= shown.get_property("clientWidth"), shown.text
    children = [link.get_attribute("href").rpartition("/runs/")[2] for link in links]

    # the compare view of the three runs: its parallel coordinates plot opens on the objective
    experiment_id = re.search(r"/experiments/(\d+)/", runs_view).group(1)
    server_url = runs_view.partition("/#/")[0]
    browser.get(
        f"{server_url}/#/compare-runs?runs={json.dumps(children)}&experiments={json.dumps([experiment_id])}"
        "&workflowType=machine_learning"
    )
    chosen = wait.until(lambda b: re.search(r"\nMetrics:\n(.*?)\nClear All", b.find_element(By.TAG_NAME, "body").text))
    assert chosen.group(1) == "ndcg_at_10"

    # the sweep's run, at the address printed; a run's member hits as a table in the artifact viewer
    browser.get(run_view)
    wait.until(lambda b: f"sweep weight={','.join(WEIGHTS)}" in b.find_element(By.TAG_NAME, "body").text)
    browser.get(f"{server_url}/#/experiments/{experiment_id}/runs/{children[0]}/artifacts/tables/member_hits.json")
    headers = wait.until(lambda b: [h.text for h in b.find_elements(By.CSS_SELECTOR, "[role='columnheader']")])
    assert headers[:5] == ["qid", "member", "rank", "doc", "score"]
