"""Reading a folder of documents (`.md`, `.txt`, `.html`, `.pdf`) into a corpus, one document per file.

The rules (ids, text and title per kind of file, metadata, unreadable files) are in `load_folder`'s
docstring. A document from a folder is embedded as its text alone, so that character offsets into
`Document.content` are offsets into the file's text. HTML's text is `sweep.formats.html_text`'s.
"""

from __future__ import annotations

import codecs
import datetime
import io
import logging
import os
import re
import stat
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from sweep.errors import InputError, where
from sweep.formats.documents import SCALARS, Corpus, Document
from sweep.formats.html_text import MalformedHtml, html_text
from sweep.formats.lines import file_kind
from sweep.formats.unique_keys import UniqueKeyLoader

log = logging.getLogger(__name__)

# what a folder of documents reads, by file extension (case-insensitive)
FOLDER_FORMATS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
ID_SCHEMES = ("path", "stem")
DEFAULT_FOLDER_KEYS = ("department",)
MAX_FILE_BYTES = 64 * 2**20  # a larger file is skipped, unread


def load_folder(folder: str | Path, *, ids: str = "path", folder_keys: Sequence[str] = DEFAULT_FOLDER_KEYS) -> Corpus:
    """Read a folder of documents, one document per file.

    Files: `.md`/`.markdown`, `.txt`, `.html`/`.htm` and `.pdf` (the extension in any case), found
    recursively and read in the order of their path relative to `folder`. Hidden files and
    folders (a name starting with `.`, such as `.git`) are skipped; files with any other
    extension are ignored (counted in an info log line).

    Ids: with `ids="path"` (the default), the path relative to `folder` with `/` separators
    (`hr/leave.md`); with `ids="stem"`, the file name without its extension (`leave`), and two
    files with the same stem are an error naming both. An id keeps the file name's spaces and any
    other character (`HR Policies/Annual Leave Policy.md`): TREC files, which runs are logged as,
    carry it percent-encoded (`sweep.formats.trec`), and their readers decode it.

    Files are read as bytes: a UTF-8 byte order mark at the start is dropped (it is not text:
    offsets count from the character after it).

    Front matter, one rule for Markdown and text files: after blank lines only (and the byte
    order mark), a line `---`, then YAML, then a line `---` or `...` (trailing spaces and tabs on
    either line; lines ending in LF, CRLF or CR). The YAML is read as a mapping into the metadata
    (a key it repeats makes it malformed), and the text starts after the closing line: the block
    and any blank lines before it are no text. A block that looks like front matter in the first
    `LOOK_AHEAD_LINES` lines but is not read (its `---` indented, not at the top, TOML's `+++`, a
    first line `---` with `key: value` after it but no closing line) stays text, with one warning
    naming the file, the line and why.

    Text and title, by kind of file:
    - Markdown: the file's text decoded as UTF-8 and otherwise untouched (line endings, leading
      and trailing whitespace included), less its front matter. Title: the first level-1 ATX
      heading (`# Title`), else the first ATX heading of any level, outside fenced code blocks;
      else none.
    - Text: the file's decoded text, untouched but for its front matter; no title.
    - HTML (UTF-8): the visible text (`sweep.formats.html_text`, in time linear in the page's
      size) without script, style, noscript, template and title elements: whitespace runs
      collapsed to one space (except in `<pre>`), one line per block element (a blank line around
      paragraphs, headings, lists, tables, sections, ...; a line break around divs, list items,
      table rows and at `<br>`; a tab between table cells), runs of blank lines collapsed to one,
      the whole stripped. Title: `<title>`.
    - PDF: each page's text as pypdf extracts it, stripped, pages without text left out, the
      rest joined with a blank line. Title: the PDF's `/Title` metadata, when present.
    The title is not prepended to the text (`Document.prepend_title` is False): `content` is the
    text, so character offsets into it are offsets into the file's decoded text (after the front
    matter, for a file with front matter).

    Metadata, later sources winning: `path`, the path relative to `folder`; the folder names,
    the i-th folder level below `folder` going into `metadata[folder_keys[i]]` (the default
    `("department",)` gives `hr/policies/leave.md` `department: hr`; deeper levels without a
    key are not recorded); the front matter (overriding a folder name or the path is logged at
    debug level). Front matter values must be scalars: strings, numbers and booleans; dates
    become ISO strings (`2024-05-01`); any other value (list, mapping, null) is left out with
    one warning naming the file and the keys.

    Unreadable files are skipped, each with one warning naming the file and why: not a regular
    file (a named pipe, a device, a link to one: never opened for reading, so nothing waits on
    it), larger than 64 MiB (`MAX_FILE_BYTES`; never read whole), not UTF-8 (Markdown, text,
    HTML), front matter that is malformed YAML or not a mapping, a PDF pypdf cannot parse or that
    is encrypted, no text (empty or whitespace only after extraction). A folder without any
    readable file is an error.
    """
    folder = Path(folder)
    ids, folder_keys = check_ids(ids), check_folder_keys(folder_keys)
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder")
    found, ignored = _folder_files(folder)
    if ids == "stem":
        first: dict[str, str] = {}
        for relative, _ in found:
            stem = PurePosixPath(relative).stem
            if stem in first:
                raise InputError(
                    f"{folder}: {first[stem]} and {relative} have the same document id {stem!r} (ids=stem); rename one or use ids=path"
                )
            first[stem] = relative
    documents: list[Document] = []
    for relative, file in found:
        try:
            text, title, front = _READERS[FOLDER_FORMATS[file.suffix.lower()]](file)
            if not text.strip():
                raise _Unreadable("no text (empty or whitespace only)")
        except _Unreadable as why:
            log.warning("%s: skipped: %s", where(file, why.line), why)
            continue
        metadata: dict[str, Any] = {"path": relative}
        metadata.update(zip(folder_keys, PurePosixPath(relative).parts[:-1], strict=False))
        for key, value in front.items():
            if key in metadata and metadata[key] != value:
                log.debug("%s: front matter %s=%r overrides %r", file, key, value, metadata[key])
            metadata[key] = value
        documents.append(Document(_document_id(relative, ids), text, title, metadata, prepend_title=False))
    skipped = len(found) - len(documents)
    others = ", ".join(f"{suffix} {count}" for suffix, count in sorted(ignored.items()))
    log.info(
        "%s: %d documents; %d unreadable files skipped; %d files with other extensions ignored%s",
        folder, len(documents), skipped, ignored.total(), f" ({others})" if others else "",
    )  # fmt: skip
    if not documents:
        detail = f" ({skipped} unreadable, see the warnings)" if skipped else ""
        raise InputError(f"{folder}: no readable .md/.txt/.html/.pdf files{detail}")
    return Corpus(tuple(documents), source=str(folder))


