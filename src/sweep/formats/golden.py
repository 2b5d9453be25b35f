"""Golden sets in and out of files: `load_golden` reads any supported format, `save_golden` writes JSON Lines.

Reads JSON Lines, YAML, a BEIR folder, TREC qrels
(`qid 0 docid grade`) and Chroma's chunking benchmark (a folder with `questions_df.csv`),
validates them, and, given the corpus, checks every label against it and resolves the evidence
(`sweep.formats.evidence`). JSON Lines and YAML may say who graded each judgment and when, and
each question's source and review status (`sweep.formats.provenance`). Errors raise `InputError`
with `file:line: problem`; size and balance problems are only warnings. The readers are in
`sweep.formats.golden_readers`, the set itself in `sweep.formats.golden_set`; their public names
are importable from here too.

Ids are compared in Unicode NFC (`sweep.formats.lines.nfc`): the readers read every id so, and a
corpus whose ids are not all in NFC (a folder's file names as macOS writes them, NFD) has each
such document found by its NFC id too (`nfc_aliases`), with one warning naming both forms where
the golden set labels one; a run names them in NFC (`corpus_in_nfc`, used by the pipeline).

`save_golden` writes a set back as JSON Lines, checked as the loader reads it, atomically and
with a backup (`sweep.label` saves every change so).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from sweep.errors import InputError, where
from sweep.formats.corpus import Corpus, Document
from sweep.formats.evidence import Evidence as Evidence
from sweep.formats.evidence import Span as Span
from sweep.formats.evidence import evidence_spans as evidence_spans
from sweep.formats.evidence import merge_spans as merge_spans
from sweep.formats.evidence import resolve_spans, span_record
from sweep.formats.files import write_text_atomically
from sweep.formats.golden_readers import (
    CHUNKING_EVAL_QUESTIONS,
    questions_from_records,
    read_beir,
    read_chunking_eval,
    read_jsonl,
    read_trec_qrels,
    read_yaml,
)
from sweep.formats.golden_set import GoldenSet as GoldenSet
from sweep.formats.golden_set import Question as Question
from sweep.formats.golden_set import doc_grades as doc_grades
from sweep.formats.lines import JSON_LINES_SUFFIXES, UNTYPED, first_line, nfc, regular_file, same_in_nfc, sniff
from sweep.formats.lines import RECOMMENDED_SIZE as RECOMMENDED_SIZE  # imported from here too (sweep.label)
from sweep.formats.lines import RECOMMENDED_UNANSWERABLE_SHARE as RECOMMENDED_UNANSWERABLE_SHARE
from sweep.formats.provenance import HUMAN, REVIEWED
from sweep.formats.provenance import Provenance as Provenance

log = logging.getLogger(__name__)


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
    corpus_ids: Collection[str] | None = nfc_aliases(corpus) if corpus is not None else None
    if path.is_dir() and (path / CHUNKING_EVAL_QUESTIONS).is_file():
        golden, lines = read_chunking_eval(path / CHUNKING_EVAL_QUESTIONS)
    elif path.is_dir():
        golden, corpus_ids = read_beir(path, split, corpus_ids)
    else:
        regular_file(path, "golden set")
        reader = {"jsonl": read_jsonl, "yaml": read_yaml, "qrels": read_trec_qrels}[_sniff_format(path)]
        golden, lines = reader(path)
    if corpus_ids is not None:
        golden.check_corpus(corpus_ids, lines)
    if corpus is not None:
        _warn_other_forms(golden, corpus)
        golden = resolve_evidence(golden, corpus, lines)
    if warn:
        golden.warn_if_unbalanced()
    return golden


def corpus_in_nfc(corpus: Corpus) -> Corpus:
    """`corpus` with every document id in Unicode NFC, the form ids are compared in; `corpus`
    itself when they all are (the usual case, found without a copy). Two ids that are one in NFC
    are an error naming both forms."""
    if all(nfc(doc.id) == doc.id for doc in corpus):
        return corpus
    _nfc_ids(corpus)
    return Corpus(tuple(replace(doc, id=nfc(doc.id)) for doc in corpus), source=corpus.source)


def nfc_aliases(corpus: Corpus) -> dict[str, Document]:
    """`corpus.by_id`, where a document id is not in NFC also holding the document under its NFC
    id (what the golden set's reader made of the same id), so that every lookup by a golden set's
    or a run's id finds it. Until the folder reader reads file names in NFC itself, this is where
    a folder written on macOS meets a golden set typed elsewhere."""
    by_id = corpus.by_id
    for alias, document in _nfc_ids(corpus).items():
        by_id.setdefault(alias, document)
    return by_id


def _nfc_ids(corpus: Corpus) -> dict[str, Document]:
    """NFC id -> document, for the documents whose id is not in NFC; an error where two ids are one in NFC."""
    moved = {nfc(doc.id): doc for doc in corpus if not doc.id.isascii() and nfc(doc.id) != doc.id}
    for doc in corpus:
        other = moved.get(nfc(doc.id))
        if other is not None and other is not doc:
            raise InputError(f"{corpus.source}: documents {same_in_nfc(other.id, doc.id)}; rename one of them")
    return moved


def _warn_other_forms(golden: GoldenSet, corpus: Corpus) -> None:
    """One warning when the golden set labels documents that the corpus names in another Unicode form."""
    if all(doc.id.isascii() for doc in corpus):
        return
    labelled = {doc for q in golden for doc in q.relevant}
    other = [(doc, corpus.by_id[doc].id) for doc in labelled if doc in corpus.by_id and corpus.by_id[doc].id != doc]
    if other:
        doc, written = min(other)
        log.warning(
            "%s: the corpus %s names %d labelled %s in another Unicode form than the golden set: %s; they match, "
            "and runs name them in NFC",
            golden.source, corpus.source, len(other), "document" if len(other) == 1 else "documents",
            same_in_nfc(written, doc),
        )  # fmt: skip


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


def resolve_evidence(golden: GoldenSet, corpus: Corpus, lines: Mapping[str, int] | None = None) -> GoldenSet:
    """Every excerpt found in its document and every span checked against it; spans merged."""
    questions = []
    for q in golden:
        if not q.evidence:
            questions.append(q)
            continue
        at = where(golden.source, (lines or {}).get(q.id))
        resolved = {
            doc: resolve_spans(items, corpus.by_id[doc].content, at, f"question {q.id!r}: evidence for {doc!r}")
            for doc, items in q.evidence.items()
        }
        questions.append(replace(q, evidence=resolved))
    return GoldenSet(tuple(questions), source=golden.source)


# ---------------------------------------------------------------- writing JSON Lines (sweep.label)


def question_record(question: Question) -> dict[str, Any]:
    """`question` as a JSON Lines record that the loader reads back to an equal question; keys
    holding their default (type `untyped`, source `human`, status `reviewed`, no filters, tags,
    metadata or evidence) are left out, and a judgment without provenance is a bare grade.
    Evidence stays as it was given (excerpts and spans) when the set was loaded without a corpus."""
    record: dict[str, Any] = {"id": question.id, "question": question.question}
    for key, value, default in (
        ("type", question.type, UNTYPED),
        ("source", question.source, HUMAN),
        ("status", question.status, REVIEWED),
    ):
        if value != default:
            record[key] = value
    if question.origin is not None:
        record |= question.origin.record()
    record["relevant"] = {
        doc: {"grade": grade, **question.provenance[doc].record()} if doc in question.provenance else grade
        for doc, grade in question.relevant.items()
    }
    if question.evidence:
        record["evidence"] = {
            doc: [item if isinstance(item, str) else span_record(item) for item in items]
            for doc, items in question.evidence.items()
        }
    for key, value in (("filters", question.filters), ("tags", question.tags), ("metadata", question.metadata)):
        if value:
            record[key] = list(value) if isinstance(value, tuple) else dict(value)
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
    parsed, lines = questions_from_records(
        path, ((number, json.loads(line)) for number, line in enumerate(text.splitlines(), 1))
    )
    if corpus is not None:
        parsed.check_corpus(nfc_aliases(corpus), lines)
        resolve_evidence(parsed, corpus, lines)
    write_text_atomically(path, text, backup=True)
