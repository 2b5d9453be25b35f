"""What `helpers.processes` imports once, in the server its commands fork from: the costly
imports of `python -m sweep` and of the commands beside it. Importing only: no model is loaded
and no thread started, so a forked child starts as clean as a new interpreter."""

import faiss  # noqa: F401
import matplotlib  # noqa: F401
import mlflow  # noqa: F401
import sentence_transformers  # noqa: F401

import sweep.best  # noqa: F401
import sweep.check  # noqa: F401
import sweep.compare  # noqa: F401
import sweep.evaluate  # noqa: F401
import sweep.experiment.cli  # noqa: F401
import sweep.experiment.trial  # noqa: F401
import sweep.retrieval.dense  # noqa: F401
import sweep.retrieval.lexical  # noqa: F401
import sweep.retrieval.pipeline  # noqa: F401
import sweep.tracking.logger  # noqa: F401
