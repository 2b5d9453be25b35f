"""What `python -m sweep` composed and checked before Hydra started (its preflight), so that Hydra
does not compose it again: the combinations, as Hydra's sweeper will launch them (the default
sweeper, `hydra/sweeper=preflighted`, src/hydra_plugins/golden_sweep, skips its own composition of
those), and Hydra's mode (`hand_mode_to_hydra`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hydra._internal.hydra import Hydra
from hydra.types import RunMode

_checked: set[tuple[str, ...]] = set()
_modes: list[RunMode | None] = []  # hydra.mode of the first combination, once the preflight composed it


def record(combinations: Iterable[Sequence[str]]) -> None:
    _checked.update(tuple(overrides) for overrides in combinations)


def was_checked(overrides: Sequence[str]) -> bool:
    return tuple(overrides) in _checked


def record_mode(mode: RunMode | None) -> None:
    """`hydra.mode` as the preflight composed it with Hydra's own config: what the command line
    and the config set (None unless one of them does)."""
    _modes[:] = [mode]


def hand_mode_to_hydra() -> None:
    """Before a run or a sweep, `hydra.main` (Hydra 1.3, `Hydra.get_mode`) composes the whole
    config once more only to read `hydra.mode`: 0.2 to 0.4 CPU-s of every command here. Where the
    preflight recorded that mode, Hydra takes it from there; elsewhere (another sweeper chooses
    the combinations, --cfg, another config folder) Hydra composes as before. For the command's
    own process: `python -m sweep` calls it after the preflight."""
    if _modes:
        mode = _modes[0]
        Hydra.get_mode = lambda self, config_name, overrides: mode  # type: ignore[method-assign]
