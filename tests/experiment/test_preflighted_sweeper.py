"""The default sweeper (`hydra/sweeper=preflighted`) skips Hydra's composition of a batch only for
the combinations `python -m sweep` composed and checked first; any other it composes as Hydra's
basic sweeper does, so a bad one still fails before anything launches. Hydra's mode, which
`hydra.main` would compose the config once more to read, is the one the preflight composed, and
so is each run's or job's config: the same as Hydra's own composition, which does not happen."""

from __future__ import annotations

import sys

import hydra
import pytest
from hydra._internal.callbacks import Callbacks
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.errors import ConfigCompositionException
from hydra.experimental.callback import Callback
from hydra.types import HydraContext, RunMode
from omegaconf import OmegaConf

from sweep.experiment import checked
from sweep.experiment.cli import pass_to_jobs, preflight, register_default_sweeper


@pytest.fixture
def sweeper():
    """The sweeper as `python -m sweep -m` makes it: registered, built from the composed config."""
    register_default_sweeper()
    loader = ConfigLoaderImpl(config_search_path=create_config_search_path("pkg://sweep.conf"))
    config = loader.load_configuration("config", overrides=[], run_mode=RunMode.MULTIRUN)
    assert config.hydra.sweeper._target_.endswith("PreflightedSweeper")
    return Plugins.instance().instantiate_sweeper(
        config=config, hydra_context=HydraContext(config_loader=loader, callbacks=Callbacks()), task_function=print
    )


def test_the_preflight_records_the_combinations_as_the_sweeper_launches_them(tmp_path):
    argv = ["-m", "chunk=64,128", "index=flat,hnsw", "hydra/launcher=basic", f"hydra.sweep.dir={tmp_path}"]
    assert preflight(argv) == 4
    for chunk in ("64", "128"):
        for index in ("flat", "hnsw"):  # Hydra's own overrides are not the jobs' (hydra.overrides.task)
            assert checked.was_checked([f"chunk={chunk}", f"index={index}"])
    assert not checked.was_checked(["chunk=64", "index=ivf"]) and not checked.was_checked(["chunk=64"])
    assert preflight(["-m", "chunk=256", f"hydra.sweep.dir={tmp_path}"]) == 1  # the next command's, in this process
    assert checked.was_checked(["chunk=256"]) and not checked.was_checked(["chunk=64", "index=flat"])


def test_what_the_preflight_checked_is_not_composed_again_and_anything_else_is(sweeper):
    checked.record([["index.no_such_key=1"]])  # recorded as checked: the sweeper trusts it, composing nothing
    sweeper.validate_batch_is_legal([["index.no_such_key=1"]])
    with pytest.raises(ConfigCompositionException, match="index.no_such_key_either"):
        sweeper.validate_batch_is_legal([["chunk=64"], ["index.no_such_key_either=1"]])


@pytest.mark.parametrize(
    "argv",
    [
        ["model=bm25"],
        ["-m", "model=bm25,tfidf", "chunk=0"],
        ["-m", "model=bm25", "hydra.mode=RUN"],  # Hydra warns and sweeps anyway: it must see RUN here too
    ],
)
def test_hydra_is_handed_the_mode_it_would_compose(argv, tmp_path, monkeypatch):
    overrides = [a for a in argv if a != "-m"]
    GlobalHydra.instance().clear()
    hydra = Hydra.create_main_hydra2("sweep", create_config_search_path("pkg://sweep.conf"))
    try:
        composed = hydra.get_mode("config", overrides)  # Hydra's own: composes the config
    finally:
        GlobalHydra.instance().clear()
    checked.record_mode(RunMode.MULTIRUN if composed == RunMode.RUN else RunMode.RUN)  # not the answer
    preflight([*argv, f"hydra.sweep.dir={tmp_path}", f"hydra.run.dir={tmp_path}"])
    hand_to_hydra(monkeypatch)
    assert hydra.get_mode("config", overrides) == composed


def hand_to_hydra(monkeypatch) -> None:
    """`checked.hand_to_hydra()`, with Hydra's own methods put back after the test."""
    monkeypatch.setattr(Hydra, "get_mode", Hydra.get_mode)
    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", ConfigLoaderImpl.load_configuration)
    checked.hand_to_hydra()


class JobsEnvironment(Callback):
    """What the sweep's own callback adds to every job's overrides (`pass_to_jobs`), without
    opening a parent run in MLflow."""

    def on_multirun_start(self, config, **kwargs) -> None:
        pass_to_jobs(config, {"SWEEP_PARENT_RUN_ID": "0" * 32, "MLFLOW_TRACKING_URI": "sqlite:////tmp/a b/mlflow.db"})


def configs_of_each_run(argv: list[str], monkeypatch) -> list[tuple[dict, dict]]:
    """`python -m sweep ARGV` as `hydra.main` runs it, the task keeping what Hydra gives each run or
    job: (its config, Hydra's node)."""
    kept = []

    @hydra.main(version_base="1.3", config_path="pkg://sweep.conf", config_name="config")
    def keep(cfg) -> None:
        kept.append((OmegaConf.to_container(cfg), OmegaConf.to_container(HydraConfig.get())))

    monkeypatch.setattr(sys, "argv", ["sweep", *argv])
    keep()
    return kept


@pytest.mark.parametrize(
    ("argv", "runs"),
    [
        (["hydra.job.chdir=false", "index=hnsw", "index.M=16", "experiment='golden sweep, a'"], 1),
        (["-m", "model=bm25", "filter=pre", "filter.where={status: current}", "hydra/launcher=basic", "chunk=0,40"], 2),
    ],
)
def test_a_run_or_job_is_handed_the_config_hydra_would_compose_and_hydra_composes_it_no_more(
    argv, runs, tmp_path, monkeypatch
):
    """Each run or job gets the config Hydra composes for it (its mode added, and in a sweep the
    parent run and the store for every job); Hydra then composes only the sweep's own config."""
    register_default_sweeper()
    argv = [
        *argv, f"hydra.sweep.dir={tmp_path / 'multirun'}", f"hydra.run.dir={tmp_path / 'run'}",
        "~hydra.callbacks.mlflow_parent_run", f"+hydra.callbacks.jobs._target_={__name__}.JobsEnvironment",
        "hydra/job_logging=none", "hydra/hydra_logging=none",  # this process's logging left as it is (`disabled` disables every logger)
    ]  # fmt: skip
    hydras_own = configs_of_each_run(argv, monkeypatch)
    assert len(hydras_own) == runs
    preflight(argv)
    hand_to_hydra(monkeypatch)
    composing = []
    compose = ConfigLoaderImpl._load_configuration_impl
    monkeypatch.setattr(
        ConfigLoaderImpl, "_load_configuration_impl", lambda *a, **k: composing.append(a) or compose(*a, **k)
    )
    assert configs_of_each_run(argv, monkeypatch) == hydras_own
    assert len(composing) == (1 if "-m" in argv else 0)  # a sweep's own config, which no job runs with
