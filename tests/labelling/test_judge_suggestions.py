"""The labelling app shows the LLM judge's grades as suggestions (issue 45): beside each candidate nobody has
graded, one key accepts one as the person's grade, and nothing of the judge's is written; over real HTTP to
the app on 127.0.0.1, in a real `python -m sweep.label --judgments` process, and in headless Chromium."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests

from helpers import processes
from helpers.labelling import POOLED, START_TIMEOUT, Data, Server, saved, wait_for
from helpers.servers import free_port, wait_until_answering
from sweep.formats.judgments import JudgeGrade, write_judgments
from sweep.label import judge_suggestions
from sweep.label import main as label_main
from sweep.labelling.app import create_app, server
from sweep.labelling.golden_file import open_golden
from sweep.labelling.queue import load_queue

MODEL, HASH = "qwen2.5:7b", "3f2a9c1b"
JUDGE = f"llm:{MODEL}@{HASH}"


def judged(qid: str, doc: str, grade: int | None) -> JudgeGrade:
    return JudgeGrade(
        qid, doc, grade, MODEL, HASH, 412, 96, None if grade is None else f"##final score: {grade}",
        "2026-12-06T10:00:00Z",
    )  # fmt: skip


@pytest.fixture
def judgments(data: Data) -> Path:
    """The judge's grades of POOLED's pooled documents: 3 (UMBRELA's top), 1, none read, and the
    fourth not asked; and of a document a person graded already."""
    person_graded = next(iter(data.load().by_id[POOLED].relevant))
    path = data.folder / "judgments.jsonl"
    grades = [(data.pooled[0], 3), (data.pooled[1], 1), (data.pooled[2], None), (person_graded, 0)]
    write_judgments(path, [judged(POOLED, doc, grade) for doc, grade in grades])
    return path


def suggestions(question: dict) -> dict[str, dict | None]:
    return {c["doc"]: c["suggestion"] for c in question["candidates"]}


@pytest.fixture
def app_url(data, judgments) -> Iterator[str]:
    """The app's own threaded werkzeug server on a free port of 127.0.0.1, grading as `ana`, with the judge's grades."""
    app = create_app(
        open_golden(data.golden, data.corpus),
        load_queue(data.queue, data.corpus),
        "ana",
        judge_suggestions(judgments, data.corpus),
    )
    serving = server(app, 0)
    threading.Thread(target=serving.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{serving.server_address[1]}/"
    finally:
        serving.shutdown()


def test_suggestions_are_shown_written_nowhere_and_accepted_as_the_persons_grade(data, judgments, app_url):
    before = data.golden.read_bytes()
    first, second, unread, unasked = data.pooled
    question_url = f"{app_url}api/questions/{POOLED}"
    question = requests.get(question_url, timeout=30).json()["question"]
    shown = suggestions(question)
    expected = {"by": JUDGE, "model": MODEL, "at": "2026-12-06T10:00:00Z"}
    assert shown[first] == {"grade": 2, "judge_grade": 3, **expected}  # UMBRELA's 3: the app's top grade
    assert shown[second] == {"grade": 1, "judge_grade": 1, **expected}
    assert shown[unread] == {"grade": None, "judge_grade": None, **expected}  # "judge: no grade"
    assert shown[unasked] is None
    assert [doc for doc, s in shown.items() if s is not None] == [first, second, unread]  # none for a graded one
    assert requests.get(f"{app_url}api/state", timeout=30).json()["progress"]["suggestions"] == 2

    assert data.golden.read_bytes() == before  # loading and showing the judgments wrote nothing
    assert not data.golden.with_name(data.golden.name + ".bak").exists()

    since = datetime.now(UTC).replace(microsecond=0)
    body = {"doc": first, "grade": shown[first]["grade"], "version": question["version"]}  # what "accept" sends
    answer = requests.post(f"{question_url}/grade", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    graded = data.load().by_id[POOLED]
    assert graded.relevant[first] == 2 and graded.provenance[first].by == "ana"
    assert since <= datetime.fromisoformat(graded.provenance[first].at) <= datetime.now(UTC)
    assert suggestions(answer.json()["question"])[first] is None  # the person's grade replaces the suggestion
    assert answer.json()["progress"]["suggestions"] == 1
    assert JUDGE not in data.golden.read_text() and '"by": "llm:' not in data.golden.read_text()


def test_without_judgments_there_is_no_suggestion(client):
    question = client.get(f"/api/questions/{POOLED}").get_json()["question"]
    assert set(suggestions(question).values()) == {None}
    assert client.get("/api/state").get_json()["progress"]["suggestions"] is None


@pytest.fixture
def judged_server(data, judgments) -> Iterator[Server]:
    """`python -m sweep.label --judgments ... --labeller ana` on `data`, killed after the test."""
    port = free_port()
    command = [sys.executable, "-m", "sweep.label", str(data.golden), "--pool", str(data.queue)]
    command += ["--port", str(port), "--labeller", "ana", "--judgments", str(judgments)]
    process = processes.start(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/"
    running = Server(process, url)
    try:
        wait_until_answering(url, process, lambda: "".join(process.communicate()), START_TIMEOUT)
        yield running
    finally:
        running.kill()


def suggestion_shown(browser, doc: str) -> tuple[str, str] | None:
    """The suggestion's text and tooltip on `doc`'s card, or None."""
    return browser.execute_script(
        """const card = [...document.querySelectorAll('.candidate')].find((c) => c.dataset.doc === arguments[0]);
        const shown = card.querySelector('.suggestion');
        return shown ? [shown.firstChild.textContent, shown.title] : null;""",
        doc,
    )


@pytest.mark.slow
def test_the_accept_key_saves_the_suggested_grade_as_the_persons(browser, data, judged_server):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    before = data.golden.read_bytes()
    first, second, unread, unasked = data.pooled
    browser.get(judged_server.url)
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, f".candidate[data-doc='{first}']"), what="the candidates")
    text, tooltip = suggestion_shown(browser, first)
    assert text == "judge: 3 → 2" and tooltip.startswith(JUDGE) and "the top grade here" in tooltip
    assert suggestion_shown(browser, second)[0] == "judge: 1"
    assert suggestion_shown(browser, unread)[0] == "judge: no grade"
    assert suggestion_shown(browser, unasked) is None
    assert browser.find_element(By.CSS_SELECTOR, "[data-progress='suggestions']").text == "2"
    assert "accept the judge's suggested grade" in browser.find_element(By.TAG_NAME, "footer").text
    assert data.golden.read_bytes() == before  # the page showed them; nothing was written

    # the first ungraded candidate has focus: `a` grades it 2, moves on to the next, and `a` grades that 1
    ActionChains(browser).send_keys("a", "a").perform()
    expected = {first: 2, second: 1}
    wait_for(lambda: {doc: data.load().by_id[POOLED].relevant.get(doc) for doc in expected} == expected, what="grades")
    wait_for(lambda: saved(browser), what="the page saying so")
    provenance = data.load().by_id[POOLED].provenance
    assert {doc: provenance[doc].by for doc in expected} == {first: "ana", second: "ana"}
    assert suggestion_shown(browser, first) is None and suggestion_shown(browser, second) is None
    assert browser.find_element(By.CSS_SELECTOR, "[data-progress='suggestions']").text == "0"
    records = [json.loads(line) for line in data.golden.read_text().splitlines()]
    bys = [j["by"] for r in records for j in r["relevant"].values() if isinstance(j, dict) and "by" in j]
    assert bys and not [by for by in bys if by.startswith("llm:")]

    # the focus is on the candidate whose judgment has no grade: `a` there saves nothing and says why
    written = data.golden.read_bytes()
    ActionChains(browser).send_keys("a").perform()
    wait_for(lambda: f"no judge's grade to accept for {unread}" in browser.find_element(By.ID, "message").text)
    assert data.golden.read_bytes() == written


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (None, "judgments.jsonl: no such judgments file (python -m sweep.judge grade writes one)"),
        ('{"qid": "a001", "doc": "DOC", "grade": "two"}', "judgments.jsonl:1: 'grade' is 'two'; expected a whole number"),
        ("not json", "judgments.jsonl:1:"),
        ('{"qid": "a001", "doc": "no-such-doc", "grade": 1, "model": "m", "prompt_hash": "h", "prompt_tokens": 1, '
         '"completion_tokens": 1, "final_line": null, "at": "2026-12-06T10:00:00Z"}',
         "judgments.jsonl: question 'a001': document 'no-such-doc' is not in the corpus"),
    ],
)  # fmt: skip
def test_a_bad_judgments_file_is_one_line_and_exit_2(data, capsys, line, message):
    path = data.folder / "judgments.jsonl"
    if line is not None:
        path.write_text(line.replace("DOC", data.pooled[0]) + "\n", encoding="utf-8")
    before = data.golden.read_bytes()
    with pytest.raises(SystemExit) as stopped:
        label_main([str(data.golden), "--pool", str(data.queue), "--port", "0", "--judgments", str(path)])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and err.endswith("\n")
    assert message in err
    assert data.golden.read_bytes() == before
