"""`MarkdownChunker`: sections under their headings (markdown-it-py's CommonMark parse), the
heading path embedded before each chunk."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Any

from sweep.retrieval.chunking.base import HEADING_SEPARATOR, LINE_BREAK
from sweep.retrieval.chunking.spans import SpanChunker, trimmed
from sweep.settings import Range, checked


@checked("chunking")
class MarkdownChunker(SpanChunker):
    """One chunk per Markdown section (a heading line and its body up to the next heading of
    any level), so a chunk follows the author's own structure; a section over `size` tokens is
    split by semchunk within the section. Headings are those of a CommonMark parser
    (markdown-it-py): ATX (`## Title`) and setext (`Title` over `---`) headings at the top level,
    not a `#` line inside fenced code, a list or a quote. Text before the first heading is a
    section of its own; a document without headings is chunked as `recursive` (no overlap).
    `heading_prefix`: the section's heading path ("Title > Section > Subsection") goes into
    `Chunk.prefix`, embedded with every chunk of the section, so a piece from the middle of a
    long section still says what it is about; the offsets never include it.
    `tokenizer`: a local model folder (None: MiniLM's)."""

    def __init__(
        self, size: Annotated[int, Range(0)], heading_prefix: bool = True, tokenizer: str | None = None
    ) -> None:
        self.size, self.heading_prefix, self.tokenizer_path = size, heading_prefix, tokenizer

    @cached_property
    def _parser(self) -> Any:
        from markdown_it import MarkdownIt

        return MarkdownIt("commonmark").disable("inline")  # headings and their raw text: the block level

    def sections(self, content: str) -> list[tuple[int, int, str]]:
        """(start, end, heading path) of each section, untrimmed; text before the first heading
        has the empty path."""
        line_starts = [0] + [match.end() for match in LINE_BREAK.finditer(content)]
        tokens = self._parser.parse(content)
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

    def spans(self, content: str) -> list[tuple[int, int, str]]:
        sections = [
            (*span, path)
            for start, end, path in self.sections(content)
            if (span := trimmed(content, start, end)) is not None
        ]
        tokens = self.count_tokens([content[start:end] for start, end, _ in sections])
        out: list[tuple[int, int, str]] = []
        for (start, end, path), n_tokens in zip(sections, tokens):
            prefix = path if self.heading_prefix else ""
            pieces = [(start, end)] if n_tokens <= self.size else self.recursive(content, start, end)
            out.extend((a, b, prefix) for a, b in pieces)
        return out
