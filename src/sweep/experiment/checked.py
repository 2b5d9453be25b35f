"""What `python -m sweep` composed and checked before Hydra started (its preflight), so that Hydra
does not compose it again: the combinations, as Hydra's sweeper will launch them (the default
sweeper, `hydra/sweeper=preflighted`, src/hydra_plugins/golden_sweep, skips its own composition of
those), Hydra's mode, and each combination's config, which Hydra's config loader takes from here
rather than composing it once more for the run or the job (`hand_to_hydra`)."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.hydra import Hydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode
from omegaconf import DictConfig

CONFIG_NAME = "config"  # the preflight composes golden-sweep's own config only
# what is added to the command line's overrides once the preflight is done: the mode `hydra.main`
# sets where the command line does not (Hydra 1.3, `_run_app`), and the sweep's environment for
# every job (cli.pass_to_jobs)
HYDRA_MODES = ("hydra.mode=RUN", "hydra.mode=MULTIRUN")
ENV_SET = "++hydra.job.env_set."
KEPT = 100  # compositions kept for Hydra (about 0.2 MB each); a larger sweep's others are composed as Hydra does

_checked: set[tuple[str, ...]] = set()
_modes: list[RunMode | None] = []  # hydra.mode of the first combination, once the preflight composed it


@dataclass
class _Composition:
    added_at: int  # where, among its overrides, Hydra and the sweep add theirs
    config: DictConfig  # with Hydra's node, as Hydra's config loader composes it for a run


_compositions: dict[tuple[str, ...], _Composition] = {}


def forget() -> None:
    """What an earlier preflight in this process recorded, forgotten: a preflight records one
    command's combinations, mode and compositions (in-process callers, such as the tests, run many)."""
    _checked.clear()
    _modes.clear()
    _compositions.clear()


def record(combinations: Iterable[Sequence[str]]) -> None:
    _checked.update(tuple(overrides) for overrides in combinations)


def was_checked(overrides: Sequence[str]) -> bool:
    return tuple(overrides) in _checked


def record_mode(mode: RunMode | None) -> None:
    """`hydra.mode` as the preflight composed it with Hydra's own config: what the command line
    and the config set (None unless one of them does)."""
    _modes[:] = [mode]


def record_composition(overrides: Sequence[str], added_at: int, config: DictConfig) -> None:
    """`config`, composed with Hydra's node from `overrides` as Hydra will ask for it: a single run's
    command line (Hydra adds its mode at the end), or a job's (Hydra's own overrides, where Hydra and
    the sweep add theirs, then the combination's). A copy is kept: what the preflight's checks do
    with theirs never reaches the run."""
    if len(_compositions) < KEPT and not config.hydra.job.env_copy:  # env_copy is read when a job is composed
        _compositions[tuple(overrides)] = _Composition(added_at, copy.deepcopy(config))


def _added(override: str) -> bool:
    return override in HYDRA_MODES or override.startswith(ENV_SET)


def composed(config_name: str | None, overrides: Sequence[str], run_mode: RunMode) -> DictConfig | None:
    """The preflight's composition of what Hydra's config loader is asked for, once (a run or a job
    asks for its config once); None where the preflight made none. What Hydra and the sweep added
    to the overrides since (`hydra.mode`, the jobs' `hydra.job.env_set`) is applied here as Hydra
    applies such an override once the defaults are composed."""
    added = [override for override in overrides if _added(override)]
    key = tuple(override for override in overrides if not _added(override))
    kept = _compositions.get(key) if config_name == CONFIG_NAME and run_mode == RunMode.RUN else None
    if kept is None or kept.config.hydra.runtime.cwd != os.getcwd():
        return None
    if list(overrides) != [*key[: kept.added_at], *added, *key[kept.added_at :]]:
        return None
    del _compositions[key]
    config = kept.config
    ConfigLoaderImpl._apply_overrides_to_config(OverridesParser.create().parse_overrides(added), config)
    config.hydra.overrides.hydra.extend(added)
    return config


def hand_to_hydra() -> None:
    """What the preflight composed, handed to Hydra (1.3) in place of composing it again:
    `hydra.main` composes the whole config once more only to read `hydra.mode` (`Hydra.get_mode`),
    then once for a run, or once for the sweep and once per job
    (`ConfigLoaderImpl.load_configuration`): 0.15 to 0.4 CPU-s each here. Hydra takes the mode and
    each run's or job's config from the preflight where it recorded them; anything else (the
    sweep's own config, another sweeper's combinations, --cfg, another config folder, a job in
    another process) Hydra composes as before. For the command's own process: `python -m sweep`
    calls it after the preflight."""
    if _modes:
        mode = _modes[0]
        Hydra.get_mode = lambda self, config_name, overrides: mode  # type: ignore[method-assign]
    if _compositions:
        load_configuration = ConfigLoaderImpl.load_configuration

        def from_the_preflight(self, config_name, overrides, run_mode, *args, **kwargs):
            config = composed(config_name, overrides, run_mode)
            if config is None:
                config = load_configuration(self, config_name, overrides, run_mode, *args, **kwargs)
            return config

        ConfigLoaderImpl.load_configuration = from_the_preflight  # type: ignore[method-assign]
