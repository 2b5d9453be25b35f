"""The labelling app at its edges (issue 23): a body limit (413), writes only from its own page
(403), no framing, and question ids with any character; over real HTTP to the app's werkzeug
server on 127.0.0.1, and in headless Chromium. After every refused write the golden file is
byte for byte what it was, with no backup written."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from helpers.labelling import wait_for
from sweep.formats.corpus import Corpus, load_corpus
from sweep.formats.golden import load_golden
from sweep.label import main as label_main
from sweep.labelling.app import create_app, server
from sweep.labelling.golden_file import open_golden
from sweep.labelling.queue import Queue

LIMIT = 1024 * 1024
TOO_LARGE = (
    "Not saved: the request{} is over the app's limit of 1,048,576 bytes (1 MiB) for one change; nothing was written"
)
FOREIGN = "refused: a change sent from another page ({}); the app takes changes only from its own page, {}/"
DOT_ID = "new question: question id {!r} cannot be opened in the labelling app (browsers drop '.' and '..' from addresses): choose another id"
ODD_IDS = [
    "a/b",
    "a?b",
    "a#b",
    "50%",
    "a%2Fb",
    "é✓",
    "a b",
    "a%20b",
    "HR Policies/Leave Policy.md",
    "tab\tx",
    'a|"b"',
    "x/grade",
    "a+b",
    "../x",
    "a/./b",
    "a\\b",
]


@dataclass(frozen=True)
class App:
    url: str  # http://127.0.0.1:PORT, no trailing slash
    port: int
    golden: Path
    corpus: Corpus

    def questions(self) -> dict:
        return load_golden(self.golden, self.corpus, warn=False).by_id

    @property
    def backup(self) -> Path:
        return self.golden.with_name(self.golden.name + ".bak")


@pytest.fixture
def app(tmp_path, small_kb_files) -> Iterator[App]:
    """The app's own server (`sweep.labelling.app.server`, threaded werkzeug) on a free port of
    127.0.0.1, on a copy of the small knowledge base's golden set, without a queue."""
    golden = tmp_path / "golden.jsonl"
    shutil.copyfile(small_kb_files / "golden.jsonl", golden)
    corpus = load_corpus(small_kb_files / "corpus.jsonl")
    serving = server(create_app(open_golden(golden, corpus), Queue(), "tester"), 0)
    # polled every 50 ms (werkzeug's default, 0.5 s, is what each test's shutdown would wait)
    threading.Thread(target=serving.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    port = serving.server_address[1]
    try:
        yield App(f"http://127.0.0.1:{port}", port, golden, corpus)
    finally:
        serving.shutdown()


def send(app: App, method: str, path: str, body=None, headers=None) -> tuple[int, http.client.HTTPMessage, bytes]:
    """One request over a new connection: status, headers, body. A JSON-able `body` is sent as JSON."""
    headers = dict(headers or {})
    if body is not None and not isinstance(body, bytes) and not hasattr(body, "__next__"):
        body = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    connection = http.client.HTTPConnection("127.0.0.1", app.port, timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers, encode_chunked=hasattr(body, "__next__"))
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def answer(app: App, method: str, path: str, body=None, headers=None) -> tuple[int, dict]:
    status, _, data = send(app, method, path, body, headers)
    return status, json.loads(data)


def version(app: App, qid: str) -> str:
    status, data = answer(app, "GET", f"/api/questions/{quote(qid, safe='')}")
    assert status == 200, data
    return data["question"]["version"]


def exactly(size: int) -> bytes:
    """A JSON body of `size` bytes adding a question."""
    head, tail = b'{"question": "', b'"}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


# ---------------------------------------------------------------- the body limit


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
@pytest.mark.parametrize("path", ["/api/questions", "/api/questions/a001/grade"])
def test_a_2_mb_body_is_refused_with_413_and_nothing_is_written(app, path, content_type):
    before = app.golden.read_bytes()
    body = json.dumps({"question": "x" * 2_000_000, "doc": app.corpus.documents[0].id, "grade": 2}).encode()
    status, data = answer(app, "POST", path, body, {"Content-Type": content_type})
    assert (status, data) == (413, {"error": TOO_LARGE.format(f" ({len(body):,} bytes)")})
    assert app.golden.read_bytes() == before and not app.backup.exists()


def test_a_streamed_body_over_the_limit_is_refused_too(app):
    before = app.golden.read_bytes()
    chunks = iter([b'{"question": "'] + [b"x" * 100_000] * 20 + [b'"}'])  # chunked: no Content-Length
    status, data = answer(app, "POST", "/api/questions", chunks, {"Content-Type": "application/json"})
    assert (status, data) == (413, {"error": TOO_LARGE.format("")})
    assert app.golden.read_bytes() == before and not app.backup.exists()


def test_the_limit_is_1_mib_exactly(app):
    before = app.golden.read_bytes()
    status, data = answer(app, "POST", "/api/questions", exactly(LIMIT + 1), {"Content-Type": "application/json"})
    assert (status, data) == (413, {"error": TOO_LARGE.format(f" ({LIMIT + 1:,} bytes)")})
    assert app.golden.read_bytes() == before
    status, data = answer(app, "POST", "/api/questions", exactly(LIMIT), {"Content-Type": "application/json"})
    assert status == 201
    assert len(app.questions()[data["question"]["id"]].question) == LIMIT - len(exactly(0))


# ---------------------------------------------------------------- framing and the page's policy


def test_every_answer_forbids_framing_and_the_page_runs_only_its_own_script_and_style(app):
    answers = [
        send(app, "GET", "/"),
        send(app, "GET", "/api/state"),
        send(app, "GET", "/api/questions/nope"),
        send(app, "GET", "/nowhere"),
        send(app, "POST", "/api/questions", exactly(LIMIT + 1)),
        send(app, "POST", "/api/questions", {"question": "?"}, {"Origin": "http://evil.example"}),
    ]
    assert [status for status, _, _ in answers] == [200, 200, 404, 404, 413, 403]
    for _, headers, _ in answers:
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["X-Content-Type-Options"] == "nosniff"
        policy = headers["Content-Security-Policy"].split("; ")
        assert re.fullmatch(r"script-src 'sha256-[A-Za-z0-9+/]{43}='", policy[1])
        assert re.fullmatch(r"style-src 'sha256-[A-Za-z0-9+/]{43}='", policy[2])
        assert policy[:1] + policy[3:] == [
            "default-src 'none'",
            "connect-src 'self'",
            "img-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    assert json.loads(answers[3][2]) == {
        "error": "404 Not Found: The requested URL was not found on the server. If you entered the URL manually "
        "please check your spelling and try again."
    }


# ---------------------------------------------------------------- Origin


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1", "https://127.0.0.1"])
def test_a_write_from_another_origin_is_403_and_changes_nothing(app, origin):
    before = app.golden.read_bytes()
    current = version(app, "a001")
    doc = app.corpus.documents[0].id
    writes = [
        ("POST", "/api/questions", {"question": "Who approves travel?"}),
        ("POST", "/api/questions/a001/grade", {"doc": doc, "grade": 2, "version": current}),
        ("POST", "/api/questions/a001", {"question": "changed", "version": current}),
        ("POST", "/api/questions/a001/delete", {"version": current}),
        ("PUT", "/api/questions/a001", {"question": "changed", "version": current}),
        ("DELETE", "/api/questions/a001", None),
    ]
    for method, path, body in writes:
        status, data = answer(app, method, path, body, {"Origin": origin})
        assert (status, data) == (403, {"error": FOREIGN.format(origin, app.url)}), (method, path)
    assert app.golden.read_bytes() == before and not app.backup.exists()


def test_a_write_from_the_apps_own_page_or_without_origin_is_taken_and_reads_are_answered(app):
    own = [{}, {"Origin": app.url}, {"Origin": f"http://localhost:{app.port}", "Host": f"localhost:{app.port}"}]
    for n, headers in enumerate(own):
        status, data = answer(app, "POST", "/api/questions", {"id": f"own{n}", "question": "?"}, headers)
        assert status == 201, data
    assert {"own0", "own1", "own2"} <= set(app.questions())
    status, headers, _ = send(app, "GET", "/api/state", headers={"Origin": "http://evil.example"})
    assert status == 200 and "Access-Control-Allow-Origin" not in headers  # the other page cannot read it


# ---------------------------------------------------------------- ids in addresses


@pytest.mark.parametrize("qid", ODD_IDS)
def test_a_question_id_with_any_character_can_be_added_opened_graded_and_deleted(app, qid):
    path = f"/api/questions/{quote(qid, safe='')}"
    doc = app.corpus.documents[0].id
    status, data = answer(app, "POST", "/api/questions", {"id": qid, "question": "Which form?"})
    assert (status, data["question"]["id"]) == (201, qid)
    status, data = answer(app, "GET", path)
    assert (status, data["question"]["id"]) == (200, qid)
    status, data = answer(app, "POST", f"{path}/grade", {"doc": doc, "grade": 2, "version": version(app, qid)})
    assert (status, data["question"]["id"]) == (200, qid)
    assert app.questions()[qid].relevant == {doc: 2}
    status, _ = answer(app, "POST", f"{path}/delete", {"version": version(app, qid)})
    assert status == 200 and qid not in app.questions()


@pytest.mark.parametrize("qid", [".", ".."])
def test_a_dot_id_is_refused_when_added(app, qid):
    before = app.golden.read_bytes()
    status, data = answer(app, "POST", "/api/questions", {"id": qid, "question": "?"})
    assert (status, data) == (400, {"error": DOT_ID.format(qid)})
    assert app.golden.read_bytes() == before


def test_a_golden_file_with_a_dot_id_is_refused_at_the_start(tmp_path, small_kb_files, capsys):
    golden = tmp_path / "golden.jsonl"
    record = {"id": "..", "question": "?", "relevant": {}}
    golden.write_text((small_kb_files / "golden.jsonl").read_text() + json.dumps(record) + "\n")
    before = golden.read_bytes()
    with socket.create_server(("127.0.0.1", 0)) as taken, pytest.raises(SystemExit) as stopped:
        port = str(taken.getsockname()[1])  # were the file taken, the port would stop it: never a server that waits
        label_main([str(golden), "--corpus", str(small_kb_files / "corpus.jsonl"), "--port", port])
    assert stopped.value.code == 2
    assert capsys.readouterr().err == f"error: {DOT_ID.replace('new question', str(golden)).format('..')}\n"
    assert golden.read_bytes() == before


def test_a_lone_surrogate_is_refused_with_a_message(app):
    before = app.golden.read_bytes()
    body = b'{"id": "\\ud800", "question": "?"}'
    status, data = answer(app, "POST", "/api/questions", body, {"Content-Type": "application/json"})
    assert (status, data) == (400, {"error": "the change holds text that is not valid Unicode (a lone surrogate)"})
    assert app.golden.read_bytes() == before


# ---------------------------------------------------------------- in a real browser


@pytest.mark.slow
def test_questions_a_b_and_other_odd_ids_are_usable_in_the_browser_under_the_pages_policy(browser, app):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    # every CSP violation the page would meet, from before its first script runs
    browser.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument",
        {
            "source": "window.violations = []; document.addEventListener('securitypolicyviolation',"
            " (e) => window.violations.push(`${e.violatedDirective} ${e.blockedURI}`));"
        },
    )
    find, text = browser.find_element, lambda id_: browser.find_element(By.ID, id_).text
    status = lambda: text("save-status")  # noqa: E731
    browser.get(app.url)
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#question-list li[data-qid='a001']"), what="the list")
    heading = "return getComputedStyle(document.querySelector('header.top')).backgroundColor"
    assert browser.execute_script(heading) == "rgb(32, 48, 74)"  # the inline style applies
    ids = {"a/b": app.corpus.documents[1].id, "50%a?b#c": app.corpus.documents[2].id, "é✓/..": None}
    for qid, doc in ids.items():
        find(By.ID, "new-id").send_keys(qid)
        find(By.ID, "new-text").send_keys(f"Which document answers {qid}?")
        find(By.ID, "add-question").click()
        wait_for(lambda qid=qid: text("qid") == qid, what=f"question {qid} shown")
        if doc:  # graded from a search result
            find(By.ID, "search").send_keys(doc, Keys.ENTER)
            find_doc = f"#search-results button[data-doc='{doc}']"
            wait_for(lambda found=find_doc: browser.find_elements(By.CSS_SELECTOR, found), what=f"{doc} found")
            find(By.CSS_SELECTOR, find_doc).click()  # added to the question's candidates once saved
            grade = f".candidate[data-doc='{doc}'] button[data-grade='2']"
            wait_for(lambda grade=grade: browser.find_elements(By.CSS_SELECTOR, grade), what=f"{doc} added")
            find(By.CSS_SELECTOR, grade).click()
            wait_for(lambda qid=qid: app.questions()[qid].relevant, what=f"{qid}'s grade saved")
            assert app.questions()[qid].relevant == {doc: 2}
        else:  # marked unanswerable
            find(By.ID, "unanswerable").click()
            wait_for(lambda qid=qid: app.questions()[qid].tags == ("unanswerable",), what=f"{qid} marked")
        assert status().startswith("all changes saved"), status()

    browser.refresh()  # each one opens from the list, as saved
    for qid, doc in ids.items():
        wait_for(
            lambda qid=qid: browser.find_elements(By.CSS_SELECTOR, f"#question-list li[data-qid='{qid}']"), what=qid
        )
        find(By.CSS_SELECTOR, f"#question-list li[data-qid='{qid}'] button").click()
        wait_for(lambda qid=qid: text("qid") == qid, what=f"{qid} opened")
        if doc:
            active = f".candidate[data-doc='{doc}'] button.active"
            wait_for(
                lambda active=active: [b.text for b in browser.find_elements(By.CSS_SELECTOR, active)] == ["2"],
                what=doc,
            )
        else:
            assert find(By.ID, "unanswerable").is_selected()

    find(By.ID, "delete-question").click()  # the last one opened
    browser.switch_to.alert.accept()
    wait_for(lambda: "é✓/.." not in app.questions(), what="the deletion")
    before = app.golden.read_bytes()
    find(By.ID, "new-id").send_keys("..")
    find(By.ID, "new-text").send_keys("Dots?")
    find(By.ID, "add-question").click()
    wait_for(lambda: text("message") == DOT_ID.format(".."), what="the refusal")
    assert status() == "not saved" and app.golden.read_bytes() == before

    find(By.ID, "new-id").clear()  # a 2 MB question, pasted: the page shows the 413's message
    browser.execute_script("document.getElementById('new-text').value = 'x'.repeat(2000000)")
    find(By.ID, "add-question").click()
    sent = {"id": "", "question": "x" * 2_000_000, "type": "", "filters": {}}  # as the page's JSON.stringify
    size = len(json.dumps(sent, separators=(",", ":")))
    wait_for(lambda: text("message") == TOO_LARGE.format(f" ({size:,} bytes)"), what="the 413 message")
    assert status() == "not saved" and app.golden.read_bytes() == before
    assert browser.execute_script("return window.violations") == []


@pytest.mark.slow
def test_another_page_cannot_frame_the_app(browser, app):
    from selenium.webdriver.common.by import By

    browser.get(f"data:text/html,<iframe src='{app.url}/' width=800 height=600></iframe>")
    frame = wait_for(lambda: browser.find_elements(By.TAG_NAME, "iframe"), what="the frame")[0]
    browser.switch_to.frame(frame)
    url = wait_for(
        lambda: browser.execute_script("return document.readyState === 'complete' && document.URL"), what="load"
    )
    assert url.startswith("chrome-error://")  # Chromium's page for a refused frame, not the app
    assert browser.find_elements(By.ID, "question-list") == []
