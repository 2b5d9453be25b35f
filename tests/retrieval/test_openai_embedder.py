"""`model/embedder=openai` against a real OpenAI-compatible server on 127.0.0.1 (the bundled MiniLM
behind FastAPI, `helpers/embedding_server.py`), through the official `openai` client: the same
numbers as the local model, the cache, faults, strictness and a key that never leaks."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from helpers import processes
from helpers.commands import one_error_line, runs_in, sweep
from helpers.model_servers import Server, answering, environment
from helpers.models import write_tiny_cross_encoder
from helpers.servers import free_port
from sweep.errors import InputError
from sweep.retrieval.chunking import TokenChunker
from sweep.retrieval.endpoints import APIReranker, OpenAIEmbedder
from sweep.retrieval.lexical import TfidfRetriever
from sweep.retrieval.pipeline import Pipeline, one_torch_thread
from sweep.retrieval.rerank import CrossEncoderReranker

SERVER = Path(__file__).parents[1] / "helpers" / "embedding_server.py"
KEY = "sk-test-5f1e0c2b9a7d4e6f8a1b3c5d7e9f0a2b"  # a value that must never appear in anything written
MODEL = "all-MiniLM-L6-v2"
# `python SERVER ARGS` forked from the preloaded server, with torch and sentence-transformers imported
AS_SCRIPT = "import runpy, sys; sys.argv[0] = sys.argv.pop(1); runpy.run_path(sys.argv[0], run_name='__main__')"


class EmbeddingServer(Server):
    def requests(self) -> int:
        return self.stats()["embedding_requests"]


pytestmark = pytest.mark.slow  # every test here talks to a real server on 127.0.0.1 (started once)


@pytest.fixture(scope="module")
def rerank_model(tmp_path_factory, small_kb) -> Path:
    corpus, golden = small_kb
    texts = [d.content for d in corpus] + [q.question for q in golden]
    return write_tiny_cross_encoder(tmp_path_factory.mktemp("rerank-model"), texts)


@pytest.fixture(scope="module")
def server(rerank_model):
    port = free_port()
    arguments = ("--port", str(port), "--key", KEY, "--reranker", str(rerank_model))
    process = processes.start_code(AS_SCRIPT, SERVER, *arguments, env=environment(), stderr=subprocess.PIPE, text=True)
    with answering(process, EmbeddingServer(port), timeout=120) as running:
        yield running


@pytest.fixture
def clean(server):
    server.faults()
    yield server
    server.faults()


def embedder(server, **settings) -> OpenAIEmbedder:
    os.environ["SWEEP_TEST_KEY"] = KEY
    return OpenAIEmbedder(
        **{"model": MODEL, "base_url": server.base_url, "api_key_env": "SWEEP_TEST_KEY", "timeout": 5} | settings
    )


def sweep_with_endpoint(cwd: Path, server, data: Path, *overrides: str) -> subprocess.CompletedProcess:
    """`python -m sweep` on `data` (the small knowledge base: each question is also one request of
    the latency sample) with the embedding model behind `server`."""
    endpoint = ("model/embedder=openai", f"model.embedder.base_url={server.base_url}", f"model.embedder.model={MODEL}")
    return sweep(cwd, data, *endpoint, *overrides, env={"OPENAI_API_KEY": KEY})


class FirstRun(NamedTuple):
    cwd: Path
    result: subprocess.CompletedProcess
    sent: int  # requests the server counted during the run
    metrics: dict[str, float]
    cache_entries: list[str]


@pytest.fixture(scope="module")
def first_endpoint_run(tmp_path_factory, server, small_kb_files) -> FirstRun:
    """A clean run with the endpoint and an empty cache, what it sent, logged and cached, read
    before any other run: the run a second one repeats from the cache, and a run through faults
    must equal."""
    cwd = tmp_path_factory.mktemp("api")
    server.faults()
    before = server.requests()
    result = sweep_with_endpoint(cwd, server, small_kb_files, "model.embedder.price_per_mtok=0.02")
    assert result.returncode == 0, result.stderr[-2000:]
    sent = server.requests() - before
    [run] = runs_in(f"sqlite:///{cwd / 'mlflow.db'}")[1]
    return FirstRun(cwd, result, sent, run.data.metrics, sorted(p.name for p in (cwd / "cache").glob("*.npz")))


def test_the_endpoint_scores_as_the_local_model_and_a_second_run_sends_nothing(
    tmp_path, clean, first_endpoint_run, small_kb_files
):
    local = sweep(tmp_path, small_kb_files)
    assert local.returncode == 0, local.stderr[-2000:]
    api, first = first_endpoint_run.cwd, first_endpoint_run.result
    before = clean.requests()
    second = sweep_with_endpoint(api, clean, small_kb_files, "model.embedder.price_per_mtok=0.02")
    assert second.returncode == 0, second.stderr[-2000:]
    assert clean.requests() == before and first_endpoint_run.sent > 0  # the second run: not one request
    _, local_runs = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    _, api_runs = runs_in(f"sqlite:///{api / 'mlflow.db'}")
    first_run, second_run = sorted(api_runs, key=lambda r: r.info.start_time)
    assert round(first_run.data.metrics["ndcg_at_10"], 4) == round(local_runs[0].data.metrics["ndcg_at_10"], 4)
    assert second_run.data.metrics["ndcg_at_10"] == first_run.data.metrics["ndcg_at_10"]
    assert first_run.data.metrics["embed/tokens"] > 0 and first_run.data.metrics["cost/embed_usd"] > 0
    assert second_run.data.metrics["embed/requests"] == 0 and second_run.data.metrics["cost/embed_usd"] == 0
    assert second_run.data.metrics["embed/query_requests"] == 0
    written = [api / "mlflow.db", *api.rglob("*")]
    leaked = [p for p in written if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaked == [] and KEY not in first.stdout + first.stderr + second.stdout + second.stderr


def test_faults_are_retried_to_the_same_vectors_and_counted(clean):
    # 19 requests of 4 short texts, each encoded in tenths of a second; the 8th attempt from the
    # faults' setting is held past the 3 s timeout
    texts = [f"chunk number {i} about annual leave and expenses" for i in range(76)]
    expected = embedder(clean, batch_size=4).encode_documents(texts)
    clean.faults(every=20, rate_limit=2, server_error=5, slow=8, slow_s=6)
    faulty = embedder(clean, batch_size=4, timeout=3, max_concurrency=2)
    vectors = faulty.encode_documents(texts)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    stats = faulty.stats()
    assert stats["embed/requests"] == 19 and stats["embed/retries"] >= 3


@pytest.mark.parametrize(
    ("faults", "settings", "message"),
    [
        (
            {"width": 100},
            {"dimensions": 384},
            "returned 100-dimensional vectors where model.embedder.dimensions gave 384",
        ),
        ({"short": True}, {}, "returned 2 vectors for 3 texts"),
        ({"not_json": True}, {}, "not a /embeddings answer"),
        (
            {},
            {"model": "no-such-model"},
            "model.embedder.model=no-such-model: .* has no such model or no /embeddings \\(404\\)",
        ),
        (
            {},
            {"api_key_env": "SWEEP_UNSET_KEY"},
            "model.embedder.api_key_env=SWEEP_UNSET_KEY: the variable is not set \\(401",
        ),
    ],
)
def test_a_bad_answer_is_one_line(clean, faults, settings, message):
    clean.faults(**faults)
    with pytest.raises(InputError, match=message) as error:
        embedder(clean, **settings).encode_documents(["one", "two", "three"])
    assert "\n" not in str(error.value) and KEY not in str(error.value)


def test_a_refused_key_is_named_never_shown(clean, monkeypatch):
    monkeypatch.setenv("SWEEP_WRONG_KEY", "sk-wrong-0000000000000000")
    with pytest.raises(
        InputError, match="api_key_env=SWEEP_WRONG_KEY: the variable holds a key the server refused"
    ) as error:
        embedder(clean, api_key_env="SWEEP_WRONG_KEY").encode_documents(["one"])
    assert "sk-wrong" not in str(error.value)


def test_a_wrong_dimension_fails_the_run_with_one_line_and_caches_nothing(tmp_path, clean, small_kb_files):
    clean.faults(width=100)
    # batches of 4: the first answer comes back before the server has encoded all 34 chunks
    result = sweep_with_endpoint(
        tmp_path, clean, small_kb_files, "model.embedder.dimensions=384", "model.embedder.batch_size=4"
    )
    assert result.returncode == 2
    assert "returned 100-dimensional vectors" in one_error_line(result.stderr)
    assert not list((tmp_path / "cache").glob("*.npz"))


def test_max_cost_refuses_before_any_request(tmp_path, clean, small_kb_files):
    before = clean.requests()
    result = sweep_with_endpoint(
        tmp_path, clean, small_kb_files, "model.embedder.price_per_mtok=20", "model.embedder.max_cost_usd=0.001"
    )
    assert result.returncode == 2
    assert "model.embedder.max_cost_usd=0.001: embedding 34 uncached chunks" in one_error_line(result.stderr)
    assert clean.requests() == before


def test_the_rerank_endpoint_orders_as_the_local_cross_encoder(small_kb, clean, rerank_model, monkeypatch):
    monkeypatch.setenv("RERANK_API_KEY", KEY)
    remote = APIReranker(model="tiny", base_url=clean.base_url, candidates=6, price_per_mtok=0.05)
    local = CrossEncoderReranker(model=str(rerank_model), candidates=6)
    corpus, golden = small_kb
    by_api = Pipeline(TokenChunker(0), TfidfRetriever(), reranker=remote).retrieve(corpus, golden)
    with one_torch_thread():  # as the server runs it: the same sums in the same order, to 1e-6
        by_model = Pipeline(TokenChunker(0), TfidfRetriever(), reranker=local).retrieve(corpus, golden)
    assert by_api.contexts.keys() == by_model.contexts.keys()
    for qid, hits in by_model.contexts.items():
        assert [i for i, _ in by_api.contexts[qid]] == [i for i, _ in hits], qid
        np.testing.assert_allclose([s for _, s in by_api.contexts[qid]], [s for _, s in hits], rtol=0, atol=1e-6)
    stats = by_api.stats
    asked = sum(bool(hits) for hits in by_model.contexts.values())  # a question with no hits asks nothing
    # each question once for its answer, and once more alone for its latency (all are in the sample)
    assert stats["rerank/requests"] == 2 * asked > 0 and stats["rerank/retries"] == 0 and stats["rerank/tokens"] > 0
    assert stats["cost/rerank_usd"] == pytest.approx(stats["rerank/tokens"] * 0.05 / 1e6)


def test_the_cost_cap_stops_reranking_before_the_request_that_would_pass_it(small_kb, clean, monkeypatch):
    monkeypatch.setenv("RERANK_API_KEY", KEY)
    # about 1,000 tokens a question at US$ 0.001 a token: a few questions fit under US$ 5
    remote = APIReranker(model="tiny", base_url=clean.base_url, candidates=6, price_per_mtok=1000, max_cost_usd=5)
    before = clean.stats()["rerank_requests"]
    corpus, golden = small_kb
    with pytest.raises(
        InputError, match=r"reranker.max_cost_usd=5: the next /rerank request .* stopped before sending it"
    ):
        Pipeline(TokenChunker(0), TfidfRetriever(), reranker=remote).retrieve(corpus, golden)
    sent = clean.stats()["rerank_requests"] - before
    assert 0 < sent == remote.endpoint.answered < len(golden) and remote.endpoint.spent_usd <= 5


def test_the_cost_cap_stops_embedding_before_the_request_that_would_pass_it(clean):
    texts = [f"chunk number {i} about annual leave and expenses" for i in range(20)]
    # 5 batches of 4 texts, about 48 tokens each at US$ 0.001 a token: 2 or 3 fit under US$ 0.15
    capped = embedder(clean, batch_size=4, max_concurrency=1, price_per_mtok=1000, max_cost_usd=0.15)
    before = clean.requests()
    with pytest.raises(InputError, match=r"model.embedder.max_cost_usd=0.15: the next /embeddings request"):
        capped.encode_documents(texts)
    assert 0 < clean.requests() - before == capped.endpoint.answered < 5 and capped.endpoint.spent_usd <= 0.15


def test_a_known_model_gets_its_list_price_unless_one_is_given(server):
    assert OpenAIEmbedder(model="text-embedding-3-small").price_per_mtok == 0.02
    assert OpenAIEmbedder(model="text-embedding-3-small", price_per_mtok=0.01).price_per_mtok == 0.01
    assert OpenAIEmbedder(model=MODEL).price_per_mtok is None  # a self-hosted model: no list price


def test_a_run_through_faults_scores_as_a_clean_run_and_caches_each_entry_once(
    tmp_path, clean, first_endpoint_run, small_kb_files
):
    clean.faults(every=20, rate_limit=3, server_error=7, slow=11, slow_s=8)  # 429 Retry-After 1, 500, a timeout
    # small batches, one at a time: the server encodes in turn, so only the held request may time out
    # (a batch takes 1 to 3 s; another that timed out would only add a retry)
    small = ("model.embedder.batch_size=16", "model.embedder.max_concurrency=1", "model.embedder.timeout=6")
    faulty = sweep_with_endpoint(tmp_path, clean, small_kb_files, *small)
    assert faulty.returncode == 0, faulty.stderr[-2000:]
    metrics = {
        "clean": first_endpoint_run.metrics,
        "faulty": runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")[1][0].data.metrics,
    }
    assert metrics["faulty"]["ndcg_at_10"] == metrics["clean"]["ndcg_at_10"]
    assert metrics["faulty"]["embed/retries"] >= 3 and metrics["clean"]["embed/retries"] == 0
    entries = {
        "clean": first_endpoint_run.cache_entries,
        "faulty": sorted(p.name for p in (tmp_path / "cache").glob("*.npz")),
    }
    assert entries["faulty"] == entries["clean"] and entries["clean"]  # the same entries, each written once


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: OpenAIEmbedder(model=MODEL, api_key_env=KEY),
            "model.embedder.api_key_env: not an environment variable's name (it looks like a key itself: give the "
            "variable that holds it, e.g. OPENAI_API_KEY); the value is not shown",
        ),
        (
            lambda: APIReranker(model="tiny", api_key_env=KEY.replace("-", "_")),  # a key that is a valid name
            "reranker.api_key_env: not an environment variable's name (it looks like a key itself: give the "
            "variable that holds it, e.g. RERANK_API_KEY); the value is not shown",
        ),
        (
            lambda: OpenAIEmbedder(model=MODEL, api_key_env="OPENAI API KEY"),
            "model.embedder.api_key_env: not an environment variable's name (a name is letters, digits and _, not "
            "starting with a digit: give the variable that holds the key, e.g. OPENAI_API_KEY); the value is not shown",
        ),
        (
            lambda: OpenAIEmbedder(model=MODEL, base_url=f"https://me:{KEY}@gateway.example/v1"),
            "model.embedder.base_url: the address carries credentials (https://***@gateway.example/v1); give it "
            "without them, and the key in the environment variable model.embedder.api_key_env names; the "
            "credentials are not shown",
        ),
        (
            lambda: APIReranker(model="tiny", base_url=f"https://gateway.example/rerank?x=1&api_key={KEY}"),
            "reranker.base_url: the address carries credentials (https://gateway.example/rerank?***); give it "
            "without them, and the key in the environment variable reranker.api_key_env names; the credentials "
            "are not shown",
        ),
    ],
)
def test_a_key_where_a_name_belongs_or_in_the_address_is_refused_without_showing_it(make, message):
    """Refused when the component is made (before anything is sent, logged or cached), and the
    message never carries the key, whatever form it was given in."""
    with pytest.raises(InputError) as error:
        make()
    assert str(error.value) == message
    assert KEY not in str(error.value) and KEY.replace("-", "_") not in str(error.value)


def test_names_of_variables_pass_the_check():
    for name in ("OPENAI_API_KEY", "SWEEP_TEST_KEY", "AZURE_OPENAI_API_KEY_2", "_private", "my_key"):
        assert OpenAIEmbedder(model=MODEL, api_key_env=name).endpoint.api_key_env == name
    assert APIReranker(model="tiny", base_url="http://127.0.0.1:7997?timeout=3").base_url.endswith("timeout=3")
