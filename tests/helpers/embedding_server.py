"""A real OpenAI-compatible model server for the tests: the bundled MiniLM behind FastAPI and
uvicorn on 127.0.0.1 (and a local CrossEncoder behind `/v1/rerank`), with request counters and
injectable faults.

    PYTHONPATH=tests python tests/helpers/embedding_server.py --port 8123 [--key SECRET] [--reranker FOLDER]

`POST /v1/embeddings` answers as OpenAI does (`data[{index, embedding}]`, `usage.prompt_tokens`
counted with the model's tokenizer; `dimensions` truncates). `GET /admin/stats` gives the counts;
`POST /admin/faults` sets what goes wrong: `{"every": 20, "rate_limit": 3, "server_error": 7,
"slow": 11, "slow_s": 3}` answers the 3rd request of every 20 (counted from this call) with 429
and `Retry-After: 1` (`retry_after` sets it), the 7th with 500 and holds the 11th for 3 s; `{"width": 100}` cuts every
vector to 100 numbers, `{"short": true}` drops the last vector of every answer, `{"not_json": true}`
answers 200 with HTML.
`POST /v1/rerank` answers as Cohere and Jina do (`results[{index, relevance_score}]`, best first),
the scores the CrossEncoder's raw logits.
"""

from __future__ import annotations

import argparse
import threading

import torch
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from sentence_transformers import CrossEncoder, SentenceTransformer

from helpers.model_servers import positional_fault
from sweep.retrieval.models import default_model_path

MODEL_NAME = "all-MiniLM-L6-v2"


def create_app(key: str | None = None, reranker: str | None = None) -> FastAPI:
    app = FastAPI()
    model = SentenceTransformer(default_model_path(), device="cpu", local_files_only=True)
    cross_encoder = CrossEncoder(reranker, device="cpu", local_files_only=True) if reranker else None
    state = {"embedding_requests": 0, "rerank_requests": 0, "answered": 0, "texts": 0, "faults": {}, "since_faults": 0}
    lock = threading.Lock()

    @app.get("/admin/stats")
    def stats() -> dict:
        return {k: v for k, v in state.items() if k != "faults"}

    @app.post("/admin/faults")
    async def faults(request: Request) -> dict:
        faults = await request.json()
        with lock:
            state["faults"], state["since_faults"] = faults, 0
        return faults

    @app.post("/v1/embeddings")
    async def embeddings(request: Request):
        with lock:
            state["embedding_requests"] += 1
            state["since_faults"] += 1
            number = state["since_faults"]
        if key is not None and request.headers.get("authorization") != f"Bearer {key}":
            return JSONResponse({"error": {"message": "invalid api key"}}, status_code=401)
        body = await request.json()
        if body.get("model") != MODEL_NAME:
            return JSONResponse({"error": {"message": f"model {body.get('model')} not found"}}, status_code=404)
        faults = state["faults"]
        fault = await positional_fault(faults, number)
        if fault is not None:
            return fault
        if faults.get("not_json"):
            return PlainTextResponse("<html>gateway</html>", status_code=200, media_type="text/html")
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        width = faults.get("width") or body.get("dimensions") or vectors.shape[1]
        rows = [[float(x) for x in vector[:width]] for vector in vectors]
        if faults.get("short"):
            rows = rows[:-1]
        tokens = sum(len(ids) for ids in model.tokenizer(texts)["input_ids"])
        with lock:
            state["answered"] += 1
            state["texts"] += len(texts)
        return {
            "object": "list",
            "model": MODEL_NAME,
            "data": [{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(rows)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    @app.post("/v1/rerank")
    async def rerank(request: Request):
        with lock:
            state["rerank_requests"] += 1
        if key is not None and request.headers.get("authorization") != f"Bearer {key}":
            return JSONResponse({"error": {"message": "invalid api key"}}, status_code=401)
        body = await request.json()
        pairs = [(body["query"], document) for document in body["documents"]]
        scores = cross_encoder.predict(pairs, activation_fn=torch.nn.Identity(), show_progress_bar=False)
        ranked = sorted(range(len(pairs)), key=lambda i: -float(scores[i]))[: body.get("top_n") or len(pairs)]
        tokens = sum(len(ids) for ids in cross_encoder.tokenizer(*zip(*pairs))["input_ids"])
        return {
            "results": [{"index": i, "relevance_score": float(scores[i])} for i in ranked],
            "usage": {"total_tokens": tokens},
        }

    return app


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--key", default=None)
    parser.add_argument("--reranker", default=None)
    arguments = parser.parse_args()
    # one thread, as a server answering one request per core runs: beside the tests' busy processes,
    # two threads fighting for 2 cores made a batch of 16 short texts outlast a client's 5 s timeout
    torch.set_num_threads(1)
    app = create_app(arguments.key, arguments.reranker)
    uvicorn.run(app, host="127.0.0.1", port=arguments.port, log_level="warning")
