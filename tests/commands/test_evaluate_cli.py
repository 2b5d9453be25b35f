"""`python -m sweep.evaluate` as a user runs it: a real process, its output and exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import processes
from helpers.paths import ROOT
from sweep.errors import EXIT_READER_GONE, exit_2_on_bad_input

EXAMPLE = ROOT / "data" / "example"
pytestmark = pytest.mark.slow  # every test here runs the command in a subprocess

SEED_QRELS = "vacation 0 d1 1\nhotel 0 d6 1\nlaptop 0 d10 1\n"
SEED_RUN = (
    "vacation Q0 d2 1 3 s\nvacation Q0 d1 2 2 s\nvacation Q0 d9 3 1 s\n"
    "hotel Q0 d6 1 3 s\nhotel Q0 d5 2 2 s\nhotel Q0 d7 3 1 s\n"
    "laptop Q0 d3 1 3 s\nlaptop Q0 d4 2 2 s\nlaptop Q0 d8 3 1 s\n"
)


def evaluate_cli(*args: str | Path) -> subprocess.CompletedProcess:
    return processes.run(
        [sys.executable, "-m", "sweep.evaluate", *map(str, args)], capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def seed_files(tmp_path):
    (tmp_path / "qrels.txt").write_text(SEED_QRELS)
    (tmp_path / "run.trec").write_text(SEED_RUN)
    return tmp_path / "qrels.txt", tmp_path / "run.trec"


def test_json_output_is_exactly_mean_and_per_query(seed_files):
    result = evaluate_cli(*seed_files, "--metrics", "recall_at_1,recall_at_3,mrr", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "mean": {"recall_at_1": pytest.approx(1 / 3), "recall_at_3": pytest.approx(2 / 3), "mrr": 0.5}
    }
    per_query = json.loads(evaluate_cli(*seed_files, "--metrics", "recall_at_3,mrr", "--json", "--per-query").stdout)
    assert per_query["per_query"] == {
        "vacation": {"recall_at_3": 1.0, "mrr": 0.5},
        "hotel": {"recall_at_3": 1.0, "mrr": 1.0},
        "laptop": {"recall_at_3": 0.0, "mrr": 0.0},
    }


def test_jsonl_run_and_per_type_means(tmp_path):
    run = tmp_path / "run.jsonl"
    run.write_text(
        '{"id": "q001", "results": [["d1", 2.0], ["d11", 1.0]]}\n{"id": "q009", "results": []}\n{"id": "q010", "results": [["d3", 0.1]]}\n'
    )
    result = evaluate_cli(
        EXAMPLE / "golden.jsonl", run, "--metrics", "recall_at_2,abstain/correct_rate", "--json", "--per-type"
    )
    mean = json.loads(result.stdout)["mean"]
    assert mean["type/factoid/recall_at_2"] == pytest.approx(1 / 3)  # q001 found both, q002 and q007 nothing
    assert mean["type/unanswerable/abstain/correct_rate"] == 0.5 and mean["type/unanswerable/n"] == 2
    assert "type/unanswerable/recall_at_2" not in mean


def test_condensed_scores_without_the_unjudged_documents_on_both_routes(tmp_path, seed_files):
    """The seed run's unjudged d2 above vacation's d1, and laptop's three unjudged documents:
    condensed, d1 is first and laptop's ranking is empty but was not an abstention. The JSONL run
    (the pandas route) scores as the TREC files (read in columns) do."""
    metrics = ("--metrics", "mrr,bpref,abstain/false_rate", "--json", "--per-query")
    as_retrieved = json.loads(evaluate_cli(*seed_files, *metrics).stdout)
    condensed = json.loads(evaluate_cli(*seed_files, *metrics, "--condensed").stdout)
    assert as_retrieved["per_query"]["vacation"]["mrr"] == 0.5 and condensed["per_query"]["vacation"]["mrr"] == 1.0
    assert condensed["per_query"]["laptop"] == {"mrr": 0.0, "bpref": 0.0}
    assert condensed["mean"] == {"mrr": pytest.approx(2 / 3), "bpref": pytest.approx(2 / 3), "abstain/false_rate": 0.0}
    run = tmp_path / "run.jsonl"
    rankings: dict[str, list] = {}
    for line in SEED_RUN.splitlines():
        qid, _, doc, _, value, _ = line.split()
        rankings.setdefault(qid, []).append([doc, float(value)])
    run.write_text("".join(json.dumps({"id": qid, "results": hits}) + "\n" for qid, hits in rankings.items()))
    assert json.loads(evaluate_cli(seed_files[0], run, *metrics, "--condensed").stdout) == condensed
    report = evaluate_cli(*seed_files, "--condensed")
    assert report.returncode == 0 and "bpref" in report.stdout, report.stderr


def test_readable_report_on_the_bundled_example():
    result = evaluate_cli(EXAMPLE / "golden.jsonl", EXAMPLE / "run.trec")
    assert result.returncode == 0, result.stderr
    for heading in (
        "Overall: 8 answerable, 2 unanswerable",
        "Per question type",
        "Worst questions by ndcg_at_10",
        "95% CI",
    ):
        assert heading in result.stdout
    assert "abstain/correct_rate" in result.stdout


def test_a_repeated_document_is_a_warning_and_keeps_its_best_score(tmp_path, seed_files):
    qrels, _ = seed_files
    run = tmp_path / "dup.trec"
    run.write_text("vacation Q0 d1 1 0.5 s\nvacation Q0 d2 2 1.0 s\nvacation Q0 d1 3 2.0 s\n")
    result = evaluate_cli(qrels, run, "--metrics", "mrr", "--json", "--per-query")
    assert result.returncode == 0
    assert json.loads(result.stdout)["per_query"]["vacation"]["mrr"] == 1.0
    assert result.stderr.count("listed more than once") == 1


@pytest.mark.parametrize(
    ("run_text", "args", "message"),
    [
        (
            "vacation Q0 d1 1 2 s\nvacation Q0 d2 2\n",
            [],
            "run.trec:2: expected 6 fields 'qid Q0 docid rank score tag', found 4",
        ),
        ("vacation Q0 d1 1 high s\n", [], "run.trec:1: score 'high' is not a number"),
        ("", [], "run.trec: empty file"),
        (SEED_RUN, ["--metrics", "ndcg_at_0"], "metric 'ndcg_at_0': k must be a positive integer, got 0"),
        (SEED_RUN, ["--metrics", "bleu_at_4"], "unknown metric 'bleu_at_4'; valid metrics: recall_at_K"),
        (SEED_RUN, ["--relevance-level", "0"], "relevance level 0 must be an integer >= 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, seed_files, run_text, args, message):
    qrels, _ = seed_files
    run = tmp_path / "run.trec"
    run.write_text(run_text)
    result = evaluate_cli(qrels, run, *args)
    assert result.returncode == 2
    assert_one_error_line(result.stderr, message)


def assert_one_error_line(stderr: str, message: str) -> None:
    """Exactly one `error:` line that says `message`; anything else is a warning, never a traceback."""
    lines = stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], stderr
    assert all(line.startswith(("error: ", "warning: ")) for line in lines), stderr


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "run.jsonl",
            '{"id": "q", "results": [["a", 1]]}\n{"id": "q", "results": []}\n',
            "run.jsonl:2: duplicate query id 'q' (first on line 1)",
        ),
        (
            "run.jsonl",
            '{"id": "q", "results": [["a"]]}\n',
            "run.jsonl:1: query 'q': result ['a'] is not a [docid, score] pair",
        ),
        ("run.jsonl", "{broken\n", "run.jsonl:1: malformed JSON"),
    ],
)
def test_bad_jsonl_runs(tmp_path, seed_files, name, content, message):
    run = tmp_path / name
    run.write_text(content)
    result = evaluate_cli(seed_files[0], run)
    assert result.returncode == 2
    assert_one_error_line(result.stderr, message)


def test_bad_qrels_files(tmp_path, seed_files):
    _, run = seed_files
    unknown = tmp_path / "weird.txt"
    unknown.write_text("a,b,c\n")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    for qrels, message in [
        (unknown, "unknown golden-set format"),
        (empty, "empty file"),
        (tmp_path / "missing", "no such file"),
    ]:
        result = evaluate_cli(qrels, run)
        assert result.returncode == 2
        assert_one_error_line(result.stderr, message)


def test_importing_the_cli_pulls_in_no_heavy_frameworks():
    code = "import sys, sweep.evaluate; print(sorted(m for m in ('torch', 'sentence_transformers', 'mlflow', 'transformers') if m in sys.modules))"
    result = processes.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]"


def test_json_on_trec_files_imports_no_pandas(seed_files):
    """The scorer other tools call starts fast: TREC files to JSON without pandas, scipy or the
    sweep's frameworks (`python -X importtime -m sweep.evaluate ...` shows what it loads)."""
    heavy = ("pandas", "scipy", "mlflow", "hydra", "torch", "sentence_transformers")
    code = (
        "import contextlib, io, json, sys\n"
        "from sweep.evaluate import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    main({list(map(str, seed_files))!r} + ['--json', '--per-query', '--per-type'])\n"
        f"print(json.dumps([[m for m in {heavy!r} if m in sys.modules], sorted(json.loads(out.getvalue())['per_query'])]))"
    )
    result = processes.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert json.loads(result.stdout) == [[], ["hotel", "laptop", "vacation"]], result.stderr


