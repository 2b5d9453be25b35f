"""`python -m sweep.label`: the labelling app in a real headless Chromium (Debian's, through Selenium),
its policies through Flask's test client, stale writes from two "tabs", and kill -9 while it saves:
after every step the golden file must load with `sweep.formats.golden.load_golden` against the corpus."""

from __future__ import annotations

import json
import random
import shutil
import socket
import stat
import threading
import time
from dataclasses import replace

import pytest
import requests

from helpers.labelling import POOLED, change, saved, start_server, wait_for
from helpers.paths import KB
from sweep.errors import InputError
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import GoldenSet, Span, load_golden, save_golden
from sweep.label import main as label_main
from sweep.labelling.app import create_app
from sweep.labelling.golden_file import GoldenFile
from sweep.labelling.queue import Queue


def select_text(driver, doc: str, excerpt: str) -> None:
    """Select `excerpt` in the document element of `doc` with a DOM Range, as a mouse would."""
    driver.execute_script(
        """
        const [doc, excerpt] = arguments;
        const pre = [...document.querySelectorAll('pre.document')].find((p) => p.dataset.doc === doc);
        const at = pre.textContent.indexOf(excerpt);
        if (at < 0) throw new Error('excerpt not shown');
        const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
        const range = document.createRange();
        let seen = 0, node;
        while ((node = walker.nextNode())) {
          const length = node.data.length;
          if (seen <= at && at < seen + length) range.setStart(node, at - seen);
          if (seen < at + excerpt.length && at + excerpt.length <= seen + length) range.setEnd(node, at + excerpt.length - seen);
          seen += length;
        }
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        """,
        doc,
        excerpt,
    )


