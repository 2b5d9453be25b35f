"""What every chunking strategy shares: the `Chunker` interface (its chunks are `Chunk`s, with
their context added in one step after the cut), the tokenizer it measures with, and `TokenChunker`,
the baseline of fixed token windows."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from functools import cache, cached_property
from pathlib import Path
from typing import Annotated

from sweep.errors import InputError
from sweep.formats.corpus import Corpus
from sweep.retrieval.chunking.chunk import Chunk
from sweep.retrieval.chunking.chunk_context import with_context
from sweep.settings import OneOf, Range, checked

log = logging.getLogger(__name__)

SENTENCE_ENDS = (". ", "! ", "? ", "\n")  # chonkie's default sentence delimiters
MIN_SENTENCE_CHARS = 12  # chonkie's default: a shorter piece joins its neighbour ("e.g. ", "1. ")
CACHED_COUNTS = 4096  # token counts a chunker remembers (texts of at most ~6 * size characters)
# tokenising in bounded pieces (`Tokenizer`): a text over SLICE_CHARS characters is tokenised in
# slices of SLICE_CHARS, each with SEAM_CHARS more on either side, and joined where neighbours agree
# on SEAM_TOKENS tokens either side; no more than about BATCH_CHARS characters go to one call
SLICE_CHARS = 100_000
SEAM_CHARS = 1_000
SEAM_TOKENS = 8
BATCH_CHARS = 400_000

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
    chunks for BM25. A folder without that file is read by transformers' AutoTokenizer.

    Memory is bounded whatever the texts' length: texts are tokenised in batches of at most
    `BATCH_CHARS` characters (`batches`), and a text longer than `SLICE_CHARS` in slices of
    that many, joined where the join changes no token, so that a long text's tokens are exactly
    those the whole text gives (`offset_slices`). A 60 MB text tokenised in one call took 9 GB
    (and, short of memory, ended in a panic of the tokenizer's)."""

    def __init__(self, path: str, slice_chars: int = SLICE_CHARS, batch_chars: int = BATCH_CHARS) -> None:
        """`slice_chars`, `batch_chars`: `SLICE_CHARS` and `BATCH_CHARS` (smaller in tests)."""
        self.path = path
        self.slice_chars, self.batch_chars = slice_chars, batch_chars
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
        if len(texts) == 1 and len(texts[0]) <= self.slice_chars:  # as semchunk asks, piece by piece
            return self._count(texts)
        counts: list[int] = []
        for batch, long in self.batches(texts):
            if long:
                counts.append(sum(len(piece) for piece in self.offset_slices(batch[0])))
            else:
                counts.extend(self._count(batch))
        return counts

    def offsets(self, texts: Sequence[str]) -> list[list[Span]]:
        """Each text's tokens as (start, end) character offsets (a long text's are all in memory
        at once: `offset_slices` gives them a slice at a time)."""
        out: list[list[Span]] = []
        for batch, long in self.batches(texts):
            if long:
                out.append([span for piece in self.offset_slices(batch[0]) for span in piece])
            else:
                out.extend(offsets for _, offsets in self._encode(batch))
        return out

    def offset_slices(self, text: str) -> Iterator[list[Span]]:
        """The tokens of `text` as (start, end) character offsets into it, a slice of the text at
        a time (one list for a text of at most `slice_chars`): together, `offsets([text])[0]`.

        A longer text is cut every `slice_chars` characters, each slice tokenised with the
        `SEAM_CHARS` on either side of its cuts, and two neighbouring slices' tokens are joined
        at a token start near their cut where they agree on the `SEAM_TOKENS` tokens either
        side: there neither slice's edges (a space a tokenizer prepends to every text, say) reach
        the tokens, which are the whole text's. Where two slices agree nowhere (a word of
        thousands of characters over the cut), they are joined at the cut, with a warning: the
        tokens next to it may differ from the whole text's."""
        if len(text) <= self.slice_chars:
            yield self._encode([text])[0][1]
            return
        bounds = [*range(0, len(text), self.slice_chars), len(text)]
        windows = [  # (start, end, the cut it starts at)
            (max(start - SEAM_CHARS, 0), min(end + SEAM_CHARS, len(text)), start)
            for start, end in zip(bounds, bounds[1:])
        ]
        held: tuple[list[int], list[Span]] | None = None  # the last slice's tokens, from its join on
        forced: list[int] = []
        for group in _groups(windows, self.batch_chars):
            encoded = self._encode([text[first:last] for first, last, _ in group], ids=True)
            for (first, _, cut), (ids, offsets) in zip(group, encoded):
                tokens = (ids, [(a + first, b + first) for a, b in offsets])
                if held is None:
                    held = tokens
                    continue
                joint = _join(held, tokens, cut)
                if joint is None:
                    forced.append(cut)
                    joint = _forced_join(held, tokens, cut)
                yield held[1][: joint[0]]
                held = (tokens[0][joint[1] :], tokens[1][joint[1] :])
        assert held is not None  # a long text has two slices at least
        yield held[1]
        if forced:
            log.warning(
                "%s: a %d-character text was tokenised in slices, %d of which (the first at character %d) "
                "agree with the next nowhere near their cut; the tokens next to those cuts may differ "
                "from the whole text's",
                self.path, len(text), len(forced), forced[0],
            )  # fmt: skip

    def _count(self, texts: Sequence[str]) -> list[int]:
        if self._rust is not None:  # "fast": without the offsets, a third quicker
            return [
                len(encoding.ids) for encoding in self._rust.encode_batch_fast(list(texts), add_special_tokens=False)
            ]
        encoded = self._transformers(list(texts), add_special_tokens=False, verbose=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def _encode(self, texts: Sequence[str], ids: bool = False) -> list[tuple[list[int], list[Span]]]:
        """(ids, offsets) of each text; ids only where `ids`, else []."""
        if self._rust is not None:
            return [
                (encoding.ids if ids else [], encoding.offsets)
                for encoding in self._rust.encode_batch(list(texts), add_special_tokens=False)
            ]
        encoded = self._transformers(list(texts), add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        return [
            (list(token_ids) if ids else [], [tuple(pair) for pair in mapping])
            for token_ids, mapping in zip(encoded["input_ids"], encoded["offset_mapping"])
        ]

    def batches(self, texts: Sequence[str]) -> Iterator[tuple[Sequence[str], bool]]:
        """`texts` in order, as (batch, long): a text over `slice_chars` alone (long), the others in
        batches of at most `batch_chars` characters (or one text)."""
        batch: list[str] = []
        size = 0
        for text in texts:
            if len(text) > self.slice_chars or (batch and size + len(text) > self.batch_chars):
                if batch:
                    yield batch, False
                batch, size = [], 0
            if len(text) > self.slice_chars:
                yield [text], True
                continue
            batch.append(text)
            size += len(text)
        if batch:
            yield batch, False

    @cached_property
    def longest_token(self) -> int:
        """Characters of the longest vocabulary entry (reading MiniLM's 30,522 takes some 30 ms)."""
        vocabulary = self._rust.get_vocab() if self._rust is not None else self._transformers.get_vocab()
        return max(len(token) for token in vocabulary)


def _groups(windows: list[tuple[int, int, int]], chars: int) -> Iterator[list[tuple[int, int, int]]]:
    """`windows` (start, end, ...) in order, in groups of at most `chars` characters (or one window)."""
    group: list[tuple[int, int, int]] = []
    size = 0
    for window in windows:
        if group and size + window[1] - window[0] > chars:
            yield group
            group, size = [], 0
        group.append(window)
        size += window[1] - window[0]
    if group:
        yield group


def _join(left: tuple[list[int], list[Span]], right: tuple[list[int], list[Span]], cut: int) -> Span | None:
    """(i, j) such that left's tokens before i and right's from j are the text's, joined at the
    token start nearest `cut` where both slices have a token start and agree on `SEAM_TOKENS`
    tokens (ids and offsets) either side of it; None where they agree nowhere near it."""
    (left_ids, left_spans), (right_ids, right_spans) = left, right
    in_right: dict[int, int] = {}  # token start -> the first right token there
    for j, (start, _) in enumerate(right_spans):
        if start >= cut + SEAM_CHARS:
            break
        in_right.setdefault(start, j)
    in_left: dict[int, int] = {}
    for i in range(len(left_spans) - 1, -1, -1):
        start = left_spans[i][0]
        if start < cut - SEAM_CHARS:
            break
        if start in in_right:
            in_left[start] = i  # the first left token there, found last
    n = SEAM_TOKENS
    for start in sorted(in_left, key=lambda start: (abs(start - cut), start)):
        i, j = in_left[start], in_right[start]
        if i < n or j < n or i + n > len(left_spans) or j + n > len(right_spans):
            continue
        if (
            left_ids[i - n : i + n] == right_ids[j - n : j + n]
            and left_spans[i - n : i + n] == right_spans[j - n : j + n]
        ):
            return i, j
    return None


def _forced_join(left: tuple[list[int], list[Span]], right: tuple[list[int], list[Span]], cut: int) -> Span:
    """(i, j): left's tokens starting before `cut`, then right's starting at or after the first
    of left's that do not (or `cut`)."""
    left_spans, right_spans = left[1], right[1]
    i = next((i for i, (start, _) in enumerate(left_spans) if start >= cut), len(left_spans))
    joint = left_spans[i][0] if i < len(left_spans) else cut
    j = next((j for j, (start, _) in enumerate(right_spans) if start >= joint), len(right_spans))
    return i, j


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
        """Short documents' tokens in batches (`Tokenizer.batches`), a long one's a slice at a
        time (`Tokenizer.offset_slices`): only the tokens of the windows still to cut are kept."""
        chunks: list[Chunk] = []
        tokenizer, documents = self.tokenizer, iter(corpus)
        for batch, long in tokenizer.batches([doc.content for doc in corpus]):
            for offsets in [tokenizer.offset_slices(batch[0])] if long else [[one] for one in tokenizer.offsets(batch)]:
                doc = next(documents)
                chunks.extend(self._windows(doc.id, doc.content, offsets))
        return chunks

    def _windows(self, doc_id: str, content: str, pieces: Iterable[list[Span]]) -> list[Chunk]:
        """The windows over a document's tokens, which come in `pieces` (consecutive runs of
        them): windows of `size` tokens starting every `size - overlap` tokens, the last one
        ending at the last token; the whole document where it has no more than `size` tokens."""
        size, step = self.size, self.size - self.overlap
        windows: list[Chunk] = []
        kept: list[Span] = []  # tokens from `kept[first]` on belong to windows still to cut
        first = n_tokens = 0
        for piece in pieces:
            n_tokens += len(piece)
            if size == 0:
                continue
            kept.extend(piece)
            while len(kept) - first > size:  # a whole window, and tokens after it
                start, end = kept[first][0], kept[first + size - 1][1]
                windows.append(Chunk(doc_id, len(windows), start, end, content[start:end], size))
                first += step
            del kept[:first]
            first = 0
        if size == 0 or n_tokens <= size:
            return [Chunk(doc_id, 0, 0, len(content), content, n_tokens)]
        start, end = kept[first][0], kept[-1][1]  # the last window: more than `overlap` tokens are left
        windows.append(Chunk(doc_id, len(windows), start, end, content[start:end], len(kept) - first))
        return windows
