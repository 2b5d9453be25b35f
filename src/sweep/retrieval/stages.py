"""Stage reuse within a process: what one configuration of a sweep computed, kept under keys that
hash its inputs, so that the next configuration recomputes only the stages whose inputs changed.

Hydra's basic launcher runs a sweep's jobs one after another in one process; each job builds its
components afresh from their config. What a job computed stays here, under a sha256 of everything
that decides it, never under an object's identity:

- chunks (`chunked`): the chunker's settings and every document (id, title, text, metadata); the
  share of them an embedder truncates (`truncated_share`): its identity and the chunk texts;
- a retriever's answers (`Reused`): its settings (the whole object before it is built, model
  paths and prompts, index and cache settings included; a hybrid's members are retrievers of their
  own, each reused on its own), the chunk texts and their metadata, the questions with their
  filters, the filter's settings and the depth asked for (`searching`), then each search's query,
  k and allowed chunks. A configuration whose answers are all kept builds nothing: no model is
  loaded, no vector read, nothing encoded or searched; a hybrid with a new weight only fuses its
  members' kept answers. Each answer is the array the retriever returned, so the per-question
  results are those computed afresh, bit for bit;
- a reranker's rerankings (`ReusedReranker`): its settings, the same inputs, then each question
  and the hits it reranks (a sweep over `min_score` or the context's cutoffs reranks nothing again).

Inside a retriever's `alone` (a question's whole path timed) nothing kept is used: all the work is done.

Question vectors are kept on disk beside the corpus's (`sweep.retrieval.dense`), and models stay
loaded for the process (`sweep.retrieval.models`, `sweep.retrieval.rerank`). A value that cannot be
hashed (an object holding a client, a function) makes its stage run as if nothing were kept.

Reuse is on in a sweep's processes (`reuse_in_this_process`, which a sweep's trial calls), off
elsewhere; `SWEEP_REUSE` decides instead where it is set: 0 (off, false, no) computes every stage,
as `python -m sweep` did before, 1 reuses in any process. Memory is bounded: the last `CHUNKINGS`
chunkings and the answers of the last `RETRIEVERS` retrievers are kept.

A run's stats say what was reused: `cache/chunks` (1: the chunks were kept), a retriever's
`cache/hits` (the share of its searches answered from what was kept; a hybrid's members' under
`member/<name>/`), `cache/reranked` (the share of the questions' rerankings kept). A retriever
that searched nothing reports the stats of the run that computed its answers, with every time
(`time/...`, `index/build_s`) 0: what this run spent on it. Keys: `sweep.retrieval.content_keys`.
"""

from __future__ import annotations

import contextvars
import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from sweep.formats.corpus import Corpus
from sweep.retrieval.chunking import Chunk, Chunker
from sweep.retrieval.content_keys import Unkeyable, digest, fingerprint
from sweep.retrieval.embed import Embedder
from sweep.retrieval.rerank import NoReranker, Reranker, SearchUnderFilter
from sweep.retrieval.retriever import Hits, Restriction, Retriever

REUSE_ENV = "SWEEP_REUSE"  # 0, off, false, no: compute every stage
CHUNKINGS = 2  # chunkings kept (a chunk list is about the corpus's size)
RETRIEVERS = 8  # retrievers whose answers are kept (each: questions x chunk_depth hits)


_in_a_sweep = False  # set by `reuse_in_this_process`


def reuse_in_this_process() -> None:
    """Reuse stages from now on in this process (a sweep's), unless `SWEEP_REUSE` says otherwise."""
    global _in_a_sweep
    _in_a_sweep = True


def reuse_on() -> bool:
    """Whether stages are reused: as `SWEEP_REUSE` says (off for 0, off, false or no), else in a
    sweep's process only."""
    setting = os.environ.get(REUSE_ENV)
    if setting is None:
        return _in_a_sweep
    return setting.strip().lower() not in ("0", "off", "false", "no")