@pytest.mark.slow
def test_label_in_a_browser_then_kill_it_while_it_saves(browser, data, server):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    by_css = browser.find_element
    browser.get(server.url)
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, f"#question-list li[data-qid='{POOLED}']"), what="list")
    card = ".candidate[data-doc='{}']"

    # a new question, answered from a document found by search
    by_css(By.ID, "new-text").send_keys("How do I claim back the cost of a train ticket?")
    by_css(By.ID, "new-type").send_keys("howto")
    by_css(By.ID, "add-question").click()
    wait_for(lambda: by_css(By.ID, "qid").text == "q001", what="the new question")
    found = data.pooled[0]
    by_css(By.ID, "search").send_keys(found, Keys.ENTER)
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, f"#search-results button[data-doc='{found}']"))
    by_css(By.CSS_SELECTOR, f"#search-results button[data-doc='{found}']").click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, card.format(found)), what="the added candidate")
    by_css(By.CSS_SELECTOR, card.format(found) + " button[data-grade='2']").click()
    wait_for(lambda: saved(browser) and data.load().by_id["q001"].relevant == {found: 2}, what="the graded result")

    # three pooled candidates: a click, then keys (a grade moves on to the next ungraded candidate)
    by_css(By.CSS_SELECTOR, f"#question-list li[data-qid='{POOLED}'] button").click()
    wait_for(lambda: by_css(By.ID, "qid").text == POOLED)
    wait_for(lambda: "loading" not in by_css(By.CSS_SELECTOR, f"pre.document[data-doc='{data.pooled[0]}']").text)
    by_css(By.CSS_SELECTOR, card.format(data.pooled[0]) + " button[data-grade='2']").click()
    wait_for(lambda: saved(browser))
    keys = ActionChains(browser)
    keys.send_keys("1").perform()
    wait_for(lambda: saved(browser) and load_golden(data.golden, warn=False).by_id[POOLED].relevant.get(data.pooled[1]))
    keys.send_keys("0").perform()
    wait_for(lambda: saved(browser) and data.pooled[2] in load_golden(data.golden, warn=False).by_id[POOLED].relevant)

    # evidence: select a sentence of the first candidate and record it
    content = data.corpus.by_id[data.pooled[0]].content
    excerpt = next(line for line in content.splitlines()[2:] if len(line) > 40)[:40].strip()
    wait_for(lambda: "loading" not in by_css(By.CSS_SELECTOR, f"pre.document[data-doc='{data.pooled[0]}']").text)
    select_text(browser, data.pooled[0], excerpt)
    by_css(By.CSS_SELECTOR, card.format(data.pooled[0]) + " button.capture").click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, card.format(data.pooled[0]) + " .evidence-list li"))
    assert excerpt in by_css(By.CSS_SELECTOR, card.format(data.pooled[0]) + " mark.evidence").text

    # another question, marked unanswerable
    by_css(By.ID, "new-text").send_keys("Is there a company yacht for team outings?")
    by_css(By.ID, "add-question").click()
    wait_for(lambda: by_css(By.ID, "qid").text == "q002")
    by_css(By.ID, "unanswerable").click()
    wait_for(lambda: saved(browser) and "unanswerable" in by_css(By.ID, "qstatus").text)

    # reload: everything is there, in the page and in the file
    browser.refresh()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#question-list li[data-qid='q002']"), what="reload")
    by_css(By.CSS_SELECTOR, f"#question-list li[data-qid='{POOLED}'] button").click()
    wait_for(lambda: by_css(By.ID, "qid").text == POOLED)
    expected = {data.pooled[0]: "2", data.pooled[1]: "1", data.pooled[2]: "0"}

    def active() -> dict[str, str]:  # the grade buttons shown as chosen (the cards render as documents load)
        return {doc: by_css(By.CSS_SELECTOR, card.format(doc) + " .grades button.active").text for doc in expected}

    wait_for(lambda: active() == expected, what=f"the grades {expected} shown after the reload")
    by_css(By.CSS_SELECTOR, "#question-list li[data-qid='q002'] button").click()
    wait_for(lambda: by_css(By.ID, "qid").text == "q002" and by_css(By.ID, "unanswerable").is_selected())

    golden = data.load()
    pooled = golden.by_id[POOLED]
    assert {d: pooled.relevant[d] for d in data.pooled[:3]} == {data.pooled[0]: 2, data.pooled[1]: 1, data.pooled[2]: 0}
    start = content.index(excerpt)
    assert pooled.evidence[data.pooled[0]] == (Span(start, start + len(excerpt)),)
    raw = load_golden(data.golden, warn=False).by_id[POOLED].evidence[data.pooled[0]]
    assert raw == (Span(start, start + len(excerpt), excerpt),)  # saved with its text
    assert golden.by_id["q001"].relevant == {found: 2} and golden.by_id["q001"].type == "howto"
    assert golden.by_id["q002"].relevant == {} and "unanswerable" in golden.by_id["q002"].tags
    assert golden.by_id["q002"].question == "Is there a company yacht for team outings?"

    # a stream of saves from the page (grades of one document going round 0, 1, 2), then kill -9
    browser.execute_script(
        """
        const [qid, doc] = arguments;
        window.acknowledged = [];
        (async () => {
          for (let i = 0; i < 100000; i++) {
            const grade = i % 3;
            const response = await fetch(`/api/questions/${qid}/grade`, {method: 'POST',
              headers: {'Content-Type': 'application/json'}, body: JSON.stringify({doc, grade, version: state.versions[qid]})});
            if (!response.ok) break;
            const data = await response.json();
            state.versions[qid] = data.question.version;
            window.acknowledged.push(grade);
          }
        })().catch(() => {});
        """,
        POOLED,
        data.pooled[3],
    )
    wait_for(lambda: browser.execute_script("return window.acknowledged.length") >= 20, what="saves")
    server.kill()
    acknowledged = browser.execute_script("return window.acknowledged")
    last = acknowledged[-1]
    grade = data.load().by_id[POOLED].relevant[data.pooled[3]]
    assert grade in (last, (last + 1) % 3)  # the last acknowledged save, or the one in flight
    load_golden(data.golden.with_name("golden.jsonl.bak"), data.corpus, warn=False)


