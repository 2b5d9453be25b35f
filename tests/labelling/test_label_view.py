"""What the labeller sees while grading (issue 48), in headless Chromium against `python -m sweep.label`:
after every grade by keyboard the next candidate's grade buttons are in the window, at 860 and 1366 px;
the progress panel stays in view; the address names the question, so a reload and back/forward return
to it, whatever characters its id holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.data import write_kb_slice
from helpers.labelling import Data, start_server, wait_for
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden

GRADED = 60  # judgments by keyboard per window width
ODD = "odd id/?#%&+ é"  # a question id that every part of an address would take apart
DEPARTMENTS = {"HR", "Finance", "IT", "Facilities", "Engineering", "Product", "Legal", "Support"}


def long_queue(folder: Path) -> tuple[Data, str]:
    """The whole bundled knowledge base, its second question renamed ODD, and a queue of every
    document its first question has no judgment of (over 100) as that question's candidates."""
    kb = write_kb_slice(folder / "kb", DEPARTMENTS)
    golden = folder / "golden.jsonl"
    rows = [json.loads(line) for line in (kb / "golden.jsonl").read_text().splitlines()]
    rows[1]["id"] = ODD
    golden.write_text("".join(json.dumps(row) + "\n" for row in rows))
    corpus = load_corpus(kb / "corpus.jsonl")
    qid = rows[0]["id"]
    judged = load_golden(golden, corpus, warn=False).by_id[qid].relevant
    pooled = [d.id for d in corpus if d.id not in judged]
    assert len(pooled) > GRADED
    candidates = []
    for rank, doc in enumerate(pooled, start=1):
        content = corpus.by_id[doc].content
        end = min(len(content), 300)
        chunk = {"run": "r1", "start": 0, "end": end, "score": 1.0 / rank, "text": content[:end]}
        candidates.append({"doc": doc, "title": "", "best_rank": rank, "ranks": {"r1": rank}, "chunk": chunk})
    header = {"pool": {"runs": [{"run_id": "r1", "name": "bm25", "overrides": "model=bm25"}], "depth": 200}}
    header["pool"] |= {"corpus": str(kb / "corpus.jsonl"), "corpus_ids": "path"}
    question = {"qid": qid, "question": rows[0]["question"], "type": "factoid", "candidates": candidates}
    queue = folder / "queue.jsonl"
    queue.write_text(json.dumps(header) + "\n" + json.dumps(question) + "\n")
    return Data(folder, golden, kb / "corpus.jsonl", queue, corpus, pooled), qid


# the focused card's grade buttons, whole in the window and below the sticky status bar, once laid out and painted
IN_VIEW = """
const done = arguments[arguments.length - 1];
requestAnimationFrame(() => requestAnimationFrame(() => {
  const card = document.querySelector('.candidate.focused'), bar = document.getElementById('status-bar');
  const box = card.querySelector('.grades').getBoundingClientRect(), top = bar.getBoundingClientRect().bottom;
  done([card.dataset.doc, box.top >= top && box.bottom <= innerHeight && box.left >= 0 && box.right <= innerWidth]);
}));
"""


def qid_shown(browser) -> str:
    return browser.execute_script("return document.getElementById('qid').textContent")


@pytest.mark.slow
@pytest.mark.parametrize("width", [860, 1366])
def test_the_next_candidate_is_in_view_after_every_grade_and_the_address_names_the_question(browser, tmp_path, width):
    from selenium.webdriver.common.action_chains import ActionChains

    data, qid = long_queue(tmp_path)
    server = start_server(data)
    try:
        browser.set_window_size(width, 900)
        browser.get(server.url)
        wait_for(lambda: browser.execute_script("return document.querySelector('.candidate.focused pre')?.textContent")
                 not in (None, "loading…"), what="the first candidate's text")  # fmt: skip
        assert qid_shown(browser) == qid

        in_view = []
        for n in range(GRADED):
            expected = data.pooled[n + 1]
            ActionChains(browser).send_keys("012"[n % 3]).perform()
            wait_for(
                lambda expected=expected: browser.execute_script(
                    "return document.getElementById('save-status').textContent.startsWith('all changes saved')"
                    " && document.querySelector('.candidate.focused')?.dataset.doc === arguments[0]",
                    expected,
                ),
                what=f"grade {n + 1} saved and {expected} focused",
            )
            doc, shown = browser.execute_async_script(IN_VIEW)
            assert doc == expected
            in_view.append(shown)
        print(f"{width} px: the next candidate's grade buttons in view after {sum(in_view)} of {GRADED} grades")
        assert sum(in_view) == GRADED, [data.pooled[n + 1] for n, shown in enumerate(in_view) if not shown]
        relevant = data.load().by_id[qid].relevant
        assert [relevant.get(doc) for doc in data.pooled[:GRADED]] == [n % 3 for n in range(GRADED)]

        # the progress panel stays in view, however far down the candidates are
        assert browser.execute_script("return scrollY") > 2000
        top, bottom = browser.execute_script(
            "const box = document.getElementById('progress').getBoundingClientRect(); return [box.top, box.bottom]"
        )
        assert 0 <= top < bottom <= browser.execute_script("return innerHeight")

        # the address names the question: a reload returns to it, with its next ungraded candidate focused
        assert browser.current_url.startswith(server.url + "#")
        browser.refresh()
        wait_for(lambda: qid_shown(browser) == qid, what=f"{qid} after the reload")
        wait_for(lambda: browser.execute_script("return document.querySelector('.candidate.focused')"), what="focus")
        assert (
            browser.execute_script("return document.querySelector('.candidate.focused').dataset.doc")
            == (data.pooled[GRADED])
        )

        # an id with every character an address gives a meaning to: opened, reloaded, and back and forward
        browser.execute_script(
            "[...document.querySelectorAll('#question-list li')].find((li) => li.dataset.qid === arguments[0])"
            ".querySelector('button').click()",
            ODD,
        )
        wait_for(lambda: qid_shown(browser) == ODD, what="the odd id opened")
        browser.refresh()
        wait_for(lambda: qid_shown(browser) == ODD, what="the odd id after the reload")
        browser.back()
        wait_for(lambda: qid_shown(browser) == qid, what=f"{qid} after back")
        browser.forward()
        wait_for(lambda: qid_shown(browser) == ODD, what="the odd id after forward")
    finally:
        server.kill()
