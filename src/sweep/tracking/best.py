"""Choosing the best run: `best_run` and its record, `BestRun` (what `sweep.best` prints).

The finished run with the best metric; or (`among="tied"`) the cheapest of the runs the golden set
cannot tell apart from it (a Holm-corrected paired test over the questions:
`sweep.evaluation.leaderboard`). Its config is given back with today's `_target_` paths, also when
the run was logged before the subpackages (`sweep.tracking.legacy`), so that it can be run again.

A local SQLite store is searched with sqlite3 (`sweep.tracking.local_store`) and its artifacts read
as files, so that a lookup does not wait 2 s for MLflow's import; any other store (a server,
PostgreSQL), or one MLflow must first repair or refuse, through MLflow's client. Both answer the
same `RunSearch`, and `tests/tracking/test_local_store.py` holds them to the same answers.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace

import yaml
from omegaconf import DictConfig, OmegaConf

from sweep.errors import InputError
from sweep.evaluation.registry import CHEAPEST_BY, COSTS
from sweep.tracking.legacy import current_targets
from sweep.tracking.local_store import PARENT_TAG, LocalStore, open_local
from sweep.tracking.reading import LoggedRun, artifact_text, as_logged, rank_runs, require_artifacts
from sweep.tracking.store import (
    DEFAULT_EXPERIMENT,
    NOT_SUPERSEDED,
    RUN_ID,
    existing_experiment_id,
    search_pages,
    tracking_uri,
)

AMONG = ("best", "tied")  # the single best value, or the cheapest of those tied with it
_METRIC_NAME = re.compile(r"[A-Za-z0-9_\-./: ]+")


@dataclass(frozen=True)
class BestRun:
    """The run `best_run` chose, and how to run its configuration again."""

    run_id: str
    value: float  # its value of the metric it was chosen by
    config: DictConfig  # the resolved config, today's `_target_`s: runs as it is with sweep.experiment.trial.run_trial
    overrides: list[str]  # the command line that produced it
    choices: dict[str, str]  # each config group's option (`{"index": "hnsw", ...}`)
    why: str  # how it was chosen, in one line

    @property
    def command(self) -> str:
        return shlex.join(["python", "-m", "sweep", *self.overrides])


@dataclass(frozen=True)
class RunSearch:
    """The finished runs of an experiment with a finite value of `metric`, less the tries a resumed
    sweep replaced, with each of `tags` (key, value)."""

    experiment_id: str
    metric: str
    maximize: bool = True
    tags: tuple[tuple[str, str], ...] = ()

    def filter_string(self) -> str:
        """The search in MLflow's filter syntax (names and values are checked before they get here)."""
        conditions = ["attributes.status = 'FINISHED'", f"metrics.`{self.metric}` > -1e300", NOT_SUPERSEDED]
        return " and ".join(conditions + [f"tags.`{key}` = '{value}'" for key, value in self.tags])


class MlflowStore:
    """Any store, through MLflow's client: what `LocalStore` answers for a local SQLite file."""

    def experiment_id(self, name: str) -> str:
        return existing_experiment_id(name)

    def runs(self, search: RunSearch, best_only: bool) -> list[LoggedRun]:
        """The best run by the search's metric (the earliest on ties), or all of them, earliest first."""
        import mlflow

        if not best_only:
            return [
                as_logged(r) for r in search_pages(mlflow.MlflowClient(), search.experiment_id, search.filter_string())
            ]
        order = f"metrics.`{search.metric}` {'DESC' if search.maximize else 'ASC'}"
        runs = mlflow.search_runs(
            [search.experiment_id],
            filter_string=search.filter_string(),
            order_by=[order, "attributes.start_time ASC"],
            max_results=1,
            output_format="list",
        )
        return [as_logged(r) for r in runs]


def open_store() -> LocalStore | MlflowStore:
    """The store at `tracking_uri()`, read straight from its file where that is safe (`open_local`)."""
    return open_local(tracking_uri()) or MlflowStore()


