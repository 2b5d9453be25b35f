"""Fixtures the test folders share; plain helpers live in tests/helpers (no test file imports another)."""

from __future__ import annotations

import gc
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from xdist.scheduler import LoadFileScheduling

from helpers import servers

if TYPE_CHECKING:  # the fixtures import what they use: the controlling process loads this file and runs no test
    from sweep.formats.corpus import Corpus
    from sweep.formats.golden import GoldenSet
    from sweep.formats.runs import Run

# Bytecode caches are written even where PYTHONDONTWRITEBYTECODE is set (this sandbox sets it):
# otherwise each worker rewrites the assertions of every test module and compiles our sources
# again in every run, about 6 s of each worker's start. Set before the test modules are imported.
sys.dont_write_bytecode = False

# A full garbage collection walks every object of the libraries the tests import (torch,
# transformers, MLflow: about 0.28 s a pass here); at Python's default of one per 10 passes of the
# middle generation, each worker made 24 of them, 6.7 CPU-s. One per 100: cyclic garbage waits a
# little longer. Commands and servers the tests start keep Python's defaults.
gc.set_threshold(*gc.get_threshold()[:2], 100)

IN_MEMORY = Path("/dev/shm")  # a tmpfs on Linux
ROOM_NEEDED = 4 * 2**30  # what a whole run of the suite writes, with margin


def pytest_configure(config):
    """Scratch folders (tmp_path, tempfile, the commands' and servers' temporary files) in memory
    where the machine has room there: SQLite waits about 6 ms for the disk at every commit and
    MLflow commits dozens of times per run, so on disk the suite waited more than it computed.
    The stores are the same SQLite files. Set here, in the first process, before pytest picks its
    base folder and before xdist starts the workers, which inherit the environment."""
    if "TMPDIR" not in os.environ and IN_MEMORY.is_dir() and os.access(IN_MEMORY, os.W_OK):
        if shutil.disk_usage(IN_MEMORY).free >= ROOM_NEEDED:
            os.environ["TMPDIR"] = str(IN_MEMORY)
            tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    os.environ.setdefault("OMP_NUM_THREADS", str(threads_per_worker(config)))


def threads_per_worker(config) -> int:
    """The machine's cores shared among the workers (`-n`), for the OpenMP and BLAS pools of
    PyTorch, FAISS and numpy: at one pool of every core per worker, the pools of two workers took
    turns on the same cores, each thread spinning while it waited for one the other worker held,
    about 10 % more CPU for the same encodes. Commands, servers and clusters the tests start
    inherit it."""
    workers = config.getoption("numprocesses", None) or 1  # xdist has made `-n auto` a number; -n 0: this process
    return max(1, (os.cpu_count() or 1) // workers)


def pytest_sessionstart(session):
    """Ray, wherever a test starts or joins a cluster, on 127.0.0.1 only, without usage reports or
    token auth: set for the whole session, as Ray reads them once, when a test first imports it."""
    os.environ.update(servers.RAY_ENV)


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    """The process's garbage collected once, then what is still alive frozen (`gc.freeze`): right
    after this pytest collects five times more, to report what finalizers raise, and each pass walked every
    object the models and libraries left behind, about a second apiece on this machine. A worker
    still doing that 5 s after the controlling process closed it was interrupted by execnet
    (SIGINT to itself), and its KeyboardInterrupt was printed under the run's last line."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def kept_blank_stores(request) -> None:
    """MLflow's blank store, which `helpers.stores` copies for a new store, kept between sessions
    in pytest's cache folder (a fixture: the controlling process, which runs no test, need not
    import MLflow for it); without the cache (`-p no:cacheprovider`), made once per test process."""
    from helpers import stores

    cache = getattr(request.config, "cache", None)
    if cache is not None:
        stores.KEPT_BLANK_STORES = cache.mkdir("blank-stores")


@pytest.fixture
def seed_example() -> tuple[GoldenSet, Run]:
    """DESIGN.md's worked example."""
    from helpers.data import golden_of, ranked

    golden = golden_of({"vacation days": {"d1": 1}, "hotel limit": {"d6": 1}, "stolen laptop": {"d10": 1}})
    run = ranked(
        {"vacation days": ["d2", "d1", "d9"], "hotel limit": ["d6", "d5", "d7"], "stolen laptop": ["d3", "d4", "d8"]}
    )
    return golden, run