@pytest.mark.slow
def test_two_tabs_in_a_browser_the_stale_one_is_told_and_shows_the_saved_question(browser, data, server):
    from selenium.webdriver.common.by import By

    def open_pooled() -> None:
        browser.get(server.url)
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, f".candidate[data-doc='{data.pooled[1]}']"))

    def grade(doc: str, value: int) -> None:
        browser.find_element(By.CSS_SELECTOR, f".candidate[data-doc='{doc}'] button[data-grade='{value}']").click()

    def active(doc: str) -> list[str]:
        return [b.text for b in browser.find_elements(By.CSS_SELECTOR, f".candidate[data-doc='{doc}'] button.active")]

    open_pooled()
    stale_tab = browser.current_window_handle
    browser.switch_to.new_window("tab")
    open_pooled()
    grade(data.pooled[0], 2)
    wait_for(lambda: saved(browser))
    browser.switch_to.window(stale_tab)
    grade(data.pooled[1], 1)
    wait_for(lambda: "changed in another tab" in browser.find_element(By.ID, "message").text, what="the message")
    assert active(data.pooled[0]) == ["2"] and active(data.pooled[1]) == []  # now shows the saved question
    assert data.pooled[1] not in data.load().by_id[POOLED].relevant
    grade(data.pooled[1], 1)  # again, on the saved version
    wait_for(lambda: saved(browser) and data.load().by_id[POOLED].relevant.get(data.pooled[1]) == 1)
    assert data.load().by_id[POOLED].relevant[data.pooled[0]] == 2


# ---------------------------------------------------------------- the API, from two tabs


@pytest.mark.slow
def test_a_stale_write_from_another_tab_is_refused_and_changes_nothing(data, server):
    url = f"{server.url}api/questions/{POOLED}"
    first, second = data.pooled[:2]
    seen = requests.get(url, timeout=30).json()["question"]["version"]  # both tabs show this version

    tab_a = requests.post(f"{url}/grade", json={"doc": first, "grade": 2, "version": seen}, timeout=30)
    assert tab_a.status_code == 200
    before = data.golden.read_bytes()
    tab_b = requests.post(f"{url}/grade", json={"doc": second, "grade": 1, "version": seen}, timeout=30)
    assert tab_b.status_code == 409
    answer = tab_b.json()
    assert "changed in another tab" in answer["error"]
    assert data.golden.read_bytes() == before  # nothing written
    shown = {c["doc"]: c["grade"] for c in answer["question"]["candidates"]}
    assert shown[first] == 2 and shown[second] is None  # tab B now shows what A saved

    retry = {"doc": second, "grade": 1, "version": answer["question"]["version"]}
    assert requests.post(f"{url}/grade", json=retry, timeout=30).status_code == 200
    relevant = data.load().by_id[POOLED].relevant
    assert relevant[first] == 2 and relevant[second] == 1

    # another question does not conflict with these
    other = requests.get(f"{server.url}api/questions/a005", timeout=30).json()["question"]
    edit = {"question": "who signs off a £40k purchase order?", "type": "factoid", "version": other["version"]}
    assert requests.post(f"{server.url}api/questions/a005", json=edit, timeout=30).status_code == 200
    assert data.load().by_id["a005"].question == "who signs off a £40k purchase order?"


@pytest.mark.slow
def test_kill_9_at_random_moments_while_saving_leaves_a_golden_file_that_loads(data):
    """Two clients save as fast as they can (different questions); the server is killed at a
    random moment, five times over. Every time the file loads, holds every acknowledged change
    (or the one in flight after it), and its backup loads too."""
    rng = random.Random(13)
    targets = {POOLED: data.pooled[3], "a005": data.pooled[0]}
    for _ in range(5):
        server = start_server(data)
        acknowledged: dict[str, list[int]] = {qid: [] for qid in targets}

        def save_in_a_loop(qid: str, doc: str, url: str = server.url, acknowledged: dict = acknowledged) -> None:
            session = requests.Session()
            try:
                version = session.get(f"{url}api/questions/{qid}", timeout=30).json()["question"]["version"]
                for i in range(100000):
                    grade = i % 3
                    answer = session.post(
                        f"{url}api/questions/{qid}/grade", json={"doc": doc, "grade": grade, "version": version}
                    )
                    version = answer.json()["question"]["version"]
                    acknowledged[qid].append(grade)
            except (requests.RequestException, ValueError):
                return  # killed

        clients = [threading.Thread(target=save_in_a_loop, args=item) for item in targets.items()]
        for client in clients:
            client.start()
        time.sleep(rng.uniform(0.3, 1.5))
        server.kill()
        for client in clients:
            client.join(timeout=30)
        golden = data.load()
        for qid, doc in targets.items():
            if acknowledged[qid]:
                last = acknowledged[qid][-1]
                assert golden.by_id[qid].relevant[doc] in (last, (last + 1) % 3)
        assert sum(map(len, acknowledged.values())) > 0, "no save happened before the kill"
        load_golden(data.golden.with_name("golden.jsonl.bak"), data.corpus, warn=False)
    restarted = start_server(data)  # removes what killed saves left behind
    try:
        assert not list(data.folder.glob(".golden.jsonl.*.tmp"))
    finally:
        restarted.kill()


