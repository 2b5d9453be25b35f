"""The corpus embedded in shards (sweep.retrieval.embed.CorpusEmbedding), with the real MiniLM model and a
real cache: the same vectors as one piece, resumed after a SIGKILL, two processes on one cache,
and the same vectors and cache entries from a local Ray cluster (the session's, tests/conftest.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from helpers.processes import Started, start_code
from sweep.retrieval.cache import EmbeddingCache
from sweep.retrieval.embed import CorpusEmbedding, SentenceTransformerEmbedder

# 108 chunks: enough for several shards and a short last one; each shard is one batch of
# sentence-transformers' 32, as in one encode of the whole corpus (a larger corpus only adds shards)
TEXTS = [
    f"chunk {i}: employees in office {i % 7} get {10 + i % 30} days of leave from year {1990 + i}" for i in range(108)
]
SHARD = 32  # 4 shards, the last one of 12 chunks
LONGEST_FIRST = sorted(range(len(TEXTS)), key=lambda i: -len(TEXTS[i]))  # ties in corpus order
SHARDS = [[TEXTS[i] for i in LONGEST_FIRST[start : start + SHARD]] for start in range(0, len(TEXTS), SHARD)]

# Embeds TEXTS (argv[1]) into the cache folder argv[2] in shards of argv[3] chunks and saves the
# vectors to argv[4], printing the share read from the cache. With argv[5] = "slowly", it pauses 1 s
# after each shard so that a kill lands mid-embedding (killed once its first shard is stored, it is
# 3 s at least from its last); with argv[5] = a folder, it writes ready-<pid> there and starts once
# "go" appears.
CHILD = """
import json, os, sys, time
from pathlib import Path
import numpy as np
from sweep.retrieval.cache import EmbeddingCache
from sweep.retrieval.embed import CorpusEmbedding, SentenceTransformerEmbedder

texts = json.loads(Path(sys.argv[1]).read_text())
embedder = SentenceTransformerEmbedder()
embedder.load()
if sys.argv[5] == "slowly":
    encode = embedder.encode_documents
    def slowly(shard):
        vectors = encode(shard)
        time.sleep(1)
        return vectors
    embedder.encode_documents = slowly
else:
    barrier = Path(sys.argv[5])
    (barrier / f"ready-{os.getpid()}").touch()
    while not (barrier / "go").exists():
        time.sleep(0.01)
vectors, cached = CorpusEmbedding(shard_size=int(sys.argv[3])).embed(embedder, texts, EmbeddingCache(sys.argv[2]))
np.save(sys.argv[4], vectors)
print(cached)
"""


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


@pytest.fixture(scope="module")
def reference(embedder) -> np.ndarray:
    """TEXTS embedded in one piece, no cache."""
    return embedder.encode_documents(TEXTS)


def entries(folder: Path) -> dict[str, tuple[int, int]]:
    """{cache entry file name: (inode, mtime in ns)}: an entry rewritten by a rename gets a new inode."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob("*.npz")}


def shard_files(embedder: SentenceTransformerEmbedder) -> list[str]:
    return [f"{EmbeddingCache.key(embedder.identity, shard)}.npz" for shard in SHARDS]


def counting(embedder: SentenceTransformerEmbedder, monkeypatch) -> list[list[str]]:
    """The texts of every encode_documents call on `embedder` from now on."""
    calls: list[list[str]] = []
    encode = embedder.encode_documents

    def counted(texts):
        calls.append(list(texts))
        return encode(texts)

    monkeypatch.setattr(embedder, "encode_documents", counted)
    return calls


