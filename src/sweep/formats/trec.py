"""TREC files, read here and only here: qrels (`qid iteration docid grade`), BEIR's qrels and runs (`qid Q0 docid rank score tag`).

One reader per kind, in columns, without pandas (`python -m sweep.evaluate` scores what they
return with the numpy core): pyarrow's parser (`sweep.formats.columns.read_columns`) reads fields
separated by single spaces or single tabs, the common case; a file whose fields are separated by
runs of spaces and tabs, as trec_eval separates them, is rewritten so (`single_spaced`) and
parsed again. A file the parser still refuses, or whose columns break a rule below, is read
once more line by line, only to raise an `InputError` naming the first bad line and what is
wrong with it.

Rules: ids are separated by spaces and tabs only, as trec_eval separates them. An id is carried
percent-encoded (`trec_id`, which `sweep.formats.runs.Run.to_trec` writes with): `%` as `%25`,
and every character a field cannot hold (whitespace, a control character: `NOT_IN_IDS` of
`sweep.formats.lines`) as its UTF-8 bytes, `%20` for a space, `%C2%A0` for a no-break space; so
`HR Policies/Annual Leave Policy.md` is `HR%20Policies/Annual%20Leave%20Policy.md` in `run.trec`.
Reading a TREC qrels or run file, every `%` followed by two hex digits is decoded (UTF-8; a `%`
not so followed, or escapes that are not UTF-8, stay as written), so the ids read are the ids
written, spaces included. Since this tool always writes `%` as `%25`, decoding is unambiguous for
its own files; a file from another tool whose ids hold a literal `%41` is read as `A`: an escape
this tool would not have written (any but `%25` and those of whitespace and control characters,
or hex in lower case) gets one warning naming the first such id in both forms, and the fix
(write `%` as `%25`). A field holding whitespace or a control character unencoded (a no-break
space, say) is an error naming the line and the encoded form. No reader reads a quote as
anything but a character. A grade is an integer from -MAX_GRADE to MAX_GRADE (negative: not
relevant), and a document is judged at most once per query. A score is a finite number; a run
line's fields past the sixth are ignored, as trec_eval ignores them; a document a run lists twice
for a query keeps its best-ranked entry, with a warning. Ids are read in Unicode NFC, the form
every id is compared in (`sweep.formats.lines.nfc`): a file with ids in another form (NFD, as
macOS writes file names) gets one warning naming the first in both forms, and two ids that differ
only in their form are one id (a qrels file that judges it twice is an error naming both).
BEIR's `qrels/<split>.tsv` (one tab between fields, a header line, no iteration field) is read
by the same reader, its ids as written (a field is all that lies between two tabs, spaces
included, nothing decoded: BEIR's ids come from its JSON files); a file without the header line
is read whole, with a warning.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sweep.errors import InputError, where
from sweep.formats.columns import (
    ANY_FIELD,
    Strings,
    id_in_trec,
    in_nfc,
    percent_decoded,
    read_columns,
    repeated_rows,
    repeats_within,
    single_spaced,
    trec_id,
    trec_order,
)
from sweep.formats.lines import (
    MAX_GRADE,
    NOT_IN_IDS,
    character_name,
    first_line,
    nfc,
    same_in_nfc,
    sniff,
    text_lines,
    trec_fields,
    unicode_form,
)

TREC_RUN_COLUMNS = ("qid", "q0", "docid", "rank", "score", "tag")
TREC_QRELS_COLUMNS = ("qid", "iteration", "docid", "grade")
BEIR_QRELS_COLUMNS = ("qid", "docid", "grade")
INTEGER = re.compile(r"[+-]?\d+")
GRADE = re.compile(r"[+-]?0*\d{1,3}")  # at most 3 significant digits: nothing int64 cannot hold
NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")  # a score as pyarrow's parser reads one
NOT_FINITE = {"inf", "infinity", "nan"}  # what Python's float reads and no score may be

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Qrels:
    """One row per judgment, in file order."""

    qid: Strings
    docid: Strings
    grade: np.ndarray  # int64


@dataclass(frozen=True)
class TrecRun:
    """A run in columns: each query's rows together, in rank order, each document once per query.
    Read from a file, in trec_eval's order: score descending, then docid descending."""

    qid: Strings
    docid: Strings
    score: np.ndarray


@dataclass(frozen=True)
class _Layout:
    """How the lines of one kind of file hold their fields."""

    what: str  # "qrels" or "run", for messages
    names: tuple[str, ...]  # the fields of a line
    kinds: dict[str, str]  # the fields read: "string" or "float"
    tab_separated: bool = False  # one tab between fields (BEIR), else runs of spaces and tabs (TREC)
    extra_fields: bool = False  # fields past `names` ignored (a run line), else an error (a qrels line)
    shown: str = ""  # how a message shows the fields a line should hold, after their number


