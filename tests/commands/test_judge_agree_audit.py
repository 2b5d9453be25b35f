"""`python -m sweep.judge agree` and `audit` on a real sweep (`real_sweep`: bm25 and tf-idf on the small
knowledge base) with judgments written here, no LLM: a judge that agrees with people perfectly and
grades every unjudged pooled document 0 changes nothing; a planted one (grades lowered, unjudged
documents only tf-idf ranks high called relevant) turns the leaderboard. People's grades are the
sweep's golden file, plus a 0 per question for an unjudged document, as a person labelling the
pool gives them (without one, every pair both graded is relevant and the binary κ is undefined)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from helpers import processes
from helpers.commands import one_error_line
from helpers.stores import copy_blank_store
from sweep import judge
from sweep.evaluation.leaderboard import build
from sweep.evaluation.record import TrialRecord
from sweep.formats.corpus import Corpus, Document
from sweep.formats.golden import GoldenSet, load_golden
from sweep.formats.judgments import JudgeGrade, person_grades, write_judgments
from sweep.labelling.audit import JUDGE, PEOPLE, audit_sweep, rescored
from sweep.tracking.lifecycle import PARENT_RUN, trial_run
from sweep.tracking.reading import load_table, logged_run
from sweep.tracking.records import load_record, save_record
from sweep.tracking.sweeps import finish_sweep, start_sweep

pytestmark = pytest.mark.slow  # every test reads the real sweep, which runs `python -m sweep` once
AT = "2026-12-06T10:00:00Z"
DEPTH = 10  # the pool: each run's top documents


def judged(qid: str, doc: str, grade: int | None, calibration: bool = False) -> JudgeGrade:
    line = None if grade is None else f"##final score: {grade}"
    return JudgeGrade(qid, doc, grade, "qwen2.5:7b", "3f2a9c1b", 400, 90, line, AT, calibration)


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = judge.main(argv)
    except SystemExit as exit:
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def sweep_data(real_sweep, tmp_path_factory):
    """The store, the sweep's parent id, each model's child id, each model's top documents, and
    people's grades (the sweep's golden file plus a 0 per question) as a file."""
    store, children, cwd, _ = real_sweep
    folder = tmp_path_factory.mktemp("judge-audit")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", store)
        tops = {
            model: {
                q: [d for d, _ in hits] for q, hits in load_record(run, results=True).results.rankings(DEPTH).items()
            }
            for model, run in children.items()
        }
    parent = mlflow.MlflowClient(store).get_run(children["bm25"]).data.tags["mlflow.parentRunId"]
    source = Path(mlflow.MlflowClient(store).get_run(children["bm25"]).data.tags["data.corpus"]).parent / "golden.jsonl"
    lines = [json.loads(line) for line in source.read_text().splitlines()]
    for question in lines:  # a person graded bm25's first unjudged document (not one tf-idf ranks in its top 3) 0
        unjudged = [
            d
            for d in tops["bm25"].get(question["id"], [])
            if d not in question["relevant"] and d not in tops["tfidf"].get(question["id"], [])[:3]
        ]
        if unjudged:
            question["relevant"][unjudged[0]] = {"grade": 0, "by": "ana", "at": AT}
    labelled = folder / "labelled.jsonl"
    labelled.write_text("".join(json.dumps(q) + "\n" for q in lines))
    return store, parent, children, tops, source, labelled, cwd


@pytest.fixture
def in_store(sweep_data, monkeypatch):
    store, *_, cwd = sweep_data
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.chdir(cwd)
    monkeypatch.delenv(PARENT_RUN, raising=False)
    return sweep_data


def pooled(golden: GoldenSet, tops: dict) -> dict[str, list[str]]:
    """Each question's pooled documents people never graded."""
    return {q.id: sorted({d for top in tops.values() for d in top.get(q.id, [])} - set(q.relevant)) for q in golden}


