"""Columns of large files: read by pyarrow's CSV parser, then ordered and checked with numpy.

Nothing here imports pandas (`python -m sweep.evaluate` reads TREC files without it): only pyarrow
calls that leave it unimported are used (`to_numpy`, for one, imports it). Nor the module
`pyarrow.compute`: its import writes the docstrings of some 280 wrappers, 40 ms, a tenth of the
command's whole run; its kernels are called by name with its `call_function`, which (like the
options classes) lives in the extension module it imports them from, `pyarrow._compute`.
`sweep.formats.trec` reads TREC runs and qrels with `read_columns` (a file whose fields are
separated by runs of spaces and tabs after `single_spaced` has rewritten it), and names the first
bad line of a file it refuses. Also here, the one rule for ids in TREC files (`trec_id` writes
them percent-encoded, `id_in_trec` and, for a whole column at once, `percent_decoded` read them).
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyarrow import csv as pa_csv
from pyarrow._compute import MatchSubstringOptions, SetLookupOptions, call_function

from sweep.formats.lines import NOT_IN_IDS, NOT_IN_IDS_RE2, nfc

_NOT_AN_ID = "^$|" + NOT_IN_IDS_RE2  # an empty field, or a character a TREC file's field may not hold unencoded
ANY_FIELD = "^$"  # only an empty field refused: a tab-separated file's fields may hold spaces
_PERCENT = ord("%")
_ENCODED = re.compile("%|" + NOT_IN_IDS.pattern)  # what `trec_id` percent-encodes
_ESCAPES = re.compile(rb"(?:%[0-9A-Fa-f]{2})+")
_HEX = np.full(256, -1, np.int16)  # each byte's value as a hex digit, -1 for the others
for _digits, _first in ((b"0123456789", 0), (b"ABCDEF", 10), (b"abcdef", 10)):
    _HEX[np.frombuffer(_digits, np.uint8)] = np.arange(_first, _first + len(_digits))
_SPACE, _TAB, _NEWLINE, _RETURN = (ord(c) for c in " \t\n\r")
_STRING = pa.dictionary(pa.int32(), pa.string())


@dataclass(frozen=True)
class Strings:
    """A column of strings as one integer code per row into a dictionary of strings (pyarrow's
    dictionary encoding, in C++). A file's column (`read_columns`) holds each string once in its
    dictionary, in order of first appearance."""

    codes: np.ndarray  # int32
    dictionary: pa.StringArray

    @cached_property
    def values(self) -> list[str]:
        """The dictionary's strings, code by code."""
        return self.dictionary.to_pylist()

    def sorted_codes(self) -> np.ndarray:
        """The codes in the order of their strings: by code point, as trec_eval's strcmp orders UTF-8."""
        return _numpy(call_function("array_sort_indices", [self.dictionary]), np.uint64).astype(np.int64)

    def sorted_positions(self) -> np.ndarray:
        """Each code's position in `sorted_codes`: the rank of its string in the dictionary."""
        order = self.sorted_codes()
        positions = np.empty(len(order), np.int64)
        positions[order] = np.arange(len(order))
        return positions

    def ranks(self, rows: np.ndarray) -> np.ndarray:
        """Integers that order the strings at `rows` as `sorted_codes` does (only theirs are sorted)."""
        codes, inverse = np.unique(self.codes[rows], return_inverse=True)
        strings = take(self.dictionary, codes)
        ranks = np.empty(len(codes), np.int64)
        ranks[_numpy(call_function("array_sort_indices", [strings]), np.uint64)] = np.arange(len(codes))
        return ranks[inverse]

    def to_numpy(self) -> np.ndarray:
        """Every row's string, as a numpy array of Python strings (dtype object)."""
        return np.array(self.values, dtype=object)[self.codes]


