"""One tie rule everywhere (issue 49, item 1): a corpus that holds exact copies of its documents,
in either line order, logs the numbers trec_eval's rule gives on the run's own `run.trec`
(pytrec_eval and `python -m sweep.evaluate` read it back), and the two orders log the same.

Real components: the bundled knowledge base's Finance and IT documents, each twice (the copy's id
`<id>-copy`, which sorts after the original's, so trec_eval ranks the copy first), whole
documents (chunk=0), BM25, the pipeline, `score`, `Run.to_trec`, pytrec_eval.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import pytrec_eval

from helpers.data import write_kb_slice
from sweep.evaluation import score
from sweep.formats.corpus import Corpus, load_corpus
from sweep.formats.golden import load_golden
from sweep.formats.runs import Run
from sweep.retrieval.chunking import Chunk, TokenChunker
from sweep.retrieval.lexical import BM25Retriever
from sweep.retrieval.pipeline import Pipeline, TieOrder
from sweep.retrieval.retriever import Hits

TO_TREC = {
    **{f"recall_at_{k}": f"recall_{k}" for k in (1, 3, 5, 10, 20, 100)},
    **{f"precision_at_{k}": f"P_{k}" for k in (1, 5, 10)},
    **{f"hit_at_{k}": f"success_{k}" for k in (1, 5, 10)},
    **{f"ndcg_at_{k}": f"ndcg_cut_{k}" for k in (5, 10, 20)},
    "map_at_10": "map_cut_10",
    "mrr": "recip_rank",
    "map": "map",
    "r_precision": "Rprec",
}
TREC_MEASURES = {
    "recall.1,3,5,10,20,100", "P.1,5,10", "success.1,5,10", "ndcg_cut.5,10,20", "map_cut.10", "recip_rank", "map",
    "Rprec",
}  # fmt: skip


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    """The corpus with each document twice, copies after (and before) the originals, and the
    golden set, which labels the originals."""
    folder = write_kb_slice(tmp_path_factory.mktemp("copies"), {"Finance", "IT"}, unanswerable=0)
    corpus = load_corpus(folder / "corpus.jsonl")
    copied = tuple(replace(doc, id=f"{doc.id}-copy") for doc in corpus)
    after = Corpus(corpus.documents + copied, source="copies-after.jsonl")
    before = Corpus(copied + corpus.documents, source="copies-before.jsonl")
    golden = load_golden(folder / "golden.jsonl", after, warn=False)
    return folder, after, before, golden


def logged(corpus, golden, tmp_path, name):
    """What a run logs: the pipeline's ranking scored in process, and its run.trec."""
    retrieval = Pipeline(TokenChunker(0), BM25Retriever()).retrieve(corpus, golden, name=name)
    evaluation = score(golden, retrieval.results, list(TO_TREC))
    path = tmp_path / f"{name}.trec"
    retrieval.results.to_trec(path)
    return retrieval, evaluation, path


def pytrec_eval_on(path, golden):
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        qid, _, doc, _, value, _ = line.split()
        run.setdefault(qid, {})[doc] = float(value)
    qrels = {q.id: dict(q.relevant) for q in golden}
    return pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)


def test_copies_in_either_order_log_what_trec_eval_reads_from_the_run_file(copies, tmp_path, caplog):
    folder, after, before, golden = copies
    with caplog.at_level(logging.WARNING):
        run_after, after_eval, after_path = logged(after, golden, tmp_path, "after")
    _, before_eval, before_path = logged(before, golden, tmp_path, "before")
    # the two line orders: the same ranking, the same file, the same numbers
    assert after_path.read_text() == before_path.read_text()
    assert after_eval.mean == before_eval.mean
    assert after_eval.per_query.equals(before_eval.per_query)
    # trec_eval's rule, read back from the file by pytrec_eval: every question, every metric
    theirs = pytrec_eval_on(after_path, golden)
    for qid, row in after_eval.answerable.iterrows():
        for name, trec_name in TO_TREC.items():
            assert row[name] == pytest.approx(theirs[qid][trec_name], abs=1e-12), (qid, name)
    # and by golden-sweep's own reader, `python -m sweep.evaluate`'s
    rescored = score(load_golden(folder / "golden.jsonl", warn=False), Run.read(after_path), list(TO_TREC))
    assert rescored.mean == pytest.approx(after_eval.mean, abs=1e-12)
    # ties rank the copy (its id sorts after the original's) first, as trec_eval does
    first = run_after.results.rankings()[golden.questions[0].id][:2]
    assert first[0][1] == first[1][1] and first[0][0] == f"{first[1][0]}-copy"
    # one warning for the copies (how many, examples the same whatever the order), one for the ties
    copies_said = [r.getMessage() for r in caplog.records if "exact copies" in r.getMessage()]
    assert len(copies_said) == 2  # once a run
    n = len(after) // 2
    assert copies_said[0].startswith(
        f"copies-after.jsonl: {2 * n} documents are exact copies (the same content) in {n} groups, e.g. 'fin-"
    )
    assert copies_said[0].removeprefix("copies-after") == copies_said[1].removeprefix("copies-before")
    ties = [r.getMessage() for r in caplog.records if "cutoff splits" in r.getMessage()]
    assert [m.split(":")[0] for m in ties] == ["after", "before", str(after_path)]  # once a run
    assert ties[0].startswith("after: on ") and f" of {len(golden)} questions a metric's" in ties[0]
    assert "-copy', " in ties[0] and "tie rule's choice (document id, highest first, as trec_eval)" in ties[0]


def test_the_json_summary_of_sweep_evaluate_on_the_run_file_is_the_logged_one(copies, tmp_path):
    folder, after, _, golden = copies
    _, evaluation, path = logged(after, golden, tmp_path, "cli")
    names = ["ndcg_at_10", "recall_at_5", "mrr", "map"]
    out = subprocess.run(
        [sys.executable, "-m", "sweep.evaluate", str(folder / "golden.jsonl"), str(path), "--json",
         "--metrics", ",".join(names)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    summary = json.loads(out.stdout)
    means = summary.get("mean", summary)
    for name in names:
        assert means[name] == pytest.approx(evaluation.mean[name], abs=1e-9), name


def test_tied_chunk_hits_are_ordered_by_document_id_descending_then_place():
    chunks = [
        Chunk("b", 0, 0, 1, "x", 1),
        Chunk("a", 0, 0, 1, "x", 1),
        Chunk("c", 0, 0, 1, "y", 1),
        Chunk("b", 1, 1, 2, "x", 1),
    ]
    order = TieOrder.of(chunks)
    tied = order(_hits([2.0, 1.0, 1.0, 1.0], [2, 1, 3, 0]))  # a, b's second chunk, b: as a retriever gave them
    assert tied.ids.tolist() == [2, 0, 3, 1] and tied.scores.tolist() == [2.0, 1.0, 1.0, 1.0]
    untied = _hits([3.0, 2.0, 1.0], [1, 0, 2])
    assert order(untied) is untied  # no tie: nothing moves, nothing copied


def _hits(scores, ids):
    return Hits(np.array(scores, dtype=np.float32), np.array(ids, dtype=np.int64))
