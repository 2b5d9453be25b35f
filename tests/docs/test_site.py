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
from pathlib import Path

import pytest
import yaml

from helpers.paths import ROOT

NARROW, WIDE = 860, 1280  # px: Material hides its sidebar table of contents below 1220
LONG_PAGES = ("configuration/", "commands/")  # thousands of px tall: their table of contents is on the page


@pytest.fixture(scope="module")
def built_site(tmp_path_factory) -> Path:
    """The site built as CI builds it: its folder."""
    folder = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    return folder


@pytest.fixture(scope="module")
def site(built_site) -> Iterator[str]:
    """The built site served on 127.0.0.1: its address."""
    folder = built_site
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


def site_pages(folder: Path) -> list[str]:
    """Every page of the built site, as a path under its address ("" the home page): each
    `index.html` mkdocs wrote, so a page added later is among them whether or not the nav lists it."""
    return sorted(
        "" if p.parent == folder else f"{p.parent.relative_to(folder).as_posix()}/" for p in folder.rglob("index.html")
    )


def nav_pages(node: object) -> set[str]:
    """The pages mkdocs.yml's nav lists, as `site_pages` writes them."""
    if isinstance(node, str):
        return {"" if node == "index.md" else node.removesuffix(".md") + "/"}
    items = node.values() if isinstance(node, dict) else node
    return set().union(*(nav_pages(item) for item in items))


# Each code block: the longest line of one that scrolls sideways; the rule of a console's table
# (`{ .wrap .console }`) that would wrap, and its rows with it; "" for one that fits.
BLOCKS = """
return [...document.querySelectorAll('article pre > code')].map(code => {
    const lines = code.innerText.split('\\n');
    const rule = code.closest('.console') ? lines.find(line => line.includes('───')) : undefined;
    let wrapped = false;
    if (rule) {
        const style = getComputedStyle(code), span = document.createElement('span');
        span.style.whiteSpace = 'pre';
        span.textContent = rule;
        code.appendChild(span);
        wrapped = span.getBoundingClientRect().width >
            code.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
        span.remove();
    }
    const scrolls = code.scrollWidth > code.clientWidth;
    return scrolls ? lines.reduce((a, b) => (b.length > a.length ? b : a)) : wrapped ? rule : '';
})
"""


@pytest.mark.slow
def test_no_code_block_on_any_page_scrolls_sideways_at_860_px(site, built_site, browser):
    """Commands wrapped with their comments above them, output soft-wrapped (`{ .wrap }`), a
    console's table in a smaller font (`{ .wrap .console }`): on every page of the site, in one
    browser, the longest line of each block that would scroll or break a table's rows."""
    pages = site_pages(built_site)
    assert nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]) <= set(pages)
    scrolling, blocks = {}, 0
    for page in pages:
        open_at(browser, site + page, NARROW)
        assert "404" not in browser.title, page
        found = browser.execute_script(BLOCKS)
        blocks += len(found)
        if lines := [line for line in found if line]:
            scrolling[page or "index"] = lines
    assert blocks > 50  # the pages' code blocks were found (70 in 21 pages)
    assert scrolling == {}


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
