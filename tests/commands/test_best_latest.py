"""`sweep.best --sweep latest`, and `best_config()`'s paths made absolute: the winner runs again from any folder."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from helpers import processes
from helpers.commands import sweep
from sweep.best import absolute_paths, main, run_folder
from sweep.tracking.reading import WORKING_FOLDER


@pytest.mark.slow
def test_the_latest_sweeps_winner_runs_again_from_another_folder(tmp_path, small_kb_files, monkeypatch):
    ran_in, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copytree(small_kb_files, ran_in / "data")
    # golden.path, golden.corpus and cache_dir relative to the folder the sweep ran in
    result = sweep(ran_in, Path("data"), "-m", "model=bm25", "chunk=0,128", cache=Path("cache"))
    assert result.returncode == 0, result.stderr[-3000:]
    store = f"sqlite:///{ran_in / 'mlflow.db'}"

    cli = processes.run(
        [sys.executable, "-m", "sweep.best", "--sweep", "latest", "--output", "best.yaml"],
        cwd=elsewhere, capture_output=True, text=True, timeout=120, env=os.environ | {"MLFLOW_TRACKING_URI": store},
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.startswith("run ") and "reproduce: python -m sweep" in cli.stdout
    written = yaml.safe_load((elsewhere / "best.yaml").read_text())
    assert written["golden"]["path"] == str(ran_in / "data" / "golden.jsonl")
    assert written["golden"]["corpus"] == str(ran_in / "data" / "corpus.jsonl")
    assert written["cache_dir"] == str(ran_in / "cache")

    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.chdir(elsewhere)
    from sweep import best_config
    from sweep.best import find_best
    from sweep.experiment.trial import run_trial
    from sweep.tracking.resolve import run_pairs

    winner = find_best(sweep="latest")
    cfg = best_config(sweep="latest")
    assert Path(cfg.golden.path).is_absolute() and Path(cfg.cache_dir).is_absolute()
    again = run_trial(cfg, winner.choices, winner.overrides)  # from `elsewhere`, which holds no data/
    assert again.objective == pytest.approx(winner.value, abs=1e-12)
    assert not (elsewhere / "data").exists()

    # sweep.compare and sweep.check take `latest` too: the sweep's two children against the winner
    pairs = run_pairs("latest", winner.run_id)
    assert len(pairs) == 2 and {b.run_id for _, b in pairs} == {winner.run_id}


def test_relative_paths_become_absolute_against_the_folder_the_run_ran_in(tmp_path):
    (tmp_path / "models" / "mine").mkdir(parents=True)
    config = {
        "golden": {"path": "data/golden.jsonl", "corpus": "data/corpus.jsonl", "split": "test"},
        "cache_dir": ".cache/golden-sweep",
        "model": {
            "folder": ".cache/golden-sweep",
            "embedder": {"path": "models/mine", "model": "text-embedding-3-small"},
            "members": [{"tokenizer": "models/mine"}, {"tokenizer": "bert-base-uncased"}],
        },
        "reranker": {"model": "/abs/cross-encoder"},
        "filter": {"where": {"path": "hr/leave.md"}},
        "chunk": 200,
    }
    made = absolute_paths(config, tmp_path)
    assert made["golden"] == {
        "path": str(tmp_path / "data/golden.jsonl"),
        "corpus": str(tmp_path / "data/corpus.jsonl"),
        "split": "test",
    }
    assert made["cache_dir"] == made["model"]["folder"] == str(tmp_path / ".cache/golden-sweep")
    assert made["model"]["embedder"] == {"path": str(tmp_path / "models/mine"), "model": "text-embedding-3-small"}
    assert made["model"]["members"] == [
        {"tokenizer": str(tmp_path / "models/mine")},
        {"tokenizer": "bert-base-uncased"},
    ]
    assert made["reranker"] == {"model": "/abs/cross-encoder"}  # absolute already
    assert made["filter"] == {"where": {"path": "hr/leave.md"}}  # a metadata field, not a file
    assert made["chunk"] == 200
    assert absolute_paths(config, None) == config  # where the run ran is unknown: as logged


def test_the_folder_a_run_ran_in_is_its_tag_or_what_its_corpus_path_adds():
    config = {"golden": {"path": "data/golden.jsonl", "corpus": "./data/corpus.jsonl"}}
    assert run_folder(config, {WORKING_FOLDER: "/work/here"}) == Path("/work/here")
    # a run logged before the tag: its data.corpus tag is the corpus's absolute path
    assert run_folder(config, {"data.corpus": "/work/there/data/corpus.jsonl"}) == Path("/work/there")
    assert run_folder(config, {"data.corpus": "/elsewhere/corpus.jsonl"}) is None
    assert run_folder({"golden": {"corpus": "/abs/corpus.jsonl"}}, {"data.corpus": "/abs/corpus.jsonl"}) is None
    assert run_folder(config, {}) is None


def test_a_sweep_that_is_neither_an_id_nor_latest_is_one_line(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--sweep", "last"])
    assert exited.value.code == 2
    assert "--sweep 'last': not an MLflow run id (32 hexadecimal digits), nor 'latest'" in capsys.readouterr().err
