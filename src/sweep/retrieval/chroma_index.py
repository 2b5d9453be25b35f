"""Chroma as the index: the chunk vectors in a Chroma collection, searched by Chroma's own HNSW.

    python -m sweep index=chroma index.ef_search=16 filter=pre
    python -m sweep index=chroma index.mode=server index.host=127.0.0.1 index.port=8000

One collection per run: ids are chunk positions, metadata the chunk's document metadata (numbers as
floats, as the filters compare them), HNSW settings in Chroma 1.x's collection `configuration`
(`space`, `ef_construction`, `ef_search`, `max_neighbors`). Chroma is always handed the vectors, so
its default embedding function never runs (nothing is downloaded), and its telemetry is off.
Under `filter=pre` the question's filter becomes Chroma's `where` and Chroma filters; a search
restricted by chunk ids alone (a hybrid's member) hands Chroma the ids. Chroma plans its own
filtered search, so `filter.exact_below` does not apply.

`mode=embedded` keeps the collection in a folder in this process (`path`, else a temporary folder
removed at the end; a `path` that cannot be made or written is one line when the index is made); `mode=server` talks to a running `chroma run` at `host`:`port`. The
collection is deleted when the run ends, also when it fails or is interrupted (SIGINT, SIGTERM),
unless `keep=true` (`sweep.retrieval.vector_index.Cleanup`). Index bytes are the embedded
database folder's; a server's disk is not known here, so server runs log none.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any

import httpx
import numpy as np

from sweep.errors import InputError, folder_problem
from sweep.retrieval.vector_index import Cleanup, VectorIndex, Where, engine_package, folder_bytes, padded, stored_value
from sweep.settings import NonEmpty, OneOf, Range, checked

log = logging.getLogger(__name__)
SPACES = ("ip", "cosine", "l2")
MODES = ("embedded", "server")


def chroma_where(where: Where) -> dict[str, Any]:
    """`field -> values` as Chroma's `where`: `$in` per field (one per value type: Chroma wants
    one type in a list), all fields under `$and`."""
    clauses = []
    for field, values in where.items():
        by_type: dict[type, list] = {}
        for value in values:
            by_type.setdefault(type(value), []).append(value)
        choices = [{field: {"$in": same}} for same in by_type.values()]
        clauses.append(choices[0] if len(choices) == 1 else {"$or": choices})
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def chroma_metadata(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """A chunk's metadata as Chroma stores it (None when empty: Chroma refuses an empty mapping)."""
    return {key: stored_value(value) for key, value in metadata.items()} or None


def drop_collection(client: Any, name: str) -> None:
    from chromadb.errors import NotFoundError

    try:
        client.delete_collection(name)
    except NotFoundError:  # never made: the run stopped before Chroma answered
        pass


