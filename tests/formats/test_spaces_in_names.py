"""A folder whose file names have spaces (issue 49, item 11) sweeps, pools and labels, and its
`run.trec` re-scores to the logged numbers.

Real components throughout: a folder of Markdown files named as people name them
(`HR Policies/Annual Leave Policy.md`), a golden set naming them, BM25 over whole documents in
process and `python -m sweep` as a real process (MLflow store, `run.trec` written by
`Run.to_trec`, ids percent-encoded), `python -m sweep.evaluate` and pytrec_eval on that file,
`python -m sweep.pool`, and the labelling app through Flask's test client.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from urllib.parse import quote

import mlflow
import pytest
import pytrec_eval

from helpers import processes
from helpers.commands import runs_in
from helpers.stores import copy_blank_store
from sweep.evaluation import score
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden
from sweep.formats.runs import Run
from sweep.formats.trec import read_run, trec_id
from sweep.labelling.app import create_app
from sweep.labelling.golden_file import GoldenFile
from sweep.labelling.queue import load_queue
from sweep.retrieval.chunking import TokenChunker
from sweep.retrieval.lexical import BM25Retriever
from sweep.retrieval.pipeline import Pipeline

DOCUMENTS = {
    "HR Policies/Annual Leave Policy.md": "# Annual leave\n\nEmployees get 25 days of annual leave a year, "
    "booked with their manager. Unused leave days carry over up to five days.\n",
    "HR Policies/Sick Leave.md": "# Sick leave\n\nSick leave is paid for 10 days a year; after three days "
    "a doctor's note is needed. Tell your manager on the first day.\n",
    "HR Policies/Parental leave 100% paid.md": "# Parental leave\n\nParental leave is paid at 100% for "
    "16 weeks, for each parent.\n",
    "Finance/Expense Claims.md": "# Expense claims\n\nHotels are capped at 150 pounds a night. Claims "
    "need receipts and go in within 30 days.\n",
    "Finance/Travel & Hotels.md": "# Travel\n\nBook hotels and trains through the travel desk; the hotel "
    "cap is the expense policy's.\n",
    "IT Help/Reset your password.md": "# Passwords\n\nReset your password at the self-service page; it "
    "must have 12 characters.\n",
    "IT Help/VPN  set up (two spaces).md": "# VPN\n\nInstall the VPN client and sign in with your password "
    "to work from home.\n",
}
QUESTIONS = [
    {"id": "leave days", "question": "How many days of annual leave do I get?",
     "relevant": {"HR Policies/Annual Leave Policy.md": 2, "HR Policies/Sick Leave.md": 0}},
    {"id": "sick note", "question": "When do I need a doctor's note for sick leave?",
     "relevant": {"HR Policies/Sick Leave.md": 2}},
    {"id": "hotel cap", "question": "What is the hotel cap per night?",
     "relevant": {"Finance/Expense Claims.md": 2, "Finance/Travel & Hotels.md": 1}},
    {"id": "password", "question": "How long must my password be?",
     "relevant": {"IT Help/Reset your password.md": 1}},
    {"id": "home", "question": "How do I work from home?", "relevant": {"IT Help/VPN  set up (two spaces).md": 1}},
    {"id": "manager", "question": "Do I tell my manager?", "relevant": {"HR Policies/Annual Leave Policy.md": 1}},
    {"id": "parents", "question": "How long is parental leave paid?",
     "relevant": {"HR Policies/Parental leave 100% paid.md": 1}},
]  # fmt: skip
TREC_MEASURES = {"ndcg_cut_10": "ndcg_at_10", "recip_rank": "mrr", "map": "map", "recall_5": "recall_at_5"}


@pytest.fixture
def folder(tmp_path) -> tuple[Path, Path]:
    """(the documents' folder, the golden set naming them)."""
    for name, text in DOCUMENTS.items():
        (tmp_path / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "docs" / name).write_text(text)
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps(question) + "\n" for question in QUESTIONS))
    return tmp_path / "docs", golden