def child(tmp_path: Path, cache: Path, out: str, mode: str) -> Started:
    """CHILD in a process of its own, forked with its imports done (helpers.processes)."""
    (tmp_path / "texts.json").write_text(json.dumps(TEXTS))
    arguments = (str(tmp_path / "texts.json"), str(cache), str(SHARD), out, mode)
    return start_code(CHILD, *arguments, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_sharded_vectors_equal_one_piece_and_every_shard_is_a_cache_entry(tmp_path, embedder, reference, monkeypatch):
    cache = EmbeddingCache(tmp_path)
    vectors, cached = CorpusEmbedding(shard_size=SHARD).embed(embedder, TEXTS, cache)
    assert cached == 0.0 and vectors.shape == (108, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, reference, atol=1e-6)
    assert sorted(entries(tmp_path)) == sorted(shard_files(embedder))
    calls = counting(embedder, monkeypatch)
    again, cached = CorpusEmbedding(shard_size=SHARD).embed(embedder, TEXTS, cache)
    assert cached == 1.0 and calls == [] and np.array_equal(again, vectors)
    one_shard, _ = CorpusEmbedding(shard_size=len(TEXTS)).embed(embedder, TEXTS, None)  # no cache: sharded all the same
    np.testing.assert_allclose(one_shard, reference, atol=1e-6)


@pytest.mark.slow  # the real model embeds the reference
def test_a_whole_corpus_entry_written_before_shards_is_still_read(tmp_path, embedder, reference, monkeypatch):
    cache = EmbeddingCache(tmp_path)
    cache.put(cache.key(embedder.identity, TEXTS), reference)  # the one entry a corpus had before shards
    calls = counting(embedder, monkeypatch)
    vectors, cached = CorpusEmbedding(shard_size=SHARD).embed(embedder, TEXTS, cache)
    assert cached == 1.0 and calls == [] and np.array_equal(vectors, reference)
    assert list(entries(tmp_path)) == [f"{cache.key(embedder.identity, TEXTS)}.npz"]  # no shards written


@pytest.mark.slow
def test_a_killed_embedding_resumes_at_the_first_missing_shard(tmp_path, embedder, reference, monkeypatch):
    folder = tmp_path / "cache"
    process = child(tmp_path, folder, str(tmp_path / "unused.npy"), "slowly")
    deadline = time.monotonic() + 120
    while not (folder.exists() and entries(folder)):
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no shard was written in 120 s"
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    before = entries(folder)
    expected = shard_files(embedder)
    assert 1 <= len(before) < len(SHARDS) and set(before) <= set(expected)

    calls = counting(embedder, monkeypatch)
    vectors, cached = CorpusEmbedding(shard_size=SHARD).embed(embedder, TEXTS, EmbeddingCache(folder))
    finished = [expected.index(name) for name in before]
    assert calls == [SHARDS[n] for n in range(len(SHARDS)) if n not in finished]  # only the rest, in order
    assert cached == sum(len(SHARDS[n]) for n in finished) / len(TEXTS)
    after = entries(folder)
    assert sorted(after) == sorted(expected) and all(after[name] == before[name] for name in before)  # not rewritten
    np.testing.assert_allclose(vectors, reference, atol=1e-6)


@pytest.mark.slow
def test_two_processes_embedding_one_corpus_into_one_cache_at_once_leave_it_sound(
    tmp_path, embedder, reference, caplog
):
    folder, barrier = tmp_path / "cache", tmp_path / "barrier"
    barrier.mkdir()
    processes = [child(tmp_path, folder, str(tmp_path / f"vectors-{n}.npy"), str(barrier)) for n in range(2)]
    deadline = time.monotonic() + 120
    while len(list(barrier.glob("ready-*"))) < 2:  # both have their model loaded: start them together
        ended = [p.communicate()[1][-3000:] for p in processes if p.poll() is not None]
        assert not ended, ended
        assert time.monotonic() < deadline, "the two processes did not get ready in 120 s"
        time.sleep(0.01)
    (barrier / "go").touch()
    said = [process.communicate(timeout=300) for process in processes]
    assert [process.returncode for process in processes] == [0, 0], [stderr[-3000:] for _, stderr in said]
    for n in range(2):
        np.testing.assert_allclose(np.load(tmp_path / f"vectors-{n}.npy"), reference, atol=1e-6)
    # every shard embedded once: what one process embedded, the other waited for and read
    assert sum(float(stdout) for stdout, _ in said) == pytest.approx(1.0)
    locks = [f".{name.removesuffix('.npz')}.lock" for name in shard_files(embedder)]
    assert sorted(os.listdir(folder)) == sorted(shard_files(embedder) + locks)  # no temporary file left over
    cache = EmbeddingCache(folder)
    for shard in SHARDS:
        stored = cache.get(cache.key(embedder.identity, shard))
        assert stored is not None and stored.shape == (len(shard), 384)
    assert not caplog.records  # no entry was damaged


@pytest.mark.slow
def test_the_ray_backend_gives_the_local_vectors_and_cache_entries(tmp_path, embedder, ray_cluster):
    import ray

    address, _ = ray_cluster  # the session's (tests/conftest.py)
    local_cache, ray_cache = EmbeddingCache(tmp_path / "local"), EmbeddingCache(tmp_path / "ray-cache")
    local, _ = CorpusEmbedding(shard_size=SHARD).embed(embedder, TEXTS, local_cache)
    try:
        spread = CorpusEmbedding(shard_size=SHARD, backend="ray", address=address, workers=2)
        vectors, cached = spread.embed(embedder, TEXTS, ray_cache)  # joins the cluster
    finally:
        ray.shutdown()  # leaves it, running
    assert cached == 0.0
    np.testing.assert_allclose(vectors, local, atol=1e-6)
    assert sorted(entries(ray_cache.folder)) == sorted(entries(local_cache.folder)) == sorted(shard_files(embedder))
    for shard in SHARDS:
        key = EmbeddingCache.key(embedder.identity, shard)
        np.testing.assert_allclose(ray_cache.get(key), local_cache.get(key), atol=1e-6)
