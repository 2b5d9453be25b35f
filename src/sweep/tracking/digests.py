"""The data digests: what a run was scored on, and whether two runs (or a run and the data at hand) share it.

A trial is tagged `data.golden_digest` and `data.corpus_digest`, golden-sweep's own sha256 over
every byte the scoring reads: the corpus's (`Corpus.digest`: each document's id, title, content and
metadata) and the golden set's (`golden_digest`: each question's id, text, type, grades, filters,
tags and resolved evidence spans, the questions in the order of their ids, so that a golden file
whose lines were only reordered has the same digest), the golden one cut to 32 hex digits (MLflow's
dataset table, which holds it too, takes 36). `resume=true` (`scored_on`), `sweep.compare`,
`sweep.check` (`check_same_golden_set`, `check_legacy_size`) and `sweep.best` (`same_golden_set`)
match on them; `--shared` pairs runs scored on different golden sets on the questions both hold,
read back from the golden file each run stored (or, for a run that stored none, the file it was
read from) and its corpus (`scored_golden`, `scored_corpus`: refused when either has changed since
the run was scored on it).

Runs logged before the digest ignored line order carry the digest of the questions in file order
(`file_order_digest`); a run logged since carries that one too (`GOLDEN_DIGEST_IN_FILE_ORDER`), so
that an old run and a new one of the same golden file are still paired. Two runs share a golden set
when any digest of one is a digest of the other: each hashes the whole sequence of scored questions,
so equal digests mean the same questions, whichever order either was taken in (`golden_digests`).

Runs logged before those carry MLflow's dataset digest instead (8 hex digits, `is_legacy`): it hashes
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
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from sweep.errors import InputError
from sweep.formats.corpus import Corpus, load_corpus
from sweep.formats.golden import GoldenSet, Span, doc_grades, evidence_spans, load_golden
from sweep.formats.provenance import REVIEWED
from sweep.tracking.reading import golden_copy, golden_source

GOLDEN_DIGEST = "data.golden_digest"
GOLDEN_DIGEST_IN_FILE_ORDER = "data.golden_digest_in_file_order"  # what runs logged before carry as GOLDEN_DIGEST
CORPUS_DIGEST = "data.corpus_digest"
DIGEST_LENGTH = 32  # hex digits of a golden digest (MLflow's `datasets.digest` column holds 36)
LEGACY_ROWS = 10_000  # MLflow's dataset digest hashed only the first rows of a dataset
_LEGACY = re.compile(r"[0-9a-f]{8}")  # MLflow's dataset digest


def golden_digest(golden: GoldenSet) -> str:
    """sha256 over every scored question's id, text, type, grades, filters, tags and evidence spans,
    the questions in the order of their ids (the file's order of lines changes nothing): the
    questions pending review are not scored, so a question reviewed since makes another digest
    (its runs are not paired with the earlier ones)."""
    return _digest(sorted(golden.reviewed, key=lambda q: q.id))


def file_order_digest(golden: GoldenSet) -> str:
    """`golden_digest` over the questions in file order: what runs logged before the digest ignored
    line order carry as `data.golden_digest` (and runs logged since as `GOLDEN_DIGEST_IN_FILE_ORDER`)."""
    return _digest(golden.reviewed)


def _digest(questions: Iterable[Any]) -> str:
    sha = hashlib.sha256()
    for q in questions:
        evidence = {
            doc: [[s.start, s.end] if isinstance(s, Span) else s for s in spans] for doc, spans in q.evidence.items()
        }
        record = [q.id, q.question, q.type, list(q.relevant.items()), dict(q.filters), list(q.tags), evidence]
        sha.update(json.dumps(record, ensure_ascii=False, sort_keys=True, default=str).encode())
        sha.update(b"\n")
    return sha.hexdigest()[:DIGEST_LENGTH]


def data_digests(golden: GoldenSet, corpus: Corpus) -> dict[str, str]:
    """The tags that say what a run was scored on: the golden set's digests (`golden_digest`, and
    `file_order_digest`, which pairs the run with runs logged before) and the corpus's."""
    return {
        GOLDEN_DIGEST: golden_digest(golden),
        GOLDEN_DIGEST_IN_FILE_ORDER: file_order_digest(golden),
        CORPUS_DIGEST: corpus.digest,
    }


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


def golden_digests(tags: Mapping[str, str]) -> frozenset[str]:
    """The golden-set digests a run's `tags` carry: `data.golden_digest` and, for a run logged
    since the digest ignored line order, the file-order one too. Two runs whose digests share one
    were scored on the same questions (each digest hashes the whole sequence it was taken over)."""
    return frozenset(tags[key] for key in (GOLDEN_DIGEST, GOLDEN_DIGEST_IN_FILE_ORDER) if tags.get(key))


Tagged = TypeVar("Tagged")


def same_golden_set(runs: Sequence[Tagged], digests: Iterable[str]) -> list[Tagged]:
    """Those of `runs` (anything with `tags`) scored on the golden set with `digests`: a run whose
    digests share one with them, or with a run found so (an old run's file-order digest pairs it
    with a new run, whose order-free one pairs it with a new run of the lines in another order);
    runs without a digest when `digests` is empty. In the order of `runs`."""
    known = set(digests)
    if not known:
        return [run for run in runs if not golden_digests(run.tags)]
    found: dict[int, Tagged] = {}
    while True:
        more = [i for i, run in enumerate(runs) if i not in found and golden_digests(run.tags) & known]
        if not more:
            return [found[i] for i in sorted(found)]
        for i in more:
            found[i] = runs[i]
            known |= golden_digests(runs[i].tags)