def perfect_judge(golden: GoldenSet, tops: dict) -> list[JudgeGrade]:
    """People's grades as they are (calibration pairs), 0 for every pooled document they never graded."""
    grades = [judged(q.id, d, grade, calibration=True) for q in golden for d, grade in q.relevant.items()]
    return grades + [judged(qid, d, 0) for qid, docs in pooled(golden, tops).items() for d in docs]


def planted_judge(golden: GoldenSet, tops: dict) -> list[JudgeGrade]:
    """Every third of people's grades changed (relevant to 0, 0 to 2), every unjudged document tf-idf
    ranks in its top 3 and BM25 does not called highly relevant (3), the other unjudged 0; one answer
    without a grade."""
    graded = [(q.id, d, grade) for q in golden for d, grade in q.relevant.items()]
    grades = [
        judged(qid, d, (0 if grade else 2) if i % 3 == 0 else grade, calibration=True)
        for i, (qid, d, grade) in enumerate(graded)
    ]
    for qid, docs in pooled(golden, tops).items():
        planted = set(tops["tfidf"].get(qid, [])[:3]) - set(tops["bm25"].get(qid, [])[:3])
        grades += [judged(qid, d, 3 if d in planted else 0) for d in docs]
    return [*grades[:-1], judged(grades[-1].qid, grades[-1].doc, None)]


def sklearn_kappa(golden: GoldenSet, grades: list[JudgeGrade]) -> float:
    people = person_grades(golden)
    both = [(people[g.pair], g.grade) for g in grades if g.grade is not None and g.pair in people]
    return cohen_kappa_score([p >= 1 for p, _ in both], [j >= 1 for _, j in both])


def test_the_audit_under_peoples_grades_is_the_sweeps_own_leaderboard(in_store, tmp_path):
    _, parent, children, tops, source, _, _ = in_store
    golden = load_golden(source, warn=False)
    write_judgments(tmp_path / "judge.jsonl", planted_judge(golden, tops))
    audit = audit_sweep(parent, tmp_path / "judge.jsonl")
    assert audit.golden == str(source) and audit.objective == "ndcg_at_10" and audit.same_golden is True
    for run_id in children.values():
        logged = load_record(run_id)
        again = rescored(load_record(run_id, results=True), golden)
        common = [c for c in again.per_query.columns if c in logged.per_query.columns]
        assert len(common) > 10  # every rank metric; the context metrics need the chunks, not the grades
        pd.testing.assert_frame_equal(again.per_query[common], logged.per_query[common], check_exact=True)
        values = audit.boards[PEOPLE].per_query[run_id]
        assert values.equals(logged.per_query.set_index("qid")["ndcg_at_10"].astype(float).rename(run_id))
    board = audit.boards[PEOPLE].leaderboard
    swept = load_table(logged_run(parent), "tables/leaderboard.json").set_index("run_id")
    columns = ["config", "status", "mean", "ci_low", "ci_high", "delta", "p_value", "p_holm", "tied_with_best", "n"]
    pd.testing.assert_frame_equal(board[columns], swept.loc[board.index, columns], check_exact=True, check_dtype=False)
    assert list(board.index) == list(swept.index)
    assert not audit.boards[JUDGE].per_query.equals(audit.boards[PEOPLE].per_query)


def test_a_perfect_judge_changes_nothing(in_store, tmp_path, capsys):
    store, parent, _, tops, _, labelled, _ = in_store
    golden = load_golden(labelled, warn=False)
    write_judgments(tmp_path / "perfect.jsonl", perfect_judge(golden, tops))
    argv = ["audit", parent, "--judgments", str(tmp_path / "perfect.jsonl"), "--golden", str(labelled), "--json"]
    code, out, err = run_main(argv, capsys)
    assert code == 0, err
    found = json.loads(out)
    assert found["agreement"]["kappa"] == 1.0 and found["agreement"]["weighted_kappa"] == 1.0
    against = found["against_people"]["judge"]
    assert against["tau"] == 1.0 and against["same_best"] and against["same_tied"] and against["verdict_flips"] == 0
    rows = found["leaderboards"]
    assert all(row["judge_mean"] == row["people_mean"] for row in rows) and len(rows) == 2
    assert found["filled_judgments"] == sum(len(docs) for docs in pooled(golden, tops).values()) > 0
    assert found["golden_the_sweep_scored_on"] is False  # a copy with people's 0 grades added
    metrics = mlflow.MlflowClient(store).get_run(parent).data.metrics
    expected = {"judge/kappa": 1.0, "judge/weighted_kappa": 1.0, "judge/tau": 1.0, "judge/same_best": 1.0}
    assert {key: metrics[key] for key in expected} == expected
    assert metrics["judge/same_tied"] == 1.0 and metrics["judge/verdict_flips"] == 0.0
    assert metrics["judge/filled_judgments"] == found["filled_judgments"]
    listed = {a.path for a in mlflow.MlflowClient(store).list_artifacts(parent, "tables")}
    assert "tables/judge_audit.json" in listed


