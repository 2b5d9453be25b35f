"""`SemanticChunker`: runs of sentences about one thing (chonkie's SemanticChunker on the local
sentence-transformers model)."""

from __future__ import annotations

import warnings
from functools import cached_property
from typing import Annotated, Any

from sweep.errors import InputError
from sweep.retrieval.chunking.chunker import Context, Span
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
    passes per sentence, so by far the slowest strategy. `tokenizer`: a local model folder
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
        for group in self._chonkie.chunk(content):
            if content[group.start_index : group.end_index] != group.text:  # chonkie's promise, checked
                raise RuntimeError(f"chonkie's SemanticChunker gave offsets that miss its text at {group.start_index}")
            span = trimmed(content, group.start_index, group.end_index)
            if span is not None:
                groups.append(span)
        tokens = self.count_tokens([content[a:b] for a, b in groups])
        out: list[Span] = []
        for (start, end), n_tokens in zip(groups, tokens):
            out.extend([(start, end)] if n_tokens <= self.size else self.recursive(content, start, end))
        return out
