"""The docs site as a reader on an 860 px screen meets it (`mkdocs build --strict` of mkdocs.yml,
in headless Chromium), and the tutorial's first step run from the installed package."""

from __future__ import annotations

import functools
import http.server
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from helpers.paths import ROOT

NARROW, WIDE = 860, 1280  # px: Material hides its sidebar table of contents below 1220
LONG_PAGES = ("configuration/", "commands/")  # thousands of px tall: their table of contents is on the page
FITTED_PAGES = ("tutorial/", "commands/")  # every code block fits at NARROW: commands wrapped, output soft-wrapped


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[str]:
    """The site built as CI builds it, served on 127.0.0.1: its address."""
    folder = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    quiet = type("Quiet", (http.server.SimpleHTTPRequestHandler,), {"log_message": lambda *_: None})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(quiet, directory=folder))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def open_at(browser, address: str, width: int) -> None:
    """`address` in a viewport `width` px wide."""
    browser.set_window_size(width, 1000)
    browser.set_window_size(2 * width - browser.execute_script("return window.innerWidth"), 1000)
    browser.get(address)
    assert browser.execute_script("return window.innerWidth") == width


SECTIONS = "return [...document.querySelectorAll('article h2[id]')].map(h => '#' + h.id)"
LINKS = "return [...document.querySelectorAll(arguments[0])].filter(a => a.offsetParent).map(a => a.hash)"


@pytest.mark.slow
@pytest.mark.parametrize("page", LONG_PAGES)
def test_a_long_pages_table_of_contents_is_at_its_top_at_860_px_and_in_the_sidebar_when_wide(site, browser, page):
    from selenium.webdriver.common.by import By

    open_at(browser, site + page, NARROW)
    sections = browser.execute_script(SECTIONS)
    assert len(sections) >= 2 and set(sections) <= set(browser.execute_script(LINKS, ".md-typeset .toc a"))
    assert browser.execute_script(LINKS, ".md-sidebar--secondary a") == []  # Material's is hidden here
    link = browser.find_element(By.CSS_SELECTOR, f'.md-typeset .toc a[href="{sections[-1]}"]')
    assert link.location["y"] < 2000  # near the top: under the title and the page's first paragraph
    link.click()
    top = browser.execute_script(f"return document.getElementById('{sections[-1][1:]}').getBoundingClientRect().top")
    assert browser.execute_script("return window.scrollY") > 1000 and 0 <= top < 200  # it took the reader there
    open_at(browser, site + page, WIDE)
    assert browser.execute_script(LINKS, ".md-typeset .toc a") == []  # the sidebar has it: no second copy
    assert set(sections) <= set(browser.execute_script(LINKS, ".md-sidebar--secondary a"))


@pytest.mark.slow
@pytest.mark.parametrize("page", FITTED_PAGES)
def test_no_code_block_scrolls_sideways_at_860_px(site, browser, page):
    open_at(browser, site + page, NARROW)
    blocks = browser.execute_script(
        "return [...document.querySelectorAll('pre > code')].map(c => "
        "[c.scrollWidth - c.clientWidth, c.innerText.split('\\n').reduce((a, b) => (b.length > a.length ? b : a))])"
    )
    assert len(blocks) > 5
    assert [line for overflow, line in blocks if overflow > 0] == []  # the longest line of each that scrolls


def test_the_tutorials_first_step_needs_the_installed_package_only(tmp_path):
    """Step 0's program, run in an empty folder: the bundled documents as a folder of Markdown."""
    tutorial = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")
    [program] = re.findall(r"\*\*0\. A folder of documents\.\*\*.*?```python\n(.*?)```", tutorial, re.DOTALL)
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    written = sorted(tmp_path.glob("docs/*/*.md"))
    departments = {path.parent.name for path in written}
    assert len(written) == 112 and len(departments) == 8
    front = written[0].read_text(encoding="utf-8").split("---\n")[1].splitlines()
    assert front and not any(line.startswith("department:") for line in front)  # the folder says it
    assert all(json.loads(line.split(": ", 1)[1]) is not None for line in front)  # each value as JSON
