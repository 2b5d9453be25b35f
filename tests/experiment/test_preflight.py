"""Before Hydra starts, `python -m sweep` composes and checks every combination Hydra will launch
(`sweep.experiment.preflight`), reading the command line as Hydra does (`command_line`): a bad value in any
combination is one line and exit code 2 before the first runs. Hydra then composes each run or
job itself, through its own unpatched code; Hydra's private versions of what `command_line` does
are read here only, to show that both agree."""

from __future__ import annotations

import sys

import hydra
import pytest
from hydra import compose, initialize_config_module
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra._internal.utils import get_args_parser
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser

from helpers.commands import one_error_line
from sweep.experiment import cli
from sweep.experiment.command_line import hydra_arguments_parser, sweep_combinations
from sweep.experiment.preflight import preflight

SWEEPS = [
    ["chunk=64,128", "index=flat,hnsw"],
    ["chunk=range(0,3)", "model=bm25,tfidf", "chunk=7,8"],  # a key given again: the later values, its first place
    ["+extra=a,b", "model@model.members.lexical=bm25,tfidf", "~reranker", "index=choice(flat,hnsw)"],
]


def option_table(parser) -> dict[str, object]:
    """Each option string of `parser` and how many arguments it takes (0: a flag)."""
    return {option: action.nargs for action in parser._actions for option in action.option_strings}


def test_the_command_line_is_read_with_the_options_of_hydras_own_parser():
    assert option_table(hydra_arguments_parser()) == option_table(get_args_parser())
    argv = ["-cn", "other", "-m", "chunk=1,2", "--info", "plugins", "index=flat"]
    ours, _ = hydra_arguments_parser().parse_known_args(argv)
    hydras, _ = get_args_parser().parse_known_args(argv)
    assert (ours.overrides, ours.config_name, ours.multirun, ours.info) == (
        hydras.overrides, hydras.config_name, hydras.multirun, hydras.info,
    )  # fmt: skip


@pytest.mark.parametrize("overrides", SWEEPS, ids=["grid", "repeated-key", "add-package-delete"])
def test_the_combinations_are_those_of_hydras_basic_sweeper_in_its_order(overrides):
    parsed = OverridesParser.create().parse_overrides(overrides)
    assert sweep_combinations(parsed) == BasicSweeper.split_arguments(parsed, None)[0]


def overrides_of_each_job(argv: list[str], tmp_path, monkeypatch) -> list[list[str]]:
    """`python -m sweep -m ARGV` as `hydra.main` launches it, its task keeping each job's overrides."""
    kept = []

    @hydra.main(version_base="1.3", config_path="pkg://sweep.conf", config_name="config")
    def keep(cfg) -> None:
        kept.append(list(HydraConfig.get().overrides.task))

    monkeypatch.setattr(sys, "argv", [
        "sweep", "-m", *argv, "~hydra.callbacks.mlflow_parent_run", f"hydra.sweep.dir={tmp_path}",
        "hydra/job_logging=none", "hydra/hydra_logging=none",  # this process's logging left as it is
    ])  # fmt: skip
    keep()
    return kept


def test_what_the_preflight_counts_is_what_hydra_launches(tmp_path, monkeypatch):
    argv = ["chunk=0,64", "model=bm25,tfidf", "chunk=0,128", "hydra/launcher=basic"]
    jobs = overrides_of_each_job(argv, tmp_path, monkeypatch)
    assert jobs == sweep_combinations(OverridesParser.create().parse_overrides(argv[:3]))
    assert preflight(["-m", *argv, f"hydra.sweep.dir={tmp_path}"]) == len(jobs) == 4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["-m", "model=bm25", "index=hnsw", "index.M=16,0,32"],
            "index.M=0: must be an integer from 2 to 1024 (in the combination model=bm25 index=hnsw index.M=0)",
        ),
        (["-m", "chunk=interval(0,512)"], "chunk=interval(0,512): Hydra's basic sweeper takes lists, range() and"),
        (["-m", "chunk=0,64", "model=bm25,no_such_model"], "model=no_such_model: no such option (the options: "),
        (
            ["-m", "hydra/sweeper=preflighted", "model=bm25", "index=hnsw", "index.M=16,0"],
            "index.M=0: must be an integer from 2 to 1024",
        ),  # the basic sweeper by its old name: checked as the default is
    ],
)
def test_a_bad_combination_is_refused_in_one_line_before_hydra_starts(argv, message, tmp_path, monkeypatch, capsys):
    started = []
    monkeypatch.setattr(cli, "hydra_main", lambda: started.append("Hydra"))
    monkeypatch.setattr(cli, "stop_on_signals", lambda: None)  # this process's own signal handling kept
    monkeypatch.setattr(sys, "argv", ["sweep", *argv, f"hydra.sweep.dir={tmp_path / 'multirun'}"])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 2 and started == []
    assert one_error_line(capsys.readouterr().err).startswith(message)
    assert list(tmp_path.iterdir()) == []  # no store, no cache, no output folder


def test_the_default_sweepers_old_name_still_names_hydras_basic_sweeper():
    """`hydra/sweeper=preflighted`, the default until Hydra's own became it, in a command line or a
    config of its time: the same sweeper."""
    with initialize_config_module(version_base="1.3", config_module="sweep.conf"):
        default, old = (
            compose("config", overrides=o, return_hydra_config=True) for o in ([], ["hydra/sweeper=preflighted"])
        )
    assert default.hydra.runtime.choices["hydra/sweeper"] == "basic"
    assert old.hydra.sweeper == default.hydra.sweeper and default.hydra.sweeper._target_.endswith(".BasicSweeper")
