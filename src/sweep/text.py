"""Long text made short for people: the one place for truncation and whitespace collapsing, used
by error messages, run names, the console, the HTML and Markdown reports and the labelling app
(whatever is logged as an artifact keeps the whole text)."""

from __future__ import annotations

from collections.abc import Sequence

ELLIPSIS = "…"


def shortened(text: str, limit: int, count: bool = True) -> str:
    """At most `limit` characters and an ellipsis; with `count`, how long the whole text is. Laying
    out a megabyte question would stall a console and swamp a page."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}{ELLIPSIS} ({len(text):,} characters)" if count else f"{text[:limit]}{ELLIPSIS}"


def single_line(text: object) -> str:
    """The text with every run of whitespace (newlines included) as one space."""
    return " ".join(str(text).split())


def listed(items: Sequence[str], shown: int) -> str:
    """The first `shown` items, comma-separated, with an ellipsis when there are more."""
    return ", ".join(items[:shown]) + (f" {ELLIPSIS}" if len(items) > shown else "")
