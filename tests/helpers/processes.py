"""`python -m <module>` in a real process of its own, without paying for the imports each time.

A test that starts `python -m sweep` waits several seconds (most of it under load) for torch,
sentence-transformers, MLflow and Hydra to import before the command does anything. Here such
commands run in a process forked from a server that imported those once per test session
(multiprocessing's forkserver with a preload). The child is a fresh process as far as the
command can tell: its own pid, working folder, environment, file descriptors 1 and 2, signal
handlers and exit status; `__main__` is the module, run by runpy as `python -m` runs it; the
interpreter's exit steps (threads joined, atexit handlers) run before it exits. A signal or
SIGKILL reaches it as it would any process, and its exit status reads as Popen's does (-9 when
killed). Only the interpreter start and the imports are shared, and the command's own modules
import nothing at start-up that reads the environment.

Any other command line runs through subprocess unchanged; `start_code` runs a test's own
`python -c` program as these commands run.
"""

from __future__ import annotations

import atexit
import importlib.util
import multiprocessing
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

# Imported once in the server: the costly imports of `python -m sweep` and of its sibling
# commands, including those MLflow, Hydra, matplotlib, PIL and rich make lazily in every run
# (`python -X importtime` on a forked BM25 sweep: 0.13 s of imports left after the fork, 0.02 s now).
# Importing only: no model is loaded, no store opened, no thread started. Names importable from
# site-packages: Python 3.11's forkserver imports them without this process's sys.path (tests/),
# and skips any it cannot import, which `_run_module` turns into a failure. Optional packages
# (IPython, which MLflow imports when present) that this environment lacks are left out first.
WANTED = [
    "bm25s", "faiss", "IPython", "git", "matplotlib.pyplot", "sentence_transformers.models",
    "transformers.generation.utils", "transformers.models.bert.modeling_bert",
    "transformers.models.bert.tokenization_bert", "sqlalchemy.dialects.sqlite",
    "mlflow", "mlflow.store.tracking.sqlalchemy_store", "mlflow.store.tracking.sqlalchemy_workspace_store",
    "mlflow.tracing.processor.otel_metrics_mixin", "openai",
    "hydra_plugins.hydra_joblib_launcher.joblib_launcher", "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper",
    "hydra_plugins.hydra_ray_launcher.ray_launcher", "hydra_plugins.hydra_ray_launcher._config",
    "sklearn.feature_extraction.text", "tabulate", "rich._emoji_codes", "mlflow.tracing.processor.base_mlflow",
    "matplotlib.backends.backend_agg", "pyarrow.pandas_compat", "pandas.core.methods.to_dict",
    "PIL.BmpImagePlugin", "PIL.GifImagePlugin", "PIL.JpegImagePlugin", "PIL.PpmImagePlugin",
    "sweep.best", "sweep.check", "sweep.compare", "sweep.evaluate", "sweep.experiment.cli",
    "sweep.experiment.trial", "sweep.retrieval.dense", "sweep.retrieval.index", "sweep.retrieval.lexical",
    "sweep.retrieval.pipeline", "sweep.tracking.lifecycle", "sweep.tracking.records", "sweep.tracking.sweeps",
]  # fmt: skip


def installed(names: Sequence[str]) -> list[str]:
    """The `names` whose top-level package is installed (found without importing it)."""
    return [name for name in names if importlib.util.find_spec(name.partition(".")[0]) is not None]


PRELOAD = installed(WANTED)
_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOAD)


def _module_of(args: Sequence[str]) -> str | None:
    """`sweep.best` for [python, -m, sweep.best, ...]; None for any other command line."""
    args = [os.fspath(arg) for arg in args]
    if len(args) >= 3 and args[0] == sys.executable and args[1] == "-m" and args[2].split(".")[0] == "sweep":
        return args[2]
    return None


