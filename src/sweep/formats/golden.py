"""Golden sets: questions with graded relevance labels.

Reads the formats DESIGN.md names (JSON Lines, YAML, a BEIR folder), TREC qrels
(`qid 0 docid grade`) and Chroma's chunking benchmark (a folder with `questions_df.csv`),
validates them, and exposes the judgments as a table for the metrics. Errors raise
`InputError` with `file:line: problem`; size and balance problems are only warnings.

Evidence: a question may say, per relevant document, which text answers it, as verbatim
excerpts and/or character spans of the document's `content` (what is chunked):

    "evidence": {"hr-leave-policy": ["New hires get 25 days", {"start": 120, "end": 164}]}

Given the corpus, the loader resolves every excerpt to its span. An excerpt is looked up
verbatim first, then with any run of whitespace matching any other (a line break in the
document where the label has a space); it must occur exactly once, so a label always means
one place (lengthen it, or give a span, when it repeats). A span may carry `"text"`, which
must equal the document's characters there. Spans of one document are merged, so evidence
is a set of characters per document; chunk relevance follows from it for any chunking.

`save_golden` writes a set back as JSON Lines, checked as the loader reads it, atomically and
with a backup (`sweep.label` saves every change so).
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from sweep.errors import InputError, where
from sweep.formats.corpus import Corpus
from sweep.formats.files import write_text_atomically
from sweep.formats.records import (
    GRADE,
    JSON_LINES_SUFFIXES,
    MAX_GRADE,
    TREC_QRELS_COLUMNS,
    UNTYPED,
    FirstSeen,
    check_keys,
    first_line,
    identifier,
    json_lines,
    not_utf8,
    sniff,
    text_lines,
    warn_if_unbalanced,
)
from sweep.formats.records import RECOMMENDED_SIZE as RECOMMENDED_SIZE  # imported from here too (sweep.label)
from sweep.formats.records import RECOMMENDED_UNANSWERABLE_SHARE as RECOMMENDED_UNANSWERABLE_SHARE

_QUESTION_KEYS = {"id", "question", "type", "relevant", "evidence", "filters", "tags", "metadata"}
_SPAN_KEYS = ("start", "end", "text")
CHUNKING_EVAL_QUESTIONS = "questions_df.csv"  # Chroma's chunking benchmark: this file + corpora/*.md


@dataclass(frozen=True)
class Span:
    """Characters [start, end) of a document's content; `text`, when given, must be those characters."""

    start: int
    end: int
    text: str | None = None

    def __len__(self) -> int:
        return self.end - self.start


Evidence = Mapping[str, tuple["Span | str", ...]]  # document id -> spans and (until resolved) excerpts


