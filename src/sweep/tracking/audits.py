"""A judge's audit of a sweep, written to the sweep's parent run: its `judge/*` metrics and its tables.

`python -m sweep.judge audit` scores a finished sweep again under the judge's grades
(`sweep.labelling.audit`); what it found goes to the parent run the sweep closed, beside the
leaderboard the sweep logged there, so that the UI shows both.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import mlflow
import pandas as pd
from mlflow.entities import Metric

from sweep.tracking.records import log_tables, loggable


def log_judge_audit(parent_id: str, metrics: Mapping[str, float], tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """`metrics` (a NaN left out) in one batch and `tables` (artifact path -> table, as `log_tables`
    writes them) on the run `parent_id`, open or closed; the tables' paths."""
    client = mlflow.MlflowClient()
    at = int(time.time() * 1000)
    client.log_batch(parent_id, metrics=[Metric(key, value, at, 0) for key, value in loggable(metrics).items()])
    log_tables(tables, run_id=parent_id)
    return list(tables)