def _run_module(
    module: str,
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    stdout: str,
    stderr: str,
    program: str | None = None,
    preexec_fn=None,
) -> None:
    """In the forked child: become `python -m module argv...` in `cwd` with `env`, writing to the
    files `stdout` and `stderr`, then exit as the interpreter would; with `program` (module "-c"):
    `python -c program argv...`. `preexec_fn` is called first, as Popen calls it after its file
    descriptors and folder are set (what it raises is reported as the command's own)."""
    missing = [name for name in PRELOAD if name not in sys.modules]
    assert not missing, f"the forkserver could not import {missing}: run `python -c 'import {missing[0]}'`"
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, target in ((1, stdout), (2, stderr)):
        opened = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)  # noqa: SIM115
    sys.argv = [module, *argv]
    sys.modules.pop(module, None)  # preloaded, as the command's imports: `python -m` runs it anew as __main__
    try:
        if preexec_fn is not None:
            preexec_fn()
        if program is None:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            exec(compile(program, "<string>", "exec"), {"__name__": "__main__"})
    except SystemExit as exit_:
        code = exit_.code
    except BaseException:  # as the interpreter reports an uncaught exception: traceback on stderr, status 1
        import traceback

        traceback.print_exc()
        code = 1
    else:
        code = 0
    threading._shutdown()  # what the interpreter does at exit, in its order: threads, then atexit
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)


_running: set[Started] = set()


@atexit.register
def _stop_the_rest() -> None:
    """A test that failed before its command ended leaves it running: stopped with the session."""
    for started in _running:
        if started.poll() is None:
            started.kill()


class Started:
    """A command started by `start`: the part of subprocess.Popen's interface the tests use."""

    def __init__(self, module: str, args: Sequence[str], cwd, env, stdout, stderr, preexec_fn=None) -> None:
        self.args = [os.fspath(arg) for arg in args]  # as subprocess takes paths
        piped = subprocess.PIPE in (stdout, stderr)
        self._folder = Path(tempfile.mkdtemp(prefix="command-")) if piped else None
        # inherited (None) as DEVNULL: the tests that leave them so do not read them
        self._outputs = {
            name: self._folder / name if choice == subprocess.PIPE else None
            for name, choice in (("stdout", stdout), ("stderr", stderr))
        }
        self._process = _context.Process(
            target=_run_module,
            args=(
                module, self.args[3:], str(cwd or os.getcwd()), dict(os.environ if env is None else env),
                str(self._outputs["stdout"] or os.devnull), str(self._outputs["stderr"] or os.devnull),
            ),
            kwargs={"program": self.args[2] if module == "-c" else None, "preexec_fn": preexec_fn},
        )  # fmt: skip
        self._process.start()
        _running.add(self)
        self.pid = self._process.pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and not self._process.is_alive():
            self._process.join()
            self.returncode = self._process.exitcode
            _running.discard(self)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str | None, str | None]:
        self.wait(timeout)
        said = self._read("stdout"), self._read("stderr")
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
        return said

    def _read(self, name: str) -> str | None:
        path = self._outputs[name]
        if path is None:
            return None
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, number)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def start(args: Sequence[str], **popen):
    """subprocess.Popen(args, **popen); for `python -m sweep...` (stdout and stderr: PIPE, DEVNULL
    or inherited, text, preexec_fn), through the preloaded server."""
    module = _module_of(args)
    if module is None:
        return subprocess.Popen(args, **popen)
    return _started(module, args, popen)


def start_code(program: str, *args, **popen) -> Started:
    """`python -c PROGRAM ARGS...` (options as `start` takes them for `python -m sweep...`), through
    the preloaded server: for a test's own child program that imports torch, MLflow or Hydra and
    would otherwise spend seconds on it. Never for one that checks what a fresh interpreter imports."""
    return _started("-c", [sys.executable, "-c", program, *args], popen)


def _started(module: str, args: Sequence[str], popen: dict) -> Started:
    options = ("cwd", "env", "stdout", "stderr", "preexec_fn")
    unknown = set(popen) - {*options, "text"}
    assert not unknown, f"processes.start does not take {sorted(unknown)}"
    return Started(module, args, *(popen.get(name) for name in options))


def run(args: Sequence[str], **options) -> subprocess.CompletedProcess:
    """subprocess.run(args, **options); for `python -m sweep...` (capture_output=True, text=True),
    through the preloaded server."""
    if _module_of(args) is None:
        return subprocess.run(args, **options)
    assert options.pop("capture_output", False) and options.get("text"), "processes.run captures text output"
    timeout = options.pop("timeout", None)
    process = start(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **options)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
