"""One HTTP client for every model endpoint the sweep talks to (embeddings, `/rerank`, chat
completions), built on the official `openai` client.

The client retries a 429 (waiting as its `Retry-After` says), a 5xx answer, a timeout (`timeout`
seconds per try) and a dropped connection up to `max_retries` times with its own backoff; every try
is counted, so the retries are known. The API key is read from the environment variable
`api_key_env` names, never from config: it is sent to the server and nowhere else, and masked in
any message that would carry it. A value of `api_key_env` that is not a variable's name (the key
itself, pasted where its variable's name belongs) and a `base_url` that carries credentials
(`https://user:password@host`, `?api_key=...`) are refused when the client is made, in one line
that does not show them (`check_key_variable`, `check_base_url`): `python -m sweep` checks its
command line and every combination with them before Hydra writes a file or MLflow a param. At most
`max_concurrency` requests are in flight at once, however many threads ask. Tokens come from each
answer's `usage` (estimated as characters / 4 where a server does not say) and cost from the prices
per million tokens; `max_cost_usd` is checked before each request, with its estimate added to what
was spent and what is in flight, and again with the real usage once a batch is answered. Every
failure is one line naming the setting to look at (`model.embedder.timeout`,
`reranker.api_key_env`, `--max-cost-usd`, ...).
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qsl, urlsplit

from sweep.errors import InputError

log = logging.getLogger(__name__)
CHARS_PER_TOKEN = 4  # the usual estimate for English text, used before a server says the true count
NO_KEY = "not-set"  # sent when the variable is unset: servers that need no key accept anything
FLAGS = "--"  # `settings` that names command-line flags (--max-cost-usd) instead of config keys
T = TypeVar("T")
Item = TypeVar("Item")
VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # what a shell takes as an environment variable's name
KEY_PREFIXES = ("sk-", "sk_", "rk_", "pk_", "ghp_", "gho_", "ghs_", "github_pat_", "glpat-", "xox", "AKIA", "AIza")
KEY_LIKE_PART = 16  # letters and digits mixed over this many characters: a secret, not a word of a name
LONGEST_NAME = 64  # a longer value is taken for a key, whatever its characters
SECRET_PARAMETERS = set("key api_key apikey api-key token access_token auth password secret sig".split())  # in a query


def estimated_tokens(text: str) -> int:
    """Tokens a text is estimated to cost before a server counts them: characters / 4, at least 1."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def setting_name(settings: str, setting: str) -> str:
    """How a message names a setting: `<settings>.<setting>` for a config group (`reranker.timeout`),
    the command-line flag (`--max-cost-usd`) when `settings` is `--`."""
    return f"--{setting.replace('_', '-')}" if settings == FLAGS else f"{settings}.{setting}"


def looks_like_a_key(value: str) -> bool:
    """Whether `value` looks like a secret rather than a variable's name: a provider's key prefix
    (`sk-`, `ghp_`, `AKIA`, ...), a run of 16 characters or more between separators that mixes
    letters with digits or upper with lower case (a name is words: OPENAI_API_KEY), or more than
    64 characters."""
    parts = re.split(r"[^A-Za-z0-9]+", value)
    mixed = any(
        len(part) >= KEY_LIKE_PART
        and (any(c.isdigit() for c in part) or not (part.isupper() or part.islower()))
        and any(c.isalpha() for c in part)
        for part in parts
    )
    return value.startswith(KEY_PREFIXES) or mixed or len(value) > LONGEST_NAME


def check_key_variable(setting: str, value: object, example: str = "OPENAI_API_KEY") -> None:
    """An InputError unless `value` (the setting `setting`, e.g. `model.embedder.api_key_env`) is an
    environment variable's name that does not look like a key. The message never shows the value:
    it may be the key itself."""
    text = str(value)
    if VARIABLE_NAME.fullmatch(text) and not looks_like_a_key(text):
        return
    why = (
        f"it looks like a key itself: give the variable that holds it, e.g. {example}"
        if looks_like_a_key(text)
        else f"a name is letters, digits and _, not starting with a digit: give the variable that holds the key, e.g. {example}"
    )
    raise InputError(f"{setting}: not an environment variable's name ({why}); the value is not shown")