def test_a_planted_judge_turns_the_leaderboard(in_store, tmp_path, capsys):
    store, parent, _, tops, _, labelled, _ = in_store
    golden = load_golden(labelled, warn=False)
    grades = planted_judge(golden, tops)
    write_judgments(tmp_path / "planted.jsonl", grades)
    argv = ["audit", "latest", "--judgments", str(tmp_path / "planted.jsonl"), "--golden", str(labelled)]
    code, out, err = run_main([*argv, "--json"], capsys)
    assert code == 0, err
    found = json.loads(out)
    kappa = sklearn_kappa(golden, grades)
    assert found["agreement"]["kappa"] == pytest.approx(kappa, abs=1e-9) and 0 < kappa < 1
    assert found["agreement"]["no_grade"] == 1
    against = found["against_people"]["judge"]
    assert against["tau"] == -1.0 and not against["same_best"] and against["verdict_flips"] == 1
    metrics = mlflow.MlflowClient(store).get_run(parent).data.metrics
    assert metrics["judge/tau"] == -1.0 and metrics["judge/kappa"] == pytest.approx(kappa, abs=1e-9)
    assert metrics["judge/same_best"] == 0.0 and metrics["judge/verdict_flips"] == 1.0

    code, out, err = run_main(argv, capsys)
    assert code == 0, err
    assert f"Cohen's κ (relevant: grade >= 1): {kappa:.3f}" in out
    assert f"warning: {labelled} is not the golden set the sweep was scored on (its digest differs)" in out
    assert "judge vs people: Kendall's τ -1.000; best: model=tfidf, not model=bm25" in out
    assert "model=bm25 vs model=tfidf: people neither worse, judge model=bm25 worse" in out


def test_agree_prints_kappa_and_the_counts(in_store, tmp_path, capsys):
    _, _, _, tops, _, labelled, _ = in_store
    golden = load_golden(labelled, warn=False)
    grades = planted_judge(golden, tops)
    write_judgments(tmp_path / "planted.jsonl", grades)
    code, out, err = run_main(["agree", str(labelled), str(tmp_path / "planted.jsonl"), "--json"], capsys)
    assert code == 0, err
    found = json.loads(out)
    people = person_grades(golden)
    assert found["kappa"] == pytest.approx(sklearn_kappa(golden, grades), abs=1e-9)
    assert found["pairs"] == len(people) == found["calibration"]
    assert found["judge_only"] == len(grades) - len(people) - 1 and found["no_grade"] == 1
    low, high = found["kappa_interval"]
    assert low <= found["kappa"] <= high
    code, out, _ = run_main(["agree", str(labelled), str(tmp_path / "planted.jsonl")], capsys)
    assert code == 0 and f"Cohen's κ (relevant: grade >= 1): {found['kappa']:.3f} [{low:.3f}, {high:.3f}]" in out

    # the sweep's own golden file, a judge that agrees: every pair both graded is relevant, so the
    # binary κ is undefined (and says why); the weighted one is 1
    source = in_store[4]
    write_judgments(tmp_path / "perfect.jsonl", perfect_judge(load_golden(source, warn=False), tops))
    code, out, _ = run_main(["agree", str(source), str(tmp_path / "perfect.jsonl"), "--json"], capsys)
    found = json.loads(out)
    assert code == 0 and found["kappa"] is None and "one class (relevant)" in found["kappa_reason"]
    assert found["weighted_kappa"] == 1.0
    code, out, _ = run_main(["agree", str(source), str(tmp_path / "perfect.jsonl")], capsys)
    assert code == 0 and "Cohen's κ (relevant: grade >= 1): undefined: people and the judge put all" in out


