"""Strategies that cut at the text's own boundaries, as character spans: `SpanChunker` (spans
to chunks, oversized pieces split by semchunk), `RecursiveChunker` and `SentenceChunker`."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from functools import cached_property, lru_cache
from typing import Annotated, Any

from sweep.formats.corpus import Corpus
from sweep.progress import progress_bar
from sweep.retrieval.chunking.chunk import Chunk
from sweep.retrieval.chunking.chunker import (
    CACHED_COUNTS,
    MIN_SENTENCE_CHARS,
    SENTENCE_ENDS,
    Chunker,
    Context,
    Span,
    check_overlap,
)
from sweep.settings import Range, checked


class SpanChunker(Chunker):
    """A strategy that finds each document's chunk spans on its own (`spans`); this class keeps
    whole documents for `size=0`, counts every chunk's tokens in one batch and numbers them."""

    def cut(self, corpus: Corpus) -> list[Chunk]:
        found: list[tuple[str, int, int, str]] = []  # doc id, start, end, text
        for doc in progress_bar(corpus, desc="chunking", unit="document"):  # one bar, however the strategy works
            content = doc.content
            if self.size == 0:  # whole documents, exactly as TokenChunker keeps them
                found.append((doc.id, 0, len(content), content))
                continue
            for start, end in self.spans(content):
                found.append((doc.id, start, end, content[start:end]))
        counts = self.count_tokens([text for _, _, _, text in found])
        chunks: list[Chunk] = []
        for (doc_id, start, end, text), n_tokens in zip(found, counts):
            index = chunks[-1].index + 1 if chunks and chunks[-1].doc_id == doc_id else 0
            chunks.append(Chunk(doc_id, index, start, end, text, n_tokens))
        return chunks

    @abstractmethod
    def spans(self, content: str) -> list[Span]:
        """(start, end) of each chunk of `content`, in order, trimmed of whitespace."""

    @cached_property
    def _token_counter(self) -> Callable[[str], int]:
        tokenizer = self.tokenizer

        @lru_cache(maxsize=CACHED_COUNTS)  # semchunk counts the same pieces again while it merges them
        def count(text: str) -> int:
            return tokenizer.count([text])[0]

        return count

    @cached_property
    def _semchunkers(self) -> dict[int, Any]:
        return {}

    def _semchunker(self, size: int) -> Any:
        """semchunk's chunker for pieces of `size` tokens, made once per size."""
        if size not in self._semchunkers:
            import semchunk

            count = self._token_counter

            def counter(text: str) -> int:
                # one character is one token at most: semchunk cannot cut a character, and would
                # recurse without end on one over its size (a Hangul syllable is 2 MiniLM tokens)
                return min(count(text), 1) if len(text) == 1 else count(text)

            # memoize=False: semchunk's memo is a module-wide dict that would keep every chunker alive
            self._semchunkers[size] = semchunk.chunkerify(
                counter, size, max_token_chars=self.tokenizer.longest_token, memoize=False
            )
        return self._semchunkers[size]

    def recursive(self, content: str, start: int = 0, end: int | None = None, overlap: int = 0) -> list[Span]:
        """semchunk's spans of `content[start:end]`, as offsets into `content`: at most `size`
        tokens each, split at the most structural separator that fits (blank lines, lines,
        sentences, clauses, words, characters), whitespace at the cuts dropped.

        With `overlap`, as semchunk does it: pieces of at most min(overlap, size - overlap)
        tokens, joined into windows of up to `size` tokens that advance by `size - overlap`, so
        a window repeats about `overlap` tokens (at most) of the one before. Unlike semchunk's own
        overlap, a window's joined text is counted again (pieces cut inside a word count
        differently once joined) and ends a piece earlier where it is over `size`."""
        end = len(content) if end is None else end
        if not overlap:
            return self._pieces(content, start, end, self.size)
        piece = min(overlap, self.size - overlap)
        pieces = self._pieces(content, start, end, piece)
        per_window, stride = self.size // piece, (self.size - overlap) // piece
        windows: list[Span] = []
        first = covered = 0  # pieces[:covered] are in a window already
        while covered < len(pieces):
            last = max(min(first + per_window, len(pieces)), covered + 1)  # pieces[first:last], one new at least
            while last - first > 1 and self._token_counter(content[pieces[first][0] : pieces[last - 1][1]]) > self.size:
                if last > covered + 1:
                    last -= 1
                else:
                    first += 1  # less overlap, rather than no new text
            windows.append((pieces[first][0], pieces[last - 1][1]))
            covered = last
            first = max(min(first + stride, last - 1), first + 1)  # overlap by a piece at least, and move on
        return windows

    def _pieces(self, content: str, start: int, end: int, size: int) -> list[Span]:
        _, offsets = self._semchunker(size)(content[start:end], offsets=True)
        spans = (trimmed(content, start + a, start + b) for a, b in offsets)
        return [span for span in spans if span is not None]


