"""The one exception type for bad user input.

Its message is a single line that names the file, line or value and what is wrong;
command-line entry points print it and exit with code 2, without a traceback.
"""

from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """User-supplied data or arguments that cannot be used as given."""


def where(path: str | Path, line: int | None = None) -> str:
    """`file:line` prefix for an error or warning message."""
    return f"{path}:{line}" if line is not None else str(path)
