"""`python -m sweep.judge grade` against the tests' chat server on 127.0.0.1 acting as a judge
(`helpers/chat_server.py`: it grades from a copy of the labels it is given, flipping a seeded
share, and plants answers without a final score): every grade is the planted one, a second run
sends nothing, the cost cap refuses before anything is sent, the key is written nowhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.chat_server import MODEL_NAME, flipped, judged_grade, pair_key
from helpers.model_servers import chat_server
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden
from sweep.formats.judgments import load_judgments, person_grades
from sweep.judge import main
from sweep.labelling.grading import DEFAULT_PASSAGE_TOKENS, load_template, passage
from sweep.labelling.queue import Candidate, Header, write_queue

KEY = "sk-judge-5d1e7a3c9b2f4e6a8c0d1f3a5b7c9e1d"  # must appear in no file and no output
FLIPS, SEED = 0.2, 11

pytestmark = pytest.mark.slow  # a real server on 127.0.0.1


@pytest.fixture(scope="module")
def server():
    with chat_server(KEY) as running:
        yield running


@pytest.fixture
def judge(server, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", KEY)
    server.faults()
    yield server
    server.faults()
    server.judge()


@pytest.fixture
def pool(small_kb_files, tmp_path):
    """(golden, corpus, queue, truth): a queue of 3 unjudged documents per question, and the
    grade the judge's labels give each pair, people's pairs included (their own grades)."""
    corpus = load_corpus(small_kb_files / "corpus.jsonl")
    golden = load_golden(small_kb_files / "golden.jsonl", corpus, warn=False)
    ids = sorted(corpus.by_id)
    questions, truth = [], dict(person_grades(golden))
    for number, question in enumerate(golden):
        unjudged = [doc for doc in ids if doc not in question.relevant][number % 5 :][:3]
        questions.append((question, [Candidate(doc, corpus.by_id[doc].title, 1, {}, None) for doc in unjudged]))
        truth |= {(question.id, doc): (number + rank) % 4 for rank, doc in enumerate(unjudged)}
    header = Header(
        [], 10, str(small_kb_files / "golden.jsonl"), "-", str(small_kb_files / "corpus.jsonl"), "path", "-"
    )
    write_queue(tmp_path / "queue.jsonl", header, questions)
    return golden, corpus, tmp_path / "queue.jsonl", truth


def labels(golden, corpus, truth, tokens=DEFAULT_PASSAGE_TOKENS) -> dict[str, int]:
    """The judge's copy of the labels, keyed as the server reads a prompt."""
    return {
        pair_key(golden.by_id[qid].question, passage(corpus, doc, tokens)[0]): grade
        for (qid, doc), grade in truth.items()
    }


def grade(judge, queue, golden, output, *extra: str) -> int:
    """The command's exit code."""
    args = ["grade", str(queue), "--golden", golden.source, "--base-url", judge.base_url, "--model", MODEL_NAME]
    try:
        return main([*args, "--api-key-env", "JUDGE_KEY", "--output", str(output), *extra])
    except SystemExit as exit:
        return exit.code


def test_every_grade_is_the_judges_and_a_second_run_sends_nothing(judge, pool, tmp_path, capsys):
    golden, corpus, queue, truth = pool
    judge.judge(labels=labels(golden, corpus, truth), flip=FLIPS, seed=SEED)
    before_golden = Path(golden.source).read_bytes()
    cache = tmp_path / "cache"
    assert grade(judge, queue, golden, tmp_path / "j.jsonl", "--cache-dir", str(cache), "--calibration", "10") == 0
    grades = load_judgments(tmp_path / "j.jsonl")
    pooled = [(g.qid, g.doc) for g in grades if not g.calibration]
    assert len(pooled) == 3 * len(golden) and sum(g.calibration for g in grades) == 10
    config = {"labels": labels(golden, corpus, truth), "flip": FLIPS, "seed": SEED}
    for g in grades:
        question = golden.by_id[g.qid].question
        assert g.grade == judged_grade(question, passage(corpus, g.doc, DEFAULT_PASSAGE_TOKENS)[0], config)
        assert g.by == f"llm:{MODEL_NAME}@{load_template(None).hash}" and g.final_line == f"##final score: {g.grade}"
        assert g.cut_at_tokens is None and g.raw is None and g.prompt_tokens > 0
    # the planted flips are there, and only there
    keys = {(g.qid, g.doc): pair_key(golden.by_id[g.qid].question, passage(corpus, g.doc, 3000)[0]) for g in grades}
    changed = {pair for pair, key in keys.items() if flipped(key, SEED, FLIPS)}
    assert changed and {(g.qid, g.doc) for g in grades if g.grade != truth[(g.qid, g.doc)]} <= changed
    assert all(g.calibration == ((g.qid, g.doc) in person_grades(golden)) for g in grades)
    assert Path(golden.source).read_bytes() == before_golden  # the judge never writes the golden file
    printed = capsys.readouterr()
    first = printed.out + printed.err
    assert f"graded {len(grades)} of {len(grades)} pairs (10 for calibration)" in first

    sent = judge.requests()
    assert grade(judge, queue, golden, tmp_path / "again.jsonl", "--cache-dir", str(cache), "--calibration", "10") == 0
    assert judge.requests() == sent  # the cache answered every prompt
    assert "requests 0 sent" in capsys.readouterr().out
    assert [g.grade for g in load_judgments(tmp_path / "again.jsonl")] == [g.grade for g in grades]
    written = [tmp_path / "j.jsonl", tmp_path / "again.jsonl", *cache.rglob("*.json")]
    assert all(KEY not in path.read_text() for path in written) and KEY not in first