def _document_id(relative: str, ids: str) -> str:
    return relative if ids == "path" else PurePosixPath(relative).stem


def check_ids(ids: Any) -> str:
    if not isinstance(ids, str) or ids not in ID_SCHEMES:
        raise InputError(f"ids={ids!r}: expected one of {', '.join(map(repr, ID_SCHEMES))}")
    return ids


def check_folder_keys(keys: Any) -> tuple[str, ...]:
    if isinstance(keys, str) or not isinstance(keys, Sequence) or not all(isinstance(k, str) and k for k in keys):
        raise InputError(f"folder_keys={keys!r}: expected a list of metadata field names, such as ['department']")
    return tuple(keys)


class _Unreadable(Exception):
    """Why a file of a folder is skipped; `line` where the reason has one."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.line = line


def _folder_files(folder: Path) -> tuple[list[tuple[str, Path]], Counter[str]]:
    """(relative path, path) of every file to read, in order; the count of others by extension."""
    found: list[tuple[str, Path]] = []
    ignored: Counter[str] = Counter()
    for root, dirs, files in os.walk(folder):
        dirs[:] = [name for name in dirs if not name.startswith(".")]
        for name in files:
            if name.startswith("."):
                continue
            file = Path(root, name)
            suffix = file.suffix.lower()
            if suffix in FOLDER_FORMATS:
                found.append((file.relative_to(folder).as_posix(), file))
            else:
                ignored[suffix or "(no extension)"] += 1
    found.sort(key=lambda item: item[0])
    return found, ignored


def _file_bytes(file: Path) -> bytes:
    """The bytes of a regular file of at most `MAX_FILE_BYTES`. The file is opened without
    blocking (a named pipe would wait for a writer) and checked before it is read."""
    try:
        descriptor = os.open(file, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise _Unreadable(f"cannot read it ({error.strerror or error})") from None
    with os.fdopen(descriptor, "rb") as handle:
        mode = os.fstat(descriptor)
        if not stat.S_ISREG(mode.st_mode):
            raise _Unreadable(f"{file_kind(mode.st_mode)}, not a regular file")
        raw = handle.read(MAX_FILE_BYTES + 1) if mode.st_size <= MAX_FILE_BYTES else b""
    if mode.st_size > MAX_FILE_BYTES or len(raw) > MAX_FILE_BYTES:
        raise _Unreadable(f"larger than {MAX_FILE_BYTES // 2**20} MiB (MAX_FILE_BYTES)")
    return raw


def _utf8(file: Path) -> str:
    """The text of `file`, a byte order mark dropped."""
    raw = _file_bytes(file)
    bom = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        return raw[bom:].decode("utf-8")
    except UnicodeDecodeError as error:
        offset = bom + error.start
        raise _Unreadable(f"not UTF-8 text (byte 0x{raw[offset]:02x} at offset {offset})") from None


# --- Markdown

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_ATX_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")


def _markdown(file: Path) -> tuple[str, str, dict[str, Any]]:
    front, text = _front_matter(_utf8(file), file)
    return text, _markdown_title(text), front


# front matter: after blank lines only, a line `---` (trailing spaces and tabs allowed), YAML,
# then a line `---` or `...`; lines end in LF, CRLF or CR
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BLANK_LINES = re.compile(r"(?:[ \t]*(?:\r\n|\r|\n))*")
_OPENING, _CLOSING = ("---",), ("---", "...")
_CLOSING_LINE = re.compile(r"(?<=[\r\n])(?:---|\.\.\.)[ \t]*(?:\r\n|\r|\n|\Z)")
_YAML_KEY = re.compile(r"[ \t]*[\w\"'][^:\r\n]*:(?:[ \t]|$)")  # `key: value`, the first line of a mapping
_FENCE_CHARS = 80  # a longer line is no fence line (and is not copied to be looked at)
LOOK_AHEAD_LINES = 10  # how far down a block that looks like front matter is reported as not read
LOOK_AHEAD_BLOCK = 200  # and how many lines such a block may have


def _lines(text: str, start: int = 0) -> Iterator[tuple[int, int, int]]:
    """(start, end without its line break, end with it) of each line of `text` from `start`, lazily."""
    while start < len(text):
        found = _LINE_BREAK.search(text, start)
        end, after = (found.start(), found.end()) if found else (len(text), len(text))
        yield start, end, after
        start = after


def _front_matter(raw: str, file: Path) -> tuple[dict[str, Any], str]:
    """(metadata, the text after it) for a file with front matter; ({}, raw) for one without,
    with a warning where a block that looks like front matter is not read as such."""
    top = _BLANK_LINES.match(raw).end()  # type: ignore[union-attr]  # always matches
    blank = raw.count("\n", 0, top) + raw.count("\r", 0, top) - raw.count("\r\n", 0, top)  # lines before it
    lines = _lines(raw, top)
    first = next(lines, None)
    if first is None or first[1] - first[0] > _FENCE_CHARS or raw[first[0] : first[1]].rstrip(" \t") not in _OPENING:
        _not_front_matter(raw, file, blank)
        return {}, raw
    body = first[2]
    closing = _CLOSING_LINE.search(raw, body)
    if closing is None:
        second = next(_lines(raw, body), None)
        if second is not None and _YAML_KEY.match(raw, second[0], second[1]):
            log.warning(
                "%s: front matter not read: no line '---' closes the block the line '---' opens; read as text",
                where(file, blank + 1),
            )
        return {}, raw
    try:
        data = yaml.load(raw[body : closing.start()], Loader=UniqueKeyLoader)  # PyYAML's safe loader, keys unique
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise _Unreadable(
            f"malformed YAML front matter ({problem})", line=mark.line + blank + 2 if mark is not None else None
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise _Unreadable(
            f"the front matter is a YAML {type(data).__name__}, not a mapping of keys to values "
            f"(a line '---' at the top opens front matter; start the file with something else if it is text)"
        )
    metadata: dict[str, Any] = {}
    dropped = []
    for key, value in data.items():
        if isinstance(value, datetime.date):
            value = value.isoformat()
        if isinstance(value, SCALARS):
            metadata[str(key)] = value
        else:
            dropped.append(repr(str(key)))
    if dropped:
        log.warning(
            "%s: front matter %s left out of the metadata (not a string, number, boolean or date)",
            file, ", ".join(dropped),
        )  # fmt: skip
    return metadata, raw[closing.end() :]


def _not_front_matter(raw: str, file: Path, blank: int) -> None:
    """A warning for a block in the first `LOOK_AHEAD_LINES` lines that looks like front matter
    (a fence line, then `key: value`, ..., then a fence line) but is not read as front matter:
    indented, not at the top, or TOML's `+++`. Nothing is looked at past those lines but the
    block's own, and nothing inside fenced code."""
    lines = _lines(raw)
    for number, (start, end, _) in enumerate(lines, 1):
        if number > LOOK_AHEAD_LINES:
            return
        if _FENCE.match(raw, start, end):
            return  # code, where YAML between rules is an example
        fence = raw[start:end].strip(" \t") if end - start <= _FENCE_CHARS else ""  # no copy of a long line
        if fence not in ("---", "+++"):
            continue
        following = next(lines, None)
        if following is None or not (_YAML_KEY if fence == "---" else _TOML_KEY).match(raw, following[0], following[1]):
            return
        closes = (fence,) if fence == "+++" else _CLOSING
        block = (raw[a:b].strip(" \t") for _, (a, b, _) in zip(range(LOOK_AHEAD_BLOCK), lines, strict=False))
        if not any(line in closes for line in block):
            return
        if fence == "+++":
            why = "TOML front matter ('+++') is not read, only YAML between lines '---'"
        elif number == blank + 1:
            why = "its line '---' is indented; front matter starts at the start of a line"
        else:
            why = "it is not at the top of the file (only blank lines may come before its line '---')"
        log.warning("%s: front matter not read: %s; read as text", where(file, number), why)
        return


