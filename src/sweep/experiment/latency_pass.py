"""A sweep's latency pass: its finished configurations timed together, question by question, at its end.

One measurement per run, each at its own moment, compares the load of those moments as much as
the configurations. So a sweep's trials time nothing (`Pipeline.latency_sample` 0), and once the
last one has finished, the sweep's own process times them all in one interleaved pass: for each
question of one seeded sample (`latency_sample`, `SAMPLE` questions), every configuration answers
it in turn, alone under the clock (`Pipeline.time_alone`: its own encode, filter, search, rerank),
in an order drawn afresh for each question, so that none always goes first, last or after the same one.
Load that comes and goes then hits every configuration alike, and a paired test over the
questions (`sweep.evaluation.latency`) tells which differences are real.

Each configuration is built again here from the resolved config its run logged (its `_target_`s
as they read now), whichever launcher ran it (joblib's or Ray's workers) and whichever process
(a resumed sweep's earlier ones): its chunks, its retriever (vectors from the embedding cache, a
model loaded once per process), its reranker, then one batch over the sample, untimed, which warms
it. A vector database's collection or table is removed at the end (`closing`). A remote embedding
endpoint's one-question time counts as a single run counts it (`Retriever.replayed_ms`). Runs that
did not finish, and configurations that cannot be built again here (one line each), are left out;
if the timing itself fails, one line says so and the sweep closes without latency. A sweep stopped
by a signal closes without the pass; resumed (`resume=true`), its pass times every finished run.
On PyTorch's one thread (`one_torch_thread`), as a single run is timed.

Cost: the bundled golden set's hybrid takes about 19 ms a question, plus about a tenth of a second
to build it again from the cache and warm it. So that a sweep of many configurations does not pay
for its pass what it saved by sharing its work, the pass times `TIMINGS` answers in all, shared out
among the configurations (`questions_each`): `SAMPLE` = 100 questions each for up to two, 60 each
for four, 21 each for an 11-weight sweep, never fewer than `MIN_SAMPLE` (enough for a paired test
over questions to find a difference of the size a reranker or an encoder makes). Each
configuration's times go into its run (`log_latencies`: `tables/latency.json`,
`latency/search_ms_p50`, `_p95`, `_p99`, the p50's interval, `latency/questions`), before the
leaderboard reads them.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from contextlib import ExitStack, closing
from dataclasses import dataclass, field, replace

import numpy as np
from omegaconf import OmegaConf

from sweep.errors import one_line
from sweep.evaluation.latency import INTERVAL, median_interval
from sweep.experiment.heap import settle
from sweep.experiment.trial import build_pipeline, load_data
from sweep.formats.corpus import Corpus
from sweep.formats.golden import GoldenSet, Question
from sweep.progress import progress_bar
from sweep.retrieval.pipeline import latency_sample, latency_stats, one_torch_thread
from sweep.retrieval.retriever import Retriever
from sweep.tracking.latencies import log_latencies
from sweep.tracking.legacy import current_targets
from sweep.tracking.lifecycle import PARENT_RUN
from sweep.tracking.reading import LoggedRun, sweep_children
from sweep.tracking.records import load_record

log = logging.getLogger(__name__)
SAMPLE = 100  # questions each configuration answers under the clock, at most
MIN_SAMPLE = 20  # ... and at least
TIMINGS = 240  # answers timed in all, shared out among the configurations
ORDER_SEED = 0  # the configurations' order for each question is drawn with this seed


@dataclass
class Configuration:
    """One finished run's configuration, built again and ready to answer its sample's questions."""

    run: LoggedRun
    retriever: Retriever
    clock: Callable[[Question], float]  # one question's ms alone (`Pipeline.clock`)
    sample: list[Question]
    ms: dict[str, float] = field(default_factory=dict)  # question id -> its time


def time_sweep(parent_id: str | None = None, sample: int = SAMPLE) -> dict[str, dict[str, float]]:
    """Time the finished runs of the sweep `parent_id` (default: the one open in this process)
    together (module docstring) and log each one's times into it; run id -> question id -> ms."""
    parent_id = parent_id or os.environ.get(PARENT_RUN)
    runs = [run for run in sweep_children(parent_id) if run.status == "FINISHED"] if parent_id else []
    if not runs:
        return {}
    began = time.perf_counter()
    sample = questions_each(len(runs), sample)
    data: dict[str, tuple[Corpus, GoldenSet]] = {}
    try:
        with ExitStack() as built:
            configurations = [c for run in runs if (c := rebuilt(run, data, sample, built)) is not None]
            settle()  # no collection over the whole heap inside a configuration's timing
            interleave(configurations)
    except Exception as error:  # the sweep still closes, with its leaderboard; a signal goes on up
        log.warning("latency: the configurations could not be timed (%s); no latency is logged", one_line(error))
        return {}
    for configuration in configurations:
        ms = list(configuration.ms.values())
        if ms:
            interval = dict(zip(INTERVAL, median_interval(np.array(ms))))
            log_latencies(configuration.run.run_id, configuration.ms, latency_stats(ms) | interval)
    log.info(
        "latency: %d configurations timed together, %d questions each, in %.1f s",
        len(configurations), max((len(c.sample) for c in configurations), default=0), time.perf_counter() - began,
    )  # fmt: skip
    return {c.run.run_id: c.ms for c in configurations}