def test_an_answer_without_a_final_score_is_asked_once_more_then_recorded_without_a_grade(judge, pool, tmp_path):
    golden, corpus, queue, truth = pool
    never, late = golden.questions[0].question, golden.questions[1].question
    judge.judge(labels=labels(golden, corpus, truth), no_score=[never], late_score=[late])
    sent = judge.requests()
    assert grade(judge, queue, golden, tmp_path / "j.jsonl", "--cache-dir", str(tmp_path / "c")) == 0
    grades = {(g.qid, g.doc): g for g in load_judgments(tmp_path / "j.jsonl")}
    assert judge.requests() - sent == len(grades) + 3 + 3  # one more ask for each of the 6 pairs
    for (qid, doc), g in grades.items():
        if qid == golden.questions[0].id:
            assert g.grade is None and g.final_line is None and "looks related" in g.raw  # never guessed
        else:
            assert g.grade == truth[(qid, doc)] and g.raw is None


def test_retries_through_rate_limits_and_server_errors(judge, pool, tmp_path):
    golden, corpus, queue, truth = pool
    judge.judge(labels=labels(golden, corpus, truth))
    judge.faults(every=4, rate_limit=2, retry_after=0.1, server_error=3)
    # one request at a time: tries 2 and 3 of every 4 fail, so no request fails more than twice in a row
    args = ("--cache-dir", str(tmp_path / "c"), "--max-concurrency", "1")
    assert grade(judge, queue, golden, tmp_path / "j.jsonl", *args) == 0
    assert all(g.grade == truth[g.pair] for g in load_judgments(tmp_path / "j.jsonl"))


def test_a_long_document_is_cut_and_the_judgment_says_so(judge, pool, tmp_path):
    golden, corpus, queue, truth = pool
    judge.judge(labels=labels(golden, corpus, truth, tokens=40))
    args = ("--cache-dir", str(tmp_path / "c"), "--max-passage-tokens", "40")
    assert grade(judge, queue, golden, tmp_path / "j.jsonl", *args) == 0
    grades = load_judgments(tmp_path / "j.jsonl")
    long = {g.pair for g in grades if len(corpus.by_id[g.doc].content) > 160}
    assert long and {g.pair for g in grades if g.cut_at_tokens == 40} == long
    assert all(g.grade == truth[g.pair] for g in grades)  # the judge saw the cut text it was labelled on


def test_a_cost_cap_below_the_estimate_sends_nothing_and_says_the_estimate(judge, pool, tmp_path, capsys):
    golden, _, queue, _ = pool
    sent = judge.requests()
    prices = ("--price-per-mtok", "1000", "--output-price-per-mtok", "1000", "--max-cost-usd", "0.5")
    assert grade(judge, queue, golden, tmp_path / "j.jsonl", "--cache-dir", str(tmp_path / "c"), *prices) == 2
    error = capsys.readouterr().err
    assert "--max-cost-usd=0.5" in error and "is estimated at $" in error and "nothing was sent" in error
    assert judge.requests() == sent and not (tmp_path / "j.jsonl").exists()


def test_bad_input_is_one_line_and_exit_2(judge, pool, tmp_path, capsys):
    golden, _, queue, _ = pool
    no_placeholder = tmp_path / "prompt.txt"
    no_placeholder.write_text("Grade this: {query}\n", encoding="utf-8")
    stranger = tmp_path / "stranger.jsonl"
    lines = queue.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[1]) | {"qid": "not-a-question"}
    stranger.write_text("\n".join([lines[0], json.dumps(record)]) + "\n", encoding="utf-8")
    cases = [
        ((queue, "--prompt", str(no_placeholder)), "has no {passage}"),
        ((stranger,), "question 'not-a-question' is not in the golden set"),
        ((queue, "--calibration", "100000"), "--calibration 100000: people graded only"),
        ((queue, "--max-cost-usd", "1"), "--max-cost-usd needs --price-per-mtok"),
    ]
    for (source, *extra), message in cases:
        assert grade(judge, source, golden, tmp_path / "j.jsonl", *extra) == 2
        error = capsys.readouterr().err
        assert error.startswith("error: ") and message in error and error.count("\n") == 1, error
    assert not (tmp_path / "j.jsonl").exists()
