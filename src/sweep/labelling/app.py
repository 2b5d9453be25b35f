"""The labelling web app: Flask routes over the golden file store, the queue and the corpus, and its server.

Serves the page (`page.html`) and a JSON API on 127.0.0.1 only: add and edit questions (text,
type, filters), mark a question unanswerable, grade documents 0 / 1 / 2 (each grade given or
changed records the labeller, the time and the document's content digest), record and remove
evidence, search the corpus and add a document found to a question's candidates, review the
questions pending review (listed first: accept, replace their evidence, or reject, which deletes
them), watch the progress. Every change is saved (`sweep.labelling.golden_file`) before the answer is sent. The
judge's grades, if given, are shown as suggestions (`sweep.labelling.views`) and never written:
a suggestion accepted is the person's grade, sent as any other.

Answers: a bad change (an unknown document id, a span that is not the document's text) is
refused with HTTP 400 and a message, and changes nothing; an unknown question is 404; a change
made on a version of the question that is not the saved one any more (another tab, another app)
is 409 with the message and the saved question, on which the page lets the change be made again.
A tab sends its changes one after the other, so its own rapid clicks do not conflict. Every
error is JSON `{"error": message}`, so the page can show it. A body over 1 MiB (413), a write
from another site's page (403), framing: `sweep.labelling.guard`; ids with any character in the
addresses: `sweep.labelling.addresses`.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Sequence
from datetime import datetime
from importlib import resources
from typing import Any

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from sweep.errors import InputError
from sweep.formats.golden import UNTYPED, GoldenSet, Question
from sweep.formats.provenance import PENDING
from sweep.labelling.addresses import route_any_id
from sweep.labelling.changes import (
    Change,
    accept,
    add_candidate,
    add_evidence,
    edit,
    graded_now,
    known_document,
    question_fields,
    remove_evidence,
    set_grade,
    set_unanswerable,
)
from sweep.labelling.golden_file import GoldenFile, StaleWrite, UnknownQuestion
from sweep.labelling.guard import guard
from sweep.labelling.queue import Queue
from sweep.labelling.views import Judgments, Search, detail, progress, summary

PAGE = "page.html"


def create_app(golden_file: GoldenFile, queue: Queue, labeller: str, judgments: Judgments | None = None) -> Flask:
    """`labeller`: the person grading, recorded as `by` of every grade they give or change;
    `judgments`: the judge's grades, shown as suggestions (None: no judge)."""
    corpus = golden_file.corpus
    app = Flask(__name__)
    # only this machine's names: another site's page cannot reach the app through DNS rebinding
    app.config["TRUSTED_HOSTS"] = ["127.0.0.1", "localhost"]
    page_html = resources.files(__package__).joinpath(PAGE).read_text(encoding="utf-8")
    guard(app, page_html)
    route_any_id(app)
    search = Search(corpus)

    def body() -> dict[str, Any]:
        # JSON only: another site's page cannot send a JSON body here without a CORS preflight, which fails
        data = request.get_json(silent=True)
        if not isinstance(data, dict):
            raise InputError("expected a JSON object")
        try:  # JSON's \ud800 escapes give lone surrogates, which no file can hold
            json.dumps(data, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise InputError("the change holds text that is not valid Unicode (a lone surrogate)") from None
        return data

    def changed(question: Question, golden: GoldenSet, notes: Sequence[str] = ()) -> Response:
        """`golden`: the set just saved, from which the progress is computed."""
        return jsonify(
            question=detail(question, queue, corpus, judgments),
            summary=summary(question, queue),
            progress=progress(golden, queue, judgments),
            notes=list(notes),
            saved=datetime.now().strftime("%H:%M:%S"),
        )

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> tuple[Response, int]:
        return jsonify(error=f"{error.code} {error.name}: {error.description}"), error.code or 500

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
        return jsonify(error=message, question=detail(error.current, queue, corpus, judgments)), 409

    @app.get("/")
    def page() -> Response:
        return Response(page_html, mimetype="text/html")

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
            questions=[summary(q, queue) for q in sorted(golden, key=lambda q: q.status != PENDING)],  # pending first
            progress=progress(golden, queue, judgments),
            types=sorted({q.type for q in golden} | {UNTYPED}),
            fields=sorted(corpus.metadata_fields),
        )

    @app.get("/api/questions/<qid:qid>")
    def question(qid: str) -> Response:
        found = golden_file.read().by_id.get(qid)
        if found is None:
            raise UnknownQuestion(qid)
        return jsonify(question=detail(found, queue, corpus, judgments))

    @app.post("/api/questions")
    def add() -> tuple[Response, int]:
        data = body()
        return changed(*golden_file.add(data.get("id"), question_fields(corpus, data))), 201

    def changing(qid: str, make: Callable[[dict[str, Any]], Change]) -> Response:
        data = body()
        question, notes, golden = golden_file.change(qid, data.get("version"), make(data))
        return changed(question, golden, notes)

    @app.post("/api/questions/<qid:qid>")
    def edit_question(qid: str) -> Response:
        return changing(qid, lambda data: edit(corpus, data))

    @app.post("/api/questions/<qid:qid>/grade")
    def grade(qid: str) -> Response:
        return changing(qid, lambda data: set_grade(corpus, data.get("doc"), data.get("grade"), graded_now(labeller)))

    @app.post("/api/questions/<qid:qid>/candidates")
    def add_to_candidates(qid: str) -> Response:
        pooled = [c.doc for c in queue.candidates.get(qid, [])]
        return changing(qid, lambda data: add_candidate(corpus, data.get("doc"), pooled))

    @app.post("/api/questions/<qid:qid>/unanswerable")
    def unanswerable(qid: str) -> Response:
        return changing(qid, lambda data: set_unanswerable(data.get("value")))

    @app.post("/api/questions/<qid:qid>/evidence")
    def evidence(qid: str) -> Response:
        return changing(
            qid,
            lambda data: add_evidence(
                corpus,
                data.get("doc"),
                data.get("start"),
                data.get("end"),
                data.get("text"),
                graded_now(labeller),
                data.get("replace", False),
            ),
        )

    @app.post("/api/questions/<qid:qid>/accept")
    def accept_pending(qid: str) -> Response:
        return changing(qid, lambda data: accept(corpus, graded_now(labeller)))

    @app.post("/api/questions/<qid:qid>/evidence/remove")
    def unrecord(qid: str) -> Response:
        return changing(qid, lambda data: remove_evidence(corpus, data.get("doc"), data.get("index")))

    @app.post("/api/questions/<qid:qid>/delete")
    def delete(qid: str) -> Response:
        golden = golden_file.delete(qid, body().get("version"))
        return jsonify(progress=progress(golden, queue, judgments), saved=datetime.now().strftime("%H:%M:%S"))

    @app.get("/api/documents/<doc:doc>")
    def document(doc: str) -> Response:
        found = known_document(corpus, doc)
        return jsonify(id=found.id, title=found.title, content=found.content, metadata=dict(found.metadata))

    @app.get("/api/search")
    def find() -> Response:
        return jsonify(results=search(request.args.get("q", "")))

    return app


def server(app: Flask, port: int) -> Any:
    """A threaded werkzeug server for `app` on 127.0.0.1:`port` (0: any free port), already
    listening: a port in use is bad input here (werkzeug would exit 1 on it)."""
    try:
        listening = socket.create_server(("127.0.0.1", port))
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else str(error)
        raise InputError(f"--port {port}: cannot listen on 127.0.0.1 ({reason}); choose another") from None
    from werkzeug.serving import make_server

    return make_server("127.0.0.1", port, app, threaded=True, fd=listening.detach())