def check_base_url(setting: str, value: object, key_setting: str) -> None:
    """An InputError when the address `value` (the setting `setting`) carries credentials: a user or
    password before the host, or a query parameter named like a key (`api_key`, `token`, ...). The
    message shows the address with them masked; the key belongs in the variable `key_setting` names."""
    if value is None:
        return
    text = str(value)
    try:
        parts = urlsplit(text)
    except ValueError:  # an unbalanced [ of an IPv6 host
        raise InputError(f"{setting}: not an address (e.g. http://127.0.0.1:8080/v1); the value is not shown") from None
    secret = {name for name, _ in parse_qsl(parts.query, keep_blank_values=True)} & SECRET_PARAMETERS
    if "@" not in parts.netloc and not secret:
        return
    host = parts.netloc.rpartition("@")[2]
    masked = parts._replace(
        netloc=f"***@{host}" if "@" in parts.netloc else host, query="***" if secret else parts.query
    )
    raise InputError(
        f"{setting}: the address carries credentials ({masked.geturl()}); give it without them, and the key in "
        f"the environment variable {key_setting} names; the credentials are not shown"
    )


@dataclass(frozen=True)
class Usage:
    """Tokens one request sent (`prompt_tokens`) and got back (`completion_tokens`)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens)

    def __str__(self) -> str:
        out = f", {self.completion_tokens} out" if self.completion_tokens else ""
        return f"{self.prompt_tokens} tokens in{out}"


@dataclass(frozen=True)
class Connection:
    """Where an endpoint is and how long to try it: the settings every endpoint component declares."""

    model: str
    base_url: str | None  # None: OpenAI's own API
    api_key_env: str  # the NAME of the environment variable holding the key
    timeout: float  # seconds per try
    max_retries: int


@dataclass(frozen=True)
class Sent(Generic[T]):
    """A request's answer, its usage (as the server counted it, else the estimate) and cost (None: no price)."""

    answer: T
    usage: Usage
    counted: bool  # whether the server reported the usage
    cost_usd: float | None


