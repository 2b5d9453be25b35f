"""Runs logged before the subpackages: the one map from the `_target_` paths they logged to today's.

Until commit 474223c golden-sweep was one flat package, and every run logged its resolved config
with `_target_`s such as `sweep.index.HNSWIndex` (in `config/resolved.yaml`, in its params and in
the `sweep.config_digest` tag, which is computed over the config). Those classes now live in
subpackages (`sweep.retrieval.index.HNSWIndex`). `current_targets` rewrites a logged config so that
it can be instantiated again (`sweep.best`); `legacy_targets` writes a config the old way, whose
digest is what an old run of the same combination was tagged with (a resumed sweep, `earlier_runs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# the modules as 474223c named them -> the module that holds their classes now
LEGACY_MODULES = {
    "sweep.records": "sweep.formats.records",
    "sweep.corpus": "sweep.formats.corpus",
    "sweep.golden": "sweep.formats.golden",
    "sweep.runs": "sweep.formats.runs",
    "sweep.retriever": "sweep.retrieval.base",
    "sweep.chunking": "sweep.retrieval.chunking",
    "sweep.embed": "sweep.retrieval.embed",
    "sweep.dense": "sweep.retrieval.dense",
    "sweep.lexical": "sweep.retrieval.lexical",
    "sweep.index": "sweep.retrieval.index",
    "sweep.filters": "sweep.retrieval.filters",
    "sweep.rerank": "sweep.retrieval.rerank",
    "sweep.pipeline": "sweep.retrieval.pipeline",
    "sweep.leaderboard": "sweep.evaluation.leaderboard",
    "sweep.cli": "sweep.experiment.cli",
    "sweep.trial": "sweep.experiment.trial",
}
# the classes that since left the module their old module became: legacy target -> current target
LEGACY_CLASSES = {
    "sweep.embed.EmbeddingCache": "sweep.retrieval.cache.EmbeddingCache",
}
_CURRENT_MODULES = {current: legacy for legacy, current in LEGACY_MODULES.items()}
_CURRENT_CLASSES = {current: legacy for legacy, current in LEGACY_CLASSES.items()}


def current_target(target: str) -> str:
    """A `_target_` as a run logged before the subpackages wrote it, as it reads now; any other unchanged."""
    if target in LEGACY_CLASSES:
        return LEGACY_CLASSES[target]
    module, _, name = target.rpartition(".")
    return f"{LEGACY_MODULES[module]}.{name}" if module in LEGACY_MODULES else target


def legacy_target(target: str) -> str:
    """A `_target_` as a run logged before the subpackages wrote it (the inverse of `current_target`)."""
    if target in _CURRENT_CLASSES:
        return _CURRENT_CLASSES[target]
    module, _, name = target.rpartition(".")
    return f"{_CURRENT_MODULES[module]}.{name}" if module in _CURRENT_MODULES else target


def current_targets(config: Any) -> Any:
    """`config` (a resolved config: dicts, lists and values) with every `_target_` as it reads now."""
    return _rewritten(config, current_target)


def legacy_targets(config: Any) -> Any:
    """`config` with every `_target_` as a run logged before the subpackages wrote it."""
    return _rewritten(config, legacy_target)


def _rewritten(config: Any, rewrite: Any) -> Any:
    if isinstance(config, Mapping):
        return {
            key: rewrite(value) if key == "_target_" and isinstance(value, str) else _rewritten(value, rewrite)
            for key, value in config.items()
        }
    if isinstance(config, list):
        return [_rewritten(value, rewrite) for value in config]
    return config