def questions_each(configurations: int, most: int = SAMPLE) -> int:
    """Questions each of `configurations` answers under the clock: `TIMINGS` shared out among them,
    at least `MIN_SAMPLE` (or `most`, if fewer) and at most `most`."""
    return max(min(MIN_SAMPLE, most), min(most, TIMINGS // max(configurations, 1)))


def rebuilt(
    run: LoggedRun, data: dict[str, tuple[Corpus, GoldenSet]], sample: int, built: ExitStack
) -> Configuration | None:
    """`run`'s configuration built again over its data (`data`: loaded once per golden setting),
    its retriever closed when `built` closes; None, with one line, when it cannot be."""
    try:
        config = load_record(run, per_query=False, config=True).config
        cfg = OmegaConf.create(current_targets(config))
        key = OmegaConf.to_yaml(cfg.golden)
        if key not in data:
            data[key] = load_data(cfg)
        corpus, golden = data[key]
        questions = [golden.questions[i] for i in latency_sample(len(golden), sample)]
        pipeline = build_pipeline(cfg)
        pipeline.latency_sample = 0  # warmed by a batch over the sample, timed below beside the others
        built.enter_context(closing(pipeline.retriever))
        retrieval = pipeline.retrieve(corpus, replace(golden, questions=tuple(questions)), name=run.overrides)
    except Exception as error:
        log.warning("latency: %s is left out of the timing (%s)", run.overrides or run.run_id, one_line(error))
        return None
    return Configuration(run, pipeline.retriever, pipeline.clock(retrieval.chunks), questions)


def interleave(configurations: list[Configuration]) -> None:
    """Question by question, every configuration answers its sample's question in turn, in an order
    drawn afresh for each question (seeded, `ORDER_SEED`): none always goes first, nor always after
    the same one (a configuration timed right after a heavy one, a cross-encoder, found the caches
    it left and was measured slower on a fixed cycle). First one untimed question each (a first
    search pays what the later ones do not). Each retriever searches alone (`Retriever.alone`)."""
    if not configurations:
        return
    with one_torch_thread(), ExitStack() as alone:
        for configuration in configurations:  # each built apart (`rebuilt`): none shares a retriever
            alone.enter_context(configuration.retriever.alone([question.question for question in configuration.sample]))
        for configuration in configurations:
            if configuration.sample:
                configuration.clock(configuration.sample[0])
        rounds = max(len(c.sample) for c in configurations)
        orders = np.random.default_rng(ORDER_SEED)
        for i in progress_bar(range(rounds), desc="timing", unit="question"):
            for j in orders.permutation(len(configurations)):
                configuration = configurations[j]
                if i < len(configuration.sample):
                    question = configuration.sample[i]
                    configuration.ms[question.id] = configuration.clock(question)
