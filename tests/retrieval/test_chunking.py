"""Chunking strategies with the real MiniLM tokenizer (and model, for `semantic`): sizes, overlap,
exact offsets back into the text, coverage, Markdown heading paths, on generated and real documents."""

from __future__ import annotations

import functools
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.paths import CHUNKING_EVAL, KB
from sweep.errors import InputError
from sweep.evaluation.context import score_contexts
from sweep.formats.corpus import Corpus, Document
from sweep.retrieval.chunking import (
    Chunk,
    Chunker,
    MarkdownChunker,
    RecursiveChunker,
    SemanticChunker,
    SentenceChunker,
    TokenChunker,
)
from sweep.retrieval.chunking.chunker import CONTEXTS
from sweep.retrieval.chunking.semantic import paragraph_slices
from sweep.retrieval.lexical import BM25Retriever
from sweep.retrieval.pipeline import Pipeline

pytestmark = pytest.mark.usefixtures("torch_on_one_thread")  # MiniLM in process: see conftest

TEXT = " ".join(f"word{i}" for i in range(120))  # a few hundred MiniLM tokens
STRATEGIES = {
    "tokens": TokenChunker,
    "recursive": RecursiveChunker,
    "sentences": SentenceChunker,
    "markdown": MarkdownChunker,
    "semantic": SemanticChunker,
}
FAST = [name for name in STRATEGIES if name != "semantic"]  # semantic runs the model: fewer examples
EVERY = [*FAST, pytest.param("semantic", marks=pytest.mark.slow)]  # the real model embeds: slow


@functools.cache
def _model():
    return SemanticChunker(8).model


def make(kind: str | type, size: int, **kwargs) -> Chunker:
    """A chunker that shares one model with every other in this module (the tokenizer is shared
    already: `load_tokenizer` loads one per model folder and process)."""
    cls = STRATEGIES[kind] if isinstance(kind, str) else kind
    if cls is TokenChunker:
        kwargs.setdefault("overlap", 0)
    chunker = cls(size, **kwargs)
    if cls is SemanticChunker and size > 0:  # whole documents (size 0) need no model
        chunker.__dict__["model"] = _model()
    return chunker


def count(text: str) -> int:
    return TokenChunker(8, overlap=0).tokenizer.count([text])[0]


def check_chunks(corpus: Corpus, chunks: list[Chunk], size: int, windows: bool = False) -> None:
    """Exact offsets, document order, numbering, coverage of every non-whitespace character, and
    token counts: at most `size`, and those of the chunk's text (`windows`: of the window in the
    document's tokens, which differ where a window starts or ends inside a word)."""
    by_doc = {doc.id: [] for doc in corpus}
    for chunk in chunks:
        by_doc[chunk.doc_id].append(chunk)
    assert [c.doc_id for c in chunks] == [d for d, cs in by_doc.items() for _ in cs]  # documents in corpus order
    for doc in corpus:
        content, mine = doc.content, by_doc[doc.id]
        covered = bytearray(len(content))
        for chunk in mine:
            assert content[chunk.start : chunk.end] == chunk.text
            assert chunk.text and (windows or chunk.n_tokens == count(chunk.text))
            assert chunk.n_tokens <= size or size == 0
            covered[chunk.start : chunk.end] = b"\1" * (chunk.end - chunk.start)
        assert [c.index for c in mine] == list(range(len(mine)))
        assert all(a.start < b.start for a, b in zip(mine, mine[1:]))  # document order
        missed = [ch for ch, hit in zip(content, covered) if not hit and not ch.isspace()]
        assert not missed, f"{doc.id}: characters in no chunk: {''.join(missed)[:80]!r}"


# ------------------------------------------------------------------ generated documents

