"""Argument types and options the commands share (argparse `type=` callables, option groups)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sweep.retrieval.chat_client import ChatClient


def positive_int(text: str) -> int:
    """An integer of at least 1, else argparse's usage error naming the value."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be at least 1")
    return value


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """`sweep.compare`'s and `sweep.check`'s options: where `best` looks, and the resampling."""
    from sweep.evaluation.significance import RESAMPLES, SEED
    from sweep.tracking.store import DEFAULT_EXPERIMENT

    parser.add_argument("--experiment", default=DEFAULT_EXPERIMENT, help="where `best` looks (default %(default)r)")
    parser.add_argument("--seed", type=int, default=SEED, help="resampling seed (default %(default)s)")
    parser.add_argument(
        "--resamples",
        type=positive_int,
        default=RESAMPLES,
        help="bootstrap and randomization resamples (default %(default)s)",
    )


def metric_list(text: str | None) -> list[str] | None:
    """`--metrics m1,m2`: the names, None when the option was not given; an empty list is an error."""
    from sweep.errors import InputError

    if text is None:
        return None
    metrics = [m.strip() for m in text.split(",") if m.strip()]
    if not metrics:
        raise InputError("--metrics: give at least one metric name")
    return metrics


def add_chat_options(parser: argparse.ArgumentParser, cache_folder: str) -> None:
    """A chat model's endpoint, cost and cache options (`sweep.judge grade`, `sweep.generate`);
    `cache_folder`: the answers' folder under the cache directory."""
    parser.add_argument("--base-url", required=True, help="the chat server, e.g. http://localhost:11434/v1")
    parser.add_argument("--model", required=True, help="the model name the server knows")
    parser.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="the environment variable holding the key (default %(default)s)"
    )
    parser.add_argument("--max-cost-usd", type=float, help="refuse before sending when the estimate is above this")
    parser.add_argument("--price-per-mtok", type=float, help="US$ per million tokens sent (0 for a local server)")
    parser.add_argument("--output-price-per-mtok", type=float, help="US$ per million tokens received")
    parser.add_argument(
        "--max-tokens", type=positive_int, default=512, help="the longest answer, and the estimate's (default 512)"
    )
    parser.add_argument("--max-concurrency", type=positive_int, default=4, help="requests at once (default 4)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    parser.add_argument(
        "--cache-dir",
        default=str(Path(os.environ.get("SWEEP_CACHE_DIR", ".cache/golden-sweep")) / cache_folder),
        help="answers kept here, so a second run sends nothing (default %(default)s)",
    )


def check_chat_options(args: argparse.Namespace) -> None:
    """A cost cap needs a price to estimate a cost against."""
    from sweep.errors import InputError

    if args.max_cost_usd is not None and args.price_per_mtok is None:
        raise InputError("--max-cost-usd needs --price-per-mtok (and --output-price-per-mtok) to estimate a cost")


def chat_client(
    args: argparse.Namespace, model: str | None = None, json_answers: bool = False, max_cost_usd: float | None = None
) -> ChatClient:
    """The client `add_chat_options` describes, for `model` (default `--model`) with `args.seed`;
    `max_cost_usd`: what this client may spend (default `--max-cost-usd`)."""
    from sweep.retrieval.chat_client import ChatClient

    return ChatClient(
        model or args.model,
        args.base_url,
        args.api_key_env,
        seed=args.seed,
        max_tokens=args.max_tokens,
        json_answers=json_answers,
        max_concurrency=args.max_concurrency,
        timeout=args.timeout,
        price_per_mtok=args.price_per_mtok,
        output_price_per_mtok=args.output_price_per_mtok,
        max_cost_usd=args.max_cost_usd if max_cost_usd is None else max_cost_usd,
        cache_dir=args.cache_dir,
        settings="--",
    )
