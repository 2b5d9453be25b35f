"""Golden-set readers, one per format: JSON Lines, YAML, TREC qrels, a BEIR folder and Chroma's chunking benchmark.

Each returns the golden set and, where the format has them, the line of each question (for error
messages). Every problem raises `InputError` naming the file, the line where there is one, and
the problem. `sweep.formats.golden.load_golden` picks the reader.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from sweep.errors import InputError, where
from sweep.formats.evidence import Span, evidence_item, parse_evidence
from sweep.formats.golden_set import GoldenSet, Question
from sweep.formats.lines import (
    MAX_GRADE,
    UNTYPED,
    FirstSeen,
    check_keys,
    identifier,
    json_lines,
    keyed_by_id,
    not_utf8,
)
from sweep.formats.provenance import JUDGMENT_KEYS, SOURCES, STATUSES, Provenance, choice, provenance
from sweep.formats.trec import Qrels, read_beir_qrels, read_qrels
from sweep.formats.unique_keys import UniqueKeyLoader, ids_as_written

_QUESTION_KEYS = {
    "id", "question", "type", "source", "status", "by", "at", "relevant", "evidence", "filters", "tags", "metadata",
}  # fmt: skip
CHUNKING_EVAL_QUESTIONS = "questions_df.csv"  # Chroma's chunking benchmark: this file + corpora/*.md

# ---------------------------------------------------------------- JSONL and YAML


def read_jsonl(path: Path) -> tuple[GoldenSet, dict[str, int]]:
    return questions_from_records(path, json_lines(path))


def read_yaml(path: Path) -> tuple[GoldenSet, dict[str, int]]:
    try:
        loader = UniqueKeyLoader(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise not_utf8(path) from None
    try:
        root = loader.get_single_node()
        if isinstance(root, yaml.MappingNode):  # {questions: [...]}
            root = next((v for k, v in root.value if k.value == "questions"), None)
        if not isinstance(root, yaml.SequenceNode):
            raise InputError(f"{path}: expected a list of questions (or a 'questions:' list)")
        for node in root.value:
            ids_as_written(node)  # `id: 002` is the id '002', not 2 (`sweep.formats.unique_keys`)
        records = [(node.start_mark.line + 1, loader.construct_object(node, deep=True)) for node in root.value]
    except yaml.MarkedYAMLError as error:
        line = error.problem_mark.line + 1 if error.problem_mark else None
        raise InputError(f"{where(path, line)}: malformed YAML ({error.problem})") from None
    finally:
        loader.dispose()
    return questions_from_records(path, records)


def questions_from_records(path: Path, records: Iterable[tuple[int, Any]]) -> tuple[GoldenSet, dict[str, int]]:
    questions: list[Question] = []
    lines = FirstSeen()
    for number, record in records:
        question = _parse_question(record, where(path, number))
        lines.add(question.id, path, number, "question id", str(record.get("id")))
        questions.append(question)
    if not questions:
        raise InputError(f"{path}: empty file (no questions)")
    return GoldenSet(tuple(questions), source=str(path)), lines


def _parse_question(record: Any, at: str) -> Question:
    if not isinstance(record, dict):
        raise InputError(f"{at}: expected an object with 'id', 'question' and 'relevant', got {type(record).__name__}")
    qid = identifier(record.get("id"), at, "'id'")
    check_keys(record, _QUESTION_KEYS, at, f"question {qid!r}")
    for key, expected in (
        ("relevant", "a mapping of document to grade or a list of documents ({} for an unanswerable question)"),
        ("filters", "a mapping of field to value (or leave the key out)"),
        ("tags", "a list of strings (or leave the key out)"),
        ("metadata", "a mapping (or leave the key out)"),
    ):
        if key in record and record[key] is None:
            raise InputError(f"{at}: question {qid!r} has {key}: null; expected {expected}")
    text = record.get("question")
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{at}: question {qid!r} has no 'question' text")
    if "relevant" not in record:
        raise InputError(f"{at}: question {qid!r} has no 'relevant' (use {{}} for an unanswerable question)")
    qtype = record.get("type", UNTYPED)
    if not isinstance(qtype, str) or not qtype:
        raise InputError(f"{at}: question {qid!r} has 'type' {qtype!r}; expected a non-empty string")
    filters = record.get("filters", {})
    if not isinstance(filters, dict):
        raise InputError(f"{at}: question {qid!r} has 'filters' that is not a mapping of field to value")
    tags = record.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InputError(f"{at}: question {qid!r} has 'tags' that is not a list of strings")
    metadata = record.get("metadata", {})
    if not isinstance(metadata, dict):
        raise InputError(f"{at}: question {qid!r} has 'metadata' that is not a mapping")
    relevant, graded_by = _relevance(record["relevant"], at, qid)
    return Question(
        id=qid,
        question=text,
        relevant=relevant,
        type=qtype,
        filters=filters,
        tags=tuple(tags),
        metadata=metadata,
        evidence=parse_evidence(record.get("evidence", {}), relevant, at, qid),
        source=choice(record, "source", SOURCES, f"{at}: question {qid!r}"),
        status=choice(record, "status", STATUSES, f"{at}: question {qid!r}"),
        provenance=graded_by,
        origin=provenance(record, f"{at}: question {qid!r}"),
    )


def _relevance(value: Any, at: str, qid: str) -> tuple[dict[str, int], dict[str, Provenance]]:
    """Grades by document, and who gave them where a judgment says (`{"grade", "by", "at"}`)."""
    if isinstance(value, list):  # a list of ids means grade 1 each
        value = {identifier(doc, at, "relevant document id"): 1 for doc in value}
    if not isinstance(value, dict):
        raise InputError(f"{at}: question {qid!r} has 'relevant' of type {type(value).__name__}; expected a mapping")
    relevant: dict[str, int] = {}
    graded_by: dict[str, Provenance] = {}
    for doc, grade in keyed_by_id(value, at, "relevant document id", f"question {qid!r}: 'relevant'"):
        if isinstance(grade, dict):  # a judgment with its provenance
            judgment = f"{at}: question {qid!r}: judgment of {doc!r}"
            check_keys(grade, JUDGMENT_KEYS, at, f"question {qid!r}: judgment of {doc!r}")
            if "grade" not in grade:
                raise InputError(f"{judgment} has no 'grade'")
            given = provenance(grade, judgment)
            if given is not None:
                graded_by[doc] = given
            grade = grade["grade"]
        whole = isinstance(grade, int) or isinstance(grade, float) and grade.is_integer()  # 2.0 is 2; inf, nan are not
        if isinstance(grade, bool) or not whole:
            raise InputError(f"{at}: question {qid!r}: grade of {doc!r} is {grade!r}; expected an integer")
        if not 0 <= grade <= MAX_GRADE:
            raise InputError(f"{at}: question {qid!r}: grade of {doc!r} is {grade}; grades go from 0 to {MAX_GRADE}")
        relevant[doc] = int(grade)
    return relevant, graded_by


# ---------------------------------------------------------------- TREC qrels and BEIR


def read_trec_qrels(path: Path) -> tuple[GoldenSet, dict[str, int]]:
    """`qid iteration docid grade`, whitespace separated; negative grades mean not relevant."""
    return _from_judgments(path, read_qrels(path)), {}


def _from_judgments(path: Path, qrels: Qrels) -> GoldenSet:
    """One question per query of `qrels`, in qid order, its judgments in file order."""
    ranks = qrels.qid.sorted_positions()[qrels.qid.codes]
    rows = np.argsort(ranks, kind="stable")
    qids, docids, grades = qrels.qid.to_numpy()[rows], qrels.docid.to_numpy()[rows], qrels.grade[rows]
    starts = np.flatnonzero(np.r_[True, np.diff(ranks[rows]) != 0])
    groups = zip(qids[starts], np.split(docids, starts[1:]), np.split(grades, starts[1:]))
    questions = tuple(
        Question(id=qid, question="", relevant=dict(zip(docs.tolist(), grades.tolist())))
        for qid, docs, grades in groups
    )
    golden = GoldenSet(questions, source=str(path))
    # prime the cache: the same rows, without a rebuild
    judgments = pd.DataFrame({"qid": qids, "docid": docids, "grade": grades})
    golden.__dict__["judgments"] = judgments.astype({"qid": object, "docid": object})
    return golden


def read_beir(folder: Path, split: str, corpus_ids: Collection[str] | None) -> tuple[GoldenSet, Collection[str]]:
    """`corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`; only queries in the split's qrels."""
    qrels_path = folder / "qrels" / f"{split}.tsv"
    for required in (folder / "queries.jsonl", qrels_path):
        if not required.is_file():
            raise InputError(f"{required}: missing (a BEIR folder has corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    judged = _from_judgments(qrels_path, read_beir_qrels(qrels_path))
    queries = folder / "queries.jsonl"
    texts: dict[str, tuple[str, dict]] = {}
    for number, record in json_lines(queries):
        record = _object(record, where(queries, number))
        texts[identifier(record.get("_id"), where(queries, number), "'_id'")] = (
            record.get("text", ""),
            record.get("metadata") or {},
        )
    questions = []
    for q in judged:
        if q.id not in texts:
            raise InputError(f"{qrels_path}: query {q.id!r} is not in {folder / 'queries.jsonl'}")
        text, metadata = texts[q.id]
        qtype = metadata.get("type", UNTYPED) if isinstance(metadata, dict) else UNTYPED
        questions.append(Question(id=q.id, question=text, relevant=q.relevant, type=str(qtype), metadata=metadata))
    if corpus_ids is None and (folder / "corpus.jsonl").is_file():
        corpus_ids = _beir_corpus_ids(folder / "corpus.jsonl")
    return GoldenSet(tuple(questions), source=str(qrels_path)), corpus_ids


def _beir_corpus_ids(path: Path) -> set[str]:
    return {
        identifier(_object(record, where(path, number)).get("_id"), where(path, number), "'_id'")
        for number, record in json_lines(path)
    }


def _object(record: Any, at: str) -> dict:
    if not isinstance(record, dict):
        raise InputError(f"{at}: expected a JSON object")
    return record


# ---------------------------------------------------------------- Chroma's chunking benchmark


def read_chunking_eval(path: Path) -> tuple[GoldenSet, dict[str, int]]:
    """`questions_df.csv` (columns question, references, corpus_id): question ids are the 0-based
    row numbers, the type is the corpus, and every reference `{"content", "start_index",
    "end_index"}` is a span (with its text) of the corpus document whose id is `corpus_id`."""
    questions, lines = [], {}
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            missing = {"question", "references", "corpus_id"}.difference(reader.fieldnames or ())
            if missing:
                raise InputError(f"{where(path, 1)}: missing column(s) {', '.join(sorted(missing))}")
            first_line = reader.line_num + 1
            for row_number, row in enumerate(reader):
                at = where(path, first_line)
                qid, corpus_id = str(row_number), identifier(row["corpus_id"], at, "corpus_id")
                spans = tuple(_reference(item, at) for item in _json_list(row["references"], at))
                if not (row["question"] or "").strip():
                    raise InputError(f"{at}: row {qid} has no question")
                questions.append(
                    Question(qid, row["question"], {corpus_id: 1}, type=corpus_id, evidence={corpus_id: spans})
                )
                lines[qid], first_line = first_line, reader.line_num + 1
    except UnicodeDecodeError:
        raise not_utf8(path) from None
    except csv.Error as error:
        raise InputError(f"{where(path, reader.line_num)}: malformed CSV ({error})") from None
    if not questions:
        raise InputError(f"{path}: no questions")
    return GoldenSet(tuple(questions), source=str(path)), lines


def _json_list(text: str | None, at: str) -> list:
    try:
        value = json.loads(text or "")
    except json.JSONDecodeError as error:
        raise InputError(f"{at}: references are not JSON ({error.msg})") from None
    if not isinstance(value, list) or not value:
        raise InputError(f"{at}: references must be a non-empty JSON list")
    return value


def _reference(item: Any, at: str) -> Span:
    if not isinstance(item, dict) or not {"content", "start_index", "end_index"} <= item.keys():
        raise InputError(f"{at}: a reference must be an object with content, start_index and end_index")
    span = {"start": item["start_index"], "end": item["end_index"], "text": item["content"]}
    return evidence_item(span, at, "reference")
