"""`python -m sweep.rescore` on a real 4-run sweep of the bundled set (`model=bm25,tfidf chunk=200,0`),
scored again on a second version of the golden set with planted changes: 2 questions removed, 1
reworded, 1 grade changed, 12 added."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import pytrec_eval

from helpers import processes
from helpers.commands import one_error_line, runs_in, sweep
from helpers.paths import KB
from helpers.stores import copy_blank_store
from sweep.formats.golden import load_golden
from sweep.rescore import main
from sweep.tracking.reading import load_table, logged_run
from sweep.tracking.records import load_record
from sweep.tracking.rescores import RESCORES, UNSCORED

TO_TREC = {
    "ndcg_at_10": "ndcg_cut_10",
    "recall_at_5": "recall_5",
    "precision_at_5": "P_5",
    "mrr": "recip_rank",
    "map": "map",
}
ADDED = 12


def new_version(lines: list[dict]) -> list[dict]:
    """The planted changes (module doc): the first 2 removed, the third reworded, the fourth's
    relevant document graded 1 and another judged relevant, 12 questions added."""
    new = [dict(q) for q in lines[2:]]
    new[0]["question"] += " (reworded)"
    first = next(iter(new[1]["relevant"]))
    other = next(d for q in lines[10:] for d in q["relevant"] if d != first)
    new[1]["relevant"] = {first: 1, other: 2}
    new[1].pop("evidence", None)
    added = [dict(q, id=f"new-{i:02d}", question=f"{q['question']}, asked again") for i, q in enumerate(lines[20:32])]
    return new + added


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> tuple[Path, str, str, Path]:
    """(cwd, store, the sweep's parent id, NEW's path)."""
    cwd = tmp_path_factory.mktemp("rescore")
    data = cwd / "data"
    data.mkdir()
    (data / "corpus.jsonl").write_text((KB / "corpus.jsonl").read_text())
    lines = [json.loads(line) for line in (KB / "golden.jsonl").read_text().splitlines()]
    (data / "golden.jsonl").write_text("".join(json.dumps(q) + "\n" for q in lines))
    new = data / "golden_v2.jsonl"
    new.write_text("".join(json.dumps(q) + "\n" for q in new_version(lines)))
    result = sweep(cwd, data, "-m", "model=bm25,tfidf", "chunk=200,0", "verbosity=quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    store = f"sqlite:///{cwd / 'mlflow.db'}"
    _, runs = runs_in(store)
    [parent] = [r.info.run_id for r in runs if r.data.tags.get("sweep.parent") == "true"]
    return cwd, store, parent, new


def rescore(cwd: Path, store: str, *args: str) -> subprocess.CompletedProcess:
    """`python -m sweep.rescore ARGS` in a subprocess that also says whether torch was imported
    (how long it takes: bench/rescore.py)."""
    code = (
        "import sys; from sweep.rescore import main\n"
        "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as exit:\n    code = exit.code\n"
        "print('torch imported:', 'torch' in sys.modules); sys.exit(code)"
    )
    return processes.run(
        [sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
        env=os.environ | {"MLFLOW_TRACKING_URI": store},
    )  # fmt: skip


@pytest.fixture(scope="module")
def rescored(swept) -> subprocess.CompletedProcess:
    cwd, store, parent, new = swept
    return rescore(cwd, store, parent, "--golden", str(new))


def trec_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        qid, _, doc, _, value, _ = line.split()
        run.setdefault(qid, {})[doc] = float(value)
    return run


@pytest.mark.slow
def test_a_sweep_is_rescored_without_torch_as_a_new_sweep(swept, rescored):
    cwd, store, parent, new = swept
    result = rescored  # the module's one re-scoring of the sweep
    assert result.returncode == 0, result.stderr[-3000:]
    assert "torch imported: False" in result.stdout
    assert f"{ADDED + 1} questions of NEW are new: re-run to score them (a003, new-00" in result.stdout
    client = mlflow.MlflowClient(store)
    _, runs = runs_in(store)
    [again] = [r for r in runs if r.data.tags.get("sweep.parent") == "true" and r.info.run_id != parent]
    assert again.data.tags[RESCORES] == parent and again.info.status == "FINISHED"
    assert f"sweep {again.info.run_id} rescores sweep {parent}" in result.stdout
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == again.info.run_id]
    stored = {r.info.run_id for r in runs if r.data.tags.get("mlflow.parentRunId") == parent}
    assert len(children) == 4 and {c.data.tags[RESCORES] for c in children} == stored
    assert {c.data.tags[UNSCORED] for c in children} == {str(ADDED + 1)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", store)
        leaderboard = load_table(logged_run(again.info.run_id), "tables/leaderboard.json")
    assert set(leaderboard["run_id"]) == {c.info.run_id for c in children}
    assert {a.path for a in client.list_artifacts(again.info.run_id)} >= {"tables", "report.html"}


@pytest.mark.slow
def test_rescored_values_are_pytrec_evals_on_the_stored_ranking_with_news_qrels(swept, rescored, tmp_path):
    cwd, store, parent, new = swept
    assert rescored.returncode == 0, rescored.stderr[-3000:]
    client = mlflow.MlflowClient(store)
    _, runs = runs_in(store)
    golden = load_golden(new, warn=False)
    qrels = {q.id: dict(q.relevant) for q in golden}
    for child in (r for r in runs if RESCORES in r.data.tags and not r.data.tags.get("sweep.parent")):
        source = child.data.tags[RESCORES]
        path = Path(client.download_artifacts(source, "run.trec", str(tmp_path)))
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("MLFLOW_TRACKING_URI", store)
            record = load_record(child.info.run_id, every_table=True)
        table = record.per_query.set_index("qid")
        asked = set(table.index)
        assert asked == {q.id for q in golden} - {"a003"} - {f"new-{i:02d}" for i in range(ADDED)}
        theirs = pytrec_eval.RelevanceEvaluator({q: qrels[q] for q in asked}, set(TO_TREC.values())).evaluate(
            {q: docs for q, docs in trec_run(path).items() if q in asked}
        )
        answerable = table[table["answerable"].astype(bool)]
        assert len(answerable) > 100
        for qid, row in answerable.iterrows():
            for ours, trec in TO_TREC.items():
                assert row[ours] == pytest.approx(theirs.get(qid, {}).get(trec, 0.0), abs=1e-9), (qid, ours)
        # what a run logs: the per-type table, the worst questions, context metrics where NEW has evidence
        assert {"per_type", "worst_queries", "worst_context"} <= record.tables.keys()
        assert record.metrics["context/n"] == sum(1 for q in golden if q.evidence and q.id in asked)
        assert "context/recall_at_5" in record.metrics and "context/tokens_at_5" not in record.metrics
        assert record.golden_digest != client.get_run(source).data.tags["data.golden_digest"]


@pytest.mark.slow
def test_a_rescored_run_pairs_with_a_run_scored_on_new_and_agrees_with_it(swept, rescored):
    """A new trial of one configuration on NEW: compare pairs it with the re-scored run (the same
    digest), and every rank metric of every question both scored is the same."""
    cwd, store, parent, new = swept
    assert rescored.returncode == 0
    data = cwd / "data_v2"  # NEW as a trial reads it: golden.jsonl beside the same corpus
    data.mkdir()
    (data / "corpus.jsonl").write_text((new.parent / "corpus.jsonl").read_text())
    (data / "golden.jsonl").write_text(new.read_text())
    result = sweep(cwd, data, "model=bm25", "chunk=200", "verbosity=quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    _, runs = runs_in(store)
    [fresh] = [r for r in runs if not r.data.tags.get("mlflow.parentRunId") and not r.data.tags.get("sweep.parent")]
    [again] = [
        r
        for r in runs
        if RESCORES in r.data.tags and r.data.params.get("model") == "bm25" and r.data.params.get("chunk") == "200"
    ]
    assert fresh.data.tags["data.golden_digest"] == again.data.tags["data.golden_digest"]
    compared = processes.run(
        [sys.executable, "-m", "sweep.compare", again.info.run_id, fresh.info.run_id, "--json", "--no-log"],
        cwd=cwd, capture_output=True, text=True, timeout=300, env=os.environ | {"MLFLOW_TRACKING_URI": store},
    )  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    data = json.loads(compared.stdout)
    assert data["n_questions"] == len(load_golden(new, warn=False)) - ADDED - 1
    for name in ("ndcg_at_10", "recall_at_5", "mrr", "map", "context/recall_at_5"):
        assert data["metrics"][name]["delta"] == pytest.approx(0, abs=1e-12), name


@pytest.mark.slow
def test_a_single_run_is_rescored_alone(swept):
    cwd, store, parent, new = swept
    _, runs = runs_in(store)
    child = next(r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent)
    result = rescore(cwd, store, child.info.run_id, "--golden", str(new), "--experiment", "versions")
    assert result.returncode == 0, result.stderr[-3000:]
    _, moved = runs_in(store, "versions")
    [again] = moved
    assert again.data.tags[RESCORES] == child.info.run_id and "mlflow.parentRunId" not in again.data.tags
    assert result.stdout.startswith(f"rescored {child.info.run_id} as {again.info.run_id} (")


def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    copy_blank_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.chdir(tmp_path)
    for args, message in [
        (["nope", "--golden", "g.jsonl"], "error: 'nope': not an MLflow run id"),
        (["0" * 32, "--golden", "g.jsonl"], f"error: no run {'0' * 32} at sqlite:///"),
    ]:
        with pytest.raises(SystemExit) as exit:
            main(args)
        err = capsys.readouterr().err
        assert exit.value.code == 2 and err.startswith(message) and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_bad_input_on_a_real_sweep_leaves_the_store_as_it_was(swept, tmp_path):
    cwd, store, parent, new = swept
    _, before = runs_in(store)
    missing, result = tmp_path / "absent.jsonl", None
    for args, message in [
        ([parent, "--golden", str(missing)], f"--golden {missing}: no such file or folder"),
        ([parent, "--golden", str(cwd / "data" / "corpus.jsonl")], "corpus.jsonl"),
    ]:
        result = rescore(cwd, store, *args)
        assert result.returncode == 2 and message in one_error_line(result.stderr), result.stderr
    _, after = runs_in(store)
    assert len(after) == len(before)
