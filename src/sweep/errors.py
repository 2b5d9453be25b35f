"""Bad input, and the one policy every command follows for it.

`InputError`'s message is a single line that names the file, line or value and what is wrong.
Every command line entry point (`python -m sweep`, `sweep.evaluate`, `sweep.best`) is wrapped
in `exit_2_on_bad_input`: such an error prints `error: <message>` on stderr and exits with
code 2, without a traceback; anything else is a bug and keeps its traceback. A reader that
closes the output pipe early (`| head -1`) ends the command quietly, as it ends other Unix tools;
`python -m sweep`, whose output is a by-product of runs it logs, goes on to the end with its
console going nowhere (`outlive_the_reader`), so nothing it computes is lost.
"""

from __future__ import annotations

import functools
import logging
import os
import select
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

EXIT_BAD_INPUT = 2
EXIT_READER_GONE = 1  # as rich's console ends on a closed pipe, and Python's documentation advises
T = TypeVar("T")


class InputError(ValueError):
    """User-supplied data or arguments that cannot be used as given."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: what is running stops, is marked KILLED, and the command exits
    with 128 + the signal number. A BaseException, so that no `except Exception` swallows it."""

    def __init__(self, name: str, exit_code: int) -> None:
        super().__init__(f"interrupted by {name}")
        self.name, self.exit_code = name, exit_code


_RECEIVED: list[Interrupted] = []  # every signal this process received, first first
_DEFER_INSIDE = ("sqlalchemy.", "mlflow.store.", "alembic.")  # a write these make must not be cut in half
_RETRY_S = 0.05  # how soon a deferred signal is delivered again
_MAX_DEFERRALS = 200  # about 10 s: a store that hangs does not make the signal wait longer


def raise_on_signal(number: int, frame: FrameType | None) -> None:
    """The SIGINT/SIGTERM handler: raise `Interrupted` where the program is, and remember it.

    Not in the middle of a write to the MLflow store: an exception raised inside SQLAlchemy can
    leave its session unusable, and then the run cannot be marked KILLED. There the signal is
    delivered again a moment later, until the write is over (at most about 10 s). Python runs a
    handler between any two bytecodes, also inside a weakref callback or a `__del__`, where a
    raised exception is only printed ("Exception ignored in ..."); the checkpoints
    (`raise_if_interrupted`) then stop the command all the same."""
    interrupted = Interrupted(signal.Signals(number).name, 128 + number)
    _RECEIVED.append(interrupted)
    if len(_RECEIVED) <= _MAX_DEFERRALS and _inside(frame, _DEFER_INSIDE):
        again = threading.Timer(_RETRY_S, os.kill, (os.getpid(), number))
        again.daemon = True
        again.start()
        return
    raise interrupted


def stop_on_signals() -> None:
    """SIGINT and SIGTERM raise `Interrupted` (`raise_on_signal`) from here on. Where Python can
    only print that raise (in a `__del__` or a weakref callback: "Exception ignored in ...", with a
    traceback) nothing is printed, as the next checkpoint raises it again and the command ends with
    its one line; any other unraisable exception is printed as before."""
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, raise_on_signal)
    printed = sys.unraisablehook

    def quiet_about_signals(unraisable) -> None:
        if not isinstance(unraisable.exc_value, Interrupted):
            printed(unraisable)

    sys.unraisablehook = quiet_about_signals


def _inside(frame: FrameType | None, modules: tuple[str, ...]) -> bool:
    """Whether the call stack at `frame` runs code of one of `modules` (prefixes of module names)."""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(modules):
            return True
        frame = frame.f_back
    return False


def raise_if_interrupted() -> None:
    """A checkpoint: raise the first signal received, in case its own raise was swallowed."""
    if _RECEIVED:
        raise _RECEIVED[0]


def one_line(error: BaseException) -> str:
    """What an `error` tag or a failure line says: the message of bad input, else the exception's
    type and the first line of its message."""
    cause = bad_input(error)
    if cause is not None:
        return str(cause)
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def where(path: str | Path, line: int | None = None) -> str:
    """`file:line` prefix for an error or warning message."""
    return f"{path}:{line}" if line is not None else str(path)


