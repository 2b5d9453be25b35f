"""How reports write numbers: one place for decimals, costs and sizes (long text: `sweep.text`).

Used by the console tables, the HTML page, and the Markdown and text of `sweep.compare` and
`sweep.check`. A value that is missing (None, NaN, infinite, not a number) is written as `missing`,
"-" unless a caller says otherwise.
"""

from __future__ import annotations

import math
from decimal import ROUND_FLOOR, Decimal

from sweep.evaluation.registry import measure_of

MISSING = "-"


def is_missing(value: object) -> bool:
    """None, NaN, an infinity, or something that is not a number."""
    try:
        return value is None or not math.isfinite(float(value))
    except (TypeError, ValueError):
        return True


def is_true(value: object) -> bool:
    """A leaderboard's flag cell (tied_with_best, slower, on_front): True/False (1.0/0.0 once read
    back from JSON), or NaN for a run that was not ranked, which must not count (NaN is truthy)."""
    return not is_missing(value) and bool(value)


def number(value: object, digits: int = 4, signed: bool = False, missing: str = MISSING) -> str:
    """A statistic: `digits` decimals (4 by default), with its sign when `signed`."""
    if is_missing(value):
        return missing
    return f"{float(value):+.{digits}f}" if signed else f"{float(value):.{digits}f}"


def threshold(value: float, digits: int = 4) -> str:
    """A score threshold to paste back: `digits` decimals, rounded down (of the decimal the float
    reads as), so every score at or above the threshold still is; an infinity as Python writes it."""
    if not math.isfinite(value):
        return repr(float(value))
    return f"{Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_FLOOR):f}"


def significant(value: object, digits: int = 3, missing: str = MISSING) -> str:
    """`digits` significant digits (a cost in a narrow column)."""
    return missing if is_missing(value) else f"{float(value):.{digits}g}"


def size(value: object) -> str:
    """Bytes in a binary unit (KiB = 1024 B)."""
    if is_missing(value):
        return MISSING
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(amount) < 1024:
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} TiB"


def share(value: object, missing: str = MISSING) -> str:
    """A share (0 to 1) as a whole percentage: 0.5339 is "53%"; "<1%" for a share above 0 that
    would round to 0%."""
    if is_missing(value):
        return missing
    return "<1%" if 0 < float(value) < 0.01 else f"{float(value):.0%}"


def _unit(name: str) -> str:
    declared = measure_of(name)
    return declared.unit if declared is not None else ""


def cost(name: str, value: object) -> str:
    """A cost as the registry declares its unit: bytes in a binary unit, a share as a whole
    percentage (`share`), else 2 decimals."""
    unit = _unit(name)
    if unit == "share":
        return share(value)
    return size(value) if unit == "bytes" else number(value, 2)


def cost_in_column(name: str, value: object) -> str:
    """A cost in a narrow column (the console): a share as a whole percentage (`share`), else 3
    significant digits, bytes in MiB."""
    unit = _unit(name)
    if unit == "share":
        return share(value)
    scale = 1 / 2**20 if unit == "bytes" else 1.0
    return MISSING if is_missing(value) else significant(float(value) * scale)
