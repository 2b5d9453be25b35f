"""Rerankers: a tiny real cross-encoder built here (random BERT, its own vocabulary) loaded
through the config path users use, and its clear errors. (Fusing rankings is `model=hybrid`'s
job: tests/retrieval/test_hybrid.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_module

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
