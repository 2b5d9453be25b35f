"""Corpus loading: the bundled knowledge base, BEIR's layout, and errors with file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweep.corpus import Corpus, Document, load_corpus
from sweep.errors import InputError

KB = Path(__file__).resolve().parents[1] / "data" / "kb"


def test_bundled_corpus_loads_with_metadata():
    corpus = load_corpus(KB / "corpus.jsonl")
    assert len(corpus) == 112
    assert {"department", "doc_type", "year", "status"} <= corpus.metadata_fields
    doc = corpus.by_id["hr-annual-leave-policy"]
    assert doc.content.startswith(doc.title + "\n\n") and doc.metadata["department"] == "HR"


def test_digest_changes_exactly_when_content_does():
    a = Corpus((Document("d1", "text", "title", {"year": 2026}),))
    same = Corpus((Document("d1", "text", "title", {"year": 2026}),), source="elsewhere")
    changed = Corpus((Document("d1", "text", "title", {"year": 2025}),))
    assert a.digest == same.digest != changed.digest


def test_beir_folder_reads_its_corpus(tmp_path):
    (tmp_path / "corpus.jsonl").write_text('{"_id": "7", "title": "", "text": "abstract"}\n')
    assert load_corpus(tmp_path).by_id["7"].content == "abstract"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": "a", "text": "x"}', "{oops"], r"c.jsonl:2: malformed JSON"),
        (
            ['{"id": "a", "text": "x"}', '{"id": "a", "text": "y"}'],
            r"c.jsonl:2: duplicate document id 'a' \(first on line 1\)",
        ),
        (['{"text": "x"}'], r"c.jsonl:1: missing or invalid document id"),
        (['{"id": "a", "text": 3}'], r"c.jsonl:1: document 'a' has no 'text' string"),
        (
            ['{"id": "a", "text": "x", "metadata": {"tags": ["x"]}}'],
            r"c.jsonl:1: document 'a': metadata 'tags' is list",
        ),
        (['{"id": "a", "text": " "}'], r"c.jsonl:1: document 'a' is empty"),
        ([""], r"c.jsonl: empty corpus"),
    ],
)
def test_bad_corpus_lines(tmp_path, lines, message):
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=message):
        load_corpus(path)