class Memo:
    """At most `size` entries, the least recently used dropped first."""

    def __init__(self, size: int) -> None:
        self.size, self.entries = size, OrderedDict[str, Any]()

    def get(self, key: str) -> Any:
        if key in self.entries:
            self.entries.move_to_end(key)
        return self.entries.get(key)

    def put(self, key: str, value: Any) -> None:
        self.entries[key] = value
        self.entries.move_to_end(key)
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)

    def clear(self) -> None:
        self.entries.clear()


CHUNKS = Memo(CHUNKINGS)
TRUNCATIONS = Memo(CHUNKINGS)  # the share of a chunking's texts that an embedder truncates
ANSWERS = Memo(RETRIEVERS)
RERANKINGS = Memo(RETRIEVERS)
_INPUTS: contextvars.ContextVar[str | None] = contextvars.ContextVar("sweep_stage_inputs", default=None)
_ALONE: contextvars.ContextVar[bool] = contextvars.ContextVar("sweep_stage_alone", default=False)  # timing


def forget() -> None:
    """Drop everything kept (the next configuration computes every stage)."""
    CHUNKS.clear()
    TRUNCATIONS.clear()
    ANSWERS.clear()
    RERANKINGS.clear()


def chunked(chunker: Chunker, corpus: Corpus) -> tuple[list[Chunk], bool]:
    """`chunker.split(corpus)`, or the chunks the same settings made of the same documents before;
    (chunks, whether they were kept)."""
    key = fingerprint(chunker) if reuse_on() else None
    if key is not None:
        key = digest(key, corpus.digest)  # the corpus's own content digest, as its runs are tagged with
        kept = CHUNKS.get(key)
        if kept is not None:
            return kept, True
    chunks = chunker.split(corpus)
    if key is not None:
        CHUNKS.put(key, chunks)
    return chunks, False


def truncated_share(embedder: Embedder, texts: Sequence[str]) -> float:
    """`embedder.truncated_share(texts)`, or what the same embedder (by its `identity`) found for
    the same texts before: it tokenizes every text, and the latency pass builds every
    configuration again."""
    try:
        key = digest(embedder.identity, list(texts)) if reuse_on() else None
    except (NotImplementedError, Unkeyable):  # an embedder that cannot say what it is: tokenized each time
        key = None
    share = TRUNCATIONS.get(key) if key is not None else None
    if share is None:
        share = embedder.truncated_share(texts)
        if key is not None:
            TRUNCATIONS.put(key, share)
    return share


@contextmanager
def searching(texts: Sequence[str], metadata: Sequence[Mapping[str, Any]], plan: object) -> Iterator[None]:
    """What every retriever built inside it will be asked: the chunk `texts` and their `metadata`,
    and the `plan` of searches (questions, filters, depth). `Reused` retrievers key their answers
    by it; outside it they keep nothing."""
    key = None
    if reuse_on():
        try:
            key = digest(list(texts), list(metadata), plan)
        except Unkeyable:
            key = None
    token = _INPUTS.set(key)
    try:
        yield
    finally:
        _INPUTS.reset(token)


def reused(retriever: Retriever) -> Retriever:
    """`retriever`, its answers kept and reused (`Reused`); itself when reuse is off."""
    if not reuse_on() or isinstance(retriever, Reused):
        return retriever
    return Reused(retriever)


def _reported_again(stats: Mapping[str, float]) -> dict[str, float]:
    """The stats of the run that computed the answers, as a run that reused them all reports them:
    what was spent (times) 0, its parts' `cache/hits` 1 and `embed/cache_hit` 1 (nothing was
    computed), what they read from caches left out (they read nothing)."""
    again = {}
    for key, value in stats.items():
        if key.endswith(("cache/hits", "embed/cache_hit")):
            again[key] = 1.0
        elif not (key.startswith("cache/") or "/cache/" in key):
            again[key] = 0.0 if "time/" in key or key.endswith("build_s") else value
    return again


class Answers:
    """One retriever's kept answers over one set of inputs: each search's (scores, ids) and its
    parts' hits, and the stats of the run that computed them (None until that run asked)."""

    def __init__(self) -> None:
        self.searches: dict[str, tuple[np.ndarray, np.ndarray, dict[str, Hits]]] = {}
        self.stats: dict[str, float] | None = None


