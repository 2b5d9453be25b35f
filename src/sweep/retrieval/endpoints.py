"""Hosted and served models: embeddings from an OpenAI-compatible endpoint (OpenAI, vLLM,
text-embeddings-inference, infinity, Ollama, LM Studio, ...) and reranking by the `/rerank`
contract Cohere, Jina, vLLM and infinity serve, both through the shared endpoint client
(`sweep.retrieval.model_client`: the official `openai` client with its retries, `Retry-After`,
timeouts, the key from the environment, concurrency, tokens, cost and the cost cap).

`model/embedder=openai` replaces the local model of a dense retriever: the corpus is embedded in
batches of at most `batch_size` texts and about `max_tokens_per_request` tokens (estimated as
characters / 4 before sending), `max_concurrency` requests at a time. The corpus's vectors are
cached as a local model's are, under a key of the endpoint, the model, `dimensions` and the texts
(never the key), and so are the questions'. An `api_key_env` that is not a variable's name (the
key itself) and a `base_url` with credentials in it are refused before anything is sent or logged
(`sweep.retrieval.model_client.check_key_variable`, `check_base_url`). What the server returns is
checked before anything is cached: one vector per text, in order, all of one width (`dimensions`
when set), finite. Any failure is one line naming the setting.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from functools import cached_property
from typing import Annotated, Any

import numpy as np

from sweep.errors import InputError
from sweep.retrieval.embed import Embedder
from sweep.retrieval.model_client import Connection, ModelClient, Usage, estimated_tokens
from sweep.retrieval.rerank import Reranker, SearchUnderFilter
from sweep.retrieval.retriever import Hits
from sweep.settings import NonEmpty, Range, checked


@checked("model.embedder")
class OpenAIEmbedder(Embedder):
    """`model`: the endpoint's model name; `base_url`: e.g. http://127.0.0.1:8080/v1 (null: OpenAI's
    own); `dimensions`: shorter vectors from a model that offers them; `price_per_mtok`: US$ per
    million input tokens, for `cost/embed_usd` (null: the list price of a model named in
    `data/embedding_prices.yaml`, else unknown); `max_cost_usd`: refuse a run whose uncached
    corpus is estimated to cost more, and stop one whose requests would."""

    remote = True

    def __init__(
        self,
        model: Annotated[str, NonEmpty()],
        base_url: Annotated[str | None, NonEmpty()] = None,
        api_key_env: Annotated[str, NonEmpty()] = "OPENAI_API_KEY",
        dimensions: Annotated[int | None, Range(1)] = None,
        batch_size: Annotated[int, Range(1, 2048)] = 128,
        max_tokens_per_request: Annotated[int, Range(1)] = 100_000,
        max_concurrency: Annotated[int, Range(1, 64)] = 4,
        timeout: Annotated[float, Range(0.001)] = 60.0,
        max_retries: Annotated[int, Range(0, 20)] = 5,
        price_per_mtok: Annotated[float | None, Range(0)] = None,
        max_cost_usd: Annotated[float | None, Range(0)] = None,
    ) -> None:
        self.model, self.base_url, self.dimensions = model, base_url, dimensions
        self.batch_size, self.max_tokens_per_request = batch_size, max_tokens_per_request
        self.price_per_mtok = price_per_mtok if price_per_mtok is not None else list_price(model)
        self.endpoint = ModelClient(
            "model.embedder",
            Connection(model, base_url, api_key_env, timeout, max_retries),
            max_concurrency=max_concurrency,
            price_per_mtok=self.price_per_mtok,
            max_cost_usd=max_cost_usd,
        )
        self._lock = threading.Lock()
        self._counts = {"requests": 0, "tokens": 0, "query_tokens": 0, "query_requests": 0}
        self._width: int | None = dimensions

    def load(self) -> Any:
        return self.endpoint.client

    @cached_property
    def identity(self) -> dict[str, Any]:
        return {
            "kind": "openai-compatible",
            "base_url": self.base_url or "openai",
            "model": self.model,
            "dimensions": self.dimensions,
        }

    def before_embedding(self, texts: Sequence[str]) -> None:
        """One line with the uncached texts' estimated tokens and cost; an InputError when the
        cost is above `max_cost_usd`, before any request."""
        estimate = Usage(sum(estimated_tokens(text) for text in texts))
        self.endpoint.refuse_above_cap(estimate, f"embedding {len(texts)} uncached chunks with {self.model}")

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, "tokens", "requests")

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, "query_tokens", "query_requests")

    def stats(self) -> dict[str, float]:
        """`embed/tokens` and `embed/requests` for the corpus, `embed/query_tokens` and
        `embed/query_requests` for the questions, `embed/retries` (every retried try),
        `cost/embed_usd` and `cost/query_usd` (when `price_per_mtok` is set)."""
        counts = self._counts
        stats = {
            "embed/tokens": float(counts["tokens"]),
            "embed/requests": float(counts["requests"]),
            "embed/query_tokens": float(counts["query_tokens"]),
            "embed/query_requests": float(counts["query_requests"]),
            "embed/retries": float(self.endpoint.retries),
        }
        if self.price_per_mtok is not None:
            stats["cost/embed_usd"] = counts["tokens"] * self.price_per_mtok / 1e6
            stats["cost/query_usd"] = counts["query_tokens"] * self.price_per_mtok / 1e6
        return stats

    def _encode(self, texts: Sequence[str], tokens: str, requests: str) -> np.ndarray:
        if not texts:
            return np.empty((0, self._width or 0), dtype=np.float32)
        batches = list(self._batches(texts))
        answers = self.endpoint.map(self._request, batches)
        with self._lock:
            self._counts[requests] += len(answers)
            self._counts[tokens] += sum(used for _, used in answers)
        return np.concatenate([vectors for vectors, _ in answers])

    def _batches(self, texts: Sequence[str]) -> Any:
        batch: list[str] = []
        budget = 0
        for text in texts:
            cost = estimated_tokens(text)
            if batch and (len(batch) == self.batch_size or budget + cost > self.max_tokens_per_request):
                yield batch
                batch, budget = [], 0
            batch.append(text)
            budget += cost
        yield batch

    def _request(self, batch: list[str]) -> tuple[np.ndarray, int]:
        """One batch's unit vectors, checked, and the tokens the server counted (estimated if it did not say)."""
        options = {"dimensions": self.dimensions} if self.dimensions is not None else {}
        sent = self.endpoint.send(
            lambda client: client.embeddings.create(model=self.model, input=batch, encoding_format="float", **options),
            "/embeddings",
            Usage(sum(estimated_tokens(text) for text in batch)),
        )
        return self._checked(sent.answer, len(batch)), sent.usage.prompt_tokens

    def _checked(self, answer: Any, expected: int) -> np.ndarray:
        where = f"model.embedder: {self.base_url or 'OpenAI'} ({self.model})"
        if not isinstance(getattr(answer, "data", None), list):  # the client hands a body that is not JSON back as text
            body = " ".join(str(answer).split())[:80]
            raise InputError(
                f"model.embedder.base_url={self.base_url}: not a /embeddings answer (the body begins {body!r})"
            )
        data = answer.data
        if len(data) != expected:
            raise InputError(f"{where} returned {len(data)} vectors for {expected} texts")
        indices = sorted(item.index for item in data)
        if indices != list(range(expected)):
            raise InputError(f"{where} returned vectors for positions {indices[:5]}... instead of 0 to {expected - 1}")
        rows = [item.embedding for item in sorted(data, key=lambda item: item.index)]
        widths = {len(row) for row in rows}
        if len(widths) != 1:
            raise InputError(f"{where} returned vectors of different widths {sorted(widths)}")
        width = widths.pop()
        with self._lock:
            if self._width is not None and width != self._width:
                wanted = "model.embedder.dimensions" if self.dimensions is not None else "its earlier answers"
                raise InputError(f"{where} returned {width}-dimensional vectors where {wanted} gave {self._width}")
            self._width = width
        vectors = np.asarray(rows, dtype=np.float32)
        if not np.isfinite(vectors).all():
            raise InputError(f"{where} returned vectors with NaN or infinite values")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if (norms == 0).any():
            raise InputError(f"{where} returned an all-zero vector")
        return vectors / norms  # unit length: the index's inner product is then the cosine


