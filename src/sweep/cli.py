"""The Hydra app behind `python -m sweep`: one run per configuration, logged to MLflow.

A multirun gets one parent run (`ParentRunCallback`) with every combination as a child; a
combination that fails becomes a FAILED child with its error and the sweep goes on.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mlflow
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from sweep.corpus import load_corpus
from sweep.embed import EmbeddingCache, SentenceTransformerEmbedder
from sweep.errors import InputError
from sweep.golden import load_golden
from sweep.metrics import DEFAULT_METRICS, Evaluation, evaluate
from sweep.metrics.abstention import Calibration, calibrate
from sweep.pipeline import DenseRetriever, Pipeline
from sweep.report import default_console, frame_table, print_calibration, print_evaluation
from sweep.tracking import (
    connect,
    environment_tags,
    flatten,
    log_calibration,
    log_evaluation,
    log_golden_input,
    log_plots,
    use_experiment,
)

log = logging.getLogger("sweep")
PARENT_RUN = "SWEEP_PARENT_RUN_ID"
LEADERBOARD = ("ndcg_at_10", "recall_at_5", "mrr", "abstain/correct_rate", "latency/search_ms_p50")
CONSOLE = default_console()
DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI


def build_pipeline(cfg: DictConfig) -> Pipeline:
    chunker = instantiate(cfg.chunking)
    model = instantiate(cfg.model)
    if isinstance(model, SentenceTransformerEmbedder):
        retriever = DenseRetriever(model, instantiate(cfg.index), EmbeddingCache(cfg.cache_dir), chunker.identity)
    else:
        retriever = model  # lexical models search their own index; `index` does not apply
    return Pipeline(
        chunker,
        retriever,
        filter=instantiate(cfg.filter, _convert_="all"),  # plain dicts and lists for the filter values
        reranker=instantiate(cfg.reranker),
        depth=cfg.depth,
        chunk_depth=cfg.chunk_depth,
        min_score=cfg.abstain.min_score,
    )


def overrides() -> list[str]:
    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def run(cfg: DictConfig) -> dict[str, float]:
    """Evaluate one configuration and log it as an MLflow run; the headline metrics."""
    connect(tracking_uri())
    use_experiment(cfg.experiment)
    parent = os.environ.get(PARENT_RUN)
    name = " ".join(overrides()) or "default"
    with mlflow.start_run(run_name=name, parent_run_id=parent, nested=parent is not None) as active:
        try:
            evaluation, calibration = _evaluate_and_log(cfg, name)
        except Exception as error:  # leaving the block marks the run FAILED; say why
            mlflow.set_tag("error", f"{type(error).__name__}: {error}")
            raise
    if is_multirun():
        headline = ", ".join(f"{k} {evaluation.mean[k]:.4f}" for k in LEADERBOARD if k in evaluation.mean)
        log.info("%s: %s", name, headline)
    else:
        print_evaluation(evaluation, console=CONSOLE)
        if calibration is not None:
            print_calibration(calibration, console=CONSOLE)
        print_ui_hint(active.info.experiment_id)
    return evaluation.mean


def print_ui_hint(experiment_id: str) -> None:
    uri = tracking_uri()
    if uri.startswith("sqlite:"):
        CONSOLE.print(f"Compare runs: mlflow ui --backend-store-uri {uri}", soft_wrap=True)
        base = "http://127.0.0.1:5000"
    else:
        base = uri.rstrip("/")
    # 3.17's UI opens an experiment in GenAI mode, which lists no runs, unless told otherwise
    CONSOLE.print(f"Runs view: {base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning", soft_wrap=True)


def _evaluate_and_log(cfg: DictConfig, name: str) -> tuple[Evaluation, Calibration | None]:
    if cfg.abstain.calibrate_on not in DEFAULT_METRICS:
        raise InputError(f"abstain.calibrate_on={cfg.abstain.calibrate_on} is not one of the computed metrics: {', '.join(DEFAULT_METRICS)}")
    resolved = OmegaConf.to_container(cfg, resolve=True)
    mlflow.log_params(flatten(resolved))
    mlflow.log_dict(resolved, "config/resolved.yaml")
    mlflow.log_dict({"overrides": overrides()}, "config/overrides.yaml")
    mlflow.set_tags(environment_tags() | {"sweep.overrides": name})

    corpus = load_corpus(cfg.golden.corpus)
    golden = load_golden(cfg.golden.path, corpus_ids=corpus.by_id, split=cfg.golden.split)
    log_golden_input(golden, corpus)
    result = build_pipeline(cfg).run(corpus, golden, name=name)
    start = time.perf_counter()
    evaluation = evaluate(golden, result.run)
    metrics_s = time.perf_counter() - start
    mlflow.log_metrics(result.timings | {"time/metrics_s": metrics_s})
    log_evaluation(evaluation)
    log_plots(evaluation)
    calibration = calibrate(evaluation, cfg.abstain.calibrate_on)
    if calibration is not None:  # None: the golden set has no unanswerable (or no answerable) question
        log_calibration(calibration)
    with tempfile.TemporaryDirectory() as folder:
        result.run.to_trec(Path(folder) / "run.trec")
        mlflow.log_artifact(str(Path(folder) / "run.trec"))
    return evaluation, calibration


class ParentRunCallback(Callback):
    """Opens the parent run before the first combination and closes it after the last."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            connect(tracking_uri())
        except InputError as error:  # before any combination runs: nothing is lost
            print(f"error: {error}", file=sys.stderr)
            raise SystemExit(2) from None
        use_experiment(config.experiment)
        parent = mlflow.start_run(run_name=f"sweep {' '.join(config.hydra.overrides.task)}")
        mlflow.set_tags({"sweep.parent": "true", "sweep.overrides": " ".join(config.hydra.overrides.task)})
        os.environ[PARENT_RUN] = parent.info.run_id

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        parent_id = os.environ.pop(PARENT_RUN, None)
        if parent_id is None:
            return
        children = mlflow.search_runs(filter_string=f"tags.mlflow.parentRunId = '{parent_id}'")
        if len(children):
            columns = [c for c in children.columns if c.startswith("metrics.") and not c.startswith("metrics.type/")]
            columns.append("status")
            leaderboard = children.set_index("tags.sweep.overrides")[columns].reset_index()
            mlflow.log_table(leaderboard, "tables/leaderboard.json", run_id=parent_id)
            shown = leaderboard.rename(columns=lambda c: c.removeprefix("metrics.")).set_index("tags.sweep.overrides")
            shown = shown[[c for c in (*LEADERBOARD, "status") if c in shown.columns]]
            if LEADERBOARD[0] in shown.columns:  # absent when every combination failed
                shown = shown.sort_values(LEADERBOARD[0], ascending=False)
            CONSOLE.print(frame_table(shown, "Leaderboard", "overrides"))
        experiment_id = mlflow.active_run().info.experiment_id
        mlflow.end_run()
        print_ui_hint(experiment_id)


def is_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def safe_run(cfg: DictConfig) -> dict[str, float] | None:
    """`run`; a failed combination of a multirun is logged (FAILED run, `error` tag) and the
    sweep goes on; a single run with bad input exits with code 2 and a one-line error."""
    try:
        return run(cfg)
    except Exception as error:
        cause = error.__cause__ if isinstance(error, InstantiationException) else error
        if isinstance(cause, InputError):
            log.error("%s", cause)  # the job's log file
            print(f"error: {cause}", file=sys.stderr)
        elif is_multirun():
            log.exception("this combination failed; the sweep goes on")
        else:
            raise
        if is_multirun():
            return None
        raise SystemExit(2) from None
