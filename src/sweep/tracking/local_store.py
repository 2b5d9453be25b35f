"""A local SQLite store read straight from its tables with sqlite3, without importing MLflow.

MLflow's import alone takes about 2 s of CPU, most of a `python -m sweep.best` lookup, for
what is one query here. `open_local` hands out a reader only for a store that MLflow itself would
open as it is: an `sqlite:` address of an existing file that opens read-only, whose schema is the
installed MLflow's newest (MLflow refuses an older one), without MLflow's workspaces. For anything
else (a server, PostgreSQL, a missing or damaged file, a hot journal to roll back) it gives None
and the caller goes through MLflow, which opens, repairs or refuses the store as it always has.

What `LocalStore` answers is what MLflow's `search_runs` answers for the same search
(`sweep.tracking.best.RunSearch`): active runs of one experiment, the conditions and the order as
MLflow's SQL store writes them (a NaN metric never satisfies a comparison; ties go to the earlier
start, then the smaller run id).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sweep.tracking.reading import LoggedRun
from sweep.tracking.store import SUPERSEDED_BY, no_experiment

if TYPE_CHECKING:
    from sweep.tracking.best import RunSearch

PARENT_TAG = "mlflow.parentRunId"
_RUN_COLUMNS = "r.run_uuid, r.name, r.status, r.experiment_id, r.artifact_uri"
# a migration's own revision and the one(s) it follows, annotated or not: `down_revision: str | None = "abc"`
_REVISION = re.compile(r"^revision\b[^=\n]*=\s*[\"'](\w+)[\"']", re.MULTILINE)
_DOWN_REVISION = re.compile(r"^down_revision\b[^=\n]*=\s*(\([^)]*\)|.*)$", re.MULTILINE)  # a merge's: a tuple


class LocalStore:
    """Searches of one SQLite file, each on a read-only connection of its own."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def connection(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30)

    def experiment_id(self, name: str) -> str:
        """The id of the experiment `name` (a deleted one too, as MLflow's `get_experiment_by_name`);
        none is one line."""
        with closing(self.connection()) as database:
            row = database.execute("SELECT experiment_id FROM experiments WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise no_experiment(name)
        return str(row[0])

    def runs(self, search: RunSearch, best_only: bool) -> list[LoggedRun]:
        """The runs `search` finds: the best one by its metric (the earliest on ties), or all of them,
        earliest first."""
        conditions = [
            "r.experiment_id = ?",
            "r.lifecycle_stage = 'active'",
            "r.status = 'FINISHED'",
            "m.key = ?",
            "m.value > -1e300",
            "m.is_nan = 0",
            "NOT EXISTS (SELECT 1 FROM tags s WHERE s.run_uuid = r.run_uuid AND s.key = ?)",
        ]
        values: list[object] = [int(search.experiment_id), search.metric, SUPERSEDED_BY]
        for key, value in search.tags:
            conditions.append(
                "EXISTS (SELECT 1 FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = ? AND t.value = ?)"
            )
            values += [key, value]
        order = f"m.value {'DESC' if search.maximize else 'ASC'}, " if best_only else ""
        query = (
            f"SELECT {_RUN_COLUMNS} FROM runs r JOIN latest_metrics m ON m.run_uuid = r.run_uuid "
            f"WHERE {' AND '.join(conditions)} ORDER BY {order}r.start_time ASC, r.run_uuid ASC"
            + (" LIMIT 1" if best_only else "")
        )
        with closing(self.connection()) as database:
            rows = database.execute(query, values).fetchall()
            return _logged(database, rows)


def _logged(database: sqlite3.Connection, rows: Sequence[tuple]) -> list[LoggedRun]:
    """The runs of `rows` (`_RUN_COLUMNS`) with their tags, latest metrics and params, as
    MLflow's `Run` gives them (a NaN metric is NaN)."""
    ids = [row[0] for row in rows]
    tags, metrics, params = ({run_id: {} for run_id in ids} for _ in range(3))
    for table, into in (("tags", tags), ("params", params)):
        for run_id, key, value in _rows_of(database, f"SELECT run_uuid, key, value FROM {table}", ids):
            into[run_id][key] = value
    for run_id, key, value, is_nan in _rows_of(
        database, "SELECT run_uuid, key, value, is_nan FROM latest_metrics", ids
    ):
        metrics[run_id][key] = math.nan if is_nan else float(value)
    return [
        LoggedRun(run_id, name or tags[run_id].get("mlflow.runName", ""), status, str(experiment), artifact_uri,
                  tags[run_id], metrics[run_id], params[run_id])
        for run_id, name, status, experiment, artifact_uri in rows
    ]  # fmt: skip


def _rows_of(database: sqlite3.Connection, select: str, run_ids: list[str]) -> list[tuple]:
    """`select`'s rows for the runs `run_ids` (a JSON list: no limit on how many)."""
    where = " WHERE run_uuid IN (SELECT value FROM json_each(?))"
    return database.execute(select + where, (json.dumps(run_ids),)).fetchall()


def open_local(uri: str) -> LocalStore | None:
    """A reader of the store at `uri` when MLflow would open it as it is (see the module's doc); None otherwise."""
    if not uri.startswith("sqlite:///") or "?" in uri or _workspaces_enabled():
        return None
    path = Path(uri.removeprefix("sqlite:///")).absolute()
    if not path.is_file() or path.with_name(f"{path.name}-journal").exists():
        return None  # MLflow says what is wrong, or rolls the journal back
    store = LocalStore(path)
    try:
        with closing(store.connection()) as database:
            [(revision,)] = database.execute("SELECT version_num FROM alembic_version").fetchall()
    except (sqlite3.Error, ValueError):
        return None
    return store if revision == mlflow_schema() else None


def _workspaces_enabled() -> bool:
    """MLflow's workspaces scope experiments by a column this reader does not read."""
    return os.environ.get("MLFLOW_ENABLE_WORKSPACES", "false").strip().lower() in ("true", "1")


@cache
def mlflow_schema() -> str | None:
    """The newest schema revision of the installed MLflow (the one head of its migrations), read
    from its migration files without importing it; None if they are not where they were."""
    spec = importlib.util.find_spec("mlflow")
    if spec is None or spec.origin is None:
        return None
    revisions, replaced = set(), set()
    for script in (Path(spec.origin).parent / "store" / "db_migrations" / "versions").glob("[!_]*.py"):
        text = script.read_text(encoding="utf-8")
        revision, down = _REVISION.search(text), _DOWN_REVISION.search(text)
        if revision is None or down is None:
            return None
        revisions.add(revision.group(1))
        replaced.update(re.findall(r"\w+", down.group(1).replace("None", "")))
    heads = revisions - replaced
    return heads.pop() if len(heads) == 1 else None
