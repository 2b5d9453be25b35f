"""The labelling queue's file format: its records, the writer (`sweep.pool`) and the reader (`sweep.label`).

The queue is JSON Lines (UTF-8), written atomically. Line 1 describes the pool (`Header`):

    {"pool": {"runs": [{"run_id": "…", "name": "…", "overrides": "model=bm25 …"}, …], "depth": 10,
              "golden": "/abs/golden.jsonl", "golden_digest": "cb70d84f",
              "corpus": "/abs/corpus.jsonl", "corpus_ids": "path", "corpus_digest": "…"}}

then one line per pooled question, in golden-set order:

    {"qid": "a001", "question": "…", "type": "factoid", "candidates": [
      {"doc": "fin-x", "title": "…", "best_rank": 1, "ranks": {"<run id>": 1, "<run id>": 4},
       "chunk": {"run": "<run id>", "start": 0, "end": 884, "score": 4.8, "text": "…"}}, …]}

`candidates` (`Candidate`): best rank first, then retrieved by more runs, then by document id.
`ranks`: each run that had the document in its top `depth`, with its rank there (1 = first).
`chunk` (`PooledChunk`): the document's best chunk in the run that ranked it best, `start`/`end`
character offsets into the document's content (the coordinates of golden-set evidence), `text`
those characters; null when no run logged a chunk of the document.

The reader checks every candidate against the corpus: a document the corpus does not have is an
error naming the line; a chunk whose text is not the document's any more (the corpus changed)
loses its highlight.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweep.errors import InputError, where
from sweep.formats.corpus import Corpus
from sweep.formats.files import write_text_atomically
from sweep.formats.golden import Question
from sweep.formats.lines import identifier, json_lines

log = logging.getLogger(__name__)

HEADER = "pool"  # the key of line 1


@dataclass(frozen=True)
class Header:
    """Line 1: the runs pooled, the depth, and the golden set and corpus they were scored on."""

    runs: list[dict[str, Any]]  # {"run_id", "name", "overrides"} each
    depth: int
    golden: str
    golden_digest: str
    corpus: str
    corpus_ids: str
    corpus_digest: str

    def record(self) -> dict[str, Any]:
        fields = ("runs", "depth", "golden", "golden_digest", "corpus", "corpus_ids", "corpus_digest")
        return {HEADER: {name: getattr(self, name) for name in fields}}


@dataclass(frozen=True)
class PooledChunk:
    """Where a run's best chunk of a document lies: characters [start, end) of its content."""

    run: str | None
    start: int
    end: int
    score: float | None
    text: str

    def record(self) -> dict[str, Any]:
        return {"run": self.run, "start": self.start, "end": self.end, "score": self.score, "text": self.text}


@dataclass(frozen=True)
class Candidate:
    """A pooled document of one question."""

    doc: str
    title: str
    best_rank: Any  # the best of `ranks`
    ranks: dict[str, Any]  # run id -> the document's rank in that run's top documents (1 = first)
    chunk: PooledChunk | None

    def record(self) -> dict[str, Any]:
        chunk = self.chunk.record() if self.chunk is not None else None
        return {"doc": self.doc, "title": self.title, "best_rank": self.best_rank, "ranks": self.ranks, "chunk": chunk}


# ---------------------------------------------------------------- writing (sweep.pool)


def queue_text(header: Header, questions: Iterable[tuple[Question, Sequence[Candidate]]]) -> str:
    """The queue's lines: the header, then each question with its candidates."""
    lines = [header.record()]
    for question, candidates in questions:
        lines.append(
            {
                "qid": question.id,
                "question": question.question,
                "type": question.type,
                "candidates": [c.record() for c in candidates],
            }
        )
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


def write_queue(path: Path, header: Header, questions: Iterable[tuple[Question, Sequence[Candidate]]]) -> None:
    write_text_atomically(path, queue_text(header, questions))


