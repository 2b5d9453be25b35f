"""Questions generated from a corpus by an LLM, each with its evidence as a span of its document, pending a person's review.

Passages are sampled with a seed and spread out: round-robin over the strata of a metadata key
(`department` by default, which a folder corpus fills with each document's top folder), within a
stratum round-robin over its documents, so every document gives one passage before any gives a
second. A passage is a run of a document's paragraphs (blank-line separated) of at most
`PASSAGE_CHARS` characters (a longer paragraph is a passage of its own, cut there).

Each passage is sent to the model with the generation prompt (`prompts/generate.txt`, or
`--prompt`; placeholders `{title}` and `{passage}`), which asks for a JSON object
`{"question": ..., "evidence": "<a verbatim quote from the passage>"}`; a share of the questions
may instead be unanswerable, asked for on the titles of a few documents of one stratum
(`prompts/generate_unanswerable.txt`; placeholder `{topics}`). Every prompt goes through
`sweep.retrieval.chat_client.ChatClient` in one batch: estimated and checked against the cost cap
before anything is sent, cached. What comes back is filtered (`sweep.labelling.generation_filters`)
and every dropped question is counted under its reason.

A kept question is `source: synthetic`, `status: pending` (not scored until a person reviews it),
`by: llm:<model>@<prompt hash>`, `at` the time it was generated; its source document is graded 2
(`relevant: {doc: 2}`: the passage answers it) with the evidence span; an unanswerable one has
`relevant: {}` and type `unanswerable`. Its `metadata.generated` holds the prompt's name and hash,
the passage's span and the stratum (and for an unanswerable one, the topics and, with a judge, its
grades of BM25's top 10).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from sweep.errors import InputError
from sweep.formats.corpus import Corpus, Document
from sweep.formats.evidence import Span
from sweep.formats.golden_set import Question
from sweep.formats.lines import UNTYPED
from sweep.formats.provenance import PENDING, SYNTHETIC, Provenance
from sweep.labelling.generation_filters import (
    COPIES,
    DUPLICATE,
    MAX_EVIDENCE_SHARE,
    NOT_FOUND,
    NOT_IN_PASSAGE,
    REASONS,
    ROUND_TRIP_K,
    UNREADABLE,
    DocumentSearch,
    evidence_share,
    evidence_span,
    first_of_near_duplicates,
    judge_unanswerable,
    read_answer,
)
from sweep.labelling.grading import Template
from sweep.retrieval.chat_client import ChatClient

PASSAGE_CHARS = 1200  # the longest passage shown to the model
TOPICS_PER_PROMPT = 5  # document titles an unanswerable question is asked on
SPREAD_BY = "department"
RELEVANT_GRADE = 2  # the source document's grade: the passage answers the question
UNANSWERABLE = "unanswerable"
PARAGRAPH = re.compile(r"\n\s*\n")


@dataclass(frozen=True)
class GenerationPrompt(Template):
    """A generation prompt: its text with named placeholders, and the hash that names it."""

    placeholders: tuple[str, ...] = ()

    def fill(self, **values: str) -> str:  # type: ignore[override]
        """The prompt with each placeholder replaced, in one pass (a passage holding `{title}` stays as written)."""
        pattern = "|".join(re.escape(name) for name in self.placeholders)
        return re.sub(r"\{(" + pattern + r")\}", lambda match: values[match.group(1)], self.text)


def load_prompt(path: str | Path | None, default: str, placeholders: Sequence[str], option: str) -> GenerationPrompt:
    """The prompt in `path`, or the packaged `prompts/<default>.txt` when None; a file that lacks
    a placeholder is an InputError naming `option`."""
    if path is None:
        text = resources.files(__package__).joinpath(f"prompts/{default}.txt").read_text(encoding="utf-8")
        return GenerationPrompt(text, default, tuple(placeholders))
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{option} {path}: cannot read it ({error})") from None
    missing = [f"{{{name}}}" for name in placeholders if f"{{{name}}}" not in text]
    if missing:
        raise InputError(f"{option} {path}: has no {' and no '.join(missing)}; the prompt takes each of them")
    return GenerationPrompt(text, str(path), tuple(placeholders))


@dataclass(frozen=True)
class Passage:
    """Characters [start, end) of a document's content, and the stratum the document is in."""

    doc: Document
    start: int
    end: int
    stratum: str

    @property
    def text(self) -> str:
        return self.doc.content[self.start : self.end]