WORD = st.one_of(
    st.text(st.characters(codec="utf-8", categories=("L", "N")), min_size=1, max_size=12),
    st.sampled_from(["the", "policy", "München", "naïve", "東京都", "녀석", "🙂", "e.g.", "U.S.", "3.14", "$20"]),
    st.text("abcdefghij", min_size=40, max_size=250),  # long words: split inside, or one [UNK]
)
SPACE = st.sampled_from([" ", " ", " ", "  ", "\n", "\n\n", "\n\n\n", "\t", "\r\n", " \n ", "\u00a0", "\u3000"])
SENTENCE = st.builds(
    lambda words, end: " ".join(words) + end,
    st.lists(WORD, min_size=1, max_size=25),
    st.sampled_from(". ! ? \n".split(" ")),
)
HEADING = st.builds(
    lambda level, words: "\n" + "#" * level + " " + " ".join(words) + "\n",
    st.integers(1, 4),
    st.lists(WORD, max_size=4),
)
FENCE = st.just("\n```\n# not a heading\nprint(1)\n```\n")
PIECE = st.one_of(WORD, SPACE, SENTENCE, SENTENCE, HEADING, FENCE)
DOCUMENT = st.builds(
    lambda title, pieces: Document("doc", "".join(pieces), title),
    st.sampled_from(["", "A title", "Ünïcode title"]),
    st.lists(PIECE, min_size=1, max_size=60),
)
SIZES = st.sampled_from([12, 32, 100])


@pytest.mark.parametrize("kind", FAST)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=DOCUMENT, size=SIZES)
def test_generated_documents_are_covered_by_exact_chunks(kind, doc, size):
    corpus = Corpus((doc, Document("other", "A second document. It has two sentences.")))
    check_chunks(corpus, make(kind, size).split(corpus), size, windows=kind == "tokens")


@pytest.mark.slow  # the real model embeds every example's sentences: about 6 s
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=DOCUMENT, size=SIZES)
def test_semantic_chunks_of_generated_documents_are_exact_and_within_size(doc, size):
    corpus = Corpus((doc,))
    check_chunks(corpus, make("semantic", size).split(corpus), size)


PLAIN_WORD = st.text(st.characters(codec="utf-8", categories=("Ll", "Lu")), min_size=1, max_size=8)
PROSE = st.lists(
    st.builds(lambda words, end: " ".join(words) + end, st.lists(PLAIN_WORD, min_size=1, max_size=20), SPACE),
    min_size=1,
    max_size=30,
).map("".join)


@settings(max_examples=40, deadline=None)
@given(doc=DOCUMENT, size=SIZES, overlap=st.integers(1, 11))
def test_recursive_overlap_keeps_sizes_and_makes_progress(doc, size, overlap):
    corpus = Corpus((doc,))
    chunks = make("recursive", size, overlap=overlap).split(corpus)
    check_chunks(corpus, chunks, size)
    assert all(a.end < b.end for a, b in zip(chunks, chunks[1:]))  # every chunk adds text


@settings(max_examples=40, deadline=None)
@given(text=PROSE, size=SIZES, overlap=st.integers(1, 11))
def test_recursive_overlap_repeats_the_end_of_each_chunk(text, size, overlap):
    """Of words shorter than a piece: every chunk starts inside the one before (a word longer
    than min(overlap, size - overlap) tokens can fill a chunk alone, and then there is none)."""
    corpus = Corpus((Document("d", text),))
    chunks = make("recursive", size, overlap=overlap).split(corpus)
    check_chunks(corpus, chunks, size)
    assert all(b.start < a.end for a, b in zip(chunks, chunks[1:]))


@settings(max_examples=40, deadline=None)
@given(doc=DOCUMENT, size=SIZES, overlap=st.integers(0, 6))
def test_sentence_overlap_makes_progress(doc, size, overlap):
    corpus = Corpus((doc,))
    chunks = make("sentences", size, overlap=overlap).split(corpus)
    check_chunks(corpus, chunks, size)
    assert all(a.end < b.end for a, b in zip(chunks, chunks[1:]))  # every chunk adds text


# ------------------------------------------------------------------ what each strategy promises

NUMBERED = "".join(f"Sentence {n} is short. " for n in range(40)).strip()  # 5 MiniLM tokens a sentence


