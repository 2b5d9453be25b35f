"""One trial's results as one typed value: everything a configuration produced, stored and read back whole.

A `TrialRecord` is what `sweep.experiment.trial` makes of one configuration and what
`sweep.tracking.records` saves as one MLflow run (`save_record`) and reads back (`load_record`):
the resolved config and the command line that gave it, what it was scored on (golden set and
corpus, by digest), every number it measured (`metrics`: means, per type and per source,
abstention, calibration, timings, latency, costs, its parts' means), its tables (per question, per
type, worst questions, worst context, the abstention curve), the ranked run, the chunks each
question was given, and its parts (a composite retriever's members, each with its own means and
the candidates it gave). The leaderboard, `sweep.compare`, `sweep.check`, `sweep.pool` and the
sweep's report read records, never MLflow.

A record read back carries the store's word on it too (`run_id`, `status`, `tags`, `params`); its
heavier parts (`results`, `delivered_chunks`, `parts`' hits) are read only when asked for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from sweep.formats.golden import doc_grades

if TYPE_CHECKING:
    from sweep.evaluation.abstention import Calibration
    from sweep.evaluation.scoring import Evaluation
    from sweep.formats.corpus import Corpus
    from sweep.formats.golden import GoldenSet
    from sweep.formats.runs import Run

GOLDEN_DIGEST = "data.golden_digest"  # the tags that say what a record was scored on (`sweep.tracking.digests`)
CORPUS_DIGEST = "data.corpus_digest"
GOLDEN_DIGEST_IN_FILE_ORDER = "data.golden_digest_in_file_order"  # a run's golden digest as runs before took it
WORST = 10  # questions in the worst-questions tables
# table name -> what it holds, in the order a run's artifacts list them
TABLES = {
    "per_query": "one row per scored question: its type, question text and every metric",
    "per_type": "means per question type",
    "per_source": "means per question source (human, synthetic), once a question is not a person's",
    "worst_queries": "the questions the headline metric scores lowest, with what they retrieved",
    "worst_context": "the questions whose top chunks deliver the least of their evidence",
    "abstention_curve": "the abstention trade-off over the minimum top score",
}


@dataclass(frozen=True)
class Part:
    """One part of a composite retriever (a hybrid's member): its own means over the golden set and
    every candidate it gave, `{qid: [[doc, start, end, score], ...]}` (None until read back)."""

    metrics: dict[str, float]
    hits: dict[str, list[list[Any]]] | None = None


@dataclass(frozen=True)
class TrialRecord:
    """Everything one trial produced (see the module's doc)."""

    name: str  # the run's name: its overrides, or "default"
    config: dict[str, Any]  # the resolved config
    overrides: tuple[str, ...] = ()  # the command line that gave it
    choices: dict[str, str] = field(default_factory=dict)  # each config group's chosen option
    metrics: dict[str, float] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # `TABLES`' names
    results: Run | None = None  # the ranked run, as trec_eval reads it
    delivered_chunks: dict[str, list[dict[str, Any]]] | None = None  # each question's top chunks, best first
    parts: dict[str, Part] = field(default_factory=dict)
    calibrated_on: str | None = None  # the metric the abstention curve follows, when there is a curve
    golden: GoldenSet | None = None  # what it was scored on; None when read back (`digests` say which)
    corpus: Corpus | None = None
    digests: dict[str, str] = field(default_factory=dict)  # the tags above, when read back
    # the store's word on a record read back
    run_id: str = ""
    status: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)

    @property
    def command_line(self) -> str:
        """Its overrides as one line: as its run's `sweep.overrides` tag has them, when read back."""
        return self.tags.get("sweep.overrides", " ".join(self.overrides))

    @property
    def label(self) -> str:
        """How people tell it from its sweep's other configurations: its overrides, else its name."""
        return self.command_line or self.name

    @property
    def per_query(self) -> pd.DataFrame | None:
        return self.tables.get("per_query")

    @property
    def golden_digest(self) -> str | None:
        return self.digests.get(GOLDEN_DIGEST)

    @property
    def corpus_digest(self) -> str | None:
        return self.digests.get(CORPUS_DIGEST)

    @property
    def is_finished(self) -> bool:
        return self.status == "FINISHED"


def trial_record(
    name: str,
    config: Mapping[str, Any],
    overrides: Sequence[str],
    choices: Mapping[str, str],
    *,
    evaluation: Evaluation,
    calibration: Calibration | None,
    golden: GoldenSet,
    corpus: Corpus,
    delivered_chunks: Mapping[str, list[dict[str, Any]]],
    parts: Mapping[str, Part],
    stats: Mapping[str, float],
) -> TrialRecord:
    """The record of a trial that scored `evaluation` (its run) on `golden` (the whole set, with
    the questions pending review that the scoring left out) and `corpus`: the means, per type and
    per source, the calibration's and `stats` (times, latency, costs) as metrics; the tables a
    person reads first."""
    by_source = evaluation.source_means()
    metrics = dict(stats) | evaluation.mean | evaluation.type_means() | by_source
    for name_, part in parts.items():
        metrics |= {f"member/{name_}/{metric}": value for metric, value in part.metrics.items()}
    tables = evaluation_tables(evaluation, per_source=bool(by_source))
    if calibration is not None:
        metrics["abstain/suggested_min_score"] = calibration.suggested
        metrics |= {f"abstain/at_suggested/{metric}": value for metric, value in calibration.at_suggested.items()}
        # the -inf row abstains exactly as the lowest observed score does, and JSON has no -inf
        tables["abstention_curve"] = calibration.curve[calibration.curve["threshold"].map(math.isfinite)]
    return TrialRecord(
        name=name,
        config=dict(config),
        overrides=tuple(overrides),
        choices=dict(choices),
        metrics=metrics,
        tables=tables,
        results=evaluation.run,
        delivered_chunks=dict(delivered_chunks),
        parts=dict(parts),
        calibrated_on=calibration.metric if calibration is not None else None,
        golden=golden,
        corpus=corpus,
    )


def evaluation_tables(evaluation: Evaluation, per_source: bool, worst: int = WORST) -> dict[str, pd.DataFrame]:
    """Per question (with its text), per type, per source (`per_source`: the questions come from
    more than one), the worst questions and the worst context, as flat tables (`TABLES`)."""
    per_query = evaluation.per_query.reset_index()
    per_query.insert(2, "question", [evaluation.golden.by_id[q].question for q in per_query["qid"]])
    worst_table = evaluation.worst(worst).reset_index()
    worst_table["relevant"] = worst_table["relevant"].map(doc_grades)
    worst_table["retrieved"] = worst_table["retrieved"].map(doc_grades)
    tables = {"per_query": per_query, "per_type": evaluation.by("type").reset_index()}
    if per_source:
        tables["per_source"] = evaluation.by("source").reset_index()
    tables["worst_queries"] = worst_table
    if evaluation.context is not None and len(evaluation.context.frame):
        tables["worst_context"] = evaluation.worst_context(worst).reset_index()
    return tables
