"""Chunking: split documents into pieces measured in the embedding model's tokens.

The tokenizer is the configured model's own (`conf/chunking/tokens.yaml` interpolates
`model.embedder.path`), so `chunk=200` means 200 tokens of the model that embeds the chunks;
lexical models and models without a path are measured in MiniLM tokens.

Every chunk remembers its document and its character span in `Document.content`, so a chunk
hit maps back to a document (a document ranks at its best chunk) and to the exact text.
`size=0` keeps whole documents.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any

from sweep.corpus import Corpus
from sweep.errors import InputError
from sweep.settings import Range, checked


@dataclass(frozen=True)
class Chunk:
    doc_id: str
    index: int  # position of the chunk within its document
    start: int  # character offsets into the document's content
    end: int
    text: str
    n_tokens: int


@checked("chunking")
class TokenChunker:
    """Windows of `size` tokens that overlap by `overlap` tokens; `size=0` means whole documents.
    `tokenizer`: a local model folder whose tokenizer measures the chunks (None: MiniLM's)."""

    def __init__(
        self, size: Annotated[int, Range(0)], overlap: Annotated[int, Range(0)] = 32, tokenizer: str | None = None
    ) -> None:
        if size and overlap >= size:  # size 0: whole documents
            raise InputError(
                f"chunking.overlap={overlap}: must be smaller than chunk={size} (or chunk=0: whole documents)"
            )
        self.size, self.overlap, self.tokenizer_path = size, overlap, tokenizer

    @cached_property
    def tokenizer(self) -> Any:
        from transformers import AutoTokenizer

        from sweep.embed import default_model_path

        return AutoTokenizer.from_pretrained(self.tokenizer_path or default_model_path(), local_files_only=True)

    def split(self, corpus: Corpus) -> list[Chunk]:
        contents = [doc.content for doc in corpus]
        encoded = self.tokenizer(
            contents,
            add_special_tokens=False,
            return_offsets_mapping=True,
            verbose=False,  # long texts are the point
        )["offset_mapping"]
        chunks: list[Chunk] = []
        for doc, content, offsets in zip(corpus, contents, encoded):
            chunks.extend(self._windows(doc.id, content, offsets))
        return chunks

    def _windows(self, doc_id: str, content: str, offsets: list[tuple[int, int]]) -> list[Chunk]:
        if self.size == 0 or len(offsets) <= self.size:
            return [Chunk(doc_id, 0, 0, len(content), content, len(offsets))]
        step = self.size - self.overlap
        windows = []
        for index, first in enumerate(range(0, max(len(offsets) - self.overlap, 1), step)):
            last = min(first + self.size, len(offsets)) - 1
            start, end = offsets[first][0], offsets[last][1]
            windows.append(Chunk(doc_id, index, start, end, content[start:end], last - first + 1))
            if last == len(offsets) - 1:
                break
        return windows
