"""The filters a generated question must pass to be kept, with their stated thresholds, and the judge's look at an unanswerable one.

In the order they are applied (a dropped question is counted once, under the first it fails):

1. `unreadable`: the answer is not a JSON object with a `question` (and, from a passage, an
   `evidence`) string.
2. `evidence_not_in_passage`: the evidence is looked up in the passage the model was shown by the
   evidence loader's own search (`sweep.formats.evidence.resolve_spans`: verbatim, then with
   whitespace runs matching any whitespace, then in Unicode NFC and NFD) and must occur there
   exactly once; it is stored as that span of the document, in the document's own characters.
3. `copies_evidence`: more than `MAX_EVIDENCE_SHARE` (0.5) of the evidence's distinct words
   (lowercased runs of letters and digits) are in the question: it copies its answer.
4. `near_duplicate`: its MiniLM cosine with an earlier question that passed the filters above
   (and this one) is above `DUPLICATE_COSINE` (0.9), in the order the passages were sampled.
5. `not_found_by_bm25`: BM25 over the whole documents of the same corpus
   (`sweep.retrieval.lexical.BM25Retriever`, its defaults) does not rank the question's source
   document in its top k (Promptagator's round-trip filter; k 20 by default).

The near-duplicate filter runs before the round trip, so that a question is compared with every
earlier one that reads well, whether or not BM25 finds its document.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from sweep.errors import InputError
from sweep.formats.corpus import Corpus
from sweep.formats.evidence import Span, resolve_spans
from sweep.formats.golden_set import GoldenSet, Question
from sweep.labelling.grading import Pair, Template, grade_pairs
from sweep.retrieval.chat_client import ChatAnswer, ChatClient

MAX_EVIDENCE_SHARE = 0.5  # of the evidence's distinct words that the question may hold
DUPLICATE_COSINE = 0.9  # MiniLM cosine above which a question repeats an earlier one
ROUND_TRIP_K = 20  # BM25's top k that must hold the source document
JUDGED_TOP = 10  # BM25's top documents the judge grades for an unanswerable question
UNREADABLE, NOT_IN_PASSAGE, COPIES, DUPLICATE, NOT_FOUND = (
    "unreadable",
    "evidence_not_in_passage",
    "copies_evidence",
    "near_duplicate",
    "not_found_by_bm25",
)
REASONS = (UNREADABLE, NOT_IN_PASSAGE, COPIES, DUPLICATE, NOT_FOUND)
WORDS = re.compile(r"\w+")


def read_answer(answer: ChatAnswer, keys: Sequence[str]) -> dict[str, str] | None:
    """The answer's `keys`, each a non-empty string, as a JSON object holds them; None otherwise."""
    parsed = answer.parsed()
    if not isinstance(parsed, dict):
        return None
    values = {key: parsed.get(key) for key in keys}
    if not all(isinstance(value, str) and value.strip() for value in values.values()):
        return None
    return {key: value.strip() for key, value in values.items()}


def evidence_span(quote: str, content: str, start: int, end: int) -> Span | None:
    """Where `quote` occurs exactly once in `content[start:end]` (the passage), by the evidence
    loader's search, as a span of `content` that carries the document's own characters; None
    when it does not occur there, or occurs more than once."""
    try:
        (found,) = resolve_spans([quote], content[start:end], "generated", "evidence")
    except InputError:
        return None
    span_start, span_end = start + found.start, start + found.end
    return Span(span_start, span_end, content[span_start:span_end])


def evidence_share(question: str, evidence: str) -> float:
    """The share of the evidence's distinct words (lowercased) that the question holds too."""
    quoted = set(WORDS.findall(evidence.lower()))
    if not quoted:
        return 0.0
    return len(quoted & set(WORDS.findall(question.lower()))) / len(quoted)


def first_of_near_duplicates(texts: Sequence[str], threshold: float = DUPLICATE_COSINE) -> list[bool]:
    """For each text in order, whether it is kept: its MiniLM cosine with every earlier kept text
    is at most `threshold`."""
    if len(texts) < 2:
        return [True] * len(texts)
    from sweep.retrieval.embed import SentenceTransformerEmbedder

    vectors = SentenceTransformerEmbedder().encode_queries(texts)  # unit length: dot = cosine
    kept: list[int] = []
    for i, vector in enumerate(vectors):
        if not kept or float(np.max(vectors[kept] @ vector)) <= threshold:
            kept.append(i)
    chosen = set(kept)
    return [i in chosen for i in range(len(texts))]


class DocumentSearch:
    """BM25 over the corpus's whole documents (their content), built once."""

    def __init__(self, corpus: Corpus) -> None:
        from sweep.retrieval.lexical import BM25Retriever

        self.corpus = corpus
        self.bm25 = BM25Retriever()
        self.bm25.build([doc.content for doc in corpus])

    def top(self, questions: Sequence[str], k: int) -> list[list[str]]:
        """Each question's top k document ids, best first (fewer where fewer share a term with it)."""
        if not questions:
            return []
        _, ids = self.bm25.search(list(questions), k)
        return [[self.corpus.documents[i].id for i in row if i >= 0] for row in ids]


def judge_unanswerable(
    questions: Sequence[Question],
    corpus: Corpus,
    search: DocumentSearch,
    judge: ChatClient,
    template: Template,
) -> list[dict[str, Any]]:
    """For each unanswerable question, the judge's grades of BM25's top `JUDGED_TOP` documents, as
    its metadata records them: `{"by": "llm:<model>@<hash>", "top": {doc: grade}, "all_0": bool}`
    (`all_0`: every one graded 0, the evidence that the corpus does not answer it; a grade the
    judge's answer held none for is null, and then `all_0` is false)."""
    tops = search.top([q.question for q in questions], JUDGED_TOP)
    pairs = [Pair(q.id, doc) for q, top in zip(questions, tops) for doc in top]
    grades = grade_pairs(pairs, GoldenSet(tuple(questions)), corpus, judge, template)
    by_question: dict[str, dict[str, int | None]] = {q.id: {} for q in questions}
    for grade in grades:
        by_question[grade.qid][grade.doc] = grade.grade
    by = f"llm:{judge.model}@{template.hash}"
    return [
        {"by": by, "top": top, "all_0": bool(top) and all(grade == 0 for grade in top.values())}
        for top in by_question.values()
    ]
