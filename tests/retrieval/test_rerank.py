"""Rerankers: a tiny real cross-encoder built here (random BERT, its own vocabulary) loaded
through the config path users use, and its clear errors. (Fusing rankings is `model=hybrid`'s
job: tests/retrieval/test_hybrid.py.)"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_module

from helpers.commands import one_error_line, runs_in, sweep
from helpers.models import MAX_LENGTH, write_tiny_cross_encoder
from sweep.errors import InputError
from sweep.experiment.trial import build_pipeline
from sweep.retrieval.chunking import TokenChunker
from sweep.retrieval.lexical import TfidfRetriever
from sweep.retrieval.pipeline import Pipeline
from sweep.retrieval.rerank import CrossEncoderReranker


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory, small_kb) -> Path:
    """A 2-layer BERT with random weights and a vocabulary of the corpus's words, saved as a folder."""
    corpus, golden = small_kb
    texts = [d.content for d in corpus] + [q.question for q in golden]
    return write_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder"), texts)


def logits(folder: Path, query: str, texts: list[str]) -> np.ndarray:
    """The model's own scores for (query, text) pairs, straight from transformers."""
    import torch  # here, not at the top: every worker collects this file, and few run it
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    batch = tokenizer(
        [query] * len(texts), texts, truncation=True, max_length=MAX_LENGTH, padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        return model(**batch).logits[:, 0].numpy()


@pytest.mark.slow
def test_cross_encoder_from_config_reranks_by_its_own_scores(small_kb, tiny_cross_encoder):
    corpus, golden = small_kb
    with initialize_config_module(version_base="1.3", config_module="sweep.conf"):
        cfg = compose(
            "config",
            overrides=[
                "model=tfidf",
                "chunk=0",
                "reranker=cross_encoder",
                f"reranker.model={tiny_cross_encoder}",
                "reranker.candidates=6",
            ],
        )
    pipeline = build_pipeline(cfg)
    assert isinstance(pipeline.reranker, CrossEncoderReranker)
    reranked = pipeline.retrieve(corpus, golden)
    retrieved = Pipeline(TokenChunker(0), TfidfRetriever()).retrieve(corpus, golden)
    assert reranked.stats["time/rerank_s"] > 0
    reordered = 0
    for qid, candidates in retrieved.results.rankings(limit=6).items():
        docs = [doc for doc, _ in candidates]
        scores = logits(tiny_cross_encoder, golden.by_id[qid].question, [corpus.by_id[d].content for d in docs])
        assert len(set(scores.round(4))) == len(docs)  # no ties: the order is the model's alone
        order = np.argsort(-scores)
        assert [doc for doc, _ in reranked.results.rankings()[qid]] == [docs[i] for i in order], qid
        # the document's score is the model's raw score (no sigmoid to saturate)
        np.testing.assert_allclose(
            [score for _, score in reranked.results.rankings()[qid]], scores[order], rtol=1e-4, atol=1e-5
        )
        reordered += order.tolist() != list(range(len(docs)))
    assert reordered >= len(golden) // 2  # the model's order, not the retriever's


@pytest.mark.parametrize(
    "model, message",
    [
        (None, "reranker.model is not set"),
        ("/no/such/cross-encoder", "reranker.model=/no/such/cross-encoder: no such folder"),
    ],
)
def test_a_missing_cross_encoder_is_a_clear_error(model, message):
    with pytest.raises(InputError, match=re.escape(message)):
        CrossEncoderReranker(model=model)
    with pytest.raises(InputError, match="reranker.candidates=0: must be an integer >= 1"):
        CrossEncoderReranker(model=model, candidates=0)


@pytest.mark.slow  # its cross-encoder is written and loaded with transformers: about 7 s
def test_a_model_with_several_labels_is_not_a_reranker(tmp_path, tiny_cross_encoder):
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    config = BertConfig.from_pretrained(tiny_cross_encoder)
    config.num_labels = 3
    BertForSequenceClassification(config).save_pretrained(tmp_path)
    BertTokenizer.from_pretrained(tiny_cross_encoder).save_pretrained(tmp_path)
    with pytest.raises(InputError, match="has 3 output labels; a reranker needs 1"):
        CrossEncoderReranker(model=str(tmp_path)).build(["text"])


def test_a_folder_that_is_not_a_cross_encoder_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="not a loadable CrossEncoder"):
        CrossEncoderReranker(model=str(tmp_path)).build(["text"])


