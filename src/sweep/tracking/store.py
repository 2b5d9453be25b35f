"""The MLflow store: which one (`tracking_uri`), opening it (`connect`), experiments, searching it, UI addresses.

A server that does not answer, or a SQLite file that cannot be created, opened or written, is one
line within seconds, not minutes of MLflow's retries later; so is another program's SQLite database
at the store's path, before MLflow writes its tables into it. The tag names every module of
`sweep.tracking` shares (`CONFIG_DIGEST`, `SUPERSEDED_BY`) are here too. MLflow is imported where it
is used: its import alone takes about 2 s, and `sweep.best` reads a local store without it.
The addresses of runs in the MLflow UI the commands print are `ui_address`'s, which opens them
among the UI's runs rather than in its GenAI mode; MLflow's own (printed as a run on a server
ends) would not, and are left out.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweep.errors import InputError, one_line
from sweep.formats.files import exclusive_lock

if TYPE_CHECKING:
    import mlflow

log = logging.getLogger(__name__)
DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
DEFAULT_EXPERIMENT = "golden-sweep"
CONFIG_DIGEST = "sweep.config_digest"  # a trial's tag: which combination it measured (`config_digest`)
SUPERSEDED_BY = "sweep.superseded_by"  # an earlier try at a combination, replaced by this run on resume
NOT_SUPERSEDED = f"tags.`{SUPERSEDED_BY}` IS NULL"  # a search condition: what a resumed sweep did not replace
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}  # else 3.17's UI opens GenAI mode
UI_MODE = "workflowType=machine_learning"  # the UI's runs, not GenAI mode: in every address printed (`ui_address`)
QUIET_LINKS = "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"  # MLflow's own links to a server's runs have no `UI_MODE`
RUN_ID = re.compile(r"[0-9a-f]{32}")
PARENT_TAG = "mlflow.parentRunId"  # a sweep's child run's tag naming its parent run
MLFLOW_TABLES = ("alembic_version", "experiments")  # what every MLflow store's database has
_OPENED: set[tuple[str, bool]] = set()  # (SQLite store, for writing) this process has checked and opened


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI


def connect(uri: str | None = None, create: bool = True) -> None:
    """Point MLflow at `uri` (default: `tracking_uri()`) and open its store now: a server that
    does not answer, or a SQLite file that cannot be created, opened or written, is one line
    within seconds, not minutes of MLflow's retries later. `create=False` (reading): a SQLite store
    that does not exist yet is an error rather than a new file, and a read-only one is fine.
    MLflow prints no address of its own (`QUIET_LINKS`) unless its variable says otherwise."""
    import mlflow

    uri = uri or tracking_uri()
    os.environ.setdefault(QUIET_LINKS, "true")  # the commands print the addresses, in the UI's runs mode
    # MLflow logs a traceback for each store error it raises; what raises it says it in one line
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    if uri.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=10) as response:
                response.read()
        except OSError as error:
            reason = getattr(error, "reason", error)
            raise InputError(
                f"cannot reach the MLflow tracking server at {uri} ({reason}); start it, or unset "
                "MLFLOW_TRACKING_URI to log to sqlite:///mlflow.db here"
            ) from None
    elif uri.startswith("sqlite:") and (uri, create) not in _OPENED and (uri, True) not in _OPENED:
        _open_sqlite_store(uri, create)
        _OPENED.add((uri, create))
    else:
        _check_scheme(uri)
    mlflow.set_tracking_uri(uri)


def _check_scheme(uri: str) -> None:
    """A tracking URI MLflow has no store for is one line, not a KeyError deep inside MLflow."""
    import mlflow
    from mlflow.tracking._tracking_service.utils import _tracking_store_registry  # MLflow's scheme -> store

    try:
        _tracking_store_registry.get_store_builder(uri)
    except mlflow.exceptions.MlflowException:
        raise InputError(
            f"MLFLOW_TRACKING_URI={uri}: MLflow has no tracking store for this address; give sqlite:///PATH, "
            "http(s)://HOST:PORT, postgresql://... or mysql://..., or unset it to log to sqlite:///mlflow.db here"
        ) from None


def _open_sqlite_store(uri: str, create: bool) -> None:
    """Check the file, then let MLflow open the store (for a new file, create it: `_create_store`)
    while holding a lock on its folder, so that two sweeps starting at once on a new store do not
    both create its tables. `create=False` (reading): a read-only file is fine."""
    import mlflow

    path = Path(uri.removeprefix("sqlite:///")).absolute()
    if path.is_dir():
        raise InputError(f"{uri}: {path} is a folder, not an SQLite file")
    if path.exists():
        _check_database(uri, path)
        if create and not os.access(path, os.W_OK):
            raise InputError(f"{uri}: the store is read-only")
    elif not create:
        raise InputError(f"{uri}: no MLflow store here yet (nothing has been logged to it)")
    if create:
        folder = next(p for p in (path.parent, *path.parent.parents) if p.exists())
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            raise InputError(f"{uri}: cannot create the store: {folder} is not a writable folder")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InputError(f"{uri}: cannot create the store's folder ({error.strerror})") from None
    with exclusive_lock(path.parent):
        if create and (not path.exists() or path.stat().st_size == 0):
            _create_store(uri, path)
        try:
            mlflow.MlflowClient(uri).search_experiments(max_results=1)  # opens the store
        except Exception as error:
            raise InputError(f"{uri}: cannot open the MLflow store ({one_line(error)})") from None


def _create_store(uri: str, path: Path) -> None:
    """A new store at `path`, its tables made in a file beside it that then takes its name: a
    process killed while MLflow creates the tables (tens of migrations, not one transaction)
    leaves no half-made store behind, only that file, which the next creation replaces. The
    caller holds the folder's lock."""
    from mlflow.store.tracking import DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore  # what MLflow opens a sqlite:// store with

    making = path.with_name(f".{path.name}.new")
    for leftover in (making, making.with_name(f"{making.name}-journal")):
        leftover.unlink(missing_ok=True)
    try:  # sqlite3 fails at once where MLflow would retry for minutes
        sqlite3.connect(making, timeout=30).close()
    except sqlite3.Error as error:
        raise InputError(f"{uri}: cannot create the store ({error})") from None
    try:
        store = SqlAlchemyStore(f"sqlite:///{making}", DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH)  # creates the tables
        store.engine.dispose()
    except Exception as error:
        raise InputError(f"{uri}: cannot create the MLflow store ({one_line(error)})") from None
    os.replace(making, path)


