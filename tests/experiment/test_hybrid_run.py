"""`python -m sweep model=hybrid`: the fused run logs each member's own metrics and hits, and
those hits alone reproduce the fused ranking."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers.commands import runs_in, sweep
from sweep.retrieval.fusion import fuse
from sweep.retrieval.retriever import Hits


def logged_json(client, run_id: str, path: str, folder: Path) -> dict:
    return json.loads(Path(client.download_artifacts(run_id, path, str(folder))).read_text())


def logged_member_hits(client, run_id: str, folder: Path) -> dict[str, dict[str, list[list]]]:
    """`parts/member_hits.parquet` (every candidate, a row each) as {qid: {member: [[doc, start, end, score], ...]}}."""
    table = pd.read_parquet(client.download_artifacts(run_id, "parts/member_hits.parquet", str(folder)))
    hits: dict[str, dict[str, list[list]]] = {}
    for qid, member, rank, doc, start, end, score in table[
        ["qid", "member", "rank", "doc", "start", "end", "score"]
    ].values:
        rows = hits.setdefault(qid, {}).setdefault(member, [])
        assert rank == len(rows) + 1
        rows.append([doc, int(start), int(end), float(score)])
    return hits


@pytest.fixture(scope="module")
def hybrid_run(tmp_path_factory, small_kb_files):
    """One `python -m sweep model=hybrid` on the small knowledge base (34 chunks), with its own
    empty cache, for both tests: (client, run). Each member contributes its top 10 chunks, so the
    two lists overlap only in part, as 100 of the bundled set's 310 chunks do."""
    cwd = tmp_path_factory.mktemp("hybrid")
    result = sweep(cwd, small_kb_files, "model=hybrid", "model.weight=0.35", "model.norm=z", "model.candidates=10")
    assert result.returncode == 0, result.stderr[-3000:]
    client, runs = runs_in(f"sqlite:///{cwd / 'mlflow.db'}")
    assert len(runs) == 1
    return client, runs[0]


@pytest.mark.slow
def test_a_hybrid_run_logs_each_member_beside_the_fusion(hybrid_run, tmp_path, small_kb_files):
    client, run = hybrid_run
    metrics, params = run.data.metrics, run.data.params
    for name in ("ndcg_at_10", "member/minilm/ndcg_at_10", "member/bm25/ndcg_at_10", "member/bm25/recall_at_5"):
        assert 0 <= metrics[name] <= 1, name
    assert metrics["member/minilm/embed/cache_hit"] == 0.0  # the members' own costs, under their names
    # and the whole's, as the leaderboard reads a run's costs: summed, a hit only where every member's hit
    assert metrics["time/embed_s"] == metrics["member/minilm/time/embed_s"] > 0
    assert metrics["embed/cache_hit"] == 0.0
    assert metrics["index/bytes"] == sum(metrics.get(f"member/{m}/index/bytes", 0) for m in ("minilm", "bm25"))
    assert metrics["corpus/truncated_share"] == metrics["member/minilm/corpus/truncated_share"]
    assert (params["model"], params["model.members.minilm"], params["model.members.bm25"]) == (
        "hybrid",
        "minilm",
        "bm25",
    )
    hits = logged_member_hits(client, run.info.run_id, tmp_path / "artifacts")
    questions = [json.loads(line)["id"] for line in (small_kb_files / "golden.jsonl").read_text().splitlines()]
    assert set(hits) == set(questions)
    for members in hits.values():
        assert set(members) == {"minilm", "bm25"}
        for doc, start, end, score in members["minilm"]:
            assert isinstance(doc, str) and 0 <= start < end and -1 <= score <= 1
    # the table a person reads in the UI: each member's top 10 of every question, as the candidates begin
    shown = logged_json(client, run.info.run_id, "tables/member_hits.json", tmp_path / "artifacts")
    assert shown["columns"] == ["qid", "member", "rank", "doc", "score", "start", "end"]
    assert [[q, m, r, d, st, e, s] for q, m, r, d, s, st, e in shown["data"]] == [
        [qid, member, rank, *hit] for qid, members in hits.items() for member, rows in members.items()
        for rank, hit in enumerate(rows[:10], 1)
    ]  # fmt: skip


@pytest.mark.slow
def test_the_fused_top_10_follows_from_member_hits_alone(hybrid_run, tmp_path):
    """Every question's fused top 10, recomputed from `parts/member_hits.parquet` and the run's
    fusion settings, are the chunks and scores the run delivered."""
    client, run = hybrid_run
    params = run.data.params
    weight = float(params["model.weight"])
    member_hits = logged_member_hits(client, run.info.run_id, tmp_path / "artifacts")
    delivered = logged_json(client, run.info.run_id, "tables/retrieved_chunks.json", tmp_path / "artifacts")
    recomputed, partly_shared = 0, 0
    for qid in member_hits:
        lists, keys = [], {}
        for name in ("minilm", "bm25"):  # the config's order: the weight is the first member's share
            rows = member_hits[qid][name]
            ids = [keys.setdefault((doc, start, end), len(keys)) for doc, start, end, _ in rows]
            lists.append(Hits(np.array([row[3] for row in rows], dtype=np.float64), np.array(ids, dtype=np.int64)))
        partly_shared += set(lists[0].ids.tolist()) != set(lists[1].ids.tolist())  # a chunk one member lacks
        fused = fuse(lists, params["model.fusion"], params["model.norm"], [weight, 1 - weight])[:10]
        chunk_of = {i: key for key, i in keys.items()}
        got = [(hit["doc"], hit["start"], hit["end"]) for hit in delivered[qid]]
        assert got == [chunk_of[i] for i in fused.ids.tolist()], qid
        np.testing.assert_allclose([hit["score"] for hit in delivered[qid]], fused.scores, rtol=0, atol=1e-9)
        recomputed += 1
    assert recomputed == len(delivered) == 15 and partly_shared > 0
