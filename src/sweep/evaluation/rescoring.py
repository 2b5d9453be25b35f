"""A stored run scored again on a golden set: from its ranking and the chunks it delivered, no retrieval.

A finished trial keeps its ranked run (`run.trec`) and each question's delivered chunks
(`tables/retrieved_chunks.json`): enough to score it again under other grades (`sweep.judge
audit`) or on another version of its golden set (`sweep.rescore`) without a model. `rescored`
scores a record read back with its results as the trial scored it (`score`, condensed or not as
the run was; the abstention calibration on the metric it was calibrated on; the tables of
`evaluation_tables`), keeping what does not depend on the golden set (its config, costs,
timings). With the corpus the run searched, the context metrics are scored again from the
delivered chunks too, where the questions have evidence: recall, precision, IoU and completeness
at each of the run's cutoffs. Two need what only the chunker knows and are left out:
`context/tokens_at_k` (each chunk's tokens) and `context/precision_omega` (every chunk of the
evidence's documents, not only those delivered). Without the corpus, the record's context metrics
are kept as they were.

`answered` says which questions of a golden set the stored run was asked: the same id and the
same text as a row of its per-question table; the others (new, or reworded since) cannot be
scored from it and are only counted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sweep.evaluation.abstention import calibrate
from sweep.evaluation.context import DEFAULT_CUTOFFS, PRECISION_OMEGA, ContextScores, score_contexts
from sweep.evaluation.record import TrialRecord, trial_record
from sweep.evaluation.registry import is_cost, measure_of
from sweep.evaluation.scoring import score
from sweep.formats.golden import GoldenSet
from sweep.retrieval.chunking import Chunk

if TYPE_CHECKING:
    from sweep.formats.corpus import Corpus

CONDENSED_PARAM = "golden.condensed"  # the settings a run was scored with (`sweep.experiment.trial`), as params
CUTOFFS_PARAM = "context.k"
CALIBRATE_ON_PARAM = "abstain.calibrate_on"
SCORED = ("type/", "source/", "abstain/", "member/")  # prefixes of what scoring a golden set logs
CONTEXT = "context/"
NOT_FROM_DELIVERED = ("context/tokens_at_", PRECISION_OMEGA)  # context metrics the delivered chunks cannot give


def scored_condensed(record: TrialRecord) -> bool:
    """Whether the run scored its rankings condensed (`golden.condensed=true`); params hold str()'s text."""
    return record.params.get(CONDENSED_PARAM) == "True"


def answered(record: TrialRecord, golden: GoldenSet) -> tuple[GoldenSet, list[str]]:
    """The questions of `golden` that the run of `record` (read with its per-question table) was
    asked, with the same text, and the ids of the others, in `golden`'s order. A table logged before
    it held the question text pairs by id alone."""
    table = record.per_query
    asked = dict(zip(table["qid"].astype(str), table["question"] if "question" in table else [None] * len(table)))
    same = [q for q in golden if q.id in asked and asked[q.id] in (None, q.question)]
    kept = {q.id for q in same}
    return GoldenSet(tuple(same), source=golden.source), [q.id for q in golden if q.id not in kept]


def context_cutoffs(record: TrialRecord) -> tuple[int, ...]:
    """The cutoffs (`context.k`) the run scored its context metrics at."""
    try:
        cutoffs = json.loads(record.params.get(CUTOFFS_PARAM, "null"))
    except ValueError:
        cutoffs = None
    return tuple(cutoffs) if isinstance(cutoffs, list) and cutoffs else DEFAULT_CUTOFFS


def delivered_context(
    golden: GoldenSet, delivered: Mapping[str, Sequence[Mapping[str, Any]]], corpus: Corpus, cutoffs: Sequence[int]
) -> ContextScores:
    """The context metrics of the chunks each question was delivered (`TrialRecord.delivered_chunks`),
    by `score_contexts`, less those the delivered chunks cannot give (`NOT_FROM_DELIVERED`)."""
    chunks: list[Chunk] = []
    contexts: dict[str, list[tuple[int, float]]] = {}
    for qid, rows in delivered.items():
        for row in rows:
            contexts.setdefault(qid, []).append((len(chunks), float(row["score"])))
            chunks.append(Chunk(str(row["doc"]), 0, int(row["start"]), int(row["end"]), "", 0))
    scores = score_contexts(golden, contexts, chunks, corpus, cutoffs)
    kept = [c for c in scores.frame.columns if not c.startswith(NOT_FROM_DELIVERED)]
    return replace(scores, frame=scores.frame[kept])


def _scored_again(name: str, context: bool) -> bool:
    """Whether the metric `name` is a value of the scoring that `rescored` does again (the context
    metrics only with `context`): a mean, per type or source, abstention, a member's means."""
    if CONTEXT in name and not context:
        return False
    declared = measure_of(name)
    return name.startswith((*SCORED, CONTEXT)) or (declared is not None and not is_cost(name))


def rescored(
    record: TrialRecord, golden: GoldenSet, condensed: bool | None = None, corpus: Corpus | None = None
) -> TrialRecord:
    """`record` (read with its results; with its delivered chunks for the context metrics) scored
    again on the questions of `golden` (`answered`: those it was asked), as the trial scored it
    (module doc), condensed or not as the run was for `condensed=None`. Its metrics and tables are
    replaced; the rest (name, config, run id, status, params, tags, digests, costs) is kept, and
    `golden` and `corpus` become what it was scored on. With `corpus` (the run's) and delivered
    chunks, the context metrics are scored again; else the record's are kept. A hybrid's members'
    own means are not (their candidates are chunks; members are left out)."""
    if condensed is None:
        condensed = scored_condensed(record)
    evaluation = score(golden, record.results, condensed=condensed)
    with_context = corpus is not None and record.delivered_chunks is not None
    if with_context:
        evaluation = evaluation.with_context(
            delivered_context(golden, record.delivered_chunks, corpus, context_cutoffs(record))
        )
    kept = {name: value for name, value in record.metrics.items() if not _scored_again(name, with_context)}
    again = trial_record(
        record.name, record.config, record.overrides, record.choices,
        evaluation=evaluation, calibration=calibrate(evaluation, record.params.get(CALIBRATE_ON_PARAM, "recall_at_5")),
        golden=golden, corpus=corpus, delivered_chunks=record.delivered_chunks or {}, parts={}, stats=kept,
    )  # fmt: skip
    return replace(
        again, run_id=record.run_id, status=record.status, tags=record.tags, params=record.params,
        digests=record.digests, delivered_chunks=record.delivered_chunks,
    )  # fmt: skip
