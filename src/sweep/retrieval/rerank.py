"""Rerankers: reorder one question's chunk hits before they collapse to documents.

`none` (`NoReranker`) keeps the retriever's order; `cross_encoder` scores (question, chunk)
pairs of the top `candidates` hits with a local sentence-transformers CrossEncoder. The
reranker's score becomes the hit's score, so it is the one `abstain.min_score` and the
abstention calibration threshold. Fusing rankings is a retriever's job (`model=hybrid`).

A CrossEncoder scores with a head trained on top of its encoder. A folder without one (an
embedding model: a bi-encoder) still loads, with a head transformers initialises at random and
unseeded, so every run scores differently. Such a folder is refused: by its `config.json`, whose
`architectures` name no `...ForSequenceClassification` (sentence-transformers' own test of a trained
classifier; `...ForCausalLM` rerankers score with their language-model head), and while loading, by
transformers' report of weights the checkpoint lacks ("newly initialized"), whatever the config says.
"""

from __future__ import annotations

import json
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from sweep.errors import InputError
from sweep.retrieval.retriever import Hits, Retriever
from sweep.settings import Range, checked

SearchUnderFilter = Callable[[Retriever], Hits]  # another retriever, same question, same filter and depth
HEADED = ("ForSequenceClassification", "ForCausalLM")  # architectures that carry the head a reranker scores with
LOADING_LOGGER = "transformers.modeling_utils"  # where transformers reports the weights a checkpoint lacked
NEWLY_INITIALISED = "newly initialized"  # in that report, transformers 4 and 5 alike
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class _NewlyInitialised(logging.Filter):
    """Keeps transformers' reports of newly initialised weights (said in one line instead)."""

    def __init__(self) -> None:
        super().__init__()
        self.reports: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        message = ANSI.sub("", record.getMessage())
        if NEWLY_INITIALISED not in message:
            return True
        self.reports.append(message)
        return False


@contextmanager
def newly_initialised_weights() -> Iterator[list[str]]:
    """The names of the weights a model loaded inside it was missing, which transformers initialised
    at random (its loading report, captured: transformers 4 lists them in a sentence, 5 in a table)."""
    logger = logging.getLogger(LOADING_LOGGER)
    level = logger.level
    if logger.getEffectiveLevel() > logging.WARNING:  # a quieted transformers still reports them to us
        logger.setLevel(logging.WARNING)
    caught = _NewlyInitialised()
    logger.addFilter(caught)
    names: list[str] = []
    try:
        yield names
    finally:
        logger.removeFilter(caught)
        logger.setLevel(level)
        for report in caught.reports:
            listed = re.search(r"newly initialized: \[([^\]]*)\]", report)  # transformers 4
            found = (
                re.findall(r"[\w']+", listed.group(1))
                if listed
                else re.findall(r"^\s*(\S+)\s*\|\s*MISSING", report, re.M)
            )
            names.extend(name.strip("'") for name in found)
        names[:] = sorted(set(names))
        if caught.reports and not names:
            names.append("some weights")


def declared_architectures(folder: Path) -> list[str]:
    """The model classes a model folder's `config.json` declares ([] when it names none or does
    not read: the loader says what is wrong with it)."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    architectures = config.get("architectures") if isinstance(config, dict) else None
    return [str(name) for name in architectures] if isinstance(architectures, list) else []


@lru_cache(maxsize=2)
def load_cross_encoder(setting: str, folder: Path) -> Any:
    """The trained CrossEncoder in `folder` (`setting`: reranker.model as given, for the errors),
    on the CPU from its files alone; loaded once per process: a sweep's configurations share it, as
    they only read it (`predict`). A folder that loads with weights initialised at random, or
    without one output label, is an `InputError` (not kept: the next configuration says so too)."""
    from sentence_transformers import CrossEncoder

    try:
        with newly_initialised_weights() as missing:
            encoder = CrossEncoder(str(folder), device="cpu", local_files_only=True)
    except (OSError, ValueError) as error:
        raise InputError(f"reranker.model={setting}: not a loadable CrossEncoder ({error})") from None
    if missing:
        raise InputError(
            f"reranker.model={setting}: its checkpoint lacks {', '.join(missing)}, which transformers "
            "initialised at random (newly initialised, unseeded): it would score differently on every run; "
            "give a trained cross-encoder"
        )
    if encoder.num_labels != 1:
        raise InputError(
            f"reranker.model={setting}: has {encoder.num_labels} output labels; a reranker needs 1 (a relevance score)"
        )
    return encoder


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
        architectures = declared_architectures(folder)
        if architectures and not any(name.endswith(HEADED) for name in architectures):
            raise InputError(
                f"reranker.model={self.model}: not a cross-encoder: its config.json declares {', '.join(architectures)}, "
                "a model without a classification head (an embedding model?); loaded as a CrossEncoder it would get "
                "a newly initialised, random head and score differently on every run"
            )
        import torch

        self.texts = list(texts)
        self.raw_scores = torch.nn.Identity()  # logits: a sigmoid saturates to 1.0 in float32 and would tie the best
        self.encoder = load_cross_encoder(self.model, folder)

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