@checked("index")
@dataclass
class ChromaIndex(VectorIndex):
    space: Annotated[str, OneOf(SPACES)] = "ip"  # unit-length vectors: ip and cosine rank alike
    ef_construction: Annotated[int, Range(1)] = 100  # Chroma's default
    ef_search: Annotated[int, Range(1)] = 100  # candidates per search (Chroma looks at max(ef_search, k))
    max_neighbors: Annotated[int, Range(2)] = 16  # links per node (FAISS's M)
    mode: Annotated[str, OneOf(MODES)] = "embedded"
    path: Annotated[str | None, NonEmpty()] = None  # embedded: the database folder; null = a temporary one
    host: Annotated[str, NonEmpty()] = "127.0.0.1"  # server: where `chroma run` listens
    port: Annotated[int, Range(1, 65535)] = 8000
    keep: bool = False  # leave the collection (named in the log) in the server or in `path`

    def __post_init__(self) -> None:
        if self.keep and self.mode == "embedded" and self.path is None:
            raise InputError(
                "index.keep=true: a temporary folder is removed whatever it holds; give index.path=<folder> "
                "or use index.mode=server to keep the collection"
            )
        if self.mode == "embedded" and self.path is not None:
            problem = folder_problem(self.path)
            if problem is not None:
                raise InputError(
                    f"index.path={self.path}: Chroma cannot keep its database there ({problem}); "
                    "give index.path=<a writable folder>, or leave it null for a temporary one"
                )
        self._cleanup: Cleanup | None = None

    def _build(self, vectors: np.ndarray, metadata: Sequence[Mapping[str, Any]]) -> None:
        chromadb = engine_package("chromadb", "index=chroma")
        self._cleanup = cleanup = Cleanup(self)
        client = self._client(chromadb, cleanup)
        cleanup.add(client.close, "the Chroma client")
        name = f"golden-sweep-{uuid.uuid4().hex[:12]}"
        temporary = self.mode == "embedded" and self.path is None  # its folder goes, and the collection with it
        if not (self.keep or temporary):
            cleanup.add(partial(drop_collection, client, name), f"the Chroma collection {name} ({self._place})")
        hnsw = {
            "space": self.space,
            "ef_construction": self.ef_construction,
            "ef_search": self.ef_search,
            "max_neighbors": self.max_neighbors,
        }
        with self._answering():
            collection = client.create_collection(name, configuration={"hnsw": hnsw}, embedding_function=None)
            batch = client.get_max_batch_size()
            for start in range(0, len(vectors), batch):
                rows = range(start, min(start + batch, len(vectors)))
                collection.add(
                    ids=[str(i) for i in rows],
                    embeddings=vectors[start : rows.stop],
                    metadatas=[chroma_metadata(metadata[i]) for i in rows],
                )
        if self.keep:
            log.info("index=chroma: the collection %s is kept (%s)", name, self._place)
        self._collection = collection

    def _client(self, chromadb: Any, cleanup: Cleanup) -> Any:
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False)
        if self.mode == "server":
            self._place, self._folder = f"the Chroma server at {self.host}:{self.port}", None
            try:
                return chromadb.HttpClient(host=self.host, port=self.port, settings=settings)
            except ValueError as error:  # chromadb's "Could not connect to a Chroma server"
                raise InputError(
                    f"index.host={self.host} index.port={self.port}: no Chroma server answers there ({error}); "
                    f"start one with: chroma run --path <folder> --host {self.host} --port {self.port}"
                ) from None
        self._folder = self.path or tempfile.mkdtemp(prefix="golden-sweep-chroma-")
        if self.path is None:
            cleanup.add(partial(shutil.rmtree, self._folder, ignore_errors=True), f"the folder {self._folder}")
        self._place = f"the folder {self._folder}"
        return chromadb.PersistentClient(path=self._folder, settings=settings)

    def _search(
        self, queries: np.ndarray, k: int, allowed: np.ndarray | None, exact: bool, where: Where | None
    ) -> tuple[np.ndarray, np.ndarray]:
        if where:
            restriction = {"where": chroma_where(where)}
        elif allowed is not None:
            restriction = {"ids": [str(i) for i in allowed.tolist()]}
        else:
            restriction = {}
        with self._answering():
            found = self._collection.query(query_embeddings=queries, n_results=k, include=["distances"], **restriction)
        rows = [
            (self._scores(np.asarray(distances, dtype=np.float32)), [int(i) for i in ids])
            for distances, ids in zip(found["distances"], found["ids"])
        ]
        return padded(rows, k)

    @contextmanager
    def _answering(self) -> Iterator[None]:
        """A server that stops answering is one line naming its setting, as an endpoint's faults
        are (`sweep.retrieval.endpoints`), not httpx's traceback."""
        try:
            yield
        except httpx.TransportError as error:
            raise InputError(
                f"index.host={self.host} index.port={self.port}: the Chroma server stopped answering ({error})"
            ) from None

    def _scores(self, distances: np.ndarray) -> np.ndarray:
        """Chroma's distances as inner products (exact for unit vectors): ip and cosine give 1 − s,
        l2 the squared distance 2 − 2s."""
        return 1 - distances / 2 if self.space == "l2" else 1 - distances

    @property
    def nbytes(self) -> int | None:
        return folder_bytes(self._folder) if self._folder is not None else None

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()