def bad_input(error: BaseException | None) -> InputError | None:
    """The `InputError` behind `error`: itself, or the cause it was raised from (Hydra wraps
    what a constructor raises during `instantiate`); None for anything else."""
    while error is not None:
        if isinstance(error, InputError):
            return error
        error = error.__cause__
    return None


def interruption(error: BaseException | None) -> Interrupted | None:
    """The signal behind `error`: itself, or one that a library turned into an error of its own
    while handling it (SQLAlchemy rolls back a write a signal cut into, and may raise its own
    error instead); None for anything else."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, Interrupted):
            return error
        if isinstance(error, KeyboardInterrupt):
            return Interrupted("SIGINT", 130)
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def report_bad_input(error: InputError) -> None:
    print(f"error: {error}", file=sys.stderr)


def exit_2_on_bad_input(command: Callable[..., T]) -> Callable[..., T]:
    """Bad input ends `command` with one `error:` line on stderr and exit code 2. A reader of its
    output that leaves early (`| head -1`) ends it quietly with `EXIT_READER_GONE`."""

    @functools.wraps(command)
    def guarded(*args, **kwargs) -> T:
        try:
            result = command(*args, **kwargs)
            sys.stdout.flush()  # a reader gone shows here, not at the interpreter's exit
            return result
        except BrokenPipeError:
            if not _stdout_reader_gone():  # a socket's (a tracking server's): an error like any other
                raise
            # what the reader wanted it has; the rest goes nowhere, so the exit's flush cannot fail
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise SystemExit(EXIT_READER_GONE) from None
        except Exception as error:
            cause = bad_input(error)
            if cause is None:
                raise
            report_bad_input(cause)
            raise SystemExit(EXIT_BAD_INPUT) from None

    return guarded


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reading end is closed (poll reports an error on it)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
    except (AttributeError, OSError, ValueError):  # no file descriptor (captured output)
        return False
    return any(events & select.POLLERR for _, events in poller.poll(0))


def folder_problem(folder: str | Path, room: int = 0) -> str | None:
    """Why `folder` cannot be made and written, as `path: reason` (a file where a folder belongs,
    /proc, a read-only file system, a full disk), or None. A temporary folder is made in `folder`
    or its nearest existing parent and removed; with `room`, a file of that many bytes is written
    and synced in it first (what the folder's first files will take)."""
    folder = Path(folder).absolute()
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    try:
        with tempfile.TemporaryDirectory(dir=existing) as probe:
            if room:
                with open(Path(probe) / "room", "wb") as handle:
                    handle.write(bytes(room))
                    handle.flush()
                    os.fsync(handle.fileno())
    except OSError as error:
        return f"{existing}: {error.strerror}"
    return None


class OutlivingItsReader:
    """stdout for a command that goes on when the reader of its output leaves (`| head -1`): the
    first write or flush that meets the closed pipe points file descriptor 1 at /dev/null, and
    that write and every later one go there, quietly (no "Logging error", no traceback, no
    exit). Everything else is the wrapped stream's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._to_nowhere()
            return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_nowhere()

    def _to_nowhere(self) -> None:
        self.reader_gone = True
        nowhere = os.open(os.devnull, os.O_WRONLY)
        os.dup2(nowhere, self._stream.fileno())
        os.close(nowhere)
        try:
            self._stream.flush()  # what the closed pipe refused: to /dev/null now
        except (BrokenPipeError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def outlive_the_reader() -> None:
    """From here on, a reader of stdout that leaves (`python -m sweep ... | head -1`) ends nothing:
    sys.stdout becomes `OutlivingItsReader` (rich's console and `print` write to sys.stdout as it
    is at each write), and so does the stream of every logging handler that writes to stdout
    (Hydra's console handlers, made for each job). Idempotent: called once per job."""
    if not isinstance(sys.stdout, OutlivingItsReader):
        sys.stdout = OutlivingItsReader(sys.stdout)
    plain = (sys.stdout._stream, sys.__stdout__)
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        for handler in getattr(logger, "handlers", ()):  # a placeholder of a logger not made yet has none
            if isinstance(handler, logging.StreamHandler) and any(handler.stream is p for p in plain):
                with handler.lock or threading.Lock():  # not setStream: it flushes the old stream, which may fail
                    handler.stream = sys.stdout
