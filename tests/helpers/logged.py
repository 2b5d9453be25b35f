"""Synthetic evaluations logged to a real MLflow store the way the pipeline logs them: exact
control over every question's rank, for compare, check and the leaderboard."""

from __future__ import annotations

from helpers.data import golden_of, ranked
from sweep.evaluation import score
from sweep.evaluation.record import trial_record
from sweep.formats.corpus import Corpus, Document
from sweep.formats.golden import GoldenSet
from sweep.tracking.lifecycle import trial_run
from sweep.tracking.records import save_record

EXPERIMENT = "golden-sweep"

FACTOID = [f"f{i:02d}" for i in range(20)]

HOWTO = [f"h{i:02d}" for i in range(20)]

UNANSWERABLE = ["u0", "u1"]

BROKEN = HOWTO[:8]  # the candidate ranks their relevant document third instead of first


def golden(extra: int = 0) -> GoldenSet:
    relevant = {q: {f"doc-{q}": 1} for q in FACTOID + HOWTO} | {q: {} for q in UNANSWERABLE}
    relevant |= {f"x{i}": {f"doc-x{i}": 1} for i in range(extra)}
    types = {q: "factoid" for q in FACTOID} | {q: "howto" for q in HOWTO} | {q: "unanswerable" for q in UNANSWERABLE}
    return golden_of(relevant, types)


def rankings(golden_set: GoldenSet, third: list[str] = (), abstain: bool = False) -> dict[str, list[str]]:
    """The relevant document first, or third for the questions in `third`; the unanswerable ones
    get a wrong document, or nothing when `abstain`."""
    out = {}
    for q in golden_set:
        if not q.relevant:
            if not abstain:
                out[q.id] = ["noise-1"]
            continue
        [doc] = q.relevant
        out[q.id] = ["noise-1", "noise-2", doc] if q.id in third else [doc, "noise-1", "noise-2"]
    return out


def log_run(
    name: str, golden_set: GoldenSet, results: dict[str, list[str]], *extra: str, costs: dict | None = None
) -> str:
    """One evaluation logged as the pipeline logs it: config, per-query tables, golden digest;
    `extra`: overrides besides `model=<name>`; `costs`: what the pipeline measured (latency ...)."""
    corpus = Corpus(tuple(Document(d, "text") for q in golden_set for d in q.relevant))
    with trial_run(EXPERIMENT, name) as run:
        save_record(scored_record(name, golden_set, corpus, score(golden_set, ranked(results)), *extra, stats=costs))
    return run.run_id


def scored_record(name, golden, corpus, evaluation, *extra: str, stats=None, calibration=None, parts=None):
    """The record a trial of config `{"model": name}` (overrides `model=<name>` and `extra`) makes of `evaluation`."""
    return trial_record(
        name, {"model": name}, [f"model={name}", *extra], {"model": name},
        evaluation=evaluation, calibration=calibration, golden=golden, corpus=corpus,
        delivered_chunks={}, parts=parts or {}, stats=stats or {},
    )  # fmt: skip