def _check_database(uri: str, path: Path) -> None:
    """That `path` is an SQLite database that can be read. A hot journal (a process was killed
    while writing: `<file>-journal` holds what its unfinished write changed) is rolled back, as
    SQLite does on the first read-write open, rather than refused."""
    try:
        _read_header(path, "ro")
        _check_mlflow_tables(uri, path)
        return
    except sqlite3.Error as error:
        journal = path.with_name(f"{path.name}-journal")
        if not (journal.exists() and "readonly" in str(error)):
            raise InputError(f"{uri}: not a usable SQLite database ({error})") from None
    if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)):
        raise InputError(
            f"{uri}: a process was killed while writing to the store and left {journal.name}, which only a "
            f"read-write open rolls back: {path} or its folder is read-only here"
        )
    try:
        _read_header(path, "rw")
    except sqlite3.Error as error:
        raise InputError(f"{uri}: not a usable SQLite database ({error})") from None
    log.warning("%s: rolled back the write a killed process left unfinished (%s)", uri, journal.name)
    _check_mlflow_tables(uri, path)


def _check_mlflow_tables(uri: str, path: Path) -> None:
    """That the database at `path` is an MLflow store (it has MLflow's `experiments` and
    `alembic_version` tables) or holds no table at all (MLflow makes its tables there): another
    program's database is one line before MLflow writes its tables into it. Read-only, with
    sqlite3: MLflow's own files are not parsed."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as database:
        tables = sorted(row[0] for row in database.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    if tables and not set(MLFLOW_TABLES) <= set(tables):
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise InputError(
            f"{uri}: {path} is another program's SQLite database, not an MLflow store (its tables: {shown}; "
            f"no {' or '.join(t for t in MLFLOW_TABLES if t not in tables)}); nothing was written to it: point "
            "MLFLOW_TRACKING_URI at another file (sqlite:///PATH) or move this one away"
        )


def _read_header(path: Path, mode: str) -> None:
    """Open `path` (`mode` ro or rw) and read its header: cheap at any size."""
    with sqlite3.connect(f"file:{path}?mode={mode}", uri=True, timeout=30) as database:
        database.execute("PRAGMA schema_version").fetchone()
    database.close()


def use_experiment(name: str) -> str:
    """Create or reuse the experiment (artifacts under ./mlruns for a local SQLite store); its id."""
    import mlflow

    experiment = mlflow.get_experiment_by_name(name)
    if experiment is None:
        artifacts = None
        if mlflow.get_tracking_uri().startswith("sqlite:"):
            artifacts = (Path.cwd() / "mlruns").as_uri()
        try:
            experiment_id = mlflow.create_experiment(name, artifact_location=artifacts, tags=EXPERIMENT_KIND)
        except mlflow.exceptions.MlflowException:  # another sweep created it a moment ago
            experiment = mlflow.get_experiment_by_name(name)
            if experiment is None:
                raise
            experiment_id = experiment.experiment_id
    else:
        experiment_id = experiment.experiment_id
        for key, value in EXPERIMENT_KIND.items():
            mlflow.MlflowClient().set_experiment_tag(experiment_id, key, value)
    mlflow.set_experiment(experiment_id=experiment_id)
    return experiment_id


def existing_experiment_id(experiment: str) -> str:
    """The id of the experiment named `experiment`; reading creates nothing: no store, or no such
    experiment in it, is one line."""
    import mlflow

    connect(create=False)
    found = mlflow.get_experiment_by_name(experiment)
    if found is None:
        raise no_experiment(experiment)
    return found.experiment_id


def no_experiment(experiment: str) -> InputError:
    """What reading an experiment the store does not have says."""
    return InputError(f"no MLflow experiment named {experiment!r} at {tracking_uri()}")


def search_pages(
    client: mlflow.MlflowClient, experiment_id: str, filter_string: str, newest_first: bool = False
) -> Iterator[Any]:
    """Every run matching `filter_string`, earliest (or newest) first, a result page at a time."""
    order, token = f"attributes.start_time {'DESC' if newest_first else 'ASC'}", None
    while True:
        page = client.search_runs([experiment_id], filter_string, order_by=[order], max_results=1000, page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def ui_hint(experiment_id: str, run_id: str | None = None) -> list[str]:
    """How to look at the runs: the UI command for a local store, the runs view's address and the
    run `run_id`'s (`ui_address`)."""
    uri = tracking_uri()
    lines, base = [], uri.rstrip("/")
    if uri.startswith("sqlite:"):
        lines.append(f"Compare runs: mlflow ui --backend-store-uri {uri}")
        base = "http://127.0.0.1:5000"
    lines.append(f"Runs view: {ui_address(base, experiment_id)}")
    if run_id is not None:
        lines.append(f"Run view: {ui_address(base, experiment_id, run_id)}")
    return lines


def ui_address(base: str, experiment_id: str, run_id: str | None = None) -> str:
    """The address of an experiment's runs view, or of its run `run_id`, in the MLflow UI at
    `base`: every address the commands print, each with `UI_MODE` (3.17's UI opens an experiment
    in GenAI mode, which lists no runs, unless told otherwise)."""
    return f"{base}/#/experiments/{experiment_id}/runs{f'/{run_id}' if run_id else ''}?{UI_MODE}"