# ---------------------------------------------------------------- reading (sweep.label)


@dataclass(frozen=True)
class Queue:
    """A queue as read: each question's candidates (chunks checked) and a short label per run id."""

    source: str = ""
    candidates: dict[str, list[Candidate]] = field(default_factory=dict)
    run_labels: dict[str, str] = field(default_factory=dict)


def run_labels(runs: Sequence[Any]) -> dict[str, str]:
    """Run id -> its overrides less those every run shares (`model=bm25` rather than the whole
    command line); the run id's start when nothing is left."""
    runs = [r for r in runs if isinstance(r, dict)]
    words = [str(r.get("overrides") or "").split() for r in runs]
    common = set.intersection(*map(set, words)) if len(words) > 1 else set()
    return {
        str(r.get("run_id")): " ".join(w for w in run_words if w not in common) or str(r.get("run_id"))[:8]
        for r, run_words in zip(runs, words)
    }


def queue_corpus(path: Path) -> tuple[str, str]:
    """(corpus, id scheme) that a queue's header names."""
    first = next(iter(json_lines(path)), None)
    header = first[1].get(HEADER) if first and isinstance(first[1], dict) else None
    if not isinstance(header, dict) or not header.get("corpus"):
        raise InputError(f"{path}: names no corpus (not a sweep.pool queue?); give --corpus")
    return str(header["corpus"]), str(header.get("corpus_ids", "path"))


def _candidate(record: Any, qid: str, at: str, corpus: Corpus) -> tuple[Candidate, bool]:
    """A candidate checked against the corpus, and whether its chunk was dropped as stale."""
    if not isinstance(record, dict):
        raise InputError(f"{at}: question {qid!r}: a candidate is not an object")
    doc = identifier(record.get("doc"), at, "candidate document id")
    if doc not in corpus.by_id:
        raise InputError(f"{at}: question {qid!r}: candidate {doc!r} is not in the corpus {corpus.source}")
    document = corpus.by_id[doc]
    chunk, stale = record.get("chunk"), False
    if isinstance(chunk, dict):
        content = document.content
        start, end = chunk.get("start"), chunk.get("end")
        fits = isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(content)
        if not fits or ("text" in chunk and content[start:end] != chunk["text"]):
            chunk, stale = None, True
        else:
            chunk = PooledChunk(chunk.get("run"), start, end, chunk.get("score"), content[start:end])
    else:
        chunk = None
    ranks = record.get("ranks") if isinstance(record.get("ranks"), Mapping) else {}
    title = record.get("title") if isinstance(record.get("title"), str) else document.title
    return Candidate(doc, title, record.get("best_rank"), dict(ranks), chunk), stale


def load_queue(path: Path, corpus: Corpus) -> Queue:
    """Read a queue; a document the corpus does not have is an error naming the line. A chunk
    whose text is not the document's any more (the corpus changed) loses its highlight."""
    records = iter(json_lines(path))
    first = next(records, None)
    if first is None or not isinstance(first[1], dict) or not isinstance(first[1].get(HEADER), dict):
        raise InputError(f"{where(path, first[0] if first else None)}: not a sweep.pool queue (no 'pool' header line)")
    header = first[1][HEADER]
    candidates: dict[str, list[Candidate]] = {}
    stale = 0
    for number, record in records:
        at = where(path, number)
        if not isinstance(record, dict) or not isinstance(record.get("candidates"), list):
            raise InputError(f"{at}: expected a question with 'qid' and a list of 'candidates'")
        qid = identifier(record.get("qid"), at, "'qid'")
        checked = []
        for item in record["candidates"]:
            candidate, dropped = _candidate(item, qid, at, corpus)
            checked.append(candidate)
            stale += dropped
        candidates[qid] = checked
    if stale:
        log.warning("%s: %d chunks are not the corpus's text there any more; shown without highlight", path, stale)
    return Queue(str(path), candidates, run_labels(header.get("runs", [])))