class Reused(Retriever):
    """A retriever whose answers are kept in `ANSWERS` under its settings, the inputs of
    `searching` and each search. Where a run with the same settings and inputs finished before,
    the retriever is not built: its searches come from what was kept, and it is built (and asked
    its questions) only if a search was not asked before, or for `alone` (a question's whole
    path timed: all its work done). Every other attribute is the retriever's own."""

    def __init__(self, inner: Retriever) -> None:
        self.inner = inner
        self._key: str | None = None  # None: nothing kept (no inputs, or settings that do not hash)
        self._answers: Answers | None = None
        self._built = False  # the inner retriever built (and its questions prepared) in this run
        self._texts: Sequence[str] = ()
        self._metadata: Sequence[Mapping[str, Any]] | None = None
        self._queries: Sequence[str] | None = None
        self._parts: dict[str, dict[str, Hits]] = {}
        self._alone = False
        self._asked = self._kept = 0  # searches this run, and those answered from what was kept

    def __getattr__(self, name: str) -> Any:  # the retriever's own attributes (an index, members)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def attach_metadata(self, metadata: Sequence[Mapping[str, Any]]) -> None:
        self._metadata = metadata

    def build(self, texts: Sequence[str]) -> None:
        inputs, settings = _INPUTS.get(), fingerprint(self.inner)
        self._texts, self._built, self._parts, self._asked, self._kept = texts, False, {}, 0, 0
        self._key = digest(settings, inputs) if inputs is not None and settings is not None else None
        self._answers = ANSWERS.get(self._key) if self._key is not None else None
        if self._answers is None or self._answers.stats is None:  # not finished before: build now, as always
            self._answers = Answers() if self._key is not None else None
            if self._key is not None:
                ANSWERS.put(self._key, self._answers)
            self._build()

    def _build(self) -> None:
        if self._metadata is not None:
            self.inner.attach_metadata(self._metadata)
        self.inner.build(self._texts)
        self._built = True

    def prepare_queries(self, queries: Sequence[str]) -> None:
        self._queries = queries
        if self._built:
            self.inner.prepare_queries(queries)

    def _ready(self) -> None:
        """Built and its questions prepared, for a search nothing was kept for."""
        if not self._built:
            self._build()
            if self._queries is not None:
                self.inner.prepare_queries(self._queries)

    def search(
        self, queries: Sequence[str], k: int, allowed: np.ndarray | None = None, exact: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        return self._answer(queries, (k, allowed, exact), lambda qs: self.inner.search(qs, k, allowed, exact))

    def search_within(self, queries: Sequence[str], k: int, restriction: Restriction) -> tuple[np.ndarray, np.ndarray]:
        asked = (k, restriction.chunk_ids, restriction.exact, restriction.where)
        return self._answer(queries, asked, lambda qs: self.inner.search_within(qs, k, restriction))

    def _answer(self, queries: Sequence[str], asked: tuple, search: Any) -> tuple[np.ndarray, np.ndarray]:
        """Each query's row from what was kept, else searched (and kept); one array as `search` gives."""
        if self._answers is None or self._alone:
            self._ready()
            return search(queries)
        rows, missing = [], []
        for query in queries:
            key = digest(query, *asked)
            kept = self._answers.searches.get(key)
            if kept is None:
                missing.append((query, key))
            rows.append(kept)
        self._asked += len(queries)
        self._kept += len(queries) - len(missing)
        if missing:
            self._ready()
            scores, ids = search([query for query, _ in missing])
            for row, (query, key) in enumerate(missing):
                kept = (scores[row : row + 1], ids[row : row + 1], self.inner.part_hits(query))
                self._answers.searches[key] = kept
            fresh = iter(self._answers.searches[key] for _, key in missing)
            rows = [row if row is not None else next(fresh) for row in rows]
        for query, (_, _, parts) in zip(queries, rows):
            self._parts[query] = parts
        if len(rows) == 1:
            return rows[0][0], rows[0][1]
        width = max(row[0].shape[1] for row in rows)
        scores = np.full((len(rows), width), -np.inf, dtype=rows[0][0].dtype)
        ids = np.full((len(rows), width), -1, dtype=rows[0][1].dtype)
        for n, (row_scores, row_ids, _) in enumerate(rows):
            scores[n, : row_scores.shape[1]], ids[n, : row_ids.shape[1]] = row_scores[0], row_ids[0]
        return scores, ids

    def part_hits(self, query: str) -> dict[str, Hits]:
        if self._answers is None or self._alone:
            return self.inner.part_hits(query)
        return self._parts.get(query, {})

    @contextmanager
    def alone(self, queries: Sequence[str]) -> Iterator[None]:
        """The retriever's own, built first if it was not: a question alone does all its work."""
        self._ready()
        with self.inner.alone(queries):
            self._alone, timing = True, _ALONE.set(True)
            try:
                yield
            finally:
                self._alone = False
                _ALONE.reset(timing)

    def replayed_ms(self, query: str) -> float:
        return self.inner.replayed_ms(query)

    def stats(self) -> dict[str, float]:
        """The retriever's own when it searched in this run (kept for the runs that reuse its
        answers); else those kept, with its times 0. `cache/hits`: the share of this run's
        searches answered from what was kept."""
        if self._answers is None:
            return self.inner.stats()
        searched = self._kept < self._asked or self._answers.stats is None
        if searched:
            stats = self.inner.stats() if self._built else {}
            self._answers.stats = stats
        else:
            stats = _reported_again(self._answers.stats)
            if self._built:  # built for `alone` only: what it measured there is this run's
                stats |= {key: value for key, value in self.inner.stats().items() if key.startswith("latency/")}
        return stats | {"cache/hits": self._kept / self._asked if self._asked else 0.0}

    def close(self) -> None:
        self.inner.close()


def reused_reranker(reranker: Reranker) -> Reranker:
    """`reranker`, its rerankings kept and reused (`ReusedReranker`); itself when reuse is off or
    when it keeps the retriever's order."""
    if not reuse_on() or isinstance(reranker, (NoReranker, ReusedReranker)):
        return reranker
    return ReusedReranker(reranker)


class ReusedReranker(Reranker):
    """A reranker whose rerankings are kept in `RERANKINGS` under its settings, the inputs of
    `searching` (built inside it) and each question's hits; built every time (a model stays loaded
    for the process). Inside a retriever's `alone` it reranks afresh. Every other attribute is the
    reranker's own."""

    def __init__(self, inner: Reranker) -> None:
        self.inner = inner
        self._kept: dict[str, Hits] | None = None  # None: nothing kept (no inputs, or settings that do not hash)
        self._asked = self._reused = 0

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def build(self, texts: Sequence[str]) -> None:
        inputs, settings = _INPUTS.get(), fingerprint(self.inner)
        self._kept, self._asked, self._reused = None, 0, 0
        if inputs is not None and settings is not None:
            key = digest(settings, inputs)
            self._kept = RERANKINGS.get(key)
            if self._kept is None:
                self._kept = {}
                RERANKINGS.put(key, self._kept)
        self.inner.build(texts)

    def rerank(self, query: str, hits: Hits, search: SearchUnderFilter) -> Hits:
        if self._kept is None or _ALONE.get():
            return self.inner.rerank(query, hits, search)
        key = digest(query, hits.scores, hits.ids)
        self._asked += 1
        kept = self._kept.get(key)
        if kept is None:
            kept = self._kept[key] = self.inner.rerank(query, hits, search)
        else:
            self._reused += 1
        return kept

    def stats(self) -> dict[str, float]:
        """The reranker's own (what this run spent), and `cache/reranked`: the share of this run's
        rerankings that were kept."""
        stats = self.inner.stats()
        if self._kept is not None and self._asked:
            stats["cache/reranked"] = self._reused / self._asked
        return stats
