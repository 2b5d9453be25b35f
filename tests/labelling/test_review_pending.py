"""Review of generated questions before they count (issue 46, item 3), and the content digest of every grade the
labelling app gives: questions pending review are listed first, marked, with who wrote them and their evidence
shown; one key each accepts, replaces the evidence of, or rejects one. Over real HTTP to the app on 127.0.0.1, and
in headless Chromium against a real `python -m sweep.label` process."""

from __future__ import annotations

import getpass
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import requests

from helpers.labelling import POOLED, Data, saved, start_server, wait_for
from sweep.formats.golden import Provenance, Span
from sweep.labelling.app import create_app, server
from sweep.labelling.golden_file import open_golden
from sweep.labelling.queue import load_queue

LLM_BY = "llm:qwen2.5:7b@3f2a9c1b"
PENDING = ("g1", "g2", "g3")


def first_sentence(content: str) -> Span:
    """The span of the first sentence after a document's title."""
    start = content.index("\n\n") + 2
    end = content.index(".", start) + 1
    return Span(start, end, content[start:end])


def evidence(data: Data, qid: str) -> dict[str, list[str]]:
    """Question `qid`'s evidence in the file, as the texts of its spans."""
    spans = data.load().by_id[qid].evidence.items()
    return {doc: [data.corpus.by_id[doc].content[s.start : s.end] for s in items] for doc, items in spans}


@pytest.fixture
def pending(data: Data) -> dict[str, str]:
    """Three generated questions pending review, appended after the reviewed ones, as `sweep.generate` writes
    them: each graded 2 on one document (not POOLED's candidates), with a span of it as evidence; {qid: doc}."""
    docs = [d.id for d in data.corpus if d.id not in data.pooled][:3]
    lines = []
    for qid, doc in zip(PENDING, docs):
        span = first_sentence(data.corpus.by_id[doc].content)
        record = {"id": qid, "question": f"What does {doc} say first?", "source": "synthetic", "status": "pending"}
        record |= {"by": LLM_BY, "relevant": {doc: 2}, "evidence": {doc: [vars(span)]}}
        lines.append(json.dumps(record) + "\n")
    with data.golden.open("a", encoding="utf-8") as golden:
        golden.writelines(lines)
    return dict(zip(PENDING, docs))


