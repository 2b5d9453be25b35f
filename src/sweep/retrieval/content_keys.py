"""Content keys: a sha256 of what a value holds (its settings, texts, arrays), never of its
identity, for the stages a sweep reuses (`sweep.retrieval.stages`)."""

from __future__ import annotations

import hashlib
import types
from collections.abc import Mapping
from enum import Enum
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

MAX_DEPTH = 12  # nesting a fingerprint follows before it gives up


class Unkeyable(Exception):
    """A value whose content cannot be hashed: its stage is computed."""


def fingerprint(value: object) -> str | None:
    """sha256 of what `value` holds: scalars, paths, arrays, containers, and any object by its
    class and public attributes (settings; `_private` state is left out); None when something in it
    cannot be hashed (a function, a client without attributes), or it nests too deep."""
    sha = hashlib.sha256()
    try:
        _feed(sha, value, 0)
    except Unkeyable:
        return None
    return sha.hexdigest()


def _feed(sha: Any, value: object, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise Unkeyable
    if type(value) is str:  # texts: their bytes, after their length (a chunk's text is hashed often)
        sha.update(f"str{len(value)}:".encode() + value.encode("utf-8", "surrogatepass"))
    elif value is None or isinstance(value, (bool, int, float, str, bytes, Path, Enum, np.generic)):
        sha.update(f"{type(value).__name__}:{value!r}\0".encode("utf-8", "surrogatepass"))
    elif isinstance(value, np.ndarray):
        sha.update(f"array:{value.dtype.str}:{value.shape}\0".encode())
        sha.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, (list, tuple)):
        sha.update(f"{type(value).__name__}[\0".encode())
        for item in value:
            _feed(sha, item, depth + 1)
        sha.update(b"]\0")
    elif isinstance(value, (set, frozenset)):
        sha.update(b"set:" + "".join(sorted(_part(item, depth) for item in value)).encode() + b"\0")
    elif isinstance(value, Mapping):
        sha.update(b"map{\0")
        for key, item in value.items():
            _feed(sha, key, depth + 1)
            _feed(sha, item, depth + 1)
        sha.update(b"}\0")
    elif isinstance(value, (types.FunctionType, types.MethodType, types.BuiltinFunctionType, partial, type)):
        raise Unkeyable
    elif hasattr(value, "__dict__"):
        kind = type(value)
        sha.update(f"object:{kind.__module__}.{kind.__qualname__}{{\0".encode())
        for name, item in sorted(vars(value).items()):
            if not name.startswith("_"):
                _feed(sha, name, depth + 1)
                _feed(sha, item, depth + 1)
        sha.update(b"}\0")
    else:
        raise Unkeyable


def _part(value: object, depth: int) -> str:
    sha = hashlib.sha256()
    _feed(sha, value, depth + 1)
    return sha.hexdigest()


def digest(*parts: object) -> str:
    """sha256 of `parts` (as `fingerprint` hashes them; nothing in them may be unhashable)."""
    sha = hashlib.sha256()
    _feed(sha, parts, 0)
    return sha.hexdigest()
