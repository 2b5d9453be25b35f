"""TREC files, read here and only here: qrels (`qid iteration docid grade`) and runs (`qid Q0 docid rank score tag`).

Each file goes to the fastest reader that takes it cleanly:
1. pyarrow's column parser (`sweep.formats.columns`), for fields separated by single spaces or
   single tabs, the common case. `qrels_columns` and `run_columns` stop here and return
   None for any other file, without importing pandas (`python -m sweep.evaluate --json` scores
   what they return with the numpy core and hands anything else to the readers below).
2. pandas' C parser, for runs of whitespace (`read_qrels`, `read_run`: what `load_golden` and
   `Run.read` read);
3. the careful reader, line by line: a run as trec_eval reads it (fields past the sixth ignored),
   or, for anything the faster readers refuse, an `InputError` naming the file, the line and the
   problem.
BEIR's `qrels/<split>.tsv` (tab-separated, a header line, no iteration field) is read by the same
qrels reader (`read_beir_qrels`); a file without the header line is read whole, with a warning.

No reader splits an id or reads a quote as anything but a character: fields are separated by
spaces and tabs only, as trec_eval separates them, and a field holding a character no id may
hold (other whitespace, a control character: `sweep.formats.lines.trec_safe`) is an error
naming the line.
"""

from __future__ import annotations

import csv
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sweep.errors import InputError, where
from sweep.formats.columns import Strings, read_columns, repeats_within, trec_order
from sweep.formats.lines import MAX_GRADE, NOT_IN_IDS, first_line, not_utf8, sniff, text_lines, trec_fields, trec_safe

if TYPE_CHECKING:
    import pandas as pd

TREC_RUN_COLUMNS = ("qid", "q0", "docid", "rank", "score", "tag")
TREC_QRELS_COLUMNS = ("qid", "iteration", "docid", "grade")
BEIR_QRELS_COLUMNS = ("qid", "docid", "grade")
GRADE = re.compile(r"-?\d{1,3}")  # a grade in a TREC file: at most 3 digits, so nothing int64 cannot hold
_PANDAS_TABLE = {"dtype": str, "keep_default_na": False, "engine": "c", "encoding": "utf-8", "quoting": csv.QUOTE_NONE}

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Qrels:
    """One row per judgment."""

    qid: Strings
    docid: Strings
    grade: np.ndarray


@dataclass(frozen=True)
class TrecRun:
    """Rows in trec_eval's order: each query's together, score descending, then docid descending."""

    qid: Strings
    docid: Strings
    score: np.ndarray


def is_columns_file(path: Path) -> bool:
    """Whether `path` is a file of whitespace-separated fields (by its extension and first line),
    as TREC qrels and runs are: the cheap test before `qrels_columns` or `run_columns` parses it."""
    return path.is_file() and sniff(path) == "columns"


def may_be_columns_file(path: Path) -> bool:
    """False where `qrels_columns` and `run_columns` surely return None (a JSONL or YAML file, not
    a file), so that a caller need not parse the other file. A first line that cannot be read is
    left to the file's reader to report."""
    try:
        return is_columns_file(path)
    except (InputError, OSError):
        return True


# ---------------------------------------------------------------- 1. in columns, without pandas


def _columns(path: Path, names: tuple[str, ...], kinds: dict[str, str]) -> dict[str, Strings | np.ndarray] | None:
    delimiter = "\t" if "\t" in first_line(path) else " "
    return read_columns(path, names, kinds, delimiter)


def qrels_columns(path: Path) -> Qrels | None:
    """TREC qrels as `read_qrels` reads them; None for another format or anything it would refuse
    or read otherwise (a bad line, a grade out of range, a document judged twice for a query)."""
    if not is_columns_file(path) or len(first_line(path).split()) != len(TREC_QRELS_COLUMNS):
        return None
    columns = _columns(path, TREC_QRELS_COLUMNS, dict.fromkeys(TREC_QRELS_COLUMNS, "string"))
    if columns is None:
        return None
    grades = columns["grade"].values  # the distinct grades: a handful
    if not all(GRADE.fullmatch(grade) and abs(int(grade)) <= MAX_GRADE for grade in grades):
        return None
    qid, docid = columns["qid"], columns["docid"]
    if repeats_within(qid.codes, docid.codes, len(docid.distinct)):
        return None
    return Qrels(qid, docid, np.array([int(grade) for grade in grades], np.int64)[columns["grade"].codes])


def _run_columns(path: Path) -> dict[str, Strings | np.ndarray] | None:
    return _columns(path, TREC_RUN_COLUMNS, {"qid": "string", "docid": "string", "score": "float"})


def run_columns(path: Path) -> TrecRun | None:
    """A TREC run as `read_run` and `Run.read` read it, in trec_eval's order; None for another
    format, a file the column reader does not take, or a document listed twice for a query
    (`Run.read` warns and keeps the first)."""
    if not is_columns_file(path):
        return None
    columns = _run_columns(path)
    if columns is None:
        return None
    qid, docid, score = columns["qid"], columns["docid"], columns["score"]
    moves = trec_order(qid.codes, score, docid.ranks)
    if moves is not None:
        rows, source = moves
        for values in (qid.codes, docid.codes, score):  # arrays read_columns made for this call alone
            values[rows] = values[source]
    if repeats_within(qid.codes, docid.codes, len(docid.distinct)):
        return None
    return TrecRun(qid, docid, score)


# ---------------------------------------------------------------- 2 and 3. qrels


def read_qrels(path: Path) -> pd.DataFrame:
    """TREC qrels as a frame of qid, docid (strings) and grade (int64), in file order; negative
    grades are kept (they mean not relevant)."""
    import pandas as pd

    qrels = qrels_columns(path)
    if qrels is not None:
        return pd.DataFrame({"qid": qrels.qid.to_numpy(), "docid": qrels.docid.to_numpy(), "grade": qrels.grade})
    return _read_qrels_table(path, r"\s+", TREC_QRELS_COLUMNS, header=None)[list(BEIR_QRELS_COLUMNS)]


