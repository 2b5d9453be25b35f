"""What a chunk embeds before its text, for every strategy in one step after the cut (`chunking.context`).

A chunk cut from the middle of a document may no longer say what it is about ("It rises to 27
days after five years"); embedding a little of the document's own context with it is the cheap
part of contextual retrieval, with no model call:

- `none`: the chunk's text alone;
- `title`: the document's title (`Document.title`), unless the chunk's text already begins with
  it (the first chunk of a JSON Lines document, whose content starts with its title, or a
  Markdown file's `# Title` line);
- `heading`: the Markdown heading path of the section the chunk starts in ("Guide > Install >
  On Linux", headings as CommonMark parses them: `markdown_sections`), none before the first
  heading or in a document without headings;
- `title+heading`: both, joined by " > " (the title left out where the path already starts with it).

The context goes into `Chunk.prefix`, embedded before the text (`Chunk.embedded_text`) and never
part of the chunk's span: `start`, `end`, `text` and `n_tokens` are the strategy's whatever the
context, so the evidence-based context metrics are computed on the same spans. Whole documents
(`chunk=0`) get no heading path: they hold every heading.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sweep.formats.corpus import Corpus, Document
from sweep.retrieval.chunking.chunk import Chunk

HEADING_SEPARATOR = " > "  # between the headings of a heading path
LINE_BREAK = re.compile(r"\r\n?|\n")  # what markdown-it counts as a line break


@functools.cache
def _parser() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").disable("inline")  # headings and their raw text: the block level


def markdown_sections(content: str) -> list[tuple[int, int, str]]:
    """(start, end, heading path) of each Markdown section of `content` (a heading line and its
    body up to the next heading of any level), untrimmed; text before the first heading has the
    empty path. Headings are CommonMark's (markdown-it-py): ATX and setext, at the top level only."""
    line_starts = [0] + [match.end() for match in LINE_BREAK.finditer(content)]
    tokens = _parser().parse(content)
    headings = [
        (line_starts[token.map[0]], int(token.tag[1:]), tokens[n + 1].content.strip())
        for n, token in enumerate(tokens)
        if token.type == "heading_open" and token.level == 0 and token.map is not None
    ]
    sections: list[tuple[int, int, str]] = []
    if not headings or headings[0][0] > 0:
        sections.append((0, headings[0][0] if headings else len(content), ""))
    path: list[tuple[int, str]] = []  # (level, text) of the open headings
    for n, (start, level, text) in enumerate(headings):
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, text))
        end = headings[n + 1][0] if n + 1 < len(headings) else len(content)
        sections.append((start, end, HEADING_SEPARATOR.join(t for _, t in path if t)))
    return sections


def _heading_path(sections: Sequence[tuple[int, int, str]], position: int) -> str:
    """The path of the section holding `position` (sections in order, covering the content)."""
    path = ""
    for start, _, section_path in sections:
        if start > position:
            break
        path = section_path
    return path


def _begins_with_title(text: str, title: str) -> bool:
    return text.lstrip().lstrip("#").lstrip().startswith(title)


def context_of(chunk: Chunk, doc: Document, context: str, sections: Sequence[tuple[int, int, str]]) -> str:
    """The prefix `context` gives `chunk` of `doc` (`sections`: the document's `markdown_sections`,
    [] for no heading path)."""
    title = doc.title.strip()
    title = title if "title" in context and title and not _begins_with_title(chunk.text, title) else ""
    path = _heading_path(sections, chunk.start) if "heading" in context else ""
    if title and path and (path == title or path.startswith(title + HEADING_SEPARATOR)):
        title = ""  # the path says it already
    return HEADING_SEPARATOR.join(part for part in (title, path) if part)


def with_context(chunks: list[Chunk], corpus: Corpus, context: str, whole_documents: bool = False) -> list[Chunk]:
    """`chunks` (of `corpus`) with the prefix `context` gives each; their spans untouched.
    `whole_documents`: the chunks are whole documents, which get no heading path."""
    if context == "none":
        return chunks
    headings = "heading" in context and not whole_documents
    out: list[Chunk] = []
    sections: list[tuple[int, int, str]] = []
    for chunk in chunks:
        doc = corpus.by_id[chunk.doc_id]
        if not out or out[-1].doc_id != chunk.doc_id:  # a document's chunks come together
            sections = markdown_sections(doc.content) if headings else []
        out.append(replace(chunk, prefix=context_of(chunk, doc, context, sections)))
    return out