@dataclass(frozen=True)
class Question:
    """One golden question. `relevant` maps document id to grade (>= 1 relevant, 0 judged
    not relevant; TREC qrels may also carry negative grades, which count as not relevant)."""

    id: str
    question: str
    relevant: Mapping[str, int]
    type: str = UNTYPED
    filters: Mapping[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    evidence: Evidence = field(default_factory=dict)  # resolved: merged, sorted spans per document

    @property
    def answerable(self) -> bool:
        """Unanswerable questions have no document with grade >= 1."""
        return any(grade >= 1 for grade in self.relevant.values())

    @property
    def evidence_chars(self) -> int:
        """How many characters of evidence the question has (resolved spans)."""
        return sum(len(span) for spans in self.evidence.values() for span in spans)


@dataclass(frozen=True)
class GoldenSet:
    questions: tuple[Question, ...]
    source: str = "<memory>"

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for q in self.questions:
            if q.id in seen:
                raise InputError(f"{self.source}: duplicate question id {q.id!r}")
            seen.add(q.id)

    def __len__(self) -> int:
        return len(self.questions)

    def __iter__(self) -> Iterator[Question]:
        return iter(self.questions)

    @cached_property
    def by_id(self) -> dict[str, Question]:
        return {q.id: q for q in self.questions}

    @cached_property
    def ids(self) -> pd.Index:
        return pd.Index([q.id for q in self.questions], dtype=object, name="qid")

    @cached_property
    def judgments(self) -> pd.DataFrame:
        """One row per judged (question, document): columns qid, docid, grade."""
        rows = [(q.id, doc, grade) for q in self.questions for doc, grade in q.relevant.items()]
        frame = pd.DataFrame(rows, columns=["qid", "docid", "grade"])
        return frame.astype({"qid": object, "docid": object, "grade": np.int64})

    @cached_property
    def questions_frame(self) -> pd.DataFrame:
        """Question-level facts indexed by qid: type, answerable, question text."""
        return pd.DataFrame(
            {
                "type": [q.type for q in self.questions],
                "answerable": [q.answerable for q in self.questions],
                "question": [q.question for q in self.questions],
            },
            index=self.ids,
        )

    def stats(self) -> dict[str, Any]:
        """Counts per type, answerable vs unanswerable, and labels per question."""
        relevant_counts = np.array([sum(g >= 1 for g in q.relevant.values()) for q in self])
        answerable = relevant_counts > 0
        per_type: dict[str, dict[str, int]] = {}
        for q, has_answer in zip(self.questions, answerable):
            counts = per_type.setdefault(q.type, {"questions": 0, "answerable": 0, "unanswerable": 0})
            counts["questions"] += 1
            counts["answerable" if has_answer else "unanswerable"] += 1
        labelled = relevant_counts[answerable]
        return {
            "questions": len(self),
            "answerable": int(answerable.sum()),
            "unanswerable": int((~answerable).sum()),
            "unanswerable_share": float((~answerable).mean()) if len(self) else 0.0,
            "with_filters": sum(bool(q.filters) for q in self),
            "with_evidence": self.with_evidence,
            "per_type": dict(sorted(per_type.items())),
            "relevant_per_question": {
                "mean": float(labelled.mean()) if labelled.size else 0.0,
                "min": int(labelled.min()) if labelled.size else 0,
                "max": int(labelled.max()) if labelled.size else 0,
            },
            "judgments": int(sum(len(q.relevant) for q in self)),
        }

    @cached_property
    def with_evidence(self) -> int:
        return sum(bool(q.evidence) for q in self.questions)

    def check_corpus(self, corpus_ids: Collection[str], lines: Mapping[str, int] | None = None) -> None:
        """Fail on the first relevant document id that the corpus does not have."""
        known = corpus_ids if isinstance(corpus_ids, (set, frozenset, dict)) else set(corpus_ids)
        for q in self.questions:
            for doc in q.relevant:
                if doc not in known:
                    line = (lines or {}).get(q.id)
                    raise InputError(
                        f"{where(self.source, line)}: question {q.id!r} labels document {doc!r}, "
                        "which is not in the corpus"
                    )

    def warn_if_unbalanced(self) -> None:
        warn_if_unbalanced(self.source, len(self), sum(not q.answerable for q in self.questions))


def doc_grades(labels: Mapping[str, int] | Iterable[tuple[str, int]]) -> str:
    """`doc:grade, doc:grade` for labels given as {doc: grade} or as (doc, grade) pairs."""
    pairs = labels.items() if isinstance(labels, Mapping) else labels
    return ", ".join(f"{doc}:{grade}" for doc, grade in pairs)


def evidence_spans(evidence: Evidence) -> str:
    """`doc:start-end+start-end, doc:...` (excerpts not yet resolved are quoted)."""
    return ", ".join(
        f"{doc}:" + "+".join(f"{s.start}-{s.end}" if isinstance(s, Span) else repr(s) for s in spans)
        for doc, spans in evidence.items()
    )


def load_golden(
    path: str | Path,
    corpus: Corpus | None = None,
    *,
    split: str = "test",
    warn: bool = True,
) -> GoldenSet:
    """Read a golden set from JSONL, YAML, TREC qrels, a BEIR folder or Chroma's chunking
    benchmark folder (by extension or content).

    `corpus`, when given, must contain every relevant document, and resolves the evidence
    excerpts to spans (a BEIR folder supplies its own document ids)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    lines: dict[str, int] = {}
    corpus_ids: Collection[str] | None = corpus.by_id if corpus is not None else None
    if path.is_dir() and (path / CHUNKING_EVAL_QUESTIONS).is_file():
        golden, lines = _read_chunking_eval(path / CHUNKING_EVAL_QUESTIONS)
    elif path.is_dir():
        golden, corpus_ids = _read_beir(path, split, corpus_ids)
    else:
        reader = {"jsonl": _read_jsonl, "yaml": _read_yaml, "qrels": _read_trec_qrels}[_sniff_format(path)]
        golden, lines = reader(path)
    if corpus_ids is not None:
        golden.check_corpus(corpus_ids, lines)
    if corpus is not None:
        golden = resolve_evidence(golden, corpus, lines)
    if warn:
        golden.warn_if_unbalanced()
    return golden


def _sniff_format(path: Path) -> str:
    kind = sniff(path)
    if kind != "columns":
        return kind
    n_fields = len(first_line(path).split())
    if n_fields == 4:
        return "qrels"
    raise InputError(
        f"{path}: unknown golden-set format (expected .jsonl, .yaml, a BEIR folder or TREC qrels "
        f"'qid 0 docid grade'; line 1 has {n_fields} fields)"
    )


# ---------------------------------------------------------------- JSONL and YAML


def _read_jsonl(path: Path) -> tuple[GoldenSet, dict[str, int]]:
    return _build(path, json_lines(path))


def _read_yaml(path: Path) -> tuple[GoldenSet, dict[str, int]]:
    try:
        loader = yaml.SafeLoader(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise not_utf8(path) from None
    try:
        root = loader.get_single_node()
        if isinstance(root, yaml.MappingNode):  # {questions: [...]}
            root = next((v for k, v in root.value if k.value == "questions"), None)
        if not isinstance(root, yaml.SequenceNode):
            raise InputError(f"{path}: expected a list of questions (or a 'questions:' list)")
        records = [(node.start_mark.line + 1, loader.construct_object(node, deep=True)) for node in root.value]
    except yaml.MarkedYAMLError as error:
        line = error.problem_mark.line + 1 if error.problem_mark else None
        raise InputError(f"{where(path, line)}: malformed YAML ({error.problem})") from None
    finally:
        loader.dispose()
    return _build(path, records)


def _build(path: Path, records: Iterable[tuple[int, Any]]) -> tuple[GoldenSet, dict[str, int]]:
    questions: list[Question] = []
    lines = FirstSeen()
    for number, record in records:
        question = _parse_question(record, where(path, number))
        lines.add(question.id, path, number, "question id")
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
    relevant = _relevance(record["relevant"], at, qid)
    return Question(
        id=qid,
        question=text,
        relevant=relevant,
        type=qtype,
        filters=filters,
        tags=tuple(tags),
        metadata=metadata,
        evidence=_evidence(record.get("evidence", {}), relevant, at, qid),
    )


def _evidence(value: Any, relevant: Mapping[str, int], at: str, qid: str) -> dict[str, tuple[Span | str, ...]]:
    """`{doc: [excerpt or {"start", "end"[, "text"]}, ...]}`; a lone excerpt or span needs no list."""
    if not isinstance(value, dict):
        raise InputError(f"{at}: question {qid!r} has 'evidence' that is not a mapping of document to excerpts")
    evidence: dict[str, tuple[Span | str, ...]] = {}
    for doc, items in value.items():
        doc = identifier(doc, at, "evidence document id")
        if relevant.get(doc, 0) < 1:
            raise InputError(
                f"{at}: question {qid!r} has evidence in {doc!r}, which its 'relevant' does not mark relevant (grade >= 1)"
            )
        items = items if isinstance(items, list) else [items]
        if not items:
            raise InputError(f"{at}: question {qid!r}: evidence for {doc!r} is an empty list")
        evidence[doc] = tuple(_evidence_item(item, at, f"question {qid!r}: evidence for {doc!r}") for item in items)
    return evidence


def _evidence_item(item: Any, at: str, what: str) -> Span | str:
    if isinstance(item, str):
        if not item.strip():
            raise InputError(f"{at}: {what} has an empty excerpt")
        return item
    if not isinstance(item, dict):
        raise InputError(f"{at}: {what}: {item!r} is neither an excerpt (string) nor a span {{'start', 'end'}}")
    check_keys(item, _SPAN_KEYS, at, what)
    start, end, text = item.get("start"), item.get("end"), item.get("text")
    for name, offset in (("start", start), ("end", end)):
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InputError(f"{at}: {what}: span {name} is {offset!r}; expected a character offset (integer >= 0)")
    if start >= end:
        raise InputError(f"{at}: {what}: span start {start} is not before end {end}")
    if text is not None and not isinstance(text, str):
        raise InputError(f"{at}: {what}: span text is {type(text).__name__}; expected a string")
    return Span(start, end, text)


def resolve_evidence(golden: GoldenSet, corpus: Corpus, lines: Mapping[str, int] | None = None) -> GoldenSet:
    """Every excerpt found in its document and every span checked against it; spans merged."""
    questions = []
    for q in golden:
        if not q.evidence:
            questions.append(q)
            continue
        at = where(golden.source, (lines or {}).get(q.id))
        resolved = {}
        for doc, items in q.evidence.items():
            content = corpus.by_id[doc].content
            spans = [_locate(item, content, at, f"question {q.id!r}: evidence for {doc!r}") for item in items]
            resolved[doc] = merge_spans(spans)
        questions.append(replace(q, evidence=resolved))
    return GoldenSet(tuple(questions), source=golden.source)


def _locate(item: Span | str, content: str, at: str, what: str) -> Span:
    if isinstance(item, Span):
        if item.end > len(content):
            raise InputError(
                f"{at}: {what}: span {item.start}-{item.end} ends after the document ({len(content)} characters)"
            )
        if item.text is not None and content[item.start : item.end] != item.text:
            raise InputError(
                f"{at}: {what}: span {item.start}-{item.end} is {_excerpt(content[item.start : item.end])} "
                f"in the document, not {_excerpt(item.text)}"
            )
        return Span(item.start, item.end)
    found = _occurrences(content, item)
    if not found:
        raise InputError(f"{at}: {what}: excerpt {_excerpt(item)} is not in the document (even ignoring whitespace)")
    if len(found) > 1:
        starts = ", ".join(str(start) for start, _ in found[:5])
        raise InputError(
            f"{at}: {what}: excerpt {_excerpt(item)} occurs {len(found)} times in the document "
            f"(at characters {starts}); lengthen it or give a span {{'start', 'end'}}"
        )
    return Span(*found[0])


def _occurrences(content: str, excerpt: str) -> list[tuple[int, int]]:
    """Where `excerpt` occurs verbatim, or else with whitespace runs matching any whitespace run."""
    exact, start = [], content.find(excerpt)
    while start >= 0:
        exact.append((start, start + len(excerpt)))
        start = content.find(excerpt, start + 1)
    if exact:
        return exact
    pattern = r"\s+".join(re.escape(word) for word in excerpt.split())
    return [match.span() for match in re.finditer(pattern, content)]


def _excerpt(text: str, limit: int = 60) -> str:
    """The start of a (possibly long) excerpt, quoted, for an error message."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def merge_spans(spans: Iterable[Span]) -> tuple[Span, ...]:
    """Sorted spans with overlapping and touching ones joined."""
    merged: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, s.end)):
        if merged and span.start <= merged[-1].end:
            merged[-1] = Span(merged[-1].start, max(merged[-1].end, span.end))
        else:
            merged.append(Span(span.start, span.end))
    return tuple(merged)


