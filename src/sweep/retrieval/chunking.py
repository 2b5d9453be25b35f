"""Chunking: split documents into pieces measured in the embedding model's tokens.

Every strategy is an option of the `chunking` config group and a `Chunker`: `split(corpus)`
returns the chunks of every document. The tokenizer is the configured model's own
(`conf/chunking/*.yaml` interpolate `model.embedder.path`), so `chunk=200` means 200 tokens of
the model that embeds the chunks; lexical models and models without a path are measured in
MiniLM tokens. `Chunk.n_tokens` is the number of tokens of `Chunk.text` in that tokenizer
(without special tokens; for `tokens`, the window's tokens in the document's tokenization, which
differ where a window starts or ends inside a word) and never more than `size`, but for a single
character of more tokens than `size` (a Hangul syllable is 2 or 3 MiniLM tokens): no strategy
cuts a character.

Every chunk remembers its document and its exact character span in `Document.content`
(`content[chunk.start:chunk.end] == chunk.text`), so a chunk hit maps back to a document (a
document ranks at its best chunk) and to the exact text, and character-level metrics work for
any strategy. A document's chunks come in document order (starts strictly increasing) and cover
it: every non-whitespace character lies in some chunk. Chunks may overlap; between chunks there
may be whitespace only (every strategy but `tokens` trims whitespace at the ends of a chunk).
`size=0` (`chunk=0`) keeps whole documents, in every strategy, as the same chunks `tokens` gives.

The strategies, and the libraries they use because each gives exact offsets:

- `TokenChunker` (`tokens`): fixed windows of tokens, cut at the tokenizer's own offset mapping.
- `RecursiveChunker` (`recursive`): semchunk (paragraphs, then lines, sentences, words, as
  LangChain's RecursiveCharacterTextSplitter does), which returns each chunk's (start, end)
  and counts tokens with the tokenizer we give it.
- `SentenceChunker` (`sentences`): sentence boundaries from chonkie-core's
  `split_pattern_offsets` (chonkie's own sentence splitter: exact byte offsets, Rust, linear
  time), packed here; a sentence longer than `size` is split by semchunk.
- `MarkdownChunker` (`markdown`): headings found by markdown-it-py (a CommonMark parser, so a
  `#` line inside fenced code is no heading; its line map gives exact offsets); oversized
  sections are split by semchunk.
- `SemanticChunker` (`semantic`): chonkie's `SemanticChunker` with the local sentence-
  transformers model (exact start/end indices of sentence groups); oversized groups are split
  by semchunk.

`Chunk.prefix` is context embedded before the chunk text (the heading path of a Markdown
section); it is never part of the offsets. Embed `Chunk.embedded_text`.
"""

from __future__ import annotations

import re
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Annotated, Any

from sweep.errors import InputError
from sweep.formats.corpus import Corpus
from sweep.settings import NonEmpty, Range, checked

PREFIX_SEPARATOR = "\n\n"  # between a chunk's prefix and its text in `embedded_text`
HEADING_SEPARATOR = " > "  # between the headings of a heading path
SENTENCE_ENDS = (". ", "! ", "? ", "\n")  # chonkie's default sentence delimiters
MIN_SENTENCE_CHARS = 12  # chonkie's default: a shorter piece joins its neighbour ("e.g. ", "1. ")
CACHED_COUNTS = 4096  # token counts a chunker remembers (texts of at most ~6 * size characters)
_LINE_BREAK = re.compile(r"\r\n?|\n")  # what markdown-it counts as a line break

Span = tuple[int, int]


@dataclass(frozen=True)
class Chunk:
    doc_id: str
    index: int  # position of the chunk within its document
    start: int  # character offsets into the document's content
    end: int
    text: str
    n_tokens: int  # tokens of `text` in the chunker's tokenizer, no special tokens (tokens: the window's)
    prefix: str = ""  # context embedded before the text (a heading path); not in the offsets

    @property
    def embedded_text(self) -> str:
        """What is embedded: the prefix, a blank line, the text; the text alone without a prefix."""
        return f"{self.prefix}{PREFIX_SEPARATOR}{self.text}" if self.prefix else self.text


