"""One configuration, end to end: load → pipeline → score → calibrate → log.

    from sweep.experiment.trial import run_trial
    trial = run_trial(cfg)            # cfg: the composed config (conf/config.yaml)

Every trial is one record (`sweep.evaluation.record`), saved as one MLflow run
(`sweep.tracking.records`); whatever goes wrong inside it is recorded on
that run before it goes on up. Nothing here knows about Hydra's command line (`sweep.experiment.cli`).

`resume=true` in a sweep: a combination with a FINISHED run among the sweep's children, tagged
with the same config digest (or with the one a run logged before the subpackages has: its
`_target_` paths were others, `sweep.tracking.legacy`) and scored on the same corpus and golden
set (their digests cover every byte the scoring reads: `sweep.tracking.digests`), is not run
again; its run and objective stand for it. Only that check loads the data before the run starts;
an earlier run of the combination that did not finish (or was scored on other data) is marked
superseded by the new one.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from sweep.evaluation import DEFAULT_METRICS, Evaluation, score
from sweep.evaluation.abstention import Calibration, calibrate
from sweep.evaluation.context import DEFAULT_CUTOFFS, score_contexts
from sweep.evaluation.latency import TABLE as LATENCY_TABLE
from sweep.evaluation.latency import latency_table
from sweep.evaluation.record import Part, TrialRecord, trial_record
from sweep.formats.corpus import ID_SCHEMES, Corpus, load_corpus
from sweep.formats.drift import changed_documents
from sweep.formats.golden import GoldenSet, load_golden
from sweep.formats.provenance import REVIEWED
from sweep.reporting.logs import VERBOSITY
from sweep.reporting.plots import close_figures, trial_figures
from sweep.retrieval.pipeline import Pipeline
from sweep.retrieval.stages import reuse_in_this_process
from sweep.settings import Cutoffs, Exists, NonEmpty, OneOf, Range, check_config
from sweep.tracking.digests import scored_on
from sweep.tracking.lifecycle import PARENT_RUN, RunIds, trial_run
from sweep.tracking.reading import WORKING_FOLDER, LoggedRun
from sweep.tracking.records import metric_key, save_record
from sweep.tracking.store import CONFIG_DIGEST
from sweep.tracking.sweeps import config_digests, earlier_runs, supersede

log = logging.getLogger(__name__)
METRIC = OneOf(DEFAULT_METRICS)
RESUME = "resume"  # how a sweep is run, not what it measures: left out of run names, overrides tags and digests
VERBOSITY_KEY = "verbosity"  # what the console shows: left out like `resume`
HOW_IT_RUNS = (RESUME, VERBOSITY_KEY)
NO_RESULT_KEYS = (RESUME, "cache_dir")  # settings that change no measurement (nor do values that refer to them)
WARNINGS_PAGE = "docs/commands.md#warnings"  # where each warning of a run is explained
IGNORES_FILTERS = "sweep.retrieval.filters.NoFilter"  # `filter=none`: the questions' filters change no measurement
SCORED = (REVIEWED, "all")  # `golden.status`: the questions a run scores


@dataclass
class AbstainSettings:
    min_score: float | None = None  # return nothing when the top score is below this
    calibrate_on: Annotated[str, METRIC] = "recall_at_5"  # the metric shown along the abstention curve


@dataclass
class GoldenSettings:
    path: Annotated[str, Exists()]  # questions: JSONL, YAML, TREC qrels, a BEIR or chunking-benchmark folder
    corpus: Annotated[str, Exists()]  # documents: JSONL, a BEIR folder or a folder of .md/.txt/.html/.pdf
    split: Annotated[str, NonEmpty()] = "test"  # a BEIR folder's qrels/<split>.tsv
    corpus_ids: Annotated[str, OneOf(ID_SCHEMES)] = "path"  # a folder's document ids: relative path or file stem
    ignore_identical_ids: bool = False  # drop a retrieved document whose id is the question's (BEIR: ArguAna, Quora)
    condensed: bool = False  # score each ranking without its unjudged documents (trec_eval -J)
    status: Annotated[str, OneOf(SCORED)] = REVIEWED  # reviewed: questions pending review are not scored; all: they are


@dataclass
class ContextSettings:
    k: Annotated[list[int], Cutoffs()] = field(default_factory=lambda: list(DEFAULT_CUTOFFS))  # chunks per question


@dataclass
class JudgedSettings:
    floor: Annotated[float, Range(0, 1)] = 0.5  # warn when answerable questions' judged_at_10 is below this


@dataclass
class Settings:
    """The top-level settings of conf/config.yaml; the groups' settings are their classes'."""

    chunk: int = 200  # checked where it is used: chunking.size
    objective: Annotated[str, METRIC] = "ndcg_at_10"
    depth: Annotated[int, Range(1, 100_000)] = 100
    chunk_depth: Annotated[int, Range(1, 1_000_000)] = 400
    abstain: AbstainSettings = field(default_factory=AbstainSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    judged: JudgedSettings = field(default_factory=JudgedSettings)
    golden: GoldenSettings | None = None
    experiment: Annotated[str, NonEmpty()] = "golden-sweep"
    cache_dir: Annotated[str, NonEmpty()] = ".cache/golden-sweep"
    resume: bool = False  # a sweep skips the combinations that finished in its last, unfinished run
    verbosity: Annotated[str, VERBOSITY] = "normal"  # the console: quiet, normal, verbose (-q, -v)


@dataclass(frozen=True)
class Trial:
    mlflow_run: RunIds
    evaluation: Evaluation | None  # None: a resumed sweep's combination that had finished (its earlier run)
    calibration: Calibration | None  # None: the golden set has no unanswerable (or no answerable) question
    objective: float  # the mean of the config's `objective` metric
    stats: dict[str, float] = field(default_factory=dict)  # what the pipeline measured (times, latency, sizes)
    seconds: float = math.nan  # the whole trial, loading and logging included
    record: TrialRecord | None = None  # None: a resumed sweep's combination that had finished


def build_pipeline(cfg: DictConfig) -> Pipeline:
    """Every component from its config group; the retriever (`model`) composes its own parts."""
    return Pipeline(
        chunker=instantiate(cfg.chunking),
        retriever=instantiate(cfg.model),
        filter=instantiate(cfg.filter, _convert_="all"),  # plain dicts and lists for the filter values
        reranker=instantiate(cfg.reranker),
        depth=cfg.depth,
        chunk_depth=cfg.chunk_depth,
        context_depth=max(cfg.context.k),
        min_score=cfg.abstain.min_score,
        ignore_identical_ids=bool(OmegaConf.select(cfg, "golden.ignore_identical_ids", default=False)),
    )


def load_data(cfg: DictConfig) -> tuple[Corpus, GoldenSet]:
    """The corpus and the golden set `cfg.golden` names, the evidence resolved against the corpus;
    with `golden.status=all`, its questions pending review counted as reviewed (scored, and in its digest)."""
    corpus = load_corpus(cfg.golden.corpus, ids=cfg.golden.corpus_ids)
    golden = load_golden(cfg.golden.path, corpus, split=cfg.golden.split)
    warn_about_drift(golden, corpus)
    pending_scored = OmegaConf.select(cfg, "golden.status", default=REVIEWED) != REVIEWED
    return corpus, golden.all_reviewed() if pending_scored else golden


def warn_about_drift(golden: GoldenSet, corpus: Corpus) -> None:
    """One warning, with the count, when documents were edited since the golden set graded them
    (a judgment's digest is not the document's now; `sweep.formats.drift`): those grades may be stale."""
    changed = changed_documents(golden, corpus)
    if changed:
        documents = len({c["document"] for c in changed})
        log.warning(
            "%s: %d judgments grade %d documents whose text changed since they were graded: their grades may be "
            "stale; python -m sweep.golden check %s --corpus %s lists them; see docs/versions.md#drift",
            golden.source, len(changed), documents, golden.source, corpus.source,
            extra={"once": "drift"},
        )  # fmt: skip


def combination_digests(cfg: DictConfig) -> list[str]:
    """`config_digests` of `cfg` with the settings that change no measurement set aside
    (`NO_RESULT_KEYS`, also where other values refer to them, as the cache's folder): its digest,
    then the one a run logged before the subpackages was tagged with; none when `cfg` cannot be
    resolved (the run records why)."""
    measured = cfg.copy()
    try:
        with open_dict(measured):
            for key in NO_RESULT_KEYS:
                measured[key] = None
            measured.pop(VERBOSITY_KEY, None)  # newer than the digests: left out, so that older runs' still match
        return config_digests(OmegaConf.to_container(measured, resolve=True))
    except OmegaConfBaseException:
        return []


def finished_on_the_same_data(
    cfg: DictConfig, earlier: Sequence[LoggedRun]
) -> tuple[tuple[Corpus, GoldenSet] | None, LoggedRun | None]:
    """The data `cfg` names, loaded, and the first of the `earlier` runs that FINISHED on the
    same corpus and golden set (by their digests, `scored_on`), or None."""
    try:
        corpus, golden = load_data(cfg)
    except Exception:  # nothing to compare with: the run loads the data again and records why it cannot
        return None, None
    reads_filters = OmegaConf.select(cfg, "filter._target_") != IGNORES_FILTERS
    same_data = (r for r in earlier if r.status == "FINISHED" and scored_on(r.tags, golden, corpus, reads_filters))
    return (corpus, golden), next(same_data, None)


def check_settings(cfg: DictConfig) -> None:
    """Every value before any work: one line naming the first bad one."""
    check_config(cfg, Settings)


def warn_about_costly_settings(cfg: DictConfig) -> None:
    """Values that are allowed but quietly cost quality or time."""
    if cfg.chunk_depth < cfg.depth:
        log.warning(
            "chunk_depth=%d is smaller than depth=%d: at most %d documents can be ranked, so metrics at deeper cutoffs "
            "are capped; see %s", cfg.chunk_depth, cfg.depth, cfg.chunk_depth, WARNINGS_PAGE,
        )  # fmt: skip
    nprobe, nlist = OmegaConf.select(cfg, "model.index.nprobe"), OmegaConf.select(cfg, "model.index.nlist")
    if nprobe is not None and nlist is not None and nprobe > nlist:
        log.warning(
            "index.nprobe=%d is larger than index.nlist=%d: it searches all %d lists, as slowly as a flat index; see %s",
            nprobe, nlist, nlist, WARNINGS_PAGE,
        )  # fmt: skip
    candidates = OmegaConf.select(cfg, "reranker.candidates")
    if candidates is not None and candidates > cfg.chunk_depth:
        log.warning(
            "reranker.candidates=%d: only chunk_depth=%d hits reach the reranker; see %s",
            candidates, cfg.chunk_depth, WARNINGS_PAGE,
        )  # fmt: skip
    capped = OmegaConf.select(cfg, "model.candidates") if OmegaConf.select(cfg, "model.members") else None
    if capped is not None and capped < cfg.chunk_depth:
        log.warning(
            "model.candidates=%d is smaller than chunk_depth=%d: each member hands the fusion at most %d chunk hits, "
            "fewer than it returns alone, so weight 0 or 1 is not the other member alone and deeper metrics are capped "
            "(null, the default, takes chunk_depth); see %s", capped, cfg.chunk_depth, capped, WARNINGS_PAGE,
        )  # fmt: skip


def warn_about_holes(evaluation: Evaluation, floor: float, metric: str = "judged_at_10") -> None:
    """Questions whose top documents are mostly unjudged: their metrics count those documents as
    irrelevant, so they may undercount this configuration (holes in the golden set)."""
    if metric not in evaluation.per_query.columns:
        return
    values = evaluation.answerable[metric].dropna()
    below = int((values < floor).sum())
    if below:
        log.warning(
            "%d of %d answerable questions have %s below %g: most of their top documents were never judged and "
            "count as irrelevant, so the metrics may undercount; pool and label them (python -m sweep.pool, "
            "python -m sweep.label); see %s",
            below, len(values), metric, floor, WARNINGS_PAGE, extra={"once": "holes"},
        )  # fmt: skip


def run_trial(
    cfg: DictConfig, choices: Mapping[str, str] | None = None, overrides: Sequence[str] = (), name: str = ""
) -> Trial:
    """Evaluate the configuration `cfg` and log it as an MLflow run, or, in a resumed sweep,
    return the run in which it already finished. `choices`: each config group's chosen option
    (logged as params); `overrides`: the command line that gave `cfg`; `name`: the run's (default:
    its overrides, or "default")."""
    began = time.perf_counter()
    name = name or " ".join(overrides) or "default"
    digests = combination_digests(cfg)
    digest = digests[0] if digests else None
    earlier = earlier_runs(digests) if digests and cfg.get(RESUME) is True else []
    data = None
    if any(run.status == "FINISHED" for run in earlier):
        data, done = finished_on_the_same_data(cfg, earlier)
        if done is not None:
            objective = done.metrics.get(metric_key(cfg.objective), math.nan)
            return Trial(RunIds(done.run_id, done.experiment_id), None, None, objective)
    # the folder the config's relative paths (golden.path, cache_dir, ...) are read from: `sweep.best` makes them absolute
    tags = {WORKING_FOLDER: str(Path.cwd())} | ({CONFIG_DIGEST: digest} if digest else {})
    with trial_run(cfg.experiment, name, tags) as mlflow_run:
        supersede(earlier, mlflow_run.run_id)
        check_settings(cfg)
        warn_about_costly_settings(cfg)
        resolved = OmegaConf.to_container(cfg, resolve=True)
        for key in HOW_IT_RUNS:  # how the sweep ran, not what this run measured: the same for all its children
            resolved.pop(key, None)
        configured = TrialRecord(name, resolved, tuple(overrides), dict(choices or {}))
        save_record(configured)  # first the config: a run that fails below still says what it was
        in_a_sweep = bool(os.environ.get(PARENT_RUN))
        if in_a_sweep:  # a sweep's configurations reuse what those before them computed
            reuse_in_this_process()
        pipeline = build_pipeline(cfg)  # cheap: models load when the pipeline first needs them
        if in_a_sweep:  # a sweep times its configurations together at its end (latency_pass)
            pipeline.latency_sample = 0
        corpus, golden = data or load_data(cfg)
        with closing(pipeline.retriever):  # a vector database's collection or table goes, however the run ends
            retrieval = pipeline.retrieve(corpus, golden, name=name)
        condensed = bool(OmegaConf.select(cfg, "golden.condensed", default=False))
        start = time.perf_counter()
        evaluation = score(golden, retrieval.results, condensed=condensed)
        metrics_s, start = time.perf_counter() - start, time.perf_counter()
        context = score_contexts(golden, retrieval.contexts, retrieval.chunks, corpus, cfg.context.k)
        evaluation = evaluation.with_context(context)
        warn_about_holes(evaluation, cfg.judged.floor)
        timings = {"time/metrics_s": metrics_s, "time/context_metrics_s": time.perf_counter() - start}
        calibration = calibrate(evaluation, cfg.abstain.calibrate_on)
        parts = {
            part: Part(score(golden, answers.results, condensed=condensed).mean, answers.hits)
            for part, answers in retrieval.parts.items()
        }
        record = trial_record(
            name, resolved, overrides, choices or {},
            evaluation=evaluation, calibration=calibration, golden=golden, corpus=corpus,
            delivered_chunks=retrieval.delivered_chunks(), parts=parts, stats=retrieval.stats | timings,
        )  # fmt: skip
        if retrieval.latencies:  # each timed question's ms, for the paired tests of latency
            record = replace(record, tables=record.tables | {LATENCY_TABLE: latency_table(retrieval.latencies)})
        figures = trial_figures(record, evaluation.headline)
        try:
            save_record(record, figures, with_config=False)
        finally:
            close_figures(figures)
    stats = retrieval.stats | timings
    return Trial(
        mlflow_run, evaluation, calibration, evaluation.mean[cfg.objective], stats, time.perf_counter() - began, record
    )
