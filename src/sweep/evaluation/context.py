"""Context metrics: how much of a question's evidence its top-k chunks deliver, and at what cost.

Computed on characters with the definitions of Chroma's chunking study (`base_evaluation.py`;
data/chunking_eval/README.md), per question, over the top k chunks after filter and
reranker (before they collapse to documents). With E the question's evidence (characters per
document), R_1..R_k the chunks delivered, and C = ∪(R_i ∩ E) the evidence they cover:

    context/recall_at_k    = |C| / |E|
    context/precision_at_k = |C| / Σ|R_i|             (overlapping chunks count twice: the reader
                                                        receives both)
    context/iou_at_k       = |C| / (Σ|R_i| + |E| - |C|)
    context/complete_at_k  = 1 if C = E else 0         (the reader has all the evidence)
    context/tokens_at_k    = Σ n_tokens(R_i)           (the reader's bill, in the model's tokens)
    context/precision_omega: precision when exactly the chunks that hold evidence are delivered,
                            each once: the ceiling the chunking allows, whatever the retriever.

A chunk of another document delivers characters but covers nothing. Fewer than k chunks
(a filter, abstention, a tiny corpus) deliver what they deliver: nothing delivered is recall,
precision and IoU 0. Questions without evidence have no row (`context/n` counts the others).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweep.formats.corpus import Corpus
from sweep.formats.golden import GoldenSet, Span
from sweep.retrieval.chunking import Chunk

CONTEXT_N = "context/n"
PER_CUTOFF = ("recall", "precision", "iou", "complete", "tokens")
PRECISION_OMEGA = "context/precision_omega"
DEFAULT_CUTOFFS = (1, 3, 5, 10)


def context_metric_names(cutoffs: Sequence[int]) -> list[str]:
    return [f"context/{name}_at_{k}" for name in PER_CUTOFF for k in cutoffs] + [PRECISION_OMEGA]


@dataclass(frozen=True)
class ContextScores:
    """One row per question with evidence (indexed by qid), one column per context metric, and
    the evidence text each question's top max(k) chunks missed ("doc: text", "" when none)."""

    frame: pd.DataFrame
    missing: Mapping[str, str]
    cutoffs: tuple[int, ...]

    @property
    def recall_at_largest(self) -> str:
        return f"context/recall_at_{self.cutoffs[-1]}"


def _covered(spans: list[tuple[int, int]]) -> int:
    """Characters in the union of half-open intervals."""
    total, reach = 0, -1
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _evidence_in(chunk: Chunk, spans: Sequence[Span]) -> list[tuple[int, int]]:
    """The characters of `spans` (of the chunk's document) that `chunk` holds."""
    return [
        (max(chunk.start, s.start), min(chunk.end, s.end)) for s in spans if chunk.start < s.end and chunk.end > s.start
    ]


def _uncovered(evidence: Sequence[Span], hits: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Parts of the (merged, sorted) evidence spans that no interval in `hits` covers."""
    gaps = []
    hits = sorted(hits)
    for span in evidence:
        position = span.start
        for start, end in hits:
            if end <= position or start >= span.end:
                continue
            if start > position:
                gaps.append((position, start))
            position = max(position, end)
        if position < span.end:
            gaps.append((position, span.end))
    return gaps


class ChunkLayout:
    """Each document's chunks as arrays of start and end offsets, to find the chunks over a span."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        by_doc: dict[str, list[int]] = {}
        for position, chunk in enumerate(chunks):
            by_doc.setdefault(chunk.doc_id, []).append(position)
        self.chunks = chunks
        self._arrays = {
            doc: (np.array(ids), np.array([chunks[i].start for i in ids]), np.array([chunks[i].end for i in ids]))
            for doc, ids in by_doc.items()
        }

    def holding(self, doc: str, spans: Sequence[Span]) -> np.ndarray:
        """Positions of the chunks of `doc` that share at least one character with `spans`."""
        if doc not in self._arrays:
            return np.array([], dtype=np.int64)
        ids, starts, ends = self._arrays[doc]
        mask = np.zeros(len(ids), dtype=bool)
        for span in spans:
            mask |= (starts < span.end) & (ends > span.start)
        return ids[mask]


def precision_omega(evidence: Mapping[str, Sequence[Span]], layout: ChunkLayout) -> float:
    covered, delivered = 0, 0
    for doc, spans in evidence.items():
        holders = [layout.chunks[i] for i in layout.holding(doc, spans)]
        delivered += sum(c.end - c.start for c in holders)
        covered += _covered([part for chunk in holders for part in _evidence_in(chunk, spans)])
    return covered / delivered if delivered else 0.0


def score_contexts(
    golden: GoldenSet,
    contexts: Mapping[str, Sequence[tuple[int, float]]],
    chunks: Sequence[Chunk],
    corpus: Corpus,
    cutoffs: Sequence[int] = DEFAULT_CUTOFFS,
) -> ContextScores:
    """`contexts`: each question's delivered chunks as (position in `chunks`, score), best first;
    a question that is missing got nothing. Evidence must be resolved (`load_golden(..., corpus)`)."""
    cutoffs = tuple(sorted(set(cutoffs)))
    depth = cutoffs[-1]
    layout = ChunkLayout(chunks)
    names = context_metric_names(cutoffs)
    rows, index, missing = [], [], {}
    for question in golden:
        if not question.evidence:
            continue
        evidence, total = question.evidence, question.evidence_chars
        hits: dict[str, list[tuple[int, int]]] = {}  # per document: the evidence each chunk covers
        delivered = tokens = 0
        values: dict[str, float] = {}
        ranked = [position for position, _ in contexts.get(question.id, ())][:depth]
        for rank in range(1, depth + 1):
            if rank <= len(ranked):
                chunk = chunks[ranked[rank - 1]]
                delivered += chunk.end - chunk.start
                tokens += chunk.n_tokens
                hits.setdefault(chunk.doc_id, []).extend(_evidence_in(chunk, evidence.get(chunk.doc_id, ())))
            if rank in cutoffs:
                covered = sum(_covered(intervals) for intervals in hits.values())
                values[f"context/recall_at_{rank}"] = covered / total
                values[f"context/precision_at_{rank}"] = covered / delivered if delivered else 0.0
                values[f"context/iou_at_{rank}"] = covered / (delivered + total - covered)
                values[f"context/complete_at_{rank}"] = float(covered == total)
                values[f"context/tokens_at_{rank}"] = float(tokens)
        values[PRECISION_OMEGA] = precision_omega(evidence, layout)
        rows.append([values[name] for name in names])
        index.append(question.id)
        missing[question.id] = " | ".join(
            f"{doc}: {corpus.by_id[doc].content[start:end]}"
            for doc, spans in evidence.items()
            for start, end in _uncovered(spans, hits.get(doc, []))
        )
    frame = pd.DataFrame(rows, index=pd.Index(index, dtype=object, name="qid"), columns=names, dtype=float)
    return ContextScores(frame, missing, cutoffs)