class Chunker(ABC):
    """A chunking strategy: `split` a corpus into chunks of at most `size` tokens of the
    tokenizer at `tokenizer_path` (a local model folder; None: MiniLM's)."""

    size: int
    tokenizer_path: str | None

    @cached_property
    def tokenizer(self) -> Any:
        from transformers import AutoTokenizer

        from sweep.retrieval.embed import default_model_path

        return AutoTokenizer.from_pretrained(self.tokenizer_path or default_model_path(), local_files_only=True)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text, without special tokens."""
        if not texts:
            return []
        encoded = self.tokenizer(list(texts), add_special_tokens=False, verbose=False)  # long texts are the point
        return [len(ids) for ids in encoded["input_ids"]]

    @abstractmethod
    def split(self, corpus: Corpus) -> list[Chunk]:
        """Every document's chunks, documents in corpus order, chunks in document order."""


def _check_overlap(overlap: int, size: int) -> None:
    if size and overlap >= size:  # size 0: whole documents
        raise InputError(f"chunking.overlap={overlap}: must be smaller than chunk={size} (or chunk=0: whole documents)")


@checked("chunking")
class TokenChunker(Chunker):
    """Windows of `size` tokens that overlap by `overlap` tokens; `size=0` means whole documents.
    The baseline: blind to structure, but every chunk but a document's last is exactly `size`
    tokens. `tokenizer`: a local model folder whose tokenizer measures the chunks (None: MiniLM's)."""

    def __init__(
        self, size: Annotated[int, Range(0)], overlap: Annotated[int, Range(0)] = 32, tokenizer: str | None = None
    ) -> None:
        _check_overlap(overlap, size)
        self.size, self.overlap, self.tokenizer_path = size, overlap, tokenizer

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


class SpanChunker(Chunker):
    """A strategy that finds each document's chunk spans on its own (`spans`); this class keeps
    whole documents for `size=0`, counts every chunk's tokens in one batch and numbers them."""

    def split(self, corpus: Corpus) -> list[Chunk]:
        found: list[tuple[str, int, int, str, str]] = []  # doc id, start, end, text, prefix
        for doc in corpus:
            content = doc.content
            if self.size == 0:  # whole documents, exactly as TokenChunker keeps them
                found.append((doc.id, 0, len(content), content, ""))
                continue
            for start, end, prefix in self.spans(content):
                found.append((doc.id, start, end, content[start:end], prefix))
        counts = self.count_tokens([text for _, _, _, text, _ in found])
        chunks: list[Chunk] = []
        for (doc_id, start, end, text, prefix), n_tokens in zip(found, counts):
            index = chunks[-1].index + 1 if chunks and chunks[-1].doc_id == doc_id else 0
            chunks.append(Chunk(doc_id, index, start, end, text, n_tokens, prefix))
        return chunks

    @abstractmethod
    def spans(self, content: str) -> list[tuple[int, int, str]]:
        """(start, end, prefix) of each chunk of `content`, in order, trimmed of whitespace."""

    @cached_property
    def _token_counter(self) -> Callable[[str], int]:
        tokenizer = self.tokenizer

        @lru_cache(maxsize=CACHED_COUNTS)  # semchunk counts the same pieces again while it merges them
        def count(text: str) -> int:
            return len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

        return count

    @cached_property
    def _longest_token(self) -> int:
        return max(len(token) for token in self.tokenizer.get_vocab())

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
                counter, size, max_token_chars=self._longest_token, memoize=False
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
        trimmed = (_trimmed(content, start + a, start + b) for a, b in offsets)
        return [span for span in trimmed if span is not None]