@checked("reranker")
class APIReranker(Reranker):
    """Scores (question, chunk) pairs of the top `candidates` hits at a `/rerank` endpoint (Cohere,
    Jina, vLLM, infinity: `{model, query, documents, top_n}` → `results[{index, relevance_score}]`);
    only those are returned, best first, as `reranker=cross_encoder` does with a local model.
    `rerank/requests`, `rerank/retries`, `rerank/tokens` when the server counts them, and
    `cost/rerank_usd` when `price_per_mtok` (US$ per million tokens sent) is set; `max_cost_usd`
    stops the run before a request would take the cost above it."""

    def __init__(
        self,
        model: Annotated[str, NonEmpty()],
        base_url: Annotated[str | None, NonEmpty()] = None,
        api_key_env: Annotated[str, NonEmpty()] = "RERANK_API_KEY",
        candidates: Annotated[int, Range(1)] = 100,
        timeout: Annotated[float, Range(0.001)] = 60.0,
        max_retries: Annotated[int, Range(0, 20)] = 5,
        price_per_mtok: Annotated[float | None, Range(0)] = None,
        max_cost_usd: Annotated[float | None, Range(0)] = None,
    ) -> None:
        self.model, self.base_url, self.candidates = model, base_url, candidates
        self.endpoint = ModelClient(
            "reranker",
            Connection(model, base_url, api_key_env, timeout, max_retries),
            price_per_mtok=price_per_mtok,
            max_cost_usd=max_cost_usd,
            key_example="RERANK_API_KEY",
        )
        self._counted_tokens = 0

    def build(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)
        self.endpoint.client  # noqa: B018 (opened now, not during the first question's clock)

    def rerank(self, query: str, hits: Hits, search: SearchUnderFilter) -> Hits:
        top = hits[: self.candidates]
        if not len(top):
            return top
        documents = [self.texts[i] for i in top.ids.tolist()]
        body = {"model": self.model, "query": query, "documents": documents, "top_n": len(top)}
        estimate = Usage(sum(estimated_tokens(query) + estimated_tokens(document) for document in documents))
        sent = self.endpoint.send(lambda client: client.post("/rerank", cast_to=object, body=body), "/rerank", estimate)
        if sent.counted:
            self._counted_tokens += sent.usage.prompt_tokens
        scores = self._checked(sent.answer, len(top))
        self.endpoint.raise_if_over_cap()
        order = np.argsort(-scores, kind="stable")  # equal scores keep the retriever's order
        return Hits(scores[order], top.ids[order])

    def stats(self) -> dict[str, float]:
        stats = {"rerank/requests": float(self.endpoint.answered), "rerank/retries": float(self.endpoint.retries)}
        if self._counted_tokens:
            stats["rerank/tokens"] = float(self._counted_tokens)
        if self.endpoint.price_per_mtok is not None:
            stats["cost/rerank_usd"] = self.endpoint.spent_usd
        return stats

    def _checked(self, answer: Any, expected: int) -> np.ndarray:
        """One finite score per document, each index once."""
        where = f"reranker: {self.base_url or 'OpenAI'} ({self.model})"
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list):
            raise InputError(f"reranker.base_url={self.base_url}: not a /rerank answer (no results list)")
        scores = np.full(expected, np.nan, dtype=np.float32)
        for result in results:
            index, score = result.get("index") if isinstance(result, dict) else None, None
            if isinstance(result, dict):
                score = result.get("relevance_score", result.get("score"))
            if not isinstance(index, int) or not 0 <= index < expected or not np.isnan(scores[index]):
                raise InputError(
                    f"{where} returned index {index!r} for {expected} documents (each 0 to {expected - 1} once)"
                )
            if not isinstance(score, (int, float)) or not math.isfinite(score):
                raise InputError(f"{where} returned score {score!r} for document {index}")
            scores[index] = score
        if np.isnan(scores).any():
            raise InputError(f"{where} scored {int((~np.isnan(scores)).sum())} of {expected} documents")
        return scores


def list_price(model: str) -> float | None:
    """US$ per million input tokens of a known hosted model (`data/embedding_prices.yaml`), else None."""
    from importlib import resources

    import yaml

    prices = yaml.safe_load(resources.files("sweep.data").joinpath("embedding_prices.yaml").read_text())
    return prices.get(model)
