"""The data digests: what a run was scored on, and whether two runs (or a run and the data at hand) share it.

A trial is tagged `data.golden_digest` and `data.corpus_digest`, golden-sweep's own sha256 over
every byte the scoring reads: the corpus's (`Corpus.digest`: each document's id, title, content and
metadata) and the golden set's (`golden_digest`: each question's id, text, type, grades, filters,
tags and resolved evidence spans, in file order), the golden one cut to 32 hex digits (MLflow's
dataset table, which holds it too, takes 36). `resume=true` (`scored_on`), `sweep.compare`,
`sweep.check` (`check_same_golden_set`, `check_legacy_size`) and `sweep.best --among tied` match on them.

Runs logged before carry MLflow's dataset digest instead (8 hex digits, `is_legacy`): it hashes
only the first 10,000 questions (`LEGACY_ROWS`), and not their filters or tags. Such a digest is
trusted only where it covers all the scoring read: two legacy runs are paired when both have at
most 10,000 questions (their filters are then the one thing unverified, as before); a legacy run
and a new one are never paired (one line says why); `resume=true` reuses a legacy run only for a
combination that ignores question filters (`filter=none`) on a golden set of at most 10,000 questions.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from sweep.errors import InputError
from sweep.formats.corpus import Corpus
from sweep.formats.golden import GoldenSet, Span, doc_grades, evidence_spans

GOLDEN_DIGEST = "data.golden_digest"
CORPUS_DIGEST = "data.corpus_digest"
DIGEST_LENGTH = 32  # hex digits of a golden digest (MLflow's `datasets.digest` column holds 36)
LEGACY_ROWS = 10_000  # MLflow's dataset digest hashed only the first rows of a dataset
_LEGACY = re.compile(r"[0-9a-f]{8}")  # MLflow's dataset digest


def golden_digest(golden: GoldenSet) -> str:
    """sha256 over every scored question's id, text, type, grades, filters, tags and evidence spans,
    in order: the questions pending review are not scored, so a question reviewed since makes
    another digest (its runs are not paired with the earlier ones)."""
    sha = hashlib.sha256()
    for q in golden.reviewed:
        evidence = {
            doc: [[s.start, s.end] if isinstance(s, Span) else s for s in spans] for doc, spans in q.evidence.items()
        }
        record = [q.id, q.question, q.type, list(q.relevant.items()), dict(q.filters), list(q.tags), evidence]
        sha.update(json.dumps(record, ensure_ascii=False, sort_keys=True, default=str).encode())
        sha.update(b"\n")
    return sha.hexdigest()[:DIGEST_LENGTH]


def data_digests(golden: GoldenSet, corpus: Corpus) -> dict[str, str]:
    """The tags that say what a run was scored on: the golden set's and the corpus's digests."""
    return {GOLDEN_DIGEST: golden_digest(golden), CORPUS_DIGEST: corpus.digest}


def golden_frame(golden: GoldenSet) -> pd.DataFrame:
    """The golden set as the table of its MLflow dataset (what the UI shows)."""
    return pd.DataFrame(
        {
            "id": [q.id for q in golden],
            "question": [q.question for q in golden],
            "type": [q.type for q in golden],
            "relevant": [doc_grades(q.relevant) for q in golden],
            "evidence": [evidence_spans(q.evidence) for q in golden],
        }
    )


def golden_dataset(golden: GoldenSet, digest: str | None = None) -> Any:
    """The golden set as an MLflow dataset with `digest` (default: MLflow's own, the legacy digest)."""
    import mlflow  # here: `sweep.best --among tied` reads the digest tag without MLflow

    with warnings.catch_warnings():  # MLflow registers its local-file source twice and says so
        warnings.filterwarnings("ignore", message="The specified dataset source can be interpreted in multiple ways")
        return mlflow.data.from_pandas(
            golden_frame(golden),
            source=str(Path(golden.source).resolve()),
            name=Path(golden.source).name,
            digest=digest,
        )


def is_legacy(digest: str) -> bool:
    """Whether `digest` is MLflow's dataset digest, as runs logged before golden-sweep's own carry."""
    return bool(_LEGACY.fullmatch(digest))


def scored_on(tags: dict[str, str], golden: GoldenSet, corpus: Corpus, reads_filters: bool) -> bool:
    """Whether a run with `tags` was scored on `golden` and `corpus`; `reads_filters`: whether the
    combination reads the questions' filters (a legacy digest does not cover them)."""
    if tags.get(CORPUS_DIGEST) != corpus.digest:
        return False
    logged = tags.get(GOLDEN_DIGEST, "")
    if not is_legacy(logged):
        return logged == golden_digest(golden)
    if reads_filters or len(golden) > LEGACY_ROWS:
        return False
    return logged == golden_dataset(golden).digest


def check_same_golden_set(a: Any, b: Any) -> None:
    """Refuse to pair runs `a` and `b` (records with `run_id` and `golden_digest`) unless their
    digests say that they were scored on the same golden set (see `check_legacy_size` too)."""
    for run in (a, b):
        if not run.golden_digest:
            raise InputError(f"run {run.run_id} has no {GOLDEN_DIGEST} tag: not a golden-sweep evaluation")
    old = [run for run in (a, b) if is_legacy(run.golden_digest)]
    if len(old) == 1:
        new = b if old[0] is a else a
        raise InputError(
            f"run {old[0].run_id} was logged before golden-sweep hashed whole golden sets ({GOLDEN_DIGEST} "
            f"{old[0].golden_digest} is MLflow's digest of at most {LEGACY_ROWS:,} questions, without filters), "
            f"run {new.run_id} after: nothing says that they were scored on the same golden set; run the older "
            "one's configuration again to compare them"
        )
    if a.golden_digest != b.golden_digest:
        raise InputError(
            f"runs {a.run_id} and {b.run_id} were scored on different golden sets ({GOLDEN_DIGEST} "
            f"{a.golden_digest} and {b.golden_digest}): paired statistics need the same questions"
        )


def check_legacy_size(digest: str, questions: int) -> None:
    """Refuse runs that share the legacy `digest` when they scored more questions (`questions`, the
    larger count) than it covers: it cannot tell their golden sets apart."""
    if is_legacy(digest) and questions > LEGACY_ROWS:
        raise InputError(
            f"{GOLDEN_DIGEST} {digest} (logged before golden-sweep hashed whole golden sets) covers only the "
            f"first {LEGACY_ROWS:,} of {questions:,} questions: it cannot tell whether these runs were scored on "
            "the same golden set; run their configurations again to compare them"
        )
