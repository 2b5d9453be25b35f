"""`hydra/sweeper=preflighted`, golden-sweep's default: Hydra's basic sweeper without its second
composition of the combinations `python -m sweep` has already composed and checked.

Before launching a batch, Hydra's BasicSweeper composes each of its combinations, to fail early.
`sweep.experiment.cli.preflight` composed and checked every combination of the command line (its
settings and pipeline too) before Hydra started, and each job composes its own again: Hydra's
composition in between repeats the first, a third of a sweep's composing (about 0.2 s per
combination on a 2-core machine). A combination the preflight did not check (a
`hydra.sweeper.params` grid, another entry point) is composed as Hydra would.

Hydra instantiates plugins only from the `hydra_plugins` namespace, and finds them by listing it,
which an editable install (`pip install -e .`) hides (hydra#2359): `python -m sweep` registers this
class itself (`sweep.experiment.cli.register_default_sweeper`).
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

from sweep.experiment.checked import was_checked


class PreflightedSweeper(BasicSweeper):
    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        unchecked = [overrides for overrides in batch if not was_checked(overrides)]
        if unchecked:
            super().validate_batch_is_legal(unchecked)
