"""The combinations `python -m sweep` composed and checked before Hydra started (its preflight),
as Hydra's sweeper will launch them: the default sweeper (`hydra/sweeper=preflighted`,
src/hydra_plugins/golden_sweep) does not compose them a second time."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

_checked: set[tuple[str, ...]] = set()


def record(combinations: Iterable[Sequence[str]]) -> None:
    _checked.update(tuple(overrides) for overrides in combinations)


def was_checked(overrides: Sequence[str]) -> bool:
    return tuple(overrides) in _checked
