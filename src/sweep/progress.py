"""The package's progress bars, under one rule: a bar shows on a terminal only, only while the
`sweep` logger shows INFO (not under `verbosity=quiet`), and only for a step that lasts longer
than `DELAY` seconds, so a quick or cached step prints nothing."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm import tqdm

DELAY = 2.0  # seconds before a bar appears
T = TypeVar("T")


def progress_bar(iterable: Iterable[T] | None = None, **settings: Any) -> tqdm:
    """A tqdm bar over `iterable` (or a `total=` to `update`), shown as the module says; on stderr."""
    shown = logging.getLogger("sweep").isEnabledFor(logging.INFO)
    return tqdm(iterable, disable=None if shown else True, delay=DELAY, **settings)  # None: only on a terminal
