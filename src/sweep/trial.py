"""One configuration, end to end: load → pipeline → score → calibrate → log.

    from sweep.trial import run_trial
    trial = run_trial(cfg)            # cfg: the composed config (conf/config.yaml)

Every trial is one MLflow run (`sweep.tracking`); whatever goes wrong inside it is recorded on
that run before it goes on up. Nothing here knows about Hydra's command line (`sweep.cli`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from sweep import tracking
from sweep.corpus import ID_SCHEMES, Corpus, load_corpus
from sweep.golden import GoldenSet, load_golden
from sweep.metrics import DEFAULT_METRICS, Evaluation, score
from sweep.metrics.abstention import Calibration, calibrate
from sweep.metrics.context import DEFAULT_CUTOFFS, score_contexts
from sweep.pipeline import Pipeline
from sweep.settings import Cutoffs, Exists, NonEmpty, OneOf, Range, check_config

log = logging.getLogger(__name__)
METRIC = OneOf(DEFAULT_METRICS)


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


@dataclass
class ContextSettings:
    k: Annotated[list[int], Cutoffs()] = field(default_factory=lambda: list(DEFAULT_CUTOFFS))  # chunks per question


@dataclass
class Settings:
    """The top-level settings of conf/config.yaml; the groups' settings are their classes'."""

    chunk: int = 200  # checked where it is used: chunking.size
    objective: Annotated[str, METRIC] = "ndcg_at_10"
    depth: Annotated[int, Range(1, 100_000)] = 100
    chunk_depth: Annotated[int, Range(1, 1_000_000)] = 400
    abstain: AbstainSettings = field(default_factory=AbstainSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    golden: GoldenSettings | None = None
    experiment: Annotated[str, NonEmpty()] = "golden-sweep"
    cache_dir: Annotated[str, NonEmpty()] = ".cache/golden-sweep"


@dataclass(frozen=True)
class Trial:
    mlflow_run: tracking.RunIds
    evaluation: Evaluation
    calibration: Calibration | None  # None: the golden set has no unanswerable (or no answerable) question
    objective: float  # the mean of the config's `objective` metric


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
    )


def load_data(cfg: DictConfig) -> tuple[Corpus, GoldenSet]:
    """The corpus and the golden set `cfg.golden` names, the evidence resolved against the corpus."""
    corpus = load_corpus(cfg.golden.corpus, ids=cfg.golden.corpus_ids)
    return corpus, load_golden(cfg.golden.path, corpus, split=cfg.golden.split)


def check_settings(cfg: DictConfig) -> None:
    """Every value before any work: one line naming the first bad one."""
    check_config(cfg, Settings)


def warn_about_costly_settings(cfg: DictConfig) -> None:
    """Values that are allowed but quietly cost quality or time."""
    if cfg.chunk_depth < cfg.depth:
        log.warning(
            "chunk_depth=%d is smaller than depth=%d: at most %d documents can be ranked, so metrics at deeper cutoffs are capped",
            cfg.chunk_depth, cfg.depth, cfg.chunk_depth,
        )  # fmt: skip
    nprobe, nlist = OmegaConf.select(cfg, "model.index.nprobe"), OmegaConf.select(cfg, "model.index.nlist")
    if nprobe is not None and nlist is not None and nprobe > nlist:
        log.warning("index.nprobe=%d is larger than index.nlist=%d: it searches all %d lists", nprobe, nlist, nlist)
    candidates = OmegaConf.select(cfg, "reranker.candidates")
    if candidates is not None and candidates > cfg.chunk_depth:
        log.warning("reranker.candidates=%d: only chunk_depth=%d hits reach the reranker", candidates, cfg.chunk_depth)


def run_trial(cfg: DictConfig, choices: Mapping[str, str] | None = None, overrides: Sequence[str] = ()) -> Trial:
    """Evaluate the configuration `cfg` and log it as an MLflow run. `choices`: each config
    group's chosen option (logged as params); `overrides`: the command line that gave `cfg`."""
    name = " ".join(overrides) or "default"
    with tracking.trial_run(cfg.experiment, name) as mlflow_run:
        check_settings(cfg)
        warn_about_costly_settings(cfg)
        tracking.log_config(OmegaConf.to_container(cfg, resolve=True), overrides, choices or {})
        pipeline = build_pipeline(cfg)  # cheap: models load when the pipeline first needs them
        corpus, golden = load_data(cfg)
        tracking.log_golden_input(golden, corpus)
        retrieval = pipeline.retrieve(corpus, golden, name=name)
        start = time.perf_counter()
        evaluation = score(golden, retrieval.results)
        metrics_s, start = time.perf_counter() - start, time.perf_counter()
        context = score_contexts(golden, retrieval.contexts, retrieval.chunks, corpus, cfg.context.k)
        evaluation = evaluation.with_context(context)
        timings = {"time/metrics_s": metrics_s, "time/context_metrics_s": time.perf_counter() - start}
        tracking.log_stats(retrieval.stats | timings)
        tracking.log_evaluation(evaluation)
        tracking.log_plots(evaluation)
        calibration = calibrate(evaluation, cfg.abstain.calibrate_on)
        if calibration is not None:
            tracking.log_calibration(calibration)
        tracking.log_results(retrieval.results)
        tracking.log_delivered_chunks(retrieval.delivered_chunks())
    return Trial(mlflow_run, evaluation, calibration, evaluation.mean[cfg.objective])
