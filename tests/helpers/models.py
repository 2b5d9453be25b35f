"""Tiny real models written to a folder for the tests: a 2-layer BERT cross-encoder with random
weights (seeded) and a vocabulary of the given texts' words."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

MAX_LENGTH = 128


def write_tiny_cross_encoder(folder: Path, texts: Iterable[str]) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    words = Counter(re.findall(r"[a-z]+", " ".join(texts).lower()))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(words)]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizer(str(folder / "vocab.txt"), model_max_length=MAX_LENGTH).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=MAX_LENGTH, num_labels=1, initializer_range=0.5,
    )  # fmt: skip
    BertForSequenceClassification(config).save_pretrained(folder)
    return folder
