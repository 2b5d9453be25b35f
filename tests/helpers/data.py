"""Small golden sets, corpora and runs built in code, and slices of the bundled knowledge base."""

from __future__ import annotations

import json
import random
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from helpers.paths import KB
from sweep.formats.corpus import Corpus, Document
from sweep.formats.golden import GoldenSet, Question
from sweep.formats.runs import Run


def golden_of(relevant: Mapping[str, Mapping[str, int]], types: Mapping[str, str] | None = None) -> GoldenSet:
    """A golden set straight from {qid: {doc: grade}}."""
    types = types or {}
    return GoldenSet(
        tuple(
            Question(qid, f"question {qid}", dict(rel), type=types.get(qid, "untyped")) for qid, rel in relevant.items()
        )
    )


def corpus_of(*ids: str, text: str = "some text") -> Corpus:
    """A corpus of the given document ids, each with the same text."""
    return Corpus(tuple(Document(doc_id, text) for doc_id in ids))


def ranked(rankings: Mapping[str, Sequence[str]]) -> Run:
    """A pipeline run from {qid: [doc, ...]} in rank order, scores descending."""
    return Run.from_ranked({q: [(d, float(len(docs) - i)) for i, d in enumerate(docs)] for q, docs in rankings.items()})


def write_kb_slice(
    folder: Path, departments: Collection[str], documents: int | None = None, unanswerable: int = 3
) -> Path:
    """A slice of the bundled knowledge base in `folder` (corpus.jsonl, golden.jsonl): the first
    `documents` documents of `departments`, every question answered from them alone, and the
    first `unanswerable` unanswerable questions."""
    records = [json.loads(line) for line in (KB / "corpus.jsonl").read_text().splitlines()]
    kept = [d for d in records if d["metadata"]["department"] in departments][:documents]
    ids = {d["id"] for d in kept}
    questions = [json.loads(line) for line in (KB / "golden.jsonl").read_text().splitlines()]
    answerable = [q for q in questions if q["relevant"] and set(q["relevant"]) <= ids]
    nothing = [q for q in questions if not q["relevant"]][:unanswerable]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in kept))
    (folder / "golden.jsonl").write_text("".join(json.dumps(q) + "\n" for q in answerable + nothing))
    return folder


# ids of different lengths, so that tie-breaking by string order ("d10" < "d9") matters
DOC_IDS = [f"d{i}" for i in range(1, 16)] + ["D1", "a", "zz", "007"]


def random_judgments(
    seed: int, cases: int, grades: Sequence[int], scores: Sequence[float]
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """`cases` random (qrels, run) pairs in one, as {qid: {doc: grade}} and {qid: {doc: score}},
    each case's questions named `c<case>-q<n>`: a question is scored on its own judgments and
    ranking, so one evaluation checks every case. A case has 1 to 8 questions with 1 to 10 judged
    documents each; its first question and about half of the others are in the run (the rest
    retrieved nothing), each with 1 to 12 documents whose few distinct scores make ties common:
    runs shorter than k and longer than the deepest cutoff."""
    rng = random.Random(seed)
    qrels, run = {}, {}
    for case in range(cases):
        for n in range(rng.randint(1, 8)):
            qid = f"c{case}-q{n}"
            qrels[qid] = {doc: rng.choice(grades) for doc in rng.sample(DOC_IDS, rng.randint(1, 10))}
            if n == 0 or rng.random() < 0.5:
                run[qid] = {doc: rng.choice(scores) for doc in rng.sample(DOC_IDS, rng.randint(1, 12))}
    return qrels, run
