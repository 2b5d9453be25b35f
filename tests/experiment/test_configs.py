"""Every option of every config group composes and instantiates (cheaply: nothing is loaded or
embedded), and agrees with the defaults its class declares, so a broken YAML fails here first."""

from __future__ import annotations

import inspect
from dataclasses import MISSING, fields
from importlib import resources

import pytest
from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf

from helpers.commands import compose_config
from sweep.experiment.trial import Settings
from sweep.retrieval.chunking import Chunker
from sweep.retrieval.embed import Embedder
from sweep.retrieval.filters import Filter
from sweep.retrieval.pipeline import Pipeline
from sweep.retrieval.rerank import Reranker
from sweep.retrieval.retriever import Retriever
from sweep.retrieval.vector_index import VectorIndex
from sweep.settings import schema_defaults

CONF = resources.files("sweep.conf")
GROUPS = {
    "model": Retriever,
    "model/embedder": Embedder,  # a group inside the dense model's config
    "chunking": Chunker,
    "index": VectorIndex,
    "filter": Filter,
    "reranker": Reranker,
    "golden": None,
}
NEEDS = {  # options that cannot run without a value only the user has
    ("model", "custom"): ["model._target_=sweep.retrieval.lexical.BM25Retriever"],
    ("model/embedder", "openai"): ["model.embedder.model=text-embedding-3-small"],
    ("reranker", "api"): ["reranker.model=rerank-v3.5"],
    ("reranker", "cross_encoder"): ["reranker.model={folder}"],
    ("golden", "beir"): ["golden.path={folder}"],
    ("golden", "chunking_eval"): ["golden.path={folder}"],
}
OPTIONS = sorted(
    (group, path.name.removesuffix(".yaml"))
    for group in GROUPS
    for path in CONF.joinpath(group).iterdir()
    if path.name.endswith(".yaml")
)


def test_every_group_has_options():
    assert {group for group, _ in OPTIONS} == set(GROUPS)


@pytest.mark.parametrize(("group", "option"), OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_option_instantiates(group, option, tmp_path):
    extra = [override.format(folder=tmp_path) for override in NEEDS.get((group, option), [])]
    cfg = compose_config(f"{group}={option}", *extra)
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
    node = OmegaConf.select(cfg, group.replace("/", "."))
    if "_target_" not in node:  # golden: paths, not an object
        assert set(node) == {"path", "corpus", "split", "corpus_ids", "ignore_identical_ids", "condensed", "status"}
        return
    built = instantiate(node, _convert_="all")
    if GROUPS[group] is not None:
        assert isinstance(built, GROUPS[group])


@pytest.mark.parametrize(("group", "option"), OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_option_values_agree_with_the_class_defaults(group, option):
    """A value the YAML sets and the class also defaults must be the same value: one default,
    whether the class is built from config or in Python."""
    node = OmegaConf.load(CONF.joinpath(group, f"{option}.yaml"))
    if node.get("_target_") in (None, "???"):
        return
    parameters = inspect.signature(get_class(node._target_)).parameters
    for key in node:
        if key.startswith("_") or key == "defaults":  # Hydra's keys (_target_, _convert_, a defaults list)
            continue
        if OmegaConf.is_missing(node, key) or OmegaConf.is_interpolation(node, key) or OmegaConf.is_dict(node[key]):
            continue
        assert key in parameters, f"{group}/{option}.yaml: {key} is not a parameter of {node._target_}"
        default = parameters[key].default
        if default is not inspect.Parameter.empty:
            assert node[key] == default, (
                f"{group}/{option}.yaml: {key}={node[key]}, but {node._target_} defaults to {default}"
            )


def test_top_level_values_agree_with_the_settings_schema_and_the_pipeline():
    """config.yaml, `sweep.experiment.trial.Settings` and `Pipeline` say the same defaults."""
    config = OmegaConf.load(CONF.joinpath("config.yaml"))
    declared = schema_defaults(Settings)
    for key, default in declared.items():
        if default is MISSING or key not in config or OmegaConf.is_interpolation(config, key):
            continue
        assert OmegaConf.select(config, key) == default, f"config.yaml: {key} is not the declared default {default}"
    pipeline = {f.name: f.default for f in fields(Pipeline)}
    assert (pipeline["depth"], pipeline["chunk_depth"], pipeline["min_score"], pipeline["context_depth"]) == (
        declared["depth"], declared["chunk_depth"], declared["abstain.min_score"], max(declared["context.k"]),
    )  # fmt: skip
