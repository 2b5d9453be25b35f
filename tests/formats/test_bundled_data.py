"""The bundled knowledge base and golden set are valid and shaped as the product promises."""

from __future__ import annotations

import json
import logging

from helpers.paths import KB
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden


def corpus() -> dict[str, dict]:
    with (KB / "corpus.jsonl").open(encoding="utf-8") as handle:
        return {doc["id"]: doc for doc in map(json.loads, handle)}


def matches(metadata: dict, filters: dict) -> bool:
    return all(
        metadata.get(field) in (value if isinstance(value, list) else [value]) for field, value in filters.items()
    )


def test_golden_set_validates_without_errors_or_warnings(caplog):
    with caplog.at_level(logging.WARNING):
        golden = load_golden(KB / "golden.jsonl", load_corpus(KB / "corpus.jsonl"))
    assert not caplog.records
    stats = golden.stats()
    assert 120 <= stats["questions"] <= 180
    assert 0.10 <= stats["unanswerable_share"] <= 0.20
    assert len([t for t in stats["per_type"] if t != "unanswerable"]) >= 5
    assert stats["with_filters"] >= 0.15 * stats["questions"]
    assert any(grade == 1 for q in golden for grade in q.relevant.values())  # graded, not binary
    # every answerable question says which text answers it, resolved to spans of its documents
    assert stats["with_evidence"] == stats["answerable"]
    assert all(q.evidence_chars > 0 for q in golden if q.answerable)
    assert all(not q.evidence for q in golden if not q.answerable)


def test_corpus_documents_and_filters_are_consistent():
    documents = corpus()
    assert len(documents) >= 100
    for doc in documents.values():
        assert 100 <= len(doc["text"].split()) <= 600, doc["id"]
        assert {"department", "doc_type", "year"} <= doc["metadata"].keys(), doc["id"]
    assert len({doc["metadata"]["department"] for doc in documents.values()}) >= 5
    for question in load_golden(KB / "golden.jsonl", warn=False):
        for doc in question.relevant:
            assert matches(documents[doc]["metadata"], question.filters), (question.id, doc)