def in_nfc(strings: Strings) -> tuple[Strings, int, str | None]:
    """`strings` with every string in Unicode NFC (`sweep.formats.lines.nfc`), the form ids are
    compared in, two strings that differ only in their form made one; with how many strings were
    not in NFC and the first of them (0 and None: `strings` itself). An all-ASCII dictionary, the
    usual one, is found so in one pass; only the others' strings are normalised, by Python's
    `unicodedata` (pyarrow 25's `utf8_normalize` leaves `e` + U+0301 decomposed under NFC)."""
    dictionary = strings.dictionary
    not_ascii = call_function("invert", [call_function("string_is_ascii", [dictionary])])
    if not call_function("any", [not_ascii]).as_py():
        return strings, 0, None
    written = call_function("filter", [dictionary, not_ascii]).to_pylist()
    normal = [nfc(value) for value in written]
    moved = [value for value, normalised in zip(written, normal) if value != normalised]
    if not moved:
        return strings, 0, None
    replaced = call_function("replace_with_mask", [dictionary, not_ascii, _string_array(normal)])
    encoded = call_function("dictionary_encode", [replaced])  # forms that meet become one string
    return Strings(_numpy(encoded.indices, np.int32)[strings.codes], encoded.dictionary), len(moved), moved[0]


# ---------------------------------------------------------------- ids in TREC files (`sweep.formats.trec`)


def trec_id(value: str) -> str:
    """`value` as a TREC file carries it (module doc): `%`, whitespace and control characters
    percent-encoded (their UTF-8 bytes, hex in upper case); any other id is itself."""
    if "%" not in value and NOT_IN_IDS.search(value) is None:
        return value
    return _ENCODED.sub(lambda found: "".join(f"%{byte:02X}" for byte in found.group().encode()), value)


def id_in_trec(field: str) -> str:
    """The id a TREC file's `field` carries: each run of `%XX` escapes decoded, where its bytes are
    UTF-8 (`sweep.formats.columns.percent_decoded` does the same to a column)."""

    def decoded(found: re.Match[bytes]) -> bytes:
        escaped = bytes.fromhex(found.group().replace(b"%", b"").decode("ascii"))
        try:
            escaped.decode("utf-8")
        except UnicodeDecodeError:
            return found.group()
        return escaped

    return _ESCAPES.sub(decoded, field.encode("utf-8")).decode("utf-8") if "%" in field else field


def percent_decoded(strings: Strings) -> tuple[Strings, list[tuple[str, str]]]:
    """`strings` with each run of `%XX` escapes decoded where its bytes are UTF-8 (the rule of
    `sweep.formats.trec`), two strings that decode alike made one; with (as written, as read) for
    each string whose escapes `trec_id` would not have written (hex in lower case, an escaped
    character other than `%`, whitespace or a control character). A dictionary without `%`, the
    usual one, is found so in one pass of pyarrow's; the others' strings are decoded at once, by
    whole-array numpy operations on their UTF-8 bytes (Python's `id_in_trec` only for a string
    whose escapes are not UTF-8, and Python's check of those that escape characters past ASCII)."""
    dictionary = strings.dictionary
    if not np.any(_utf8(dictionary) == _PERCENT):  # one pass over the bytes: 3 ms a million ids
        return strings, []
    has_percent = call_function("match_substring", [dictionary], MatchSubstringOptions("%"))
    written = call_function("take", [dictionary, _int64(np.flatnonzero(_bits_of(has_percent)))])
    read, odd = _unescaped(written)
    if call_function("all", [call_function("equal", [written, read])]).as_py():
        return strings, []
    replaced = call_function("replace_with_mask", [dictionary, has_percent, read])
    encoded = call_function("dictionary_encode", [replaced])  # strings that decode alike become one
    shown = [(written[i].as_py(), read[i].as_py()) for i in odd.tolist()]
    return Strings(_numpy(encoded.indices, np.int32)[strings.codes], encoded.dictionary), shown