def numbers(chunk: Chunk) -> list[int]:
    return [int(n) for n in re.findall(r"Sentence (\d+)", chunk.text)]


def test_sentences_pack_whole_sentences_and_overlap_counts_sentences():
    corpus = Corpus((Document("d", NUMBERED),))
    plain = make("sentences", 40).split(corpus)
    assert [numbers(c) for c in plain] == [list(range(n, n + 8)) for n in range(0, 40, 8)]  # 8 sentences of 5 tokens
    assert all(c.text.startswith("Sentence") and c.text.endswith("short.") for c in plain)
    chunks = make("sentences", 40, overlap=2).split(corpus)
    check_chunks(corpus, chunks, 40)
    for a, b in zip(chunks, chunks[1:]):
        assert numbers(b)[:2] == numbers(a)[-2:]  # the next chunk starts 2 sentences before the last ended
    assert numbers(chunks[-1])[-1] == 39
    greedy = make("sentences", 40, overlap=50).split(corpus)  # more than fits: one new sentence a chunk
    assert [numbers(c) for c in greedy] == [list(range(n - 7, n + 1)) for n in range(7, 40)]


def test_a_sentence_longer_than_size_is_split_on_its_own():
    long = "This sentence goes on " + " and on" * 40 + "."
    corpus = Corpus((Document("d", f"A first sentence here. {long} A last sentence here."),))
    chunks = make("sentences", 16, overlap=1).split(corpus)
    check_chunks(corpus, chunks, 16)
    assert chunks[0].text == "A first sentence here."
    assert chunks[-1].text == "A last sentence here."
    assert all(long.find(c.text) >= 0 for c in chunks[1:-1]) and len(chunks) > 3


def test_recursive_keeps_paragraphs_whole_where_they_fit():
    paragraphs = [" ".join(f"p{p}w{w}" for w in range(8)) for p in range(6)]
    corpus = Corpus((Document("d", "\n\n".join(paragraphs)),))
    chunks = make("recursive", 60).split(corpus)
    check_chunks(corpus, chunks, 60)
    assert all(c.text.split("\n\n")[0] in paragraphs and c.text.split("\n\n")[-1] in paragraphs for c in chunks)


def test_recursive_overlap_must_be_smaller_than_size():
    with pytest.raises(InputError, match="chunking.overlap=16: must be smaller than chunk=16"):
        RecursiveChunker(16, overlap=16)


MARKDOWN = """Preamble before any heading.

# Guide

Intro of the guide.

## Install

Run the installer.

```
# not a heading: a comment in code
pip install thing
```

### On Linux

Use the package manager.

## Use
Setext heading
--------------

Body under setext.

# Appendix
Last words.
"""


def test_markdown_sections_carry_their_heading_path():
    corpus = Corpus((Document("d", MARKDOWN),))
    chunks = make("markdown", 200).split(corpus)
    check_chunks(corpus, chunks, 200)
    assert [(c.prefix, c.text.splitlines()[0]) for c in chunks] == [
        ("", "Preamble before any heading."),
        ("Guide", "# Guide"),
        ("Guide > Install", "## Install"),
        ("Guide > Install > On Linux", "### On Linux"),
        ("Guide > Use", "## Use"),
        ("Guide > Setext heading", "Setext heading"),
        ("Appendix", "# Appendix"),
    ]
    install = chunks[2]
    assert "# not a heading" in install.text  # inside its section: code is no heading
    assert install.embedded_text == "Guide > Install\n\n" + install.text
    assert chunks[0].embedded_text == chunks[0].text  # no prefix, nothing added
    bare = make("markdown", 200, context="none").split(corpus)
    assert [(c.start, c.end) for c in bare] == [(c.start, c.end) for c in chunks]
    assert all(c.prefix == "" and c.embedded_text == c.text for c in bare)


