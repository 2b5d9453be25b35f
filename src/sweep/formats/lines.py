"""Reading user files line by line, so that every problem names the file and the line.

Files are regular files (a named pipe or a device is refused before it is opened, so nothing
hangs) of UTF-8 text: a byte that is not is an error naming the line and the byte's offset, never
a silently replaced character; a byte order mark before the first line is dropped. A key a record
does not know is an error with the nearest known one, and so is a key an object repeats
(`sweep.formats.unique_keys`). (Large files of whitespace-separated fields are read in columns:
`sweep.formats.columns`.)

Ids, the one rule for every reader and writer: an id (of a question or a document) is a string
that is not empty or blank, or an integer; it may hold spaces and any other character
(`HR Policies/Annual Leave Policy.md`). TREC files, which every run is logged as (`run.trec`),
separate their fields by whitespace, so they carry such an id percent-encoded (`%20` for a space,
`%25` for `%`: `sweep.formats.trec`), and every TREC reader here decodes it. An id is read in
Unicode NFC (`nfc`), the one form ids are compared in: `café` written as `e` and a combining
accent (NFD, as macOS writes file names) is the same id as `café` written as one character, and
a message naming both forms (`unicode_form`) says so where only the form differs. Otherwise an id
is kept exactly as written (a YAML `002` is `002`, not 2: `sweep.formats.unique_keys`).

Also here, without pandas (`python -m sweep.evaluate` reads TREC files without it): what a golden
set may hold and the warnings on its size and balance.
"""

from __future__ import annotations

import codecs
import difflib
import json
import logging
import re
import stat
import unicodedata
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

# what a TREC file's field holds only percent-encoded: whitespace and control characters (Unicode
# categories Z* and Cc), which trec_eval, pandas or Python's str.split may take for a field separator
_NOT_IN_IDS = ((0x00, 0x20), (0x7F, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F),
               (0x205F, 0x205F), (0x3000, 0x3000))  # fmt: skip
NOT_IN_IDS = re.compile("[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in _NOT_IN_IDS) + "]")
NOT_IN_IDS_RE2 = "[" + "".join(f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in _NOT_IN_IDS) + "]"  # the same, for pyarrow
_TREC_SEPARATORS = re.compile(r"[ \t]+")
_CHARACTER_NAMES = {" ": "a space", "\t": "a tab", "\n": "a line break", "\r": "a carriage return"}
_FILE_KINDS = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"))  # fmt: skip


def regular_file(path: Path, what: str = "file") -> Path:
    """`path`, when it is a regular file (or a link to one); else an error saying what it is,
    found without opening it (opening a named pipe waits for a writer; the readers read a file
    more than once)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as error:
        raise InputError(f"{path}: cannot read it ({error.strerror or error})") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{path}: is a directory, not a {what}")
    if not stat.S_ISREG(mode):
        raise InputError(f"{path}: {file_kind(mode)}, not a regular file; give a {what} saved on disk")
    return path


def file_kind(mode: int) -> str:
    """What a file whose `os.stat` mode is `mode` and that is not a regular file is, in words."""
    return next((name for test, name in _FILE_KINDS if test(mode)), "not a file")


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) for every line of a UTF-8 file, a byte order mark dropped."""
    regular_file(path)
    offset = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw, offset = raw[len(codecs.BOM_UTF8) :], len(codecs.BOM_UTF8)
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
    (whitespace-separated fields, as in TREC files). A first line that opens with `{` is JSON
    unless it does not parse and has the 4 or 6+ fields of a TREC line (a query id `{x}`)."""
    suffix = path.suffix.lower()
    if suffix in JSON_LINES_SUFFIXES:
        return "jsonl"
    if suffix in YAML_SUFFIXES:
        return "yaml"
    line = first_line(path).strip()
    if not line.startswith("{"):
        return "columns"
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return "columns" if len(trec_fields(line)) == 4 or len(trec_fields(line)) >= 6 else "jsonl"
    return "jsonl"


def trec_fields(line: str) -> list[str]:
    """The fields of a line of a TREC file, separated by runs of spaces and tabs as trec_eval
    separates them (not by the other whitespace `str.split` takes, which no id may hold)."""
    return _TREC_SEPARATORS.split(line.strip(" \t\r\n"))


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for each non-blank line of a JSON Lines file."""
    from sweep.formats.unique_keys import RepeatedKey, unique_object  # and PyYAML: TREC files need neither

    for number, line in text_lines(path):
        if line.strip():
            try:
                yield number, json.loads(line, object_pairs_hook=unique_object)
            except json.JSONDecodeError as error:
                raise InputError(f"{where(path, number)}: malformed JSON ({error.msg})") from None
            except RepeatedKey as error:
                raise InputError(f"{where(path, number)}: {error}; say each once") from None


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
    """An id given as a non-blank string or an integer, as a string in Unicode NFC (`nfc`);
    spaces and other characters kept. The first id of a file that is not in NFC is named in a
    warning, in both forms."""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
        raise InputError(f"{at}: missing or invalid {what}: {value!r}")
    written = str(value)
    normal = nfc(written)
    if normal != written:
        _warn_not_nfc(at, what, written, normal)
    return normal


