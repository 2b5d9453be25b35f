"""Provenance in a golden set: who graded a judgment and when, where a question came from and whether a person reviewed it.

A judgment (a question's grade for one document) may be written as an object instead of a bare
grade, to say who gave it and when:

    "relevant": {"hr-leave-policy": {"grade": 2, "by": "ana", "at": "2026-12-06T10:00:00Z"}, "hr-faq": 0}

and the content digest of the document as it was graded (`digest`, `Document.content_digest`),
so that a document edited since shows (`python -m sweep.golden check`). `by` is a person's name, or `llm:<model>@<prompt hash>` for a model's grade; `at` is an ISO 8601
time (what `datetime.fromisoformat` reads). A question may say where it came from, `source`
(`human` or `synthetic`), whether a person has reviewed it, `status` (`reviewed` or
`pending`), and who wrote it or, once reviewed, who reviewed it and when, `by` and `at` as a
judgment has them (`{"id": "g7", ..., "source": "synthetic", "status": "pending", "by":
"llm:qwen2.5:7b@3f2a9c1b"}`; accepted: `"status": "reviewed", "by": "ana", "at": ...`). A file without these fields means what it always meant: people's grades, questions
written and reviewed by people. A pending question is not scored until a person reviews it
(`GoldenSet.reviewed`).

Every value is checked where it is read, and a bad one is an `InputError` naming the file, the
line and the value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sweep.errors import InputError

HUMAN, SYNTHETIC = "human", "synthetic"
SOURCES = (HUMAN, SYNTHETIC)
REVIEWED, PENDING = "reviewed", "pending"
STATUSES = (REVIEWED, PENDING)
LLM = "llm:"  # how `by` names a model rather than a person
_LLM_BY = re.compile(r"llm:(\S+)@([^\s@]+)")  # the model may hold an @ (a dated version); the hash may not
JUDGMENT_KEYS = ("grade", "by", "at", "digest")


@dataclass(frozen=True)
class Provenance:
    """Who gave a judgment (a person's name, or `llm:<model>@<prompt hash>`) and when (ISO 8601,
    as written), and the content digest of the document as it was graded (`digest`:
    `Document.content_digest`, which the labelling app records); None where the file does not say."""

    by: str | None = None
    at: str | None = None
    digest: str | None = None

    def record(self) -> dict[str, str]:
        """The keys a judgment object holds besides its grade, in file order."""
        pairs = (("by", self.by), ("at", self.at), ("digest", self.digest))
        return {key: value for key, value in pairs if value is not None}


def grader(value: Any, where: str) -> str:
    """`value` as a judgment's `by`: a non-empty name, or `llm:<model>@<prompt hash>`; else an
    error that starts with `where` (a file and line, or an option) and names the value."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: 'by' is {value!r}; expected a person's name or llm:<model>@<prompt hash>")
    if value.startswith(LLM) and _LLM_BY.fullmatch(value) is None:
        raise InputError(f"{where}: 'by' is {value!r}; a model's grade is by llm:<model>@<prompt hash>")
    return value


def timestamp(value: Any, where: str) -> str:
    """`value` as a judgment's `at`: an ISO 8601 time as written (a time YAML has already read as
    a date or datetime is written back in ISO 8601); else an error naming the value."""
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value)
            return value
        except ValueError:
            pass
    raise InputError(f"{where}: 'at' is {value!r}; expected an ISO 8601 time such as 2026-12-06T10:00:00Z")


def provenance(record: dict[str, Any], where: str) -> Provenance | None:
    """The `by`, `at` and `digest` of a judgment object (None when it has none of them)."""
    if not {"by", "at", "digest"} & record.keys():
        return None
    by = grader(record["by"], where) if "by" in record else None
    digest = record.get("digest")
    if digest is not None and (not isinstance(digest, str) or re.fullmatch(r"[0-9a-f]{16}", digest) is None):
        raise InputError(f"{where}: 'digest' is {digest!r}; expected the graded document's 16 hex digits")
    return Provenance(by, timestamp(record["at"], where) if "at" in record else None, digest)


def choice(record: dict[str, Any], key: str, allowed: tuple[str, ...], where: str) -> str:
    """A question's `source` or `status`: one of `allowed`, the first when the key is absent."""
    value = record.get(key, allowed[0])
    if value not in allowed:
        raise InputError(f"{where}: {key!r} is {value!r}; expected {' or '.join(allowed)} (or leave the key out)")
    return value
