"""The golden set in memory: questions with graded relevance labels (and evidence), as the metrics read them.

Problems with the set itself (a repeated question id, a label for a document the corpus does not
have) raise `InputError`; size and balance problems are only warnings. Who graded what, where a
question came from and whether it is reviewed: `sweep.formats.provenance`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from sweep.errors import InputError, where
from sweep.formats.evidence import Evidence
from sweep.formats.lines import UNTYPED, warn_if_unbalanced
from sweep.formats.provenance import HUMAN, PENDING, REVIEWED, Provenance

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Question:
    """One golden question. `relevant` maps document id to grade (>= 1 relevant, 0 judged
    not relevant; TREC qrels may also carry negative grades, which count as not relevant)."""

    id: str
    question: str
    relevant: Mapping[str, int]
    type: str = UNTYPED
    filters: Mapping[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    evidence: Evidence = field(default_factory=dict)  # resolved: merged, sorted spans per document
    source: str = HUMAN  # human or synthetic (generated)
    status: str = REVIEWED  # or pending: not scored until a person reviews it
    provenance: Mapping[str, Provenance] = field(default_factory=dict)  # document id -> who graded it, when
    origin: Provenance | None = None  # who wrote the question (a person, or llm:<model>@<hash>) or reviewed it, when

    @property
    def answerable(self) -> bool:
        """Unanswerable questions have no document with grade >= 1."""
        return any(grade >= 1 for grade in self.relevant.values())

    @property
    def evidence_chars(self) -> int:
        """How many characters of evidence the question has (resolved spans)."""
        return sum(len(span) for spans in self.evidence.values() for span in spans)


@dataclass(frozen=True)
class GoldenSet:
    questions: tuple[Question, ...]
    source: str = "<memory>"

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for q in self.questions:
            if q.id in seen:
                raise InputError(f"{self.source}: duplicate question id {q.id!r}")
            seen.add(q.id)

    def __len__(self) -> int:
        return len(self.questions)

    def __iter__(self) -> Iterator[Question]:
        return iter(self.questions)

    @cached_property
    def by_id(self) -> dict[str, Question]:
        return {q.id: q for q in self.questions}

    @cached_property
    def ids(self) -> pd.Index:
        return pd.Index([q.id for q in self.questions], dtype=object, name="qid")

    @cached_property
    def judgments(self) -> pd.DataFrame:
        """One row per judged (question, document): columns qid, docid, grade."""
        rows = [(q.id, doc, grade) for q in self.questions for doc, grade in q.relevant.items()]
        frame = pd.DataFrame(rows, columns=["qid", "docid", "grade"])
        return frame.astype({"qid": object, "docid": object, "grade": np.int64})

    @cached_property
    def questions_frame(self) -> pd.DataFrame:
        """Question-level facts indexed by qid: type, answerable, question text, source."""
        return pd.DataFrame(
            {
                "type": [q.type for q in self.questions],
                "answerable": [q.answerable for q in self.questions],
                "question": [q.question for q in self.questions],
                "source": [q.source for q in self.questions],
            },
            index=self.ids,
        )

    @cached_property
    def reviewed(self) -> GoldenSet:
        """The questions that count in metrics: all but those pending review (the set itself when
        none is). Computed once per set, with one warning that counts the pending ones, however
        often the set is scored."""
        pending = sum(q.status == PENDING for q in self.questions)
        if not pending:
            return self
        log.warning(
            "%s: %d of %d questions are pending review (status: pending) and are not scored until a person "
            "reviews them",
            self.source,
            pending,
            len(self),
        )
        return GoldenSet(tuple(q for q in self.questions if q.status != PENDING), source=self.source)

    def all_reviewed(self) -> GoldenSet:
        """Every question counted as reviewed, those pending review too (`golden.status=all`): they
        are then scored, and in the golden set's digest, as reviewed ones are."""
        if not any(q.status == PENDING for q in self.questions):
            return self
        return GoldenSet(tuple(replace(q, status=REVIEWED) for q in self.questions), source=self.source)

    def stats(self) -> dict[str, Any]:
        """Counts per type, answerable vs unanswerable, and labels per question."""
        relevant_counts = np.array([sum(g >= 1 for g in q.relevant.values()) for q in self])
        answerable = relevant_counts > 0
        per_type: dict[str, dict[str, int]] = {}
        for q, has_answer in zip(self.questions, answerable):
            counts = per_type.setdefault(q.type, {"questions": 0, "answerable": 0, "unanswerable": 0})
            counts["questions"] += 1
            counts["answerable" if has_answer else "unanswerable"] += 1
        labelled = relevant_counts[answerable]
        return {
            "questions": len(self),
            "answerable": int(answerable.sum()),
            "unanswerable": int((~answerable).sum()),
            "unanswerable_share": float((~answerable).mean()) if len(self) else 0.0,
            "with_filters": sum(bool(q.filters) for q in self),
            "with_evidence": self.with_evidence,
            "per_type": dict(sorted(per_type.items())),
            "relevant_per_question": {
                "mean": float(labelled.mean()) if labelled.size else 0.0,
                "min": int(labelled.min()) if labelled.size else 0,
                "max": int(labelled.max()) if labelled.size else 0,
            },
            "judgments": int(sum(len(q.relevant) for q in self)),
        }

    def first_time(self, key: str) -> bool:
        """True the first time `key` is given for this set, then False: a warning about a run
        scored on it said once, however often the run is scored (calibration scores it again)."""
        said = self.__dict__.setdefault("_said", set())  # not a field: the set is frozen and compared by its questions
        if key in said:
            return False
        said.add(key)
        return True

    @cached_property
    def with_evidence(self) -> int:
        return sum(bool(q.evidence) for q in self.questions)

    def check_corpus(self, corpus_ids: Collection[str], lines: Mapping[str, int] | None = None) -> None:
        """Fail on the first relevant document id that the corpus does not have."""
        known = corpus_ids if isinstance(corpus_ids, (set, frozenset, dict)) else set(corpus_ids)
        for q in self.questions:
            for doc in q.relevant:
                if doc not in known:
                    line = (lines or {}).get(q.id)
                    raise InputError(
                        f"{where(self.source, line)}: question {q.id!r} labels document {doc!r}, "
                        "which is not in the corpus"
                    )

    def warn_if_unbalanced(self) -> None:
        warn_if_unbalanced(self.source, len(self), sum(not q.answerable for q in self.questions))


UNJUDGED = "?"  # how `doc_grades` writes the grade of a document nobody judged for the question


def doc_grades(labels: Mapping[str, int | None] | Iterable[tuple[str, int | None]]) -> str:
    """`doc:grade, doc:grade` for labels given as {doc: grade} or as (doc, grade) pairs; a grade
    of None (a retrieved document not judged for the question) is written `doc:?`, not `doc:0`
    (judged not relevant)."""
    pairs = labels.items() if isinstance(labels, Mapping) else labels
    return ", ".join(f"{doc}:{UNJUDGED if grade is None else grade}" for doc, grade in pairs)
