"""The embedding cache: vectors on disk under a key that hashes the model and the texts, each
entry checked on every read, written atomically, computed under a claim so workers never embed the
same texts twice."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from sweep.errors import InputError
from sweep.formats.files import exclusive_lock
from sweep.settings import NonEmpty

log = logging.getLogger(__name__)


class EmbeddingCache:
    """`<folder>/<key>.npz`: the vectors, stored with their key, shape, dtype and sha256, all checked
    on every read. A damaged entry is reported (a warning naming the file), removed and recomputed; writes
    are atomic (a temporary file, flushed to disk, renamed), so a crash never leaves half an entry;
    the temporary files of writers killed before their rename, and the lock files of `claimed`, are
    removed once they are `ABANDONED_AFTER_S` old (a write takes well under a second, a shard
    seconds to minutes). Entries get the permissions the
    umask gives a new file, as any other, so one cache folder can serve several users. A folder that cannot
    hold the cache is an error when the cache is made, before any embedding."""

    ABANDONED_AFTER_S = 3600

    def __init__(self, folder: Annotated[str | Path, NonEmpty()]) -> None:
        self.folder = Path(folder)
        existing = next(p for p in (self.folder, *self.folder.absolute().parents) if p.exists())
        if not existing.is_dir():
            raise InputError(
                f"cache_dir={folder}: {existing} is a file, not a folder (set cache_dir or SWEEP_CACHE_DIR)"
            )
        if not os.access(existing, os.W_OK | os.X_OK):
            raise InputError(f"cache_dir={folder}: {existing} is not writable (set cache_dir or SWEEP_CACHE_DIR)")
        if self.folder.is_dir():
            now = time.time()
            for temporary in [*self.folder.glob(".*.partial"), *self.folder.glob(".*.lock")]:
                with contextlib.suppress(OSError):  # another process may remove it first
                    if now - temporary.stat().st_mtime > self.ABANDONED_AFTER_S:
                        temporary.unlink()

    @staticmethod
    def key(model: dict[str, Any], texts: Sequence[str]) -> str:
        """The model's identity and every text: the same texts give the same vectors, however
        they were chunked."""
        sha = hashlib.sha256(json.dumps(model, sort_keys=True).encode())
        for text in texts:
            sha.update(text.encode())
            sha.update(b"\0")
        return sha.hexdigest()

    def get(self, key: str) -> np.ndarray | None:
        """The entry's vectors, or None if there is none or it is damaged (a warning)."""
        path = self.folder / f"{key}.npz"
        return self._read(path, key) if path.exists() else None

    def put(self, key: str, vectors: np.ndarray) -> None:
        """Store an entry (atomically; a failure to store is a warning, not an error)."""
        self._write(self.folder / f"{key}.npz", key, vectors)

    @contextlib.contextmanager
    def claimed(self, key: str) -> Iterator[None]:
        """Hold the entry `key` for computing it: another process claiming it waits until this one
        lets go (by then the entry is usually stored), so two workers never embed the same texts at
        once. An exclusive `flock` on `.<key>.lock`, released however the holder ends, even by kill
        -9; where no lock can be taken (a read-only folder, a filesystem without locks), nothing
        waits: the worst case is the work done twice, never a damaged entry."""
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.folder / f".{key}.lock", required=False):
            yield

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
        with contextlib.suppress(OSError):  # so that the entry is read (and reported) once, not again under a claim
            path.unlink()
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
                os.fchmod(handle.fileno(), 0o666 & ~_umask())  # mkstemp's 0600 would keep the cache private
                np.savez(handle, vectors=vectors, meta=np.array(json.dumps(meta)))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except OSError as error:  # the vectors are computed and used; only the cache misses out
            log.warning("%s: could not store the embeddings (%s); this run goes on without caching them", path, error)
            if temporary is not None:
                temporary.unlink(missing_ok=True)


@lru_cache(maxsize=1)
def _umask() -> int:
    """This process's umask (read by setting it, so once, and set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _sha256(vectors: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(vectors).tobytes()).hexdigest()
