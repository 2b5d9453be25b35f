"""A sweep's runs are named by what varies in it: the overrides the sweep shares, as Hydra's basic
sweeper hands them to every job, left out; each key that is left in its shortest form among them.
(A real sweep's names in the MLflow UI: test_mlflow_ui.py.)"""

from __future__ import annotations

import pytest
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from sweep.experiment.command_line import split_sweep
from sweep.reporting.configs import short_keys, varying_label

SWEEPS = {
    "a hybrid's weight": (
        ["model=hybrid", "model.weight=0.0,0.5,1.0", "golden.path='my golden.jsonl'", "+extra=x"],
        ["weight=0.0", "weight=0.5", "weight=1.0"],
    ),
    "two members' k1, one of them shared": (
        ["model=hybrid", "model.members.bm25.k1=1.2,1.5", "model.members.tfidf.k1=1.0", "model.norm=z,rank"],
        ["k1=1.2 norm=z", "k1=1.2 norm=rank", "k1=1.5 norm=z", "k1=1.5 norm=rank"],
    ),
    "two members' k1, both varying": (
        ["model=hybrid", "model.members.bm25.k1=1.2,1.5", "model.members.tfidf.k1=1.0,2.0"],
        [
            "bm25.k1=1.2 tfidf.k1=1.0",
            "bm25.k1=1.2 tfidf.k1=2.0",
            "bm25.k1=1.5 tfidf.k1=1.0",
            "bm25.k1=1.5 tfidf.k1=2.0",
        ],
    ),
    "a group option placed in a package, and range()": (
        ["model@model.members.bm25=bm25,tfidf", "chunk=range(100,300,100)", "~reranker"],
        ["bm25=bm25 chunk=100", "bm25=bm25 chunk=200", "bm25=tfidf chunk=100", "bm25=tfidf chunk=200"],
    ),
}


@pytest.mark.parametrize(("argv", "names"), SWEEPS.values(), ids=SWEEPS.keys())
def test_each_job_is_named_by_what_varies_as_hydras_basic_sweeper_launches_it(argv, names):
    jobs = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(argv), None)[0]
    varying, shared = split_sweep(argv)
    assert all(override in job for job in jobs for override in shared)  # as each job has them
    assert [varying_label(job, shared) for job in jobs] == names


def test_the_names_of_a_sweep_of_one_setting_differ_within_20_characters():
    argv = ["model=hybrid", "model.weight=0.0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0", "model.norm=min-max"]
    jobs = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(argv), None)[0]
    names = [varying_label(job, split_sweep(argv)[1]) for job in jobs]
    assert len({name[:20] for name in names}) == len(names) == 11 and max(map(len, names)) == len("weight=0.0")


def test_the_sweeps_run_is_named_by_its_varying_overrides_as_given():
    varying, shared = split_sweep(["model=hybrid", "model.weight=interval(0,1)", "model.norm=z"])
    assert (varying, shared) == (["model.weight=interval(0,1)"], ["model=hybrid", "model.norm=z"])
    assert varying_label(varying, ()) == "weight=interval(0,1)"


def test_a_key_is_shortened_only_as_far_as_it_stays_apart():
    keys = ["model", "model.weight", "weight", "model.members.bm25.k1", "model.members.tfidf.k1"]
    assert short_keys(keys) == {
        "model": "model",
        "model.weight": "model.weight",  # `weight` is another key
        "weight": "weight",
        "model.members.bm25.k1": "bm25.k1",
        "model.members.tfidf.k1": "tfidf.k1",
    }
