"""Hosted and served models: embeddings from an OpenAI-compatible endpoint (OpenAI, vLLM,
text-embeddings-inference, infinity, Ollama, LM Studio, ...) and reranking by the `/rerank`
contract Cohere, Jina, vLLM and infinity serve, both through the official `openai` client.

`model/embedder=openai` replaces the local model of a dense retriever: the corpus is embedded in
batches of at most `batch_size` texts and about `max_tokens_per_request` tokens (estimated as
characters / 4 before sending), `max_concurrency` requests at a time; the client retries 429s
(honouring `Retry-After`), 5xx answers, timeouts and dropped connections up to `max_retries`
times with its own backoff. The corpus's vectors are cached as a local model's are, under a key of
the endpoint, the model, `dimensions` and the texts (never the key), and so are the questions'.

The API key is read from the environment variable named by `api_key_env`, never from config: it
is not logged, printed, cached or written anywhere, and is masked in any message that would carry
it. What the server returns is checked before anything is cached: one vector per text, in order,
all of one width (`dimensions` when set), finite. Any failure is one line naming the setting.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import Annotated, Any

import numpy as np

from sweep.errors import InputError
from sweep.retrieval.base import Hits
from sweep.retrieval.embed import Embedder
from sweep.retrieval.rerank import Reranker, SearchUnderFilter
from sweep.settings import NonEmpty, Range, checked

log = logging.getLogger(__name__)
CHARS_PER_TOKEN = 4  # the usual estimate for English text, used before a request says the true count
NO_KEY = "not-set"  # sent when the variable is unset: servers that need no key accept anything


class Endpoint:
    """A connection to an HTTP model server: the client (its retries counted), the key read from
    the environment, and every failure as one line naming the setting (`KEY`: the config group)."""

    KEY = "model.embedder"
    model: str
    base_url: str | None
    api_key_env: str
    timeout: float
    max_retries: int

    def _open(self) -> None:
        self._lock = threading.Lock()
        self._attempts = 0

    @property
    def _key(self) -> str:
        return os.environ.get(self.api_key_env) or NO_KEY

    @cached_property
    def client(self) -> Any:
        import httpx2
        import openai

        def count_attempt(request: Any) -> None:  # every try, retries included
            with self._lock:
                self._attempts += 1

        http = httpx2.Client(event_hooks={"request": [count_attempt]}, timeout=self.timeout)
        return openai.OpenAI(
            api_key=self._key,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=self.max_retries,
            http_client=http,
        )

    def _call(self, send: Any, path: str) -> Any:
        """`send()`'s answer from the server's `path` (/embeddings, /rerank); the client's exceptions as one line."""
        import openai

        try:
            return send()
        except openai.APIStatusError as error:
            raise InputError(self._status_message(error, path)) from None
        except openai.APITimeoutError:
            raise InputError(
                f"{self.KEY}.base_url={self.base_url}: no answer within {self.KEY}.timeout={self.timeout} s, "
                f"{self.max_retries} retries included"
            ) from None
        except openai.APIConnectionError as error:
            raise InputError(f"{self.KEY}.base_url={self.base_url}: cannot connect ({self._masked(error)})") from None
        except (openai.APIError, ValueError) as error:  # a body that is not JSON, or not the expected shape
            raise InputError(
                f"{self.KEY}.base_url={self.base_url}: not a {path} answer ({self._masked(error)})"
            ) from None

    def _status_message(self, error: Any, path: str) -> str:
        status, server = error.status_code, self.base_url or "OpenAI"
        if status in (401, 403):
            state = "is not set" if self._key == NO_KEY else "holds a key the server refused"
            return f"{self.KEY}.api_key_env={self.api_key_env}: the variable {state} ({status} from {server})"
        if status == 404:
            return f"{self.KEY}.model={self.model}: {server} has no such model or no {path} (404)"
        return f"{self.KEY}.base_url={self.base_url}: HTTP {status} after {self.max_retries} retries ({self._masked(error)})"

    def _masked(self, error: Exception) -> str:
        text = " ".join(str(error).split())[:300]
        return text.replace(self._key, "***") if self._key != NO_KEY else text


