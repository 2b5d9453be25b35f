"""What changed between two versions of a golden set: questions, grades, evidence and fields, question by question.

`diff_golden(old, new)` compares two golden sets as they were read (`load_golden` without a
corpus: evidence as written, excerpts and spans): questions added and removed (by id) and
reworded (the same id, other text); per (question, document) judged on either side of a question
both hold, a grade changed, added or removed, with who gave it (`by`) where the file says;
evidence per (question, document) added, removed or moved (the same text at other offsets or in
another form, or other spans for the same document); and a question's type, filters, source,
status, tags and metadata changed. `GoldenDiff.record()` is its JSON (a `summary` of counts
first), `GoldenDiff.lines()` its text. A change of provenance alone (who graded, when, the
document's digest) with the same grade is not a change of the set and is not listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sweep.formats.evidence import Span, span_record
from sweep.formats.golden_set import GoldenSet, Question
from sweep.text import shortened

FIELDS = ("type", "filters", "source", "status", "tags", "metadata")  # a question's fields compared as values
ADDED, REMOVED, CHANGED, MOVED = "added", "removed", "changed", "moved"


@dataclass(frozen=True)
class GoldenDiff:
    """The changes from `old` to `new` (the sources as read), each list in the order of `new`'s
    questions (removed ones: `old`'s), then of the documents."""

    old: str
    new: str
    old_questions: int
    new_questions: int
    added: list[dict[str, Any]] = field(default_factory=list)  # {"id", "question", "type"}
    removed: list[dict[str, Any]] = field(default_factory=list)  # {"id", "question", "type"}
    reworded: list[dict[str, Any]] = field(default_factory=list)  # {"id", "old", "new"}
    grades: list[dict[str, Any]] = field(
        default_factory=list
    )  # {"question", "document", "change", "old", "new", "old_by", "new_by"}
    evidence: list[dict[str, Any]] = field(default_factory=list)  # {"question", "document", "change", "old", "new"}
    fields: list[dict[str, Any]] = field(default_factory=list)  # {"id", "field", "old", "new"}

    @property
    def summary(self) -> dict[str, int]:
        """How many of each change, in the order the text shows them."""
        counts = {
            "old_questions": self.old_questions,
            "new_questions": self.new_questions,
            "questions_added": len(self.added),
            "questions_removed": len(self.removed),
            "questions_reworded": len(self.reworded),
        }
        counts |= {f"grades_{change}": _count(self.grades, change) for change in (CHANGED, ADDED, REMOVED)}
        counts |= {f"evidence_{change}": _count(self.evidence, change) for change in (ADDED, REMOVED, MOVED)}
        return counts | {f"{name}_changed": sum(c["field"] == name for c in self.fields) for name in FIELDS}

    @property
    def changes(self) -> int:
        """How many changes in all (0: the two sets hold the same questions, grades and evidence)."""
        return sum(count for key, count in self.summary.items() if not key.endswith("_questions"))

    def record(self) -> dict[str, Any]:
        """The JSON of `python -m sweep.golden diff --json`."""
        return {
            "old": self.old,
            "new": self.new,
            "summary": self.summary,
            "questions": {"added": self.added, "removed": self.removed, "reworded": self.reworded},
            "grades": self.grades,
            "evidence": self.evidence,
            "fields": self.fields,
        }

    def lines(self) -> list[str]:
        """The diff as text: a summary line of counts, then one line per change."""
        s = self.summary
        out = [
            f"{self.old} ({s['old_questions']} questions) -> {self.new} ({s['new_questions']} questions)",
            f"questions: {s['questions_added']} added, {s['questions_removed']} removed, "
            f"{s['questions_reworded']} reworded; grades: {s['grades_changed']} changed, {s['grades_added']} added, "
            f"{s['grades_removed']} removed; evidence: {s['evidence_added']} added, {s['evidence_removed']} removed, "
            f"{s['evidence_moved']} moved; "
            + ", ".join(f"{name} {s[f'{name}_changed']}" for name in FIELDS)
            + " changed",
        ]
        if not self.changes:
            return [*out, "no changes"]
        out += [f"+ question {q['id']} ({q['type']}): {_quoted(q['question'])}" for q in self.added]
        out += [f"- question {q['id']} ({q['type']}): {_quoted(q['question'])}" for q in self.removed]
        out += [f"~ question {q['id']} reworded: {_quoted(q['old'])} -> {_quoted(q['new'])}" for q in self.reworded]
        out += [
            f"~ grade {g['question']} / {g['document']}: {_grade(g['old'], g['old_by'])} -> {_grade(g['new'], g['new_by'])}"
            for g in self.grades
        ]
        out += [
            f"~ evidence {e['change']} {e['question']} / {e['document']}: "
            + " -> ".join(_items(e[side]) for side in ("old", "new") if e[side])
            for e in self.evidence
        ]
        out += [f"~ {c['field']} of {c['id']}: {_value(c['old'])} -> {_value(c['new'])}" for c in self.fields]
        return out


def diff_golden(old: GoldenSet, new: GoldenSet) -> GoldenDiff:
    """The changes from `old` to `new` (see the module's doc)."""
    diff = GoldenDiff(old.source, new.source, len(old), len(new))
    diff.added.extend(_described(q) for q in new if q.id not in old.by_id)
    diff.removed.extend(_described(q) for q in old if q.id not in new.by_id)
    for q in new:
        before = old.by_id.get(q.id)
        if before is None:
            continue
        if before.question != q.question:
            diff.reworded.append({"id": q.id, "old": before.question, "new": q.question})
        diff.grades.extend(_grades(before, q))
        diff.evidence.extend(_evidence(before, q))
        for name in FIELDS:
            was, now = _plain(getattr(before, name)), _plain(getattr(q, name))
            if was != now:
                diff.fields.append({"id": q.id, "field": name, "old": was, "new": now})
    return diff


def _described(q: Question) -> dict[str, Any]:
    return {"id": q.id, "question": q.question, "type": q.type}


def _grades(old: Question, new: Question) -> list[dict[str, Any]]:
    """Each judgment of one question whose grade changed, or that one side has and the other not."""
    changes = []
    for doc in [*new.relevant, *(doc for doc in old.relevant if doc not in new.relevant)]:
        was, now = old.relevant.get(doc), new.relevant.get(doc)
        if was == now:
            continue
        change = ADDED if was is None else REMOVED if now is None else CHANGED
        changes.append(
            {
                "question": new.id,
                "document": doc,
                "change": change,
                "old": was,
                "new": now,
                "old_by": old.provenance[doc].by if doc in old.provenance and was is not None else None,
                "new_by": new.provenance[doc].by if doc in new.provenance and now is not None else None,
            }
        )
    return changes


def _evidence(old: Question, new: Question) -> list[dict[str, Any]]:
    """Per document, the evidence of one question that only one side has: items paired by their
    text (an excerpt, or a span's `text`) across the sides moved, then spans without text on both
    sides moved together; the rest added or removed."""
    changes = []
    for doc in [*new.evidence, *(doc for doc in old.evidence if doc not in new.evidence)]:
        was, now = list(old.evidence.get(doc, ())), list(new.evidence.get(doc, ()))
        gone = [item for item in was if item not in now]
        came = [item for item in now if item not in was]
        moved_from, moved_to = [], []
        for item in list(gone):
            partner = next((other for other in came if _text(other) is not None and _text(other) == _text(item)), None)
            if partner is not None:
                gone.remove(item)
                came.remove(partner)
                moved_from.append(item)
                moved_to.append(partner)
        bare_gone = [item for item in gone if isinstance(item, Span) and item.text is None]
        bare_came = [item for item in came if isinstance(item, Span) and item.text is None]
        if bare_gone and bare_came:
            moved_from += bare_gone
            moved_to += bare_came
            gone = [item for item in gone if item not in bare_gone]
            came = [item for item in came if item not in bare_came]
        for change, before, after in ((MOVED, moved_from, moved_to), (REMOVED, gone, []), (ADDED, [], came)):
            if before or after:
                changes.append(
                    {
                        "question": new.id,
                        "document": doc,
                        "change": change,
                        "old": _written(before),
                        "new": _written(after),
                    }
                )
    return changes


def _text(item: Span | str) -> str | None:
    return item if isinstance(item, str) else item.text


def _written(items: Sequence[Span | str]) -> list[Any]:
    """Evidence items as a golden file writes them: an excerpt, or `{"start", "end"[, "text"]}`."""
    return [item if isinstance(item, str) else span_record(item) for item in items]


def _plain(value: Any) -> Any:
    """A field's value as JSON holds it (tags as a list, mappings as dicts)."""
    return list(value) if isinstance(value, tuple) else dict(value) if hasattr(value, "items") else value


def _count(changes: list[dict[str, Any]], change: str) -> int:
    return sum(c["change"] == change for c in changes)


def _quoted(text: str) -> str:
    return repr(shortened(text, 80, count=False))


def _grade(grade: int | None, by: str | None) -> str:
    if grade is None:
        return "none"
    return f"{grade} (by {by})" if by else str(grade)


def _items(items: list[Any]) -> str:
    return ", ".join(f"{i['start']}-{i['end']}" if isinstance(i, dict) else _quoted(i) for i in items)


def _value(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)