_TOML_KEY = re.compile(r"[ \t]*[\w\"'.-]+[ \t]*=")


def _markdown_title(text: str) -> str:
    """The first level-1 ATX heading, else the first ATX heading, outside fenced code; else ""."""
    first = ""
    fence = ""
    for line in text.splitlines():
        opening = _FENCE.match(line)
        if fence:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                if not line[opening.end() :].strip():
                    fence = ""
            continue
        if opening:
            fence = opening.group(1)
            continue
        heading = _ATX_HEADING.fullmatch(line)
        if heading and (heading.group(2) or "").strip():
            if len(heading.group(1)) == 1:
                return heading.group(2).strip()
            first = first or heading.group(2).strip()
    return first


def _text(file: Path) -> tuple[str, str, dict[str, Any]]:
    front, text = _front_matter(_utf8(file), file)
    return text, "", front


# --- HTML


def _html(file: Path) -> tuple[str, str, dict[str, Any]]:
    try:
        text, title = html_text(_utf8(file))
    except MalformedHtml as error:
        raise _Unreadable(f"malformed HTML ({error})") from None
    return text, title, {}


# --- PDF


def _pdf(file: Path) -> tuple[str, str, dict[str, Any]]:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(_file_bytes(file)))
        if reader.is_encrypted and not reader.decrypt(""):
            raise _Unreadable("encrypted PDF")
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        title = reader.metadata.title if reader.metadata is not None else None
    except _Unreadable:
        raise
    except Exception as error:  # pypdf raises many kinds on a damaged file
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise _Unreadable(
            f"pypdf cannot parse it ({type(error).__name__}{': ' + message if message else ''})"
        ) from None
    text = "\n\n".join(page for page in pages if page)
    if not text:
        raise _Unreadable("no extractable text (a scanned PDF?)")
    return text, " ".join(title.split()) if isinstance(title, str) else "", {}


_READERS = {"markdown": _markdown, "text": _text, "html": _html, "pdf": _pdf}