@checked("model.embedder")
class OpenAIEmbedder(Endpoint, Embedder):
    """`model`: the endpoint's model name; `base_url`: e.g. http://127.0.0.1:8080/v1 (null: OpenAI's
    own); `dimensions`: shorter vectors from a model that offers them; `price_per_mtok`: US$ per
    million input tokens, for `cost/embed_usd` (null: the list price of a model named in
    `data/embedding_prices.yaml`, else unknown); `max_cost_usd`: refuse a run whose uncached
    corpus is estimated to cost more."""

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
        self.model, self.base_url, self.api_key_env, self.dimensions = model, base_url, api_key_env, dimensions
        self.batch_size, self.max_tokens_per_request, self.max_concurrency = (
            batch_size,
            max_tokens_per_request,
            max_concurrency,
        )
        self.timeout, self.max_retries = timeout, max_retries
        self.price_per_mtok = price_per_mtok if price_per_mtok is not None else list_price(model)
        self.max_cost_usd = max_cost_usd
        self._open()
        self._counts = {"requests": 0, "tokens": 0, "query_tokens": 0, "query_requests": 0}
        self._width: int | None = dimensions

    def load(self) -> Any:
        return self.client

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
        tokens = sum(estimated_tokens(text) for text in texts)
        cost = tokens * self.price_per_mtok / 1e6 if self.price_per_mtok is not None else None
        shown = f"about ${cost:.4f}" if cost is not None else "cost unknown (set model.embedder.price_per_mtok)"
        log.info(
            "embedding %d chunks not in the cache with %s: about %d tokens, %s", len(texts), self.model, tokens, shown
        )
        if self.max_cost_usd is not None and cost is not None and cost > self.max_cost_usd:
            raise InputError(
                f"model.embedder.max_cost_usd={self.max_cost_usd}: embedding {len(texts)} uncached chunks with "
                f"{self.model} is estimated at ${cost:.4f} ({tokens} tokens at ${self.price_per_mtok}/M); nothing was sent"
            )
        if self.max_cost_usd is not None and cost is None:
            raise InputError(
                "model.embedder.max_cost_usd is set but model.embedder.price_per_mtok is not: no estimate to check"
            )

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
            "embed/retries": float(self._attempts - counts["requests"] - counts["query_requests"]),
        }
        if self.price_per_mtok is not None:
            stats["cost/embed_usd"] = counts["tokens"] * self.price_per_mtok / 1e6
            stats["cost/query_usd"] = counts["query_tokens"] * self.price_per_mtok / 1e6
        return stats

    def _encode(self, texts: Sequence[str], tokens: str, requests: str) -> np.ndarray:
        if not texts:
            return np.empty((0, self._width or 0), dtype=np.float32)
        batches = list(self._batches(texts))
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(batches))) as pool:
            answers = list(pool.map(self._request, batches))
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
        answer = self._call(
            lambda: self.client.embeddings.create(model=self.model, input=batch, encoding_format="float", **options),
            "/embeddings",
        )
        vectors = self._checked(answer, len(batch))
        usage = getattr(answer, "usage", None)
        used = getattr(usage, "prompt_tokens", None)
        return vectors, int(used) if used is not None else sum(estimated_tokens(text) for text in batch)

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
class APIReranker(Endpoint, Reranker):
    """Scores (question, chunk) pairs of the top `candidates` hits at a `/rerank` endpoint (Cohere,
    Jina, vLLM, infinity: `{model, query, documents, top_n}` → `results[{index, relevance_score}]`);
    only those are returned, best first, as `reranker=cross_encoder` does with a local model.
    `rerank/requests`, `rerank/retries` and, when the server counts them, `rerank/tokens`."""

    KEY = "reranker"

    def __init__(
        self,
        model: Annotated[str, NonEmpty()],
        base_url: Annotated[str | None, NonEmpty()] = None,
        api_key_env: Annotated[str, NonEmpty()] = "RERANK_API_KEY",
        candidates: Annotated[int, Range(1)] = 100,
        timeout: Annotated[float, Range(0.001)] = 60.0,
        max_retries: Annotated[int, Range(0, 20)] = 5,
    ) -> None:
        self.model, self.base_url, self.api_key_env, self.candidates = model, base_url, api_key_env, candidates
        self.timeout, self.max_retries = timeout, max_retries
        self._open()
        self._requests = self._tokens = 0

    def build(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)
        self.client  # noqa: B018 (opened now, not during the first question's clock)

    def rerank(self, query: str, hits: Hits, search: SearchUnderFilter) -> Hits:
        top = hits[: self.candidates]
        if not len(top):
            return top
        body = {
            "model": self.model,
            "query": query,
            "documents": [self.texts[i] for i in top.ids.tolist()],
            "top_n": len(top),
        }
        answer = self._call(lambda: self.client.post("/rerank", cast_to=object, body=body), "/rerank")
        scores = self._checked(answer, len(top))
        with self._lock:
            self._requests += 1
            self._tokens += int((answer.get("usage") or {}).get("total_tokens") or 0)
        order = np.argsort(-scores, kind="stable")  # equal scores keep the retriever's order
        return Hits(scores[order], top.ids[order])

    def stats(self) -> dict[str, float]:
        stats = {"rerank/requests": float(self._requests), "rerank/retries": float(self._attempts - self._requests)}
        return stats | ({"rerank/tokens": float(self._tokens)} if self._tokens else {})

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


def estimated_tokens(text: str) -> int:
    """Tokens a text is estimated to cost before a server counts them: characters / 4, at least 1."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))