# ---------------------------------------------------------------- policies, in process


def test_evidence_grades_its_document_and_grade_0_removes_it(client, data):
    doc = data.pooled[1]
    content = data.corpus.by_id[doc].content
    start = content.index("\n\n") + 2
    answer = change(client, "/evidence", doc=doc, start=start - 2, end=start + 30, text=content[start - 2 : start + 30])
    assert answer.status_code == 200, answer.get_json()
    assert "graded" in answer.get_json()["notes"][0]
    question = load_golden(data.golden, data.corpus, warn=False).by_id[POOLED]
    assert question.relevant[doc] == 1
    assert question.evidence[doc] == (Span(start, start + 30),)  # the selection's leading blank line trimmed
    answer = change(client, "/grade", doc=doc, grade=0)
    assert "removed 1 evidence item" in answer.get_json()["notes"][0]
    question = data.load().by_id[POOLED]
    assert question.relevant[doc] == 0 and doc not in question.evidence


def test_unanswerable_needs_no_relevant_document_and_a_grade_unmarks_it(client, data):
    answer = change(client, "/unanswerable", value=True)
    assert answer.status_code == 400 and "grade them 0 first" in answer.get_json()["error"]
    for doc in data.load().by_id[POOLED].relevant:
        change(client, "/grade", doc=doc, grade=0)
    assert change(client, "/unanswerable", value=True).status_code == 200
    assert data.load().by_id[POOLED].tags == ("unanswerable",)
    progress = client.get("/api/state").get_json()["progress"]
    assert progress["unanswerable"] == 1 + sum(q.type == "unanswerable" for q in data.load())
    answer = change(client, "/grade", doc=data.pooled[0], grade=1)
    assert answer.get_json()["notes"] == ["no longer marked unanswerable"]
    assert data.load().by_id[POOLED].tags == ()


def test_bad_changes_are_refused_and_change_nothing(client, data):
    before = data.golden.read_bytes()
    unknown = change(client, "/grade", doc="no-such-document", grade=1)
    assert unknown.status_code == 400 and "unknown document id 'no-such-document'" in unknown.get_json()["error"]
    assert change(client, "/grade", doc=data.pooled[0], grade=3).status_code == 400
    wrong = change(client, "/evidence", doc=data.pooled[0], start=0, end=5, text="hello")
    assert wrong.status_code == 400 and "does not read" in wrong.get_json()["error"]
    assert change(client, "", question="x", filters={"colour": "red"}).status_code == 400
    assert client.post("/api/questions", json={"id": POOLED, "question": "again?"}).status_code == 400
    assert client.post(f"/api/questions/{POOLED}/grade", data="not json").status_code == 400
    assert client.get("/api/questions/nope").status_code == 404
    assert client.get("/api/state", headers={"Host": "attacker.example"}).status_code == 400  # DNS rebinding
    assert data.golden.read_bytes() == before


def test_a_new_golden_file_starts_with_its_first_question(tmp_path, data):
    golden = tmp_path / "new" / "golden.jsonl"
    golden.parent.mkdir()
    client = create_app(GoldenFile(golden, data.corpus), Queue(), "tester").test_client()
    assert client.get("/api/state").get_json()["questions"] == []
    answer = client.post(
        "/api/questions", json={"question": "Who approves travel?", "filters": {"department": "Finance"}}
    )
    assert answer.status_code == 201
    [question] = load_golden(golden, data.corpus, warn=False)
    assert (question.id, question.filters, question.relevant) == ("q001", {"department": "Finance"}, {})
    version = answer.get_json()["question"]["version"]
    refused = client.post("/api/questions/q001/delete", json={"version": version})
    assert refused.status_code == 400 and "last question" in refused.get_json()["error"]


