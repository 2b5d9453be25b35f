"""The HTML pieces the sections of a sweep's report share: escaping, labels, tables, the heat colours.

A table sits in a box that scrolls sideways when it is wider than the page, so that the page itself
never does. Heat cells are coloured on one sequential scale, light (low) to dark blue (high), and
their text is black or white, whichever contrasts more with the cell (WCAG 2's ratio: at least
4.58:1 on any colour of the scale).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import pandas as pd

from sweep.reporting.formatting import is_missing

LOW_COLOUR = (247, 251, 255)
HIGH_COLOUR = (33, 102, 172)
BLACK, WHITE = (0, 0, 0), (255, 255, 255)
MISSING_CELL = "background-color:#eeeeee;color:#4d4d4d"  # 7.3:1


def esc(value: object) -> str:
    return html.escape(str(value))


def table(table_id: str, head: str, rows: Sequence[str], css_class: str = "") -> str:
    """A table in a box that scrolls sideways when it is wider than the page (many configurations)."""
    classes = f' class="{css_class}"' if css_class else ""
    return (
        f'<div class="wide"><table id="{table_id}"{classes}>\n<thead><tr>{head}</tr></thead>\n'
        f"<tbody>\n{''.join(rows)}</tbody>\n</table></div>\n"
    )


def label_html(label: str) -> str:
    """A configuration's label, escaped, that may wrap between overrides and after a / or a comma
    (a path, a list) but never inside a word."""
    return esc(label).replace("/", "/<wbr>").replace(",", ",<wbr>")


def luminance(colour: tuple[int, int, int]) -> float:
    """WCAG 2's relative luminance of an sRGB colour."""
    linear = [c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in colour]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """WCAG 2's contrast ratio of two colours, from 1 to 21."""
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def heat_style(value: object, low: float, high: float) -> str:
    """Inline background for `value` on the scale low..high, and the text colour that reads best on it."""
    if is_missing(value):
        return MISSING_CELL
    share = 0.5 if high <= low else min(max((float(value) - low) / (high - low), 0.0), 1.0)
    background = tuple(round(a + (b - a) * share) for a, b in zip(LOW_COLOUR, HIGH_COLOUR))
    text = max((BLACK, WHITE), key=lambda colour: contrast(colour, background))
    return f"background-color:{hex_colour(background)};color:{hex_colour(text)}"


def hex_colour(colour: Sequence[int]) -> str:
    return "#" + "".join(f"{c:02x}" for c in colour)


def scale_of(frame: pd.DataFrame) -> tuple[float, float]:
    """The lowest and highest finite value of `frame`; (0, 1) when it has none."""
    values = frame.to_numpy(dtype=float).ravel()
    values = values[np.isfinite(values)]
    return (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