def test_markdown_splits_an_oversized_section_within_it_and_keeps_its_path():
    body = " ".join(f"Step {n} of the install is done." for n in range(30))
    text = f"# Guide\n\n## Install\n\n{body}\n\n## Use\n\nShort."
    corpus = Corpus((Document("d", text),))
    chunks = make("markdown", 24).split(corpus)
    check_chunks(corpus, chunks, 24)
    install = [c for c in chunks if c.prefix == "Guide > Install"]
    use_start = text.index("## Use")
    assert len(install) > 3 and all(c.end <= use_start for c in install)
    assert chunks[-1].prefix == "Guide > Use" and chunks[-1].text == "## Use\n\nShort."


HEADED = st.lists(
    st.tuples(st.integers(1, 4), st.lists(WORD, min_size=1, max_size=3), st.lists(SENTENCE, max_size=6)),
    min_size=1,
    max_size=8,
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(sections=HEADED, size=SIZES)
def test_markdown_prefixes_are_the_heading_paths_of_generated_documents(sections, size):
    text, starts, paths, open_ = "Before.\n", [], [], []
    for level, words, body in sections:
        title = " ".join(re.sub(r"[#`\\*_\[\]<>!&]", "x", w) for w in words).strip() or "x"
        open_ = [(lv, t) for lv, t in open_ if lv < level] + [(level, title)]
        starts.append(len(text))
        paths.append(" > ".join(t for _, t in open_))
        text += "#" * level + " " + title + "\n\n" + "".join(body).replace("#", "x").replace("`", "x") + "\n\n"
    corpus = Corpus((Document("d", text),))
    chunks = make("markdown", size).split(corpus)
    check_chunks(corpus, chunks, size)
    ends = starts[1:] + [len(text)]
    for chunk in chunks:
        if chunk.start < starts[0]:
            assert chunk.prefix == "" and chunk.end <= starts[0]
            continue
        n = max(i for i, s in enumerate(starts) if s <= chunk.start)
        assert chunk.prefix == paths[n] and chunk.end <= ends[n]  # within its section, offsets unshifted
        assert chunk.embedded_text == f"{paths[n]}\n\n{chunk.text}"


def test_markdown_without_headings_chunks_as_recursive():
    corpus = Corpus((Document("d", TEXT + "\n\n" + NUMBERED, "Title"),))
    markdown, recursive = make("markdown", 30).split(corpus), make("recursive", 30).split(corpus)
    assert markdown == recursive


@pytest.mark.slow  # the real model embeds
def test_semantic_breaks_between_topics_within_size():
    cats = " ".join(f"Cats purr and nap in the sun, fact {n}." for n in range(6))
    tax = " ".join(f"The tax return is due in April, rule {n}." for n in range(6))
    corpus = Corpus((Document("d", f"{cats} {tax} {cats}"),))
    chunks = make("semantic", 64).split(corpus)
    check_chunks(corpus, chunks, 64)
    assert len(chunks) > 1
    with pytest.raises(InputError, match="chunking.threshold=1: must be between 0 and 1"):
        SemanticChunker(64, threshold=1)
    with pytest.raises(InputError, match="chunking.threshold=1.5: must be a number from 0 to 1"):
        SemanticChunker(64, threshold=1.5)


# ------------------------------------------------------------------ every strategy alike


@pytest.mark.slow
def test_semantic_chunks_a_long_document_a_slice_at_a_time():
    """chonkie holds every sentence's tokens and embeddings at once, so `semantic` gives it a
    document over `slice_chars` (100,000 characters in use) a slice at a time, cut at paragraph
    breaks: the chunks are each slice's own, chunked alone."""
    text = "".join(f"Topic {i}. Leave is {i} days. Claims take {i} weeks.\nA second line {i}.\n\n" for i in range(12))
    chunker, whole = make("semantic", 24), make("semantic", 24)
    chunker.slice_chars = 200
    slices = paragraph_slices(text, 200)
    assert len(slices) > 2 and all(text[:end].endswith("\n\n") for _, end in slices[:-1])
    chunks = chunker.split(Corpus((Document("long", text),)))
    expected = [
        (start + chunk.start, start + chunk.end, chunk.n_tokens)
        for start, end in slices
        for chunk in whole.split(Corpus((Document("slice", text[start:end]),)))
    ]
    assert [(chunk.start, chunk.end, chunk.n_tokens) for chunk in chunks] == expected
    check_chunks(Corpus((Document("long", text),)), chunks, 24)


@pytest.mark.parametrize("kind", list(STRATEGIES))
def test_every_strategy_is_a_chunker_and_size_zero_keeps_whole_documents(kind):
    corpus = Corpus((Document("long", TEXT, "Title"), Document("short", " tiny text\n")))
    whole = make(kind, 0).split(corpus)
    assert isinstance(make(kind, 0), Chunker)
    assert whole == make("tokens", 0).split(corpus)  # the same chunks, whatever the strategy
    assert [(c.doc_id, c.text, c.prefix) for c in whole] == [
        ("long", f"Title\n\n{TEXT}", ""),
        ("short", " tiny text\n", ""),
    ]
    with pytest.raises(InputError, match="chunking.size=-1: must be an integer >= 0"):
        STRATEGIES[kind](-1)


@pytest.mark.parametrize("kind", ["recursive", "sentences", "markdown"])
def test_a_character_of_more_tokens_than_size_is_a_chunk_of_its_own(kind):
    """The one case of a chunk over `size`: a character cannot be cut (녀 and 석 are 2 and 3
    MiniLM tokens: Hangul syllables split into their letters)."""
    corpus = Corpus((Document("d", "녀석 ab 녀"),))
    chunks = make(kind, 1).split(corpus)
    assert [(c.text, c.n_tokens) for c in chunks] == [("녀", 2), ("석", 3), ("ab", 1), ("녀", 2)]


@pytest.mark.parametrize("kind", ["sentences", "recursive"])
def test_negative_overlap_is_refused(kind):
    with pytest.raises(InputError, match="chunking.overlap=-1: must be an integer >= 0"):
        STRATEGIES[kind](16, overlap=-1)


def test_embedded_text_is_the_prefix_then_the_text():
    plain = Chunk("d", 0, 0, 4, "text", 1)
    headed = Chunk("d", 0, 0, 4, "text", 1, prefix="A > B")
    assert plain.embedded_text == "text"
    assert headed.embedded_text == "A > B\n\ntext" == Chunk("d", 0, 0, 4, "text", 1, "A > B").embedded_text


# ------------------------------------------------------------------ real documents


def kb_corpus(limit: int | None = None) -> Corpus:
    records = [json.loads(line) for line in (KB / "corpus.jsonl").read_text().splitlines()][:limit]
    return Corpus(tuple(Document(r["id"], r["text"], r["title"]) for r in records))


@pytest.mark.parametrize("kind", FAST)
@pytest.mark.parametrize("size", [64, 200])
def test_knowledge_base(kind, size):
    corpus = kb_corpus()
    check_chunks(corpus, make(kind, size).split(corpus), size, windows=kind == "tokens")


@pytest.mark.slow
def test_knowledge_base_semantic():
    corpus = kb_corpus(3)
    check_chunks(corpus, make("semantic", 64).split(corpus), 64)


@pytest.mark.parametrize("kind", FAST)
def test_chunking_benchmark_corpus(kind):
    corpus = Corpus((Document("sotu", (CHUNKING_EVAL / "corpora" / "state_of_the_union.md").read_text()),))
    extra = {"overlap": 16} if kind in ("tokens", "recursive") else {"overlap": 1} if kind == "sentences" else {}
    check_chunks(corpus, make(kind, 200, **extra).split(corpus), 200, windows=kind == "tokens")


# ------------------------------------------------------------------ tokens: the baseline's numbers


@pytest.fixture(scope="module")
def chunker_factory():
    def make_tokens(size, overlap=0):
        return make(TokenChunker, size, overlap=overlap)

    return make_tokens


def test_windows_cover_the_document_with_the_requested_overlap(chunker_factory):
    corpus = Corpus((Document("d", TEXT, "Title"),))
    chunker = chunker_factory(32, overlap=8)
    chunks = chunker.split(corpus)
    [n_tokens] = chunker.tokenizer.count([corpus.documents[0].content])
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


# ------------------------------------------------------------------ context (`chunking.context`)

GUIDE = "Intro line.\n\n# Guide\n\nRead this first.\n\n## Install\n\n" + " ".join(
    f"Step {n} of the install is done." for n in range(12)
)


def spans_of(chunks: list[Chunk]) -> list[tuple]:
    return [(c.doc_id, c.index, c.start, c.end, c.text, c.n_tokens) for c in chunks]


@pytest.mark.parametrize("kind", EVERY)
def test_context_changes_the_prefix_only_never_the_spans(kind):
    corpus = Corpus((Document("guide", GUIDE, "User guide", prepend_title=False), Document("kb", TEXT, "Title")))
    size = 24
    by_context = {context: make(kind, size, context=context).split(corpus) for context in CONTEXTS}
    reference = spans_of(by_context["none"])
    for context, chunks in by_context.items():
        assert spans_of(chunks) == reference, context
        assert all(c.embedded_text == (f"{c.prefix}\n\n{c.text}" if c.prefix else c.text) for c in chunks)
    assert all(c.prefix == "" for c in by_context["none"])
    guide = [c for c in by_context["title+heading"] if c.doc_id == "guide"]
    for plain, titled, headed, both in zip(*(by_context[c] for c in CONTEXTS)):
        doc = corpus.by_id[plain.doc_id]
        path = _heading_path_at(doc.content, plain.start) if doc.id == "guide" else ""
        title = "" if plain.text.lstrip("# ").startswith(doc.title) else doc.title
        assert titled.prefix == title
        assert headed.prefix == path
        assert both.prefix == " > ".join(p for p in (title, path) if p)
    assert any(c.prefix == "User guide > Guide > Install" for c in guide)


def _heading_path_at(content: str, position: int) -> str:
    """GUIDE's heading path at a character position, by hand."""
    if position >= content.index("## Install"):
        return "Guide > Install"
    return "Guide" if position >= content.index("# Guide") else ""


def test_title_is_left_out_where_the_chunk_already_begins_with_it():
    corpus = Corpus((Document("kb", TEXT, "Annual leave"),))  # content: the title, a blank line, the text
    chunks = make("tokens", 32, context="title").split(corpus)
    assert chunks[0].text.startswith("Annual leave") and chunks[0].prefix == ""
    assert len(chunks) > 2 and all(c.prefix == "Annual leave" for c in chunks[1:])
    assert chunks[1].embedded_text == "Annual leave\n\n" + chunks[1].text


def test_title_and_heading_path_are_not_repeated():
    corpus = Corpus((Document("guide", GUIDE, "Guide", prepend_title=False),))
    chunks = make("markdown", 200, context="title+heading").split(corpus)
    assert [c.prefix for c in chunks] == ["Guide", "Guide", "Guide > Install"]  # the path starts with the title


def test_whole_documents_get_a_title_but_no_heading_path():
    corpus = Corpus((Document("guide", GUIDE, "User guide", prepend_title=False), Document("kb", TEXT, "Title")))
    for kind in ("tokens", "markdown"):
        whole = {c: make(kind, 0, context=c).split(corpus) for c in CONTEXTS}
        assert [c.prefix for c in whole["heading"]] == ["", ""]  # a whole document holds every heading
        assert [c.prefix for c in whole["title"]] == ["User guide", ""]  # kb's content starts with its title
        assert [c.prefix for c in whole["title+heading"]] == ["User guide", ""]


def test_markdown_keeps_its_heading_path_by_default_and_others_have_none():
    assert make("markdown", 200).context == "heading"
    assert all(make(kind, 200).context == "none" for kind in FAST if kind != "markdown")
    corpus = Corpus((Document("d", MARKDOWN),))
    assert make("markdown", 200).split(corpus) == make("markdown", 200, context="heading").split(corpus)


@pytest.mark.parametrize("kind", list(STRATEGIES))
def test_context_is_checked(kind):
    with pytest.raises(InputError, match=re.escape("chunking.context='summary': must be one of none, title, heading")):
        STRATEGIES[kind](64, context="summary")


def test_a_run_with_title_context_scores_its_context_metrics_on_the_same_spans(small_kb):
    """What changes is what the retriever sees (the title before each chunk); the evidence-based
    context metrics are computed on the chunks' character spans, the same as without context."""
    corpus, golden = small_kb
    runs = {
        context: Pipeline(make("tokens", 64, context=context), BM25Retriever()).retrieve(corpus, golden)
        for context in ("none", "title")
    }
    none, title = runs["none"].chunks, runs["title"].chunks
    assert spans_of(none) == spans_of(title)
    assert sum(c.prefix != "" for c in title) > len(corpus)  # most chunks carry their title
    assert runs["none"].results.rankings() != runs["title"].results.rankings()  # and retrieval saw it
    contexts = runs["title"].contexts
    scored = score_contexts(golden, contexts, title, corpus)
    on_plain_spans = score_contexts(golden, contexts, none, corpus)
    assert len(scored.frame) > 0 and scored.frame.equals(on_plain_spans.frame)
    assert scored.missing == on_plain_spans.missing
    delivered = runs["title"].delivered_chunks()
    assert all(
        (hit["doc"], hit["start"], hit["end"]) in {(c.doc_id, c.start, c.end) for c in none}
        for hits in delivered.values()
        for hit in hits
    )


@pytest.mark.slow  # imports transformers and torch, the reference
def test_the_tokenizer_measures_and_cuts_as_transformers_does_with_or_without_its_json_file(tmp_path):
    """Chunkers read the model folder's tokenizer.json with the `tokenizers` library, not with
    transformers: the same ids, so the same counts and offsets, on every bundled text and on
    random text of every kind of character; a folder without that file is read by transformers."""
    import random
    import shutil

    from transformers import AutoTokenizer

    from sweep.retrieval.chunking.chunker import Tokenizer
    from sweep.retrieval.models import default_model_path

    rng = random.Random(0)
    characters = [chr(c) for c in [*range(0x20, 0x7F), 0xE9, 0x301, 0xAC00, 0x4E2D, 0x1F600, 0x200B, 0xA0, 0x3000]]
    characters += [chr(c) for c in (0x0, 0x7, 0xFEFF, 0x2028, 0x85, 0xAD, 0x5D0, 0x627, 0xE01, 0xFB01)]
    texts = [json.loads(line)["text"] for line in (KB / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    texts += [path.read_text(encoding="utf-8") for path in sorted((CHUNKING_EVAL / "corpora").glob("*.md"))]
    texts += ["".join(rng.choice(characters) for _ in range(rng.randint(0, 60))) for _ in range(1000)]
    texts += ["", " ", "\n\n", "a" * 5000, "naïve café ½ ①", "日本語のテキスト", "🙂🙂"]
    reference = AutoTokenizer.from_pretrained(default_model_path(), local_files_only=True)
    expected = reference(texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    counts = [len(ids) for ids in expected["input_ids"]]
    offsets = [[tuple(pair) for pair in mapping] for mapping in expected["offset_mapping"]]
    assert sum(counts) > 350_000  # the chunking benchmark's corpora are in there

    without_json = tmp_path / "model"
    shutil.copytree(default_model_path(), without_json, ignore=shutil.ignore_patterns("tokenizer.json"))
    for tokenizer in (Tokenizer(str(default_model_path())), Tokenizer(str(without_json))):
        assert tokenizer.count(texts) == counts
        assert [[tuple(pair) for pair in mapping] for mapping in tokenizer.offsets(texts)] == offsets
        assert [tokenizer.count([text])[0] for text in texts[:500]] == counts[:500]  # one at a time, as semchunk asks
        assert tokenizer.longest_token == max(len(token) for token in reference.get_vocab()) == 18