def _relevance(value: Any, at: str, qid: str) -> dict[str, int]:
    if isinstance(value, list):  # a list of ids means grade 1 each
        value = {identifier(doc, at, "relevant document id"): 1 for doc in value}
    if not isinstance(value, dict):
        raise InputError(f"{at}: question {qid!r} has 'relevant' of type {type(value).__name__}; expected a mapping")
    relevant: dict[str, int] = {}
    for doc, grade in value.items():
        doc = identifier(doc, at, "relevant document id")
        whole = isinstance(grade, int) or isinstance(grade, float) and grade.is_integer()  # 2.0 is 2; inf, nan are not
        if isinstance(grade, bool) or not whole:
            raise InputError(f"{at}: question {qid!r}: grade of {doc!r} is {grade!r}; expected an integer")
        if not 0 <= grade <= MAX_GRADE:
            raise InputError(f"{at}: question {qid!r}: grade of {doc!r} is {grade}; grades go from 0 to {MAX_GRADE}")
        relevant[doc] = int(grade)
    return relevant


# ---------------------------------------------------------------- TREC qrels and BEIR


def _read_trec_qrels(path: Path) -> tuple[GoldenSet, dict[str, int]]:
    """`qid iteration docid grade`, whitespace separated; negative grades mean not relevant."""
    frame = _read_table(path, sep=r"\s+", columns=list(TREC_QRELS_COLUMNS), header=None)
    return _from_judgments(path, frame[["qid", "docid", "grade"]]), {}


