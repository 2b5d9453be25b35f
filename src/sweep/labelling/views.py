"""What the labelling page is sent: progress, a question's summary and detail, and corpus search results.

Plain JSON-ready dicts built from the golden set as saved, the queue, the corpus and the judge's
grades (`--judgments`), if any; the page (`page.html`) renders them. A judge's grade is only a
suggestion beside a candidate the person has not graded: the page sends a person's grade for it.
A question says whether it is pending review, where it came from and who wrote or reviewed it
(`review`), so the page can mark a generated question waiting for a person.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from sweep.formats.corpus import Corpus, Document
from sweep.formats.golden import RECOMMENDED_UNANSWERABLE_SHARE, GoldenSet, Provenance, Question, resolve_evidence
from sweep.formats.judgments import JudgeGrade
from sweep.labelling.changes import GRADES, UNANSWERABLE, added_from_search, marked_unanswerable, status
from sweep.labelling.golden_file import version
from sweep.labelling.queue import Candidate, Queue
from sweep.text import single_line

SEARCH_RESULTS = 10
SNIPPET = 160  # characters of a search result's text

Judgments = Mapping[tuple[str, str], JudgeGrade]  # (question, document) -> the judge's grade


def suggestion(judged: JudgeGrade) -> dict[str, Any]:
    """The judge's grade as the page offers it: `grade` on the app's scale, where a grade above the
    app's top one (UMBRELA's 3, perfectly relevant) is offered as the top one, 2; None when no grade
    could be read from the judge's answer. `judge_grade`: the grade as the judge gave it."""
    grade = None if judged.grade is None else min(judged.grade, max(GRADES))
    return {"grade": grade, "judge_grade": judged.grade, "by": judged.by, "model": judged.model, "at": judged.at}


def pending_suggestions(golden: GoldenSet, queue: Queue, judgments: Judgments) -> int:
    """Candidates (pooled or added from search) a person has not graded and the judge has."""
    pending = 0
    for q in golden:
        shown = {c.doc for c in queue.candidates.get(q.id, [])} | set(added_from_search(q))
        judged = (judgments.get((q.id, doc)) for doc in shown - q.relevant.keys())
        pending += sum(j is not None and j.grade is not None for j in judged)
    return pending


def progress(golden: GoldenSet, queue: Queue, judgments: Judgments | None = None) -> dict[str, Any]:
    """Judged / total pooled candidates, questions answered / marked unanswerable / still open,
    the unanswerable share against the guideline, and the judge's suggestions pending (None:
    no judgments loaded)."""
    statuses = [status(q) for q in golden]
    pooled = [(q, c.doc) for q in golden for c in queue.candidates.get(q.id, [])]
    marked = statuses.count(UNANSWERABLE)
    share = marked / len(golden) if len(golden) else 0.0
    low, high = RECOMMENDED_UNANSWERABLE_SHARE
    return {
        "questions": len(golden),
        "answered": statuses.count("answered"),
        "unanswerable": marked,
        "open": [q.id for q, s in zip(golden, statuses) if s == "open"],
        "pooled": len(pooled),
        "pooled_judged": sum(doc in q.relevant for q, doc in pooled),
        "judgments": sum(len(q.relevant) for q in golden),
        "unanswerable_share": share,
        "guideline": [low, high],
        "share_status": "low" if share < low else "high" if share > high else "ok",
        "suggestions": None if judgments is None else pending_suggestions(golden, queue, judgments),
    }


def review(question: Question) -> dict[str, Any]:
    """`review`: pending or reviewed; `source`: human or synthetic; `by`, `at`: who wrote the question
    (`llm:<model>@<prompt hash>` for a generated one) or reviewed it, and when (None: not said);
    `judge`: for a generated unanswerable question, what a judge made of BM25's top 10
    (`metadata.generated.judge`: `top` {doc: grade}, `all_0`), the evidence that nothing answers it."""
    origin = question.origin or Provenance()
    generated = question.metadata.get("generated")
    judge = generated.get("judge") if isinstance(generated, dict) else None
    return {
        "review": question.status, "source": question.source, "by": origin.by, "at": origin.at,
        "judge": judge if isinstance(judge, dict) else None,
    }  # fmt: skip


