"""`sweep.compare` and `sweep.check` against real MLflow stores: synthetic runs logged in process
with the tracking functions the pipeline uses (exact control over every question's rank), and one
real `python -m sweep -m model=bm25,tfidf` sweep for the command lines in a subprocess (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

from helpers import processes
from helpers.logged import BROKEN, EXPERIMENT, golden, log_run, rankings
from helpers.servers import free_port
from helpers.stores import copy_blank_store
from sweep import check, compare
from sweep.evaluation.comparison import paired_table
from sweep.evaluation.leaderboard import build
from sweep.evaluation.record import TrialRecord
from sweep.evaluation.registry import lower_is_better
from sweep.formats.corpus import Corpus, Document
from sweep.formats.golden import GoldenSet
from sweep.tracking.lifecycle import PARENT_RUN, trial_run
from sweep.tracking.records import save_record
from sweep.tracking.sweeps import finish_sweep, start_sweep


def log_failed(golden_set: GoldenSet) -> str:
    """A run that failed after logging its golden set: no per-question table."""
    with pytest.raises(RuntimeError), trial_run(EXPERIMENT, "failed") as run:
        save_record(TrialRecord("failed", {}, golden=golden_set, corpus=Corpus((Document("d", "text"),))))
        raise RuntimeError("the index could not be built")
    return run.run_id


def log_sweep(children: dict[str, dict[str, list[str]]], *extra: str) -> str:
    parent = start_sweep(EXPERIMENT, ["-m", f"model={','.join(children)}", *extra], "ndcg_at_10")
    for name, results in children.items():
        log_run(name, golden(), results, *extra)
    finish_sweep(build)
    return parent


@dataclass(frozen=True)
class Store:
    uri: str
    folder: Path
    base: str  # every relevant document first; wrong answers to unanswerable questions
    worse: str  # BROKEN (8 howto questions) at rank 3; abstains on unanswerable questions
    other: str  # a golden set with two more questions: another digest
    failed: str  # FAILED before its evaluation was logged
    sweep_a: str  # children model=good, model=worse
    sweep_b: str  # children model=worse, model=good, model=extra (no partner in sweep_a), experiment=ci-7


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    folder = tmp_path_factory.mktemp("compare-store")
    copy_blank_store(folder)
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.delenv(PARENT_RUN, raising=False)
        g = golden()
        good, worse = rankings(g), rankings(g, BROKEN, abstain=True)
        yield Store(
            uri,
            folder,
            log_run("base", g, good),
            log_run("worse", g, worse),
            log_run("other", golden(extra=2), rankings(golden(extra=2))),
            log_failed(g),
            log_sweep({"good": good, "worse": worse}),
            log_sweep({"worse": worse, "good": good, "extra": good}, "experiment=ci-7"),
        )
    mlflow.set_tracking_uri(None)


def run_main(module, argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = module.main(argv)
    except SystemExit as exit:
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def compare_json(store: Store, a: str, b: str, capsys, *options: str) -> dict:
    code, out, err = run_main(compare, [a, b, "--json", "--no-log", *options], capsys)
    assert code == 0, err
    return json.loads(out)


def logged_metrics(run_id: str) -> dict[str, float]:
    return mlflow.MlflowClient().get_run(run_id).data.metrics


# ---------------------------------------------------------------- compare


def test_compare_json_has_paired_statistics_of_every_metric(store, capsys):
    result = compare_json(store, store.base, store.worse, capsys)
    assert result["run_a"]["run_id"] == store.base and result["run_b"]["run_id"] == store.worse
    assert result["n_questions"] == 42 and result["headline"] == "ndcg_at_10"
    means_a, means_b = logged_metrics(store.base), logged_metrics(store.worse)
    assert {"ndcg_at_10", "mrr", "recall_at_1", "abstain/correct_rate", "abstain/false_rate"} <= result[
        "metrics"
    ].keys()
    for name, row in result["metrics"].items():
        assert {
            "a",
            "b",
            "delta",
            "p_value",
            "ci_low",
            "ci_high",
            "wins",
            "ties",
            "losses",
            "n",
            "p_holm",
        } <= row.keys()
        assert row["wins"] + row["ties"] + row["losses"] == row["n"]
        assert 0 <= row["p_value"] <= row["p_holm"] <= 1
        assert row["ci_low"] <= row["delta"] <= row["ci_high"]
        # every question is in both runs: the paired means are the logged means
        assert row["a"] == pytest.approx(means_a[name], abs=1e-9) and row["b"] == pytest.approx(means_b[name], abs=1e-9)
        assert row["delta"] == pytest.approx(row["b"] - row["a"], abs=1e-12)
    ndcg = result["metrics"]["ndcg_at_10"]
    assert ndcg["n"] == 40 and (ndcg["wins"], ndcg["ties"], ndcg["losses"]) == (0, 32, 8)
    assert ndcg["delta"] == pytest.approx(-8 * 0.5 / 40)  # nDCG of rank 3 with one relevant document: 0.5
    # 2,000 random sign flips of 40 differences, 8 of them equal losses: the exact p is 2 / 2**8
    assert ndcg["p_value"] == pytest.approx(2 / 2**8, abs=0.003)
    assert ndcg["ci_high"] < 0
    # the unanswerable questions: abstaining is a win
    abstain = result["metrics"]["abstain/correct_rate"]
    assert (abstain["a"], abstain["b"], abstain["wins"], abstain["n"]) == (0, 1, 2, 2)
    # per question type: rank metrics are undefined for the unanswerable type, left out
    per_type = result["per_type"]
    assert (
        per_type["howto"]["ndcg_at_10"]["delta"] == pytest.approx(-0.2) and per_type["howto"]["ndcg_at_10"]["n"] == 20
    )
    assert per_type["factoid"]["ndcg_at_10"]["delta"] == 0 and per_type["factoid"]["ndcg_at_10"]["p_value"] == 1
    assert "ndcg_at_10" not in per_type["unanswerable"] and per_type["unanswerable"]["abstain/correct_rate"]["n"] == 2
    # the flips: nDCG@10 from 1 to 0.5 does not cross 0.5; at 0.6 it does
    assert result["flipped"] == []
    flipped = compare_json(store, store.base, store.worse, capsys, "--flip-at", "0.6")["flipped"]
    assert [f["qid"] for f in flipped] == BROKEN
    assert flipped[0] == {
        "change": "broken", "qid": "h00", "type": "howto", "question": "question h00",
        "a": 1.0, "b": 0.5, "rank_a": 1, "rank_b": 3,
    }  # fmt: skip
    back = compare_json(store, store.worse, store.base, capsys, "--flip-at", "0.6", "--metrics", "ndcg_at_10,mrr")
    assert {f["change"] for f in back["flipped"]} == {"fixed"} and list(back["metrics"]) == ["ndcg_at_10", "mrr"]


def test_compare_is_seeded_and_a_run_against_itself_is_no_change(store, capsys):
    first = compare_json(store, store.base, store.worse, capsys, "--metrics", "ndcg_at_10,map")
    assert compare_json(store, store.base, store.worse, capsys, "--metrics", "ndcg_at_10,map") == first
    itself = compare_json(store, store.worse, store.worse, capsys)
    for row in itself["metrics"].values():
        assert row["delta"] == 0 and row["p_value"] == 1 and row["losses"] == row["wins"] == 0
        assert row["ci_low"] == row["ci_high"] == 0
    assert itself["flipped"] == []


def test_compare_markdown_and_the_artifacts_logged_on_b(store, capsys):
    code, out, err = run_main(compare, [store.base, store.worse, "--flip-at", "0.6"], capsys)
    assert code == 0, err
    assert out.startswith(f"## Comparison: B `{store.worse}` against A `{store.base}`")
    assert "| metric | A | B | delta | 95% CI | p | p (Holm) | W/T/L | n |" in out
    assert "| ndcg_at_10 | 1.0000 | 0.9000 | -0.1000 | [" in out and "| 0.0090* |" in out and "| 0/32/8 | 40 |" in out
    assert "### Per question type: ndcg_at_10" in out and "| howto | 1.0000 | 0.8000 | -0.2000 |" in out
    assert "| broken | h00 | howto | question h00 | 1.0000 | 0.5000 | 1 → 3 |" in out
    client = mlflow.MlflowClient()
    assert {a.path for a in client.list_artifacts(store.worse, "compare")} == {
        f"compare/{store.base}.md",
        f"compare/{store.base}.json",
    }
    root = Path(client.get_run(store.worse).info.artifact_uri.removeprefix("file://")) / "compare"
    assert (root / f"{store.base}.md").read_text() == out
    assert json.loads((root / f"{store.base}.json").read_text())["metrics"]["ndcg_at_10"]["n"] == 40


def test_sweeps_pair_their_children_by_overrides_and_best_is_the_winner(store, capsys):
    code, out, err = run_main(compare, [store.sweep_a, store.sweep_b, "--json", "--no-log", "--metrics", "mrr"], capsys)
    assert code == 0, err
    result = json.loads(out)
    pairs = [(c["run_a"]["overrides"], c["run_b"]["overrides"]) for c in result["comparisons"]]
    # in B's order; `experiment=` does not change results, so pairing ignores it
    assert pairs == [("model=worse", "model=worse experiment=ci-7"), ("model=good", "model=good experiment=ci-7")]
    assert all(c["metrics"]["mrr"]["delta"] == 0 for c in result["comparisons"])
    assert err.startswith("note: ") and "(model=extra experiment=ci-7) of B has no partner in A" in err
    # a sweep against a run: each child against it
    against = compare_json(store, store.sweep_a, store.base, capsys, "--metrics", "ndcg_at_10")["comparisons"]
    assert [c["run_a"]["overrides"] for c in against] == ["model=good", "model=worse"]
    assert [c["metrics"]["ndcg_at_10"]["delta"] for c in against] == pytest.approx([0, 0.1])
    # best: the earliest of the runs with the best nDCG@10, `base`
    best = compare_json(store, "best", store.worse, capsys, "--metrics", "ndcg_at_10")
    assert best["run_a"]["run_id"] == store.base


def test_a_one_question_pair_needs_no_test():
    a = pd.DataFrame({"m": [1.0, np.nan], "n": [np.nan, np.nan]}, index=["q1", "q2"])
    b = pd.DataFrame({"m": [0.0, 1.0], "n": [1.0, np.nan]}, index=["q1", "q2"])
    table = paired_table(a, b, ["m", "n"])
    assert list(table.index) == ["m"]  # no question has `n` in both runs
    row = table.loc["m"]
    assert (row["n"], row["delta"], row["ci_low"], row["ci_high"], row["p_value"], row["losses"]) == (
        1,
        -1,
        -1,
        -1,
        1,
        1,
    )
    assert lower_is_better("abstain/false_rate") and lower_is_better("context/tokens_at_5")
    assert not lower_is_better("ndcg_at_10") and not lower_is_better("abstain/correct_rate")


# ---------------------------------------------------------------- check


def test_check_a_run_against_itself_passes(store, capsys):
    code, out, _ = run_main(check, ["--baseline", store.worse, "--candidate", store.worse, "--per-type"], capsys)
    assert code == 0 and "check passed" in out and "REGRESSED" not in out


def test_check_fails_a_significant_drop_and_prints_the_regressed_questions(store, capsys):
    argv = ["--baseline", store.base, "--candidate", store.worse, "--metric", "ndcg_at_10", "--max-drop", "0.01"]
    code, out, _ = run_main(check, argv, capsys)
    assert code == 1
    assert "ndcg_at_10 over 40 questions: 1.0000 -> 0.9000, delta -0.1000" in out and "REGRESSED" in out
    assert "regressed questions: 8 worse on ndcg_at_10" in out
    assert "  h00 [howto] 1.0000 -> 0.5000, first relevant rank 1 -> 3: question h00" in out
    assert "check failed: 1 of 1 comparisons regressed" in out
    # the other way round is an improvement; a drop within --max-drop passes; so does a weaker alpha
    assert run_main(check, ["--baseline", store.worse, "--candidate", store.base], capsys)[0] == 0
    assert run_main(check, [*argv[:-1], "0.1"], capsys)[0] == 0
    assert run_main(check, [*argv, "--alpha", "0.005"], capsys)[0] == 0
    # abstaining on the unanswerable questions is better, not a drop
    abstain = ["--baseline", store.base, "--candidate", store.worse, "--metric", "abstain/correct_rate"]
    assert run_main(check, abstain, capsys)[0] == 0


def test_check_per_type_catches_a_drop_the_overall_mean_tolerates(store, capsys):
    argv = ["--baseline", store.base, "--candidate", store.worse, "--max-drop", "0.12"]
    code, out, _ = run_main(check, argv, capsys)
    assert code == 0, out  # overall: -0.1
    code, out, _ = run_main(check, [*argv, "--per-type"], capsys)
    assert code == 1
    assert "  type howto (20 questions, p Holm-corrected over 2 types): 1.0000 -> 0.8000, delta -0.2000" in out
    assert (
        "  type factoid (20 questions, p Holm-corrected over 2 types): 1.0000 -> 1.0000" in out
        and "type unanswerable" not in out
    )
    assert "regressed questions (howto): 8 worse" in out


def test_check_sweeps_fail_when_any_pair_regresses(store, capsys):
    code, out, _ = run_main(check, ["--baseline", store.sweep_a, "--candidate", store.sweep_b], capsys)
    assert code == 0  # model=worse against model=worse, model=good against model=good
    code, out, _ = run_main(check, ["--baseline", store.base, "--candidate", store.sweep_b], capsys)
    assert code == 1 and "check failed: 1 of 3 comparisons regressed" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--baseline", "nope", "--candidate", "{worse}"], "error: --baseline: 'nope': not an MLflow run id"),
        (["--baseline", "0" * 32, "--candidate", "{worse}"], f"error: --baseline: no run {'0' * 32} at sqlite:///"),
        (["--baseline", "{base}", "--candidate", "{worse}", "--metric", "ndgc_at_10"], "error: --metric ndgc_at_10: not a metric of these runs; known: recall_at_1, "),
        (["--baseline", "{base}", "--candidate", "{worse}", "--max-drop", "-0.01"], "error: --max-drop -0.01: must be a number >= 0"),
        (["--baseline", "{base}", "--candidate", "{worse}", "--max-drop", "nan"], "error: --max-drop nan: must be a number >= 0"),
        (["--baseline", "{base}", "--candidate", "{other}"], "were scored on different golden sets (data.golden_digest"),
        (["--baseline", "{sweep_a}", "--candidate", "{other}"], "were scored on different golden sets"),
        (["--baseline", "{base}", "--candidate", "{failed}"], "FAILED (RuntimeError: the index could not be built): it holds no evaluation to compare"),
        (["--baseline", "best", "--candidate", "{worse}", "--metric", "nope"], "error: --baseline best: no finished run in experiment 'golden-sweep' has the metric 'nope'"),
    ],
)  # fmt: skip
def test_check_bad_input_is_one_line_and_exit_2(store, capsys, argv, message):
    runs = {
        "base": store.base,
        "worse": store.worse,
        "other": store.other,
        "sweep_a": store.sweep_a,
        "failed": store.failed,
    }
    code, out, err = run_main(check, [a.format(**runs) for a in argv], capsys)
    assert code == 2 and message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_compare_bad_input_is_one_line_and_exit_2(store, capsys, monkeypatch):
    code, _, err = run_main(compare, [store.base, store.other], capsys)
    assert code == 2 and "different golden sets" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_main(compare, [store.base, store.worse, "--metrics", "ndcg_at_10,bogus"], capsys)
    assert code == 2 and err.startswith("error: --metrics bogus: not a metric of these runs; known: ")
    parent_run = mlflow.MlflowClient().get_run(store.sweep_a).info.run_id
    code, _, err = run_main(compare, [store.base, parent_run], capsys)
    assert code == 0  # a sweep stands for its children
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    code, _, err = run_main(compare, [store.base, store.worse], capsys)
    assert code == 2 and err.startswith("error: cannot reach the MLflow tracking server at http://127.0.0.1:")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store.folder / 'absent.db'}")
    code, _, err = run_main(check, ["--baseline", store.base, "--candidate", store.worse], capsys)
    assert code == 2 and "no MLflow store here yet" in err and not (store.folder / "absent.db").exists()


# ---------------------------------------------------------------- a real sweep, the command lines


def cli(module: str, store: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return processes.run(
        [sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
        env=os.environ | {"MLFLOW_TRACKING_URI": store},
    )  # fmt: skip


@pytest.mark.slow
def test_compare_cli_on_a_real_sweep(real_sweep, capsys, monkeypatch):
    store, runs, cwd, _ = real_sweep
    result = cli("sweep.compare", store, cwd, runs["bm25"], runs["tfidf"], "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no download bars
    data = json.loads(result.stdout)
    client = mlflow.MlflowClient(store)
    logged = {model: client.get_run(run_id).data.metrics for model, run_id in runs.items()}
    ndcg = data["metrics"]["ndcg_at_10"]
    assert ndcg["delta"] == pytest.approx(logged["tfidf"]["ndcg_at_10"] - logged["bm25"]["ndcg_at_10"], abs=1e-9)
    assert 0 <= ndcg["p_value"] <= 1 and ndcg["wins"] + ndcg["ties"] + ndcg["losses"] == ndcg["n"] == 12
    assert set(data["per_type"]) == {"factoid", "howto", "numeric", "unanswerable"}
    for flip in data["flipped"]:
        assert flip["question"] and {flip["rank_a"], flip["rank_b"]} != {None}
    listed = {a.path for a in client.list_artifacts(runs["tfidf"], "compare")}
    assert listed == {f"compare/{runs['bm25']}.md", f"compare/{runs['bm25']}.json"}
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.chdir(cwd)
    code, out, _ = run_main(compare, [runs["bm25"], runs["tfidf"], "--no-log"], capsys)
    assert code == 0 and f"| ndcg_at_10 | {ndcg['a']:.4f} | {ndcg['b']:.4f} | {ndcg['delta']:+.4f} |" in out


@pytest.mark.slow
def test_check_cli_on_a_real_sweep(real_sweep, capsys, monkeypatch):
    store, runs, cwd, _ = real_sweep
    itself = cli("sweep.check", store, cwd, "--baseline", runs["bm25"], "--candidate", runs["bm25"], "--per-type")
    assert itself.returncode == 0 and "check passed" in itself.stdout, itself.stdout + itself.stderr
    bad = cli("sweep.check", store, cwd, "--baseline", runs["bm25"], "--candidate", "best", "--metric", "ndgc_at_10")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --candidate best: no finished run")
    assert len(bad.stderr.strip().splitlines()) == 1
    # 12 answerable questions: tf-idf against BM25 is no significant change either way
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.chdir(cwd)
    argv = ["--baseline", runs["tfidf"], "--candidate", runs["bm25"], "--max-drop", "0", "--per-type"]
    code, out, _ = run_main(check, argv, capsys)
    assert code == 0 and "check passed" in out, out