def scored_on(tags: dict[str, str], golden: GoldenSet, corpus: Corpus, reads_filters: bool) -> bool:
    """Whether a run with `tags` was scored on `golden` and `corpus`; `reads_filters`: whether the
    combination reads the questions' filters (a legacy digest does not cover them). A run logged
    before the digest ignored line order matches by the file-order digest."""
    if tags.get(CORPUS_DIGEST) != corpus.digest:
        return False
    logged = tags.get(GOLDEN_DIGEST, "")
    if not is_legacy(logged):
        return bool(golden_digests(tags) & {golden_digest(golden), file_order_digest(golden)})
    if reads_filters or len(golden) > LEGACY_ROWS:
        return False
    return logged == golden_dataset(golden).digest


def check_same_golden_set(a: Any, b: Any, shared: bool = False) -> bool:
    """Refuse to pair runs `a` and `b` (records with `run_id`, `golden_digest` and `tags`) unless
    their digests say that they were scored on the same golden set (`golden_digests`; see
    `check_legacy_size` too); with `shared`, runs scored on different (digested) golden sets pass,
    for the questions both hold (`sweep.compare --shared`). Whether they share one."""
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
    if _digests_of(a) & _digests_of(b):
        return True
    if shared and not old:
        return False
    ordered = [run for run in (a, b) if GOLDEN_DIGEST_IN_FILE_ORDER not in (getattr(run, "tags", None) or {})]
    if len(ordered) == 1 and not old:
        what = (
            f"; run {ordered[0].run_id} was logged before the digest ignored the order of the golden file's "
            "lines: if only their order changed, run its configuration again to compare them"
        )
    else:
        what = (
            f": score one again on the other's golden file (python -m sweep.rescore {a.run_id} --golden NEW), "
            "or compare them on the questions both hold with identical judgments (--shared)"
        )
    raise InputError(
        f"runs {a.run_id} and {b.run_id} were scored on different golden sets ({GOLDEN_DIGEST} "
        f"{a.golden_digest} and {b.golden_digest}): paired statistics need the same questions{what}"
    )


def _digests_of(run: Any) -> frozenset[str]:
    """`golden_digests` of a record or logged run (its `golden_digest` where it has no tags)."""
    return golden_digests(getattr(run, "tags", None) or {GOLDEN_DIGEST: run.golden_digest})


def check_legacy_size(digest: str, questions: int) -> None:
    """Refuse runs that share the legacy `digest` when they scored more questions (`questions`, the
    larger count) than it covers: it cannot tell their golden sets apart."""
    if is_legacy(digest) and questions > LEGACY_ROWS:
        raise InputError(
            f"{GOLDEN_DIGEST} {digest} (logged before golden-sweep hashed whole golden sets) covers only the "
            f"first {LEGACY_ROWS:,} of {questions:,} questions: it cannot tell whether these runs were scored on "
            "the same golden set; run their configurations again to compare them"
        )


def scored_corpus(run: Any) -> Corpus:
    """The corpus the logged run `run` searched (its `data.corpus` tag, read with its id scheme),
    checked against its digest: one line when it is gone or has changed since."""
    source = run.tags.get("data.corpus")
    if source is None:
        raise InputError(f"run {run.run_id} has no data.corpus tag: nothing says which corpus it searched")
    if not Path(source).exists():
        raise InputError(f"run {run.run_id}: the corpus it searched, {source}, is not there any more")
    corpus = load_corpus(source, ids=run.params.get("golden.corpus_ids", "path"))
    expected = run.tags.get(CORPUS_DIGEST)
    if expected and corpus.digest != expected:
        raise InputError(
            f"run {run.run_id}: {source} is not the corpus it searched any more (digest {corpus.digest[:12]}…, "
            f"the run's {expected[:12]}…): its chunks' offsets would not match"
        )
    return corpus


def golden_as_scored(path: str | Path, corpus: Corpus | None, run: Any) -> GoldenSet:
    """The golden set at `path` read as the logged run `run` read its own: with its corpus (None:
    evidence unresolved), its split, and, where it ran with `golden.status=all`, its questions
    pending review as reviewed."""
    golden = load_golden(path, corpus, split=run.params.get("golden.split", "test"), warn=False)
    return golden.all_reviewed() if run.params.get("golden.status", REVIEWED) != REVIEWED else golden


def scored_golden(run: Any) -> GoldenSet:
    """The golden set the logged run `run` was scored on: the copy it stored (`reading.golden_copy`),
    else, for a run that stored none, the file its golden dataset names (`reading.golden_source`),
    read with the run's corpus (`golden_as_scored`) and checked against its digests: one line when
    that file is gone or has changed since the run was scored on it."""
    with ExitStack() as stack:
        try:
            source = stack.enter_context(golden_copy(run))
        except InputError:  # a run logged before runs stored their golden file
            source = golden_source(run)
            if source is None:
                raise InputError(
                    f"run {run.run_id} has no golden dataset input: nothing says which golden file it was scored on"
                ) from None
            if not Path(source).exists():
                raise InputError(
                    f"run {run.run_id}: the golden file it was scored on, {source}, is not there any more"
                ) from None
        golden = golden_as_scored(source, scored_corpus(run), run)
    if not golden_digests(run.tags) & {golden_digest(golden), file_order_digest(golden)}:
        raise InputError(
            f"run {run.run_id}: {golden.source} has changed since the run was scored on it ({GOLDEN_DIGEST} "
            f"{golden_digest(golden)}, the run's {run.tags.get(GOLDEN_DIGEST)}): its judgments are not known"
        )
    return golden
