"""`import sweep`: the public API resolves lazily, each name from the module that defines it, and
importing the package alone pulls in none of the heavy libraries."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

import sweep


@pytest.mark.parametrize("name", [n for n in sweep.__all__ if n != "__version__"])
def test_every_public_name_resolves_to_its_definition(name):
    value = getattr(sweep, name)
    assert value.__name__ == name and value.__module__ == sweep._PUBLIC[name]


def test_the_version_comes_from_the_package_metadata():
    assert sweep.__version__ == metadata.version("golden-sweep")


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'scores'"):
        sweep.scores  # noqa: B018


def test_importing_the_package_loads_no_heavy_library():
    code = "import sys, sweep; print(sorted(m for m in ('pandas', 'torch', 'mlflow', 'hydra') if m in sys.modules))"
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert printed.strip() == "[]"


def test_scoring_from_python_needs_only_the_public_names(tmp_path):
    (tmp_path / "run.trec").write_text("q1 Q0 d2 1 2.0 sys\nq1 Q0 d1 2 1.0 sys\n")
    golden = sweep.load_golden(_qrels(tmp_path), warn=False)
    evaluation = sweep.score(golden, sweep.Run.read(tmp_path / "run.trec"))
    assert isinstance(evaluation, sweep.Evaluation)
    assert evaluation.mean["mrr"] == pytest.approx(0.5)


def _qrels(folder):
    (folder / "qrels.txt").write_text("q1 0 d1 1\n")
    return folder / "qrels.txt"
