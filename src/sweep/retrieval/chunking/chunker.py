"""What every chunking strategy shares: the `Chunker` interface (its chunks are `Chunk`s, with
their context added in one step after the cut), the tokenizer it measures with, and `TokenChunker`,
the baseline of fixed token windows."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import cache, cached_property
from pathlib import Path
from typing import Annotated

from sweep.errors import InputError
from sweep.formats.corpus import Corpus
from sweep.retrieval.chunking.chunk import Chunk
from sweep.retrieval.chunking.chunk_context import with_context
from sweep.settings import OneOf, Range, checked

SENTENCE_ENDS = (". ", "! ", "? ", "\n")  # chonkie's default sentence delimiters
MIN_SENTENCE_CHARS = 12  # chonkie's default: a shorter piece joins its neighbour ("e.g. ", "1. ")
CACHED_COUNTS = 4096  # token counts a chunker remembers (texts of at most ~6 * size characters)

Span = tuple[int, int]
# what every strategy embeds before a chunk's text (`Chunk.prefix`), the `context` setting of every chunking option
CONTEXTS = ("none", "title", "heading", "title+heading")
Context = Annotated[str, OneOf(CONTEXTS)]


class Tokenizer:
    """A model folder's tokenizer, as chunkers measure with it: tokens without special tokens,
    neither truncated nor padded (long texts are the point).

    Read from the folder's `tokenizer.json` by the `tokenizers` library, which is what
    transformers' fast tokenizers run: the same ids and offsets (checked on every text of the
    bundled corpora), without importing transformers and torch, some 6 s for a process that
    chunks for BM25. A folder without that file is read by transformers' AutoTokenizer."""

    def __init__(self, path: str) -> None:
        self.path = path
        serialized = Path(path) / "tokenizer.json"
        if serialized.is_file():
            from tokenizers import Tokenizer as RustTokenizer

            self._rust = RustTokenizer.from_file(str(serialized))
            self._rust.no_truncation()  # MiniLM's file truncates to 128 and pads to 128 tokens
            self._rust.no_padding()
        else:
            from transformers import AutoTokenizer

            self._rust = None
            self._transformers = AutoTokenizer.from_pretrained(path, local_files_only=True)

    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text."""
        if self._rust is not None:  # "fast": without the offsets, a third quicker
            return [
                len(encoding.ids) for encoding in self._rust.encode_batch_fast(list(texts), add_special_tokens=False)
            ]
        encoded = self._transformers(list(texts), add_special_tokens=False, verbose=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def offsets(self, texts: Sequence[str]) -> list[list[Span]]:
        """Each text's tokens as (start, end) character offsets."""
        if self._rust is not None:
            return [encoding.offsets for encoding in self._rust.encode_batch(list(texts), add_special_tokens=False)]
        encoded = self._transformers(list(texts), add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        return encoded["offset_mapping"]

    @cached_property
    def longest_token(self) -> int:
        """Characters of the longest vocabulary entry (reading MiniLM's 30,522 takes some 30 ms)."""
        vocabulary = self._rust.get_vocab() if self._rust is not None else self._transformers.get_vocab()
        return max(len(token) for token in vocabulary)


@cache
def load_tokenizer(path: str) -> Tokenizer:
    """The tokenizer of the model folder at `path`, loaded once per process: the runs of a sweep
    and their chunkers share it (they only read it); loading took 0.1 to 0.3 s each time."""
    return Tokenizer(path)


class Chunker(ABC):
    """A chunking strategy: `split` a corpus into chunks of at most `size` tokens of the
    tokenizer at `tokenizer_path` (a local model folder; None: MiniLM's), each with the `context`
    it embeds before its text (`sweep.retrieval.chunking.chunk_context`: one step for every strategy)."""

    size: int
    tokenizer_path: str | None
    context: str = "none"

    @cached_property
    def tokenizer(self) -> Tokenizer:
        from sweep.retrieval.models import default_model_path

        return load_tokenizer(self.tokenizer_path or default_model_path())

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text, without special tokens."""
        return self.tokenizer.count(texts) if texts else []

    def split(self, corpus: Corpus) -> list[Chunk]:
        """Every document's chunks, documents in corpus order, chunks in document order, each
        with its `context` in `Chunk.prefix` (the spans are the strategy's alone)."""
        return with_context(self.cut(corpus), corpus, self.context, whole_documents=self.size == 0)

    @abstractmethod
    def cut(self, corpus: Corpus) -> list[Chunk]:
        """The strategy itself: every document's chunks, as `split` returns them, without context."""


def check_overlap(overlap: int, size: int) -> None:
    if size and overlap >= size:  # size 0: whole documents
        raise InputError(f"chunking.overlap={overlap}: must be smaller than chunk={size} (or chunk=0: whole documents)")


@checked("chunking")
class TokenChunker(Chunker):
    """Windows of `size` tokens that overlap by `overlap` tokens; `size=0` means whole documents.
    The baseline: blind to structure, but every chunk but a document's last is exactly `size`
    tokens. `tokenizer`: a local model folder whose tokenizer measures the chunks (None: MiniLM's).
    `context`: what is embedded before each chunk's text (`none`, `title`, `heading`, `title+heading`)."""

    def __init__(
        self,
        size: Annotated[int, Range(0)],
        overlap: Annotated[int, Range(0)] = 32,
        tokenizer: str | None = None,
        context: Context = "none",
    ) -> None:
        check_overlap(overlap, size)
        self.size, self.overlap, self.tokenizer_path, self.context = size, overlap, tokenizer, context

    def cut(self, corpus: Corpus) -> list[Chunk]:
        contents = [doc.content for doc in corpus]
        chunks: list[Chunk] = []
        for doc, content, offsets in zip(corpus, contents, self.tokenizer.offsets(contents)):
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
