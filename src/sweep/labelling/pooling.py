"""Pooling: the documents several logged runs put in their top ranks that the golden set does not judge yet.

TREC's pooling: for each question of the golden set, the union of the runs' top `depth`
documents (from each run's `run.trec`, ordered as trec_eval orders it), less every document the
golden set already judges at any grade (0 is "judged, not relevant"). Questions marked
unanswerable are pooled too: a pool may show that the corpus answers them after all.
`runs_to_pool` takes the finished children of a sweep (its parent run's id, or `latest`: the
sweep started last in the experiment), or runs named by id.

All runs must be scored on one golden set (tag `data.golden_digest`) and search one corpus
(`data.corpus_digest`). The golden file defaults to the one they were scored on (the source of
their `golden` dataset input), read as it is now: labels added since are left out of the pool,
and questions added since are not pooled (sweep again). The corpus defaults to the runs'
`data.corpus` (an absolute path), which must have their digest: the chunk offsets are offsets
into its documents.

Each candidate's chunk is the document's best chunk in the run that ranked it best (from
`tables/retrieved_chunks.json`; the next-best run's when that one's top chunks hold none of it);
none when no run logged a chunk of the document (runs log their top chunks only). The queue's
format: `sweep.labelling.queue`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.errors import InputError
from sweep.formats.corpus import Corpus, load_corpus
from sweep.formats.golden import GoldenSet, load_golden
from sweep.labelling.queue import Candidate, Header, PooledChunk, write_queue
from sweep.text import listed
from sweep.tracking.digests import CORPUS_DIGEST, scored_corpus
from sweep.tracking.reading import LoggedRun, golden_source, logged_run, sweep_children, sweep_id
from sweep.tracking.records import load_record
from sweep.tracking.store import DEFAULT_EXPERIMENT, connect

SHOWN = 10  # question ids the summary names at most, per line


@dataclass(frozen=True)
class PooledRun:
    """One run's results as pooling needs them."""

    run: LoggedRun
    rankings: dict[str, list[str]]  # qid -> its top-depth documents, best first
    chunks: dict[str, dict[str, dict[str, Any]]]  # qid -> doc -> its best logged chunk


@dataclass(frozen=True)
class Pool:
    """The runs pooled, what they were scored on, and each pooled question's candidates."""

    runs: list[LoggedRun]
    depth: int
    golden: GoldenSet
    corpus: Corpus
    corpus_ids: str
    questions: dict[str, list[Candidate]]  # qid -> candidates, best first
    not_pooled: list[str]  # questions of the golden set the runs did not evaluate

    def header(self) -> Header:
        return Header(
            runs=[{"run_id": r.run_id, "name": r.name, "overrides": r.overrides} for r in self.runs],
            depth=self.depth,
            golden=str(Path(self.golden.source).resolve()),
            golden_digest=self.runs[0].golden_digest,
            corpus=str(Path(self.corpus.source).resolve()),
            corpus_ids=self.corpus_ids,
            corpus_digest=self.corpus.digest,
        )

    def write(self, path: Path) -> None:
        """The queue, atomically: its pooled questions in golden-set order."""
        write_queue(path, self.header(), ((q, self.questions[q.id]) for q in self.golden if q.id in self.questions))

    def summary(self) -> list[str]:
        counts = {qid: len(candidates) for qid, candidates in self.questions.items()}
        total = sum(counts.values())
        lines = [
            f"pooled {len(self.runs)} runs at depth {self.depth} against {self.golden.source} "
            f"({len(self.golden)} questions; documents already judged left out)"
        ]
        lines += [f"  {r.run_id} {r.overrides or r.name}" for r in self.runs]
        if counts and not total:
            lines.append(
                f"candidates: none for {len(counts)} questions: the golden set judges every document "
                f"these runs put in their top {self.depth}"
            )
        elif counts:
            most = max(counts, key=counts.get)
            without = [qid for qid, n in counts.items() if not n]
            lines.append(
                f"candidates: {total} for {len(counts)} questions: mean {statistics.fmean(counts.values()):.1f}, "
                f"median {statistics.median(counts.values()):g}, max {counts[most]} ({most}); "
                f"{len(without)} questions with none" + (f" ({listed(without, SHOWN)})" if without else "")
            )
        if self.not_pooled:
            lines.append(
                f"{len(self.not_pooled)} questions are not in these runs (added since?) and were not pooled: "
                + listed(self.not_pooled, SHOWN)
            )
        return lines


def runs_to_pool(
    sweep: str | None,
    run_ids: Sequence[str],
    experiment: str = DEFAULT_EXPERIMENT,
    skipping: Callable[[LoggedRun], None] = lambda child: None,
) -> list[LoggedRun]:
    """The finished children of sweep `sweep` (`latest`: the one started last in `experiment`;
    `skipping` is called with each of the others first), or the runs `run_ids`, each a finished evaluation."""
    connect(create=False)
    if sweep is not None:
        sweep = sweep_id(sweep, experiment)
        parent = logged_run(sweep)
        if not parent.is_sweep:
            raise InputError(f"--sweep {sweep}: not a sweep's parent run (no sweep.parent tag); pass it as a RUN_ID")
        children = sweep_children(sweep)
        for child in children:
            if child.status != "FINISHED":
                skipping(child)
        runs = [c for c in children if c.status == "FINISHED"]
        if not runs:
            raise InputError(f"sweep {sweep} has no finished run to pool")
        return runs
    runs = [logged_run(run_id) for run_id in dict.fromkeys(run_ids)]
    for run in runs:
        if run.is_sweep:
            raise InputError(f"{run.run_id} is a sweep's parent run: pool its children with --sweep {run.run_id}")
        if run.status != "FINISHED":
            raise InputError(f"run {run.run_id} is {run.status}: it has no results to pool")
    return runs


