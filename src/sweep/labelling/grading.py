"""An LLM's 0-3 grades for (question, document) pairs: the prompt, the pairs to grade, the strict reading of each answer.

The default prompt is UMBRELA's zero-shot grading prompt (Upadhyay et al., arXiv 2406.06519;
`prompts/umbrela.txt`, as the castorini/umbrela repository ships it), whose answer ends with
`##final score: N`. Another prompt may be given if it holds the same two placeholders, `{query}`
and `{passage}`; its hash (`prompt_hash`, of the template) names the judge with the model
(`llm:<model>@<hash>`) wherever its grades go.

The passage is the document as the corpus holds it (its title, then its text), cut at
`max_passage_tokens` tokens (estimated as characters / 4, as the endpoint client estimates them)
when longer, and the judgment records the cut. The grade is read strictly: the last line that
reads `##final score: N` with N on the prompt's scale. An answer without one is asked once more
(the answer and a reminder appended to the conversation), then recorded as missing with the raw
answer: never guessed. Pairs are graded through `sweep.retrieval.chat_client.ChatClient`
(retries, concurrency, the estimate and the cost cap before anything is sent, the cache).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from sweep.errors import InputError
from sweep.formats.corpus import Corpus
from sweep.formats.golden_set import GoldenSet
from sweep.formats.judgments import JudgeGrade, person_grades
from sweep.labelling.queue import Queue
from sweep.retrieval.chat_client import ChatAnswer, ChatClient, Prompt
from sweep.retrieval.model_client import CHARS_PER_TOKEN

PLACEHOLDERS = ("{query}", "{passage}")
SCALE = range(0, 4)  # UMBRELA's grades
FINAL_SCORE = re.compile(r"^\s*#*\s*final score\s*:\s*(\d+)\s*$", re.IGNORECASE | re.MULTILINE)
REMINDER = "Your answer has no final score. Reply with one line only: ##final score: N (N from 0 to 3)."
DEFAULT_PASSAGE_TOKENS = 3000  # fits an 8k-token context with the prompt and the answer


@dataclass(frozen=True)
class Template:
    """A grading prompt with its `{query}` and `{passage}` placeholders, and the hash that names it."""

    text: str
    source: str

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:12]

    def fill(self, query: str, passage: str) -> str:
        """The prompt for one pair; one pass, so a question holding `{passage}` stays as written."""
        values = {"query": query, "passage": passage}
        return re.sub(r"\{(query|passage)\}", lambda match: values[match.group(1)], self.text)


def load_template(path: str | Path | None) -> Template:
    """The prompt in `path`, or UMBRELA's when None; one that lacks a placeholder is an InputError."""
    if path is None:
        text = resources.files(__package__).joinpath("prompts/umbrela.txt").read_text(encoding="utf-8")
        return Template(text, "umbrela")
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"--prompt {path}: cannot read it ({error})") from None
    missing = [p for p in PLACEHOLDERS if p not in text]
    if missing:
        raise InputError(f"--prompt {path}: has no {' and no '.join(missing)}; the prompt takes both placeholders")
    return Template(text, str(path))


@dataclass(frozen=True)
class Pair:
    """One (question, document) pair to grade; `calibration`: drawn from people's grades."""

    qid: str
    doc: str
    calibration: bool = False


def pool_pairs(queue: Queue, golden: GoldenSet) -> list[Pair]:
    """Every candidate of the queue, in the queue's order; a question the golden set lacks is an error."""
    pairs = []
    for qid, candidates in queue.candidates.items():
        if qid not in golden.by_id:
            raise InputError(f"{queue.source}: question {qid!r} is not in the golden set {golden.source}")
        pairs.extend(Pair(qid, candidate.doc) for candidate in candidates)
    return pairs


def calibration_pairs(golden: GoldenSet, n: int, seed: int) -> list[Pair]:
    """`n` of the pairs people graded (grade 0 included), drawn uniformly with `seed`, so that
    agreement is measured on an unbiased sample and not only where the pool overlapped them."""
    graded = sorted(person_grades(golden))
    if n > len(graded):
        raise InputError(f"--calibration {n}: people graded only {len(graded)} pairs in {golden.source}")
    return [Pair(qid, doc, calibration=True) for qid, doc in random.Random(seed).sample(graded, n)]


def passage(corpus: Corpus, doc: str, max_tokens: int) -> tuple[str, int | None]:
    """The document's text for the prompt, and the token count it was cut at (None: whole)."""
    content = corpus.by_id[doc].content
    limit = max_tokens * CHARS_PER_TOKEN
    return (content, None) if len(content) <= limit else (content[:limit], max_tokens)


def final_grade(text: str) -> tuple[int | None, str | None]:
    """The grade on the answer's last `##final score: N` line and that line; (None, None) when
    there is none on the scale."""
    found = [m for m in FINAL_SCORE.finditer(text) if int(m.group(1)) in SCALE]
    if not found:
        return None, None
    return int(found[-1].group(1)), found[-1].group(0).strip()


def grade_pairs(
    pairs: Sequence[Pair],
    golden: GoldenSet,
    corpus: Corpus,
    chat: ChatClient,
    template: Template,
    max_passage_tokens: int = DEFAULT_PASSAGE_TOKENS,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> list[JudgeGrade]:
    """Each pair's grade (see the module's doc); every prompt's cost is estimated and checked
    against the cap before the first is sent, and the second asks only where the first answer
    had no final score."""
    for pair in pairs:
        if pair.doc not in corpus.by_id:
            raise InputError(f"question {pair.qid!r}: document {pair.doc!r} is not in the corpus {corpus.source}")
    prompts, cuts = [], []
    for pair in pairs:
        text, cut = passage(corpus, pair.doc, max_passage_tokens)
        prompts.append(template.fill(golden.by_id[pair.qid].question, text))
        cuts.append(cut)
    first = chat.complete_all(prompts)
    again = [i for i, answer in enumerate(first) if final_grade(answer.text)[0] is None]
    second = dict(zip(again, chat.complete_all([_reminded(prompts[i], first[i]) for i in again])))
    at = now().strftime("%Y-%m-%dT%H:%M:%SZ")
    return [
        _judgment(pair, [first[i], *([second[i]] if i in second else [])], chat.model, template.hash, cuts[i], at)
        for i, pair in enumerate(pairs)
    ]


def _reminded(prompt: str, answer: ChatAnswer) -> Prompt:
    return [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": answer.text},
        {"role": "user", "content": REMINDER},
    ]


def _judgment(
    pair: Pair, answers: Iterable[ChatAnswer], model: str, prompt_hash: str, cut: int | None, at: str
) -> JudgeGrade:
    answers = list(answers)
    grade, line = final_grade(answers[-1].text)
    return JudgeGrade(
        qid=pair.qid,
        doc=pair.doc,
        grade=grade,
        model=model,
        prompt_hash=prompt_hash,
        prompt_tokens=sum(a.usage.prompt_tokens for a in answers),
        completion_tokens=sum(a.usage.completion_tokens for a in answers),
        final_line=line,
        at=at,
        calibration=pair.calibration,
        cut_at_tokens=cut,
        raw=answers[-1].text if grade is None else None,
    )