class ModelClient:
    """The connection to one model endpoint, shared by its requests: see the module's docstring.
    `settings` is where its settings live, for messages: a config group (`model.embedder`,
    `reranker`, `judge`) or `--` for a command's flags. `price_per_mtok` and
    `output_price_per_mtok`: US$ per million tokens sent and received (None: unknown)."""

    def __init__(
        self,
        settings: str,
        connection: Connection,
        *,
        max_concurrency: int = 1,
        price_per_mtok: float | None = None,
        output_price_per_mtok: float | None = 0.0,
        max_cost_usd: float | None = None,
        key_example: str = "OPENAI_API_KEY",
    ) -> None:
        """`key_example`: the variable a message about `api_key_env` suggests (the setting's default)."""
        self.settings, self.max_concurrency = settings, max_concurrency
        check_key_variable(setting_name(settings, "api_key_env"), connection.api_key_env, key_example)
        check_base_url(setting_name(settings, "base_url"), connection.base_url, setting_name(settings, "api_key_env"))
        self.model, self.base_url, self.api_key_env = connection.model, connection.base_url, connection.api_key_env
        self.timeout, self.max_retries = connection.timeout, connection.max_retries
        self.price_per_mtok, self.output_price_per_mtok = price_per_mtok, output_price_per_mtok
        self.max_cost_usd = max_cost_usd
        unpriced = [name for name in ("price_per_mtok", "output_price_per_mtok") if getattr(self, name) is None]
        if max_cost_usd is not None and unpriced:
            raise InputError(
                f"{self.name('max_cost_usd')} is set but {self.name(unpriced[0])} is not: no estimate to check"
            )
        self._lock = threading.Lock()
        self._in_flight = threading.BoundedSemaphore(max_concurrency)
        self._attempts = self._sent = self._answered = 0
        self._spent = self._reserved = 0.0
        self._used = Usage()

    def name(self, setting: str) -> str:
        return setting_name(self.settings, setting)

    @property
    def _key(self) -> str:  # read from the environment when needed: never an attribute, never in config
        return os.environ.get(self.api_key_env) or NO_KEY

    @cached_property
    def client(self) -> Any:
        """The `openai.OpenAI` client; every try it makes (retries included) is counted."""
        import openai

        def count_attempt(request: Any) -> None:
            with self._lock:
                self._attempts += 1

        http = openai.DefaultHttpxClient(event_hooks={"request": [count_attempt]}, timeout=self.timeout)
        return openai.OpenAI(
            api_key=self._key,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=self.max_retries,
            http_client=http,
        )

    def cost(self, usage: Usage) -> float | None:
        """US$ for `usage` at the prices; None when a price it needs is unknown."""
        if self.price_per_mtok is None or (usage.completion_tokens and self.output_price_per_mtok is None):
            return None
        return (
            usage.prompt_tokens * self.price_per_mtok + usage.completion_tokens * (self.output_price_per_mtok or 0)
        ) / 1e6

    def refuse_above_cap(self, estimate: Usage, work: str) -> None:
        """Logs `work`'s estimated tokens and cost; an InputError before any of it is sent when that
        cost, added to what was spent, is above `max_cost_usd` (`work` says what, e.g. "embedding 34
        uncached chunks with MODEL")."""
        cost = self.cost(estimate)
        shown = f"about ${cost:.4f}" if cost is not None else f"cost unknown (set {self.name('price_per_mtok')})"
        log.info("%s: about %s, %s", work, estimate, shown)
        if self.max_cost_usd is not None and cost is not None and self._spent + cost > self.max_cost_usd:
            spent = f", with ${self._spent:.4f} spent already" if self._spent else ""
            raise InputError(
                f"{self.name('max_cost_usd')}={self.max_cost_usd}: {work} is estimated at ${cost:.4f} "
                f"({estimate} at {self._prices()}){spent}; nothing was sent"
            )

    def send(self, request: Callable[[Any], T], path: str, estimate: Usage) -> Sent[T]:
        """`request(client)`'s answer from the server's `path` (/embeddings, /rerank, ...), sent
        within the concurrency limit once the cost cap allows `estimate`; the client's exceptions as
        one line."""
        with self._in_flight:
            reserved = self._reserve(estimate, path)
            try:
                with self._lock:
                    self._sent += 1
                answer = self._translated(lambda: request(self.client), path)
            except BaseException:
                with self._lock:
                    self._reserved -= reserved
                raise
        reported = reported_usage(answer)
        usage = reported or estimate
        cost = self.cost(usage)
        with self._lock:
            self._reserved -= reserved
            self._spent += cost or 0.0
            self._answered += 1
            self._used += usage
        return Sent(answer, usage, reported is not None, cost)

    def map(self, function: Callable[[Item], T], items: Iterable[Item]) -> list[T]:
        """`function` of each item, `max_concurrency` at a time, in the items' order; the first
        failure (in that order) stops what has not started and is raised. Then the real cost is
        checked against the cap."""
        items = list(items)
        if self.max_concurrency == 1 or len(items) <= 1:
            results = [function(item) for item in items]
        else:
            self.client  # noqa: B018 (opened once here, not by threads racing to open it)
            with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(items))) as pool:
                futures = [pool.submit(function, item) for item in items]
                try:
                    results = [future.result() for future in futures]
                except BaseException:
                    for future in futures:
                        future.cancel()
                    raise
        self.raise_if_over_cap()
        return results

    def raise_if_over_cap(self) -> None:
        """An InputError when the answers, at the tokens the server counted, cost more than
        `max_cost_usd` (the estimates before sending were low): nothing more is sent."""
        if self.max_cost_usd is not None and self._spent > self.max_cost_usd:
            raise InputError(
                f"{self.name('max_cost_usd')}={self.max_cost_usd}: the answers cost ${self._spent:.4f} "
                f"({self._used} at {self._prices()}), more than estimated before sending; stopped"
            )

    @property
    def usage(self) -> Usage:
        """Tokens of every answered request (counted by the servers, estimated where one did not say)."""
        return self._used

    @property
    def spent_usd(self) -> float:
        """US$ of every answered request at the prices (0 where a price is unknown)."""
        return self._spent

    @property
    def answered(self) -> int:
        return self._answered

    @property
    def retries(self) -> int:
        """Tries beyond the first of each request: 429s, 5xx answers, timeouts, dropped connections."""
        return self._attempts - self._sent

    def masked(self, text: str) -> str:
        """`text` on one line, at most 300 characters, with the key (if any) replaced by ***."""
        text = " ".join(text.split())
        return (text.replace(self._key, "***") if self._key != NO_KEY else text)[:300]

    def _reserve(self, estimate: Usage, path: str) -> float:
        """`estimate`'s cost, counted as in flight; an InputError if it would take the cost above the cap."""
        cost = self.cost(estimate) or 0.0
        with self._lock:
            total = self._spent + self._reserved + cost
            if self.max_cost_usd is not None and total > self.max_cost_usd:
                raise InputError(
                    f"{self.name('max_cost_usd')}={self.max_cost_usd}: the next {path} request ({estimate}, "
                    f"about ${cost:.4f}) would bring the cost to ${total:.4f}; stopped before sending it "
                    f"(${self._spent:.4f} spent in {self._answered} requests)"
                )
            self._reserved += cost
        return cost

    def _prices(self) -> str:
        output = f", ${self.output_price_per_mtok}/M out" if self.output_price_per_mtok else ""
        return f"${self.price_per_mtok}/M{' in' if output else ''}{output}"

    def _translated(self, send: Callable[[], T], path: str) -> T:
        import openai

        try:
            return send()
        except openai.APIStatusError as error:
            raise InputError(self._status_message(error, path)) from None
        except openai.APITimeoutError:
            raise InputError(
                f"{self.name('base_url')}={self.base_url}: no answer within {self.name('timeout')}={self.timeout} s, "
                f"{self.max_retries} retries included"
            ) from None
        except openai.APIConnectionError as error:
            raise InputError(
                f"{self.name('base_url')}={self.base_url}: cannot connect ({self.masked(str(error))})"
            ) from None
        except (openai.APIError, ValueError) as error:  # a body that is not JSON, or not the expected shape
            raise InputError(
                f"{self.name('base_url')}={self.base_url}: not a {path} answer ({self.masked(str(error))})"
            ) from None

    def _status_message(self, error: Any, path: str) -> str:
        status, server, said = error.status_code, self.base_url or "OpenAI", self.masked(str(error))
        if status in (401, 403):
            state = "is not set" if self._key == NO_KEY else "holds a key the server refused"
            return f"{self.name('api_key_env')}={self.api_key_env}: the variable {state} ({status} from {server})"
        if status == 404:
            return f"{self.name('model')}={self.model}: {server} has no such model or no {path} (404)"
        if status in (408, 409, 429) or status >= 500:  # the statuses the client retries
            return f"{self.name('base_url')}={self.base_url}: HTTP {status} after {self.name('max_retries')}={self.max_retries} retries ({said})"
        return f"{self.name('base_url')}={self.base_url}: HTTP {status} for {path} with {self.name('model')}={self.model} ({said})"


def reported_usage(answer: Any) -> Usage | None:
    """The tokens an answer's `usage` reports (an object or a JSON mapping; `total_tokens` where
    `prompt_tokens` is missing), None when it reports none."""
    usage = answer.get("usage") if isinstance(answer, Mapping) else getattr(answer, "usage", None)
    field = usage.get if isinstance(usage, Mapping) else lambda name: getattr(usage, name, None)
    counts = {name: field(name) for name in ("prompt_tokens", "completion_tokens", "total_tokens")}
    if not any(isinstance(count, int) for count in counts.values()):
        return None
    completion = counts["completion_tokens"] if isinstance(counts["completion_tokens"], int) else 0
    prompt = counts["prompt_tokens"]
    if not isinstance(prompt, int):
        prompt = counts["total_tokens"] - completion if isinstance(counts["total_tokens"], int) else 0
    return Usage(prompt, completion)