def test_audit_reads_no_model(in_store, tmp_path):
    """A subprocess: the audit imports neither torch nor a retriever, and prints no download bars."""
    store, parent, _, tops, source, _, cwd = in_store
    write_judgments(tmp_path / "perfect.jsonl", perfect_judge(load_golden(source, warn=False), tops))
    script = (
        "import sys; from sweep import judge; code = judge.main(sys.argv[1:]); "
        "assert 'torch' not in sys.modules and 'sweep.retrieval.pipeline' not in sys.modules; sys.exit(code)"
    )
    result = processes.run(
        [sys.executable, "-c", script, "audit", parent, "--judgments", str(tmp_path / "perfect.jsonl")],
        cwd=cwd, capture_output=True, text=True, timeout=300, env=os.environ | {"MLFLOW_TRACKING_URI": store},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and "judge vs people: Kendall's τ 1.000; best: the same" in result.stdout


def sweep_without_finished_runs(folder: Path) -> tuple[str, str]:
    """A store with a sweep whose only child failed before it was scored: (store, parent id)."""
    folder.mkdir()
    copy_blank_store(folder)
    store = f"sqlite:///{folder / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("MLFLOW_TRACKING_URI", store)
        parent = start_sweep("golden-sweep", ["-m", "model=bm25"], "ndcg_at_10")
        with pytest.raises(RuntimeError), trial_run("golden-sweep", "model=bm25"):
            save_record(TrialRecord("model=bm25", {"model": "bm25"}, corpus=Corpus((Document("d", "text"),))))
            raise RuntimeError("the index could not be built")
        finish_sweep(build)
    return store, parent


def test_bad_input_is_one_error_line(in_store, tmp_path, capsys, monkeypatch):
    _, parent, children, tops, source, _, _ = in_store
    good = tmp_path / "judge.jsonl"
    write_judgments(good, perfect_judge(load_golden(source, warn=False), tops))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text() + json.dumps(judged("a001", "x", 1).record() | {"grade": -1}) + "\n")
    unknown = "0" * 32
    cases = [
        (["audit", unknown, "--judgments", str(good)], f"no run {unknown} at"),
        (["audit", children["bm25"], "--judgments", str(good)], "not a sweep's parent run"),
        (["audit", parent, "--judgments", str(bad)], f"{bad}:{len(good.read_text().splitlines()) + 1}: 'grade' is -1"),
        (["audit", parent, "--judgments", str(tmp_path / "none.jsonl")], "no such judgments file"),
        (["agree", str(source), str(bad)], "'grade' is -1"),
    ]
    for argv, message in cases:
        code, out, err = run_main(argv, capsys)
        assert code == 2 and message in one_error_line(err), (argv, err)
    store, empty = sweep_without_finished_runs(tmp_path / "empty")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    code, _, err = run_main(["audit", empty, "--judgments", str(good)], capsys)
    assert code == 2 and one_error_line(err) == f"sweep {empty} has no finished run to audit"


def test_a_subprocess_says_it_in_one_line(in_store, tmp_path):
    store, *_, cwd = in_store
    judgments = tmp_path / "judge.jsonl"
    write_judgments(judgments, [judged("a001", "d", 1)])
    result = subprocess.run(
        [sys.executable, "-m", "sweep.judge", "audit", "0" * 32, "--judgments", str(judgments)],
        cwd=cwd, capture_output=True, text=True, timeout=300, env=os.environ | {"MLFLOW_TRACKING_URI": store},
    )  # fmt: skip
    assert result.returncode == 2 and one_error_line(result.stderr).startswith(f"no run {'0' * 32} at")
