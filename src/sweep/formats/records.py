"""Reading user files line by line, so that every problem names the file and the line.

Files are UTF-8: a byte that is not is an error naming the line and the byte's offset, never a
silently replaced character. A key a record does not know is an error with the nearest known one.

Large files of whitespace-separated fields (TREC runs and qrels) are first read in columns by
pyarrow's multithreaded parser (`read_columns`); a file it does not read cleanly goes to the
caller's line-by-line reader, which reads what trec_eval reads or names the line.

Also here, without pandas (`python -m sweep.evaluate` reads TREC files without it): what a golden
set may hold and the warnings on its size and balance.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv as pa_csv

from sweep.errors import InputError, where

log = logging.getLogger(__name__)

JSON_LINES_SUFFIXES = {".jsonl", ".json", ".ndjson"}
YAML_SUFFIXES = {".yaml", ".yml"}
TREC_RUN_COLUMNS = ("qid", "q0", "docid", "rank", "score", "tag")
TREC_QRELS_COLUMNS = ("qid", "iteration", "docid", "grade")

# golden sets (sweep.formats.golden)
UNTYPED = "untyped"
MAX_GRADE = 100  # grades are integers up to this; TREC qrels may also go as low as -MAX_GRADE
GRADE = re.compile(r"-?\d{1,3}")  # a grade in a TREC file: at most 3 digits, so nothing int64 cannot hold
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


# ---------------------------------------------------------------- columns of large files


@dataclass(frozen=True)
class Strings:
    """A column of strings as one integer code per row into its distinct strings (pyarrow's
    dictionary encoding: each row is hashed once, in C++)."""

    codes: np.ndarray  # int32
    distinct: pa.StringArray  # in order of first appearance

    @cached_property
    def values(self) -> list[str]:
        """The distinct strings, code by code."""
        return self.distinct.to_pylist()

    def sorted_codes(self) -> np.ndarray:
        """The codes in the order of their strings: by code point, as trec_eval's strcmp orders UTF-8."""
        return _numpy(pc.sort_indices(self.distinct), np.uint64).astype(np.int64)

    def ranks(self, rows: np.ndarray) -> np.ndarray:
        """Integers that order the strings at `rows` as `sorted_codes` does (only theirs are sorted)."""
        codes, inverse = np.unique(self.codes[rows], return_inverse=True)
        codes = codes.astype(np.int64)
        strings = self.distinct.take(pa.Array.from_buffers(pa.int64(), len(codes), [None, pa.py_buffer(codes)]))
        ranks = np.empty(len(codes), np.int64)
        ranks[_numpy(pc.sort_indices(strings), np.uint64)] = np.arange(len(codes))
        return ranks[inverse]

    def take(self, rows: np.ndarray) -> Strings:
        return Strings(self.codes[rows], self.distinct)


def index_in(strings: pa.StringArray, among: pa.StringArray) -> np.ndarray:
    """The position of each of `strings` in `among` (distinct strings), -1 where it is not:
    pyarrow's hash join, a few times faster than hashing Python strings."""
    found = pc.index_in(strings, value_set=among)
    positions = _numpy(found, np.int32).astype(np.int64)
    if found.null_count:
        valid = np.unpackbits(
            np.frombuffer(found.buffers()[0], np.uint8), count=found.offset + len(found), bitorder="little"
        )
        positions[valid[found.offset :] == 0] = -1
    return positions


