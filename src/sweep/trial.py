"""One configuration, end to end: load → pipeline → score → calibrate → log.

    from sweep.trial import run_trial
    trial = run_trial(cfg)            # cfg: the composed config (conf/config.yaml)

Every trial is one MLflow run (`sweep.tracking`); whatever goes wrong inside it is recorded on
that run before it goes on up. Nothing here knows about Hydra's command line (`sweep.cli`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

from sweep import tracking
from sweep.corpus import load_corpus
from sweep.errors import InputError
from sweep.golden import load_golden
from sweep.metrics import DEFAULT_METRICS, Evaluation, score
from sweep.metrics.abstention import Calibration, calibrate
from sweep.pipeline import Pipeline


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
        min_score=cfg.abstain.min_score,
    )


def resolve(cfg: DictConfig) -> dict[str, Any]:
    """The config with every interpolation resolved; a value left unset is bad input."""
    try:
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except MissingMandatoryValue as error:
        raise InputError(f"{error.full_key} is not set: give it on the command line ({error.full_key}=...)") from None


def check_metric_settings(cfg: DictConfig) -> None:
    for key in ("objective", "abstain.calibrate_on"):
        name = OmegaConf.select(cfg, key)
        if name not in DEFAULT_METRICS:
            raise InputError(f"{key}={name} is not one of the computed metrics: {', '.join(DEFAULT_METRICS)}")


def run_trial(cfg: DictConfig, choices: Mapping[str, str] | None = None, overrides: Sequence[str] = ()) -> Trial:
    """Evaluate the configuration `cfg` and log it as an MLflow run. `choices`: each config
    group's chosen option (logged as params); `overrides`: the command line that gave `cfg`."""
    name = " ".join(overrides) or "default"
    with tracking.trial_run(cfg.experiment, name) as mlflow_run:
        tracking.log_config(resolve(cfg), overrides, choices or {})
        check_metric_settings(cfg)
        corpus = load_corpus(cfg.golden.corpus)
        golden = load_golden(cfg.golden.path, corpus_ids=corpus.by_id, split=cfg.golden.split)
        tracking.log_golden_input(golden, corpus)
        retrieval = build_pipeline(cfg).retrieve(corpus, golden, name=name)
        start = time.perf_counter()
        evaluation = score(golden, retrieval.results)
        tracking.log_stats(retrieval.stats | {"time/metrics_s": time.perf_counter() - start})
        tracking.log_evaluation(evaluation)
        tracking.log_plots(evaluation)
        calibration = calibrate(evaluation, cfg.abstain.calibrate_on)
        if calibration is not None:
            tracking.log_calibration(calibration)
        tracking.log_results(retrieval.results)
    return Trial(mlflow_run, evaluation, calibration, evaluation.mean[cfg.objective])