def passage_spans(content: str, limit: int = PASSAGE_CHARS) -> list[tuple[int, int]]:
    """The document cut into passages: runs of whole paragraphs of at most `limit` characters (a
    longer paragraph alone, cut at `limit`), leading and trailing whitespace left out."""
    paragraphs = [
        (match.start(), match.end()) for match in re.finditer(r"\S(?:.*?\S)?(?=\n\s*\n|\s*\Z)", content, re.DOTALL)
    ]
    spans: list[tuple[int, int]] = []
    for start, end in paragraphs:
        if spans and end - spans[-1][0] <= limit:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, min(end, start + limit)))
    return spans


def stratum(doc: Document, key: str) -> str:
    """The document's value of metadata `key` ("" when it has none)."""
    return str(doc.metadata.get(key, ""))


def _strata(corpus: Corpus, key: str, rng: random.Random) -> list[deque[Document]]:
    """The corpus's documents grouped by stratum, each group shuffled, the groups in a shuffled order."""
    groups: dict[str, list[Document]] = {}
    for doc in corpus:
        groups.setdefault(stratum(doc, key), []).append(doc)
    order = sorted(groups)
    rng.shuffle(order)
    return [deque(rng.sample(groups[name], len(groups[name]))) for name in order]


def sample_passages(corpus: Corpus, n: int, seed: int, spread_by: str = SPREAD_BY) -> list[Passage]:
    """`n` passages (fewer when the corpus has fewer), round-robin over the strata of `spread_by`
    and, within each, over its documents, each document's passages in a seeded order."""
    rng = random.Random(seed)
    strata = _strata(corpus, spread_by, rng)
    left = {}
    for doc in corpus:
        left[doc.id] = passage_spans(doc.content)
        rng.shuffle(left[doc.id])
    picked: list[Passage] = []
    while len(picked) < n and any(strata):
        for documents in strata:
            if not documents or len(picked) == n:
                continue
            doc = documents.popleft()
            if left[doc.id]:
                start, end = left[doc.id].pop()
                picked.append(Passage(doc, start, end, stratum(doc, spread_by)))
            if left[doc.id]:
                documents.append(doc)
    return picked


def sample_topics(corpus: Corpus, n: int, seed: int, spread_by: str = SPREAD_BY) -> list[tuple[str, list[str]]]:
    """`n` (stratum, titles) pairs for unanswerable questions: round-robin over the strata, the
    titles of `TOPICS_PER_PROMPT` of the stratum's documents drawn with `seed`."""
    rng = random.Random(f"{seed}|topics")
    strata = _strata(corpus, spread_by, rng)
    topics = []
    for number in range(n):
        documents = list(strata[number % len(strata)])
        chosen = rng.sample(documents, min(TOPICS_PER_PROMPT, len(documents)))
        topics.append((stratum(chosen[0], spread_by), [doc.title or doc.id for doc in chosen]))
    return topics


@dataclass
class Generated:
    """What a generation kept (questions, in the order asked) and dropped (counts per reason)."""

    questions: list[Question]
    dropped: Counter[str] = field(default_factory=Counter)
    asked: int = 0
    asked_unanswerable: int = 0
    kept_unanswerable: int = 0
    judged: list[dict[str, Any]] = field(default_factory=list)

    def drop_counts(self) -> dict[str, int]:
        """Every reason, in the filters' order, with its count (0 included)."""
        return {reason: self.dropped[reason] for reason in REASONS}


@dataclass
class _Candidate:
    """A question on its way through the filters."""

    question: str
    prompt: GenerationPrompt
    passage: Passage | None = None
    evidence: Span | None = None
    topics: tuple[str, list[str]] | None = None


