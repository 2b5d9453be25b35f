"""The judge's file: an LLM's grade for each (question, document) pair it was asked about, one JSON line each.

`python -m sweep.judge grade` writes it; `agree`, `audit` and the labelling app read it. The
judge never writes the golden file: its grades count only where a person accepts them (the
labelling app) or where an audit fills the golden set's holes with them (`with_judge_grades`).

    {"qid": "a001", "doc": "hr-leave", "grade": 2, "model": "qwen2.5:7b", "prompt_hash": "3f2a9c1b",
     "prompt_tokens": 412, "completion_tokens": 96, "final_line": "##final score: 2",
     "at": "2026-12-06T10:00:00Z", "calibration": false, "cut_at_tokens": null, "raw": null}

`grade`: 0-3 on UMBRELA's scale (or the scale the prompt asks for), null when no final score could
be read from the answer (asked twice; `raw` then keeps the whole last answer); `final_line`: the
answer's line the grade was read from; `cut_at_tokens`: the document was cut at that many tokens
to fit the model's context (null: sent whole); `calibration`: the pair was drawn from the pairs
people graded (`--calibration N`), not from the pool. A pair appears at most once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from sweep.errors import InputError, where
from sweep.formats.files import write_text_atomically
from sweep.formats.golden_set import GoldenSet
from sweep.formats.lines import MAX_GRADE, check_keys, identifier, json_lines
from sweep.formats.provenance import LLM, Provenance, timestamp

FIELDS = (
    "qid", "doc", "grade", "model", "prompt_hash", "prompt_tokens", "completion_tokens", "final_line", "at",
    "calibration", "cut_at_tokens", "raw",
)  # fmt: skip


@dataclass(frozen=True)
class JudgeGrade:
    """One line of the judgments file (see the module's doc)."""

    qid: str
    doc: str
    grade: int | None
    model: str
    prompt_hash: str
    prompt_tokens: int
    completion_tokens: int
    final_line: str | None
    at: str
    calibration: bool = False
    cut_at_tokens: int | None = None
    raw: str | None = None

    @property
    def by(self) -> str:
        """The grader as a golden file names a model: `llm:<model>@<prompt hash>`."""
        return f"{LLM}{self.model}@{self.prompt_hash}"

    @property
    def pair(self) -> tuple[str, str]:
        return self.qid, self.doc

    def record(self) -> dict[str, Any]:
        return asdict(self)


def write_judgments(path: str | Path, grades: Iterable[JudgeGrade]) -> None:
    """Every grade as one JSON line, atomically (a failed write leaves the old file, or none)."""
    write_text_atomically(path, "".join(json.dumps(g.record(), ensure_ascii=False) + "\n" for g in grades))


def _count(record: dict[str, Any], key: str, at: str, *, nullable: bool = False) -> int | None:
    value = record.get(key)
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{at}: {key!r} is {value!r}; expected a whole number >= 0")
    return value


def _text(record: dict[str, Any], key: str, at: str, *, nullable: bool = False) -> str | None:
    value = record.get(key)
    if value is None and nullable:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{at}: {key!r} is {value!r}; expected text")
    return value


def load_judgments(path: str | Path) -> list[JudgeGrade]:
    """The judgments file's lines in file order; a bad line is an InputError naming the file, the
    line and the value, and so is a pair that appears twice."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such judgments file (python -m sweep.judge grade writes one)")
    grades, lines = [], {}
    for number, record in json_lines(path):
        at = where(path, number)
        if not isinstance(record, dict):
            raise InputError(f"{at}: expected a JSON object with {', '.join(FIELDS[:3])}, ...")
        check_keys(record, FIELDS, at, "judgment")
        grade = record.get("grade")
        if grade is not None and (isinstance(grade, bool) or not isinstance(grade, int) or not 0 <= grade <= MAX_GRADE):
            raise InputError(f"{at}: 'grade' is {grade!r}; expected a whole number from 0 to {MAX_GRADE}, or null")
        calibration = record.get("calibration", False)
        if not isinstance(calibration, bool):
            raise InputError(f"{at}: 'calibration' is {calibration!r}; expected true or false")
        judged = JudgeGrade(
            qid=identifier(record.get("qid"), at, "'qid'"),
            doc=identifier(record.get("doc"), at, "'doc'"),
            grade=grade,
            model=_text(record, "model", at),
            prompt_hash=_text(record, "prompt_hash", at),
            prompt_tokens=_count(record, "prompt_tokens", at),
            completion_tokens=_count(record, "completion_tokens", at),
            final_line=_text(record, "final_line", at, nullable=True),
            at=timestamp(record.get("at"), at),
            calibration=calibration,
            cut_at_tokens=_count(record, "cut_at_tokens", at, nullable=True),
            raw=record.get("raw") if isinstance(record.get("raw"), str) else None,
        )
        if judged.pair in lines:
            raise InputError(
                f"{at}: question {judged.qid!r}, document {judged.doc!r} is graded again (first on line "
                f"{lines[judged.pair]}); a judgments file holds one grade per pair"
            )
        lines[judged.pair] = number
        grades.append(judged)
    return grades


def person_grades(golden: GoldenSet) -> dict[tuple[str, str], int]:
    """(question, document) -> grade of every judgment a person gave (not one by `llm:...`)."""
    return {
        (q.id, doc): grade
        for q in golden
        for doc, grade in q.relevant.items()
        if not (q.provenance.get(doc) and (q.provenance[doc].by or "").startswith(LLM))
    }


def on_people_scale(grades: Sequence[JudgeGrade], people: Mapping[tuple[str, str], int]) -> list[JudgeGrade]:
    """The judge's grades on people's scale: a grade above the highest grade people gave (UMBRELA's
    3 where people grade 0-2, as the labelling app does; 2 and 3 where they grade 0-1) is taken as
    that grade, so that a gain or a distance does not count a difference of scales."""
    top = max(max(people.values(), default=1), 1)
    return [replace(g, grade=top) if g.grade is not None and g.grade > top else g for g in grades]


def with_judge_grades(golden: GoldenSet, grades: Sequence[JudgeGrade]) -> GoldenSet:
    """`golden` with its holes filled: each pair the golden set does not judge and the judge graded
    (a grade was read) gets the judge's grade on people's scale (`on_people_scale`), `by` the
    judge. Judgments the golden set has stay."""
    by_question: dict[str, list[JudgeGrade]] = {}
    for judged in on_people_scale(grades, person_grades(golden)):
        if judged.grade is not None and judged.qid in golden.by_id:
            by_question.setdefault(judged.qid, []).append(judged)
    questions = []
    for q in golden:
        added = [g for g in by_question.get(q.id, ()) if g.doc not in q.relevant]
        if added:
            q = replace(
                q,
                relevant={**q.relevant, **{g.doc: g.grade for g in added}},
                provenance={**q.provenance, **{g.doc: Provenance(g.by, g.at) for g in added}},
            )
        questions.append(q)
    return GoldenSet(tuple(questions), source=golden.source)
