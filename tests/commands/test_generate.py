"""`python -m sweep.generate` on the bundled corpus against the tests' chat server on 127.0.0.1
acting as a question generator (`helpers/chat_server.py`: a question and a verbatim quote from
each passage, and a seeded share of planted bad answers of each kind): every drop is a planted
one, under its filter's reason; every kept evidence is its document's text at its offsets; the
file loads as a golden set; a second run sends nothing; the cost cap refuses before anything is
sent; the key is written nowhere."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from helpers.chat_server import MODEL_NAME, good_generation, planted
from helpers.commands import runs_in, sweep
from helpers.model_servers import call, chat_server
from helpers.paths import KB
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden
from sweep.formats.provenance import PENDING, SYNTHETIC
from sweep.generate import main, summary_path
from sweep.labelling.generation import load_prompt, sample_passages

KEY = "sk-generate-2b4d6f8a0c1e3a5c7e9b1d3f5a7c9e1b"  # must appear in no file and no output
QUESTIONS, SEED = 40, 3
PLANTS = {"plant": 0.4, "seed": SEED}
REASON = {  # each planted kind, and the filter that must drop it
    "not_in_passage": "evidence_not_in_passage",
    "copies_evidence": "copies_evidence",
    "duplicate": "near_duplicate",
    "unfindable": "not_found_by_bm25",
}

pytestmark = pytest.mark.slow  # a real server on 127.0.0.1, and MiniLM


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(KB / "corpus.jsonl")


@pytest.fixture(scope="module")
def server():
    with chat_server(KEY) as running:
        yield running


@pytest.fixture
def generator(server, corpus, monkeypatch):
    """The server generating with planted bad answers; a planted duplicate repeats the question of
    the first passage sampled (which is not planted itself)."""
    monkeypatch.setenv("GENERATE_KEY", KEY)
    first = sample_passages(corpus, QUESTIONS, SEED)[0]
    assert planted(first.text, PLANTS) is None
    call(f"{server.root}/admin/generate", PLANTS | {"duplicate_of": good_generation(first.doc.title, first.text)[0]})
    server.faults()
    yield server
    call(f"{server.root}/admin/generate", {})
    server.judge()


def generate(server, output: Path, *extra: str) -> int:
    """The command's exit code."""
    args = ["--corpus", str(KB / "corpus.jsonl"), "--base-url", server.base_url, "--model", MODEL_NAME]
    try:
        return main([*args, "--api-key-env", "GENERATE_KEY", "--seed", str(SEED), "--output", str(output), *extra])
    except SystemExit as exit:
        return exit.code


def test_every_drop_is_a_planted_one_and_every_kept_evidence_is_its_documents_text(generator, corpus, tmp_path, capsys):
    output, cache = tmp_path / "generated.jsonl", tmp_path / "cache"
    assert generate(generator, output, "--questions", str(QUESTIONS), "--cache-dir", str(cache)) == 0
    passages = sample_passages(corpus, QUESTIONS, SEED)
    plants = Counter(planted(p.text, PLANTS) for p in passages)
    assert all(plants[kind] >= 1 for kind in REASON), plants  # every kind is planted at least once
    summary = json.loads(summary_path(output).read_text())
    assert summary["dropped"] == {"unreadable": 0} | {REASON[kind]: plants[kind] for kind in REASON}
    assert summary["kept"] == plants[None] and summary["asked"] == QUESTIONS
    first = capsys.readouterr()
    dropped = ", ".join(f"{reason} {count}" for reason, count in summary["dropped"].items())
    assert f"kept {plants[None]} (0 unanswerable), dropped {QUESTIONS - plants[None]}: {dropped}" in first.out

    records = [json.loads(line) for line in output.read_text().splitlines()]
    golden = load_golden(output, corpus, warn=False)  # the corpus holds every label, every span resolves
    assert len(golden) == len(records) == plants[None]
    by = f"llm:{MODEL_NAME}@{load_prompt(None, 'generate', ('title', 'passage'), '--prompt').hash}"
    good = {p.doc.id: p for p in passages if planted(p.text, PLANTS) is None}
    for record, question in zip(records, golden):
        (doc,) = question.relevant
        assert question.relevant == {doc: 2} and doc in good
        assert (question.source, question.status, question.origin.by) == (SYNTHETIC, PENDING, by)
        (span,) = record["evidence"][doc]
        assert corpus.by_id[doc].content[span["start"] : span["end"]] == span["text"]  # exact, at its offsets
        passage = good[doc]
        assert passage.start <= span["start"] < span["end"] <= passage.end
        assert (question.question, span["text"]) == good_generation(passage.doc.title, passage.text)
        assert record["metadata"]["generated"]["passage"] == {"start": passage.start, "end": passage.end}

    sent = generator.requests()
    assert generate(generator, tmp_path / "again.jsonl", "--questions", str(QUESTIONS), "--cache-dir", str(cache)) == 0
    assert generator.requests() == sent  # the cache answered every prompt
    again = capsys.readouterr()
    assert "generate requests 0 sent, 40 from the cache" in again.out
    again_ids = [json.loads(line)["id"] for line in (tmp_path / "again.jsonl").read_text().splitlines()]
    assert again_ids == [record["id"] for record in records]
    written = [output, summary_path(output), tmp_path / "again.jsonl", *cache.rglob("*.json")]
    assert all(KEY not in path.read_text() for path in written)
    assert KEY not in first.out + first.err + again.out + again.err


