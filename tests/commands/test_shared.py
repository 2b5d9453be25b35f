"""`sweep.compare` and `sweep.check` across two versions of a golden set: refused by default with the
command that re-scores, and `--shared` on the questions both versions hold with identical judgments.
Runs logged in process to a real SQLite store, each scored on its version read from a file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlflow
import pytest

from helpers.data import ranked
from helpers.logged import EXPERIMENT, scored_record
from helpers.stores import copy_blank_store
from sweep import check, compare
from sweep.evaluation import score
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden
from sweep.tracking.lifecycle import PARENT_RUN, trial_run
from sweep.tracking.records import save_record

QUESTIONS = 30


def version_1() -> list[dict]:
    return [
        {"id": f"q{i:02d}", "question": f"question {i}", "type": "factoid", "relevant": {f"d{i:02d}": 2}}
        for i in range(QUESTIONS)
    ]


def version_2() -> list[dict]:
    """Two questions removed, one reworded, one regraded, one with a judgment added, one retyped
    (its judgments are the same: it is shared), four added."""
    lines = [dict(q) for q in version_1()[2:]]
    by_id = {q["id"]: q for q in lines}
    by_id["q02"]["question"] = "question 2, reworded"
    by_id["q03"]["relevant"] = {"d03": 1}
    by_id["q04"]["relevant"] = {"d04": 2, "d05": 0}
    by_id["q05"]["type"] = "howto"
    added = [
        {"id": f"q{i:02d}", "question": f"question {i}", "type": "factoid", "relevant": {f"d{i:02d}": 2}}
        for i in range(QUESTIONS, QUESTIONS + 4)
    ]
    return lines + added


def by_hand(a: list[dict], b: list[dict]) -> set[str]:
    """The questions of both files with the same id, text and grades."""
    b_by_id = {q["id"]: q for q in b}
    return {
        q["id"]
        for q in a
        if q["id"] in b_by_id
        and (b_by_id[q["id"]]["question"], b_by_id[q["id"]]["relevant"]) == (q["question"], q["relevant"])
    }


def write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def log_scored(name: str, golden_path: Path, corpus_path: Path, third: set[str] = frozenset()) -> str:
    """A run of config `model=<name>` scored on the golden file at `golden_path`: each question's
    relevant document first, third for the questions in `third`."""
    corpus = load_corpus(corpus_path)
    golden = load_golden(golden_path, corpus, warn=False)
    results = {}
    for q in golden:
        best = max(q.relevant, key=q.relevant.get)
        results[q.id] = ["d90", "d91", best] if q.id in third else [best, "d90", "d91"]
    with trial_run(EXPERIMENT, name) as run:
        save_record(scored_record(name, golden, corpus, score(golden, ranked(results))))
    return run.run_id


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    """(folder, run A on version 1, run B on version 2 (8 shared questions third), the two versions' lines)."""
    folder = tmp_path_factory.mktemp("shared")
    copy_blank_store(folder)
    corpus = folder / "corpus.jsonl"
    write(corpus, [{"id": f"d{i:02d}", "text": f"document {i}"} for i in [*range(QUESTIONS + 4), 90, 91]])
    v1, v2 = write(folder / "golden_v1.jsonl", version_1()), write(folder / "golden_v2.jsonl", version_2())
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{folder / 'mlflow.db'}")
        patch.delenv(PARENT_RUN, raising=False)
        a = log_scored("base", v1, corpus)
        b = log_scored("candidate", v2, corpus, third={f"q{i:02d}" for i in range(10, 18)})
        yield folder, a, b, version_1(), version_2()
    mlflow.set_tracking_uri(None)


def run_main(module, argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = module.main(argv)
    except SystemExit as exit:
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def test_compare_refuses_by_default_and_names_the_rescore_command(versions, capsys):
    _, a, b, _, _ = versions
    for module, argv in [(compare, [a, b]), (check, ["--baseline", a, "--candidate", b])]:
        code, out, err = run_main(module, argv, capsys)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert err.startswith(f"error: runs {a} and {b} were scored on different golden sets")
        assert f"(python -m sweep.rescore {a} --golden NEW)" in err and "(--shared)" in err


def test_shared_pairs_exactly_the_questions_a_by_hand_intersection_gives(versions, capsys):
    _, a, b, v1, v2 = versions
    expected = by_hand(v1, v2)
    assert expected == {f"q{i:02d}" for i in range(5, QUESTIONS)}  # q05 changed its type only
    comparison = compare.compare_runs(a, b, shared=True)
    assert set(comparison.a_values.index) == set(comparison.b_values.index) == expected
    assert (comparison.shared.questions, comparison.shared.of_a, comparison.shared.of_b) == (25, 30, 32)
    sentence = "compared on 25 of 30 questions of A and 25 of 32 of B: the questions both golden sets hold with identical judgments"
    code, out, err = run_main(compare, [a, b, "--shared", "--json", "--no-log"], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["n_questions"] == 25 and result["shared"] == {
        "questions": 25,
        "of_a": 30,
        "of_b": 32,
        "what": sentence,
    }
    ndcg = result["metrics"]["ndcg_at_10"]
    assert (ndcg["wins"], ndcg["ties"], ndcg["losses"]) == (0, 17, 8) and ndcg["delta"] == pytest.approx(-8 * 0.5 / 25)
    code, out, err = run_main(compare, [a, b, "--shared", "--no-log"], capsys)
    assert code == 0 and f"): {sentence}" in out
    # the same golden set: --shared changes nothing
    same = compare.compare_runs(a, a, shared=True)
    assert same.shared is None and same.n_questions == QUESTIONS


def test_check_shared_gates_on_the_shared_questions(versions, capsys):
    _, a, b, _, _ = versions
    code, out, _ = run_main(check, ["--baseline", a, "--candidate", b, "--shared"], capsys)
    assert code == 1, out
    assert "compared on 25 of 30 questions of A and 25 of 32 of B" in out
    assert "ndcg_at_10 over 25 questions: 1.0000 -> 0.8400" in out and "regressed questions: 8 worse" in out


def test_the_stored_copy_stands_for_a_golden_file_edited_since(versions, capsys, monkeypatch):
    """Each run stored the golden file it was scored on: editing the file in place changes nothing.
    A run that stored none (removed here, as a run logged before runs stored it) is read from the
    file, which must still be the set it was scored on."""
    folder, _, b, v1, _ = versions
    monkeypatch.chdir(folder)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{folder / 'mlflow.db'}")
    path = folder / "golden_v1.jsonl"
    a = log_scored("base-again", path, folder / "corpus.jsonl")
    kept = path.read_text()
    try:
        write(path, [dict(q, question=q["question"] + "?") for q in v1])
        assert compare.compare_runs(a, b, shared=True).shared.questions == 25
        artifacts = Path(mlflow.MlflowClient().get_run(a).info.artifact_uri.removeprefix("file://"))
        shutil.rmtree(artifacts / "golden")
        code, _, err = run_main(compare, [a, b, "--shared", "--no-log"], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert f"error: run {a}: {path} has changed since the run was scored on it" in err
    finally:
        path.write_text(kept)
    assert compare.compare_runs(a, b, shared=True).shared.questions == 25