def _trimmed(content: str, start: int, end: int) -> Span | None:
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
    `tokenizer`: a local model folder (None: MiniLM's)."""

    def __init__(
        self, size: Annotated[int, Range(0)], overlap: Annotated[int, Range(0)] = 0, tokenizer: str | None = None
    ) -> None:
        _check_overlap(overlap, size)
        self.size, self.overlap, self.tokenizer_path = size, overlap, tokenizer

    def spans(self, content: str) -> list[tuple[int, int, str]]:
        return [(start, end, "") for start, end in self.recursive(content, overlap=self.overlap)]


@checked("chunking")
class SentenceChunker(SpanChunker):
    """Whole sentences packed greedily up to `size` tokens: a chunk never ends mid-sentence, so
    an answer stated in one sentence is never cut in two. Sentence boundaries are chonkie's
    (". ", "! ", "? " and line breaks; a piece under 12 characters joins the next). `overlap`
    counts sentences: the next chunk starts `overlap` sentences before the previous one ended
    (fewer where `overlap` sentences and the next one would not fit in `size`, so every chunk
    adds a sentence). A sentence longer than `size` tokens is split by semchunk into pieces of
    its own that no other chunk shares. `tokenizer`: a local model folder (None: MiniLM's)."""

    def __init__(
        self, size: Annotated[int, Range(0)], overlap: Annotated[int, Range(0)] = 0, tokenizer: str | None = None
    ) -> None:
        self.size, self.overlap, self.tokenizer_path = size, overlap, tokenizer

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
            span = _trimmed(content, start, end)
            if span is not None:
                spans.append(span)
        return spans

    def spans(self, content: str) -> list[tuple[int, int, str]]:
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
        return [(start, end, "") for start, end in out]

    def _next_start(self, tokens: list[int], i: int, j: int) -> int:
        """Where the chunk after sentences[i:j] starts: `overlap` sentences back, or fewer, so
        that it still takes sentence j and makes progress."""
        start = max(j - self.overlap, i + 1)
        while start < j and sum(tokens[start : j + 1]) > self.size:
            start += 1
        return start


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
        line_starts = [0] + [match.end() for match in _LINE_BREAK.finditer(content)]
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
            if (span := _trimmed(content, start, end)) is not None
        ]
        tokens = self.count_tokens([content[start:end] for start, end, _ in sections])
        out: list[tuple[int, int, str]] = []
        for (start, end, path), n_tokens in zip(sections, tokens):
            prefix = path if self.heading_prefix else ""
            pieces = [(start, end)] if n_tokens <= self.size else self.recursive(content, start, end)
            out.extend((a, b, prefix) for a, b in pieces)
        return out


@checked("chunking")
class SemanticChunker(SpanChunker):
    """Runs of sentences about one thing, so that a chunk does not mix topics: chonkie's
    SemanticChunker embeds each sentence (chonkie's sentences: ". ", "! ", "? ", line breaks,
    24 characters at least) and the 3 sentences before it with the local sentence-transformers
    `model`, smooths their similarity along the text and breaks at its local minima.
    `threshold` (between 0 and 1, both excluded; chonkie's default 0.8) keeps the minima up to
    that percentile of their values: a higher threshold breaks more often. Groups are capped at
    `size` tokens (chonkie counts sentences in `model`'s tokenizer; a group still over `size` in
    `tokenizer`'s tokens, such as one long sentence, is split by semchunk). `model`: a local
    sentence-transformers folder (None: MiniLM), loaded on first use, never downloaded; two model
    passes per sentence, so by far the slowest strategy. `tokenizer`: a local model folder
    (None: MiniLM's)."""

    def __init__(
        self,
        size: Annotated[int, Range(0)],
        threshold: Annotated[float, Range(0, 1)] = 0.8,
        model: Annotated[str | None, NonEmpty()] = None,
        tokenizer: str | None = None,
    ) -> None:
        if threshold in (0, 1):
            raise InputError(f"chunking.threshold={threshold}: must be between 0 and 1, both excluded")
        self.size, self.threshold, self.model_path, self.tokenizer_path = size, threshold, model, tokenizer

    @cached_property
    def model(self) -> Any:
        from pathlib import Path

        from sentence_transformers import SentenceTransformer

        from sweep.retrieval.embed import default_model_path

        path = Path(self.model_path or default_model_path())
        if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
            raise InputError(f"chunking.model={path}: not a local sentence-transformers model folder")
        return SentenceTransformer(str(path), device="cpu", local_files_only=True)

    @cached_property
    def _chonkie(self) -> Any:
        from chonkie import SemanticChunker as Semantic
        from chonkie.embeddings import SentenceTransformerEmbeddings

        with warnings.catch_warnings():  # chonkie calls a method sentence-transformers renamed
            warnings.simplefilter("ignore", FutureWarning)
            embeddings = SentenceTransformerEmbeddings(self.model)  # an instance: a name would be downloaded
        return Semantic(embedding_model=embeddings, chunk_size=self.size, threshold=self.threshold)

    def spans(self, content: str) -> list[tuple[int, int, str]]:
        groups = []
        for group in self._chonkie.chunk(content):
            if content[group.start_index : group.end_index] != group.text:  # chonkie's promise, checked
                raise RuntimeError(f"chonkie's SemanticChunker gave offsets that miss its text at {group.start_index}")
            span = _trimmed(content, group.start_index, group.end_index)
            if span is not None:
                groups.append(span)
        tokens = self.count_tokens([content[a:b] for a, b in groups])
        out: list[Span] = []
        for (start, end), n_tokens in zip(groups, tokens):
            out.extend([(start, end)] if n_tokens <= self.size else self.recursive(content, start, end))
        return [(start, end, "") for start, end in out]
