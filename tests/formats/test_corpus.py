"""Corpus loading: the bundled knowledge base, BEIR's layout, folders of documents, and errors
with file and line."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from helpers.paths import CHUNKING_EVAL, KB
from sweep.errors import InputError
from sweep.formats.corpus import Corpus, Document, load_corpus, load_folder


def test_bundled_corpus_loads_with_metadata():
    corpus = load_corpus(KB / "corpus.jsonl")
    assert len(corpus) == 112
    assert {"department", "doc_type", "year", "status"} <= corpus.metadata_fields
    doc = corpus.by_id["hr-annual-leave-policy"]
    assert doc.content.startswith(doc.title + "\n\n") and doc.metadata["department"] == "HR"


def test_digest_changes_exactly_when_content_does():
    a = Corpus((Document("d1", "text", "title", {"year": 2026}),))
    same = Corpus((Document("d1", "text", "title", {"year": 2026}),), source="elsewhere")
    changed = Corpus((Document("d1", "text", "title", {"year": 2025}),))
    assert a.digest == same.digest != changed.digest
    unprepended = Corpus((Document("d1", "text", "title", {"year": 2026}, prepend_title=False),))
    assert unprepended.digest != a.digest  # the same fields, embedded differently


def test_beir_folder_reads_its_corpus(tmp_path):
    (tmp_path / "corpus.jsonl").write_text('{"_id": "7", "title": "", "text": "abstract"}\n')
    assert load_corpus(tmp_path).by_id["7"].content == "abstract"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": "a", "text": "x"}', "{oops"], r"c.jsonl:2: malformed JSON"),
        (
            ['{"id": "a", "text": "x"}', '{"id": "a", "text": "y"}'],
            r"c.jsonl:2: duplicate document id 'a' \(first on line 1\)",
        ),
        (['{"text": "x"}'], r"c.jsonl:1: missing or invalid document id"),
        (['{"id": "a", "text": 3}'], r"c.jsonl:1: document 'a' has no 'text' string"),
        (
            ['{"id": "a", "text": "x", "metadata": {"tags": ["x"]}}'],
            r"c.jsonl:1: document 'a': metadata 'tags' is list",
        ),
        (['{"id": "a", "text": " "}'], r"c.jsonl:1: document 'a' is empty"),
        ([""], r"c.jsonl: empty corpus"),
    ],
)
def test_bad_corpus_lines(tmp_path, lines, message):
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=message):
        load_corpus(path)


# --- a folder of documents


def write(folder: Path, relative: str, content: str | bytes) -> Path:
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", newline="")
    return path


def write_pdf(path: Path, lines: list[str], title: str | None = None) -> Path:
    """A real one-page PDF with `lines` of text, made by matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure()
    for i, line in enumerate(lines):
        figure.text(0.1, 0.8 - 0.1 * i, line)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="pdf", metadata={"Title": title} if title else {})
    plt.close(figure)
    return path


LEAVE = """---
title: Annual leave
year: 2024
status: current
effective: 2024-05-01
---
# Annual leave policy

Employees get 25 days.
"""

PAGE = """<!doctype html>
<html><head><title>  Expense
  claims </title><style>p { color: red }</style>
<script>var secret = "do not index";</script></head>
<body><!-- a comment -->
<h1>Expenses</h1>
<p>Claims are due
   within <b>30 days</b>.</p>
<ul><li>Hotels</li><li>Trains</li></ul>
<table><tr><th>Item</th><th>Limit</th></tr><tr><td>Hotel</td><td>150</td></tr></table>
<noscript>enable scripts</noscript>
</body></html>
"""


@pytest.fixture
def documents(tmp_path) -> Path:
    """A folder of every kind of document, nested, with files that are skipped or ignored."""
    folder = tmp_path / "docs"
    write(folder, "hr/leave.md", LEAVE)
    write(folder, "hr/policies/remote.markdown", "Intro line\n\n## Working from home\n\n# Remote work\n\ntext\n")
    write(folder, "readme.md", "No heading here.\r\nSecond line, CRLF kept.\r\n")
    write(folder, "it/notes.TXT", "  plain text, kept as is  \n\n")
    write(folder, "finance/expenses.html", PAGE)
    write_pdf(folder / "finance/travel.pdf", ["Travel is booked through the portal.", "Economy class only."], "Travel")
    write(folder, ".git/HEAD.md", "# hidden folder\n")
    write(folder, "hr/.draft.md", "# hidden file\n")
    write(folder, "data/table.csv", "a,b\n")
    write(folder, "image.png", b"\x89PNG")
    return folder


def test_folder_reads_every_kind_of_document_in_path_order(documents, caplog):
    with caplog.at_level(logging.INFO, logger="sweep.formats.folder"):
        corpus = load_corpus(documents)
    assert [doc.id for doc in corpus] == [
        "finance/expenses.html",
        "finance/travel.pdf",
        "hr/leave.md",
        "hr/policies/remote.markdown",
        "it/notes.TXT",
        "readme.md",
    ]
    assert corpus.source == str(documents)
    assert all(not doc.prepend_title and doc.content == doc.text for doc in corpus)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    (summary,) = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert "6 documents" in summary and "2 files with other extensions ignored (.csv 1, .png 1)" in summary


