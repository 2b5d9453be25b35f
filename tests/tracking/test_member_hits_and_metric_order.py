"""What a run holds for a person in the MLflow UI, saved into a real SQLite store in tmp_path: the
objective as the first metric (what the compare view plots), a composite retriever's member hits
as a table the artifact viewer shows (each member's top 10 per question), with every candidate
still read back; and a run logged before the table, its hits a mapping, still read back."""

from __future__ import annotations

import json

import mlflow
import pytest

from sweep.evaluation.record import Part, TrialRecord
from sweep.tracking.lifecycle import trial_run
from sweep.tracking.records import MEMBER_HITS_SHOWN, load_record, save_record

QUESTIONS = ("q1", "q2", "q3")


def candidates(member: str, qid: str, n: int) -> list[list]:
    """`n` chunk hits, best first: [doc, start, end, score], scores no float rounds exactly."""
    return [[f"{member}-doc-{i % 7}", 10 * i, 10 * i + 9, 1 / (i + 3) + int(qid[1:]) / 7] for i in range(n)]


def hybrid_record() -> TrialRecord:
    """A record whose metrics put the objective (`mrr`) last, and two members' hits: 25 and 4
    candidates per question (more and fewer than the table shows)."""
    hits = {
        "dense": {q: candidates("dense", q, 25) for q in QUESTIONS},
        "bm25": {q: candidates("bm25", q, 4) for q in QUESTIONS},
    }
    metrics = {"member/dense/time/model_load_s": 1.25, "member/dense/mrr": 0.25, "member/bm25/mrr": 0.5}
    metrics |= {"time/embed_s": 0.5, "recall_at_5": 0.75, "mrr": 0.5}
    parts = {name: Part(member_metrics(metrics, name), by_question) for name, by_question in hits.items()}
    return TrialRecord(
        "model=hybrid", {"objective": "mrr", "model": {"weight": 0.3}}, ("model=hybrid",), {"model": "hybrid"},
        metrics=metrics, parts=parts,
    )  # fmt: skip


def member_metrics(metrics: dict[str, float], member: str) -> dict[str, float]:
    prefix = f"member/{member}/"
    return {key.removeprefix(prefix): value for key, value in metrics.items() if key.startswith(prefix)}


def test_the_objective_is_the_first_metric_the_run_lists(tracking):
    record = hybrid_record()
    with trial_run("golden-sweep-test", record.name) as run:
        save_record(record)
    logged = mlflow.MlflowClient().get_run(run.run_id).data.metrics
    assert list(logged)[0] == "mrr" and logged.keys() == record.metrics.keys()


def test_member_hits_are_a_table_of_the_top_ten_and_every_candidate_reads_back(tracking):
    record = hybrid_record()
    with trial_run("golden-sweep-test", record.name) as run:
        save_record(record)
    client = mlflow.MlflowClient()
    tags = client.get_run(run.run_id).data.tags
    assert {"path": "tables/member_hits.json", "type": "table"} in json.loads(tags["mlflow.loggedArtifacts"])
    mlflow.set_experiment(experiment_id=run.experiment_id)
    table = mlflow.load_table("tables/member_hits.json", run_ids=[run.run_id])  # as the UI reads it
    assert list(table.columns) == ["qid", "member", "rank", "doc", "score", "start", "end"]
    assert len(table) == len(QUESTIONS) * (MEMBER_HITS_SHOWN + 4)
    first = table[(table["qid"] == "q2") & (table["member"] == "dense")]
    assert first["rank"].tolist() == list(range(1, MEMBER_HITS_SHOWN + 1))
    shown = candidates("dense", "q2", MEMBER_HITS_SHOWN)
    assert first[["doc", "start", "end"]].values.tolist() == [hit[:3] for hit in shown]
    assert first["score"].tolist() == pytest.approx([hit[3] for hit in shown], rel=1e-14)  # pandas reads 15 digits
    assert table["qid"].tolist()[: MEMBER_HITS_SHOWN + 4] == ["q1"] * (MEMBER_HITS_SHOWN + 4)  # by question
    assert {a.path for a in client.list_artifacts(run.run_id, "parts")} == {"parts/member_hits.parquet"}

    loaded = load_record(run.run_id, per_query=False, hits=True)
    assert loaded.parts == record.parts  # all 25 of each question, exactly


def test_a_run_logged_before_the_table_reads_its_hits_back(tracking):
    """Before, `tables/member_hits.json` held `{qid: {member: [[doc, start, end, score], ...]}}`
    itself, logged with `mlflow.log_dict`, and no Parquet file."""
    record = hybrid_record()
    hits = {q: {name: part.hits[q] for name, part in record.parts.items()} for q in QUESTIONS}
    with trial_run("golden-sweep-test", record.name) as run:
        mlflow.log_metrics(record.metrics)
        mlflow.log_dict(hits, "tables/member_hits.json")
    loaded = load_record(run.run_id, per_query=False, hits=True)
    assert loaded.parts == record.parts
    assert load_record(run.run_id, per_query=False).parts["bm25"] == Part({"mrr": 0.5})  # hits only when asked for
