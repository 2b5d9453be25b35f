"""Chat completions from any OpenAI-compatible server (Ollama, vLLM, llama.cpp's llama-server, a
hosted API), for an LLM judge and a question generator, through the shared endpoint client
(`sweep.retrieval.model_client`: retries, `Retry-After`, timeouts, the key from the environment,
concurrency, tokens, cost and the cost cap).

A prompt is a string (one user message) or a list of `{"role", "content"}` messages. A batch is
estimated before anything is sent (characters / 4 in, `max_tokens` out per prompt) and refused
when that would take the cost above `max_cost_usd`; then its prompts are answered
`max_concurrency` at a time and returned in the prompts' order, each with its tokens and cost.
With `cache_dir`, every answer is kept on disk under a hash of everything that shapes it
(endpoint, model, messages, temperature, seed, max_tokens, JSON mode; never the key), so a second
run of the same prompts sends nothing. `json_answers` asks for a JSON object
(`response_format={"type": "json_object"}`); a server that refuses that option is asked again
without it, and `ChatAnswer.parsed` reads JSON from whatever came back, or says it is not JSON.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from sweep.errors import InputError
from sweep.formats.files import write_text_atomically
from sweep.retrieval.model_client import Connection, ModelClient, Sent, Usage, estimated_tokens
from sweep.settings import NonEmpty, Range, checked

log = logging.getLogger(__name__)
Messages = Sequence[Mapping[str, str]]
Prompt = str | Messages
ROLES = ("system", "user", "assistant")
MESSAGE_OVERHEAD_TOKENS = 4  # what the chat format adds around each message (role, separators)
PATH = "/chat/completions"
FENCED = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)  # how local models often wrap JSON


@dataclass(frozen=True)
class ChatAnswer:
    """One prompt's answer: its text, the tokens it took (as the server counted them, else
    estimated) and what it cost this run (0 from the cache; None when no price is set)."""

    text: str
    usage: Usage
    cost_usd: float | None
    cached: bool
    finish_reason: str | None  # "stop", or "length" when `max_tokens` cut it short

    def parsed(self) -> Any | None:
        """The answer read as JSON (also inside a ``` fence), None when it is not JSON."""
        text = self.text.strip()
        fenced = FENCED.fullmatch(text)
        try:
            return json.loads(fenced.group(1) if fenced else text)
        except ValueError:
            return None


@dataclass(frozen=True)
class Estimate:
    """What a batch would cost before anything is sent: the prompts not in the cache, their
    tokens (characters / 4 in, `max_tokens` out each: an upper bound of what comes back) and cost."""

    prompts: int
    usage: Usage
    cost_usd: float | None


@checked("chat")
class ChatClient:
    """`model`: the server's model name; `base_url`: e.g. http://localhost:11434/v1 (null: OpenAI's
    own); `temperature`, `seed`, `max_tokens`: as the chat API takes them (every answer is cut at
    `max_tokens`, and the estimates count that many); `price_per_mtok` and
    `output_price_per_mtok`: US$ per million tokens sent and received (null: unknown; 0 for a
    local server); `settings`: where messages say these settings live, a config group (`judge` →
    `judge.max_cost_usd`) or `--` for a command's flags (`--max-cost-usd`)."""

    def __init__(
        self,
        model: Annotated[str, NonEmpty()],
        base_url: Annotated[str | None, NonEmpty()] = None,
        api_key_env: Annotated[str, NonEmpty()] = "OPENAI_API_KEY",
        temperature: Annotated[float, Range(0, 2)] = 0.0,
        seed: int | None = None,
        max_tokens: Annotated[int, Range(1)] = 1024,
        json_answers: bool = False,
        max_concurrency: Annotated[int, Range(1, 64)] = 4,
        timeout: Annotated[float, Range(0.001)] = 60.0,
        max_retries: Annotated[int, Range(0, 20)] = 5,
        price_per_mtok: Annotated[float | None, Range(0)] = None,
        output_price_per_mtok: Annotated[float | None, Range(0)] = None,
        max_cost_usd: Annotated[float | None, Range(0)] = None,
        cache_dir: Annotated[str | None, NonEmpty()] = None,
        settings: Annotated[str, NonEmpty()] = "chat",
    ) -> None:
        self.model, self.base_url = model, base_url
        self.temperature, self.seed, self.max_tokens, self.json_answers = temperature, seed, max_tokens, json_answers
        self.endpoint = ModelClient(
            settings,
            Connection(model, base_url, api_key_env, timeout, max_retries),
            max_concurrency=max_concurrency,
            price_per_mtok=price_per_mtok,
            output_price_per_mtok=output_price_per_mtok,
            max_cost_usd=max_cost_usd,
        )
        self.cache = Path(cache_dir) if cache_dir is not None else None
        self._json_mode = json_answers  # until the server refuses response_format
        self._lock = threading.Lock()
        self._from_cache = 0

    def estimate(self, prompts: Sequence[Prompt]) -> Estimate:
        """The tokens and cost of the `prompts` that are not in the cache; nothing is sent."""
        uncached = [messages for messages in map(as_messages, prompts) if self._stored(messages) is None]
        usage = sum((self._estimated(messages) for messages in uncached), Usage())
        return Estimate(len(uncached), usage, self.endpoint.cost(usage))

    def complete(self, prompt: Prompt) -> ChatAnswer:
        """One prompt's answer, from the cache or the server; an InputError (one line naming the
        setting) when the server fails, its answer is not a chat completion, or the cost cap stops it."""
        messages = as_messages(prompt)
        stored = self._stored(messages)
        if stored is not None:
            with self._lock:
                self._from_cache += 1
            return stored
        sent = self.endpoint.send(lambda client: self._create(client, messages), PATH, self._estimated(messages))
        answer = self._answer(sent)
        self._store(messages, answer)
        self.endpoint.raise_if_over_cap()  # after storing: what was paid for is kept
        return answer

    def complete_all(self, prompts: Sequence[Prompt]) -> list[ChatAnswer]:
        """Every prompt's answer, in the prompts' order, `max_concurrency` at a time; refused
        before anything is sent when the estimate would take the cost above `max_cost_usd`."""
        estimate = self.estimate(prompts)
        self.endpoint.refuse_above_cap(estimate.usage, f"{estimate.prompts} prompts not in the cache for {self.model}")
        return self.endpoint.map(self.complete, prompts)

    def stats(self, prefix: str = "chat") -> dict[str, float]:
        """`<prefix>/requests` (answered by the server), `<prefix>/cached`, `<prefix>/retries`,
        `<prefix>/prompt_tokens` and `<prefix>/completion_tokens` of the answers sent this run, and
        `cost/<prefix>_usd` when both prices are set."""
        endpoint = self.endpoint
        stats = {
            f"{prefix}/requests": float(endpoint.answered),
            f"{prefix}/cached": float(self._from_cache),
            f"{prefix}/retries": float(endpoint.retries),
            f"{prefix}/prompt_tokens": float(endpoint.usage.prompt_tokens),
            f"{prefix}/completion_tokens": float(endpoint.usage.completion_tokens),
        }
        if endpoint.cost(Usage(1, 1)) is not None:
            stats[f"cost/{prefix}_usd"] = endpoint.spent_usd
        return stats

    def _create(self, client: Any, messages: list[dict[str, str]]) -> Any:
        import openai

        options: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.seed is not None:
            options["seed"] = self.seed
        if not self._json_mode:
            return client.chat.completions.create(**options)
        try:
            return client.chat.completions.create(**options, response_format={"type": "json_object"})
        except (openai.BadRequestError, openai.UnprocessableEntityError):
            answer = client.chat.completions.create(**options)  # a failure here is the server's, not JSON mode's
            log.info(
                "%s does not take response_format; asking %s for JSON in the prompt only", self._server, self.model
            )
            self._json_mode = False
            return answer

    @property
    def _server(self) -> str:
        return self.base_url or "OpenAI"

    def _answer(self, sent: Sent[Any]) -> ChatAnswer:
        """The sent request's answer, checked to be a chat completion."""
        choices = getattr(sent.answer, "choices", None)
        if not isinstance(choices, list) or not choices or getattr(choices[0], "message", None) is None:
            body = " ".join(str(sent.answer).split())[:80]  # the client hands a body that is not JSON back as text
            raise InputError(
                f"{self.endpoint.name('base_url')}={self.base_url}: not a {PATH} answer (the body begins {body!r})"
            )
        text = choices[0].message.content
        if text is not None and not isinstance(text, str):
            raise InputError(f"{self.endpoint.name('base_url')}={self.base_url}: message content {text!r} is not text")
        return ChatAnswer(text or "", sent.usage, sent.cost_usd, False, getattr(choices[0], "finish_reason", None))

    def _estimated(self, messages: Messages) -> Usage:
        sent = sum(estimated_tokens(message["content"]) + MESSAGE_OVERHEAD_TOKENS for message in messages)
        return Usage(sent, self.max_tokens)

    def _cache_file(self, messages: Messages) -> Path | None:
        if self.cache is None:
            return None
        shaping = {
            "base_url": self.base_url or "openai",
            "model": self.model,
            "messages": list(messages),
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "json_answers": self.json_answers,
        }
        digest = hashlib.sha256(json.dumps(shaping, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
        return self.cache / f"{digest}.json"

    def _stored(self, messages: Messages) -> ChatAnswer | None:
        """The cached answer to `messages`, None when there is none (or it does not read back whole)."""
        path = self._cache_file(messages)
        if path is None or not path.is_file():
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            usage = Usage(int(entry["prompt_tokens"]), int(entry["completion_tokens"]))
            answer = ChatAnswer(str(entry["text"]), usage, 0.0, True, entry.get("finish_reason"))
        except (OSError, ValueError, KeyError, TypeError) as error:
            log.warning("%s: damaged chat cache entry (%s); asking again", path, type(error).__name__)
            return None
        return answer

    def _store(self, messages: Messages, answer: ChatAnswer) -> None:
        path = self._cache_file(messages)
        if path is None:
            return
        entry = {
            "text": answer.text,
            "finish_reason": answer.finish_reason,
            "prompt_tokens": answer.usage.prompt_tokens,
            "completion_tokens": answer.usage.completion_tokens,
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomically(path, json.dumps(entry, ensure_ascii=False))
        except OSError as error:  # the answer is used; only the cache misses out
            log.warning("%s: could not store the answer (%s); this run goes on without caching it", path, error)


def as_messages(prompt: Prompt) -> list[dict[str, str]]:
    """A prompt as chat messages: a string is one user message; each message needs a known role
    and text content."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    messages = [dict(message) for message in prompt]
    for number, message in enumerate(messages, 1):
        if message.get("role") not in ROLES or not isinstance(message.get("content"), str):
            raise InputError(
                f"chat prompt: message {number} needs a role ({', '.join(ROLES)}) and text content, not {message!r}"
            )
    if not messages:
        raise InputError("chat prompt: no messages")
    return messages
