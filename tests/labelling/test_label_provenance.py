"""The labelling app records who graded what and when (issue 44): `by` from `--labeller` (by default the
user name), `at` the time in UTC, on every grade a person gives or changes and on no other; over real HTTP
to the app on 127.0.0.1, in a real `python -m sweep.label` process, and in headless Chromium."""

from __future__ import annotations

import getpass
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import requests

from helpers.labelling import POOLED, Data, saved, wait_for
from sweep.formats.golden import Provenance
from sweep.label import main as label_main
from sweep.labelling.app import create_app, server
from sweep.labelling.golden_file import open_golden
from sweep.labelling.queue import load_queue

BOB = {"by": "bob", "at": "2026-01-05T09:00:00Z"}


def with_bobs_grades(data: Data) -> tuple[dict[str, int], str]:
    """POOLED's judged documents graded by bob on 2026-01-05, and the last pooled one graded 0 as old
    files have it, a bare grade: bob's grades, and that document."""
    records = [json.loads(line) for line in data.golden.read_text().splitlines()]
    question = next(r for r in records if r["id"] == POOLED)
    bobs, bare = dict(question["relevant"]), data.pooled[-1]
    question["relevant"] = {doc: {"grade": grade, **BOB} for doc, grade in bobs.items()} | {bare: 0}
    data.golden.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return bobs, bare


@pytest.fixture
def app_url(data) -> Iterator[str]:
    """The app's own threaded werkzeug server on a free port of 127.0.0.1, grading as `ana`."""
    serving = server(create_app(open_golden(data.golden, data.corpus), load_queue(data.queue, data.corpus), "ana"), 0)
    threading.Thread(target=serving.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{serving.server_address[1]}/api/questions/{POOLED}"
    finally:
        serving.shutdown()


def post(url: str, path: str, **body) -> dict:
    body["version"] = requests.get(url, timeout=30).json()["question"]["version"]
    answer = requests.post(url + path, json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def just_now(at: str | None, since: datetime) -> bool:
    """`at` is a time in UTC between `since` (to the second) and now."""
    when = datetime.fromisoformat(at or "")
    return when.utcoffset() == timedelta(0) and since.replace(microsecond=0) <= when <= datetime.now(UTC)


def test_a_grade_given_or_changed_is_by_the_labeller_now_and_the_others_keep_theirs(data, app_url):
    bobs, bare = with_bobs_grades(data)
    bob = next(iter(bobs))
    since = datetime.now(UTC)
    new, evidence_doc = data.pooled[:2]

    shown = post(app_url, "/grade", doc=new, grade=2)["question"]["candidates"]
    question = data.load().by_id[POOLED]
    assert question.relevant[new] == 2 and question.provenance[new].by == "ana"
    assert just_now(question.provenance[new].at, since)
    assert next(c for c in shown if c["doc"] == new)["graded_by"] == "ana"  # the page is told too
    assert {doc: question.provenance[doc] for doc in bobs} == {doc: Provenance(**BOB) for doc in bobs}
    assert bare not in question.provenance  # untouched: still a bare grade

    post(app_url, "/grade", doc=bob, grade=bobs[bob])  # the grade it has: nothing changed
    assert data.load().by_id[POOLED].provenance[bob] == Provenance(**BOB)
    post(app_url, "/grade", doc=bob, grade=1 - min(bobs[bob], 1))  # changed: now ana's
    assert data.load().by_id[POOLED].provenance[bob].by == "ana"

    content = data.corpus.by_id[evidence_doc].content
    post(app_url, "/evidence", doc=evidence_doc, start=0, end=20, text=content[:20])  # grades it 1
    assert data.load().by_id[POOLED].provenance[evidence_doc].by == "ana"

    post(app_url, "/grade", doc=new, grade=None)  # cleared: no judgment, no provenance
    record = next(r for r in map(json.loads, data.golden.read_text().splitlines()) if r["id"] == POOLED)
    assert new not in record["relevant"] and record["relevant"][bare] == 0


@pytest.mark.slow
def test_python_m_sweep_label_records_the_user_name_by_default(data, server):
    url = f"{server.url}api/questions/{POOLED}"
    since = datetime.now(UTC)
    post(url, "/grade", doc=data.pooled[0], grade=1)
    graded = data.load().by_id[POOLED].provenance[data.pooled[0]]
    assert graded.by == getpass.getuser() and just_now(graded.at, since)


@pytest.mark.slow
def test_a_grade_given_in_a_browser_records_who_and_when(browser, data, server):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    since = datetime.now(UTC)
    browser.get(server.url)
    card = f".candidate[data-doc='{data.pooled[0]}']"
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, card), what="the pooled candidates")
    ActionChains(browser).send_keys("2").perform()  # the first ungraded candidate
    wait_for(lambda: saved(browser) and data.pooled[0] in data.load().by_id[POOLED].provenance, what="the grade")
    graded = data.load().by_id[POOLED].provenance[data.pooled[0]]
    assert graded.by == getpass.getuser() and just_now(graded.at, since)
    browser.refresh()
    shown = f"{card} .graded-by"
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, shown), what="the reloaded card")
    assert browser.find_element(By.CSS_SELECTOR, shown).text == f"graded by {graded.by} at {graded.at}"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("llm:gpt-4o@3f9a", "error: --labeller 'llm:gpt-4o@3f9a': expected a person's name, recorded as 'by' with each grade"),
        ("  ", "error: --labeller '  ': expected a person's name, recorded as 'by' with each grade"),
    ],
)  # fmt: skip
def test_a_labeller_that_is_no_person_is_one_line_and_exit_2(data, capsys, name, message):
    before = data.golden.read_bytes()
    with pytest.raises(SystemExit) as stopped:
        label_main([str(data.golden), "--pool", str(data.queue), "--port", "0", "--labeller", name])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip() == message
    assert data.golden.read_bytes() == before


def test_no_user_name_asks_for_the_labeller(data, capsys, monkeypatch):
    def nobody() -> str:
        raise OSError("no user name")

    monkeypatch.setattr(getpass, "getuser", nobody)
    with pytest.raises(SystemExit) as stopped:
        label_main([str(data.golden), "--pool", str(data.queue), "--port", "0"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip() == "error: no user name to record with the grades: give --labeller NAME"
