"""What `python -m sweep` lets through to the console besides its tables, by `verbosity`.

`quiet`: each run's summary line, warnings and errors (and after a sweep its leaderboard);
`normal`: also the tables, golden-sweep's own INFO lines, Hydra's launch lines and progress
bars on a terminal; `verbose`: also the libraries' INFO lines and bars (sentence-transformers,
transformers, bm25s), every line with its time and logger as Hydra writes them. Below
`verbose`, a library's lines below WARNING never reach the console, whatever level the library
gives its own logger; sentence-transformers decides its "Batches" bars by its logger's level,
and transformers' "Loading weights" bars follow its own switch, both set here.

A warning reaches the console once per sweep (per process: the basic launcher runs every
combination in one), as `warning: ...`; the job's log file keeps it for every run. A warning
whose numbers differ from run to run (how many questions, what share of chunks) names what it
is with `extra={"once": key}`; any other is repeated only when its text is.
"""

from __future__ import annotations

import logging
import sys

from sweep.errors import InputError
from sweep.settings import OneOf

VERBOSITY = OneOf(("quiet", "normal", "verbose"))
OWN = ("sweep", "hydra")  # the loggers whose INFO lines are ours to show
SUMMARY = "sweep.summary"  # the logger of each run's summary line: shown even when quiet
_shown: set[str] = set()  # the warnings this process has put on the console


class ConsoleFilter(logging.Filter):
    """Lets a record reach the console unless it is a library's below WARNING (and `libraries`
    is off) or a warning this process has shown before."""

    def __init__(self, libraries: bool) -> None:
        super().__init__()
        self.libraries = libraries

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return self.libraries or any(record.name == own or record.name.startswith(f"{own}.") for own in OWN)
        if record.levelno > logging.WARNING:
            return True
        key = getattr(record, "once", None) or record.getMessage()
        if key in _shown:
            return False
        _shown.add(key)
        return True


class ConsoleFormatter(logging.Formatter):
    """`warning: ...` and `error: ...`, as the commands print theirs; INFO lines as they are."""

    def format(self, record: logging.LogRecord) -> str:
        message = super().format(record)
        return message if record.levelno < logging.WARNING else f"{record.levelname.lower()}: {message}"


def set_verbosity(verbosity: str) -> None:
    """Set the loggers, the console handlers Hydra made for the job, and the libraries' bars
    for `verbosity` (quiet, normal, verbose). Called at the start of every job: Hydra makes the
    job's handlers afresh."""
    if not VERBOSITY.allows(verbosity):
        raise InputError(f"verbosity={verbosity!r}: must be {VERBOSITY}")
    verbose, quiet = verbosity == "verbose", verbosity == "quiet"
    logging.getLogger().setLevel(logging.INFO if verbose else logging.WARNING)  # sentence-transformers' bars
    for name in OWN:
        logging.getLogger(name).setLevel(logging.WARNING if quiet else logging.INFO)
    logging.getLogger(SUMMARY).setLevel(logging.INFO)
    for handler in logging.getLogger().handlers:
        if type(handler) is logging.StreamHandler:  # the console: not Hydra's log file (a FileHandler)
            for old in [f for f in handler.filters if isinstance(f, ConsoleFilter)]:
                handler.removeFilter(old)
            handler.addFilter(ConsoleFilter(libraries=verbose))
            if not verbose:
                handler.setFormatter(ConsoleFormatter("%(message)s"))
    # transformers' bars ("Loading weights") follow huggingface_hub's switch when transformers is
    # imported, and its own once it is: importing it here would cost a BM25 run some 1.7 s
    from huggingface_hub import utils as hub

    (hub.enable_progress_bars if verbose else hub.disable_progress_bars)()
    transformers_logging = sys.modules.get("transformers.utils.logging")
    if transformers_logging is not None:
        (transformers_logging.enable_progress_bar if verbose else transformers_logging.disable_progress_bar)()
