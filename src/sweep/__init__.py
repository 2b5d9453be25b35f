"""golden-sweep: does a retrieval change make retrieval better or worse?

Kept import-light: `python -m sweep.evaluate` must start without torch or MLflow, so
`best_config` (which needs MLflow) is imported on first use.
"""

__version__ = "0.1.0"
__all__ = ["best_config"]


def __getattr__(name: str):
    if name == "best_config":
        from sweep.best import best_config

        return best_config
    raise AttributeError(f"module 'sweep' has no attribute {name!r}")
