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

Long documents take memory bounded by design, not by their length: the tokenizer takes a text
over 100,000 characters in slices, joined where they agree, so every count and offset is the
whole text's (`chunker.Tokenizer`); `tokens` keeps only the tokens of the windows still to cut,
and `semantic` gives chonkie a long document a slice at a time (`semantic.paragraph_slices`).

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

`Chunk.prefix` is context embedded before the chunk text: every strategy's `context` setting
(`none`, `title`, `heading`, `title+heading`; `markdown` defaults to `heading`, its section's
heading path), added in one step after the cut (`sweep.retrieval.chunking.chunk_context`); it is never
part of the offsets. Embed `Chunk.embedded_text`.
"""

from sweep.retrieval.chunking.chunk import Chunk
from sweep.retrieval.chunking.chunker import Chunker, TokenChunker
from sweep.retrieval.chunking.markdown import MarkdownChunker
from sweep.retrieval.chunking.semantic import SemanticChunker
from sweep.retrieval.chunking.spans import RecursiveChunker, SentenceChunker, SpanChunker

__all__ = [
    "Chunk",
    "Chunker",
    "MarkdownChunker",
    "RecursiveChunker",
    "SemanticChunker",
    "SentenceChunker",
    "SpanChunker",
    "TokenChunker",
]