TREC_QRELS = _Layout("qrels", TREC_QRELS_COLUMNS, {"qid": "string", "docid": "string", "grade": "string"})
BEIR_QRELS = _Layout("qrels", BEIR_QRELS_COLUMNS, dict.fromkeys(BEIR_QRELS_COLUMNS, "string"), tab_separated=True)
TREC_RUN = _Layout(
    "run",
    TREC_RUN_COLUMNS,
    {"qid": "string", "docid": "string", "score": "float"},
    extra_fields=True,
    shown=" 'qid Q0 docid rank score tag'",
)


def is_trec_file(path: Path, n_fields: int | None = None) -> bool:
    """Whether `path` is a file of whitespace-separated fields (by its extension and first line),
    with `n_fields` on its first line when given: TREC qrels (4) or a run. False for anything
    else, a file that cannot be read included: its reader names the problem."""
    try:
        return (
            path.is_file()
            and sniff(path) == "columns"
            and (n_fields is None or len(first_line(path).split()) == n_fields)
        )
    except (InputError, OSError):
        return False


# ---------------------------------------------------------------- qrels


def read_qrels(path: Path) -> Qrels:
    """TREC qrels, in file order; negative grades are kept (they mean not relevant)."""
    return _qrels(path, TREC_QRELS, skip_lines=0)


def read_beir_qrels(path: Path) -> Qrels:
    """A BEIR `qrels/<split>.tsv` (`query-id corpus-id score` under a header line, tab-separated)
    as `read_qrels` gives TREC qrels. A first line whose score is an integer is a judgment, not a
    header: the file is read whole, with a warning (BEIR's own loader would drop that judgment)."""
    first = first_line(path).rstrip("\r\n").split("\t")
    if GRADE.fullmatch(first[-1].strip()) is None:  # the header line, after any blank ones
        return _qrels(path, BEIR_QRELS, skip_lines=next(number for number, line in text_lines(path) if line.strip()))
    log.warning(
        "%s: no header line (query-id, corpus-id, score): its first line is read as a judgment "
        "(BEIR's own loader would skip it)",
        path,
    )
    return _qrels(path, BEIR_QRELS, skip_lines=0)


def _qrels(path: Path, layout: _Layout, skip_lines: int) -> Qrels:
    columns = _read(path, layout, skip_lines)
    qid, docid, grades = columns["qid"], columns["docid"], columns["grade"]
    grades_are_good = all(_grade_problem(grade) is None for grade in grades.values)  # the distinct ones: a handful
    if not grades_are_good or repeats_within(qid.codes, docid.codes, len(docid.dictionary)):
        _raise_first_bad_line(path, layout, skip_lines)
    return Qrels(qid, docid, np.array([int(grade) for grade in grades.values], np.int64)[grades.codes])


def _grade_problem(text: str) -> str | None:
    if not INTEGER.fullmatch(text):
        return f"grade {text!r} is not an integer"
    if not GRADE.fullmatch(text) or abs(int(text)) > MAX_GRADE:
        return f"grade {text} is out of range (-{MAX_GRADE} to {MAX_GRADE})"
    return None


# ---------------------------------------------------------------- runs


def read_run(path: Path) -> TrecRun:
    """A TREC run in trec_eval's order; a document listed twice for a query keeps its
    best-ranked entry, with a warning."""
    columns = _read(path, TREC_RUN, skip_lines=0)
    qid, docid, score = columns["qid"], columns["docid"], columns["score"]
    moves = trec_order(qid.codes, score, docid.ranks)
    if moves is not None:
        rows, source = moves
        for values in (qid.codes, docid.codes, score):  # arrays read_columns made for this call alone
            values[rows] = values[source]
    repeated = repeated_rows(qid.codes, docid.codes, len(docid.dictionary))
    if repeated is None:
        return TrecRun(qid, docid, score)
    first = int(np.argmax(repeated))
    warn_repeated(str(path), qid.values[qid.codes[first]], docid.values[docid.codes[first]], int(repeated.sum()))
    return TrecRun(
        Strings(qid.codes[~repeated], qid.dictionary),
        Strings(docid.codes[~repeated], docid.dictionary),
        score[~repeated],
    )


def warn_repeated(name: str, qid: str, docid: str, n_repeats: int) -> None:
    """The one warning for a run that lists documents more than once for a query (the first named)."""
    log.warning(
        "%s: document %r listed more than once for query %r (%d repeats in all); kept its best-ranked entry",
        name,
        docid,
        qid,
        n_repeats,
    )


# ---------------------------------------------------------------- the reader and the line that stops it