def best_run(
    metric: str,
    experiment: str = DEFAULT_EXPERIMENT,
    sweep: str | None = None,
    maximize: bool = True,
    among: str = "best",
    prefer: str | None = None,
) -> BestRun:
    """The finished run with the best `metric` (only the children of parent run `sweep`, if given;
    the earliest on ties). `among="tied"`: of the runs statistically tied with that one
    (`sweep.evaluation.leaderboard`: Holm-corrected paired test over the questions, on the runs of the sweep,
    or of the experiment scored on the same golden set), the one with the lowest `prefer` (a cost,
    e.g. `latency/search_ms_p50`; default `CHEAPEST_BY`; only with `among="tied"`). Reading creates
    nothing: no store is an error."""
    for name, value in (("--metric", metric), ("--prefer", prefer)):
        if value is not None and not _METRIC_NAME.fullmatch(value):
            raise InputError(f"{name} {value!r}: not a metric name (letters, digits and _ - . / : space)")
    if among not in AMONG:
        raise InputError(f"--among {among!r}: one of {', '.join(AMONG)}")
    if prefer is not None and among != "tied":
        raise InputError(f"--prefer {prefer}: it chooses among the runs tied with the best; add --among tied")
    if among == "tied" and not maximize:
        raise InputError("--among tied ranks higher-is-better metrics; it cannot be combined with --minimize")
    if sweep is not None and not RUN_ID.fullmatch(sweep):
        raise InputError(f"--sweep {sweep!r}: not an MLflow run id (32 hexadecimal digits)")
    store = open_store()
    search = RunSearch(store.experiment_id(experiment), metric, maximize, ((PARENT_TAG, sweep),) if sweep else ())
    found = store.runs(search, best_only=True)
    if not found:
        where = f"sweep {sweep}" if sweep else f"experiment {experiment!r}"
        raise InputError(f"no finished run in {where} has the metric {metric!r}")
    run, why = found[0], f"the {'highest' if maximize else 'lowest'} {metric}"
    require_artifacts(run)
    if among == "tied":
        from sweep.tracking.digests import GOLDEN_DIGEST  # pandas: only the leaderboard needs it

        golden = run.tags.get(GOLDEN_DIGEST, "")
        candidates = store.runs(replace(search, tags=(*search.tags, (GOLDEN_DIGEST, golden))), best_only=False)
        run, why = _cheapest_tied(metric, candidates, prefer or CHEAPEST_BY, golden)
    config = yaml.safe_load(artifact_text(run, "config/resolved.yaml"))
    hydra = yaml.safe_load(artifact_text(run, "config/overrides.yaml"))
    return BestRun(
        run.run_id,
        run.metrics[metric],
        OmegaConf.create(current_targets(config)),
        hydra["overrides"],
        hydra.get("choices", {}),
        why,
    )


def _cheapest_tied(metric: str, candidates: Sequence[LoggedRun], prefer: str, golden: str) -> tuple[LoggedRun, str]:
    """The run with the lowest `prefer` among `candidates` (scored on the golden set `golden`) tied
    with the best by `metric` (the better-ranked one on equal cost; a run without `prefer` comes
    last), and why, in one line. No tied run with `prefer` is an error, not a choice by NaN."""
    import pandas as pd

    from sweep.evaluation.leaderboard import ALPHA
    from sweep.tracking.digests import check_legacy_size

    board, n_questions = rank_runs(metric, candidates)
    check_legacy_size(golden, n_questions)
    if board["mean"].isna().all():
        raise InputError(
            f"--among tied: {metric!r} is not a per-question metric (tables/per_query.json has no such column)"
        )
    tied = board[board["tied_with_best"]]
    by_id = {run.run_id: run for run in candidates}
    metrics = {run_id: run.metrics for run_id, run in by_id.items()}
    cost = pd.Series([metrics[r].get(prefer, math.nan) for r in tied.index], index=tied.index, dtype=float)
    if cost.isna().all():
        known = sorted({name for r in tied.index for name in metrics[r] if name in COSTS})
        raise InputError(
            f"--prefer {prefer!r}: no run tied with the best has this metric ({len(tied)} tied; the costs they "
            f"have: {', '.join(known) or 'none'})"
        )
    chosen = cost.fillna(math.inf).sort_values(kind="stable").index[0]
    leader = board.index[0]
    why = (
        f"the lowest {prefer} ({cost[chosen]:.4g}) of {len(tied)} of {len(board)} runs tied with the best "
        f"(run {leader}: {metric} {board.at[leader, 'mean']:.4f}; Holm-corrected paired test, alpha {ALPHA})"
    )
    return by_id[chosen], why
