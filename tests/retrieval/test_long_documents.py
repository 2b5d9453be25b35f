"""Long documents: a text over the tokenizer's slice size is tokenised a slice at a time, with
exactly the tokens, offsets and chunks the whole text gives (MiniLM's tokenizer and tokenizers of
other kinds, trained here), and chunking a long Markdown document takes bounded memory (before,
a 60 MB file took 9 GB and ended in a panic of the tokenizer's)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from helpers import processes
from sweep.formats.corpus import Corpus, Document
from sweep.retrieval.chunking import Chunker, MarkdownChunker, RecursiveChunker, SentenceChunker, TokenChunker
from sweep.retrieval.chunking.chunker import SEAM_CHARS, Tokenizer
from sweep.retrieval.models import default_model_path

SLICE = 3_000  # characters per slice here (100,000 in use): many joins in a short text


def long_markdown(sections: int) -> str:
    """Markdown of about 330 bytes a section: headings, paragraphs, a list, code, words that
    split into several tokens, accents, CJK, emoji, double spaces, CRLF and tabs."""
    parts = []
    for i in range(sections):
        parts.append(
            f"## Section {i}: annual leave\n\n"
            f"Employees get {20 + i % 9} days of leave.  Requests go to the manager {i}; "
            f"naïve café résumé Zürich 東京都{i} 🙂 and tokenization-heavy hyperparameterisation.\r\n"
            f"- item {i}\n- another\titem\n\n"
            f"```python\nx_{i} = {i * 7}  # code\n```\n\n"
            f"A sentence that ends here. Another one follows! Does it? Yes {i}.\n\n"
        )
    return "".join(parts)


@pytest.fixture(scope="module")
def minilm() -> str:
    return str(default_model_path())


def test_a_long_text_has_the_whole_texts_tokens_a_slice_at_a_time(minilm):
    text = long_markdown(60)  # some 34,000 characters: 11 slices
    whole, sliced = Tokenizer(minilm), Tokenizer(minilm, slice_chars=SLICE, batch_chars=4 * SLICE)
    pieces = list(sliced.offset_slices(text))
    assert len(pieces) == len(range(0, len(text), SLICE))
    assert [span for piece in pieces for span in piece] == whole.offsets([text])[0] == sliced.offsets([text])[0]
    texts = [text, "short", "", text[:SLICE], text[: SLICE + 1], *text.split("\n\n")]
    assert sliced.count(texts) == whole.count(texts) == [len(offsets) for offsets in whole.offsets(texts)]


STRATEGIES = {
    "tokens": lambda: TokenChunker(40, overlap=8),
    "tokens-whole": lambda: TokenChunker(0),
    "recursive": lambda: RecursiveChunker(40),
    "recursive-overlap": lambda: RecursiveChunker(40, overlap=10),
    "sentences": lambda: SentenceChunker(40, overlap=1),
    "markdown": lambda: MarkdownChunker(40),
}


@pytest.mark.parametrize("kind", STRATEGIES)
def test_every_strategy_cuts_a_long_document_as_it_cuts_it_whole(minilm, kind):
    """The same chunks, offsets and token counts, from a tokenizer that slices every text over
    3,000 characters (a document, a section, a piece semchunk counts) as from one that never does."""
    corpus = Corpus((Document("long", long_markdown(30), prepend_title=False), Document("short", "A short one.")))
    chunkers: list[Chunker] = []
    for tokenizer in (Tokenizer(minilm, slice_chars=10**9), Tokenizer(minilm, slice_chars=SLICE, batch_chars=SLICE)):
        chunker = STRATEGIES[kind]()
        chunker.__dict__["tokenizer"] = tokenizer  # the cached property, set
        chunkers.append(chunker)
    whole, sliced = (chunker.split(corpus) for chunker in chunkers)
    assert len(whole) > 1 and sliced == whole


def train(kind: str, folder: Path, text: str) -> str:
    """A small tokenizer of `kind` trained on `text`, saved as `folder/tokenizer.json`, as a model
    folder holds it: byte-level BPE (GPT-2, RoBERTa), SentencePiece's Unigram (XLM-R, T5), a BPE
    whose normalizer prepends '▁' to every text (Llama, Mistral), one that strips every text."""
    from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from tokenizers import Tokenizer as RustTokenizer

    special = ["<unk>"]
    if kind == "byte-level":
        tokenizer = RustTokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        tokenizer.post_processor = processors.ByteLevel(trim_offsets=True)
        trainer = trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    elif kind == "unigram":
        tokenizer = RustTokenizer(models.Unigram())
        tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=600, unk_token="<unk>", special_tokens=special)
    elif kind == "prepend":
        tokenizer = RustTokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
        tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=special)
    else:  # strip
        tokenizer = RustTokenizer(models.Unigram())
        tokenizer.normalizer = normalizers.Sequence([normalizers.Strip(), normalizers.Lowercase()])
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
        trainer = trainers.UnigramTrainer(vocab_size=600, unk_token="<unk>", special_tokens=special)
    tokenizer.train_from_iterator([text[i : i + 500] for i in range(0, len(text), 500)], trainer)
    folder.mkdir()
    tokenizer.save(str(folder / "tokenizer.json"))
    return str(folder)


@pytest.mark.parametrize("kind", ["byte-level", "unigram", "prepend", "strip"])
def test_tokenizers_of_other_kinds_give_the_whole_texts_tokens_too(tmp_path, caplog, kind):
    """Joining slices where they agree, not merely at a space, also holds for tokenizers that
    change every text's edges (a '▁' prepended, whitespace stripped)."""
    text = long_markdown(40)
    path = train(kind, tmp_path / kind, text[:8_000])
    whole, sliced = Tokenizer(path, slice_chars=10**9), Tokenizer(path, slice_chars=SLICE, batch_chars=4 * SLICE)
    with caplog.at_level(logging.WARNING):
        assert sliced.offsets([text]) == whole.offsets([text])
        assert sliced.count([text]) == whole.count([text])
    assert not caplog.records