def _read_table(path: Path, sep: str, columns: list[str], header: int | None) -> pd.DataFrame:
    """A whitespace/tab table read by pandas' C parser; on a bad row, re-scan to name the line."""
    try:
        frame = pd.read_csv(
            path,
            sep=sep,
            header=header,
            names=columns,
            dtype=str,
            keep_default_na=False,
            na_values=[""],
            engine="c",
            encoding="utf-8",
        )
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: empty file") from None
    except UnicodeDecodeError:
        raise not_utf8(path) from None
    except pd.errors.ParserError:
        frame = None
    # at most 3 digits: a grade within +-MAX_GRADE, and nothing int64 cannot hold
    if frame is None or frame.isna().any().any() or not frame["grade"].str.fullmatch(GRADE.pattern).all():
        _raise_first_bad_row(path, sep, len(columns), skip=1 if header is not None else 0)
    if frame.empty:
        raise InputError(f"{path}: empty file (no judgments)")
    if frame["grade"].astype(np.int64).abs().max() > MAX_GRADE:
        _raise_first_bad_row(path, sep, len(columns), skip=1 if header is not None else 0)
    return frame.astype({"grade": np.int64})


def _raise_first_bad_row(path: Path, sep: str, n_fields: int, skip: int) -> None:
    for number, line in text_lines(path):
        if number <= skip or not line.strip():
            continue
        fields = line.split("\t") if sep == "\t" else line.split()
        fields = [f.strip() for f in fields]
        if len(fields) != n_fields:
            raise InputError(f"{where(path, number)}: expected {n_fields} fields, found {len(fields)}")
        try:
            grade = int(fields[-1])
        except ValueError:
            raise InputError(f"{where(path, number)}: grade {fields[-1]!r} is not an integer") from None
        if abs(grade) > MAX_GRADE:
            raise InputError(f"{where(path, number)}: grade {grade} is out of range (-{MAX_GRADE} to {MAX_GRADE})")
    raise InputError(f"{path}: unreadable qrels")