def test_the_generated_file_is_a_golden_set_a_run_scores_with_golden_status_all(generator, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.jsonl").symlink_to(KB / "corpus.jsonl")
    output = data / "golden.jsonl"
    assert generate(generator, output, "--questions", str(QUESTIONS), "--cache-dir", str(tmp_path / "c")) == 0
    generated = output.read_text().splitlines()
    result = sweep(tmp_path, data, "model=bm25", "golden.status=all")
    assert result.returncode == 0, result.stderr[-2000:]
    _, [run] = runs_in(f"sqlite:///{tmp_path / 'mlflow.db'}")
    metrics = run.data.metrics
    assert metrics["source/synthetic/n"] == len(generated) and "source/human/n" not in metrics
    assert metrics["source/synthetic/ndcg_at_10"] == metrics["ndcg_at_10"] and 0 < metrics["ndcg_at_10"] <= 1


def test_unanswerable_questions_are_kept_pending_and_the_judge_says_what_it_found(generator, tmp_path, capsys):
    generator.judge(labels={}, unknown=0)  # grades every (question, document) pair 0
    output = tmp_path / "generated.jsonl"
    extra = ("--questions", "20", "--unanswerable", "0.25", "--judge-model", MODEL_NAME)
    assert generate(generator, output, *extra, "--cache-dir", str(tmp_path / "c")) == 0
    unanswerable = [q for q in load_golden(output, warn=False) if q.type == "unanswerable"]
    assert len(unanswerable) == 5
    for question in unanswerable:
        assert question.relevant == {} and question.status == PENDING and question.source == SYNTHETIC
        verdict = question.metadata["generated"]["judge"]
        assert verdict["all_0"] and 1 <= len(verdict["top"]) <= 10 and set(verdict["top"].values()) == {0}
        assert verdict["by"].startswith(f"llm:{MODEL_NAME}@")
        assert question.origin.by.startswith(f"llm:{MODEL_NAME}@") and len(question.metadata["generated"]["topics"])
    assert "all 0 for 5 (marked judge.all_0 in their metadata)" in capsys.readouterr().out

    generator.judge(labels={}, unknown=2)  # now every document answers them, as far as the judge can tell
    assert generate(generator, output, *extra, "--cache-dir", str(tmp_path / "c2")) == 0
    verdicts = [q.metadata["generated"]["judge"] for q in load_golden(output, warn=False) if q.type == "unanswerable"]
    assert verdicts and not any(verdict["all_0"] for verdict in verdicts)
    assert "all 0 for 0 (marked judge.all_0 in their metadata); 5 have a document graded relevant" in (
        capsys.readouterr().out
    )


def test_a_cost_cap_below_the_estimate_sends_nothing_and_says_the_estimate(generator, tmp_path, capsys):
    sent = generator.requests()
    prices = ("--price-per-mtok", "1000", "--output-price-per-mtok", "1000", "--max-cost-usd", "0.5")
    output = tmp_path / "generated.jsonl"
    assert generate(generator, output, "--questions", "40", "--cache-dir", str(tmp_path / "c"), *prices) == 2
    error = capsys.readouterr().err
    assert "--max-cost-usd=0.5" in error and "is estimated at $" in error and "nothing was sent" in error
    assert generator.requests() == sent and not output.exists()


def test_bad_input_is_one_line_and_exit_2(generator, tmp_path, capsys):
    no_placeholder = tmp_path / "prompt.txt"
    no_placeholder.write_text("Ask about {passage}\n", encoding="utf-8")
    cases = [
        (("--questions", "5", "--prompt", str(no_placeholder)), "has no {title}"),
        (("--questions", "5", "--unanswerable", "1.5"), "--unanswerable 1.5: a share"),
        (("--questions", "5", "--max-cost-usd", "1"), "--max-cost-usd needs --price-per-mtok"),
    ]
    for extra, message in cases:
        assert generate(generator, tmp_path / "g.jsonl", *extra) == 2
        error = capsys.readouterr().err
        assert error.startswith("error: ") and message in error and error.count("\n") == 1, error
    assert generate(generator, tmp_path / "g.yaml", "--questions", "5") == 2
    assert "a golden file is written as JSON Lines" in capsys.readouterr().err
    assert not (tmp_path / "g.jsonl").exists()
