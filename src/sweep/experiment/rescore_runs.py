"""Stored runs scored again on another version of their golden set: `python -m sweep.rescore`'s work.

A run, or each finished child of a sweep, is read back with its ranking, the chunks it delivered
and its config (`load_record`) and scored again on NEW from them
(`sweep.evaluation.rescoring.rescored`: no retrieval, no model, torch not imported), then saved as
a new run (`save_record`) tagged `sweep.rescores=<the stored run's id>` (`sweep.tracking.rescores`)
with what a trial logs: its config and params, every metric (the costs as the stored run measured
them), the per-question, per-type and worst-question tables, the context metrics where NEW has
evidence, the ranking and the delivered chunks, and NEW's digests, so that `sweep.compare` and
`sweep.check` pair it with runs scored on NEW. Left out: the plots and a hybrid's members' own means.

NEW is read with the corpus the runs searched (`scored_corpus`: the same corpus, or the chunks'
offsets mean nothing), as the runs read theirs (`golden_as_scored`: split, `golden.status`). Questions of NEW that a stored run was never
asked (new, or reworded since: `rescoring.answered`) are not scored; they are counted. A sweep is
scored again as a new sweep: a new parent run, tagged so too, closed with its leaderboard and
report as `python -m sweep` closes one (`sweep.experiment.cli.close_sweep`). Everything is read
and scored before the first run is opened: bad input leaves the store as it was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from sweep.errors import InputError
from sweep.evaluation.record import TrialRecord
from sweep.evaluation.registry import HEADLINE
from sweep.evaluation.rescoring import answered, rescored
from sweep.experiment.cli import close_sweep
from sweep.formats.runs import Run
from sweep.tracking.digests import CORPUS_DIGEST, golden_as_scored, scored_corpus
from sweep.tracking.lifecycle import trial_run
from sweep.tracking.reading import LoggedRun, logged_run, sweep_children, sweep_id
from sweep.tracking.records import load_record, metric_key, save_record
from sweep.tracking.rescores import rescore_tags, tag_rescores
from sweep.tracking.store import DEFAULT_EXPERIMENT, connect
from sweep.tracking.sweeps import SweepSummary, start_sweep


@dataclass(frozen=True)
class Rescored:
    """One stored run scored again: its id, the new run's, and the objective before and after."""

    source: str
    run_id: str
    label: str
    before: float
    after: float
    questions: int  # questions of NEW scored


@dataclass(frozen=True)
class Rescoring:
    """What `rescore` did: the runs, NEW's questions left unscored, the new sweep (None for a run)."""

    golden: str
    objective: str
    runs: list[Rescored]
    unscored: list[str]  # ids of NEW's questions a stored run was never asked (new or reworded)
    source_sweep: str | None  # the stored sweep's parent run, when a sweep was given
    sweep: SweepSummary | None
    skipped: list[LoggedRun]  # a sweep's children that did not finish: nothing to score


def stored_runs(spec: str, experiment: str | None = None) -> tuple[LoggedRun, list[LoggedRun], list[LoggedRun]]:
    """The run `spec` names (`latest`: the sweep started last in `experiment`), the finished runs
    it stands for (itself, or a sweep's finished children) and a sweep's children that did not finish."""
    connect(create=False)
    stored = logged_run(sweep_id(spec, experiment))
    if not stored.is_sweep:
        if stored.status != "FINISHED":
            raise InputError(f"run {stored.run_id} is {stored.status}: it holds no ranking to score again")
        return stored, [stored], []
    children = sweep_children(stored.run_id)
    finished = [child for child in children if child.status == "FINISHED"]
    if not finished:
        raise InputError(f"sweep {stored.run_id} has no finished run to score again")
    return stored, finished, [child for child in children if child.status != "FINISHED"]


def rescore(spec: str, golden: str | Path, experiment: str | None = None) -> Rescoring:
    """Score the run or sweep `spec` (a run id, a sweep's parent run id, or `latest`) again on the golden
    file `golden` and log the result as new runs in `experiment` (default: the stored runs')."""
    stored, runs, skipped = stored_runs(spec, experiment)
    if not Path(golden).exists():
        raise InputError(f"--golden {golden}: no such file or folder")
    corpora = {run.tags.get(CORPUS_DIGEST) for run in runs}
    if len(corpora) > 1:
        raise InputError(f"sweep {stored.run_id}: its runs searched {len(corpora)} corpora; score each run again alone")
    corpus = scored_corpus(runs[0])
    new = golden_as_scored(golden, corpus, runs[0])
    objective = stored.tags.get("sweep.objective", HEADLINE)
    records, unscored = [], {}
    for run in runs:
        record = load_record(run, results=True, chunks=True, config=True)
        asked, left = answered(record, new)
        if not len(asked):
            raise InputError(f"run {run.run_id} was asked none of the questions of {golden}: re-run it to score them")
        unscored |= dict.fromkeys(left)
        record = replace(record, results=asked_only(record.results, asked.ids))
        records.append((record, replace(rescored(record, asked, corpus=corpus), golden=new), len(left)))
    experiment = experiment or records[0][0].config.get("experiment") or DEFAULT_EXPERIMENT
    summary = None
    if stored.is_sweep:
        parent = start_sweep(experiment, [stored.overrides], objective)
        tag_rescores(parent, stored.run_id)
        try:
            done = [_log(record, again, left, experiment, objective) for record, again, left in records]
        finally:
            summary, _ = close_sweep()
    else:
        done = [_log(record, again, left, experiment, objective) for record, again, left in records]
    return Rescoring(
        str(golden), objective, done, list(unscored), stored.run_id if stored.is_sweep else None, summary, skipped
    )


def asked_only(run: Run, qids: pd.Index) -> Run:
    """`run`'s rankings of the questions `qids` only: what NEW no longer asks goes quietly (its
    ids are no longer among the run's categories, which the scorer reads as the run's queries)."""
    kept = run.restrict(qids)
    return Run(kept.frame.assign(qid=kept.frame["qid"].cat.remove_unused_categories()), kept.name)


def _log(record: TrialRecord, again: TrialRecord, unscored: int, experiment: str, objective: str) -> Rescored:
    """`again` (`record` scored again) saved as a new run tagged with the run it scores again."""
    with trial_run(experiment, record.name, rescore_tags(record.run_id, unscored)) as run:
        save_record(again)
    key = metric_key(objective)
    return Rescored(
        record.run_id,
        run.run_id,
        record.label,
        record.metrics.get(key, math.nan),
        again.metrics.get(objective, math.nan),
        len(again.per_query),
    )
