"""The `Chunk`: a document's exact character span, its token count and the context embedded before it."""

from __future__ import annotations

from dataclasses import dataclass

PREFIX_SEPARATOR = "\n\n"  # between a chunk's prefix and its text in `embedded_text`


@dataclass(frozen=True)
class Chunk:
    doc_id: str
    index: int  # position of the chunk within its document
    start: int  # character offsets into the document's content
    end: int
    text: str
    n_tokens: int  # tokens of `text` in the chunker's tokenizer, no special tokens (tokens: the window's)
    prefix: str = ""  # context embedded before the text (title, heading path); not in the offsets

    @property
    def embedded_text(self) -> str:
        """What is embedded: the prefix, a blank line, the text; the text alone without a prefix."""
        return f"{self.prefix}{PREFIX_SEPARATOR}{self.text}" if self.prefix else self.text
