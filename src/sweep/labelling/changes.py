"""The changes a labeller makes to one question: grades, unanswerable, evidence, text/type/filters.

Each change is checked when it is made (an unknown document id, a span that is not the
document's text, a bad grade: `InputError`, nothing changes) and is a function from the saved
question to the changed one and notes for the user, applied by `sweep.labelling.golden_file`.

In the golden file:
- a grade is an entry of `relevant` (0 judged not relevant, 1 relevant, 2 highly relevant);
  clearing a grade removes the entry. A grade the labeller gives or changes records who gave it,
  when, and the content digest of the document graded (`{"grade": 2, "by": "ana", "at":
  "2026-12-06T10:00:00Z", "digest": ...}`, `sweep.formats.provenance`), so that an edit of the
  document since shows; a grade set again to the value it has keeps its `by`, `at` and `digest`, as
  every grade not touched does, unless its document has changed since it was graded (its recorded
  digest is not the document's): then the grade is given again, on the text as it is now;
- unanswerable: no document graded 1 or more (what the loader means by unanswerable); the app
  marks it with the tag `unanswerable` (a question of type `unanswerable` counts as marked too,
  the bundled set's convention), so that "not labelled yet" and "labelled: no answer" differ.
  Marking needs every grade below 1; grading a document 1 or 2 unmarks the question, and
  unmarking one of type `unanswerable` makes it `untyped`;
- evidence: selected text becomes a span `{"start", "end", "text"}` of the document's content
  (the evidence format of `sweep.formats.golden`), its edges trimmed of whitespace; the document
  is then graded 1 if it was not relevant yet. Evidence needs a relevant document, so grading a
  document 0 (or clearing its grade) removes its evidence, and the note says so;
- a document added from search (one the pool missed) is listed in the question's
  `metadata.added_from_search`, so it stays among the question's candidates before it is
  graded, after a reload, and after its grade is cleared;
- review of a question pending review (a generated one, `status: pending`): accepting it makes it
  `status: reviewed` with the question's `by` the labeller and `at` now, and its grades not given by
  a person (bare, or `by: llm:...`) the labeller's, on the documents as they are now, as an accepted
  judge's suggestion is; its evidence may first be replaced by a selection (`add_evidence` with
  `replace`); rejecting it removes it from the file (`GoldenFile.delete`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sweep.errors import InputError
from sweep.formats.corpus import Corpus, Document
from sweep.formats.golden import UNTYPED, Provenance, Question, Span
from sweep.formats.lines import identifier
from sweep.formats.provenance import LLM, REVIEWED
from sweep.retrieval.filters import check_fields, parse_condition

GRADES = (0, 1, 2)
UNANSWERABLE = "unanswerable"
ADDED = "added_from_search"  # the key of `metadata` listing the documents added from search

Change = Callable[[Question], tuple[Question, list[str]]]  # the changed question and notes for the user


def marked_unanswerable(question: Question) -> bool:
    return not question.answerable and (UNANSWERABLE in question.tags or question.type == UNANSWERABLE)


def status(question: Question) -> str:
    """`answered` (a document graded 1 or more), `unanswerable` (marked) or `open` (neither yet)."""
    return "answered" if question.answerable else UNANSWERABLE if marked_unanswerable(question) else "open"


def known_document(corpus: Corpus, doc: Any) -> Document:
    doc = identifier(doc, "document", "document id")
    if doc not in corpus.by_id:
        raise InputError(f"unknown document id {doc!r}: not in the corpus {corpus.source}")
    return corpus.by_id[doc]


def added_from_search(question: Question) -> list[str]:
    """The ids listed under `metadata.added_from_search` (strings only: metadata is free-form)."""
    listed = question.metadata.get(ADDED)
    return [doc for doc in listed if isinstance(doc, str)] if isinstance(listed, list) else []


def without_evidence(question: Question, doc: str) -> tuple[Question, list[str]]:
    if doc not in question.evidence:
        return question, []
    evidence = {d: items for d, items in question.evidence.items() if d != doc}
    count = len(question.evidence[doc])
    return replace(question, evidence=evidence), [
        f"removed {count} evidence item{'s' if count > 1 else ''} of {doc} (evidence needs a relevant document)"
    ]


def unmarked(question: Question) -> tuple[Question, list[str]]:
    if not marked_unanswerable(question):
        return question, []
    tags = tuple(t for t in question.tags if t != UNANSWERABLE)
    qtype = UNTYPED if question.type == UNANSWERABLE else question.type
    return replace(question, tags=tags, type=qtype), ["no longer marked unanswerable"]


def graded_now(labeller: str) -> Provenance:
    """A grade given by `labeller` now (UTC, to the second); `regraded` adds the document's digest."""
    return Provenance(labeller, datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))


