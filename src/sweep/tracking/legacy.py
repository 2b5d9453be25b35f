"""Runs logged before the subpackages: the one map from the `_target_` paths they logged to today's.

Until commit 474223c golden-sweep was one flat package, and every run logged its resolved config
with `_target_`s such as `sweep.index.HNSWIndex` (in `config/resolved.yaml`, in its params and in
the `sweep.config_digest` tag, which is computed over the config). Those classes now live in
subpackages (`sweep.retrieval.index.HNSWIndex`). `current_targets` rewrites a logged config so that
it can be instantiated again (`sweep.best`); `legacy_targets` writes a config the old way, whose
digest is what an old run of the same combination was tagged with (a resumed sweep, `earlier_runs`).

Settings added to an option since (`ADDED_SETTINGS`: BM25's stemmer, the lexical models' analyzer,
every chunker's context, the local embedder's prompts, truncation and normalisation,
`golden.ignore_identical_ids`, `golden.condensed`, `golden.status`) are absent from those configs.
`current_targets` gives an old config each one's value that does what the run did without it (BM25
without stemming, no context, lists as retrieved, questions pending review not scored), so
`sweep.best` rebuilds what was measured; `legacy_targets` leaves a setting out where it has that
value, so the digest still matches the old run's, and keeps it where it has another (a new combination).

A config that names the hybrid reranker, since removed, cannot be rebuilt: `current_targets`
says in one line what does its job now.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sweep.errors import InputError

# the modules as 474223c named them -> the module that holds their classes now
LEGACY_MODULES = {
    "sweep.records": "sweep.formats.lines",
    "sweep.corpus": "sweep.formats.corpus",
    "sweep.golden": "sweep.formats.golden",
    "sweep.runs": "sweep.formats.runs",
    "sweep.retriever": "sweep.retrieval.retriever",
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
# `reranker=hybrid` is gone: the `_target_`s runs logged for it (before and after the subpackages)
HYBRID_RERANKER_REMOVED = "reranker=hybrid was removed: use model=hybrid model.fusion=rrf"
HYBRID_RERANKER_TARGETS = ("sweep.rerank.HybridReranker", "sweep.retrieval.rerank.HybridReranker")
# settings added since those runs: current target -> {setting: the value that does what the runs did without it}
_CHUNKERS = ("TokenChunker", "RecursiveChunker", "SentenceChunker", "SemanticChunker")
_WORDS = {"_convert_": "all", "analyzer": "word", "ngram_range": [1, 2]}  # the lexical models' analyzer (bc10280)
ADDED_SETTINGS: dict[str, dict[str, Any]] = {
    "sweep.retrieval.lexical.BM25Retriever": {"stopwords": "en", "stemmer": None, "delta": 0.5, **_WORDS},
    "sweep.retrieval.lexical.TfidfRetriever": dict(_WORDS),
    "sweep.retrieval.embed.SentenceTransformerEmbedder": {
        "query_prompt": "",
        "document_prompt": "",
        "truncate_dim": None,
        "normalize": True,
    },
    **{f"sweep.retrieval.chunking.{name}": {"context": "none"} for name in _CHUNKERS},
}
ADDED_GOLDEN = {"ignore_identical_ids": False, "condensed": False, "status": "reviewed"}  # `golden`'s (no `_target_`)
# MarkdownChunker's `heading_prefix` (true/false) is now its `context` (heading/none)
MARKDOWN = "sweep.retrieval.chunking.MarkdownChunker"
_CURRENT_MODULES = {current: legacy for legacy, current in LEGACY_MODULES.items()}
_CURRENT_CLASSES = {current: legacy for legacy, current in LEGACY_CLASSES.items()}


def current_target(target: str) -> str:
    """A `_target_` as a run logged before the subpackages wrote it, as it reads now; any other
    unchanged; one whose option was removed is an `InputError` that names the replacement."""
    if target in HYBRID_RERANKER_TARGETS:
        raise InputError(f"{HYBRID_RERANKER_REMOVED} (the run's config names {target})")
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
    """`config` (a resolved config: dicts, lists and values) with every `_target_` as it reads now,
    and the settings added since with the values that do what it did (`ADDED_SETTINGS`)."""
    config = _each_node(_rewritten(config, current_target), _settings_now)
    if isinstance(config, Mapping) and isinstance(config.get("golden"), Mapping):
        config = {**config, "golden": {**ADDED_GOLDEN, **config["golden"]}}
    return config


def legacy_targets(config: Any) -> Any:
    """`config` with every `_target_` as a run logged before the subpackages wrote it, less the
    settings added since where they have the value that does what those runs did."""
    if isinstance(config, Mapping) and isinstance(config.get("golden"), Mapping):
        config = {**config, "golden": _without(config["golden"], ADDED_GOLDEN)}
    return _rewritten(_each_node(config, _settings_then), legacy_target)


def _settings_now(node: Mapping[str, Any]) -> dict[str, Any]:
    target = node.get("_target_")
    node = {**ADDED_SETTINGS.get(target, {}), **node} if isinstance(target, str) else dict(node)
    if target == MARKDOWN and "heading_prefix" in node:
        node["context"] = "heading" if node.pop("heading_prefix") else "none"
    return node


def _settings_then(node: Mapping[str, Any]) -> dict[str, Any]:
    target = node.get("_target_")
    node = _without(node, ADDED_SETTINGS.get(target, {})) if isinstance(target, str) else dict(node)
    if target == MARKDOWN and node.get("context") in ("heading", "none"):
        node["heading_prefix"] = node.pop("context") == "heading"
    return node


def _without(node: Mapping[str, Any], added: Mapping[str, Any]) -> dict[str, Any]:
    """`node` less each `added` setting that has the value given there."""
    return {key: value for key, value in node.items() if not (key in added and _same(value, added[key]))}


def _same(a: Any, b: Any) -> bool:
    """Equal and of one kind (0.5 and 0.5, not false and 0; an integer and a number may be equal)."""
    numbers = (int, float)
    return (type(a) is type(b) or (type(a) in numbers and type(b) in numbers)) and a == b


def _each_node(config: Any, change: Any) -> Any:
    """`config` with `change` applied to every mapping in it, innermost first."""
    if isinstance(config, Mapping):
        return change({key: _each_node(value, change) for key, value in config.items()})
    if isinstance(config, list):
        return [_each_node(value, change) for value in config]
    return config


def _rewritten(config: Any, rewrite: Any) -> Any:
    if isinstance(config, Mapping):
        return {
            key: rewrite(value) if key == "_target_" and isinstance(value, str) else _rewritten(value, rewrite)
            for key, value in config.items()
        }
    if isinstance(config, list):
        return [_rewritten(value, rewrite) for value in config]
    return config