def test_markdown_text_is_the_file_text_exactly(documents):
    corpus = load_corpus(documents)
    readme = corpus.by_id["readme.md"]
    assert readme.content == (documents / "readme.md").read_bytes().decode("utf-8")  # CRLF kept
    assert readme.title == "" and readme.metadata == {"path": "readme.md"}
    notes = corpus.by_id["it/notes.TXT"]
    assert notes.content == "  plain text, kept as is  \n\n" and notes.title == ""
    assert notes.metadata == {"path": "it/notes.TXT", "department": "it"}
    remote = corpus.by_id["hr/policies/remote.markdown"]
    assert remote.content == (documents / "hr/policies/remote.markdown").read_text(encoding="utf-8")
    assert remote.title == "Remote work"  # the first level-1 heading, not the first heading
    assert remote.metadata == {"path": "hr/policies/remote.markdown", "department": "hr"}  # one folder key


def test_front_matter_becomes_metadata_and_leaves_the_text(documents):
    leave = load_corpus(documents).by_id["hr/leave.md"]
    assert leave.content == "# Annual leave policy\n\nEmployees get 25 days.\n"
    assert LEAVE.endswith(leave.content)  # offsets into content are offsets after the front matter
    assert leave.title == "Annual leave policy"
    assert leave.metadata == {
        "path": "hr/leave.md",
        "department": "hr",
        "title": "Annual leave",
        "year": 2024,
        "status": "current",
        "effective": "2024-05-01",
    }


def test_folder_keys_map_folder_levels_and_front_matter_wins(tmp_path):
    write(tmp_path, "hr/policies/leave.md", "text\n")
    write(tmp_path, "it/setup.md", "---\ndepartment: IT\n---\ntext\n")
    corpus = load_corpus(tmp_path, folder_keys=["department", "kind"])
    assert corpus.by_id["hr/policies/leave.md"].metadata == {
        "path": "hr/policies/leave.md",
        "department": "hr",
        "kind": "policies",
    }
    assert corpus.by_id["it/setup.md"].metadata == {"path": "it/setup.md", "department": "IT"}
    assert load_corpus(tmp_path, folder_keys=()).by_id["hr/policies/leave.md"].metadata == {
        "path": "hr/policies/leave.md"
    }
    assert {"path", "department", "kind"} == corpus.metadata_fields


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("## Second\n\n# First #\n", "First"),
        ("```\n# not a heading\n```\n### Third\n", "Third"),
        ("~~~~\n# code\n~~~\n# still code\n~~~~\n# Real\n", "Real"),
        ("#hashtag\n    # indented code\n#\n", ""),
        ("# C#\n", "C#"),
    ],
)
def test_markdown_title_is_the_first_atx_heading(tmp_path, text, title):
    write(tmp_path, "a.md", text)
    doc = load_corpus(tmp_path).by_id["a.md"]
    assert doc.title == title and doc.content == text


def test_html_gives_its_visible_text_and_title(documents):
    page = load_corpus(documents).by_id["finance/expenses.html"]
    assert page.title == "Expense claims"
    assert page.content == ("Expenses\n\nClaims are due within 30 days.\n\nHotels\nTrains\n\nItem\tLimit\nHotel\t150")
    assert page.metadata == {"path": "finance/expenses.html", "department": "finance"}


def test_pdf_gives_its_text_and_metadata_title(documents):
    pdf = load_corpus(documents).by_id["finance/travel.pdf"]
    assert "Travel is booked through the portal." in pdf.content and "Economy class only." in pdf.content
    assert pdf.title == "Travel" and not pdf.content.startswith("Travel\n\n")
    untitled = write_pdf(documents / "untitled.pdf", ["Some words."])
    assert load_folder(untitled.parent).by_id["untitled.pdf"].title == ""


@pytest.mark.parametrize(
    ("relative", "content", "reason"),
    [
        ("latin1.txt", "café".encode("latin-1"), r"latin1.txt: skipped: not UTF-8 text \(byte 0xe9 at offset 3\)"),
        ("broken.pdf", b"%PDF-1.4 not really a PDF", r"broken.pdf: skipped: pypdf cannot parse it \(Pdf"),
        ("blank.md", " \n\n", r"blank.md: skipped: no text"),
        ("only-front.md", "---\nyear: 2024\n---\n", r"only-front.md: skipped: no text"),
        ("bad.md", "---\nyear: 2024\nthis: is: bad\n---\ntext\n", r"bad.md:3: skipped: malformed YAML front matter"),
        ("list.md", "---\n- a\n- b\n---\ntext\n", r"list.md: skipped: the front matter is a YAML list, not a mapping"),
        ("empty.html", "<html><script>x()</script></html>", r"empty.html: skipped: no text"),
    ],
)
def test_unreadable_file_is_skipped_with_one_warning(tmp_path, caplog, relative, content, reason):
    write(tmp_path, "good.md", "fine\n")
    write(tmp_path, relative, content)
    with caplog.at_level(logging.WARNING, logger="sweep.formats.folder"):
        corpus = load_corpus(tmp_path)
    assert [doc.id for doc in corpus] == ["good.md"]
    (warning,) = [r for r in caplog.records if r.name == "sweep.formats.folder"]
    assert warning.levelno == logging.WARNING and str(tmp_path / relative) in warning.getMessage()
    assert re.search(reason, warning.getMessage())


