"""A sweep's process keeps its long-lived objects out of the garbage collector's full passes.

Python's cyclic collector walks every tracked object on a full pass. Once torch, transformers,
MLflow and Hydra are imported, that is about 900,000 objects and a third of a second a pass, and a
sweep's runs set off dozens of passes: a sixth of an 11-run hybrid sweep's wall time on the bundled
set (docs/benchmarks.md, "A sweep costs what it changes").
What is alive between two jobs (modules, loaded models, kept stages, MLflow's client) lives as long
as the process, so `settle` collects the last job's garbage once and then moves the survivors to
the permanent generation (`gc.freeze`), which later passes skip: each job's passes walk only what
that job made. The latency pass settles too, so that no pass over the whole heap lands inside one
configuration's timing.

A frozen object that later becomes garbage is still freed by its reference count; only one that
is part of a reference cycle stays until the process ends, and what is frozen is at most what one
job leaves alive.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect what is garbage now, then freeze what is left (module docstring)."""
    gc.collect()
    gc.freeze()
