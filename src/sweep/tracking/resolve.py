"""Which logged evaluations `sweep.compare` and `sweep.check` compare: a run id, `best`, a sweep, or `latest`.

A run id is that run; `latest` is the sweep started last in the experiment (`sweep_id`, as every
command that takes a sweep); `best` is the finished run with the best metric in the experiment
(`sweep.best`'s winner; lowest where the registry says lower is better). A sweep's parent run id
stands for its finished children: a sweep against a run compares each child with the run; two
sweeps pair their children by their overrides (the same `sweep.overrides`, in any order, less
`experiment=` and `cache_dir=`), and children with no partner are named on stderr and skipped.
Reading creates nothing.
"""

from __future__ import annotations

import sys

from sweep.errors import InputError
from sweep.evaluation.registry import HEADLINE, lower_is_better
from sweep.settings import override_key
from sweep.tracking.reading import LATEST, LoggedRun, RunSearch, finished_runs, logged_run, sweep_children, sweep_id
from sweep.tracking.store import DEFAULT_EXPERIMENT, connect, existing_experiment_id

BEST = "best"
UNPAIRED = ("experiment", "cache_dir")  # overrides that pairing children by overrides ignores


def resolve(spec: str, label: str, metric: str, experiment: str) -> LoggedRun:
    """`spec`: a run id, `best` (the finished run with the best `metric` in `experiment`), or
    `latest` (the sweep started last in `experiment`)."""
    try:
        if spec in (BEST, LATEST):
            try:
                return best_finished_run(metric, experiment) if spec == BEST else logged_run(sweep_id(spec, experiment))
            except InputError as error:
                raise InputError(f"{label} {spec}: {error}") from None
        return logged_run(spec)
    except InputError as error:
        raise InputError(error if str(error).startswith(f"{label} ") else f"{label}: {error}") from None


def best_finished_run(metric: str, experiment: str) -> LoggedRun:
    """`sweep.best`'s winner by `metric` in `experiment` (lowest where the registry says lower is better)."""
    connect(create=False)
    search = RunSearch(existing_experiment_id(experiment), metric, maximize=not lower_is_better(metric))
    found = finished_runs(search, best_only=True)
    if not found:
        raise InputError(f"no finished run in experiment {experiment!r} has the metric {metric!r}")
    return found[0]


def evaluations(run: LoggedRun) -> list[LoggedRun]:
    """The runs that `run` stands for: itself, or a sweep's finished children."""
    if not run.is_sweep:
        return [run]
    children = sweep_children(run.run_id)
    finished = [c for c in children if c.status == "FINISHED"]
    for child in children:
        if child.status != "FINISHED":
            print(
                f"note: skipping {child.run_id} ({child.overrides}) of sweep {run.run_id}: {child.status}",
                file=sys.stderr,
            )
    if not finished:
        raise InputError(f"sweep {run.run_id} has no finished run")
    return finished


def _override_key(run: LoggedRun) -> tuple[str, ...]:
    """What pairs two sweeps' children: their overrides in any order, less those that do not
    change results (`experiment=`, `cache_dir=`)."""
    return tuple(sorted(o for o in run.overrides.split() if override_key(o) not in UNPAIRED))


def run_pairs(
    a_spec: str,
    b_spec: str,
    metric: str = HEADLINE,
    experiment: str = DEFAULT_EXPERIMENT,
    labels: tuple[str, str] = ("A", "B"),
) -> list[tuple[LoggedRun, LoggedRun]]:
    """The (A, B) evaluations to compare: see the module's doc for what a sweep's id means."""
    connect(create=False)  # no store, or one that cannot be reached: one line, unprefixed
    a = resolve(a_spec, labels[0], metric, experiment)
    b = resolve(b_spec, labels[1], metric, experiment)
    a_runs, b_runs = evaluations(a), evaluations(b)
    if not (a.is_sweep and b.is_sweep):
        return [(x, y) for x in a_runs for y in b_runs]
    by_key: dict[tuple[str, ...], LoggedRun] = {}
    for run in a_runs:
        by_key.setdefault(_override_key(run), run)
    pairs = []
    for run in b_runs:
        partner = by_key.pop(_override_key(run), None)
        if partner is None:
            print(f"note: {run.run_id} ({run.overrides}) of {labels[1]} has no partner in {labels[0]}", file=sys.stderr)
        else:
            pairs.append((partner, run))
    for run in by_key.values():
        print(f"note: {run.run_id} ({run.overrides}) of {labels[0]} has no partner in {labels[1]}", file=sys.stderr)
    if not pairs:
        raise InputError(f"sweeps {a.run_id} and {b.run_id} have no configuration (overrides) in common")
    return pairs