def test_a_word_longer_than_the_seams_is_joined_at_the_cut_with_a_warning(minilm, caplog):
    """Where two slices agree nowhere near their cut (MiniLM gives one [UNK] for the whole of a
    word of thousands of characters, which neither slice holds whole), they are joined at the
    cut, in order, with one warning: the tokens next to it may differ from the whole text's."""
    text = "Before the word. " * 100 + "x" * (3 * SEAM_CHARS) + " after the word." * 100
    sliced = Tokenizer(minilm, slice_chars=len(text) // 2)
    with caplog.at_level(logging.WARNING, logger="sweep.retrieval.chunking.chunker"):
        (offsets,) = sliced.offsets([text])
    assert [record.getMessage() for record in caplog.records] == [
        f"{minilm}: a {len(text)}-character text was tokenised in slices, 1 of which (the first at character "
        f"{len(text) // 2}) agree with the next nowhere near their cut; the tokens next to those cuts may differ "
        "from the whole text's"
    ]
    assert all(a[0] < b[0] for a, b in zip(offsets, offsets[1:]))  # in order, each token once
    (whole,) = Tokenizer(minilm).offsets([text])
    assert offsets[:300] == whole[:300] and offsets[-300:] == whole[-300:]  # away from the cut, the same


CHUNK_A_LONG_DOCUMENT = """
import json, resource, sys
from sweep.formats.corpus import load_corpus
from sweep.retrieval.chunking import TokenChunker
corpus = load_corpus(sys.argv[1])
chunker = TokenChunker(200)
chunker.tokenizer.count(["warm"])  # the tokenizer loaded: what follows is the chunking's
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
chunks = chunker.split(corpus)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"grown_mib": grown / 1024, "chunks": len(chunks), "ends": [chunks[0].end, chunks[-1].end]}))
"""


@pytest.mark.slow
def test_chunking_a_long_markdown_document_takes_bounded_memory(tmp_path):
    """A 5 MB Markdown file, chunked by `chunking=tokens` in a process of its own: its peak
    memory grows by under 150 MiB, the chunks' own text included (some 90 MiB measured; tokenised
    whole, it grew by 800 MiB, and a 60 MB file took 9 GB)."""
    text = long_markdown(16_000)
    assert 5_000_000 < len(text.encode()) < 5_500_000
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/long.md").write_text(text, encoding="utf-8", newline="")
    result = processes.run(
        [sys.executable, "-c", CHUNK_A_LONG_DOCUMENT, str(tmp_path / "docs")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    measured = json.loads(result.stdout.splitlines()[-1])
    assert measured["chunks"] > 5_000 and measured["ends"][-1] == len(text.rstrip())
    assert measured["grown_mib"] < 150, measured