def generate_questions(
    corpus: Corpus,
    chat: ChatClient,
    n: int,
    *,
    unanswerable: float = 0.0,
    seed: int = 0,
    spread_by: str = SPREAD_BY,
    prompt: GenerationPrompt | None = None,
    unanswerable_prompt: GenerationPrompt | None = None,
    top_k: int = ROUND_TRIP_K,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Generated:
    """Ask for `n` questions, `round(n * unanswerable)` of them unanswerable, and keep those that
    pass the filters (see the module's doc)."""
    prompt = prompt or load_prompt(None, "generate", ("title", "passage"), "--prompt")
    unanswerable_prompt = unanswerable_prompt or load_prompt(
        None, "generate_unanswerable", ("topics",), "--unanswerable-prompt"
    )
    wanted_unanswerable = round(n * unanswerable)
    passages = sample_passages(corpus, n - wanted_unanswerable, seed, spread_by)
    topics = sample_topics(corpus, wanted_unanswerable, seed, spread_by) if wanted_unanswerable else []
    prompts = [prompt.fill(title=p.doc.title or p.doc.id, passage=p.text) for p in passages]
    prompts += [unanswerable_prompt.fill(topics="\n".join(f"- {title}" for title in t[1])) for t in topics]
    answers = chat.complete_all(prompts)
    generated = Generated([], asked=len(prompts), asked_unanswerable=len(topics))

    readable: list[_Candidate] = []
    for passage, answer in zip(passages, answers):
        found = read_answer(answer, ("question", "evidence"))
        span = found and evidence_span(found["evidence"], passage.doc.content, passage.start, passage.end)
        if found is None:
            generated.dropped[UNREADABLE] += 1
        elif span is None:
            generated.dropped[NOT_IN_PASSAGE] += 1
        elif evidence_share(found["question"], span.text or "") > MAX_EVIDENCE_SHARE:
            generated.dropped[COPIES] += 1
        else:
            readable.append(_Candidate(found["question"], prompt, passage, span))
    for pair, answer in zip(topics, answers[len(passages) :]):
        found = read_answer(answer, ("question",))
        if found is None:
            generated.dropped[UNREADABLE] += 1
        else:
            readable.append(_Candidate(found["question"], unanswerable_prompt, topics=pair))

    distinct = first_of_near_duplicates([c.question for c in readable])
    generated.dropped[DUPLICATE] += distinct.count(False)
    readable = [c for c, keep in zip(readable, distinct) if keep]
    search = DocumentSearch(corpus)
    tops = iter(search.top([c.question for c in readable if c.passage is not None], top_k))
    kept = [c for c in readable if c.passage is None or c.passage.doc.id in next(tops)]
    generated.dropped[NOT_FOUND] += len(readable) - len(kept)

    at = now().strftime("%Y-%m-%dT%H:%M:%SZ")
    generated.questions = [_question(c, chat.model, at) for c in kept]
    generated.kept_unanswerable = sum(q.type == UNANSWERABLE for q in generated.questions)
    return generated


def judge_unanswered(generated: Generated, corpus: Corpus, judge: ChatClient, template: Template) -> None:
    """Has `judge` grade BM25's top 10 of each unanswerable question kept, and records what it
    found in the question's `metadata.generated.judge` (`generation_filters.judge_unanswerable`)."""
    unanswered = [q for q in generated.questions if q.type == UNANSWERABLE]
    if not unanswered:
        return
    generated.judged = judge_unanswerable(unanswered, corpus, DocumentSearch(corpus), judge, template)
    found = {q.id: verdict for q, verdict in zip(unanswered, generated.judged)}
    generated.questions = [
        replace(q, metadata={"generated": q.metadata["generated"] | {"judge": found[q.id]}}) if q.id in found else q
        for q in generated.questions
    ]


def _question(candidate: _Candidate, model: str, at: str) -> Question:
    """A kept candidate as a pending synthetic question, with where it came from."""
    prompt = candidate.prompt
    generated: dict[str, Any] = {"prompt": prompt.source, "prompt_hash": prompt.hash}
    qid = "gen-" + hashlib.sha256(candidate.question.encode()).hexdigest()[:10]
    common: dict[str, Any] = {
        "id": qid,
        "question": candidate.question,
        "source": SYNTHETIC,
        "status": PENDING,
        "origin": Provenance(f"llm:{model}@{prompt.hash}", at),
    }
    if candidate.passage is None:
        stratum_name, titles = candidate.topics or ("", [])
        generated |= {"stratum": stratum_name, "topics": titles}
        return Question(relevant={}, type=UNANSWERABLE, metadata={"generated": generated}, **common)
    passage = candidate.passage
    generated |= {"stratum": passage.stratum, "passage": {"start": passage.start, "end": passage.end}}
    doc = passage.doc.id
    return Question(
        relevant={doc: RELEVANT_GRADE},
        type=UNTYPED,
        metadata={"generated": generated},
        evidence={doc: (candidate.evidence,)},
        **common,
    )