def read_beir_qrels(path: Path) -> pd.DataFrame:
    """A BEIR `qrels/<split>.tsv` (`query-id corpus-id score` under a header line, tab-separated)
    as `read_qrels` gives TREC qrels. A first line whose score is an integer is a judgment, not a
    header: the file is read whole, with a warning (BEIR's own loader would drop that judgment)."""
    first = first_line(path).rstrip("\r\n").split("\t")
    headerless = GRADE.fullmatch(first[-1].strip()) is not None
    if headerless:
        log.warning(
            "%s: no header line (query-id, corpus-id, score): its first line is read as a judgment "
            "(BEIR's own loader would skip it)",
            path,
        )
    return _read_qrels_table(path, "\t", BEIR_QRELS_COLUMNS, header=None if headerless else 0)


def _read_qrels_table(path: Path, sep: str, columns: tuple[str, ...], header: int | None) -> pd.DataFrame:
    """A whitespace/tab table read by pandas' C parser; on a bad row, re-scan to name the line."""
    import pandas as pd

    try:
        frame = pd.read_csv(path, sep=sep, header=header, names=list(columns), na_values=[""], **_PANDAS_TABLE)
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: empty file") from None
    except UnicodeDecodeError:
        raise not_utf8(path) from None
    except pd.errors.ParserError:
        frame = None
    skip = 1 if header is not None else 0
    if (
        frame is None
        or frame.isna().any().any()
        or not frame["grade"].str.fullmatch(GRADE.pattern).all()
        or not _ids_are_safe(frame)
    ):
        _raise_first_bad_qrels_line(path, sep, len(columns), skip)
    if frame.empty:
        raise InputError(f"{path}: empty file (no judgments)")
    if frame["grade"].astype(np.int64).abs().max() > MAX_GRADE:
        _raise_first_bad_qrels_line(path, sep, len(columns), skip)
    return frame.astype({"grade": np.int64})


def _ids_are_safe(frame: pd.DataFrame) -> bool:
    """Whether every qid and docid of `frame` is one no id rule refuses (each distinct one checked once)."""
    return not any(NOT_IN_IDS.search(value) for column in ("qid", "docid") for value in frame[column].unique())


def _check_ids(qid: str, docid: str, at: str) -> None:
    trec_safe(qid, at, "query id")
    trec_safe(docid, at, "document id")


def _raise_first_bad_qrels_line(path: Path, sep: str, n_fields: int, skip: int) -> None:
    for number, line in text_lines(path):
        if number <= skip or not line.strip():
            continue
        fields = [f.strip(" \r\n") for f in line.split("\t")] if sep == "\t" else trec_fields(line)
        if len(fields) != n_fields:
            raise InputError(f"{where(path, number)}: expected {n_fields} fields, found {len(fields)}")
        _check_ids(fields[0], fields[-2], where(path, number))
        try:
            grade = int(fields[-1])
        except ValueError:
            raise InputError(f"{where(path, number)}: grade {fields[-1]!r} is not an integer") from None
        if abs(grade) > MAX_GRADE:
            raise InputError(f"{where(path, number)}: grade {grade} is out of range (-{MAX_GRADE} to {MAX_GRADE})")
    raise InputError(f"{path}: unreadable qrels")


# ---------------------------------------------------------------- 2 and 3. runs


def read_run(path: Path) -> pd.DataFrame:
    """A TREC run as a frame of qid, docid and score (float), in file order."""
    import pandas as pd

    columns = _run_columns(path)
    if columns is not None:
        return pd.DataFrame(
            {name: pd.Categorical.from_codes(columns[name].codes, columns[name].values) for name in ("qid", "docid")}
            | {"score": columns["score"]}
        )
    try:
        frame = pd.read_csv(
            path,
            sep=r"\s+",
            header=None,
            names=TREC_RUN_COLUMNS,
            usecols=["qid", "docid", "score", "tag"],
            dtype={"qid": str, "docid": str, "tag": str, "score": float},  # str: "007" stays "007"
            engine="c",
            encoding="utf-8",
            quoting=csv.QUOTE_NONE,  # a quote is a character of an id, as trec_eval reads it
        )
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: empty file") from None
    except ValueError:  # pandas' ParserError and UnicodeDecodeError are ValueErrors
        return _read_run_lines(path)
    if frame.empty:
        raise InputError(f"{path}: empty file")
    if frame.isna().any().any() or not np.isfinite(frame["score"]).all() or not _ids_are_safe(frame):
        return _read_run_lines(path)  # it names the line
    return frame


def _read_run_lines(path: Path) -> pd.DataFrame:
    import pandas as pd

    qids, docs, scores = [], [], []
    for number, line in text_lines(path):
        if not line.strip():
            continue
        fields = trec_fields(line)
        if len(fields) < len(TREC_RUN_COLUMNS):
            raise InputError(
                f"{where(path, number)}: expected 6 fields 'qid Q0 docid rank score tag', found {len(fields)}"
            )
        _check_ids(fields[0], fields[2], where(path, number))
        score = _number(fields[4], where(path, number))
        if not np.isfinite(score):
            raise InputError(f"{where(path, number)}: score is {fields[4]}; scores must be finite numbers")
        qids.append(fields[0])
        docs.append(fields[2])
        scores.append(score)
    if not qids:
        raise InputError(f"{path}: empty file")
    return pd.DataFrame({"qid": qids, "docid": docs, "score": scores})


def _number(text: str, at: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{at}: score {text!r} is not a number") from None