def keyed_by_id(mapping: Mapping[Any, Any], at: str, what: str, holder: str) -> Iterator[tuple[str, Any]]:
    """(id, value) for each entry of a mapping whose keys are ids (`identifier`, `what`); two keys
    that are one id in NFC are an error naming both forms and the mapping (`holder`)."""
    written: dict[str, str] = {}
    for given, value in mapping.items():
        key = identifier(given, at, what)
        if written.setdefault(key, str(given)) != str(given):
            raise InputError(f"{at}: {holder} holds {same_in_nfc(written[key], str(given))}; say it once")
        yield key, value


def nfc(value: str) -> str:
    """`value` in Unicode NFC, the one form ids are compared in (an ASCII string is its own)."""
    return value if value.isascii() else unicodedata.normalize("NFC", value)


def unicode_form(value: str) -> str:
    """`value` as a message shows an id whose Unicode form matters: characters past ASCII escaped,
    so that two forms that print alike can be told apart, then its form: `'cafe\\u0301.md' (NFD)`."""
    shown = value.encode("ascii", "backslashreplace").decode("ascii")
    if unicodedata.is_normalized("NFC", value):
        form = "NFC"
    elif unicodedata.is_normalized("NFD", value):
        form = "NFD"
    else:
        form = "neither NFC nor NFD"
    return f"'{shown}' ({form})"


def same_in_nfc(first: str, second: str) -> str:
    """The words for two ids that differ only in their Unicode form."""
    return f"{unicode_form(first)} and {unicode_form(second)} are one id in Unicode NFC, the form ids are compared in"


_NOT_NFC_NAMED: set[str] = set()  # files whose first id not in NFC was named (one warning a file)


def _warn_not_nfc(at: str, what: str, written: str, normal: str) -> None:
    source, _, line = at.rpartition(":")
    source = source if source and line.isdigit() else at
    if source in _NOT_NFC_NAMED:
        return
    _NOT_NFC_NAMED.add(source)
    log.warning(
        "%s: %s %s is read as %s: ids are compared in Unicode NFC (the file's other ids in another form too, unnamed)",
        at, what, unicode_form(written), unicode_form(normal),
    )  # fmt: skip


def character_name(character: str) -> str:
    """`a space`, `a tab`, ..., or `U+00A0 (NO-BREAK SPACE)`."""
    if character in _CHARACTER_NAMES:
        return _CHARACTER_NAMES[character]
    return f"U+{ord(character):04X} ({unicodedata.name(character, 'a control character')})"


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
    """id -> line of its first appearance; a second appearance is an error naming both lines, and
    both forms where the two were written in different Unicode forms (`written`: the id as the
    line wrote it, before `nfc`)."""

    def __init__(self) -> None:
        super().__init__()
        self.written: dict[str, str] = {}  # id -> its first line's form, where given

    def add(self, key: str, path: Path, number: int, what: str, written: str | None = None) -> None:
        if key in self:
            first = self.written.get(key)
            if first is not None and written is not None and first != written:
                raise InputError(
                    f"{where(path, number)}: duplicate {what}: {same_in_nfc(first, written)} (first on line {self[key]})"
                )
            raise InputError(f"{where(path, number)}: duplicate {what} {key!r} (first on line {self[key]})")
        self[key] = number
        if written is not None:
            self.written[key] = written
