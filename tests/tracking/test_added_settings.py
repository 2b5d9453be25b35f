"""Settings added since runs were logged (BM25's stemmer, every chunker's context,
`golden.ignore_identical_ids`): an old config is rebuilt doing what it did, and today's config
matches an old run's digest exactly when it does the same thing (`sweep.tracking.legacy`)."""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import OmegaConf

from helpers.commands import compose_config
from sweep.tracking.legacy import current_targets, legacy_targets
from sweep.tracking.sweeps import config_digests

OLD_BM25 = {"_target_": "sweep.lexical.BM25Retriever", "k1": 1.5, "b": 0.75, "method": "lucene"}
OLD_MARKDOWN = {"_target_": "sweep.chunking.MarkdownChunker", "size": 200, "heading_prefix": True, "tokenizer": None}


def today(*overrides: str) -> dict:
    resolved = OmegaConf.to_container(compose_config(*overrides), resolve=True)
    resolved.pop("resume")
    return resolved


def test_an_old_bm25_config_is_rebuilt_without_stemming():
    model = current_targets({"model": OLD_BM25})["model"]
    assert model["stemmer"] is None and model["stopwords"] == "en" and model["delta"] == 0.5
    retriever = instantiate(model)
    retriever.build(["The runners were running."])
    assert retriever.search(["runs"], 1)[1][0].tolist() == [-1]  # as it searched: words as written


def test_only_an_unstemmed_bm25_matches_an_old_bm25_run():
    stemmed, unstemmed = today("model=bm25"), today("model=bm25", "model.stemmer=null")
    assert legacy_targets(unstemmed)["model"] == OLD_BM25
    assert legacy_targets(stemmed)["model"] == {**OLD_BM25, "stemmer": "english"}  # a new combination
    assert config_digests(stemmed)[1] != config_digests(unstemmed)[1]


def test_markdown_heading_prefix_is_its_context():
    assert current_targets({"chunking": OLD_MARKDOWN})["chunking"]["context"] == "heading"
    off = current_targets({"chunking": {**OLD_MARKDOWN, "heading_prefix": False}})["chunking"]
    assert off["context"] == "none" and "heading_prefix" not in off
    markdown = today("chunking=markdown", "model=bm25", "model.stemmer=null")
    assert legacy_targets(markdown)["chunking"] == {**OLD_MARKDOWN, "size": 200}
    titled = legacy_targets(today("chunking=markdown", "chunking.context=title+heading"))["chunking"]
    assert titled["context"] == "title+heading" and "heading_prefix" not in titled


def test_chunker_context_and_identical_ids_at_their_old_values_are_left_out():
    config = today()
    old = legacy_targets(config)
    assert "context" not in old["chunking"] and "ignore_identical_ids" not in old["golden"]
    assert current_targets(old) == config  # and come back
    changed = legacy_targets(today("chunking.context=title", "golden.ignore_identical_ids=true"))
    assert changed["chunking"]["context"] == "title" and changed["golden"]["ignore_identical_ids"] is True
