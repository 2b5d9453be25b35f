"""The labelling page for a person at a keyboard (issue 22), in headless Chromium against `python -m sweep.label`:
the status bar stays in view, one key per judgment, Esc leaves a field, keys work after a click on a
checkbox, a candidate added from search is shown and kept, and no badge of the question list covers an
id; and, in process, how the file keeps a candidate added from search."""

from __future__ import annotations

import pytest

from helpers.labelling import POOLED, change, wait_for

GRADE_KEYS = "10201"
MIN_GAP = 4  # px between a badge and its row's id: touching reads as one word, or overlaps with another font  # one key per ungraded candidate: the four pooled ones and the one added from search


def focused(browser) -> str:
    return browser.execute_script("return document.querySelector('.candidate.focused').dataset.doc")


def in_view(browser, selector: str) -> bool:
    """Whole in the window and below the status bar (which covers the page's top)."""
    return browser.execute_script(
        """
        const box = document.querySelector(arguments[0]).getBoundingClientRect();
        const bar = document.getElementById('status-bar').getBoundingClientRect();
        return box.top >= bar.bottom && box.bottom <= window.innerHeight;
        """,
        selector,
    )


def shown_grades(browser, docs) -> dict[str, str | None]:
    """The grade shown as chosen on each of `docs`' cards."""
    shown = browser.execute_script(
        """return Object.fromEntries([...document.querySelectorAll('.candidate')].map((card) => {
          const active = card.querySelector('.grades .active');
          return [card.dataset.doc, active ? active.textContent : null]; }))"""
    )
    return {doc: shown.get(doc) for doc in docs}


@pytest.mark.slow
def test_a_question_graded_one_key_per_candidate_with_the_status_bar_in_view(browser, data, server):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    def cards() -> list[str]:
        return [card.get_attribute("data-doc") for card in browser.find_elements(By.CSS_SELECTOR, ".candidate")]

    def press(*keys: str) -> None:
        ActionChains(browser).send_keys(*keys).perform()

    browser.get(server.url)
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, f".candidate[data-doc='{data.pooled[0]}']"), what="a001")
    assert browser.find_element(By.ID, "qid").text == POOLED
    assert focused(browser) == data.pooled[0]  # the first candidate without a grade

    # no badge of the question list touches its row's id (an unanswerable badge is the widest)
    rows = browser.execute_script(
        """return [...document.querySelectorAll('#question-list li')].map((li) => {
          const badge = li.querySelector('.badge').getBoundingClientRect(), id = li.querySelector('b').getBoundingClientRect();
          return [li.querySelector('.badge').textContent, badge.right, id.left]; })"""
    )
    assert any("unanswerable" in badge for badge, _, _ in rows)
    assert [row for row in rows if row[2] - row[1] < MIN_GAP] == []

    # Esc leaves the search box: the next j moves to the next candidate instead of being typed
    extra = next(
        d.id for d in data.corpus if d.id not in data.pooled and d.id not in data.load().by_id[POOLED].relevant
    )
    search = browser.find_element(By.ID, "search")
    search.send_keys(extra, Keys.ENTER)
    add = f"#search-results button[data-doc='{extra}']"
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, add), what="the search result")
    press(Keys.ESCAPE, "j")
    assert search.get_attribute("value") == extra and focused(browser) == data.pooled[1]

    # a candidate added from search is scrolled to, focused, saved with the question and there after a reload
    browser.find_element(By.CSS_SELECTOR, add).click()
    card = f".candidate[data-doc='{extra}']"
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, card) and focused(browser) == extra, what="the added card")
    assert in_view(browser, card)
    assert data.load().by_id[POOLED].metadata == {"added_from_search": [extra]}
    browser.refresh()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, card), what="the added candidate after the reload")

    # after a click on the unanswerable checkbox the keys still work; its refusal shows in the status bar,
    # which stays in view at the bottom of the page
    browser.find_element(By.ID, "unanswerable").click()
    wait_for(lambda: "grade them 0 first" in browser.find_element(By.ID, "message").text, what="the refusal")
    press("j")
    assert focused(browser) == data.pooled[1]
    browser.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    assert browser.execute_script("return window.scrollY") > 1000
    assert browser.execute_script("return getComputedStyle(document.getElementById('status-bar')).position") == "sticky"
    for part in ("message", "save-status"):
        top, bottom = browser.execute_script(
            f"const box = document.getElementById('{part}').getBoundingClientRect(); return [box.top, box.bottom]"
        )
        assert 0 <= top < bottom <= browser.execute_script("return window.innerHeight")

    # one key per candidate, typed in one go: each grades the focused candidate and moves on to the next
    # ungraded one (round to the top), and the file holds every grade
    ungraded = [doc for doc in cards() if doc not in data.load().by_id[POOLED].relevant]
    assert len(ungraded) == len(GRADE_KEYS)
    start = ungraded.index(data.pooled[1])
    expected = dict(zip(ungraded[start:] + ungraded[:start], map(int, GRADE_KEYS)))
    press(*GRADE_KEYS)

    def saved_grades() -> dict:
        relevant = data.load().by_id[POOLED].relevant
        return {doc: relevant.get(doc) for doc in expected}

    wait_for(lambda: saved_grades() == expected, what=f"the grades {expected} in the file")
    wait_for(lambda: shown_grades(browser, expected) == {doc: str(grade) for doc, grade in expected.items()})
    assert browser.find_element(By.ID, "save-status").text.startswith("all changes saved")


def test_a_candidate_added_from_search_is_kept_in_the_file_graded_or_not(client, data):
    doc = next(d.id for d in data.corpus if d.id not in data.pooled and d.id not in data.load().by_id[POOLED].relevant)
    answer = change(client, "/candidates", doc=doc)
    assert answer.status_code == 200 and answer.get_json()["notes"] == []
    assert data.load().by_id[POOLED].metadata == {"added_from_search": [doc]}

    def shown() -> list[tuple[str, object, bool]]:
        candidates = client.get(f"/api/questions/{POOLED}").get_json()["question"]["candidates"]
        return [(c["doc"], c["grade"], c["added"]) for c in candidates]

    after_pool = shown()[len(data.pooled)]
    assert after_pool == (doc, None, True)  # after the pooled ones, before other judged documents
    change(client, "/grade", doc=doc, grade=0)
    assert shown()[len(data.pooled)] == (doc, 0, True)  # graded, in the same place
    change(client, "/grade", doc=doc, grade=None)
    assert shown()[len(data.pooled)] == (doc, None, True)  # a cleared grade leaves it a candidate

    before = data.golden.read_bytes()
    for again in (doc, data.pooled[0], next(iter(data.load().by_id[POOLED].relevant))):
        answer = change(client, "/candidates", doc=again)
        assert answer.get_json()["notes"] == [f"{again} is already a candidate"]
    unknown = change(client, "/candidates", doc="no-such-document")
    assert unknown.status_code == 400 and "unknown document id 'no-such-document'" in unknown.get_json()["error"]
    assert data.golden.read_bytes() == before