def test_the_command_on_trec_files_skips_the_slow_imports_too(seed_files):
    """Not even the modules that only cost time: pyarrow.compute (its wrappers' docstrings),
    PyYAML and importlib.metadata (issue 22: `bench/metrics.py --whole-process`)."""
    result = processes.run(
        [sys.executable, "-X", "importtime", "-m", "sweep.evaluate", *map(str, seed_files), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and json.loads(result.stdout)["mean"]["mrr"] == 0.5, result.stderr[-2000:]
    imported = {
        line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")
    }
    assert {"numpy", "pyarrow", "sweep.evaluation.measures"} <= imported  # what it does import is listed
    assert imported.isdisjoint({"pyarrow.compute", "yaml", "importlib.metadata", "pandas", "scipy", "mlflow"})


def test_the_command_reads_its_files_without_transparent_huge_pages(seed_files):
    """`without_huge_pages` runs before the files are read: the command's own `__main__` block, run
    as `-m` runs it, reports its process's THP flag (`/proc/self/status`) when it opens the run."""
    qrels, run = map(str, seed_files)
    code = (
        "import runpy, sys\n"
        "def report(event, args):\n"
        f"    if event == 'open' and str(args[0]) == {run!r}:\n"
        "        with open('/proc/self/status') as status:\n"
        "            print(next(line for line in status if line.startswith('THP_enabled')), end='', file=sys.stderr)\n"
        "sys.addaudithook(report)\n"
        f"sys.argv = ['sweep.evaluate', {qrels!r}, {run!r}, '--json']\n"
        "runpy.run_module('sweep.evaluate', run_name='__main__', alter_sys=True)\n"
    )
    result = processes.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and json.loads(result.stdout)["mean"]["mrr"] == 0.5, result.stderr[-2000:]
    assert {line for line in result.stderr.splitlines() if line.startswith("THP_enabled")} == {"THP_enabled:\t0"}


@pytest.mark.parametrize("json_output", [False, True])
def test_a_reader_gone_before_the_output_ends_the_command_quietly(seed_files, json_output):
    """`python -m sweep.evaluate ... | head -1`, with the reader gone before the first line: the
    readable report (printed as it goes) and the JSON (printed at the end) both stop without a
    traceback: only the golden set's warnings on stderr, and `EXIT_READER_GONE` (rich's console
    ends the readable report so itself)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    args = [*seed_files, "--json"] if json_output else seed_files
    try:
        result = subprocess.run(
            [sys.executable, "-m", "sweep.evaluate", *map(str, args)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert result.returncode == EXIT_READER_GONE
    assert all(line.startswith("warning: ") for line in result.stderr.splitlines()), result.stderr


def test_a_broken_pipe_that_is_not_stdouts_is_still_an_error():
    """A tracking server's socket closing under a command is a failure to report, not a reader
    who has read enough: only a closed stdout pipe ends a command quietly."""

    @exit_2_on_bad_input
    def command() -> int:
        raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(BrokenPipeError):
        command()
