"""Rerankers: reorder one question's chunk hits before they collapse to documents.

`none` (`NoReranker`) keeps the retriever's order; `cross_encoder` scores (question, chunk)
pairs of the top `candidates` hits with a local sentence-transformers CrossEncoder. The
reranker's score becomes the hit's score, so it is the one `abstain.min_score` and the
abstention calibration threshold. Fusing rankings is a retriever's job (`model=hybrid`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np

from sweep.errors import InputError
from sweep.retrieval.retriever import Hits, Retriever
from sweep.settings import Range, checked

SearchUnderFilter = Callable[[Retriever], Hits]  # another retriever, same question, same filter and depth


class Reranker(ABC):
    """Reorders one question's chunk hits; its scores replace the retriever's."""

    def build(self, texts: Sequence[str]) -> None:  # noqa: B027 (optional: most rerankers need nothing)
        """Get ready to rerank hits among these chunk texts (ids index into them)."""

    @abstractmethod
    def rerank(self, query: str, hits: Hits, search: SearchUnderFilter) -> Hits:
        """`hits` reordered (and rescored), best first; `search` asks another retriever for this
        question's hits under the same filter and depth."""

    def stats(self) -> dict[str, float]:
        """What reranking cost beyond time (requests, retries, tokens): MLflow metrics."""
        return {}


class NoReranker(Reranker):
    """The retriever's order stands."""

    def rerank(self, query: str, hits: Hits, search: SearchUnderFilter) -> Hits:
        return hits


@checked("reranker")
@dataclass
class CrossEncoderReranker(Reranker):
    """Only the top `candidates` hits are scored and returned: the rest never reach the user."""

    model: str | None = None  # a local CrossEncoder folder; nothing is downloaded
    candidates: Annotated[int, Range(1)] = 100
    batch_size: Annotated[int, Range(1, 4096)] = 32

    def __post_init__(self) -> None:
        if not self.model:
            raise InputError(
                "reranker.model is not set: give the path of a local sentence-transformers CrossEncoder folder"
            )
        if not Path(self.model).expanduser().is_dir():
            raise InputError(f"reranker.model={self.model}: no such folder (a local CrossEncoder folder is needed)")

    def build(self, texts: Sequence[str]) -> None:
        folder = Path(self.model).expanduser()
        if not (folder / "config.json").is_file():  # said before seconds of importing the libraries
            raise InputError(f"reranker.model={self.model}: not a loadable CrossEncoder (no config.json in {folder})")
        import torch
        from sentence_transformers import CrossEncoder

        self.texts = list(texts)
        self.raw_scores = torch.nn.Identity()  # logits: a sigmoid saturates to 1.0 in float32 and would tie the best
        try:
            self.encoder = CrossEncoder(str(folder), device="cpu", local_files_only=True)
        except (OSError, ValueError) as error:
            raise InputError(f"reranker.model={self.model}: not a loadable CrossEncoder ({error})") from None
        if self.encoder.num_labels != 1:
            raise InputError(
                f"reranker.model={self.model}: has {self.encoder.num_labels} output labels; a reranker needs 1 (a relevance score)"
            )

    def rerank(self, query: str, hits: Hits, search: SearchUnderFilter) -> Hits:
        top = hits[: self.candidates]
        if not len(top):
            return top
        pairs = [(query, self.texts[i]) for i in top.ids.tolist()]
        scores = self.encoder.predict(
            pairs, batch_size=self.batch_size, show_progress_bar=False, activation_fn=self.raw_scores
        )
        scores = np.asarray(scores, dtype=np.float32)
        order = np.argsort(-scores, kind="stable")  # equal scores keep the retriever's order
        return Hits(scores[order], top.ids[order])
