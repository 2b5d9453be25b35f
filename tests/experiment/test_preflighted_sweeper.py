"""The default sweeper (`hydra/sweeper=preflighted`) skips Hydra's composition of a batch only for
the combinations `python -m sweep` composed and checked first; any other it composes as Hydra's
basic sweeper does, so a bad one still fails before anything launches. Hydra's mode, which
`hydra.main` would compose the config once more to read, is the one the preflight composed."""

from __future__ import annotations

import pytest
from hydra._internal.callbacks import Callbacks
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path
from hydra.core.global_hydra import GlobalHydra
from hydra.core.plugins import Plugins
from hydra.errors import ConfigCompositionException
from hydra.types import HydraContext, RunMode

from sweep.experiment import checked
from sweep.experiment.cli import preflight, register_default_sweeper


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
    monkeypatch.setattr(Hydra, "get_mode", Hydra.get_mode)  # Hydra's own again after the test
    checked.hand_mode_to_hydra()
    assert hydra.get_mode("config", overrides) == composed
