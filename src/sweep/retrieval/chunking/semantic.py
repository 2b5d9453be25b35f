"""`SemanticChunker`: runs of sentences about one thing (chonkie's SemanticChunker on the local
sentence-transformers model)."""

from __future__ import annotations

import warnings
from functools import cached_property
from typing import Annotated, Any

from sweep.errors import InputError
from sweep.retrieval.chunking.chunker import SLICE_CHARS, Context, Span
from sweep.retrieval.chunking.spans import SpanChunker, trimmed
from sweep.retrieval.models import load_sentence_transformer, sentence_transformers_folder
from sweep.settings import NonEmpty, Range, checked


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
    passes per sentence, so by far the slowest strategy. A document over `SLICE_CHARS`
    characters is chunked a slice of at most that many at a time, cut at a paragraph break
    (`paragraph_slices`), so that memory does not grow with it (chonkie holds every sentence's
    tokens and embeddings at once): no group spans two slices, and the threshold's percentile
    is each slice's. `tokenizer`: a local model folder
    (None: MiniLM's). `context`: what is embedded before each chunk's text (`none`, `title`,
    `heading`, `title+heading`)."""

    def __init__(
        self,
        size: Annotated[int, Range(0)],
        threshold: Annotated[float, Range(0, 1)] = 0.8,
        model: Annotated[str | None, NonEmpty()] = None,
        tokenizer: str | None = None,
        context: Context = "none",
    ) -> None:
        if threshold in (0, 1):
            raise InputError(f"chunking.threshold={threshold}: must be between 0 and 1, both excluded")
        self.size, self.threshold, self.model_path, self.tokenizer_path = size, threshold, model, tokenizer
        self.context = context
        self.slice_chars = SLICE_CHARS

    @cached_property
    def model(self) -> Any:
        return load_sentence_transformer(sentence_transformers_folder(self.model_path, "chunking.model"))

    @cached_property
    def _chonkie(self) -> Any:
        from chonkie import SemanticChunker as Semantic
        from chonkie.embeddings import SentenceTransformerEmbeddings

        with warnings.catch_warnings():  # chonkie calls a method sentence-transformers renamed
            warnings.simplefilter("ignore", FutureWarning)
            embeddings = SentenceTransformerEmbeddings(self.model)  # an instance: a name would be downloaded
        return Semantic(embedding_model=embeddings, chunk_size=self.size, threshold=self.threshold)

    def spans(self, content: str) -> list[Span]:
        groups = []
        for first, last in paragraph_slices(content, self.slice_chars):
            piece = content[first:last]
            for group in self._chonkie.chunk(piece):
                if piece[group.start_index : group.end_index] != group.text:  # chonkie's promise, checked
                    raise RuntimeError(
                        f"chonkie's SemanticChunker gave offsets that miss its text at {first + group.start_index}"
                    )
                span = trimmed(content, first + group.start_index, first + group.end_index)
                if span is not None:
                    groups.append(span)
        tokens = self.count_tokens([content[a:b] for a, b in groups])
        out: list[Span] = []
        for (start, end), n_tokens in zip(groups, tokens):
            out.extend([(start, end)] if n_tokens <= self.size else self.recursive(content, start, end))
        return out


_BREAKS = ("\n\n", "\n", ". ", " ")  # where a slice of a long document ends, best first


def paragraph_slices(content: str, limit: int) -> list[Span]:
    """(start, end) of consecutive slices of `content` of at most `limit` characters, each cut
    after the last blank line, else line break, sentence end or space in its second half (or
    at `limit`); the whole content where it is no longer."""
    out: list[Span] = []
    start = 0
    while len(content) - start > limit:
        end = start + limit
        cut = next(
            (
                at + len(mark)
                for mark in _BREAKS
                if (at := content.rfind(mark, start + limit // 2, end - len(mark) + 1)) >= 0
            ),
            end,
        )
        out.append((start, cut))
        start = cut
    out.append((start, len(content)))
    return out
