"""Reading user files line by line, so that every problem names the file and the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sweep.errors import InputError, where

JSON_LINES_SUFFIXES = {".jsonl", ".json", ".ndjson"}
YAML_SUFFIXES = {".yaml", ".yml"}


def first_line(path: Path) -> str:
    """The first non-blank line; an empty file is an error."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        line = next((line for line in handle if line.strip()), None)
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
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as error:
                    raise InputError(f"{where(path, number)}: malformed JSON ({error.msg})") from None


def identifier(value: Any, at: str, what: str) -> str:
    """An id given as a non-empty string or an integer, as a string."""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
        raise InputError(f"{at}: missing or invalid {what}: {value!r}")
    return str(value)


class FirstSeen(dict):
    """id -> line of its first appearance; a second appearance is an error naming both lines."""

    def add(self, key: str, path: Path, number: int, what: str) -> None:
        if key in self:
            raise InputError(f"{where(path, number)}: duplicate {what} {key!r} (first on line {self[key]})")
        self[key] = number
