"""Drift: where a golden set no longer fits its corpus, every problem at once rather than the loader's first.

`find_drift(golden, corpus)` takes a golden set read without a corpus (`load_golden(path)`:
evidence as written) and reports documents that a judgment names and the corpus no longer has;
evidence that no longer occurs in its document (each excerpt and span looked up by the evidence
loader's own search, `sweep.formats.evidence.resolve_spans`, with its reason: not found, found more
than once, a span past the end or over other text); and documents whose text changed since they
were graded (a judgment's `digest` is not the document's `content_digest` now). Judgments without
a digest cannot be checked and are counted. Loading the set with the corpus (`load_golden(path,
corpus)`, what a run does) stops at the first missing document or evidence; what loads can still
hold edited documents, which `changed_documents` finds for a run's one warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sweep.errors import InputError
from sweep.formats.corpus import Corpus, Document
from sweep.formats.evidence import Span, resolve_spans, span_record
from sweep.formats.golden import nfc_aliases
from sweep.formats.golden_set import GoldenSet


@dataclass(frozen=True)
class Drift:
    """What `find_drift` found, each list in the order of the golden set's questions and documents."""

    golden: str
    corpus: str
    missing: list[dict[str, Any]] = field(default_factory=list)  # {"question", "document", "grade"}
    evidence: list[dict[str, Any]] = field(default_factory=list)  # {"question", "document", "evidence", "problem"}
    changed: list[dict[str, Any]] = field(default_factory=list)  # {"question", "document", "graded", "now", "by", "at"}
    checked: int = 0  # judgments with a digest, of documents the corpus has
    not_checkable: int = 0  # judgments without a digest, of documents the corpus has

    @property
    def problems(self) -> int:
        return len(self.missing) + len(self.evidence) + len(self.changed)

    def record(self) -> dict[str, Any]:
        """The JSON of `python -m sweep.golden check --json`."""
        return {
            "golden": self.golden,
            "corpus": self.corpus,
            "summary": {
                "problems": self.problems,
                "missing_documents": len(self.missing),
                "evidence_not_found": len(self.evidence),
                "changed_documents": len(self.changed),
                "digests_checked": self.checked,
                "not_checkable": self.not_checkable,
            },
            "missing_documents": self.missing,
            "evidence_not_found": self.evidence,
            "changed_documents": self.changed,
        }

    def lines(self) -> list[str]:
        """The drift as text: a summary line, then one line per problem."""
        out = [
            f"{self.golden} against {self.corpus}: {len(self.missing)} judged documents missing, "
            f"{len(self.evidence)} evidence items not found, {len(self.changed)} documents changed since graded "
            f"({self.checked} judgments checked by digest, {self.not_checkable} without a digest: not checkable)"
        ]
        out += [f"missing: {m['question']} / {m['document']} (grade {m['grade']})" for m in self.missing]
        out += [f"evidence: {e['problem']}" for e in self.evidence]
        out += [
            f"changed: {c['question']} / {c['document']}: graded on {c['graded']}"
            + (f" by {c['by']}" if c["by"] else "")
            + (f" at {c['at']}" if c["at"] else "")
            + f", now {c['now']}"
            for c in self.changed
        ]
        return out if self.problems else [*out, "no drift"]


def find_drift(golden: GoldenSet, corpus: Corpus) -> Drift:
    """Every judged document the corpus lacks, every evidence item not found in its document, and
    every judgment whose document changed since it was graded (see the module's doc)."""
    documents = nfc_aliases(corpus)
    changed, checked, not_checkable = _changed(golden, documents)
    drift = Drift(golden.source, corpus.source, changed=changed, checked=checked, not_checkable=not_checkable)
    for q in golden:
        for doc, grade in q.relevant.items():
            if doc not in documents:
                drift.missing.append({"question": q.id, "document": doc, "grade": grade})
        for doc, items in q.evidence.items():
            if doc in documents:
                what = f"question {q.id!r}: evidence for {doc!r}"
                drift.evidence.extend(
                    {"question": q.id, "document": doc, "evidence": _written(item), "problem": problem}
                    for item, problem in _not_found(items, documents[doc].content, golden.source, what)
                )
    return drift


def changed_documents(golden: GoldenSet, corpus: Corpus) -> list[dict[str, Any]]:
    """The judgments of `golden` whose document's text changed since it was graded (their digest
    is not its `content_digest` now); a set loaded with `corpus` has no other drift."""
    return _changed(golden, nfc_aliases(corpus))[0]


def _changed(golden: GoldenSet, documents: Mapping[str, Document]) -> tuple[list[dict[str, Any]], int, int]:
    """(changed judgments, judgments checked by digest, judgments without a digest), over the
    judgments of documents in `documents`."""
    changed, checked, not_checkable, now = [], 0, 0, {}
    for q in golden:
        for doc in q.relevant:
            if doc not in documents:
                continue
            graded = q.provenance.get(doc)
            if graded is None or graded.digest is None:
                not_checkable += 1
                continue
            checked += 1
            if doc not in now:
                now[doc] = documents[doc].content_digest
            if graded.digest != now[doc]:
                changed.append(
                    {
                        "question": q.id,
                        "document": doc,
                        "graded": graded.digest,
                        "now": now[doc],
                        "by": graded.by,
                        "at": graded.at,
                    }
                )
    return changed, checked, not_checkable


def _not_found(items: tuple[Span | str, ...], content: str, at: str, what: str) -> list[tuple[Span | str, str]]:
    """Each item the evidence loader cannot resolve in `content`, with the loader's own message."""
    problems = []
    for item in items:
        try:
            resolve_spans([item], content, at, what)
        except InputError as error:
            problems.append((item, str(error)))
    return problems


def _written(item: Span | str) -> Any:
    return item if isinstance(item, str) else span_record(item)
