"""Context metrics pinned on hand-computed cases (Chroma's definitions, on characters)."""

from __future__ import annotations

import pytest

from helpers.data import corpus_of, ranked
from sweep.evaluation import score
from sweep.evaluation.context import score_contexts
from sweep.formats.golden import GoldenSet, Question, Span
from sweep.retrieval.chunking import Chunk

TEXT = "x" * 100  # every document: 100 characters


def chunk(doc: str, start: int, end: int, n_tokens: int = 10) -> Chunk:
    return Chunk(doc, 0, start, end, TEXT[start:end], n_tokens)


def question(qid: str, evidence: dict[str, list[tuple[int, int]]], qtype: str = "t") -> Question:
    spans = {doc: tuple(Span(s, e) for s, e in spans) for doc, spans in evidence.items()}
    return Question(qid, f"question {qid}", dict.fromkeys(evidence, 1) or {}, type=qtype, evidence=spans)


CHUNKS = [
    chunk("A", 0, 50, n_tokens=12),  # 0
    chunk("A", 30, 80, n_tokens=11),  # 1: overlaps chunk 0 by 20 characters
    chunk("A", 70, 100, n_tokens=7),  # 2
    chunk("B", 0, 40, n_tokens=9),  # 3
    chunk("B", 40, 100, n_tokens=13),  # 4
    chunk("C", 0, 100, n_tokens=20),  # 5: a document no question needs
]
CORPUS = corpus_of("A", "B", "C", text=TEXT)


def scores(questions, contexts, cutoffs=(1, 2, 3)):
    golden = GoldenSet(tuple(questions))
    hits = {qid: [(position, 1.0 - 0.1 * rank) for rank, position in enumerate(ids)] for qid, ids in contexts.items()}
    return score_contexts(golden, hits, CHUNKS, CORPUS, cutoffs)


def row(result, qid):
    return result.frame.loc[qid].to_dict()


def test_evidence_split_across_two_overlapping_chunks():
    # evidence A[40, 60): chunk 0 holds 40-50, chunk 1 holds 40-60 (overlapping chunk 0 by 30-50)
    values = row(scores([question("q", {"A": [(40, 60)]})], {"q": [0, 1]}), "q")
    assert values["context/recall_at_1"] == pytest.approx(10 / 20)
    assert values["context/precision_at_1"] == pytest.approx(10 / 50)
    assert values["context/iou_at_1"] == pytest.approx(10 / (50 + 20 - 10))
    assert values["context/complete_at_1"] == 0.0
    assert values["context/tokens_at_1"] == 12
    # both chunks: all 20 evidence characters, 100 delivered (the 20 shared ones count twice)
    assert values["context/recall_at_2"] == 1.0
    assert values["context/precision_at_2"] == pytest.approx(20 / 100)
    assert values["context/iou_at_2"] == pytest.approx(20 / 100)
    assert values["context/complete_at_2"] == 1.0
    assert values["context/tokens_at_2"] == 23
    # the chunks that hold evidence are 0 and 1: 20 / (50 + 50)
    assert values["context/precision_omega"] == pytest.approx(0.2)


def test_several_spans_and_a_chunk_from_another_document():
    # evidence A[10, 20) and A[60, 70); delivered: C (another document), then chunk 0
    values = row(scores([question("q", {"A": [(10, 20), (60, 70)]})], {"q": [5, 0]}), "q")
    assert values["context/recall_at_1"] == 0.0
    assert values["context/precision_at_1"] == 0.0
    assert values["context/iou_at_1"] == pytest.approx(0 / (100 + 20))
    assert values["context/recall_at_2"] == pytest.approx(10 / 20)
    assert values["context/precision_at_2"] == pytest.approx(10 / 150)
    assert values["context/iou_at_2"] == pytest.approx(10 / (150 + 20 - 10))
    # holders: chunk 0 (10-20) and chunk 1 (60-70): 20 covered of 100 delivered
    assert values["context/precision_omega"] == pytest.approx(0.2)


def test_evidence_in_two_documents():
    # A[0, 10) and B[50, 60); delivered chunk 0 (A) then chunk 4 (B 40-100)
    values = row(scores([question("q", {"A": [(0, 10)], "B": [(50, 60)]})], {"q": [0, 4]}), "q")
    assert values["context/recall_at_1"] == pytest.approx(0.5)
    assert values["context/recall_at_2"] == 1.0
    assert values["context/precision_at_2"] == pytest.approx(20 / (50 + 60))
    assert values["context/complete_at_2"] == 1.0
    assert values["context/precision_omega"] == pytest.approx(20 / (50 + 60))


def test_k_larger_than_the_hits_and_nothing_delivered():
    result = scores([question("one", {"A": [(0, 10)]}), question("none", {"A": [(0, 10)]})], {"one": [0]})
    one = row(result, "one")
    for name in ("recall", "precision", "iou", "complete", "tokens"):
        assert one[f"context/{name}_at_3"] == one[f"context/{name}_at_1"]  # one chunk is all it got
    assert one["context/precision_at_3"] == pytest.approx(10 / 50)
    none = row(result, "none")  # abstained or filtered to nothing: no text delivered
    assert none["context/recall_at_3"] == none["context/precision_at_3"] == none["context/iou_at_3"] == 0.0
    assert none["context/tokens_at_3"] == 0.0
    assert result.missing["none"] == "A: " + "x" * 10


def test_questions_without_evidence_are_left_out_and_counted():
    unlabelled = Question("plain", "no evidence", {"A": 1}, type="t")
    unanswerable = Question("nothing", "no answer", {}, type="u")
    labelled = question("q", {"A": [(40, 60)]}, qtype="t")
    golden = GoldenSet((unlabelled, unanswerable, labelled))
    hits = {"plain": [(0, 1.0)], "nothing": [], "q": [(0, 1.0), (1, 0.5)]}
    context = score_contexts(golden, hits, CHUNKS, CORPUS, (1, 2))
    assert list(context.frame.index) == ["q"]
    evaluation = score(golden, ranked({"plain": ["A"], "q": ["A"]})).with_context(context)
    assert evaluation.mean["context/n"] == 1
    assert evaluation.mean["context/recall_at_1"] == pytest.approx(0.5)
    by_type = evaluation.by("type")
    assert by_type.loc["t", "context/n"] == 1 and by_type.loc["u", "context/n"] == 0
    assert evaluation.type_means()["type/t/context/recall_at_2"] == 1.0
    worst = evaluation.worst_context(5)
    assert list(worst.index) == ["q"] and worst.loc["q", "missing"] == ""


def test_missing_evidence_names_the_uncovered_text():
    corpus = corpus_of("A", text="".join(chr(ord("a") + i % 26) for i in range(100)))
    golden = GoldenSet((question("q", {"A": [(20, 40)]}),))
    chunks = [Chunk("A", 0, 0, 30, "", 5)]
    context = score_contexts(golden, {"q": [(0, 1.0)]}, chunks, corpus, (1,))
    assert context.missing["q"] == "A: " + corpus.by_id["A"].content[30:40]
