"""The visible text and the title of an HTML page, in one pass over it (time linear in its size).

The rules are `sweep.formats.folder.load_folder`'s: the text without script, style, noscript,
template and title elements (nor comments, nor ruby annotations `<rt>`, `<rp>`); whitespace runs
collapsed to one space except in `<pre>`; one line per block element (a blank line around
paragraphs, headings, lists, tables, sections, ...; a line break around divs, list items, table
rows and at `<br>`; a tab after a table cell), runs of blank lines collapsed to one, the whole
stripped. The title is the first `<title>`'s text (less scripts and styles in it), whitespace
runs made one space.

The page is read by the standard library's `html.parser` as it comes, with the stack of open
elements BeautifulSoup's `html.parser` tree builder keeps (an end tag closes every element
opened after its own; an end tag for no open element, and the end of a void element such as
`<br>`, are ignored; what is still open at the end closes there), so the text is the text that
builder gives (but for an unknown entity `&foo;`, kept whole); but no tree is built, so neither
many siblings nor deep nesting costs more than their length.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

INVISIBLE = frozenset({"script", "style", "noscript", "template", "title"})  # neither text nor breaks
# strings that are no text, of the title either: scripts, styles, templates, ruby annotations (whose
# elements still break lines)
_NOT_TEXT = frozenset({"script", "style", "template", "rt", "rp"})
_PARAGRAPHS = frozenset({
    "p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "ul", "ol", "dl", "table", "section",
    "article", "header", "footer", "nav", "aside", "main", "figure", "form", "fieldset", "address", "hr", "details",
})  # fmt: skip
_LINES = frozenset(
    {"div", "li", "dt", "dd", "tr", "br", "caption", "figcaption", "summary", "legend", "thead", "tbody", "tfoot"}
)
_CELLS = frozenset({"td", "th"})
_VOID = frozenset({
    "area", "base", "basefont", "bgsound", "br", "col", "command", "embed", "frame", "hr", "image", "img", "input",
    "isindex", "keygen", "link", "menuitem", "meta", "nextid", "param", "source", "spacer", "track", "wbr",
})  # fmt: skip
# what an element's edges leave in the text until the end: a paragraph break, a line break, a table cell
_PARAGRAPH, _LINE, _CELL = "\x1d", "\x1e", "\x1f"
_MARKS = re.compile(r"[\x1d\x1e\x1f]")
_SPACES = re.compile(r"\s+")
_BREAKS = re.compile(r"\s*[\x1d\x1e\x1f][\s\x1d\x1e\x1f]*")
_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")


class MalformedHtml(ValueError):
    """A page `html.parser` gives up on."""


def html_text(page: str) -> tuple[str, str]:
    """(visible text, title) of `page`."""
    reader = _VisibleText()
    try:
        reader.feed(page)
        reader.close()
    except AssertionError as error:  # html.parser's way to give up on a malformed declaration
        raise MalformedHtml(str(error) or "html.parser cannot read it") from None
    reader.finish()
    text = _BREAKS.sub(_break, "".join(reader.pieces))
    return _BLANK_LINES.sub("\n\n", text).strip(), " ".join("".join(reader.title).split())


def _break(run: re.Match) -> str:
    marks = run.group()
    return "\n\n" if _PARAGRAPH in marks else "\n" if _LINE in marks else "\t"


class _VisibleText(HTMLParser):
    """Collects the visible text, with break marks, in `pieces`, and the first title in `title`."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[str] = []
        self.title: list[str] = []
        self._open: list[str] = []  # the open elements, innermost last
        self._inside: dict[str, int] = {}  # how many of each name are open
        self._data: list[str] = []  # the text since the last tag, comment or declaration
        self._void_ends: dict[str, int] = {}  # void elements opened as `<br>`, whose `</br>` is no event
        self._title_done = False

    # ------------------------------------------------------------ elements

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self._flush()
        if tag in _VOID:
            self._edge(tag, before=True)
            self._edge(tag, before=False)
            self._void_ends[tag] = self._void_ends.get(tag, 0) + 1
            return
        self._edge(tag, before=True)
        self._open.append(tag)
        self._inside[tag] = self._inside.get(tag, 0) + 1

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self._flush()
        if tag == "title" and not self._inside.get("title"):
            self._title_done = True  # an empty title is the title
        self._edge(tag, before=True)
        self._edge(tag, before=False)

    def handle_endtag(self, tag: str) -> None:
        if self._void_ends.get(tag):  # `<br>...</br>`: the text around it stays one string
            self._void_ends[tag] -= 1
            return
        self._flush()
        if not self._inside.get(tag):
            return
        while self._open:
            closed = self._close_innermost()
            if closed == tag:
                break

    def finish(self) -> None:
        """Close what is still open, at the end of the page."""
        self._flush()
        while self._open:
            self._close_innermost()

    def _close_innermost(self) -> str:
        closed = self._open.pop()
        self._inside[closed] -= 1
        if closed == "title" and not self._inside["title"]:
            self._title_done = True
        self._edge(closed, before=False)
        return closed

    def _edge(self, tag: str, before: bool) -> None:
        """The break mark at the start (`before`) or end of an element named `tag`."""
        if self._invisible():
            return
        if tag in _PARAGRAPHS:
            self.pieces.append(_PARAGRAPH)
        elif tag in _LINES:
            self.pieces.append(_LINE)
        elif tag in _CELLS and not before:
            self.pieces.append(_CELL)

    # ------------------------------------------------------------ text

    def handle_data(self, data: str) -> None:
        self._data.append(data)

    def handle_comment(self, data: str) -> None:
        self._flush()

    def handle_decl(self, decl: str) -> None:
        self._flush()

    def handle_pi(self, data: str) -> None:
        self._flush()

    def unknown_decl(self, data: str) -> None:
        """A CDATA section is text as it is (not collapsed), in the title or visible where it is."""
        self._flush()
        if not data.upper().startswith("CDATA["):
            return
        if self._in_title():
            self.title.append(data[len("CDATA[") :])
        if not self._invisible():
            self.pieces.append(data[len("CDATA[") :])

    def _flush(self) -> None:
        """The text since the last event: into the title, or collapsed into the page's text."""
        if not self._data:
            return
        text = "".join(self._data)
        self._data.clear()
        if self._in_title() and not self._not_text():
            self.title.append(text)
        if self._invisible() or self._not_text():
            return
        text = _MARKS.sub(" ", text)
        self.pieces.append(text if self._inside.get("pre") else _SPACES.sub(" ", text))

    def _in_title(self) -> bool:
        return bool(self._inside.get("title")) and not self._title_done

    def _invisible(self) -> bool:
        return any(self._inside.get(name) for name in INVISIBLE)

    def _not_text(self) -> bool:
        return any(self._inside.get(name) for name in _NOT_TEXT)