def stamped(stamp: Provenance, document: Document) -> Provenance:
    """`stamp` with the content digest of `document`, the one graded."""
    return replace(stamp, digest=document.content_digest)


def regraded(question: Question, document: Document, grade: int | None, stamp: Provenance) -> Question:
    """`question` with `document` graded `grade` (None: not graded); `stamp` says who and when where
    the grade changed (or its document did since it was graded), with the document's content digest,
    and a cleared grade takes its provenance with it."""
    doc = document.id
    relevant, provenance = dict(question.relevant), dict(question.provenance)
    recorded = provenance.get(doc, Provenance()).digest
    if grade is None:
        relevant.pop(doc, None)
        provenance.pop(doc, None)
    elif relevant.get(doc) != grade or recorded not in (None, document.content_digest):
        relevant[doc], provenance[doc] = grade, stamped(stamp, document)
    return replace(question, relevant=relevant, provenance=provenance)


def set_grade(corpus: Corpus, doc: Any, grade: Any, stamp: Provenance) -> Change:
    """Grade `doc` (0, 1 or 2), or clear its grade (None); `stamp`: who grades, and when."""
    document = known_document(corpus, doc)
    if grade is not None and (isinstance(grade, bool) or grade not in GRADES):
        raise InputError(f"grade {grade!r}: expected one of {', '.join(map(str, GRADES))}, or null to clear it")

    def change(question: Question) -> tuple[Question, list[str]]:
        notes: list[str] = []
        if grade is not None and grade >= 1:
            question, notes = unmarked(question)
        question = regraded(question, document, grade, stamp)
        if grade is None or grade < 1:
            question, removed = without_evidence(question, document.id)
            notes += removed
        return question, notes

    return change


def add_candidate(corpus: Corpus, doc: Any, pooled: Collection[str]) -> Change:
    """Make `doc` a candidate of the question; `pooled`: the question's candidates from the queue."""
    document = known_document(corpus, doc)

    def change(question: Question) -> tuple[Question, list[str]]:
        listed = question.metadata.get(ADDED, [])
        if not isinstance(listed, list):
            raise InputError(
                f"question {question.id!r}: metadata {ADDED!r} is {listed!r}, not a list of document ids: fix the file"
            )
        if document.id in pooled or document.id in question.relevant or document.id in listed:
            return question, [f"{document.id} is already a candidate"]
        return replace(question, metadata={**question.metadata, ADDED: [*listed, document.id]}), []

    return change


def set_unanswerable(value: Any) -> Change:
    if not isinstance(value, bool):
        raise InputError(f"unanswerable {value!r}: expected true or false")

    def change(question: Question) -> tuple[Question, list[str]]:
        if not value:
            return unmarked(question)
        relevant = sorted(doc for doc, grade in question.relevant.items() if grade >= 1)
        if relevant:
            raise InputError(
                f"question {question.id!r} has relevant documents ({', '.join(relevant)}): grade them 0 first"
            )
        if marked_unanswerable(question):
            return question, []
        return replace(question, tags=(*question.tags, UNANSWERABLE)), []

    return change