def read_columns(path: Path, names: Sequence[str], kinds: Mapping[str, str]) -> dict[str, Strings | np.ndarray] | None:
    """The columns named in `kinds` ("string" or "float") of a file whose lines hold the fields
    `names`, separated by single spaces or single tabs (as its first line is); None when the file
    is anything else: another number of fields on a line, runs of separators, a number that is
    not one or is not finite, an empty string, bytes that are not UTF-8.

    Only pyarrow calls that leave pandas unimported are used (`to_numpy`, for one, imports it)."""
    delimiter = "\t" if "\t" in first_line(path) else " "
    try:
        table = pa_csv.read_csv(
            path,
            read_options=pa_csv.ReadOptions(column_names=list(names)),
            parse_options=pa_csv.ParseOptions(delimiter=delimiter, quote_char=False),  # trec_eval has no quoting
            convert_options=pa_csv.ConvertOptions(
                include_columns=list(kinds),
                column_types={name: pa.string() if kind == "string" else pa.float64() for name, kind in kinds.items()},
            ),
        )
    except pa.ArrowInvalid:  # wrong field counts, numbers that are not, invalid UTF-8
        return None
    if table.num_rows == 0 or any(column.null_count for column in table.columns):  # a number left out
        return None
    columns: dict[str, Strings | np.ndarray] = {}
    for name, kind in kinds.items():
        if kind == "float":
            values = np.concatenate([_numpy(chunk, np.float64) for chunk in table[name].chunks])
            if not np.isfinite(values).all():
                return None
            columns[name] = values
            continue
        encoded = pc.dictionary_encode(table[name].combine_chunks())
        # an empty field is none to trec_eval, one holding other whitespace several
        if pc.any(pc.match_substring_regex(encoded.dictionary, r"^$|[\s\v]")).as_py():
            return None
        columns[name] = Strings(_numpy(encoded.indices, np.int32), encoded.dictionary)
    return columns


def read_trec_run_columns(path: Path) -> dict[str, Strings | np.ndarray] | None:
    """A TREC run's qid, docid (strings) and score (floats) columns, as `read_columns` reads them."""
    return read_columns(path, TREC_RUN_COLUMNS, {"qid": "string", "docid": "string", "score": "float"})


def _numpy(array: pa.Array, dtype: type) -> np.ndarray:
    """The values of a pyarrow array of fixed-width values, viewed as numpy (what is under a null
    is undefined)."""
    return np.frombuffer(array.buffers()[1], dtype)[array.offset : array.offset + len(array)]


def trec_order(
    query: np.ndarray, score: np.ndarray, doc_ranks: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray | None:
    """Row order that puts each query's rows together, score descending, then document id
    descending (trec_eval's order); None when the rows already are. `query` holds codes 0..n-1;
    `doc_ranks(rows)` gives integers that order the document ids of `rows`.

    Run files are usually written in rank order, so check that first: then only runs of tied
    scores can be out of place, and only their documents need comparing."""
    if len(query) == 0:
        return None
    same_query = query[1:] == query[:-1]
    grouped = np.count_nonzero(~same_query) + 1 == np.count_nonzero(np.bincount(query))
    if not (grouped and np.all((score[1:] <= score[:-1]) | ~same_query)):
        return np.lexsort((-doc_ranks(np.arange(len(query))), -score, query))
    tied = np.flatnonzero(same_query & (score[1:] == score[:-1])) + 1  # rows that tie the row before them
    if len(tied) == 0:
        return None
    in_tie = np.zeros(len(query), bool)
    in_tie[tied - 1] = in_tie[tied] = True
    rows = np.flatnonzero(in_tie)
    ties_previous = np.zeros(len(query), bool)
    ties_previous[tied] = True
    tie_group = np.cumsum(~ties_previous[rows])
    in_order = rows[np.lexsort((-doc_ranks(rows), tie_group))]
    if np.array_equal(in_order, rows):
        return None
    order = np.arange(len(query))
    order[rows] = in_order
    return order


def repeats_within(group: np.ndarray, item: np.ndarray, n_items: int) -> bool:
    """Whether an item occurs twice in one group. Fast when each group's rows are together, in
    increasing group order, as in a run file: a stable sort (timsort) of such keys merges cheaply."""
    key = group.astype(np.int64) * max(n_items, 1) + item
    key.sort(kind="stable")
    return bool(np.any(key[1:] == key[:-1]))