@pytest.fixture(scope="session")
def small_kb_files(tmp_path_factory) -> Path:
    """12 Finance documents, the questions about them and 3 unanswerable ones, as files: for
    `python -m sweep` in a subprocess."""
    from helpers.data import write_kb_slice

    return write_kb_slice(tmp_path_factory.mktemp("small-kb-files"), {"Finance"}, documents=12)


@pytest.fixture(scope="session")
def small_kb(tmp_path_factory) -> tuple[Corpus, GoldenSet]:
    """The Finance and IT documents (28), the questions about them and 3 unanswerable ones."""
    from helpers.data import write_kb_slice
    from sweep.formats.corpus import load_corpus
    from sweep.formats.golden import load_golden

    folder = write_kb_slice(tmp_path_factory.mktemp("small-kb"), {"Finance", "IT"})
    corpus = load_corpus(folder / "corpus.jsonl")
    return corpus, load_golden(folder / "golden.jsonl", corpus, warn=False)


@pytest.fixture
def torch_on_one_thread(request) -> Iterator[None]:
    """PyTorch on one thread for a test file's models in process (`pytestmark =
    pytest.mark.usefixtures("torch_on_one_thread")`): beside the suite's other busy processes, two
    threads on 2 cores wait on each other; MiniLM's semantic chunking of 3 KB documents took 10 to
    29 s on two and 5 to 6 s on one. Only `slow` tests run a model (the marker says so), so a
    quick test of such a file does not import torch (3 s) for it."""
    if request.node.get_closest_marker("slow") is None:
        yield
        return
    import torch  # before the model loads: one_torch_thread sets nothing where torch is not imported

    from sweep.retrieval.pipeline import one_torch_thread

    with one_torch_thread():
        assert torch.get_num_threads() == 1
        yield


@pytest.fixture(scope="session")
def real_sweep(tmp_path_factory, small_kb_files) -> tuple[str, dict[str, str], Path, str]:
    """`python -m sweep -m model=bm25,tfidf` on the small knowledge base, once per session:
    (store, {model: child run id}, cwd, what it printed). Its sweep folder is cwd/multirun."""
    from helpers.commands import runs_in, sweep

    cwd = tmp_path_factory.mktemp("real-sweep")
    result = sweep(cwd, small_kb_files, "-m", "model=bm25,tfidf")
    assert result.returncode == 0, result.stderr[-3000:]
    store = f"sqlite:///{cwd / 'mlflow.db'}"
    _, runs = runs_in(store)
    children = {r.data.params["model"]: r.info.run_id for r in runs if r.data.tags.get("mlflow.parentRunId")}
    assert sorted(children) == ["bm25", "tfidf"]
    return store, children, cwd, result.stdout


# the test files that use the session's Ray cluster: xdist runs them on one worker, which starts one cluster
RAY_TEST_FILES = {"tests/experiment/test_launchers.py", "tests/retrieval/test_embed_shards.py"}


class RayFilesTogether(LoadFileScheduling):
    """`--dist loadfile`, with RAY_TEST_FILES one unit of work rather than one each."""

    def _split_scope(self, nodeid: str) -> str:
        scope = super()._split_scope(nodeid)
        return "RAY_TEST_FILES" if scope in RAY_TEST_FILES else scope


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return RayFilesTogether(config, log) if config.getvalue("dist") == "loadfile" else None


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """A local Ray cluster on 127.0.0.1 (`ray start --head`, 2 CPUs), once per test process, as
    starting one takes 10 to 30 s: (its address, its workers' working folder)."""
    folder = tmp_path_factory.mktemp("cluster")
    with servers.ray_cluster(folder) as address:
        yield address, folder


CHROMIUM = ("chromium", "chromedriver")  # Debian's packages `chromium` and `chromium-driver`


@pytest.fixture
def browser():
    """Headless Chromium (Debian's, through its chromedriver: nothing is downloaded), closed after
    the test. Fails, saying what to install, when the machine has no chromium: no test skips."""
    missing = [name for name in CHROMIUM if shutil.which(name) is None]
    if missing:
        pytest.fail(f"no {' or '.join(missing)} here: apt-get install -y chromium chromium-driver (.ci/run does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1600"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        yield driver
    finally:
        driver.quit()
