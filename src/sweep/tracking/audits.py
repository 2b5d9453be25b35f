"""A judge's audit of a sweep, written to the sweep's parent run: its `judge/*` metrics and its tables.

`python -m sweep.judge audit` scores a finished sweep again under the judge's grades
(`sweep.labelling.audit`); what it found goes to the parent run the sweep closed, beside the
leaderboard the sweep logged there, so that the UI shows both.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from sweep.tracking.records import log_into_run


def log_judge_audit(parent_id: str, metrics: Mapping[str, float], tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """`metrics` (a NaN left out) and `tables` (artifact path -> table, as `log_tables` writes them)
    on the run `parent_id`, open or closed (`log_into_run`); the tables' paths."""
    log_into_run(parent_id, metrics, tables)
    return list(tables)
