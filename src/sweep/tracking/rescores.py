"""Re-scored runs in the store: the tag that names the stored run (or sweep) each one scores again.

`python -m sweep.rescore` (`sweep.experiment.rescore_runs`) logs a stored run scored again on
another version of its golden set as a new run, and a sweep as a new sweep; each new run, and the
new sweep's parent, is tagged `sweep.rescores=<the id of what it scores again>`, and each new run
`sweep.rescore.unscored=<how many questions of the new version the stored run was never asked>`.
"""

from __future__ import annotations

import mlflow

RESCORES = "sweep.rescores"
UNSCORED = "sweep.rescore.unscored"


def rescore_tags(source: str, unscored: int | None = None) -> dict[str, str]:
    """The tags of a run (or, without `unscored`, a sweep's parent) that scores `source` again."""
    return {RESCORES: source} | ({} if unscored is None else {UNSCORED: str(unscored)})


def tag_rescores(run_id: str, source: str) -> None:
    """Tag the run `run_id` (a new sweep's parent) as scoring `source` again."""
    client = mlflow.MlflowClient()
    for key, value in rescore_tags(source).items():
        client.set_tag(run_id, key, value)
