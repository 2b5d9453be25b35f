"""Bad input, and the one policy every command follows for it.

`InputError`'s message is a single line that names the file, line or value and what is wrong.
Every command line entry point (`python -m sweep`, `sweep.evaluate`, `sweep.best`) is wrapped
in `exit_2_on_bad_input`: such an error prints `error: <message>` on stderr and exits with
code 2, without a traceback; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

EXIT_BAD_INPUT = 2
T = TypeVar("T")


class InputError(ValueError):
    """User-supplied data or arguments that cannot be used as given."""


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


def report_bad_input(error: InputError) -> None:
    print(f"error: {error}", file=sys.stderr)


def exit_2_on_bad_input(command: Callable[..., T]) -> Callable[..., T]:
    """Bad input ends `command` with one `error:` line on stderr and exit code 2."""

    @functools.wraps(command)
    def guarded(*args, **kwargs) -> T:
        try:
            return command(*args, **kwargs)
        except Exception as error:
            cause = bad_input(error)
            if cause is None:
                raise
            report_bad_input(cause)
            raise SystemExit(EXIT_BAD_INPUT) from None

    return guarded
