"""`MarkdownChunker`: sections under their headings (markdown-it-py's CommonMark parse), the
heading path embedded before each chunk."""

from __future__ import annotations

from typing import Annotated

from sweep.retrieval.chunking.chunk_context import markdown_sections
from sweep.retrieval.chunking.chunker import Context, Span
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
    `context` (default `heading`): the section's heading path ("Title > Section > Subsection")
    goes into `Chunk.prefix`, embedded with every chunk of the section, so a piece from the middle
    of a long section still says what it is about; the offsets never include it (`none`,
    `title`, `title+heading`: as for every strategy). `tokenizer`: a local model folder (None: MiniLM's)."""

    def __init__(
        self, size: Annotated[int, Range(0)], tokenizer: str | None = None, context: Context = "heading"
    ) -> None:
        self.size, self.tokenizer_path, self.context = size, tokenizer, context

    def sections(self, content: str) -> list[tuple[int, int, str]]:
        """(start, end, heading path) of each section, untrimmed; text before the first heading
        has the empty path (`sweep.retrieval.chunking.chunk_context.markdown_sections`)."""
        return markdown_sections(content)

    def spans(self, content: str) -> list[Span]:
        sections = [span for start, end, _ in self.sections(content) if (span := trimmed(content, start, end))]
        tokens = self.count_tokens([content[start:end] for start, end in sections])
        out: list[Span] = []
        for (start, end), n_tokens in zip(sections, tokens):
            out.extend([(start, end)] if n_tokens <= self.size else self.recursive(content, start, end))
        return out
