"""Reading user files line by line, so that every problem names the file and the line.

Files are UTF-8: a byte that is not is an error naming the line and the byte's offset, never a
silently replaced character. A key a record does not know is an error with the nearest known one.
(Large files of whitespace-separated fields are read in columns: `sweep.formats.columns`.)

Also here, without pandas (`python -m sweep.evaluate` reads TREC files without it): what a golden
set may hold and the warnings on its size and balance.
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from sweep.errors import InputError, where

log = logging.getLogger(__name__)

JSON_LINES_SUFFIXES = {".jsonl", ".json", ".ndjson"}
YAML_SUFFIXES = {".yaml", ".yml"}

# golden sets (sweep.formats.golden)
UNTYPED = "untyped"
MAX_GRADE = 100  # grades are integers up to this; TREC qrels may also go as low as -MAX_GRADE
RECOMMENDED_SIZE = (50, 200)
RECOMMENDED_UNANSWERABLE_SHARE = (0.10, 0.20)


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) for every line of a UTF-8 file."""
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a file")
    offset = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InputError(
                    f"{where(path, number)}: not UTF-8 text (byte 0x{raw[error.start]:02x} at offset {offset + error.start})"
                ) from None
            offset += len(raw)


def not_utf8(path: Path) -> InputError:
    """The error naming the first byte of `path` that is not UTF-8 (a fast reader's UnicodeDecodeError
    does not say where)."""
    for _ in text_lines(path):
        pass
    return InputError(f"{path}: not UTF-8 text")


def first_line(path: Path) -> str:
    """The first non-blank line; an empty file is an error."""
    line = next((line for _, line in text_lines(path) if line.strip()), None)
    if line is None:
        raise InputError(f"{path}: empty file")
    return line


def sniff(path: Path) -> str:
    """The kind of file, by its extension, else by its first line: "jsonl", "yaml" or "columns"
    (whitespace-separated fields, as in TREC files)."""
    suffix = path.suffix.lower()
    if suffix in JSON_LINES_SUFFIXES:
        return "jsonl"
    if suffix in YAML_SUFFIXES:
        return "yaml"
    return "jsonl" if first_line(path).lstrip().startswith("{") else "columns"


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for each non-blank line of a JSON Lines file."""
    for number, line in text_lines(path):
        if line.strip():
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as error:
                raise InputError(f"{where(path, number)}: malformed JSON ({error.msg})") from None


def check_keys(record: Mapping[str, Any], known: Collection[str], at: str, what: str) -> None:
    """A key `record` should not have is an error with the nearest known key."""
    for key in record:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise InputError(
                f"{at}: {what} has a key {key!r} it does not know ({hint}known: {', '.join(sorted(known))})"
            )


def identifier(value: Any, at: str, what: str) -> str:
    """An id given as a non-empty string or an integer, as a string."""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
        raise InputError(f"{at}: missing or invalid {what}: {value!r}")
    return str(value)


def warn_if_unbalanced(source: str | Path, n_questions: int, n_unanswerable: int) -> None:
    """Warn when a golden set has fewer or more questions than recommended, or a share of
    unanswerable ones outside the recommended range."""
    low, high = RECOMMENDED_SIZE
    if not low <= n_questions <= high:
        log.warning("%s: %d questions; a golden set works best with %d to %d", source, n_questions, low, high)
    share = n_unanswerable / n_questions if n_questions else 0.0
    low_share, high_share = RECOMMENDED_UNANSWERABLE_SHARE
    if not low_share <= share <= high_share:
        log.warning(
            "%s: %.0f%% of questions are unanswerable; %.0f%% to %.0f%% is recommended",
            source,
            100 * share,
            100 * low_share,
            100 * high_share,
        )


class FirstSeen(dict):
    """id -> line of its first appearance; a second appearance is an error naming both lines."""

    def add(self, key: str, path: Path, number: int, what: str) -> None:
        if key in self:
            raise InputError(f"{where(path, number)}: duplicate {what} {key!r} (first on line {self[key]})")
        self[key] = number