def _unescaped(strings: pa.StringArray) -> tuple[pa.StringArray, np.ndarray]:
    """`strings` (offsets from 0) with their `%XX` escapes decoded, and the positions of those
    holding escapes `trec_id` would not write: the bytes of all of them as one numpy array, each
    escape's three bytes made one, the string offsets moved by what went."""
    offsets = np.frombuffer(strings.buffers()[1], np.int32)[: len(strings) + 1].astype(np.int64)
    data = np.frombuffer(strings.buffers()[2], np.uint8)[offsets[0] : offsets[-1]].copy()
    offsets -= offsets[0]
    starts = np.flatnonzero(data[:-2] == _PERCENT)
    high, low = _HEX[data[starts + 1]], _HEX[data[starts + 2]]
    string_of = np.searchsorted(offsets, starts, side="right") - 1
    # an escape lies within one string, its two digits before the string's end
    ok = (high >= 0) & (low >= 0) & (starts + 2 < offsets[string_of + 1])
    escapes, string_of = starts[ok], string_of[ok]  # never overlapping: a digit is not `%`
    byte = (_HEX[data[escapes + 1]] * 16 + _HEX[data[escapes + 2]]).astype(np.uint8)
    lower = (data[escapes + 1] >= ord("a")) | (data[escapes + 2] >= ord("a"))
    odd = lower | ((byte > 0x20) & (byte != _PERCENT) & (byte != 0x7F) & (byte < 0x80))
    past_ascii = np.zeros(len(strings), bool)
    past_ascii[string_of[byte >= 0x80]] = True
    data[escapes] = byte
    keep = np.ones(len(data), bool)
    keep[escapes + 1] = keep[escapes + 2] = False
    new_offsets = (offsets - 2 * np.searchsorted(escapes, offsets)).astype(np.int32)  # 2 bytes less an escape before
    read = pa.Array.from_buffers(pa.string(), len(strings), [None, pa.py_buffer(new_offsets), pa.py_buffer(data[keep])])
    odd_strings = np.zeros(len(strings), bool)
    odd_strings[string_of[odd]] = True
    try:
        read.validate(full=True)
    except pa.ArrowInvalid:  # escapes that are not UTF-8 stay as written: decode string by string
        read = _string_array([id_in_trec(value) for value in strings.to_pylist()])
        past_ascii[:] = True
    for index in np.flatnonzero(past_ascii & ~odd_strings).tolist():  # only Python knows what is whitespace
        odd_strings[index] = trec_id(read[index].as_py()) != strings[index].as_py() != read[index].as_py()
    return read, np.flatnonzero(odd_strings)


def _utf8(strings: pa.StringArray) -> np.ndarray:
    """The bytes of `strings` (only theirs, where the array is a slice of a larger one), as numpy."""
    if len(strings) == 0:
        return np.empty(0, np.uint8)
    offsets = np.frombuffer(strings.buffers()[1], np.int32)[strings.offset : strings.offset + len(strings) + 1]
    return np.frombuffer(strings.buffers()[2], np.uint8)[offsets[0] : offsets[-1]]


def _bits_of(mask: pa.BooleanArray) -> np.ndarray:
    return _bits(mask.buffers()[1], mask.offset, len(mask)) & (
        _bits(mask.buffers()[0], mask.offset, len(mask)) if mask.buffers()[0] is not None else True
    )


