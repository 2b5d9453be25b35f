from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import mlflow
import pytest
from hydra import compose, initialize_config_module
from omegaconf import DictConfig

from sweep.corpus import Corpus, Document, load_corpus
from sweep.golden import GoldenSet, Question, load_golden
from sweep.runs import Run

KB = Path(__file__).resolve().parents[1] / "data" / "kb"


def golden_of(relevant: Mapping[str, Mapping[str, int]], types: Mapping[str, str] | None = None) -> GoldenSet:
    """A golden set straight from {qid: {doc: grade}}."""
    types = types or {}
    return GoldenSet(
        tuple(
            Question(qid, f"question {qid}", dict(rel), type=types.get(qid, "untyped")) for qid, rel in relevant.items()
        )
    )


def corpus_of(*ids: str, text: str = "some text") -> Corpus:
    """A corpus of the given document ids, each with the same text."""
    return Corpus(tuple(Document(doc_id, text) for doc_id in ids))


def ranked(rankings: Mapping[str, Sequence[str]]) -> Run:
    """A pipeline run from {qid: [doc, ...]} in rank order, scores descending."""
    return Run.from_ranked({q: [(d, float(len(docs) - i)) for i, d in enumerate(docs)] for q, docs in rankings.items()})


@pytest.fixture
def seed_example() -> tuple[GoldenSet, Run]:
    """DESIGN.md's worked example."""
    golden = golden_of({"vacation days": {"d1": 1}, "hotel limit": {"d6": 1}, "stolen laptop": {"d10": 1}})
    run = ranked(
        {"vacation days": ["d2", "d1", "d9"], "hotel limit": ["d6", "d5", "d7"], "stolen laptop": ["d3", "d4", "d8"]}
    )
    return golden, run


def write_kb_slice(
    folder: Path, departments: Collection[str], documents: int | None = None, unanswerable: int = 3
) -> Path:
    """A slice of the bundled knowledge base in `folder` (corpus.jsonl, golden.jsonl): the first
    `documents` documents of `departments`, every question answered from them alone, and the
    first `unanswerable` unanswerable questions."""
    records = [json.loads(line) for line in (KB / "corpus.jsonl").read_text().splitlines()]
    kept = [d for d in records if d["metadata"]["department"] in departments][:documents]
    ids = {d["id"] for d in kept}
    questions = [json.loads(line) for line in (KB / "golden.jsonl").read_text().splitlines()]
    answerable = [q for q in questions if q["relevant"] and set(q["relevant"]) <= ids]
    nothing = [q for q in questions if not q["relevant"]][:unanswerable]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in kept))
    (folder / "golden.jsonl").write_text("".join(json.dumps(q) + "\n" for q in answerable + nothing))
    return folder


@pytest.fixture(scope="session")
def small_kb_files(tmp_path_factory) -> Path:
    """12 Finance documents, the questions about them and 3 unanswerable ones, as files: for
    `python -m sweep` in a subprocess."""
    return write_kb_slice(tmp_path_factory.mktemp("small-kb-files"), {"Finance"}, documents=12)


@pytest.fixture(scope="session")
def small_kb(tmp_path_factory) -> tuple[Corpus, GoldenSet]:
    """The Finance and IT documents (28), the questions about them and 3 unanswerable ones."""
    folder = write_kb_slice(tmp_path_factory.mktemp("small-kb"), {"Finance", "IT"})
    corpus = load_corpus(folder / "corpus.jsonl")
    return corpus, load_golden(folder / "golden.jsonl", corpus, warn=False)


def sweep_command(cwd: Path, data: Path, *overrides: str, env: dict | None = None) -> tuple[list[str], dict]:
    """`python -m sweep OVERRIDES` on `data`, everything it writes under `cwd`: (argv, environment)."""
    args = [
        sys.executable, "-m", "sweep", *overrides,
        f"golden.path={data / 'golden.jsonl'}", f"golden.corpus={data / 'corpus.jsonl'}",
        f"cache_dir={cwd / 'cache'}", f"hydra.run.dir={cwd / 'outputs'}", f"hydra.sweep.dir={cwd / 'multirun'}",
    ]  # fmt: skip
    return args, {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"} | (env or {})


def sweep(cwd: Path, data: Path, *overrides: str, env: dict | None = None) -> subprocess.CompletedProcess:
    args, environment = sweep_command(cwd, data, *overrides, env=env)
    return subprocess.run(args, cwd=cwd, env=environment, capture_output=True, text=True, timeout=900)


def runs_in(store: str) -> tuple[mlflow.MlflowClient, list]:
    client = mlflow.MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name("golden-sweep")
    return client, client.search_runs([experiment.experiment_id])


@pytest.fixture(scope="session")
def real_sweep(tmp_path_factory, small_kb_files) -> tuple[str, dict[str, str], Path, str]:
    """`python -m sweep -m model=bm25,tfidf` on the small knowledge base, once per session:
    (store, {model: child run id}, cwd, what it printed). Its sweep folder is cwd/multirun."""
    cwd = tmp_path_factory.mktemp("real-sweep")
    result = sweep(cwd, small_kb_files, "-m", "model=bm25,tfidf")
    assert result.returncode == 0, result.stderr[-3000:]
    store = f"sqlite:///{cwd / 'mlflow.db'}"
    _, runs = runs_in(store)
    children = {r.data.params["model"]: r.info.run_id for r in runs if r.data.tags.get("mlflow.parentRunId")}
    assert sorted(children) == ["bm25", "tfidf"]
    return store, children, cwd, result.stdout


def compose_config(*overrides: str) -> DictConfig:
    """The config `python -m sweep OVERRIDES` runs, composed in process."""
    with initialize_config_module(version_base="1.3", config_module="sweep.conf"):
        return compose("config", overrides=list(overrides))


CHROMIUM = ("chromium", "chromedriver")  # Debian's packages `chromium` and `chromium-driver`


@pytest.fixture
def browser():
    """Headless Chromium (Debian's, through its chromedriver: nothing is downloaded), closed after
    the test. Skips, saying what to install, when the machine has no chromium."""
    missing = [name for name in CHROMIUM if shutil.which(name) is None]
    if missing:
        pytest.skip(f"no {' or '.join(missing)} here: apt-get install -y chromium chromium-driver (.ci/run does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1600"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        yield driver
    finally:
        driver.quit()
