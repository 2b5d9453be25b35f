"""golden-sweep: does a retrieval change make retrieval better or worse?

Kept import-light: `python -m sweep.evaluate` must start without torch or MLflow.
"""

__version__ = "0.1.0"
