"""Token chunking with the real MiniLM tokenizer: sizes, overlap, offsets back into the text."""

from __future__ import annotations

import pytest

from sweep.chunking import TokenChunker
from sweep.corpus import Corpus, Document
from sweep.errors import InputError

TEXT = " ".join(f"word{i}" for i in range(120))  # a few hundred MiniLM tokens


@pytest.fixture(scope="module")
def chunker_factory():
    shared = TokenChunker(8, overlap=0)
    tokenizer = shared.tokenizer

    def make(size, overlap=0):
        chunker = TokenChunker(size, overlap)
        chunker.__dict__["tokenizer"] = tokenizer  # one tokenizer load for the module
        return chunker

    return make


def test_windows_cover_the_document_with_the_requested_overlap(chunker_factory):
    corpus = Corpus((Document("d", TEXT, "Title"),))
    chunker = chunker_factory(32, overlap=8)
    chunks = chunker.split(corpus)
    n_tokens = len(chunker.tokenizer(corpus.documents[0].content, add_special_tokens=False)["input_ids"])
    assert len(chunks) == -(-(n_tokens - 8) // 24)
    assert all(c.n_tokens == 32 for c in chunks[:-1]) and 0 < chunks[-1].n_tokens <= 32
    content = corpus.documents[0].content
    assert chunks[0].start == 0 and chunks[-1].end == len(content)
    for chunk in chunks:
        assert chunk.text == content[chunk.start : chunk.end] and chunk.doc_id == "d"
    first, second = chunks[0], chunks[1]
    assert second.start < first.end  # overlap: the second window starts inside the first
    assert [c.index for c in chunks] == list(range(len(chunks)))


def test_size_zero_and_short_documents_stay_whole(chunker_factory):
    corpus = Corpus((Document("long", TEXT), Document("short", "tiny text")))
    whole = chunker_factory(0).split(corpus)
    assert [(c.doc_id, c.text) for c in whole] == [("long", TEXT), ("short", "tiny text")]
    assert [c.doc_id for c in chunker_factory(16).split(corpus)].count("short") == 1


@pytest.mark.parametrize(
    ("size", "overlap", "message"),
    [
        (-1, 0, "chunking.size=-1: must be an integer >= 0"),
        (16, 16, "overlap=16"),
        (16, -2, "chunking.overlap=-2: must be an integer >= 0"),
    ],
)
def test_bad_sizes(size, overlap, message):
    with pytest.raises(InputError, match=message):
        TokenChunker(size, overlap)
    with pytest.raises(InputError, match="chunking.overlap=32: must be smaller than chunk=16"):
        TokenChunker(16)  # the default overlap needs chunks longer than 32 tokens
