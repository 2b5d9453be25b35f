"""Evidence: which characters of a document answer a question, as parsed from a golden record and checked against the corpus.

A question may say, per relevant document, which text answers it, as verbatim excerpts and/or
character spans of the document's `content` (what is chunked):

    "evidence": {"hr-leave-policy": ["New hires get 25 days", {"start": 120, "end": 164}]}

Given the corpus, every excerpt is resolved to its span. An excerpt is looked up verbatim first,
then with any run of whitespace matching any other (a line break in the document where the label
has a space), then the same in Unicode's composed (NFC) and then decomposed (NFD) form (`é` as one
character or as `e` and an accent: a label pasted from elsewhere), so that the span is always in
the document's own characters; it must occur exactly once, so a label always means one place
(lengthen it, or give a span, when it repeats). A span may carry `"text"`, which must equal the
document's characters there, or be the same text in another Unicode normal form. Spans of one document are merged, so evidence is a set of characters per document; chunk
relevance follows from it for any chunking.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sweep.errors import InputError
from sweep.formats.lines import check_keys, keyed_by_id
from sweep.text import shortened

_SPAN_KEYS = ("start", "end", "text")


@dataclass(frozen=True)
class Span:
    """Characters [start, end) of a document's content; `text`, when given, must be those characters."""

    start: int
    end: int
    text: str | None = None

    def __len__(self) -> int:
        return self.end - self.start


Evidence = Mapping[str, tuple["Span | str", ...]]  # document id -> spans and (until resolved) excerpts


def parse_evidence(value: Any, relevant: Mapping[str, int], at: str, qid: str) -> dict[str, tuple[Span | str, ...]]:
    """`{doc: [excerpt or {"start", "end"[, "text"]}, ...]}`; a lone excerpt or span needs no list."""
    if not isinstance(value, dict):
        raise InputError(f"{at}: question {qid!r} has 'evidence' that is not a mapping of document to excerpts")
    evidence: dict[str, tuple[Span | str, ...]] = {}
    for doc, items in keyed_by_id(value, at, "evidence document id", f"question {qid!r}: 'evidence'"):
        if relevant.get(doc, 0) < 1:
            raise InputError(
                f"{at}: question {qid!r} has evidence in {doc!r}, which its 'relevant' does not mark relevant (grade >= 1)"
            )
        items = items if isinstance(items, list) else [items]
        if not items:
            raise InputError(f"{at}: question {qid!r}: evidence for {doc!r} is an empty list")
        evidence[doc] = tuple(evidence_item(item, at, f"question {qid!r}: evidence for {doc!r}") for item in items)
    return evidence


def evidence_item(item: Any, at: str, what: str) -> Span | str:
    if isinstance(item, str):
        if not item.strip():
            raise InputError(f"{at}: {what} has an empty excerpt")
        return item
    if not isinstance(item, dict):
        raise InputError(f"{at}: {what}: {item!r} is neither an excerpt (string) nor a span {{'start', 'end'}}")
    check_keys(item, _SPAN_KEYS, at, what)
    start, end, text = item.get("start"), item.get("end"), item.get("text")
    for name, offset in (("start", start), ("end", end)):
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InputError(f"{at}: {what}: span {name} is {offset!r}; expected a character offset (integer >= 0)")
    if start >= end:
        raise InputError(f"{at}: {what}: span start {start} is not before end {end}")
    if text is not None and not isinstance(text, str):
        raise InputError(f"{at}: {what}: span text is {type(text).__name__}; expected a string")
    return Span(start, end, text)


def resolve_spans(items: Iterable[Span | str], content: str, at: str, what: str) -> tuple[Span, ...]:
    """Every excerpt found in `content` (a document's) and every span checked against it; merged."""
    return merge_spans(_locate(item, content, at, what) for item in items)


def _locate(item: Span | str, content: str, at: str, what: str) -> Span:
    if isinstance(item, Span):
        if item.end > len(content):
            raise InputError(
                f"{at}: {what}: span {item.start}-{item.end} ends after the document ({len(content)} characters)"
            )
        if item.text is not None and _nfc(content[item.start : item.end]) != _nfc(item.text):
            raise InputError(
                f"{at}: {what}: span {item.start}-{item.end} is {_excerpt(content[item.start : item.end])} "
                f"in the document, not {_excerpt(item.text)}"
            )
        return Span(item.start, item.end)
    found = next(filter(None, (_occurrences(content, form) for form in _forms(item))), [])
    if not found:
        raise InputError(
            f"{at}: {what}: excerpt {_excerpt(item)} is not in the document "
            "(even ignoring whitespace, and in Unicode NFC and NFD)"
        )
    if len(found) > 1:
        starts = ", ".join(str(start) for start, _ in found[:5])
        raise InputError(
            f"{at}: {what}: excerpt {_excerpt(item)} occurs {len(found)} times in the document "
            f"(at characters {starts}); lengthen it or give a span {{'start', 'end'}}"
        )
    return Span(*found[0])


def _forms(excerpt: str) -> Iterable[str]:
    """The excerpt as given, then composed (NFC), then decomposed (NFD), each once."""
    return dict.fromkeys((excerpt, _nfc(excerpt), unicodedata.normalize("NFD", excerpt)))


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _occurrences(content: str, excerpt: str) -> list[tuple[int, int]]:
    """Where `excerpt` occurs verbatim, or else with whitespace runs matching any whitespace run."""
    exact, start = [], content.find(excerpt)
    while start >= 0:
        exact.append((start, start + len(excerpt)))
        start = content.find(excerpt, start + 1)
    if exact:
        return exact
    pattern = r"\s+".join(re.escape(word) for word in excerpt.split())
    return [match.span() for match in re.finditer(pattern, content)]


def _excerpt(text: str, limit: int = 60) -> str:
    """The start of a (possibly long) excerpt, quoted, for an error message."""
    return repr(shortened(text, limit, count=False))


def merge_spans(spans: Iterable[Span]) -> tuple[Span, ...]:
    """Sorted spans with overlapping and touching ones joined."""
    merged: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, s.end)):
        if merged and span.start <= merged[-1].end:
            merged[-1] = Span(merged[-1].start, max(merged[-1].end, span.end))
        else:
            merged.append(Span(span.start, span.end))
    return tuple(merged)


def evidence_spans(evidence: Evidence) -> str:
    """`doc:start-end+start-end, doc:...` (excerpts not yet resolved are quoted)."""
    return ", ".join(
        f"{doc}:" + "+".join(f"{s.start}-{s.end}" if isinstance(s, Span) else repr(s) for s in spans)
        for doc, spans in evidence.items()
    )


def span_record(span: Span) -> dict[str, Any]:
    record: dict[str, Any] = {"start": span.start, "end": span.end}
    if span.text is not None:
        record["text"] = span.text
    return record