def _from_judgments(path: Path, frame: pd.DataFrame) -> GoldenSet:
    duplicated = frame.duplicated(["qid", "docid"])
    if duplicated.any():
        row = frame[duplicated].iloc[0]
        raise InputError(f"{path}: document {row.docid!r} is judged twice for query {row.qid!r}")
    frame = frame.sort_values("qid", kind="stable")
    qids = frame["qid"].to_numpy()
    starts = np.flatnonzero(np.r_[True, qids[1:] != qids[:-1]])
    groups = zip(
        qids[starts],
        np.split(frame["docid"].to_numpy(), starts[1:]),
        np.split(frame["grade"].to_numpy(), starts[1:]),
    )
    questions = tuple(
        Question(id=qid, question="", relevant=dict(zip(docs.tolist(), grades.tolist())))
        for qid, docs, grades in groups
    )
    golden = GoldenSet(questions, source=str(path))
    golden.__dict__["judgments"] = frame.reset_index(drop=True)  # prime the cache: same rows, no rebuild
    return golden


def _read_beir(folder: Path, split: str, corpus_ids: Collection[str] | None) -> tuple[GoldenSet, Collection[str]]:
    """`corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`; only queries in the split's qrels."""
    qrels_path = folder / "qrels" / f"{split}.tsv"
    for required in (folder / "queries.jsonl", qrels_path):
        if not required.is_file():
            raise InputError(f"{required}: missing (a BEIR folder has corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    judged = _from_judgments(qrels_path, _read_table(qrels_path, "\t", ["qid", "docid", "grade"], header=0))
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


def _read_chunking_eval(path: Path) -> tuple[GoldenSet, dict[str, int]]:
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
    return _evidence_item(span, at, "reference")


# ---------------------------------------------------------------- writing JSON Lines (sweep.label)


def question_record(question: Question) -> dict[str, Any]:
    """`question` as a JSON Lines record that the loader reads back to an equal question; keys
    holding their default (type `untyped`, no filters, tags, metadata or evidence) are left out.
    Evidence stays as it was given (excerpts and spans) when the set was loaded without a corpus."""
    record: dict[str, Any] = {"id": question.id, "question": question.question}
    if question.type != UNTYPED:
        record["type"] = question.type
    record["relevant"] = dict(question.relevant)
    if question.evidence:
        record["evidence"] = {
            doc: [item if isinstance(item, str) else _span_record(item) for item in items]
            for doc, items in question.evidence.items()
        }
    for key, value in (("filters", question.filters), ("tags", question.tags), ("metadata", question.metadata)):
        if value:
            record[key] = list(value) if isinstance(value, tuple) else dict(value)
    return record


def _span_record(span: Span) -> dict[str, Any]:
    record: dict[str, Any] = {"start": span.start, "end": span.end}
    if span.text is not None:
        record["text"] = span.text
    return record


def dumps_golden(golden: GoldenSet) -> str:
    """The golden set as JSON Lines, one question per line, in its order."""
    return "".join(json.dumps(question_record(q), ensure_ascii=False) + "\n" for q in golden)


def save_golden(golden: GoldenSet, path: str | Path, corpus: Corpus | None = None) -> None:
    """Write `golden` to `path` as JSON Lines, atomically, keeping the previous file as `path.bak`.

    What is written is first parsed back exactly as `load_golden` parses it (with `corpus`: every
    relevant id must be in it and every evidence excerpt and span must resolve), so a bad change
    raises `InputError` and leaves the file as it was. A crash or kill at any moment leaves `path`
    either the old or the new file, each complete (`write_text_atomically`)."""
    path = Path(path)
    if path.suffix.lower() not in JSON_LINES_SUFFIXES:
        raise InputError(f"{path}: a golden set is saved as JSON Lines (.jsonl), not {path.suffix or 'no extension'}")
    if not golden.questions:
        raise InputError(f"{path}: a golden set needs at least one question")  # the loader refuses an empty file
    text = dumps_golden(golden)
    parsed, lines = _build(path, ((number, json.loads(line)) for number, line in enumerate(text.splitlines(), 1)))
    if corpus is not None:
        parsed.check_corpus(corpus.by_id, lines)
        resolve_evidence(parsed, corpus, lines)
    write_text_atomically(path, text, backup=True)
