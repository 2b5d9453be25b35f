"""The tutorial's judge step on the bundled set, end to end against the tests' chat server as the
judge: a golden set with holes (each question keeps only its first relevant document, as a team
that labelled quickly would), a sweep, a pool, the judge's grades, its agreement with people, and
the audit of the sweep's decision. The judge grades from the full bundled labels with 10% flipped
(what docs/judge.md shows), from people's own labels unflipped (κ 1.0, τ 1.0, the same best and
tied set), and from people's labels with 20% flipped (κ and weighted κ are scikit-learn's)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from helpers.chat_server import MODEL_NAME, pair_key
from helpers.commands import sweep
from helpers.model_servers import chat_server
from sweep.formats.corpus import Corpus, load_corpus
from sweep.formats.golden import GoldenSet, load_golden
from sweep.formats.judgments import load_judgments, person_grades
from sweep.labelling.grading import DEFAULT_PASSAGE_TOKENS, passage
from sweep.tracking.records import load_record

BUNDLED = Path(__file__).parents[2] / "data" / "kb"
FLIPS, SEED, CALIBRATION = 0.1, 3, 20

pytestmark = pytest.mark.slow  # a sweep of the bundled set and a chat server


def with_holes(folder: Path) -> None:
    """The bundled golden set less every relevant document after each question's first (and its
    evidence), and on every third question a document graded 0 (one the bundled set does not
    judge relevant), so that people's grades hold both classes."""
    documents = sorted(json.loads(line)["id"] for line in (BUNDLED / "corpus.jsonl").read_text().splitlines())
    lines = []
    for number, line in enumerate((BUNDLED / "golden.jsonl").read_text(encoding="utf-8").splitlines()):
        record = json.loads(line)
        relevant = record["relevant"]
        kept = list(relevant)[:1]
        record["relevant"] = {doc: relevant[doc] for doc in kept}
        if number % 3 == 0:
            start = number % len(documents)
            record["relevant"][next(d for d in documents[start:] + documents if d not in relevant)] = 0
        if "evidence" in record:
            record["evidence"] = {doc: spans for doc, spans in record["evidence"].items() if doc in kept}
        lines.append(json.dumps(record, ensure_ascii=False))
    (folder / "golden.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    shutil.copy(BUNDLED / "corpus.jsonl", folder / "corpus.jsonl")


def command(cwd: Path, store: str, *args: str) -> str:
    """`python -m sweep.<args>` in `cwd` on `store`; what it printed (it must succeed)."""
    env = os.environ | {"MLFLOW_TRACKING_URI": store, "JUDGE_KEY": "unused-by-the-test-server"}
    done = subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def pooled(tmp_path_factory):
    """(folder, store, what the pool printed): the bundled set with holes swept (`model=bm25,tfidf`)
    and pooled into folder/queue.jsonl, once for the module."""
    folder = tmp_path_factory.mktemp("judge-tutorial")
    (folder / "data").mkdir()
    with_holes(folder / "data")
    result = sweep(folder, folder / "data", "-m", "model=bm25,tfidf")
    assert result.returncode == 0, result.stderr[-3000:]
    store = f"sqlite:///{folder / 'mlflow.db'}"
    return folder, store, command(folder, store, "sweep.pool", "--sweep", "latest", "--output", "queue.jsonl")


def labels_of(golden: GoldenSet, corpus: Corpus) -> dict[str, int]:
    """The judge's copy of `golden`'s labels, keyed as the server reads a prompt."""
    return {
        pair_key(q.question, passage(corpus, doc, DEFAULT_PASSAGE_TOKENS)[0]): grade
        for q in golden
        for doc, grade in q.relevant.items()
    }


def judged(folder: Path, store: str, labels: dict[str, int], output: str, flip: float, calibration: int) -> str:
    """`sweep.judge grade` of the pool, the tests' chat server judging from `labels`; what it printed."""
    with chat_server() as judge:
        judge.judge(labels=labels, flip=flip, seed=SEED)
        grade = ["sweep.judge", "grade", "queue.jsonl", "--golden", str(folder / "data" / "golden.jsonl")]
        grade += ["--base-url", judge.base_url, "--model", MODEL_NAME, "--api-key-env", "JUDGE_KEY"]
        return command(folder, store, *grade, "--calibration", str(calibration), "--output", output)


def people_and_judge(folder: Path, corpus: Corpus, output: str) -> tuple[list[int], list[int]]:
    """People's grades and the judge's on the pairs both graded."""
    people = person_grades(load_golden(folder / "data" / "golden.jsonl", corpus, warn=False))
    both = [(people[g.pair], g.grade) for g in load_judgments(folder / output) if g.pair in people]
    return [p for p, _ in both], [j for _, j in both]


def test_pool_judge_agree_audit_on_the_bundled_set(pooled, monkeypatch):
    folder, store, pool_printed = pooled
    corpus = load_corpus(BUNDLED / "corpus.jsonl")
    truth = load_golden(BUNDLED / "golden.jsonl", corpus, warn=False)
    graded = judged(folder, store, labels_of(truth, corpus), "judgments.jsonl", FLIPS, CALIBRATION)
    grades = load_judgments(folder / "judgments.jsonl")
    filled = [g for g in grades if not g.calibration and truth.by_id[g.qid].relevant.get(g.doc, 0) >= 1]
    assert filled  # the pool found documents the holes left out, and the judge graded them

    golden = str(folder / "data" / "golden.jsonl")
    agreed = command(folder, store, "sweep.judge", "agree", golden, "judgments.jsonl")
    agreement = json.loads(command(folder, store, "sweep.judge", "agree", golden, "judgments.jsonl", "--json"))
    person, judge = people_and_judge(folder, corpus, "judgments.jsonl")
    assert len(person) == CALIBRATION
    expected = cohen_kappa_score([p >= 1 for p in person], [j >= 1 for j in judge])
    assert agreement["kappa"] == pytest.approx(expected, abs=1e-9)

    audit = ["sweep.judge", "audit", "latest", "--judgments", "judgments.jsonl"]
    audited = command(folder, store, *audit)
    board = json.loads(command(folder, store, *audit, "--json"))["leaderboards"]
    # under people's grades the audit is the sweep itself: each configuration's mean as its run logged it
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    for row in board:
        assert row["people_mean"] == load_record(row["run_id"]).metrics["ndcg_at_10"]
    print(pool_printed, graded, agreed, audited, sep="\n")  # what docs/judge.md shows


def test_a_judge_that_agrees_with_people_leaves_the_decision_as_it_was(pooled):
    folder, store, _ = pooled
    corpus = load_corpus(BUNDLED / "corpus.jsonl")
    golden = load_golden(folder / "data" / "golden.jsonl", corpus, warn=False)
    judged(folder, store, labels_of(golden, corpus), "agreeing.jsonl", flip=0.0, calibration=60)
    agreement = json.loads(command(folder, store, "sweep.judge", "agree", golden.source, "agreeing.jsonl", "--json"))
    assert agreement["kappa"] == 1.0 and agreement["weighted_kappa"] == 1.0 and agreement["pairs"] == 60
    assert 0 in people_and_judge(folder, corpus, "agreeing.jsonl")[0]  # people's 0 grades are in the sample
    audit = json.loads(
        command(folder, store, "sweep.judge", "audit", "latest", "--judgments", "agreeing.jsonl", "--json")
    )
    against = audit["against_people"]["judge"]
    assert against["tau"] == 1.0 and against["same_best"] and against["same_tied"] and against["verdict_flips"] == 0
    assert all(row["judge_mean"] == row["people_mean"] for row in audit["leaderboards"])


def test_with_a_fifth_of_the_grades_flipped_kappa_is_sklearns(pooled):
    folder, store, _ = pooled
    corpus = load_corpus(BUNDLED / "corpus.jsonl")
    golden = load_golden(folder / "data" / "golden.jsonl", corpus, warn=False)
    judged(folder, store, labels_of(golden, corpus), "flipped.jsonl", flip=0.2, calibration=120)
    agreement = json.loads(command(folder, store, "sweep.judge", "agree", golden.source, "flipped.jsonl", "--json"))
    person, judge = people_and_judge(folder, corpus, "flipped.jsonl")
    assert len(person) == agreement["pairs"] == 120 and 0 in person and person != judge
    assert agreement["kappa"] == pytest.approx(
        cohen_kappa_score([p >= 1 for p in person], [j >= 1 for j in judge]), abs=1e-9
    )
    assert agreement["weighted_kappa"] == pytest.approx(
        cohen_kappa_score(person, judge, weights="quadratic", labels=[0, 1, 2]), abs=1e-9
    )
    assert agreement["kappa"] < 1.0