def _read(path: Path, layout: _Layout, skip_lines: int) -> dict[str, Strings | np.ndarray]:
    """The columns of `layout.kinds` from the lines after the first `skip_lines`, or an InputError
    naming the first line pyarrow's parser refuses."""
    delimiter = "\t" if layout.tab_separated or "\t" in first_line(path) else " "
    refused = {"refused": ANY_FIELD} if layout.tab_separated else {}  # BEIR: a field is all between two tabs
    columns = read_columns(path, layout.names, layout.kinds, delimiter, skip_rows=skip_lines, **refused)
    if columns is None and not layout.tab_separated:
        max_fields = len(layout.names) if layout.extra_fields else None
        columns = read_columns(single_spaced(path.read_bytes(), max_fields), layout.names, layout.kinds, " ")
    if columns is None:
        _raise_first_bad_line(path, layout, skip_lines)
    return _ids_in_nfc(path, columns if layout.tab_separated else _ids_decoded(path, columns))


def _ids_decoded(path: Path, columns: dict[str, Strings | np.ndarray]) -> dict[str, Strings | np.ndarray]:
    """The query and document ids percent-decoded (module doc), with one warning naming the first
    id whose escapes this tool would not have written."""
    odd: list[tuple[str, str]] = []
    for name in ("qid", "docid"):
        columns[name], shown = percent_decoded(columns[name])
        odd += shown
    if odd:
        written, read = odd[0]
        log.warning(
            "%s: %d %s escapes this tool does not write: %r is read as %r (`%%XX` is decoded in TREC files; "
            "write a literal %% as %%25)",
            path, len(odd), "id holds" if len(odd) == 1 else "ids hold", written, read,
        )  # fmt: skip
    return columns


def _ids_in_nfc(path: Path, columns: dict[str, Strings | np.ndarray]) -> dict[str, Strings | np.ndarray]:
    """The query and document ids in Unicode NFC, with one warning when some were not."""
    moved, first = 0, None
    for name in ("qid", "docid"):
        strings, n, example = in_nfc(columns[name])
        columns[name], moved, first = strings, moved + n, first or example
    if first is not None:
        log.warning(
            "%s: %d %s not in Unicode NFC: %s is read as %s, the form ids are compared in",
            path, moved, "id is" if moved == 1 else "ids are", unicode_form(first), unicode_form(nfc(first)),
        )  # fmt: skip
    return columns


def _raise_first_bad_line(path: Path, layout: _Layout, skip_lines: int) -> None:
    """Raise the InputError that names the first line breaking a rule of the module's docstring."""
    n_fields = len(layout.names)
    judged: dict[
        tuple[str, str], tuple[int, str, str]
    ] = {}  # (qid, docid) in NFC -> the line that judged it, as written
    for number, line in text_lines(path):
        if number <= skip_lines or not line.strip():
            continue
        at = where(path, number)
        fields = _tab_fields(line) if layout.tab_separated else trec_fields(line)
        if len(fields) < n_fields or (len(fields) > n_fields and not layout.extra_fields):
            raise InputError(f"{at}: expected {n_fields} fields{layout.shown}, found {len(fields)}")
        qid, docid = fields[0], fields[layout.names.index("docid")]
        for value, what in ((qid, "query id"), (docid, "document id")):
            if not value:
                raise InputError(f"{at}: empty {what}")
            if not layout.tab_separated:
                _check_field(value, at, what)
        if not layout.tab_separated:
            qid, docid = id_in_trec(qid), id_in_trec(docid)
        if layout.what == "run":
            _check_score(fields[layout.names.index("score")], at)
            continue
        problem = _grade_problem(fields[-1])
        if problem is not None:
            raise InputError(f"{at}: {problem}")
        first, first_qid, first_docid = judged.setdefault((nfc(qid), nfc(docid)), (number, qid, docid))
        if first != number:
            forms = [same_in_nfc(a, b) for a, b in ((first_qid, qid), (first_docid, docid)) if a != b]
            also = f" ({'; '.join(forms)})" if forms else ""
            raise InputError(
                f"{at}: document {nfc(docid)!r} is judged twice for query {nfc(qid)!r} (first on line {first}){also}"
            )
    if not judged and layout.what == "qrels":
        raise InputError(f"{path}: empty file (no judgments)")
    raise InputError(f"{path}: unreadable {layout.what} file")


def _check_field(value: str, at: str, what: str) -> None:
    """An error naming a field that holds whitespace or a control character unencoded, and the field encoded."""
    character = NOT_IN_IDS.search(value)
    if character is not None:
        raise InputError(
            f"{at}: {what} {value!r} contains {character_name(character.group())}, which a TREC file carries "
            f"percent-encoded: write {trec_id(value)!r}"
        )


def _tab_fields(line: str) -> list[str]:
    """The fields of a line of a BEIR qrels file: one tab between two (a space is part of a field)."""
    return line.rstrip("\r\n").split("\t")


def _check_score(text: str, at: str) -> None:
    if NUMBER.fullmatch(text) and math.isfinite(float(text)):
        return
    if NUMBER.fullmatch(text) or text.lstrip("+-").lower() in NOT_FINITE:  # 1e999 is inf
        raise InputError(f"{at}: score is {text}; scores must be finite numbers")
    raise InputError(f"{at}: score {text!r} is not a number")
