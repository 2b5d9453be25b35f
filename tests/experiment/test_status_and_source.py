"""`golden.status` (issue 46): a run scores the reviewed questions by default, and with `golden.status=all` those
pending review too; either way it splits every metric by the questions' source once they come from more than one
(`source/synthetic/...` beside the overall metrics, and the per-source table). Real `python -m sweep model=bm25`
runs on a slice of the bundled set with generated questions, pending and reviewed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers.commands import compose_config, runs_in, sweep
from sweep.settings import check_config

LLM_BY = "llm:qwen2.5:7b@3f2a9c1b"
PENDING, ACCEPTED = 2, 2  # generated questions still pending review, and accepted by a person


@pytest.fixture(scope="module")
def generated(tmp_path_factory, small_kb_files) -> tuple[Path, list[str], list[str]]:
    """The small knowledge base with four of its answerable questions as `sweep.generate` and a review leave
    them: two still pending, two accepted by a person; the folder, every question id and the pending ones."""
    folder = tmp_path_factory.mktemp("generated")
    shutil.copyfile(small_kb_files / "corpus.jsonl", folder / "corpus.jsonl")
    records = [json.loads(line) for line in (small_kb_files / "golden.jsonl").read_text().splitlines()]
    answerable = [r for r in records if r["relevant"]]
    for record in answerable[:PENDING]:
        record |= {"source": "synthetic", "status": "pending", "by": LLM_BY}
    for record in answerable[PENDING : PENDING + ACCEPTED]:
        record |= {"source": "synthetic", "status": "reviewed", "by": "ana", "at": "2026-12-06T10:00:00Z"}
    (folder / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder, [r["id"] for r in records], [r["id"] for r in answerable[:PENDING]]


def logged(cwd: Path, folder: Path, *overrides: str) -> tuple[dict[str, float], dict[str, list], str]:
    """One `python -m sweep model=bm25 OVERRIDES` run: its metrics, its per-question and per-source tables
    ({column: values}), and what it printed."""
    cwd.mkdir()
    result = sweep(cwd, folder, "model=bm25", *overrides)
    assert result.returncode == 0, result.stderr[-3000:]
    client, [run] = runs_in(f"sqlite:///{cwd / 'mlflow.db'}")

    def table(name: str) -> dict[str, list]:
        path = client.download_artifacts(run.info.run_id, f"tables/{name}.json", str(cwd / "artifacts"))
        logged_table = json.loads(Path(path).read_text())
        return {column: [row[i] for row in logged_table["data"]] for i, column in enumerate(logged_table["columns"])}

    return run.data.metrics, {name: table(name) for name in ("per_query", "per_source")}, result.stdout


@pytest.mark.slow
def test_a_run_scores_reviewed_questions_by_default_and_all_with_status_all(tmp_path, generated):
    folder, qids, pending = generated
    people = len(qids) - PENDING - ACCEPTED  # the questions people wrote

    metrics, tables, stdout = logged(tmp_path / "reviewed", folder)
    assert sorted(tables["per_query"]["qid"]) == sorted(set(qids) - set(pending))  # the pending ones are not scored
    assert (metrics["source/synthetic/n"], metrics["source/human/n"]) == (ACCEPTED, people)
    for name in ("ndcg_at_10", "source/synthetic/ndcg_at_10", "source/human/ndcg_at_10", "source/synthetic/mrr"):
        assert 0 <= metrics[name] <= 1, name
    assert dict(zip(tables["per_source"]["source"], tables["per_source"]["n"])) == {
        "human": people,
        "synthetic": ACCEPTED,
    }
    assert "Per question source" in stdout

    metrics, tables, _ = logged(tmp_path / "all", folder, "golden.status=all")
    assert sorted(tables["per_query"]["qid"]) == sorted(qids)  # every question, those pending review too
    assert (metrics["source/synthetic/n"], metrics["source/human/n"]) == (PENDING + ACCEPTED, people)
    assert 0 <= metrics["source/synthetic/ndcg_at_10"] <= 1


def test_golden_status_is_reviewed_by_default_and_else_reviewed_or_all():
    from sweep.experiment.trial import Settings

    assert compose_config().golden.status == "reviewed"
    assert compose_config("golden=beir", "golden.path=.").golden.status == "reviewed"
    check_config(compose_config("golden.status=all"), Settings)
    with pytest.raises(Exception, match=r"golden.status.*one of reviewed, all"):
        check_config(compose_config("golden.status=pending"), Settings)
