"""A retriever written outside golden-sweep, defined in this file, runs through `python -m sweep`
by config alone: on the command line (`model=custom model._target_=...`) and as a YAML of the
user's own in a Hydra search path, swept against BM25."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from helpers.commands import runs_in, sweep
from sweep.evaluation import score
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden
from sweep.retrieval.chunking import TokenChunker
from sweep.retrieval.pipeline import Pipeline
from sweep.retrieval.retriever import Retriever

WORD = re.compile(r"[a-z0-9]+")
HERE = Path(__file__).resolve().parent
TESTS = [str(HERE), str(HERE.parent)]  # on PYTHONPATH: `test_custom_retriever` is importable, and its `helpers`


class KeywordRetriever(Retriever):
    """A chunk scores the share of the question's words it contains; below `min_overlap`, no match."""

    def __init__(self, min_overlap: float = 0.0) -> None:
        self.min_overlap = min_overlap

    def build(self, texts: Sequence[str]) -> None:
        self.words = [set(WORD.findall(text.lower())) for text in texts]

    def search(self, queries, k, allowed=None, exact=False):
        candidates = np.arange(len(self.words)) if allowed is None else np.asarray(allowed)
        scores, ids = np.full((len(queries), k), -np.inf, dtype=np.float32), np.full((len(queries), k), -1)
        for row, query in enumerate(queries):
            asked = set(WORD.findall(query.lower()))
            shares = np.array([len(asked & self.words[i]) / max(len(asked), 1) for i in candidates])
            best = [i for i in np.lexsort((candidates, -shares)) if shares[i] > self.min_overlap][:k]
            scores[row, : len(best)], ids[row, : len(best)] = shares[best], candidates[best]
        return scores, ids

    def stats(self) -> dict[str, float]:
        return {"keyword/vocabulary": float(len(set().union(*self.words)))}


def in_process(data: Path, retriever: Retriever) -> float:
    corpus, golden = load_corpus(data / "corpus.jsonl"), load_golden(data / "golden.jsonl", warn=False)
    return score(golden, Pipeline(TokenChunker(0), retriever).retrieve(corpus, golden).results).mean["ndcg_at_10"]


@pytest.mark.slow
def test_a_retriever_defined_here_runs_by_a_command_line_override(tmp_path, small_kb_files):
    target = f"model._target_={__name__}.KeywordRetriever"
    result = sweep(
        tmp_path, small_kb_files, "model=custom", target, "+model.min_overlap=0.2", "chunk=0", env=pythonpath()
    )
    assert result.returncode == 0, result.stderr[-3000:]
    _, [run] = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert run.info.status == "FINISHED"
    assert run.data.params["model"] == "custom" and run.data.params["model._target_"] == f"{__name__}.KeywordRetriever"
    assert run.data.metrics["keyword/vocabulary"] > 100  # its own stats() reached MLflow
    assert run.data.metrics["ndcg_at_10"] == pytest.approx(in_process(small_kb_files, KeywordRetriever(0.2)), abs=1e-12)


@pytest.mark.slow
def test_a_retriever_defined_here_is_swept_from_a_yaml_of_its_own(tmp_path, small_kb_files):
    conf = tmp_path / "my_conf"
    (conf / "model").mkdir(parents=True)
    (conf / "model" / "keyword.yaml").write_text(f"_target_: {__name__}.KeywordRetriever\nmin_overlap: 0.0\n")
    searchpath = f"hydra.searchpath=[file://{conf}]"
    result = sweep(tmp_path, small_kb_files, "-m", searchpath, "model=keyword,bm25", "chunk=0", env=pythonpath())
    assert result.returncode == 0, result.stderr[-3000:]
    _, runs = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    children = {r.data.params["model"]: r for r in runs if r.data.tags.get("mlflow.parentRunId")}
    assert sorted(children) == ["bm25", "keyword"] and {r.info.status for r in children.values()} == {"FINISHED"}
    keyword = children["keyword"].data.metrics["ndcg_at_10"]
    assert keyword == pytest.approx(in_process(small_kb_files, KeywordRetriever()), abs=1e-12)
    assert "keyword" in result.stdout + result.stderr  # the leaderboard names it


def pythonpath() -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join(filter(None, [*TESTS, os.environ.get("PYTHONPATH")]))}