def summary(question: Question, queue: Queue) -> dict[str, Any]:
    pooled = queue.candidates.get(question.id, [])
    return review(question) | {
        "id": question.id,
        "question": question.question,
        "type": question.type,
        "status": status(question),
        "judged": len(question.relevant),
        "pooled": len(pooled),
        "pooled_judged": sum(c.doc in question.relevant for c in pooled),
    }


def pooled(candidate: Candidate, queue: Queue) -> dict[str, Any]:
    """Where the runs ranked a pooled document (each run by its label) and its chunk to highlight."""
    chunk = candidate.chunk
    return {
        "doc": candidate.doc,
        "best_rank": candidate.best_rank,
        "ranks": [{"run": queue.run_labels.get(run, run), "rank": rank} for run, rank in candidate.ranks.items()],
        "chunk": {"start": chunk.start, "end": chunk.end} if chunk is not None else None,
    }


def detail(question: Question, queue: Queue, corpus: Corpus, judgments: Judgments | None = None) -> dict[str, Any]:
    """A question with its candidates: pooled ones in pool order, then those added from search (in
    the corpus still: metadata is not checked against it), then other judged documents; an
    ungraded one the judge graded carries its `suggestion`."""
    judgments = judgments or {}
    resolved = resolve_evidence(GoldenSet((question,)), corpus).questions[0].evidence
    in_pool = {c.doc: c for c in queue.candidates.get(question.id, [])}
    added = [doc for doc in added_from_search(question) if doc in corpus.by_id and doc not in in_pool]
    docs = list(dict.fromkeys([*in_pool, *added, *question.relevant]))
    candidates = []
    for doc in docs:
        content = corpus.by_id[doc].content
        items = question.evidence.get(doc, ())
        graded_by = question.provenance.get(doc, Provenance())
        judged = judgments.get((question.id, doc)) if doc not in question.relevant else None
        candidates.append(
            {
                "doc": doc,
                "title": corpus.by_id[doc].title,
                "grade": question.relevant.get(doc),
                "graded_by": graded_by.by,
                "graded_at": graded_by.at,
                "pooled": pooled(in_pool[doc], queue) if doc in in_pool else None,
                "added": doc in added,
                "evidence": [
                    item if isinstance(item, str) else (item.text or content[item.start : item.end]) for item in items
                ],
                "evidence_spans": [[s.start, s.end] for s in resolved.get(doc, ())],
                "suggestion": suggestion(judged) if judged is not None else None,
            }
        )
    return review(question) | {
        "id": question.id,
        "question": question.question,
        "type": question.type,
        "filters": dict(question.filters),
        "tags": list(question.tags),
        "status": status(question),
        "unanswerable": marked_unanswerable(question),
        "version": version(question),
        "candidates": candidates,
    }


class Search:
    """BM25 (sweep.retrieval.lexical) over each document's id, title and content, built on first use;
    documents whose id contains the query come first."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self._lock = threading.Lock()
        self._bm25 = None

    def __call__(self, query: str, limit: int = SEARCH_RESULTS) -> list[dict[str, str]]:
        query = query.strip()
        if not query:
            return []
        documents = self.corpus.documents
        lowered = query.lower()
        found = [i for i, d in enumerate(documents) if lowered in d.id.lower()][:limit]
        with self._lock:
            if self._bm25 is None:
                from sweep.retrieval.lexical import BM25Retriever

                self._bm25 = BM25Retriever()
                self._bm25.build([f"{d.id} {d.title}\n{d.content}" for d in documents])
            _, ids = self._bm25.search([query], limit)
        found += [int(i) for i in ids[0] if i >= 0 and int(i) not in found]
        return [self._result(documents[i], lowered.split()) for i in found[:limit]]

    @staticmethod
    def _result(document: Document, terms: Sequence[str]) -> dict[str, str]:
        """`terms`: the query's words, lowercased; the snippet (SNIPPET characters, whitespace
        collapsed) starts a little before the earliest one in the text."""
        content, lowered = document.content, document.content.lower()
        hits = [hit for hit in (lowered.find(term) for term in terms) if hit >= 0]
        start = max(0, min(hits) - SNIPPET // 3) if hits else 0
        snippet = single_line(content[start : start + SNIPPET])
        return {"doc": document.id, "title": document.title, "snippet": ("…" if start else "") + snippet + "…"}
