"""`python -m sweep.label GOLDEN --corpus CORPUS [--pool QUEUE] [--port N]`: a local web app to grow a golden set.

Serves http://127.0.0.1:PORT/ (this machine only; `--port 0` picks a free port) with Flask: add
and edit questions (text, type, filters), mark a question unanswerable, grade documents 0 / 1 / 2
(buttons, or keys), see each pooled candidate's text with the chunk a run retrieved highlighted,
search the corpus for a document the pool missed, select text in a document to record it as
evidence, and watch the progress. `--pool` is a queue written by `sweep.pool`; without `--corpus`
the queue's corpus is used. GOLDEN is a JSON Lines file; it is created with the first question.

The file on disk is the one source of truth. Every change reads it, applies the change to one
question, checks the whole set exactly as `sweep.formats.golden.load_golden` reads it against the corpus,
and saves it atomically with `sweep.formats.golden.save_golden` (temporary file, fsync, rename, fsync of
the folder; the previous version kept as GOLDEN.bak), under a lock that threads and other
processes share, before the browser hears "saved". A crash or kill -9 at any moment leaves a
complete golden file, old or new, that the loader reads.

In the file:
- a grade is an entry of `relevant` (0 judged not relevant, 1 relevant, 2 highly relevant);
  clearing a grade removes the entry;
- unanswerable: no document graded 1 or more (what the loader means by unanswerable); the app
  marks it with the tag `unanswerable` (a question of type `unanswerable` counts as marked too,
  the bundled set's convention), so that "not labelled yet" and "labelled: no answer" differ.
  Marking needs every grade below 1; grading a document 1 or 2 unmarks the question, and
  unmarking one of type `unanswerable` makes it `untyped`;
- evidence: selected text becomes a span `{"start", "end", "text"}` of the document's content
  (the evidence format of `sweep.formats.golden`), its edges trimmed of whitespace; the document is then
  graded 1 if it was not relevant yet. Evidence needs a relevant document, so grading a document
  0 (or clearing its grade) removes its evidence, and the app says so.

Two tabs: every question carries a version (a hash of its saved record). A change names the
version it was made on; when the saved question has changed since (another tab, another app),
the change is refused (HTTP 409), nothing is written, and the tab shows the message and the saved
question, on which the change can be made again. Changes to different questions never conflict.
A tab sends its changes one after the other, so its own rapid clicks do not conflict.

Bad input at the start (a malformed golden file, an id the corpus does not have, a malformed
queue) is one `error:` line and exit code 2, and nothing is written. A bad change in the app (an
unknown document id, a span that is not the document's text) is refused with a message and
changes nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from flask import Flask, Response, jsonify, request

from sweep.errors import InputError, exit_2_on_bad_input, where
from sweep.formats.corpus import Corpus, Document, load_corpus
from sweep.formats.files import exclusive_lock
from sweep.formats.golden import (
    RECOMMENDED_UNANSWERABLE_SHARE,
    UNTYPED,
    GoldenSet,
    Question,
    Span,
    load_golden,
    question_record,
    resolve_evidence,
    save_golden,
)
from sweep.formats.records import JSON_LINES_SUFFIXES, identifier, json_lines
from sweep.retrieval.filters import check_fields, parse_condition

log = logging.getLogger(__name__)

DEFAULT_PORT = 8765
GRADES = (0, 1, 2)
UNANSWERABLE = "unanswerable"
SEARCH_RESULTS = 10
SNIPPET = 160  # characters of a search result's text


class StaleWrite(Exception):
    """The question changed since the version a change was made on."""

    def __init__(self, current: Question) -> None:
        super().__init__(f"question {current.id!r} was changed elsewhere")
        self.current = current


class UnknownQuestion(KeyError):
    """No question with this id in the golden file (deleted in another tab?)."""


def version(question: Question) -> str:
    """A hash of the question's record as saved: changes whenever the question does."""
    record = json.dumps(question_record(question), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(record.encode()).hexdigest()[:16]


def marked_unanswerable(question: Question) -> bool:
    return not question.answerable and (UNANSWERABLE in question.tags or question.type == UNANSWERABLE)


def status(question: Question) -> str:
    """`answered` (a document graded 1 or more), `unanswerable` (marked) or `open` (neither yet)."""
    return "answered" if question.answerable else UNANSWERABLE if marked_unanswerable(question) else "open"


# ---------------------------------------------------------------- changes to one question


Change = Callable[[Question], tuple[Question, list[str]]]  # the changed question and notes for the user


def known_document(corpus: Corpus, doc: Any) -> Document:
    doc = identifier(doc, "document", "document id")
    if doc not in corpus.by_id:
        raise InputError(f"unknown document id {doc!r}: not in the corpus {corpus.source}")
    return corpus.by_id[doc]


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


def set_grade(corpus: Corpus, doc: Any, grade: Any) -> Change:
    """Grade `doc` (0, 1 or 2), or clear its grade (None)."""
    document = known_document(corpus, doc)
    if grade is not None and (isinstance(grade, bool) or grade not in GRADES):
        raise InputError(f"grade {grade!r}: expected one of {', '.join(map(str, GRADES))}, or null to clear it")

    def change(question: Question) -> tuple[Question, list[str]]:
        notes: list[str] = []
        if grade is not None and grade >= 1:
            question, notes = unmarked(question)
        relevant = dict(question.relevant)
        if grade is None:
            relevant.pop(document.id, None)
        else:
            relevant[document.id] = grade
        question = replace(question, relevant=relevant)
        if grade is None or grade < 1:
            question, removed = without_evidence(question, document.id)
            notes += removed
        return question, notes

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


def add_evidence(corpus: Corpus, doc: Any, start: Any, end: Any, text: Any) -> Change:
    """Record characters [start, end) of `doc`'s content, which must read `text`, as evidence."""
    document = known_document(corpus, doc)
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
            question = replace(question, relevant={**question.relevant, document.id: 1})
            notes.append(f"graded {document.id} 1 (relevant): evidence comes from a relevant document")
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


# ---------------------------------------------------------------- the golden file


class GoldenFile:
    """The golden set on disk: read fresh for every request, changed one question at a time
    under a lock (`exclusive`), checked and saved atomically (module doc)."""

    def __init__(self, path: Path, corpus: Corpus) -> None:
        self.path, self.corpus = path, corpus
        self._threads = threading.Lock()

    def read(self) -> GoldenSet:
        """As saved (excerpts not resolved); an empty set while the file does not exist yet."""
        if not self.path.exists():
            return GoldenSet((), source=str(self.path))
        return load_golden(self.path, warn=False)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Threads of this app, and other processes that lock the same way, one at a time; the
        folder is locked (flock) rather than a lock file, so nothing is left behind."""
        with self._threads:
            with exclusive_lock(self.path.parent):
                yield

    def remove_stale_temporaries(self) -> None:
        """Temporary files a killed save left behind (never the golden file or its backup)."""
        with self.exclusive():
            for stale in self.path.parent.glob(f".{self.path.name}.*.tmp"):
                stale.unlink(missing_ok=True)

    def _save(self, questions: Sequence[Question]) -> GoldenSet:
        """Save `questions`; the set saved (as `read` would give it back, excerpts not resolved)."""
        golden = GoldenSet(tuple(questions), source=str(self.path))
        save_golden(golden, self.path, self.corpus)
        return golden

    def _current(self, qid: str, expected: Any) -> tuple[GoldenSet, Question]:
        """The saved set and its question `qid`, if it is still at version `expected` (call under `exclusive`)."""
        golden = self.read()
        current = golden.by_id.get(qid)
        if current is None:
            raise UnknownQuestion(qid)
        if expected != version(current):
            raise StaleWrite(current)
        return golden, current

    def change(self, qid: str, expected: Any, change: Change) -> tuple[Question, list[str], GoldenSet]:
        """The changed question, notes for the user, and the set saved."""
        with self.exclusive():
            golden, current = self._current(qid, expected)
            changed, notes = change(current)
            return changed, notes, self._save([changed if q.id == qid else q for q in golden])

    def add(self, qid: Any, fields: Mapping[str, Any]) -> tuple[Question, GoldenSet]:
        """The new question and the set saved."""
        with self.exclusive():
            golden = self.read()
            if qid in (None, ""):
                qid = next(f"q{n:03d}" for n in range(1, len(golden) + 2) if f"q{n:03d}" not in golden.by_id)
            qid = identifier(qid, "new question", "id").strip()
            if qid in golden.by_id:
                raise InputError(f"question id {qid!r} is taken: choose another (or leave it empty)")
            question = Question(id=qid, relevant={}, **fields)
            return question, self._save([*golden, question])

    def delete(self, qid: str, expected: Any) -> GoldenSet:
        """The set saved."""
        with self.exclusive():
            golden, _ = self._current(qid, expected)
            if len(golden) == 1:
                raise InputError("the last question cannot be deleted: a golden set needs at least one")
            return self._save([q for q in golden if q.id != qid])


# ---------------------------------------------------------------- the pool


@dataclass(frozen=True)
class Queue:
    """A `sweep.pool` queue: each question's candidates (chunks checked), their ranks labelled by run."""

    source: str = ""
    candidates: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def run_labels(runs: Sequence[Any]) -> dict[str, str]:
    """Run id -> its overrides less those every run shares (`model=bm25` rather than the whole
    command line); the run id's start when nothing is left."""
    runs = [r for r in runs if isinstance(r, dict)]
    words = [str(r.get("overrides") or "").split() for r in runs]
    shared = set.intersection(*map(set, words)) if len(words) > 1 else set()
    return {
        str(r.get("run_id")): " ".join(w for w in run_words if w not in shared) or str(r.get("run_id"))[:8]
        for r, run_words in zip(runs, words)
    }


def load_queue(path: Path, corpus: Corpus) -> Queue:
    """Read a queue; a document the corpus does not have is an error naming the line. A chunk
    whose text is not the document's any more (the corpus changed) loses its highlight."""
    records = iter(json_lines(path))
    first = next(records, None)
    if first is None or not isinstance(first[1], dict) or not isinstance(first[1].get("pool"), dict):
        raise InputError(f"{where(path, first[0] if first else None)}: not a sweep.pool queue (no 'pool' header line)")
    header = first[1]["pool"]
    runs = run_labels(header.get("runs", []))
    candidates: dict[str, list[dict[str, Any]]] = {}
    stale = 0
    for number, record in records:
        at = where(path, number)
        if not isinstance(record, dict) or not isinstance(record.get("candidates"), list):
            raise InputError(f"{at}: expected a question with 'qid' and a list of 'candidates'")
        qid = identifier(record.get("qid"), at, "'qid'")
        checked = []
        for candidate in record["candidates"]:
            if not isinstance(candidate, dict):
                raise InputError(f"{at}: question {qid!r}: a candidate is not an object")
            doc = identifier(candidate.get("doc"), at, "candidate document id")
            if doc not in corpus.by_id:
                raise InputError(f"{at}: question {qid!r}: candidate {doc!r} is not in the corpus {corpus.source}")
            chunk = candidate.get("chunk")
            if isinstance(chunk, dict):
                content = corpus.by_id[doc].content
                start, end = chunk.get("start"), chunk.get("end")
                fits = isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(content)
                if not fits or ("text" in chunk and content[start:end] != chunk["text"]):
                    stale, chunk = stale + 1, None
            else:
                chunk = None
            ranks = candidate.get("ranks") if isinstance(candidate.get("ranks"), dict) else {}
            checked.append(
                {
                    "doc": doc,
                    "best_rank": candidate.get("best_rank"),
                    "ranks": [{"run": runs.get(run, run), "rank": rank} for run, rank in ranks.items()],
                    "chunk": {"start": chunk["start"], "end": chunk["end"]} if chunk else None,
                }
            )
        candidates[qid] = checked
    if stale:
        log.warning("%s: %d chunks are not the corpus's text there any more; shown without highlight", path, stale)
    return Queue(str(path), candidates)


# ---------------------------------------------------------------- what the browser gets


def progress(golden: GoldenSet, queue: Queue) -> dict[str, Any]:
    """Judged / total pooled candidates, questions answered / marked unanswerable / still open,
    and the unanswerable share against the guideline."""
    statuses = [status(q) for q in golden]
    pooled = [(q, c["doc"]) for q in golden for c in queue.candidates.get(q.id, [])]
    marked = statuses.count(UNANSWERABLE)
    share = marked / len(golden) if len(golden) else 0.0
    low, high = RECOMMENDED_UNANSWERABLE_SHARE
    return {
        "questions": len(golden),
        "answered": statuses.count("answered"),
        "unanswerable": marked,
        "open": [q.id for q, s in zip(golden, statuses) if s == "open"],
        "pooled": len(pooled),
        "pooled_judged": sum(doc in q.relevant for q, doc in pooled),
        "judgments": sum(len(q.relevant) for q in golden),
        "unanswerable_share": share,
        "guideline": [low, high],
        "share_status": "low" if share < low else "high" if share > high else "ok",
    }


def summary(question: Question, queue: Queue) -> dict[str, Any]:
    pooled = queue.candidates.get(question.id, [])
    return {
        "id": question.id,
        "question": question.question,
        "type": question.type,
        "status": status(question),
        "judged": len(question.relevant),
        "pooled": len(pooled),
        "pooled_judged": sum(c["doc"] in question.relevant for c in pooled),
    }


def detail(question: Question, queue: Queue, corpus: Corpus) -> dict[str, Any]:
    """A question with its candidates: pooled ones in pool order, then other judged documents."""
    resolved = resolve_evidence(GoldenSet((question,)), corpus).questions[0].evidence
    pooled = {c["doc"]: c for c in queue.candidates.get(question.id, [])}
    docs = list(pooled) + [doc for doc in question.relevant if doc not in pooled]
    candidates = []
    for doc in docs:
        content = corpus.by_id[doc].content
        items = question.evidence.get(doc, ())
        candidates.append(
            {
                "doc": doc,
                "title": corpus.by_id[doc].title,
                "grade": question.relevant.get(doc),
                "pooled": pooled.get(doc),
                "evidence": [
                    item if isinstance(item, str) else (item.text or content[item.start : item.end]) for item in items
                ],
                "evidence_spans": [[s.start, s.end] for s in resolved.get(doc, ())],
            }
        )
    return {
        "id": question.id,
        "question": question.question,
        "type": question.type,
        "filters": dict(question.filters),
        "tags": list(question.tags),
        "status": status(question),
        "unanswerable": marked_unanswerable(question),
        "version": version(question),
        "candidates": candidates,
    }


class Search:
    """BM25 (sweep.retrieval.lexical) over each document's id, title and content, built on first use;
    documents whose id contains the query come first."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self._lock = threading.Lock()
        self._bm25 = None

    def __call__(self, query: str, limit: int = SEARCH_RESULTS) -> list[dict[str, str]]:
        query = query.strip()
        if not query:
            return []
        documents = self.corpus.documents
        lowered = query.lower()
        found = [i for i, d in enumerate(documents) if lowered in d.id.lower()][:limit]
        with self._lock:
            if self._bm25 is None:
                from sweep.retrieval.lexical import BM25Retriever

                self._bm25 = BM25Retriever()
                self._bm25.build([f"{d.id} {d.title}\n{d.content}" for d in documents])
            _, ids = self._bm25.search([query], limit)
        found += [int(i) for i in ids[0] if i >= 0 and int(i) not in found]
        return [self._result(documents[i], lowered.split()) for i in found[:limit]]

    @staticmethod
    def _result(document: Document, terms: Sequence[str]) -> dict[str, str]:
        """`terms`: the query's words, lowercased; the snippet starts a little before the earliest one in the text."""
        content, lowered = document.content, document.content.lower()
        hits = [hit for hit in (lowered.find(term) for term in terms) if hit >= 0]
        start = max(0, min(hits) - SNIPPET // 3) if hits else 0
        snippet = " ".join(content[start : start + SNIPPET].split())
        return {"doc": document.id, "title": document.title, "snippet": ("…" if start else "") + snippet + "…"}


# ---------------------------------------------------------------- the web app


def create_app(golden_file: GoldenFile, queue: Queue) -> Flask:
    corpus = golden_file.corpus
    app = Flask(__name__)
    # only this machine's names: another site's page cannot reach the app through DNS rebinding
    app.config["TRUSTED_HOSTS"] = ["127.0.0.1", "localhost"]
    search = Search(corpus)

    def body() -> dict[str, Any]:
        # JSON only: another site's page cannot send a JSON body here without a CORS preflight, which fails
        data = request.get_json(silent=True)
        if not isinstance(data, dict):
            raise InputError("expected a JSON object")
        return data

    def changed(question: Question, golden: GoldenSet, notes: Sequence[str] = ()) -> Response:
        """`golden`: the set just saved, from which the progress is computed."""
        return jsonify(
            question=detail(question, queue, corpus),
            summary=summary(question, queue),
            progress=progress(golden, queue),
            notes=list(notes),
            saved=datetime.now().strftime("%H:%M:%S"),
        )

    @app.errorhandler(InputError)
    def bad_input(error: InputError) -> tuple[Response, int]:
        return jsonify(error=str(error)), 400

    @app.errorhandler(UnknownQuestion)
    def unknown_question(error: UnknownQuestion) -> tuple[Response, int]:
        return jsonify(error=f"no question {error.args[0]!r} in {golden_file.path} (deleted elsewhere?)"), 404

    @app.errorhandler(StaleWrite)
    def stale(error: StaleWrite) -> tuple[Response, int]:
        message = (
            f"Not saved: question {error.current.id} was changed in another tab or window since this page "
            "showed it. This page now shows the saved version; make the change again if it still applies."
        )
        return jsonify(error=message, question=detail(error.current, queue, corpus)), 409

    @app.get("/")
    def page() -> Response:
        return Response(
            resources.files("sweep").joinpath("label.html").read_text(encoding="utf-8"), mimetype="text/html"
        )

    @app.get("/favicon.ico")
    def no_icon() -> Response:
        return Response(status=204)

    @app.get("/api/state")
    def state() -> Response:
        golden = golden_file.read()
        return jsonify(
            golden=str(golden_file.path),
            corpus=corpus.source,
            pool=queue.source,
            questions=[summary(q, queue) for q in golden],
            progress=progress(golden, queue),
            types=sorted({q.type for q in golden} | {UNTYPED}),
            fields=sorted(corpus.metadata_fields),
        )

    @app.get("/api/questions/<qid>")
    def question(qid: str) -> Response:
        found = golden_file.read().by_id.get(qid)
        if found is None:
            raise UnknownQuestion(qid)
        return jsonify(question=detail(found, queue, corpus))

    @app.post("/api/questions")
    def add() -> tuple[Response, int]:
        data = body()
        return changed(*golden_file.add(data.get("id"), question_fields(corpus, data))), 201

    def changing(qid: str, make: Callable[[dict[str, Any]], Change]) -> Response:
        data = body()
        question, notes, golden = golden_file.change(qid, data.get("version"), make(data))
        return changed(question, golden, notes)

    @app.post("/api/questions/<qid>")
    def edit_question(qid: str) -> Response:
        return changing(qid, lambda data: edit(corpus, data))

    @app.post("/api/questions/<qid>/grade")
    def grade(qid: str) -> Response:
        return changing(qid, lambda data: set_grade(corpus, data.get("doc"), data.get("grade")))

    @app.post("/api/questions/<qid>/unanswerable")
    def unanswerable(qid: str) -> Response:
        return changing(qid, lambda data: set_unanswerable(data.get("value")))

    @app.post("/api/questions/<qid>/evidence")
    def evidence(qid: str) -> Response:
        return changing(
            qid,
            lambda data: add_evidence(corpus, data.get("doc"), data.get("start"), data.get("end"), data.get("text")),
        )

    @app.post("/api/questions/<qid>/evidence/remove")
    def unrecord(qid: str) -> Response:
        return changing(qid, lambda data: remove_evidence(corpus, data.get("doc"), data.get("index")))

    @app.post("/api/questions/<qid>/delete")
    def delete(qid: str) -> Response:
        golden = golden_file.delete(qid, body().get("version"))
        return jsonify(progress=progress(golden, queue), saved=datetime.now().strftime("%H:%M:%S"))

    @app.get("/api/documents/<path:doc>")
    def document(doc: str) -> Response:
        found = known_document(corpus, doc)
        return jsonify(id=found.id, title=found.title, content=found.content, metadata=dict(found.metadata))

    @app.get("/api/search")
    def find() -> Response:
        return jsonify(results=search(request.args.get("q", "")))

    return app


# ---------------------------------------------------------------- command line


def open_golden(path: Path, corpus: Corpus) -> GoldenFile:
    """The golden file, checked in full against the corpus before anything is served."""
    if path.suffix.lower() not in JSON_LINES_SUFFIXES:
        raise InputError(f"{path}: sweep.label edits a JSON Lines golden set (.jsonl); convert it first")
    if not path.parent.is_dir():
        raise InputError(f"{path}: no such folder {path.parent}")
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give the golden file (.jsonl)")
    if path.exists():
        load_golden(path, corpus, warn=False)
    golden_file = GoldenFile(path, corpus)
    golden_file.remove_stale_temporaries()
    return golden_file


def queue_corpus(path: Path) -> tuple[str, str]:
    """(corpus, id scheme) that a queue's header names."""
    first = next(iter(json_lines(path)), None)
    header = first[1].get("pool") if first and isinstance(first[1], dict) else None
    if not isinstance(header, dict) or not header.get("corpus"):
        raise InputError(f"{path}: names no corpus (not a sweep.pool queue?); give --corpus")
    return str(header["corpus"]), str(header.get("corpus_ids", "path"))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep.label", description=__doc__.split("\n\n")[0])
    parser.add_argument("golden", metavar="GOLDEN", help="the golden set (.jsonl); created with the first question")
    parser.add_argument("--corpus", help="the corpus (default: the one the --pool queue names)")
    parser.add_argument(
        "--corpus-ids",
        choices=("path", "stem"),
        help="a folder corpus's document ids (default: the --pool queue's, else path)",
    )
    parser.add_argument("--pool", metavar="QUEUE", help="a labelling queue written by python -m sweep.pool")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="port on 127.0.0.1 (default %(default)s; 0: any)"
    )
    return parser


@exit_2_on_bad_input
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port {args.port}: expected 0 to 65535")
    pool = Path(args.pool) if args.pool else None
    if pool is not None and not pool.is_file():
        raise InputError(f"--pool {pool}: no such file")
    if args.corpus is None and pool is None:
        raise InputError("give the corpus with --corpus (or a --pool queue, which names it)")
    source, ids = (args.corpus, "path") if args.corpus else queue_corpus(pool)
    corpus = load_corpus(source, ids=args.corpus_ids or ids)
    golden_file = open_golden(Path(args.golden), corpus)
    queue = load_queue(pool, corpus) if pool is not None else Queue()
    try:  # bound here, so that a port in use is bad input (werkzeug would exit 1 on it)
        listening = socket.create_server(("127.0.0.1", args.port))
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else str(error)
        raise InputError(f"--port {args.port}: cannot listen on 127.0.0.1 ({reason}); choose another") from None
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", args.port, create_app(golden_file, queue), threaded=True, fd=listening.detach())
    print(
        f"Labelling {golden_file.path} at http://127.0.0.1:{server.server_address[1]}/ "
        "(every change is saved at once; Ctrl+C stops)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