def test_front_matter_value_that_is_not_a_scalar_is_left_out_with_a_warning(tmp_path, caplog):
    write(tmp_path, "a.md", "---\ntags: [x, y]\nowner:\nyear: 2024\n---\ntext\n")
    with caplog.at_level(logging.WARNING, logger="sweep.formats.folder"):
        doc = load_corpus(tmp_path).by_id["a.md"]
    assert doc.metadata == {"path": "a.md", "year": 2024} and doc.content == "text\n"
    (warning,) = caplog.records
    assert f"{tmp_path / 'a.md'}: front matter 'tags', 'owner' left out" in warning.getMessage()


def test_a_first_rule_without_closing_line_is_text(tmp_path):
    write(tmp_path, "a.md", "---\nno front matter here\n")
    assert load_corpus(tmp_path).by_id["a.md"].content == "---\nno front matter here\n"


def test_folder_without_readable_files_is_an_error(tmp_path, caplog):
    with pytest.raises(InputError, match=rf"^{tmp_path}: no readable \.md/\.txt/\.html/\.pdf files$"):
        load_corpus(tmp_path)
    write(tmp_path, "data.csv", "a,b\n")
    write(tmp_path, ".hidden/a.md", "text\n")
    write(tmp_path, "bad.txt", b"\xff")
    with pytest.raises(
        InputError, match=r"no readable \.md/\.txt/\.html/\.pdf files \(1 unreadable, see the warnings\)"
    ):
        load_corpus(tmp_path)


def test_stem_ids(documents):
    (documents / "readme.md").rename(documents / "guide.md")
    corpus = load_corpus(documents / "hr", ids="stem")
    assert [doc.id for doc in corpus] == ["leave", "remote"]
    assert corpus.by_id["remote"].metadata == {"path": "policies/remote.markdown", "department": "policies"}


def test_duplicate_stems_are_an_error_naming_both_files(tmp_path):
    write(tmp_path, "a/leave.md", "one\n")
    write(tmp_path, "b/leave.txt", "two\n")
    with pytest.raises(InputError, match=r"a/leave\.md and b/leave\.txt have the same document id 'leave'"):
        load_corpus(tmp_path, ids="stem")
    assert len(load_corpus(tmp_path)) == 2  # path ids are unique


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ids": "name"}, r"^ids='name': expected one of 'path', 'stem'$"),
        ({"folder_keys": "department"}, r"^folder_keys='department': expected a list of metadata field names"),
        ({"folder_keys": ["department", ""]}, r"^folder_keys=\['department', ''\]"),
    ],
)
def test_bad_folder_options(tmp_path, options, message):
    write(tmp_path, "a.md", "text\n")
    with pytest.raises(InputError, match=message):
        load_corpus(tmp_path, **options)
    with pytest.raises(InputError, match=message):  # checked whatever the path is
        load_corpus(KB / "corpus.jsonl", **options)


def test_beir_folder_wins_over_its_other_files(tmp_path):
    (tmp_path / "corpus.jsonl").write_text('{"_id": "7", "title": "T", "text": "abstract"}\n')
    write(tmp_path, "notes.md", "# not read\n")
    corpus = load_corpus(tmp_path, ids="stem")
    assert list(corpus.by_id) == ["7"] and corpus.by_id["7"].content == "T\n\nabstract"


def test_chroma_chunking_corpora_load_by_stem():
    corpora = CHUNKING_EVAL / "corpora"
    if not corpora.is_dir():
        pytest.skip(f"Chroma's chunking evaluation corpora are not at {corpora}")
    corpus = load_corpus(corpora, ids="stem")
    assert [doc.id for doc in corpus] == ["chatlogs", "finance", "pubmed", "state_of_the_union", "wikitexts"]
    for doc in corpus:
        assert doc.content == (corpora / f"{doc.id}.md").read_bytes().decode("utf-8")


def test_html_keeps_preformatted_text_and_line_breaks(tmp_path):
    write(tmp_path, "a.htm", "<p>one<br>two</p><pre>def f():\n    return 1\n</pre><div>x <i>y</i></div><div>z</div>")
    page = load_corpus(tmp_path).by_id["a.htm"]
    assert page.content == "one\ntwo\n\ndef f():\n    return 1\n\nx y\nz" and page.title == ""
