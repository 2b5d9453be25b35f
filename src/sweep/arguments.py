"""Argument types the commands share (argparse `type=` callables)."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An integer of at least 1, else argparse's usage error naming the value."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be at least 1")
    return value
