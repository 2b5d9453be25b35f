"""One configuration's retrieval over a golden set: chunk → build the retriever → for each
question, filter + search → rerank → documents (+ abstain).

Chunk hits collapse to documents (a document ranks at its best chunk); the top
`context_depth` chunks, what a reader would be handed, are kept for the context metrics. If
the top score is below `min_score` the system answers nothing, which is right for
unanswerable questions.
Ties have one rule, trec_eval's (`TieOrder`): every question's chunk hits are ordered by score,
descending, then by document id, descending (then by place in the document), before they are cut
or collapse, so the documents of a run, and the chunks the context metrics read, are in the order
trec_eval reads back from the logged `run.trec`, and no order of the corpus file decides a tie.
A corpus holding exact copies of a document (the same content: versions, mirrors, templates),
whose scores tie on every question, gets one warning a run with how many and examples
(`warn_exact_copies`). Document ids are in Unicode NFC (`corpus_in_nfc`), the form the golden
set's are read in. With `ignore_identical_ids`, a question's hits in a chunk of the
document whose id is the question's own are dropped before anything is ranked or scored (BEIR's
rule for sets whose questions are documents of the corpus: ArguAna, Quora).
A retriever's parts (`Retriever.part_hits`) are answered beside it: each part's hits of every
question are ranked as the retriever's are (`Retrieval.parts`), so each part is scored on the
same questions and the same filter.
The answers that are scored come from the batch path: every question encoded in batches
first (`Retriever.prepare_queries`), then searched one after another; its wall time gives
`throughput/questions_per_s`. Latency is measured apart, as a live system would see it: a
seeded sample of up to `LATENCY_SAMPLE` questions, each question's whole path (its own encode,
filter, search, rerank, documents) alone under the clock (`Retriever.alone`; PyTorch on one
thread, as a server answering one request per core runs), summarised as
`latency/search_ms_p50`, `_p95`, `_p99`, each question's milliseconds kept (`Retrieval.latencies`).
A sweep's trials time nothing here (`latency_sample` 0): the sweep times its configurations together
at its end (`sweep.experiment.latency_pass`). The pipeline also times the retriever's build and the
reranker; the retriever reports what only it can see (`stats()`: embedding vs indexing, bytes,
truncation), and `Retrieval.stats` collects them all.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from sweep.formats.corpus import Corpus
from sweep.formats.golden import GoldenSet, Question, corpus_in_nfc
from sweep.formats.runs import Run
from sweep.progress import progress_bar
from sweep.retrieval import stages
from sweep.retrieval.chunking import Chunk, Chunker
from sweep.retrieval.filters import Filter, NoFilter, filter_stats
from sweep.retrieval.rerank import NoReranker, Reranker
from sweep.retrieval.retriever import Hits, Restriction, Retriever

log = logging.getLogger(__name__)

LATENCY_SAMPLE = 200  # questions whose whole path is timed alone (about 2 s with MiniLM on 2 cores)
LATENCY_SEED = 0  # the sample is drawn with this seed: the same golden set, the same questions


def latency_sample(n: int, size: int = LATENCY_SAMPLE) -> np.ndarray:
    """Positions of the questions timed alone, in golden-set order: all `n` when there are at
    most `size`, else `size` of them drawn without replacement with `LATENCY_SEED`."""
    if n <= size:
        return np.arange(n)
    return np.sort(np.random.default_rng(LATENCY_SEED).choice(n, size=size, replace=False))


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """PyTorch's models (a question's encoder, a cross-encoder) on one thread, as a server that
    answers one request per core runs them. With more, a question alone waits on the threads'
    hand-offs, and on a busy machine on a free core for each: on the 2-core development machine
    at load average 6, MiniLM encoded one question in 155 to 255 ms (median) on 2 threads and in
    32 ms on 1, the same minute. Where torch is not imported, no model of this process uses it
    (a BM25 run's): nothing to set, and importing it would take seconds."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@dataclass(frozen=True)
class TieOrder:
    """trec_eval's order for one question's chunk hits: score descending, then document id
    descending (byte order, as trec_eval's `strcmp` compares ids: `comp_sim_docno` in its
    `form_res_rels.c`), then the chunk's place in its document. `Run.from_ranked` orders documents
    so too; ordering the chunks first makes the cut at `depth` documents and at `context_depth`
    chunks the same whatever order the corpus file, and so the retriever, gave tied hits."""

    doc_rank: np.ndarray  # each chunk's document id's rank among the corpus's ids, sorted
    place: np.ndarray  # each chunk's index in its document
    doc_ids: list[str]  # the chunks' document ids, sorted: doc_ids[doc_rank[i]] is chunk i's

    @classmethod
    def of(cls, chunks: Sequence[Chunk]) -> TieOrder:
        doc_ids = sorted({chunk.doc_id for chunk in chunks})  # by code point: UTF-8's byte order
        rank = {doc_id: i for i, doc_id in enumerate(doc_ids)}
        return cls(
            np.array([rank[chunk.doc_id] for chunk in chunks], dtype=np.int64),
            np.array([chunk.index for chunk in chunks], dtype=np.int64),
            doc_ids,
        )

    def __call__(self, hits: Hits) -> Hits:
        scores = hits.scores
        if len(scores) < 2 or bool(np.all(scores[1:] < scores[:-1])):  # no tie and in order: the usual case
            return hits
        order = np.lexsort((self.place[hits.ids], -self.doc_rank[hits.ids], -scores))
        return Hits(scores[order], hits.ids[order])

    def documents(self, hits: Hits, depth: int) -> list[tuple[str, float]]:
        """Best chunk per document, in hit order (hits arrive best first, ties in this order), at
        most `depth` documents: each document's first hit."""
        docs = self.doc_rank[hits.ids]
        first = np.sort(np.unique(docs, return_index=True)[1])[:depth]
        return list(zip([self.doc_ids[d] for d in docs[first].tolist()], hits.scores[first].tolist()))


def warn_exact_copies(corpus: Corpus) -> None:
    """One warning when documents of `corpus` have the same content (what is indexed and
    embedded) as another: how many, in how many groups, and three groups (by id, so the same
    whatever the file's order). Their scores tie on every question, and the tie rule decides
    which copy ranks first; a golden set that labels one copy counts the other as not relevant."""
    groups: dict[bytes, list[str]] = {}
    for document in corpus:
        digest = hashlib.blake2b(document.content.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        groups.setdefault(digest, []).append(document.id)
    copies = sorted(sorted(ids) for ids in groups.values() if len(ids) > 1)
    if not copies:
        return
    examples = "; ".join(
        " = ".join(repr(doc_id) for doc_id in ids[:3]) + (" = ..." if len(ids) > 3 else "") for ids in copies[:3]
    )
    n_documents = sum(len(ids) for ids in copies)
    log.warning(
        "%s: %d documents are exact copies (the same content) in %d %s, e.g. %s: copies tie on every score, and "
        "a tie ranks by document id, the highest first, as trec_eval ranks it (whatever the corpus file's order); "
        "a golden set that labels one copy counts the others as not relevant",
        corpus.source, n_documents, len(copies), "group" if len(copies) == 1 else "groups", examples,
    )  # fmt: skip


def without_document(hits: Hits, doc_ids: np.ndarray, doc_id: str) -> Hits:
    """`hits` less those in chunks of the document `doc_id` (`doc_ids`: each chunk's document)."""
    if not len(hits.ids):
        return hits
    keep = doc_ids[hits.ids] != doc_id
    return hits if keep.all() else Hits(hits.scores[keep], hits.ids[keep])


@dataclass(frozen=True)
class Answer:
    """One question's way through the pipeline."""

    restriction: Restriction | None  # its filter's (None: unrestricted)
    found: int  # chunk hits the search returned, before reranking
    hits: Hits  # after reranking (and dropping the question's own document)
    ranking: list[tuple[str, float]]  # documents, best first
    rerank_s: float


@dataclass(frozen=True)
class PartRetrieval:
    """One part of the retriever answering on its own (`Retriever.part_hits`)."""

    results: Run  # its documents for each question it found any for, ranked as `Retrieval.results` are
    # each question -> every chunk hit the part gave, best first, with its own score, as
    # [doc, start, end, score] (`results` are these less the question's own document under
    # `ignore_identical_ids`, collapsed to documents)
    hits: dict[str, list[list[object]]]


@dataclass
class Retrieval:
    """What a pipeline returned for every question, the chunks it searched, and what it measured
    along the way (seconds, per-question latencies in ms, bytes, counts, shares: MLflow metrics)."""

    results: Run
    chunks: list[Chunk]
    stats: dict[str, float]
    contexts: dict[str, list[tuple[int, float]]]  # every qid -> its top (chunk position, score); [] abstained
    parts: dict[str, PartRetrieval] = field(default_factory=dict)  # the retriever's parts by name; {}: none
    latencies: dict[str, float] = field(default_factory=dict)  # each timed question's ms alone; {}: none timed

    def parts_by_question(self) -> dict[str, dict[str, list[list[object]]]]:
        """The parts' chunk hits turned around: `{qid: {part: [[doc, start, end, score], ...]}}`,
        the parts in the retriever's order."""
        by_question: dict[str, dict[str, list[list[object]]]] = {}
        for part, answers in self.parts.items():
            for qid, rows in answers.hits.items():
                by_question.setdefault(qid, {})[part] = rows
        return by_question

    def delivered_chunks(self) -> dict[str, list[dict[str, object]]]:
        """Each question's top chunks, best first, as `{"doc", "start", "end", "score"}` (offsets
        into the document's content, the coordinates of the golden set's evidence); [] when the
        system answered nothing."""
        return {
            qid: [
                {"doc": self.chunks[i].doc_id, "start": self.chunks[i].start, "end": self.chunks[i].end, "score": score}
                for i, score in hits
            ]
            for qid, hits in self.contexts.items()
        }


class PartAnswers:
    """The retriever's parts' hits, question by question, gathered into a `PartRetrieval` each."""

    def __init__(self, chunks: Sequence[Chunk], depth: int, doc_ids: np.ndarray | None, order: TieOrder) -> None:
        self.chunks, self.depth, self.doc_ids, self.order = chunks, depth, doc_ids, order
        self.rankings: dict[str, dict[str, list[tuple[str, float]]]] = {}  # part -> qid -> its documents
        self.hits: dict[str, dict[str, list[list[object]]]] = {}  # part -> qid -> its chunk hits as rows

    def add(self, qid: str, part_hits: dict[str, Hits]) -> None:
        """Each part's hits for the question `qid` (`Retriever.part_hits`)."""
        for part, hits in part_hits.items():
            hits = self.order(hits)
            self.hits.setdefault(part, {})[qid] = [
                [self.chunks[i].doc_id, self.chunks[i].start, self.chunks[i].end, score]
                for i, score in zip(hits.ids.tolist(), hits.scores.tolist())
            ]
            if self.doc_ids is not None:
                hits = without_document(hits, self.doc_ids, qid)
            if ranking := self.order.documents(hits, self.depth):
                self.rankings.setdefault(part, {})[qid] = ranking

    def retrievals(self) -> dict[str, PartRetrieval]:
        return {
            part: PartRetrieval(Run.from_ranked(self.rankings.get(part, {}), part), hits)
            for part, hits in self.hits.items()
        }


@dataclass
class Pipeline:
    chunker: Chunker
    retriever: Retriever
    filter: Filter = field(default_factory=NoFilter)
    reranker: Reranker = field(default_factory=NoReranker)
    depth: int = 100  # documents per question: deep enough for every metric cutoff
    chunk_depth: int = 400  # chunk hits fetched before collapsing to documents
    context_depth: int = 10  # chunks kept per question for the context metrics (the largest k)
    min_score: float | None = None  # abstain below this top score
    ignore_identical_ids: bool = False  # drop hits in the document whose id is the question's
    latency_sample: int = LATENCY_SAMPLE  # questions whose whole path is timed alone

    def __post_init__(self) -> None:
        self.retriever = stages.reused(self.retriever)  # its answers kept for the next configuration
        self.reranker = stages.reused_reranker(self.reranker)  # and its rerankings

    def retrieve(self, corpus: Corpus, golden: GoldenSet, name: str = "golden-sweep") -> Retrieval:
        corpus = corpus_in_nfc(corpus)  # a folder's file names as macOS writes them (NFD): runs name them in NFC
        warn_exact_copies(corpus)
        chunks, chunks_kept = stages.chunked(self.chunker, corpus)  # or those a configuration before made
        order = TieOrder.of(chunks)
        self.filter.prepare(corpus, chunks, golden, self.chunk_depth)  # bad filters fail before anything is embedded
        texts = [c.embedded_text for c in chunks]  # a chunk's context (e.g. its heading path) goes with it
        metadata = [corpus.by_id[c.doc_id].metadata for c in chunks]
        self.retriever.attach_metadata(metadata)  # for a vector database
        start = time.perf_counter()
        with stages.searching(texts, metadata, self._plan(golden)):  # what reused answers and rerankings are kept under
            self.retriever.build(texts)
            build_s = time.perf_counter() - start
            start = time.perf_counter()
            self.reranker.build(texts)
        rerank_build_s, rerank_s = time.perf_counter() - start, 0.0

        # the batch path, whose answers are scored: every question encoded in batches first
        start = time.perf_counter()
        self.retriever.prepare_queries([question.question for question in golden])
        searching = time.perf_counter()
        rankings: dict[str, list[tuple[str, float]]] = {}
        contexts: dict[str, list[tuple[int, float]]] = {}
        restricted: list[tuple[Restriction, int]] = []
        doc_ids = self.own_documents(chunks)
        parts = PartAnswers(chunks, self.depth, doc_ids, order)
        for question in progress_bar(golden, desc="searching", unit="question"):
            answer = self._answer(question, doc_ids, order)
            rerank_s += answer.rerank_s
            parts.add(question.id, self.retriever.part_hits(question.question))
            if answer.restriction is not None:
                restricted.append((answer.restriction, answer.found))
            ranking, hits = answer.ranking, answer.hits
            answered = ranking and (self.min_score is None or ranking[0][1] >= self.min_score)
            if answered:
                rankings[question.id] = ranking
            top = zip(hits.ids[: self.context_depth].tolist(), hits.scores[: self.context_depth].tolist())
            contexts[question.id] = list(top) if answered else []
        done = time.perf_counter()
        latencies = self._latencies(golden, doc_ids, order)
        stats = self.retriever.stats() | self.reranker.stats() | filter_stats(restricted, len(golden), self.chunk_depth)
        stats |= {
            "time/build_s": build_s,  # the retriever's whole build; it reports its own parts
            "time/search_s": done - searching - rerank_s,
            "time/rerank_s": rerank_build_s + rerank_s,
            "throughput/questions_per_s": len(golden) / (done - start),
            "time/latency_s": time.perf_counter() - done,
            **latency_stats(list(latencies.values())),
            "corpus/chunks": float(len(chunks)),
            "cache/chunks": float(chunks_kept),
        }
        return Retrieval(Run.from_ranked(rankings, name), chunks, stats, contexts, parts.retrievals(), latencies)

    def _plan(self, golden: GoldenSet) -> tuple:
        """What decides the searches the retriever will be asked: every question with its filters,
        the filter's settings and the depth (`stages.searching`)."""
        return [(q.question, dict(q.filters)) for q in golden], self.filter, self.chunk_depth

    def _answer(self, question: Question, doc_ids: np.ndarray | None, order: TieOrder) -> Answer:
        """One question's whole path: filter + search, rerank, ties in trec_eval's order, documents."""
        restriction = self.filter.restriction(question)
        # any retriever's hits for this question, under its filter and depth
        search = partial(self.filter.search, query=question.question, k=self.chunk_depth, restriction=restriction)
        hits = search(self.retriever)
        found = len(hits)
        reranking = time.perf_counter()
        hits = self.reranker.rerank(question.question, hits, search)
        rerank_s = time.perf_counter() - reranking
        if doc_ids is not None:  # after the reranker: a fused list brings the document back
            hits = without_document(hits, doc_ids, question.id)
        hits = order(hits)
        return Answer(restriction, found, hits, order.documents(hits, self.depth), rerank_s)

    def _latencies(self, golden: GoldenSet, doc_ids: np.ndarray | None, order: TieOrder) -> dict[str, float]:
        """Milliseconds of each sampled question's whole path (`time_alone`), by question id, one
        question at a time as a live system answers them, on one PyTorch thread
        (`one_torch_thread`); {} with `latency_sample` 0 (a sweep times its configurations
        together at its end: `sweep.experiment.latency_pass`)."""
        sample = [golden.questions[i] for i in latency_sample(len(golden), self.latency_sample)]
        if not sample:
            return {}
        with one_torch_thread(), self.retriever.alone([question.question for question in sample]):
            return {question.id: self.time_alone(question, doc_ids, order) for question in sample}

    def own_documents(self, chunks: Sequence[Chunk]) -> np.ndarray | None:
        """Each chunk's document id, where a question's hits in its own document are dropped
        (`ignore_identical_ids`); else None."""
        return np.array([c.doc_id for c in chunks], dtype=object) if self.ignore_identical_ids else None

    def clock(self, chunks: Sequence[Chunk]) -> Callable[[Question], float]:
        """`time_alone` for questions over `chunks`, those `retrieve` built the retriever on (one
        configuration of a sweep's latency pass, timed beside the others)."""
        return partial(self.time_alone, doc_ids=self.own_documents(chunks), order=TieOrder.of(chunks))

    def time_alone(self, question: Question, doc_ids: np.ndarray | None, order: TieOrder) -> float:
        """Milliseconds of `question`'s whole path, the clock around that alone: its own encode (no
        batch; inside the retriever's `alone`), filter, search, rerank, documents, plus what the
        retriever replayed rather than spent (`replayed_ms`). Its answer is dropped: the scored
        ones are the batch path's."""
        start = time.perf_counter()
        self._answer(question, doc_ids, order)
        elapsed = time.perf_counter() - start
        return 1000 * elapsed + self.retriever.replayed_ms(question.question)


def latency_stats(latencies: Sequence[float]) -> dict[str, float]:
    """`latency/questions` and `latency/search_ms_p50`, `_p95`, `_p99` of per-question
    milliseconds; {} when no question was timed."""
    if not latencies:
        return {}
    return {
        "latency/questions": float(len(latencies)),
        **{f"latency/search_ms_p{q}": float(np.percentile(latencies, q)) for q in (50, 95, 99)},
    }