def check_same_data(runs: Sequence[LoggedRun]) -> None:
    """All runs scored on one golden set and searching one corpus, else an error naming them."""
    for run in runs:
        if not run.golden_digest:
            raise InputError(f"run {run.run_id} has no data.golden_digest tag: not a golden-sweep evaluation")
    for tag, what in (("data.golden_digest", "golden sets"), ("data.corpus_digest", "corpora")):
        groups: dict[str, list[str]] = {}
        for run in runs:
            groups.setdefault(run.tags.get(tag, "none"), []).append(run.run_id)
        if len(groups) > 1:
            named = "; ".join(f"{', '.join(ids)} ({tag} {digest})" for digest, ids in groups.items())
            raise InputError(f"the runs were scored on different {what}: {named}; pool runs of one golden set")


def golden_path(runs: Sequence[LoggedRun], given: str | None) -> Path:
    if given is not None:
        return Path(given)
    source = golden_source(runs[0])
    if source is None:
        raise InputError(f"run {runs[0].run_id} has no golden dataset input: give the golden file with --golden")
    path = Path(source)
    if not path.exists():
        raise InputError(f"{path}: the golden file the runs were scored on is not there any more; give --golden")
    return path


def corpus_of(run: LoggedRun, given: str | None) -> tuple[Corpus, str]:
    """The corpus `run` searched (`scored_corpus`), or `given`, which must have the same content,
    and its id scheme."""
    ids = run.params.get("golden.corpus_ids", "path")
    if given is None:
        try:
            return scored_corpus(run), ids
        except InputError as error:
            raise InputError(f"{error}; give the corpus the runs searched with --corpus") from None
    corpus = load_corpus(given, ids=ids)
    expected = run.tags.get(CORPUS_DIGEST)
    if expected and corpus.digest != expected:
        raise InputError(
            f"{given}: not the corpus the runs searched (digest {corpus.digest[:12]}…, the runs' "
            f"{expected[:12]}…): chunk offsets would not match; give the corpus they used with --corpus"
        )
    return corpus, ids


def read_run(run: LoggedRun, depth: int) -> PooledRun:
    record = load_record(run, per_query=False, results=True, chunks=True)
    rankings = {qid: [doc for doc, _ in hits] for qid, hits in record.results.rankings(depth).items()}
    best_chunks: dict[str, dict[str, dict[str, Any]]] = {}
    for qid, chunks in (record.delivered_chunks or {}).items():
        for chunk in chunks:  # best first: the first of each document is its best
            best_chunks.setdefault(qid, {}).setdefault(chunk["doc"], chunk)
    return PooledRun(run, rankings, best_chunks)


def candidates(qid: str, judged: Mapping[str, int], runs: Sequence[PooledRun], corpus: Corpus) -> list[Candidate]:
    """One question's pooled, unjudged documents, best first."""
    ranks: dict[str, dict[str, int]] = {}
    for pooled in runs:
        for rank, doc in enumerate(pooled.rankings.get(qid, []), start=1):
            if doc not in judged:
                ranks.setdefault(doc, {})[pooled.run.run_id] = rank
    out = []
    for doc, by_run in ranks.items():
        document = corpus.by_id.get(doc)
        if document is None:
            raise InputError(f"run {next(iter(by_run))} retrieved {doc!r} for {qid!r}: not a document of the corpus")
        chunk = best_chunk(qid, doc, by_run, runs, document.content)
        out.append(Candidate(doc, document.title, min(by_run.values()), by_run, chunk))
    return sorted(out, key=lambda c: (c.best_rank, -len(c.ranks), c.doc))


def best_chunk(
    qid: str, doc: str, by_run: Mapping[str, int], runs: Sequence[PooledRun], content: str
) -> PooledChunk | None:
    """The document's best logged chunk in the run that ranked it best (runs in the order given on ties:
    the sort is stable)."""
    for pooled in sorted((p for p in runs if p.run.run_id in by_run), key=lambda p: by_run[p.run.run_id]):
        chunk = pooled.chunks.get(qid, {}).get(doc)
        if chunk is not None:
            start, end = int(chunk["start"]), int(chunk["end"])
            return PooledChunk(pooled.run.run_id, start, end, chunk["score"], content[start:end])
    return None


def build_pool(runs: Sequence[LoggedRun], depth: int, golden: str | None = None, corpus: str | None = None) -> Pool:
    check_same_data(runs)
    loaded_corpus, ids = corpus_of(runs[0], corpus)
    golden_set = load_golden(golden_path(runs, golden), loaded_corpus, warn=False)
    evaluated = set(load_record(runs[0]).per_query["qid"].astype(str))  # one golden digest: the same questions
    pooled = [read_run(run, depth) for run in runs]
    questions = {q.id: candidates(q.id, q.relevant, pooled, loaded_corpus) for q in golden_set if q.id in evaluated}
    not_pooled = [q.id for q in golden_set if q.id not in evaluated]
    return Pool(list(runs), depth, golden_set, loaded_corpus, ids, questions, not_pooled)
