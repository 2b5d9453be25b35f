"""golden-sweep: does a retrieval change make retrieval better or worse?

The public API, for scoring and comparing from Python:

    import sweep

    corpus = sweep.load_corpus("data/kb/corpus.jsonl")
    golden = sweep.load_golden("data/kb/golden.jsonl", corpus)
    evaluation = sweep.score(golden, sweep.Run.read("my_system.trec"))
    print(evaluation.mean["ndcg_at_10"])

Kept import-light: every name (`__version__` too) is imported on first use, so `python -m
sweep.evaluate` starts without torch, pandas or MLflow.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sweep.best import best_config
    from sweep.compare import compare_runs
    from sweep.evaluation.scoring import Evaluation, score
    from sweep.experiment.trial import run_trial
    from sweep.formats.corpus import load_corpus
    from sweep.formats.golden import load_golden
    from sweep.formats.runs import Run
    from sweep.retrieval.retriever import Retriever

# name -> the module that defines it
_PUBLIC = {
    "load_corpus": "sweep.formats.corpus",
    "load_golden": "sweep.formats.golden",
    "Run": "sweep.formats.runs",
    "score": "sweep.evaluation.scoring",
    "Evaluation": "sweep.evaluation.scoring",
    "compare_runs": "sweep.compare",
    "run_trial": "sweep.experiment.trial",
    "best_config": "sweep.best",
    "Retriever": "sweep.retrieval.retriever",
}
__all__ = [
    "Evaluation",
    "Retriever",
    "Run",
    "__version__",
    "best_config",
    "compare_runs",
    "load_corpus",
    "load_golden",
    "run_trial",
    "score",
]


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(import_module(_PUBLIC[name]), name)
    if name == "__version__":  # on first use too: importing importlib.metadata costs more than sweep.evaluate's modules
        return _version()
    raise AttributeError(f"module 'sweep' has no attribute {name!r}")


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("golden-sweep")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def __dir__() -> list[str]:
    return sorted(__all__)
