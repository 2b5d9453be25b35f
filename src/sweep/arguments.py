"""Argument types and options the commands share (argparse `type=` callables, option groups)."""

from __future__ import annotations

import argparse


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
