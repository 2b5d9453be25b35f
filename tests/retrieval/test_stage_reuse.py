"""Stage reuse (`sweep.retrieval.stages`): a configuration recomputes only the stages whose inputs
changed, keyed by content, and its per-question results are those computed without any reuse."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from helpers.commands import compose_config, runs_in, sweep
from helpers.models import write_tiny_cross_encoder
from sweep.evaluation import score
from sweep.evaluation.context import score_contexts
from sweep.experiment.trial import build_pipeline, load_data
from sweep.formats.corpus import Corpus
from sweep.formats.documents import Document
from sweep.retrieval import stages
from sweep.retrieval.chunking import TokenChunker
from sweep.retrieval.content_keys import fingerprint
from sweep.retrieval.dense import DenseRetriever
from sweep.retrieval.embed import Embedder, EmbeddingCache, SentenceTransformerEmbedder
from sweep.retrieval.filters import PreFilter
from sweep.retrieval.hybrid import HybridRetriever
from sweep.retrieval.index import FlatIndex
from sweep.retrieval.lexical import BM25Retriever, TfidfRetriever
from sweep.retrieval.pipeline import Pipeline
from sweep.retrieval.rerank import CrossEncoderReranker

# the bundled sweeps of the README, conf/config.yaml and conf/model/hybrid.yaml, as Hydra runs them
BUNDLED_SWEEPS = (
    ("chunk=256,512", "index=flat,hnsw"),
    ("filter=none,pre,post", "model=minilm,hybrid"),
    ("model=hybrid", "model.weight=0.0,0.25,0.5,0.75,1.0"),
)
pytestmark = pytest.mark.usefixtures("torch_on_one_thread")  # the slow tests' models in process, on one thread


@pytest.fixture(autouse=True)
def reusing(monkeypatch) -> None:
    """Reuse on in this process (as in a sweep's), each test starting with nothing kept from another."""
    monkeypatch.setenv(stages.REUSE_ENV, "1")
    stages.forget()
    yield
    stages.forget()


def retrieve(kb, retriever, **settings):
    corpus, golden = kb
    pipeline = Pipeline(TokenChunker(0), retriever, latency_sample=0, **settings)
    return pipeline.retrieve(corpus, golden)


def same_answers(a, b) -> None:
    """The same documents, scores, delivered chunks and parts' hits, exactly."""
    pd.testing.assert_frame_equal(a.results.frame, b.results.frame, check_exact=True)
    assert a.contexts == b.contexts
    assert {name: part.hits for name, part in a.parts.items()} == {name: part.hits for name, part in b.parts.items()}


def test_a_fingerprint_hashes_settings_never_identity_or_private_state():
    assert fingerprint(BM25Retriever(k1=1.2)) == fingerprint(BM25Retriever(k1=1.2))
    assert fingerprint(BM25Retriever(k1=1.2)) != fingerprint(BM25Retriever(k1=1.3))
    assert fingerprint(BM25Retriever()) != fingerprint(TfidfRetriever())
    changed = BM25Retriever()
    changed._scratch = [1, 2, 3]  # state, not a setting
    assert fingerprint(changed) == fingerprint(BM25Retriever())
    weights = [
        fingerprint(HybridRetriever({"a": BM25Retriever(), "b": TfidfRetriever()}, weight=w)) for w in (0.2, 0.3)
    ]
    assert weights[0] != weights[1]
    holding_a_function = BM25Retriever()
    holding_a_function.tokenizer_hook = len
    assert fingerprint(holding_a_function) is None  # unhashable: its stages are computed


def test_chunks_are_kept_by_the_chunker_settings_and_every_document(small_kb):
    corpus, _ = small_kb
    first, kept = stages.chunked(TokenChunker(64, overlap=8), corpus)
    again, kept_again = stages.chunked(TokenChunker(64, overlap=8), corpus)
    assert not kept and kept_again and again is first
    assert not stages.chunked(TokenChunker(64, overlap=16), corpus)[1]
    edited = Corpus(
        (Document(corpus.documents[0].id, corpus.documents[0].text + " Edited."), *corpus.documents[1:]), corpus.source
    )
    other, kept_edited = stages.chunked(TokenChunker(64, overlap=8), edited)
    assert not kept_edited and other != first


class CountingEmbedder(SentenceTransformerEmbedder):
    """MiniLM, counting the times it tokenizes texts to find the truncated share."""

    tokenized = 0

    def truncated_share(self, texts, block=4096):
        CountingEmbedder.tokenized += 1
        return super().truncated_share(texts, block)


@pytest.mark.slow  # MiniLM's tokenizer loads with the model
def test_the_truncated_share_is_kept_for_the_same_embedder_and_texts(small_kb, monkeypatch):
    corpus, _ = small_kb
    texts = [chunk.text for chunk in TokenChunker(0).split(corpus)]  # whole documents: some too long
    first = stages.truncated_share(CountingEmbedder(), texts)
    assert first == SentenceTransformerEmbedder().truncated_share(texts) > 0
    assert stages.truncated_share(CountingEmbedder(), texts) == first and CountingEmbedder.tokenized == 1
    stages.truncated_share(CountingEmbedder(), texts[1:])
    stages.truncated_share(CountingEmbedder(document_prompt="passage: "), texts)
    assert CountingEmbedder.tokenized == 3  # other texts, another embedder: tokenized
    monkeypatch.setenv(stages.REUSE_ENV, "0")
    assert stages.truncated_share(CountingEmbedder(), texts) == first and CountingEmbedder.tokenized == 4


def test_an_embedder_without_an_identity_is_asked_each_time():
    class Anonymous(Embedder):  # a user's: no `identity`, so nothing of its is kept
        def truncated_share(self, texts):
            return 0.25

    assert stages.truncated_share(Anonymous(), ["a", "b"]) == 0.25 and not stages.TRUNCATIONS.entries


def test_a_new_fusion_weight_only_fuses_the_members_kept_answers(small_kb, monkeypatch):
    """Lexical members (no model): the second weight builds and searches neither member, the same
    weight again reuses the fused answers too, and every answer is the one computed without reuse."""
    members = lambda: {"bm25": BM25Retriever(), "tfidf": TfidfRetriever()}  # noqa: E731
    reused = {w: retrieve(small_kb, HybridRetriever(members(), weight=w)) for w in (0.3, 0.7)}
    again = retrieve(small_kb, HybridRetriever(members(), weight=0.3))
    first, second = reused[0.3].stats, reused[0.7].stats
    assert first["cache/hits"] == first["member/bm25/cache/hits"] == first["cache/chunks"] == 0.0
    assert second["member/bm25/cache/hits"] == second["member/tfidf/cache/hits"] == second["cache/chunks"] == 1.0
    assert second["cache/hits"] == 0.0  # the fusion is new
    assert first["member/bm25/time/index_s"] > 0 and second["member/bm25/time/index_s"] == 0.0
    assert "member/bm25/lexical/questions_unmatched" in second  # what is not a time: the computing run's
    assert again.stats["cache/hits"] == 1.0 and again.stats["member/bm25/cache/hits"] == 1.0
    monkeypatch.setenv(stages.REUSE_ENV, "0")
    for weight, retrieval in [*reused.items(), (0.3, again)]:
        fresh = retrieve(small_kb, HybridRetriever(members(), weight=weight))
        assert "cache/hits" not in fresh.stats
        same_answers(retrieval, fresh)


def test_other_filters_or_questions_search_again(small_kb):
    """The kept answers are those of the same searches: a filter or a question that differs asks the
    retriever again (its answers then are the ones it gives alone)."""
    corpus, golden = small_kb
    unfiltered = retrieve(small_kb, BM25Retriever())
    filtered = retrieve(small_kb, BM25Retriever(), filter=PreFilter(where={"department": "Finance"}))
    assert unfiltered.stats["cache/hits"] == filtered.stats["cache/hits"] == 0.0
    assert filtered.stats["time/index_s"] > 0
    reworded = replace(golden.questions[0], question=golden.questions[0].question + " please")
    other_questions = replace(golden, questions=(reworded, *golden.questions[1:]))
    assert retrieve((corpus, other_questions), BM25Retriever()).stats["cache/hits"] == 0.0
    same = retrieve(small_kb, BM25Retriever())  # kept beside the others
    assert same.stats["cache/hits"] == 1.0 and same.stats["time/index_s"] == 0.0
    same_answers(same, unfiltered)


@pytest.mark.slow  # a cross-encoder written and loaded with transformers
def test_rerankings_are_kept_for_the_same_hits_and_done_afresh_when_timed(small_kb, tmp_path, monkeypatch):
    """A sweep over `min_score` reranks once: the second run's rerankings are kept, its answers those
    of a run without reuse; the latency timing (inside the retriever's `alone`) reranks afresh."""
    corpus, golden = small_kb
    folder = write_tiny_cross_encoder(tmp_path, [d.content for d in corpus] + [q.question for q in golden])

    def pipeline(min_score: float | None, timed: int = 0) -> Pipeline:
        reranker = CrossEncoderReranker(model=str(folder), candidates=6)
        return Pipeline(TokenChunker(0), TfidfRetriever(), reranker=reranker, min_score=min_score, latency_sample=timed)

    first = pipeline(None).retrieve(corpus, golden)
    second = pipeline(0.0, timed=3).retrieve(corpus, golden)
    assert first.stats["cache/reranked"] == 0.0 and second.stats["cache/reranked"] == 1.0
    assert second.stats["latency/questions"] == 3  # timed with every reranking done
    monkeypatch.setenv(stages.REUSE_ENV, "0")
    fresh = pipeline(0.0).retrieve(corpus, golden)
    assert "cache/reranked" not in fresh.stats
    same_answers(second, fresh)


@pytest.mark.slow
def test_question_vectors_are_cached_on_disk_like_the_corpus(small_kb, tmp_path, monkeypatch):
    """A second process (here: nothing kept in memory) reads the question vectors; without reuse it encodes them."""

    def dense() -> DenseRetriever:
        return DenseRetriever(SentenceTransformerEmbedder(), FlatIndex(), EmbeddingCache(tmp_path / "cache"))

    first = retrieve(small_kb, dense())
    stages.forget()
    second = retrieve(small_kb, dense())
    assert first.stats["cache/query_vectors"] == 0.0 and second.stats["cache/query_vectors"] == 1.0
    assert second.stats["cache/hits"] == 0.0  # searched again: nothing was kept in memory
    same_answers(first, second)
    monkeypatch.setenv(stages.REUSE_ENV, "off")
    stages.forget()
    fresh = retrieve(small_kb, dense())
    assert "cache/query_vectors" not in fresh.stats
    same_answers(first, fresh)


def grid(overrides: tuple[str, ...]) -> list[list[str]]:
    """The combinations of a `-m` command line, in the order Hydra's basic sweeper runs them."""
    axes = [[f"{key}={value}" for value in values.split(",")] for key, values in (o.split("=", 1) for o in overrides)]
    return [list(combination) for combination in itertools.product(*axes)]


def per_question(cfg, corpus, golden) -> tuple[pd.DataFrame, dict]:
    """Every question's metrics (rank and context) and its delivered chunks, for `cfg`."""
    pipeline = build_pipeline(cfg)
    pipeline.latency_sample = 0
    retrieval = pipeline.retrieve(corpus, golden)
    pipeline.retriever.close()
    evaluation = score(golden, retrieval.results).with_context(
        score_contexts(golden, retrieval.contexts, retrieval.chunks, corpus, cfg.context.k)
    )
    return evaluation.per_query, {"delivered": retrieval.delivered_chunks(), "parts": retrieval.parts_by_question()}


@pytest.mark.slow
def test_the_bundled_sweeps_score_every_question_as_without_reuse(tmp_path, monkeypatch):
    """Each bundled sweep's configurations in a sweep's order, reusing stages in one process, against
    each configuration computed alone without reuse: every per-question metric to 1e-12, the same
    delivered chunks and member hits."""
    corpus, golden = load_data(compose_config())
    cache = f"cache_dir={tmp_path / 'cache'}"
    reused_some = 0
    for overrides in BUNDLED_SWEEPS:
        combinations = grid(overrides)
        monkeypatch.setenv(stages.REUSE_ENV, "1")
        stages.forget()
        with_reuse = [per_question(compose_config(*c, cache), corpus, golden) for c in combinations]
        monkeypatch.setenv(stages.REUSE_ENV, "0")
        for combination, (metrics, answers) in zip(combinations, with_reuse):
            stages.forget()
            fresh_metrics, fresh_answers = per_question(compose_config(*combination, cache), corpus, golden)
            pd.testing.assert_frame_equal(metrics, fresh_metrics, check_exact=False, rtol=0, atol=1e-12)
            assert answers == fresh_answers, combination
        reused_some += len(combinations)
    assert reused_some == 4 + 6 + 5


def logged_per_query(cwd, run) -> pd.DataFrame:
    """The run's `tables/per_query.json` (pandas' "split" orient)."""
    table = json.loads((cwd / "mlruns" / run.info.run_id / "artifacts" / "tables" / "per_query.json").read_text())
    return pd.DataFrame(table["data"], columns=table["columns"])


@pytest.mark.slow
def test_a_weight_sweep_reuses_its_members_and_logs_the_same_questions(tmp_path, small_kb_files, monkeypatch):
    """`python -m sweep -m model=hybrid model.weight=...`: after the first job, the members' answers
    are reused (their times 0, `cache/hits` 1); each run's logged per-question table is the one a
    sweep with `SWEEP_REUSE=0` logs."""
    tables = {}
    for reuse in ("1", "0"):
        cwd = tmp_path / f"reuse-{reuse}"
        cwd.mkdir()
        if reuse == "1":
            monkeypatch.delenv(stages.REUSE_ENV)  # a sweep's default
        else:
            monkeypatch.setenv(stages.REUSE_ENV, "0")
        result = sweep(cwd, small_kb_files, "-m", "model=hybrid", "model.weight=0.2,0.8")
        assert result.returncode == 0, result.stderr[-3000:]
        _, runs = runs_in(f"sqlite:///{cwd / 'mlflow.db'}")
        children = {r.data.params["model.weight"]: r for r in runs if r.data.tags.get("mlflow.parentRunId")}
        assert sorted(children) == ["0.2", "0.8"]
        tables[reuse] = {w: logged_per_query(cwd, r) for w, r in children.items()}
        second = children["0.8"].data.metrics
        if reuse == "1":
            assert second["member/minilm/cache/hits"] == second["member/bm25/cache/hits"] == 1.0
            assert second["member/minilm/time/query_encode_s"] == second["member/minilm/time/embed_s"] == 0.0
            assert children["0.2"].data.metrics["member/minilm/cache/hits"] == 0.0
        else:
            assert "member/minilm/cache/hits" not in second
    for weight in ("0.2", "0.8"):
        pd.testing.assert_frame_equal(tables["1"][weight], tables["0"][weight], check_exact=False, rtol=0, atol=1e-12)
    assert np.isfinite(tables["1"]["0.8"].select_dtypes("number").to_numpy(dtype=float)).any()