def trimmed(content: str, start: int, end: int) -> Span | None:
    """The span without whitespace at its ends; None if nothing else is left."""
    while start < end and content[start].isspace():
        start += 1
    while end > start and content[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


@checked("chunking")
class RecursiveChunker(SpanChunker):
    """Pieces of at most `size` tokens cut at the most structural separator that keeps them under
    it: blank lines (paragraphs), then line breaks, sentence ends, clause punctuation, spaces
    (words), and characters as a last resort, merged greedily up to `size` (semchunk; the
    recursive scheme of LangChain's RecursiveCharacterTextSplitter, with exact offsets).
    Paragraphs and sentences stay whole where they fit, unlike `tokens`' blind windows.
    `overlap` tokens (default 0: structural cuts need none) repeat the end of a chunk at the start
    of the next, as semchunk does it: chunks are then built from pieces of at most
    min(overlap, size - overlap) tokens, so the cuts fall at finer separators (see `recursive`).
    `tokenizer`: a local model folder (None: MiniLM's). `context`: what is embedded before each
    chunk's text (`none`, `title`, `heading`, `title+heading`)."""

    def __init__(
        self,
        size: Annotated[int, Range(0)],
        overlap: Annotated[int, Range(0)] = 0,
        tokenizer: str | None = None,
        context: Context = "none",
    ) -> None:
        check_overlap(overlap, size)
        self.size, self.overlap, self.tokenizer_path, self.context = size, overlap, tokenizer, context

    def spans(self, content: str) -> list[Span]:
        return self.recursive(content, overlap=self.overlap)


@checked("chunking")
class SentenceChunker(SpanChunker):
    """Whole sentences packed greedily up to `size` tokens: a chunk never ends mid-sentence, so
    an answer stated in one sentence is never cut in two. Sentence boundaries are chonkie's
    (". ", "! ", "? " and line breaks; a piece under 12 characters joins the next). `overlap`
    counts sentences: the next chunk starts `overlap` sentences before the previous one ended
    (fewer where `overlap` sentences and the next one would not fit in `size`, so every chunk
    adds a sentence). A sentence longer than `size` tokens is split by semchunk into pieces of
    its own that no other chunk shares. `tokenizer`: a local model folder (None: MiniLM's).
    `context`: what is embedded before each chunk's text (`none`, `title`, `heading`, `title+heading`)."""

    def __init__(
        self,
        size: Annotated[int, Range(0)],
        overlap: Annotated[int, Range(0)] = 0,
        tokenizer: str | None = None,
        context: Context = "none",
    ) -> None:
        self.size, self.overlap, self.tokenizer_path, self.context = size, overlap, tokenizer, context

    def sentences(self, content: str) -> list[Span]:
        """Each sentence's span, trimmed of whitespace; whitespace between sentences is in none."""
        import chonkie_core

        data = content.encode("utf-8")
        pieces = chonkie_core.split_pattern_offsets(
            data,
            patterns=[end.encode() for end in SENTENCE_ENDS],
            include_delim="prev",
            min_chars=MIN_SENTENCE_CHARS,
        )
        spans: list[Span] = []
        char, byte = 0, 0  # byte offsets to character offsets (every cut is after an ASCII delimiter)
        for first, last in pieces:
            start = char + len(data[byte:first].decode("utf-8"))
            end = start + len(data[first:last].decode("utf-8"))
            char, byte = end, last
            span = trimmed(content, start, end)
            if span is not None:
                spans.append(span)
        return spans

    def spans(self, content: str) -> list[Span]:
        sentences = self.sentences(content)
        tokens = self.count_tokens([content[a:b] for a, b in sentences])
        out: list[Span] = []
        i = 0
        while i < len(sentences):
            if tokens[i] > self.size:  # a sentence longer than a chunk: semchunk's pieces of it
                out.extend(self.recursive(content, *sentences[i]))
                i += 1
                continue
            j, total = i + 1, tokens[i]
            while j < len(sentences) and total + tokens[j] <= self.size:
                total, j = total + tokens[j], j + 1
            while j > i + 1 and self._token_counter(content[sentences[i][0] : sentences[j - 1][1]]) > self.size:
                j -= 1  # the joined text counts more than its sentences (a tokenizer that merges across them)
            out.append((sentences[i][0], sentences[j - 1][1]))
            if j == len(sentences):
                break
            i = self._next_start(tokens, i, j)
        return out

    def _next_start(self, tokens: list[int], i: int, j: int) -> int:
        """Where the chunk after sentences[i:j] starts: `overlap` sentences back, or fewer, so
        that it still takes sentence j and makes progress."""
        start = max(j - self.overlap, i + 1)
        while start < j and sum(tokens[start : j + 1]) > self.size:
            start += 1
        return start
