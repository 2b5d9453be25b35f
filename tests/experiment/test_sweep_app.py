"""`python -m sweep` as users run it: Hydra compose and overrides, real sweeps into a SQLite
MLflow store in tmp_path and a forced failure (a sweep logging to `mlflow server`: test_launchers.py).
Tests that start `python -m sweep` in a subprocess are marked slow."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import sys
from pathlib import Path

import mlflow
import numpy as np
import pytest
from hydra.errors import ConfigCompositionException

from helpers import processes
from helpers.commands import compose_config, runs_in, sweep
from helpers.models import write_tiny_cross_encoder
from helpers.servers import free_port
from sweep.evaluation import score
from sweep.experiment.cli import measured_overrides, verbosity_flags
from sweep.experiment.preflight import preflight
from sweep.experiment.trial import build_pipeline
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden
from sweep.retrieval.models import default_model_path

CHILD_METRICS = {
    "recall_at_5", "ndcg_at_10", "mrr", "abstain/correct_rate", "abstain/false_rate", "type/factoid/recall_at_5",
    "type/unanswerable/abstain/correct_rate", "time/embed_s", "time/index_s", "time/metrics_s",
    "latency/search_ms_p50", "latency/search_ms_p95", "corpus/chunks", "time/rerank_s", "filter/restricted_share",
    "time/build_s", "time/model_load_s", "embed/cache_hit", "index/bytes", "corpus/truncated_share",
    "abstain/suggested_min_score", "abstain/at_suggested/recall_at_5", "abstain/at_suggested/abstain/correct_rate",
    "context/n", "context/recall_at_5", "context/precision_at_10", "context/iou_at_1", "context/complete_at_3",
    "context/tokens_at_5", "context/precision_omega", "type/factoid/context/recall_at_5", "time/context_metrics_s",
}  # fmt: skip
ARTIFACTS = {
    "config/resolved.yaml", "config/overrides.yaml", "tables/per_query.json", "tables/per_type.json",
    "tables/worst_queries.json", "plots/recall_at_k.png", "plots/ndcg_at_10_per_type.png", "run.trec",
    "tables/abstention_curve.json", "plots/abstention_calibration.png", "tables/retrieved_chunks.json",
    "tables/worst_context.json",
}  # fmt: skip


def test_quiet_and_verbose_flags_are_the_verbosity_override_which_no_run_name_carries(capsys):
    assert verbosity_flags(["-q", "chunk=256"]) == ["chunk=256", "verbosity=quiet"]
    assert verbosity_flags(["-m", "-v", "model=bm25", "--quiet"]) == ["-m", "model=bm25", "verbosity=quiet"]
    assert verbosity_flags(["--verbose"]) == ["verbosity=verbose"] and verbosity_flags(["chunk=0"]) == ["chunk=0"]
    assert measured_overrides(["chunk=256", "verbosity=quiet", "resume=true"]) == ["chunk=256"]
    with pytest.raises(SystemExit) as exited:
        preflight(["verbosity=loud"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip() == "error: verbosity='loud': must be one of quiet, normal, verbose"


@pytest.mark.slow
def test_a_sweep_prints_a_summary_line_per_combination_and_each_warning_once(real_sweep):
    """`python -m sweep -m model=bm25,tfidf`: one summary line per combination, the judged@k
    warning once (both runs have it, each with its own count, in its log file), no library chatter."""
    _, _, cwd, stdout = real_sweep
    summary = re.compile(
        r"model=(\w+): ndcg_at_10 [\d.]+ \[[\d.]+, [\d.]+\], recall_at_5 [\d.]+, mrr [\d.]+, "
        r"context/recall_at_5 [\d.]+, abstain/correct_rate [\d.]+, \d+ s"
    )  # the override that varies (the shared ones are named once), then the numbers; no latency: the sweep's end times it
    assert [m.group(1) for m in map(summary.fullmatch, stdout.splitlines()) if m] == ["bm25", "tfidf"]
    [warning] = [line for line in stdout.splitlines() if "judged_at_10 below" in line]
    assert warning.startswith("warning: ") and warning.endswith("; see docs/commands.md#warnings")
    logs = sorted((cwd / "multirun").glob("*/sweep.log"))
    assert len(logs) == 2 and all("judged_at_10 below" in log.read_text() for log in logs)  # every run keeps it
    assert "[bm25s]" not in stdout and "Building index" not in stdout and "DEBUG" not in stdout


def test_compose_groups_and_overrides():
    cfg = compose_config("chunk=512", "index=hnsw", "index.ef_search=64", "model=bm25")
    assert (
        cfg.chunking.size == 512
        and cfg.index._target_ == "sweep.retrieval.index.HNSWIndex"
        and cfg.index.ef_search == 64
    )
    assert cfg.model._target_ == "sweep.retrieval.lexical.BM25Retriever"
    assert Path(cfg.golden.path).is_file() and Path(cfg.golden.corpus).is_file()  # bundled data, from any cwd
    dense = compose_config("index=hnsw", "index.M=16")
    assert dense.model.index.M == 16  # the dense retriever's index is the `index` group's
    with pytest.raises(ConfigCompositionException, match="Could not find 'index/annoy'"):
        compose_config("index=annoy")


@pytest.mark.slow
def test_a_two_by_two_sweep_gives_a_parent_and_four_finished_children(tmp_path, small_kb_files):
    result = sweep(tmp_path, small_kb_files, "-m", "chunk=64,128", "index=flat,hnsw")
    assert result.returncode == 0, result.stderr[-3000:]
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, runs = runs_in(store)
    parents = [r for r in runs if r.data.tags.get("sweep.parent") == "true"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and len(children) == 4 and len(runs) == 5
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    assert {c.info.status for c in children} == {"FINISHED"}
    # Hydra's chosen options are params, beside the flattened config
    assert {(c.data.params["chunk"], c.data.params["index"], c.data.params["index._target_"]) for c in children} == {
        ("64", "flat", "sweep.retrieval.index.FlatIndex"), ("64", "hnsw", "sweep.retrieval.index.HNSWIndex"),
        ("128", "flat", "sweep.retrieval.index.FlatIndex"), ("128", "hnsw", "sweep.retrieval.index.HNSWIndex"),
    }  # fmt: skip
    chosen = {(c.data.params[g]) for c in children for g in ("model", "chunking", "filter", "reranker", "golden")}
    assert chosen == {"minilm", "tokens", "none", "bundled"}
    mlflow.set_tracking_uri(store)
    try:
        hnsw = mlflow.search_runs(experiment_names=["golden-sweep"], filter_string="params.index = 'hnsw'")
    finally:
        mlflow.set_tracking_uri(None)
    assert sorted(hnsw["params.chunk"]) == ["128", "64"]
    for child in children:
        assert CHILD_METRICS <= child.data.metrics.keys(), CHILD_METRICS - child.data.metrics.keys()
        assert child.data.metrics["index/bytes"] > 0 and child.data.metrics["recall_at_5"] > 0.5
        listed = {
            a.path
            for folder in ("", "config", "tables", "plots")
            for a in client.list_artifacts(child.info.run_id, folder)
        }
        assert ARTIFACTS <= listed, ARTIFACTS - listed
        assert child.inputs.dataset_inputs and "data.corpus_digest" in child.data.tags
    assert "tables/leaderboard.json" in {a.path for a in client.list_artifacts(parents[0].info.run_id, "tables")}
    assert "Leaderboard" in result.stdout and "workflowType=machine_learning" in result.stdout
    # one embedding per (model, chunk): the hnsw runs reuse the flat runs' vectors; and the questions' vectors, once
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 3


@pytest.mark.slow
def test_a_filter_sweep_with_a_reranker_logs_filters_rerank_time_and_calibration(tmp_path, small_kb_files):
    texts = [
        line for name in ("corpus.jsonl", "golden.jsonl") for line in (small_kb_files / name).read_text().splitlines()
    ]
    (tmp_path / "cross-encoder").mkdir()
    model = write_tiny_cross_encoder(tmp_path / "cross-encoder", texts)
    reranker = ("reranker=cross_encoder", f"reranker.model={model}")
    result = sweep(tmp_path, small_kb_files, "-m", "filter=none,pre,post", *reranker, "chunk=0")
    assert result.returncode == 0, result.stderr[-3000:]
    client, runs = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    children = {r.data.params["filter"]: r for r in runs if r.data.tags.get("mlflow.parentRunId")}
    assert sorted(children) == ["none", "post", "pre"]
    for child in children.values():
        assert child.info.status == "FINISHED"
        assert CHILD_METRICS <= child.data.metrics.keys(), CHILD_METRICS - child.data.metrics.keys()
        listed = {a.path for folder in ("tables", "plots") for a in client.list_artifacts(child.info.run_id, folder)}
        assert {"plots/abstention_calibration.png", "tables/abstention_curve.json"} <= listed
        assert child.data.metrics["time/rerank_s"] > 0
    metrics = {key: run.data.metrics for key, run in children.items()}
    # 6 of the 15 questions carry filters; `none` ignores them, pre and post apply them
    assert metrics["none"]["filter/restricted_share"] == 0.0
    assert metrics["pre"]["filter/restricted_share"] == pytest.approx(6 / 15)
    assert metrics["post"]["filter/short_result_rate"] == 0.0  # 4 x 400 hits cover 12 documents
    # each child logged what its configuration computes, here in process
    data = [
        f"golden.path={small_kb_files / 'golden.jsonl'}",
        f"golden.corpus={small_kb_files / 'corpus.jsonl'}",
        f"cache_dir={tmp_path / 'cache'}",
    ]
    for filter_option, logged in metrics.items():
        cfg = compose_config(f"filter={filter_option}", *reranker, "chunk=0", *data)
        golden = load_golden(cfg.golden.path, warn=False)
        retrieval = build_pipeline(cfg).retrieve(load_corpus(cfg.golden.corpus), golden)
        assert logged["ndcg_at_10"] == pytest.approx(score(golden, retrieval.results).mean["ndcg_at_10"], abs=1e-12)


@pytest.mark.slow
def test_a_failing_combination_is_a_failed_child_the_sweep_goes_on_and_exits_1(tmp_path, small_kb_files):
    # ivf's 16 lists need at least 16 chunks; 12 whole documents are too few (bm25 ignores `index`)
    result = sweep(tmp_path, small_kb_files, "-m", "model=minilm,bm25", "index=flat,ivf", "chunk=0")
    assert result.returncode == 1, result.stderr[-3000:]
    _, runs = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert sorted(c.info.status for c in children) == ["FAILED", "FINISHED", "FINISHED", "FINISHED"]
    failed = next(c for c in children if c.info.status == "FAILED")
    message = "index.nlist=16 is larger than the number of chunks (12)"
    assert failed.data.tags["error"].startswith(message)  # the one-line message itself
    assert "error: 1 of 4 combinations failed:" in result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("  model=minilm index=ivf chunk=0 ")]
    assert f": {message}" in line  # one line per failed combination: its overrides and why


@pytest.mark.slow
def test_bad_input_in_a_single_run_is_one_line_and_exit_code_2(tmp_path, small_kb_files):
    result = sweep(tmp_path, small_kb_files, "chunk=-3", "model=bm25", new_store=True)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: chunk=-3: must be an integer >= 0"
    assert not (tmp_path / "mlflow.db").exists()  # checked before anything was opened or logged


@pytest.mark.slow
def test_best_config_round_trip_reproduces_the_winner(tmp_path, small_kb_files, monkeypatch):
    result = sweep(tmp_path, small_kb_files, "-m", "model=bm25,tfidf", "chunk=0,128")
    assert result.returncode == 0, result.stderr[-3000:]
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.chdir(tmp_path)
    from sweep import best_config
    from sweep.best import find_best
    from sweep.experiment.trial import run_trial

    winner = find_best("ndcg_at_10")
    _, runs = runs_in(store)
    finished = [r.data.metrics["ndcg_at_10"] for r in runs if "ndcg_at_10" in r.data.metrics]
    assert winner.value == max(finished) and len(finished) == 4
    cfg = best_config("ndcg_at_10")
    assert cfg.model._target_.startswith("sweep.retrieval.lexical.") and cfg.chunk in (0, 128)
    again = run_trial(cfg, winner.choices, winner.overrides)  # the returned config, run as it is
    assert again.objective == again.evaluation.mean["ndcg_at_10"] == pytest.approx(winner.value, abs=1e-12)
    assert winner.choices["model"] in ("bm25", "tfidf") and winner.choices["index"] == "flat"
    client = mlflow.MlflowClient(store)
    original, rerun = (client.get_run(r).data.params for r in (winner.run_id, again.mlflow_run.run_id))
    assert rerun == original  # the same config and choices: the same params
    assert winner.command.startswith("python -m sweep ") and "model=" in winner.command

    cli = processes.run(
        [sys.executable, "-m", "sweep.best", "--metric", "ndcg_at_10", "--output", str(tmp_path / "best.yaml")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env=os.environ | {"MLFLOW_TRACKING_URI": store},
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert "reproduce: python -m sweep" in cli.stdout and (tmp_path / "best.yaml").is_file()
    missing = processes.run(
        [sys.executable, "-m", "sweep.best", "--metric", "no_such_metric"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=os.environ | {"MLFLOW_TRACKING_URI": store},
    )  # fmt: skip
    assert (
        missing.returncode == 2
        and "no finished run in experiment 'golden-sweep' has the metric 'no_such_metric'" in missing.stderr
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", [[], ["-m"]])
def test_an_unreachable_tracking_server_is_a_one_line_error(tmp_path, small_kb_files, mode):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = sweep(tmp_path, small_kb_files, *mode, "model=bm25", env={"MLFLOW_TRACKING_URI": url})
    assert result.returncode == 2
    assert f"error: cannot reach the MLflow tracking server at {url}" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("corpus_text", "golden_extra", "message"),
    [
        (
            None,
            {"id": "zz1", "question": "ghost?", "relevant": {"no-such-doc": 1}},
            "labels document 'no-such-doc', which is not in the corpus",
        ),
        ("", None, "empty corpus (no documents)"),
        (
            None,
            {"id": "zz2", "question": "red?", "relevant": {}, "filters": {"colour": "red"}},
            "question 'zz2': filters on 'colour', a field no document has",
        ),
    ],
)
def test_bad_data_is_one_line_exit_2_and_a_failed_run(tmp_path, small_kb_files, corpus_text, golden_extra, message):
    data = tmp_path / "data"
    data.mkdir()
    corpus = (small_kb_files / "corpus.jsonl").read_text() if corpus_text is None else corpus_text
    (data / "corpus.jsonl").write_text(corpus)
    golden = (small_kb_files / "golden.jsonl").read_text() + (json.dumps(golden_extra) + "\n" if golden_extra else "")
    (data / "golden.jsonl").write_text(golden)
    result = sweep(tmp_path, data, "model=bm25")
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
    _, runs = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert [r.info.status for r in runs] == ["FAILED"] and message in runs[0].data.tags["error"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["filter=pre", "filter.where={stat: current}"], "filter.where: filters on 'stat', a field no document has"),
        (["reranker=cross_encoder"], "reranker.model is not set"),
        (["reranker=cross_encoder", "reranker.model=/no/such/model"], "reranker.model=/no/such/model: no such folder"),
        (["abstain.calibrate_on=recall_at_7"], "abstain.calibrate_on='recall_at_7': must be one of recall_at_1,"),
        (["objective=ndcg_at_11"], "objective='ndcg_at_11': must be one of recall_at_1,"),
        (["model=custom"], "model._target_ is not set"),
    ],
)
def test_bad_filter_reranker_and_abstain_options_are_one_line_exit_2(tmp_path, small_kb_files, overrides, message):
    result = sweep(tmp_path, small_kb_files, "model=bm25", *overrides)
    assert result.returncode == 2 and f"error: {message}" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_chunks_longer_than_the_model_limit_warn_and_log_their_share(tmp_path, small_kb_files):
    result = sweep(tmp_path, small_kb_files, "chunk=512")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "longer than the model's 256-token limit (its special tokens included) and are truncated" in result.stdout
    _, runs = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert runs[0].data.metrics["corpus/truncated_share"] > 0.5


@pytest.fixture(scope="module")
def minilm_128(tmp_path_factory) -> Path:
    """A copy of MiniLM that reads at most 128 tokens."""
    folder = tmp_path_factory.mktemp("minilm-128")
    shutil.copytree(default_model_path(), folder, dirs_exist_ok=True)
    settings = json.loads((folder / "sentence_bert_config.json").read_text())
    (folder / "sentence_bert_config.json").write_text(json.dumps(settings | {"max_seq_length": 128}))
    return folder


@pytest.mark.slow
def test_chunks_and_truncation_are_measured_by_the_configured_model(tmp_path, small_kb_files, minilm_128):
    data = [
        f"golden.path={small_kb_files / 'golden.jsonl'}",
        f"golden.corpus={small_kb_files / 'corpus.jsonl'}",
        f"cache_dir={tmp_path}",
    ]
    corpus, golden = (
        load_corpus(small_kb_files / "corpus.jsonl"),
        load_golden(small_kb_files / "golden.jsonl", warn=False),
    )
    cfg = compose_config(f"model.embedder.path={minilm_128}", "chunk=200", *data)
    pipeline = build_pipeline(cfg)
    assert pipeline.chunker.tokenizer.path == str(minilm_128)  # the chunker measures in the model's tokens
    retrieval = pipeline.retrieve(corpus, golden)
    from transformers import AutoTokenizer  # here: collecting the quick tests need not import transformers

    tokenizer = AutoTokenizer.from_pretrained(minilm_128)
    lengths = np.array([len(tokenizer(c.text)["input_ids"]) for c in retrieval.chunks])  # with [CLS] and [SEP]
    assert (
        retrieval.stats["corpus/truncated_share"] == pytest.approx(np.mean(lengths > 128))
        and np.mean(lengths > 128) > 0.5
    )
    default = build_pipeline(compose_config("chunk=200", *data)).retrieve(corpus, golden)
    assert default.stats["corpus/truncated_share"] == 0.0 and lengths.max() <= 256  # the same chunks fit MiniLM's 256


@pytest.mark.slow
def test_context_metrics_recompute_from_the_delivered_chunks_artifact(tmp_path, small_kb_files):
    result = sweep(tmp_path, small_kb_files, "chunk=64", "context.k=[1,4]")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Context: the top k chunks of" in result.stdout and "Worst questions by context/recall_at_4" in result.stdout
    # the first line that is not a warning is the summary, the tables after it
    first = next(line for line in result.stdout.splitlines() if not line.startswith("warning: "))
    assert first.startswith("chunk=64 context.k=[1,4] golden.path=") and ": ndcg_at_10 0." in first
    assert ", context/recall_at_5" not in first  # k = 1, 4: no context recall at 5 to show
    assert result.stdout.index(first) < result.stdout.index("Overall: ") and "Loading weights" not in result.stderr
    client, (run,) = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    delivered = mlflow.artifacts.load_dict(f"{run.info.artifact_uri}/tables/retrieved_chunks.json")
    corpus = load_corpus(small_kb_files / "corpus.jsonl")
    golden = load_golden(small_kb_files / "golden.jsonl", corpus, warn=False)
    assert delivered.keys() == golden.by_id.keys()
    # recompute recall and precision at 4 from the artifact alone: characters, per question
    recalls, precisions = [], []
    for question in golden:
        if not question.evidence:
            continue
        chunks = delivered[question.id][:4]
        assert len(chunks) == 4 and all(c["score"] >= n["score"] for c, n in zip(chunks, chunks[1:]))
        for c in chunks:
            assert corpus.by_id[c["doc"]].content[c["start"] : c["end"]].strip()
        covered = {
            (doc, i)
            for c in chunks
            for doc, spans in question.evidence.items()
            if doc == c["doc"]
            for span in spans
            for i in range(max(span.start, c["start"]), min(span.end, c["end"]))
        }
        recalls.append(len(covered) / question.evidence_chars)
        precisions.append(len(covered) / sum(c["end"] - c["start"] for c in chunks))
    metrics = run.data.metrics
    assert metrics["context/n"] == len(recalls) > 0
    assert metrics["context/recall_at_4"] == pytest.approx(sum(recalls) / len(recalls))
    assert metrics["context/precision_at_4"] == pytest.approx(sum(precisions) / len(precisions))
    assert 0 < metrics["context/recall_at_1"] <= metrics["context/recall_at_4"] <= 1


@pytest.mark.slow
def test_an_excerpt_not_in_its_document_is_exit_2_naming_file_and_line(tmp_path, small_kb_files):
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.jsonl").write_text((small_kb_files / "corpus.jsonl").read_text())
    golden = (small_kb_files / "golden.jsonl").read_text()
    doc = json.loads(golden.splitlines()[0])["relevant"]
    first = next(iter(doc))
    extra = {
        "id": "zz9",
        "question": "?",
        "relevant": {first: 2},
        "evidence": {first: ["Words the document never says"]},
    }
    (data / "golden.jsonl").write_text(golden + json.dumps(extra) + "\n")
    result = sweep(tmp_path, data, "model=bm25")
    line = len(golden.splitlines()) + 1
    message = f"golden.jsonl:{line}: question 'zz9': evidence for '{first}': excerpt 'Words the document never says' is not in the document"
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_the_chunking_benchmark_format_runs_from_a_folder_of_markdown(tmp_path):
    """`golden=chunking_eval golden.path=DIR`: questions_df.csv with character spans, documents
    read from DIR/corpora/*.md by file stem, every corpus retrieved from at once."""
    data = tmp_path / "bench"
    (data / "corpora").mkdir(parents=True)
    texts = {
        "fruit": "# Fruit\n\nApples are red or green.\n\nBananas are yellow and curved.\n",
        "space": "# Space\n\nMars is the red planet.\n\nJupiter is the largest planet.\n",
    }
    for stem, text in texts.items():
        (data / "corpora" / f"{stem}.md").write_text(text, encoding="utf-8")
    rows = [["question", "references", "corpus_id"]]
    for question, stem, answer in [
        ("Which planet is red?", "space", "Mars is the red planet."),
        ("What colour are bananas?", "fruit", "Bananas are yellow and curved."),
    ]:
        start = texts[stem].index(answer)
        reference = {"content": answer, "start_index": start, "end_index": start + len(answer)}
        rows.append([question, json.dumps([reference]), stem])
    with (data / "questions_df.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    args = [
        sys.executable, "-m", "sweep", "golden=chunking_eval", f"golden.path={data}", "model=bm25",
        "chunking=recursive", "chunk=8", "context.k=[1,2]",
        f"hydra.run.dir={tmp_path / 'outputs'}", f"cache_dir={tmp_path / 'cache'}",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    result = processes.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    _, (run,) = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert run.info.status == "FINISHED" and run.data.params["golden"] == "chunking_eval"
    metrics = run.data.metrics
    assert metrics["context/n"] == 2 and metrics["type/space/context/n"] == 1
    assert metrics["recall_at_1"] == 1.0  # each answer's corpus ranks first
    assert metrics["context/recall_at_2"] == 1.0 and 0 < metrics["context/precision_at_2"] < 1