def add_evidence(
    corpus: Corpus, doc: Any, start: Any, end: Any, text: Any, stamp: Provenance, replacing: Any = False
) -> Change:
    """Record characters [start, end) of `doc`'s content, which must read `text`, as evidence;
    `stamp`: who records it, and when (the grade it gives a document not relevant yet is theirs);
    `replacing`: the span replaces all the question's evidence (a generated question's, say)."""
    document = known_document(corpus, doc)
    if not isinstance(replacing, bool):
        raise InputError(f"replace {replacing!r}: expected true or false")
    content = document.content
    for name, offset in (("start", start), ("end", end)):
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise InputError(f"evidence {name} {offset!r}: expected a character offset")
    if not 0 <= start < end <= len(content):
        raise InputError(f"evidence {start}-{end}: not a span of {document.id} ({len(content)} characters)")
    if content[start:end] != text:
        raise InputError(f"evidence {start}-{end} of {document.id} does not read {text!r}: reload the page")
    while content[start].isspace() and start < end - 1:
        start += 1
    while content[end - 1].isspace() and end > start + 1:
        end -= 1
    if content[start:end].isspace():
        raise InputError("the selection is only whitespace: select the text that answers the question")
    span = Span(start, end, content[start:end])

    def change(question: Question) -> tuple[Question, list[str]]:
        notes: list[str] = []
        if question.relevant.get(document.id, 0) < 1:
            question, notes = unmarked(question)
            question = regraded(question, document, 1, stamp)
            notes.append(f"graded {document.id} 1 (relevant): evidence comes from a relevant document")
        if replacing and question.evidence:
            count = sum(map(len, question.evidence.values()))
            question = replace(question, evidence={})
            notes.append(f"replaced {count} evidence item{'' if count == 1 else 's'}")
        items = question.evidence.get(document.id, ())
        if span in items:
            return question, [*notes, "this evidence is already recorded"]
        return replace(question, evidence={**question.evidence, document.id: (*items, span)}), notes

    return change


def remove_evidence(corpus: Corpus, doc: Any, index: Any) -> Change:
    document = known_document(corpus, doc)

    def change(question: Question) -> tuple[Question, list[str]]:
        items = question.evidence.get(document.id, ())
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(items):
            raise InputError(f"evidence item {index!r} of {document.id}: there is no such item (reload the page)")
        kept = items[:index] + items[index + 1 :]
        evidence = {d: v for d, v in question.evidence.items() if d != document.id}
        if kept:
            evidence[document.id] = kept
        return replace(question, evidence=evidence), []

    return change


def accept(corpus: Corpus, stamp: Provenance) -> Change:
    """Accept a question pending review as reviewed by `stamp`'s person, now (module doc)."""

    def change(question: Question) -> tuple[Question, list[str]]:
        if question.status == REVIEWED:
            raise InputError(f"question {question.id!r} is not pending review: there is nothing to accept")
        provenance = dict(question.provenance)
        for doc in question.relevant:
            graded = provenance.get(doc, Provenance())
            if graded.by is None or graded.by.startswith(LLM):  # not a person's grade: now the reviewer's
                provenance[doc] = stamped(stamp, known_document(corpus, doc))
        return replace(question, status=REVIEWED, origin=stamp, provenance=provenance), []

    return change


def question_fields(corpus: Corpus, body: Mapping[str, Any]) -> dict[str, Any]:
    """The editable fields of a question from a request: text, type, filters."""
    text = body.get("question")
    if not isinstance(text, str) or not text.strip():
        raise InputError("the question needs a text")
    qtype = body.get("type") or UNTYPED
    if not isinstance(qtype, str) or not qtype.strip():
        raise InputError(f"type {qtype!r}: expected a name such as factoid")
    filters = body.get("filters") or {}
    if not isinstance(filters, dict):
        raise InputError('filters: expected an object of metadata field to value, such as {"department": "HR"}')
    check_fields(parse_condition(filters, "filters"), corpus)
    return {"question": text.strip(), "type": qtype.strip(), "filters": filters}


def edit(corpus: Corpus, body: Mapping[str, Any]) -> Change:
    fields = question_fields(corpus, body)

    def change(question: Question) -> tuple[Question, list[str]]:
        return replace(question, **fields), []

    return change