@pytest.fixture
def app_url(data, pending) -> Iterator[str]:
    """The app's own threaded werkzeug server on a free port of 127.0.0.1, reviewing as `ana`."""
    serving = server(create_app(open_golden(data.golden, data.corpus), load_queue(data.queue, data.corpus), "ana"), 0)
    threading.Thread(target=serving.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{serving.server_address[1]}/api"
    finally:
        serving.shutdown()


def post(url: str, qid: str, path: str, status: int = 200, **body) -> dict:
    body["version"] = requests.get(f"{url}/questions/{qid}", timeout=30).json()["question"]["version"]
    answer = requests.post(f"{url}/questions/{qid}{path}", json=body, timeout=30)
    assert answer.status_code == status, answer.text
    return answer.json()


def just_now(at: str | None, since: datetime) -> bool:
    when = datetime.fromisoformat(at or "")
    return when.utcoffset() == timedelta(0) and since.replace(microsecond=0) <= when <= datetime.now(UTC)


def test_pending_questions_come_first_marked_with_who_wrote_them_and_their_evidence(data, pending, app_url):
    listed = requests.get(f"{app_url}/state", timeout=30).json()["questions"]
    assert [q["id"] for q in listed[:3]] == list(PENDING)  # last in the file, first in the list
    assert [(q["review"], q["source"], q["by"]) for q in listed[:3]] == [("pending", "synthetic", LLM_BY)] * 3
    assert {q["review"] for q in listed[3:]} == {"reviewed"} and len(listed) == len(data.load())
    question = requests.get(f"{app_url}/questions/g1", timeout=30).json()["question"]
    span = first_sentence(data.corpus.by_id[pending["g1"]].content)
    assert (question["review"], question["by"]) == ("pending", LLM_BY)
    [candidate] = question["candidates"]
    assert (candidate["doc"], candidate["grade"], candidate["evidence_spans"]) == (
        pending["g1"],
        2,
        [[span.start, span.end]],
    )
    assert question["judge"] is None  # no judge looked at it


def test_a_generated_unanswerable_question_shows_what_the_judge_found(data, pending, app_url):
    judge = {"by": LLM_BY, "top": {doc: 0 for doc in list(data.corpus.by_id)[:10]}, "all_0": True}
    record = {"id": "g4", "question": "Is there a company choir?", "type": "unanswerable", "relevant": {}}
    record |= {"source": "synthetic", "status": "pending", "by": LLM_BY, "metadata": {"generated": {"judge": judge}}}
    with data.golden.open("a", encoding="utf-8") as golden:
        golden.write(json.dumps(record) + "\n")
    question = requests.get(f"{app_url}/questions/g4", timeout=30).json()["question"]
    assert question["review"] == "pending" and question["judge"] == judge


def test_accept_replace_evidence_and_reject(data, pending, app_url):
    since = datetime.now(UTC)
    # accept: reviewed by the labeller, now; the generated grade becomes the reviewer's, on the document as it is
    accepted = post(app_url, "g1", "/accept")
    question = data.load().by_id["g1"]
    assert question.status == "reviewed" and question.source == "synthetic"
    assert question.origin.by == "ana" and just_now(question.origin.at, since)
    doc = pending["g1"]
    assert question.provenance[doc] == Provenance("ana", question.origin.at, data.corpus.by_id[doc].content_digest)
    assert (accepted["question"]["review"], accepted["summary"]["review"]) == ("reviewed", "reviewed")
    before = data.golden.read_bytes()
    refused = post(app_url, "g1", "/accept", status=400)
    assert "not pending review" in refused["error"] and data.golden.read_bytes() == before

    # replace the evidence: the selection is the question's only evidence; the question stays pending
    doc = pending["g2"]
    content = data.corpus.by_id[doc].content
    generated = first_sentence(content)
    start = content.index(" ", generated.end) + 1
    chosen = Span(start, start + 20, content[start : start + 20])
    answer = post(
        app_url, "g2", "/evidence", doc=doc, start=chosen.start, end=chosen.end, text=chosen.text, replace=True
    )
    assert answer["notes"] == ["replaced 1 evidence item"]
    question = data.load().by_id["g2"]
    assert evidence(data, "g2") == {doc: [chosen.text.strip()]}
    assert question.status == "pending" and question.origin.by == LLM_BY
    added = post(app_url, "g2", "/evidence", doc=doc, **vars(generated))  # without replace: added beside it
    assert added["notes"] == [] and len(data.load().by_id["g2"].evidence[doc]) == 2

    # reject: the question is removed from the file, the others stay
    post(app_url, "g3", "/delete")
    assert [q.id for q in data.load() if q.id in PENDING] == ["g1", "g2"]


def test_every_grade_given_records_the_content_digest_of_the_document(data, pending, app_url):
    def judgment(qid: str, doc: str) -> Provenance:
        return data.load().by_id[qid].provenance[doc]

    digest = {doc: data.corpus.by_id[doc].content_digest for doc in data.corpus.by_id}
    graded, evidenced = data.pooled[:2]
    post(app_url, POOLED, "/grade", doc=graded, grade=2)  # a grade, as a key, a button or an accepted suggestion sends
    span = first_sentence(data.corpus.by_id[evidenced].content)
    post(app_url, POOLED, "/evidence", doc=evidenced, **vars(span))  # evidence grades an ungraded document 1
    post(app_url, "g1", "/accept")
    for qid, doc in ((POOLED, graded), (POOLED, evidenced), ("g1", pending["g1"])):
        assert judgment(qid, doc).by == "ana" and judgment(qid, doc).digest == digest[doc], (qid, doc)
    records = [json.loads(line) for line in data.golden.read_text().splitlines()]
    written = {r["id"]: r["relevant"] for r in records}
    assert written[POOLED][graded]["digest"] == digest[graded]  # in the file, as the drift check reads it

    # the same grade again keeps its judgment, unless the document changed since it was graded
    kept = judgment(POOLED, graded)
    post(app_url, POOLED, "/grade", doc=graded, grade=2)
    assert judgment(POOLED, graded) == kept
    text = data.golden.read_text().replace(digest[graded], "0123456789abcdef")  # as if graded on another text
    data.golden.write_text(text, encoding="utf-8")
    post(app_url, POOLED, "/grade", doc=graded, grade=2)
    assert judgment(POOLED, graded).digest == digest[graded]


@pytest.fixture
def pending_server(data, pending):
    running = start_server(data)  # the labeller: the user name this runs as
    try:
        yield running
    finally:
        running.kill()


@pytest.mark.slow
def test_pending_questions_reviewed_by_keyboard(browser, data, pending, pending_server):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    def press(*keys: str) -> None:
        ActionChains(browser).send_keys(*keys).perform()

    def shown(qid: str) -> bool:
        return browser.find_element(By.ID, "qid").text == qid and bool(
            browser.find_elements(By.CSS_SELECTOR, ".candidate")
        )

    person = getpass.getuser()
    browser.get(pending_server.url)
    wait_for(lambda: shown("g1"), what="the first pending question, opened first")
    marks = browser.find_elements(By.CSS_SELECTOR, "#question-list .pending")
    assert [mark.text for mark in marks] == [f"pending review · by {LLM_BY}"] * 3
    assert browser.find_element(By.ID, "qreview").text == f"pending review · by {LLM_BY}"
    highlighted = f"pre.document[data-doc='{pending['g1']}'] mark.evidence"
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, highlighted), what="the generated evidence highlighted")
    span = first_sentence(data.corpus.by_id[pending["g1"]].content)
    assert browser.find_element(By.CSS_SELECTOR, highlighted).text == span.text
    assert "y accept it as reviewed by you" in browser.find_element(By.TAG_NAME, "footer").text
    # a generated unanswerable question says what the judge made of BM25's top documents
    label = "return reviewLabel({review: 'pending', by: 'llm:m@h', judge: arguments[0]})"
    assert browser.execute_script(label, {"top": {"a": 0, "b": 0}, "all_0": True}) == (
        "pending review · by llm:m@h · the judge graded all 2 of BM25's top documents 0"
    )
    assert browser.execute_script(label, {"top": {"a": 2, "b": 0, "c": None}, "all_0": False}).endswith(
        "the judge graded 1 of BM25's top 3 relevant"
    )

    # y: accepted, and on to the next pending question
    press("y")
    wait_for(lambda: shown("g2"), what="the next pending question")
    wait_for(lambda: data.load().by_id["g1"].status == "reviewed", what="g1 accepted in the file")
    assert data.load().by_id["g1"].origin.by == person

    # r: the text selected with the mouse replaces the generated evidence; then y accepts it
    doc = pending["g2"]
    mark = f"pre.document[data-doc='{doc}'] mark.evidence"
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, mark), what="g2's document")
    generated = browser.find_element(By.CSS_SELECTOR, mark)
    box = generated.rect  # from its first characters, 150 pixels to the right: a part of the generated evidence
    drag = ActionChains(browser).move_to_element_with_offset(generated, -box["width"] / 2 + 3, -box["height"] / 2 + 8)
    drag.click_and_hold().move_by_offset(150, 0).release().perform()
    selected = browser.execute_script("return window.getSelection().toString()")
    assert selected.strip(), "the drag selected nothing"
    press("r")
    wait_for(lambda: evidence(data, "g2") == {doc: [selected.strip()]},
             what="the selection as g2's only evidence")  # fmt: skip
    wait_for(lambda: saved(browser), what="the page saying so")
    press("y")
    wait_for(lambda: shown("g3"), what="the last pending question")

    # x: rejected, removed from the file; no question is pending any more
    press("x")
    wait_for(lambda: "g3" not in data.load().by_id, what="g3 removed")
    wait_for(lambda: "rejected g3" in browser.find_element(By.ID, "message").text, what="the page saying so")
    assert not browser.find_elements(By.CSS_SELECTOR, "#question-list .pending")

    reviewed = {q.id: q for q in data.load() if q.id in PENDING}
    assert {qid: (q.status, q.origin.by, q.source) for qid, q in reviewed.items()} == {
        "g1": ("reviewed", person, "synthetic"),
        "g2": ("reviewed", person, "synthetic"),
    }
    assert reviewed["g2"].provenance[doc].digest == data.corpus.by_id[doc].content_digest