def write_tiny_bi_encoder(folder: Path, cross_encoder: Path) -> Path:
    """The tiny cross-encoder's encoder without its head, saved as a sentence-transformers embedding
    model (a bi-encoder: mean pooling, `architectures: [BertModel]`), as all-MiniLM-L6-v2 is."""
    from sentence_transformers import SentenceTransformer
    from transformers import BertModel, BertTokenizer

    BertModel.from_pretrained(cross_encoder).save_pretrained(folder)
    BertTokenizer.from_pretrained(cross_encoder).save_pretrained(folder)
    # a folder without modules.json loads as a new sentence-transformers model with mean pooling
    SentenceTransformer(str(folder), device="cpu", local_files_only=True).save(str(folder))
    return folder


@pytest.fixture(scope="module")
def tiny_bi_encoder(tmp_path_factory, tiny_cross_encoder) -> Path:
    return write_tiny_bi_encoder(tmp_path_factory.mktemp("tiny-bi-encoder"), tiny_cross_encoder)


def headless(folder: Path) -> str:
    return (
        f"reranker.model={folder}: not a cross-encoder: its config.json declares BertModel, a model without a "
        "classification head (an embedding model?); loaded as a CrossEncoder it would get a newly initialised, "
        "random head and score differently on every run"
    )


@pytest.mark.slow  # writes and loads a model with transformers
def test_a_bi_encoder_is_refused_before_it_loads(tiny_bi_encoder):
    """Issue 49, item 7: its head would be newly initialised, unseeded: other numbers every run."""
    assert json.loads((tiny_bi_encoder / "config.json").read_text())["architectures"] == ["BertModel"]
    assert (tiny_bi_encoder / "modules.json").is_file()  # a sentence-transformers embedding model
    with pytest.raises(InputError, match=f"^{re.escape(headless(tiny_bi_encoder))}$"):
        CrossEncoderReranker(model=str(tiny_bi_encoder)).build(["text"])


@pytest.mark.slow
@pytest.mark.parametrize("architectures", [["BertForSequenceClassification"], None])
def test_a_checkpoint_without_its_head_is_refused_whatever_its_config_says(tmp_path, tiny_bi_encoder, architectures):
    """A config that claims a head (or names no class) while the weights have none: transformers'
    loading report names the weights it initialised at random."""
    folder = tmp_path / "claims-a-head"
    shutil.copytree(tiny_bi_encoder, folder)
    (folder / "modules.json").unlink()
    config = json.loads((folder / "config.json").read_text())
    config.pop("architectures")
    if architectures is not None:
        config |= {"architectures": architectures, "num_labels": 1}
    (folder / "config.json").write_text(json.dumps(config))
    message = (
        f"reranker.model={folder}: its checkpoint lacks classifier.bias, classifier.weight, which transformers "
        "initialised at random (newly initialised, unseeded): it would score differently on every run; give a "
        "trained cross-encoder"
    )
    with pytest.raises(InputError, match=f"^{re.escape(message)}$"):
        CrossEncoderReranker(model=str(folder)).build(["text"])


@pytest.mark.slow  # a sweep in a subprocess: about 15 s
def test_a_run_with_a_bi_encoder_as_its_reranker_fails_in_one_line(tmp_path, small_kb_files, tiny_bi_encoder):
    result = sweep(
        tmp_path, small_kb_files, "model=bm25", "chunk=0", "reranker=cross_encoder", f"reranker.model={tiny_bi_encoder}"
    )
    assert result.returncode == 2
    assert one_error_line(result.stderr) == headless(tiny_bi_encoder)
    assert "newly initialized" not in result.stdout + result.stderr  # transformers' report: never loaded
    _, runs = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert [(run.info.status, run.data.tags["error"]) for run in runs] == [("FAILED", headless(tiny_bi_encoder))]