def _string_array(values: list[str]) -> pa.StringArray:
    """`values` as a pyarrow array, built from its buffers (`pa.array` would import pandas)."""
    data = [value.encode("utf-8") for value in values]
    offsets = np.zeros(len(data) + 1, np.int32)
    np.cumsum([len(item) for item in data], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


def string_array(values: Iterable[str]) -> pa.StringArray:
    """`values` (a pandas index or column of strings, say) as one pyarrow array. For callers that
    have imported pandas: `pa.array` imports it."""
    array = pa.array(values, pa.string())
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array  # pandas' empty str columns


def take(strings: pa.StringArray, positions: np.ndarray) -> pa.StringArray:
    """The strings at `positions`, in that order."""
    return call_function("take", [strings, _int64(positions)])


def index_in(strings: pa.StringArray, among: pa.StringArray) -> np.ndarray:
    """The position of each of `strings` in `among` (distinct strings), -1 where it is not:
    pyarrow's hash join, a few times faster than hashing Python strings."""
    found = call_function("index_in", [strings], SetLookupOptions(among))
    positions = _numpy(found, np.int32).astype(np.int64)
    if found.null_count:
        positions[~_bits(found.buffers()[0], found.offset, len(found))] = -1
    return positions


def read_columns(
    source: Path | bytes,
    names: Sequence[str],
    kinds: Mapping[str, str],
    delimiter: str,
    skip_rows: int = 0,
    refused: str = _NOT_AN_ID,
) -> dict[str, Strings | np.ndarray] | None:
    """The columns named in `kinds` ("string" or "float") of a file (or its bytes) whose lines hold
    the fields `names`, separated by single `delimiter`s, after `skip_rows` lines; None when the
    file is anything else: another number of fields on a line, runs of separators, a number that
    is not one or is not finite, a string matching `refused` (by default an empty string, or one
    holding whitespace or a control character: `sweep.formats.lines.NOT_IN_IDS`), bytes that are not UTF-8, no line at all."""
    size = len(source) if isinstance(source, bytes) else source.stat().st_size
    try:
        table = pa_csv.read_csv(
            pa.BufferReader(source) if isinstance(source, bytes) else source,
            read_options=pa_csv.ReadOptions(
                column_names=list(names), use_threads=True, block_size=_block_size(size), skip_rows=skip_rows
            ),
            parse_options=pa_csv.ParseOptions(delimiter=delimiter, quote_char=False),  # trec_eval has no quoting
            convert_options=pa_csv.ConvertOptions(
                include_columns=list(kinds),
                # strings dictionary-encoded as they are parsed, block by block: hashing a million
                # document ids afterwards took as long again as the parse
                column_types={name: _STRING if kind == "string" else pa.float64() for name, kind in kinds.items()},
            ),
        ).unify_dictionaries()
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
        # unified, the blocks share one dictionary, in order of first appearance in the file
        chunks = table[name].chunks
        strings = Strings(np.concatenate([_numpy(chunk.indices, np.int32) for chunk in chunks]), chunks[0].dictionary)
        # an empty field is none to trec_eval, and whitespace other than the delimiter splits one
        bad = call_function("match_substring_regex", [strings.dictionary], MatchSubstringOptions(refused))
        if call_function("any", [bad]).as_py():
            return None
        columns[name] = strings
    return columns


def single_spaced(data: bytes, max_fields: int | None = None) -> bytes:
    """`data` with the fields of each line separated by one space, as `read_columns` reads them:
    runs of spaces and tabs made one space, those that begin or end a line dropped (a line of
    nothing else becomes empty, which the parser skips), a byte order mark dropped, and, with
    `max_fields`, each line's fields past that many dropped. trec_eval separates fields so. The
    bytes are rewritten by whole-array numpy operations, several times faster than a regular
    expression over them."""
    text = np.frombuffer(data.removeprefix(codecs.BOM_UTF8), np.uint8)
    n = len(text)
    blank = (text == _SPACE) | (text == _TAB)
    line_end = (text == _NEWLINE) | (text == _RETURN)
    # each run of blanks as [start, stop): where `blank` turns on, then off
    starts, stops = np.flatnonzero(np.diff(blank.view(np.int8), prepend=0, append=0)).reshape(-1, 2).T
    inside_a_line = (starts > 0) & (stops < n)
    inside_a_line &= ~line_end.take(starts - 1, mode="clip") & ~line_end.take(stops, mode="clip")
    separators = starts[inside_a_line]  # the first blank of each run between two fields
    keep = ~blank
    keep[separators] = True
    if max_fields is not None:
        line = np.cumsum(line_end, dtype=np.int32)[separators]  # each separator's line
        per_line = np.bincount(line)
        if len(per_line) and per_line.max() >= max_fields:  # some line has more fields
            ordinal = np.arange(len(line)) - np.r_[0, np.cumsum(per_line)][line]  # 0: a line's first separator
            cut = separators[ordinal == max_fields - 1]  # from here to the end of the line goes
            ends = np.flatnonzero(line_end)
            dropped = np.zeros(n + 1, np.int8)
            dropped[cut] = 1
            dropped[np.r_[ends, n][np.searchsorted(ends, cut)]] = -1
            keep &= np.cumsum(dropped[:n], dtype=np.int8) == 0
    text = text[keep]
    text[text == _TAB] = _SPACE
    return text.tobytes()


def _block_size(size: int) -> int:
    """About one block per core for a file of `size` bytes: each block's strings are hashed by its
    own thread, and unifying the blocks' dictionaries hashes each block's distinct strings again
    (pyarrow's 1 MB blocks: a million rows hashed twice)."""
    return max(size // (os.cpu_count() or 1) + 1, 1 << 20)


def _int64(values: np.ndarray) -> pa.Int64Array:
    """An int64 numpy array as a pyarrow array over the same memory (`pa.array` would import pandas)."""
    values = values.astype(np.int64, copy=False)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def _bits(bitmap: pa.Buffer, offset: int, length: int) -> np.ndarray:
    """`length` bits of a pyarrow bitmap (validity, or a boolean array's values) from bit `offset`, as numpy bools."""
    return np.unpackbits(np.frombuffer(bitmap, np.uint8), count=offset + length, bitorder="little")[offset:].view(bool)


def _numpy(array: pa.Array, dtype: type) -> np.ndarray:
    """The values of a pyarrow array of fixed-width values, viewed as numpy (what is under a null
    is undefined)."""
    return np.frombuffer(array.buffers()[1], dtype)[array.offset : array.offset + len(array)]


def trec_order(
    query: np.ndarray, score: np.ndarray, doc_ranks: Callable[[np.ndarray], np.ndarray]
) -> tuple[np.ndarray | slice, np.ndarray] | None:
    """The moves that put each query's rows together, score descending, then document id
    descending (trec_eval's order), as (rows, source): `values[rows] = values[source]` orders any
    column; None when the rows already are in that order. `query` holds codes 0..n-1;
    `doc_ranks(rows)` gives integers that order the document ids of `rows`.

    Run files are usually written in rank order, so check that first: then only runs of tied
    scores can be out of place, and only their rows move (26,000 of the benchmark's million:
    reordering whole columns cost `python -m sweep.evaluate` 10 ms of its 0.4 s)."""
    if len(query) == 0:
        return None
    same_query = query[1:] == query[:-1]
    firsts = query[np.r_[0, np.flatnonzero(~same_query) + 1]]  # the query of each stretch of one query's rows
    grouped = np.bincount(firsts).max() == 1  # not np.unique: its first call imports numpy.ma, 7 ms
    if not (grouped and np.all((score[1:] <= score[:-1]) | ~same_query)):
        return slice(None), np.lexsort((-doc_ranks(np.arange(len(query))), -score, query))
    tied = np.flatnonzero(same_query & (score[1:] == score[:-1])) + 1  # rows that tie the row before them
    if len(tied) == 0:
        return None
    in_tie = np.zeros(len(query), bool)
    in_tie[tied - 1] = in_tie[tied] = True
    rows = np.flatnonzero(in_tie)
    ties_previous = np.zeros(len(query), bool)
    ties_previous[tied] = True
    tie_group = np.cumsum(~ties_previous[rows])
    source = rows[np.lexsort((-doc_ranks(rows), tie_group))]
    return None if np.array_equal(source, rows) else (rows, source)


def repeats_within(group: np.ndarray, item: np.ndarray, n_items: int) -> bool:
    """Whether an item occurs twice in one group. numpy's default sort (vectorised where the CPU
    allows) sorts a run's million keys in about half the time of its stable one, whose runs of
    sorted keys are only a query's first few (the documents of a query come in rank order)."""
    n_items = max(n_items, 1)
    key_type = np.int32 if (int(group.max(initial=0)) + 1) * n_items <= np.iinfo(np.int32).max else np.int64
    key = group.astype(key_type) * key_type(n_items) + item  # int32 when the keys fit: half the sort's work
    key.sort()
    return bool(np.any(key[1:] == key[:-1]))


def repeated_rows(group: np.ndarray, item: np.ndarray, n_items: int) -> np.ndarray | None:
    """Which rows hold an item that an earlier row of their group holds (a mask); None when no
    item occurs twice in a group, the usual case, found by `repeats_within` alone."""
    if not repeats_within(group, item, n_items):
        return None
    key = group.astype(np.int64) * max(n_items, 1) + item
    order = np.argsort(key, kind="stable")  # equal keys stay in row order: the first is kept
    repeated = np.zeros(len(key), bool)
    repeated[order[1:][key[order[1:]] == key[order[:-1]]]] = True
    return repeated
