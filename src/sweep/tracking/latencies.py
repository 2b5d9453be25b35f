"""Per-question latencies in MLflow: a sweep's latency pass writes them into its runs; they are read back beside the records.

A run's timed questions are its `tables/latency.json` (qid, ms: `sweep.evaluation.latency.TABLE`),
written by `save_record` for a single run, which times itself, and by `log_latencies` into each
finished run of a sweep, which are timed together at the sweep's end
(`sweep.experiment.latency_pass`), with their `latency/...` metrics. `timed_records` reads runs back
as records with that table, for the leaderboard and `sweep.best --prefer latency/...`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

from sweep.errors import InputError
from sweep.evaluation.latency import TABLE, latency_table
from sweep.evaluation.record import TrialRecord
from sweep.tracking.reading import LoggedRun, load_table
from sweep.tracking.records import load_records, log_into_run

log = logging.getLogger(__name__)
PATH = f"tables/{TABLE}.json"


def log_latencies(run_id: str, ms: Mapping[str, float], metrics: Mapping[str, float]) -> None:
    """Into the run `run_id` (open or closed): each timed question's milliseconds as `PATH`, and
    `metrics` (its `latency/...` numbers), replacing what it had."""
    log_into_run(run_id, metrics, {PATH: latency_table(ms)})


def timed_records(runs: Sequence[LoggedRun]) -> list[TrialRecord]:
    """`load_records` of `runs`, each with its table of timed questions (`TABLE`) where it has one; a
    table that cannot be read is left out, with a warning."""
    records = []
    for run, record in zip(runs, load_records(runs)):
        try:
            table = load_table(run, PATH) if record.is_finished else None
        except InputError as error:
            log.warning("latency of run %s left out: %s", run.run_id, error)
            table = None
        records.append(record if table is None else replace(record, tables=record.tables | {TABLE: table}))
    return records