def test_the_run_file_of_a_folder_with_spaces_re_scores_to_the_numbers_scored_in_process(folder, tmp_path):
    """The pipeline in process (BM25, whole documents): its ranking scored by `score`; the
    `run.trec` that `Run.to_trec` writes of it, read back by `Run.read` and `read_run`, gives
    the same ranking and, through pytrec_eval, the same numbers."""
    docs, golden_path = folder
    corpus = load_corpus(docs)
    assert sorted(document.id for document in corpus) == sorted(DOCUMENTS)
    golden = load_golden(golden_path, corpus, warn=False)
    run = Pipeline(TokenChunker(0), BM25Retriever()).retrieve(corpus, golden, name="bm25").results
    evaluation = score(golden, run, list(TREC_MEASURES.values()))
    path = tmp_path / "run.trec"
    run.to_trec(path)
    text = path.read_text()
    assert "HR%20Policies/Annual%20Leave%20Policy.md" in text and "Parental%20leave%20100%25%20paid.md" in text
    assert "VPN%20%20set%20up%20(two%20spaces).md" in text and "leave%20days Q0 " in text
    assert all(len(line.split()) == 6 for line in text.splitlines())
    assert Run.read(path).rankings() == run.rankings()

    columns = read_run(path)  # our reader's decoded ids, handed to pytrec_eval as dicts
    rows: dict[str, dict[str, float]] = {}
    for qid, doc, value in zip(columns.qid.codes, columns.docid.codes, columns.score, strict=True):
        rows.setdefault(columns.qid.values[qid], {})[columns.docid.values[doc]] = float(value)
    qrels = {q.id: dict(q.relevant) for q in golden}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, set(TREC_MEASURES)).evaluate(rows)
    ours = evaluation.per_query
    for qid, values in theirs.items():
        for trec_name, name in TREC_MEASURES.items():
            assert ours.loc[qid, name] == pytest.approx(values[trec_name], abs=1e-12), (qid, name)
    assert 0 < evaluation.mean["ndcg_at_10"] < 1  # a ranking with something to get wrong


@pytest.mark.slow
def test_a_folder_with_spaces_sweeps_re_scores_pools_and_labels(folder, tmp_path):
    """Before: `python -m sweep` stopped with `docs: document id 'HR Policies/Annual Leave
    Policy.md' contains a space, which TREC files (run.trec) cannot hold: they separate fields by
    whitespace; rename 'HR Policies/Annual Leave Policy.md' (and 6 other files so named)`, exit 2."""
    docs, golden_path = folder
    copy_blank_store(tmp_path)
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    environment = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    swept = processes.run(
        [sys.executable, "-m", "sweep", "model=bm25", "chunk=0", f"golden.path={golden_path}", f"golden.corpus={docs}",
         f"cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path / 'outputs'}"],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert swept.returncode == 0, swept.stderr[-3000:]
    _, (logged_run,) = runs_in(store)
    run_id = logged_run.info.run_id
    trec = Path(
        mlflow.artifacts.download_artifacts(
            run_id=run_id, artifact_path="run.trec", dst_path=str(tmp_path / "artifacts"), tracking_uri=store
        )
    )
    assert "HR%20Policies/Annual%20Leave%20Policy.md" in trec.read_text()

    # the logged run.trec, scored by python -m sweep.evaluate, gives the logged numbers
    evaluated = processes.run(
        [sys.executable, "-m", "sweep.evaluate", str(golden_path), str(trec), "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    means = json.loads(evaluated.stdout)["mean"]
    logged = logged_run.data.metrics
    compared = sorted(set(means) & set(logged))
    assert {"ndcg_at_10", "mrr", "map"} <= set(compared)
    for name in compared:
        assert means[name] == pytest.approx(logged[name], abs=1e-9), name
    # and by the fast path: TREC qrels, the ids encoded as the run's are
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(
        "".join(
            f"{trec_id(q['id'])} 0 {trec_id(doc)} {grade}\n" for q in QUESTIONS for doc, grade in q["relevant"].items()
        )
    )
    fast = processes.run(
        [sys.executable, "-m", "sweep.evaluate", str(qrels), str(trec), "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert fast.returncode == 0, fast.stderr
    assert json.loads(fast.stdout)["mean"]["ndcg_at_10"] == pytest.approx(logged["ndcg_at_10"], abs=1e-9)

    # pooled: the queue names the documents as their files are named
    queue_path = tmp_path / "queue.jsonl"
    pooled = processes.run(
        [sys.executable, "-m", "sweep.pool", run_id, "--output", str(queue_path), "--depth", "3"],
        cwd=tmp_path, env=environment | {"MLFLOW_TRACKING_URI": store}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert pooled.returncode == 0, pooled.stderr[-3000:]
    corpus = load_corpus(docs)
    queue = load_queue(queue_path, corpus)
    candidates = {candidate.doc for listed in queue.candidates.values() for candidate in listed}
    assert candidates and candidates <= set(DOCUMENTS) and any(" " in doc for doc in candidates)

    # labelled: the app grades a document whose name has spaces, for a question whose id has one
    client = create_app(GoldenFile(golden_path, corpus), queue, "tester").test_client()
    qid, doc = "leave days", "HR Policies/Parental leave 100% paid.md"
    path = f"/api/questions/{quote(qid, safe='')}"
    opened = client.get(path)
    assert opened.status_code == 200, opened.get_json()
    version = opened.get_json()["question"]["version"]
    document = client.get(f"/api/documents/{quote(doc, safe='')}")
    assert document.status_code == 200 and "16 weeks" in document.get_json()["content"]
    graded = client.post(f"{path}/grade", json={"doc": doc, "grade": 1, "version": version})
    assert graded.status_code == 200, graded.get_json()
    assert load_golden(golden_path, corpus, warn=False).by_id[qid].relevant == {
        "HR Policies/Annual Leave Policy.md": 2, "HR Policies/Sick Leave.md": 0, doc: 1,
    }  # fmt: skip
