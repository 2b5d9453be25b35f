"""The tutorial's judge step on the bundled set, end to end against the tests' chat server as the
judge: a golden set with holes (each question keeps only its first relevant document, as a team
that labelled quickly would), a sweep, a pool, the judge's grades (from the full bundled labels,
10% flipped, 20 calibration pairs), its agreement with people, and the audit of the sweep's
decision. What it prints is what docs/judge.md shows."""

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
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden
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


def test_pool_judge_agree_audit_on_the_bundled_set(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    with_holes(data)
    result = sweep(tmp_path, data, "-m", "model=bm25,tfidf")
    assert result.returncode == 0, result.stderr[-3000:]
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    pooled = command(tmp_path, store, "sweep.pool", "--sweep", "latest", "--output", "queue.jsonl")

    corpus = load_corpus(BUNDLED / "corpus.jsonl")
    truth = load_golden(BUNDLED / "golden.jsonl", corpus, warn=False)
    golden = load_golden(data / "golden.jsonl", corpus, warn=False)
    labels = {
        pair_key(q.question, passage(corpus, doc, DEFAULT_PASSAGE_TOKENS)[0]): grade
        for q in truth
        for doc, grade in q.relevant.items()
    }
    with chat_server() as judge:
        judge.judge(labels=labels, flip=FLIPS, seed=SEED)
        grade = ["sweep.judge", "grade", "queue.jsonl", "--golden", str(data / "golden.jsonl")]
        grade += ["--base-url", judge.base_url, "--model", MODEL_NAME, "--api-key-env", "JUDGE_KEY"]
        graded = command(tmp_path, store, *grade, "--calibration", str(CALIBRATION), "--output", "judgments.jsonl")
    grades = load_judgments(tmp_path / "judgments.jsonl")
    filled = [g for g in grades if not g.calibration and truth.by_id[g.qid].relevant.get(g.doc, 0) >= 1]
    assert filled  # the pool found documents the holes left out, and the judge graded them

    agreed = command(tmp_path, store, "sweep.judge", "agree", str(data / "golden.jsonl"), "judgments.jsonl")
    agreement = json.loads(
        command(tmp_path, store, "sweep.judge", "agree", str(data / "golden.jsonl"), "judgments.jsonl", "--json")
    )
    people = person_grades(golden)
    both = [(people[g.pair], g.grade) for g in grades if g.pair in people and g.grade is not None]
    assert len(both) == CALIBRATION
    person, judged = zip(*both)
    expected = cohen_kappa_score([p >= 1 for p in person], [j >= 1 for j in judged])
    assert agreement["kappa"] == pytest.approx(expected, abs=1e-9)

    audit = ["sweep.judge", "audit", "latest", "--judgments", "judgments.jsonl"]
    audited = command(tmp_path, store, *audit)
    board = json.loads(command(tmp_path, store, *audit, "--json"))["leaderboards"]
    # under people's grades the audit is the sweep itself: each configuration's mean as its run logged it
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    for row in board:
        assert row["people_mean"] == load_record(row["run_id"]).metrics["ndcg_at_10"]
    (tmp_path / "printed.txt").write_text("\n".join([pooled, graded, agreed, audited]), encoding="utf-8")
    print(pooled, graded, agreed, audited, sep="\n")