def test_search_finds_a_document_by_words_and_by_id(client, data):
    doc = data.corpus.documents[3]
    by_id = client.get(f"/api/search?q={doc.id}").get_json()["results"]
    assert by_id[0]["doc"] == doc.id
    words = " ".join(doc.title.split()[:3])
    assert doc.id in [r["doc"] for r in client.get(f"/api/search?q={words}").get_json()["results"]]


@pytest.mark.parametrize(
    "problem, expected",
    [
        ("malformed", "malformed JSON"),
        ("unknown document", "which is not in the corpus"),
        ("queue", "is not in the corpus"),
        ("yaml", "edits a JSON Lines golden set"),
    ],
)
def test_bad_input_at_the_start_is_one_line_and_exit_2(data, capsys, problem, expected):
    golden, queue = data.golden, data.queue
    if problem == "malformed":
        golden.write_text(golden.read_text() + "{not json\n")
    elif problem == "unknown document":
        record = {"id": "z", "question": "?", "relevant": {"no-such-doc": 1}}
        golden.write_text(golden.read_text() + json.dumps(record) + "\n")
    elif problem == "queue":
        queue.write_text(queue.read_text().replace(data.pooled[0], "no-such-doc"))
    else:
        golden = golden.with_suffix(".yaml")
        golden.write_text("- {id: x, question: y, relevant: {}}\n")
    before = golden.read_bytes()
    with pytest.raises(SystemExit) as stopped:
        label_main([str(golden), "--corpus", str(data.corpus_path), "--pool", str(queue), "--port", "0"])
    assert stopped.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and expected in error and "\n" not in error
    assert golden.read_bytes() == before
    assert not golden.with_name(golden.name + ".bak").exists()


# ---------------------------------------------------------------- sweep.formats.golden's writer


def test_save_golden_round_trips_keeps_permissions_and_a_backup(tmp_path):
    bundled = KB
    corpus = load_corpus(bundled / "corpus.jsonl")
    path = tmp_path / "golden.jsonl"
    shutil.copyfile(bundled / "golden.jsonl", path)
    path.chmod(0o640)
    golden = load_golden(path, warn=False)  # as written: excerpts, not resolved spans
    first = golden.questions[0]
    changed = replace(first, relevant={**first.relevant, "hr-sick-leave-faq": 0})
    save_golden(GoldenSet((changed, *golden.questions[1:]), source=str(path)), path, corpus)
    assert path.with_name("golden.jsonl.bak").read_bytes() == (bundled / "golden.jsonl").read_bytes()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    lines = path.read_text().splitlines()
    assert lines[1:] == (bundled / "golden.jsonl").read_text().splitlines()[1:]  # the others byte for byte
    assert load_golden(path, corpus, warn=False).by_id[first.id].relevant["hr-sick-leave-faq"] == 0

    before, backup = path.read_bytes(), path.with_name("golden.jsonl.bak").read_bytes()
    wrong = replace(first, evidence={next(iter(first.relevant)): ("words no document has",)})
    with pytest.raises(InputError, match="is not in the document"):
        save_golden(GoldenSet((wrong, *golden.questions[1:]), source=str(path)), path, corpus)
    assert path.read_bytes() == before and path.with_name("golden.jsonl.bak").read_bytes() == backup
    assert sorted(p.name for p in tmp_path.iterdir()) == ["golden.jsonl", "golden.jsonl.bak"]


def test_a_port_in_use_is_one_line_and_exit_2(data, capsys):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit) as stopped:
            label_main([str(data.golden), "--pool", str(data.queue), "--port", str(port)])
    assert stopped.value.code == 2
    assert (
        capsys.readouterr().err
        == f"error: --port {port}: cannot listen on 127.0.0.1 (Address already in use); choose another\n"
    )
