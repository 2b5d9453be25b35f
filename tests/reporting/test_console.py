"""What a run prints (reporting/console.py, reporting/logs.py, sweep/progress.py): the summary
line first, the verbosity levels, libraries kept below warning, every warning once per sweep."""

from __future__ import annotations

import io
import logging
import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from helpers.commands import sweep
from helpers.data import golden_of, ranked
from helpers.paths import KB
from sweep.errors import InputError
from sweep.evaluation import score
from sweep.evaluation.abstention import Calibration
from sweep.evaluation.leaderboard import build
from sweep.evaluation.record import TrialRecord
from sweep.evaluation.registry import ABSTAIN_CORRECT, ABSTAIN_FALSE, TRUNCATED
from sweep.formats.golden import GoldenSet
from sweep.progress import progress_bar
from sweep.reporting.console import (
    overall_table,
    print_calibration,
    print_evaluation,
    print_leaderboard,
    summary_line,
)
from sweep.reporting.logs import SUMMARY, ConsoleFilter, ConsoleFormatter, set_verbosity


@pytest.fixture(scope="module")
def evaluation():
    """Ten answerable questions with their relevant document at rank 1, 2, ... (a spread to
    resample) and two unanswerable ones, one of which gets nothing."""
    relevant = {f"q{i}": {f"d{i}": 1} for i in range(10)} | {"u0": {}, "u1": {}}
    results = {f"q{i}": [f"noise{j}" for j in range(i % 4)] + [f"d{i}"] for i in range(10)} | {"u0": ["noise0"]}
    return score(golden_of(relevant), ranked(results))


def test_the_summary_line_has_the_objective_with_the_overall_tables_interval(evaluation):
    line = summary_line(evaluation, "ndcg_at_10", {"latency/search_ms_p50": 8.46}, 12.4)
    console = Console(file=io.StringIO(), width=200)
    console.print(overall_table(evaluation))
    [row] = [r for r in console.file.getvalue().splitlines() if "│ ndcg_at_10 " in r]
    mean, interval = re.search(r"│ +([\d.]+) │ +(\[[\d., ]+\]) │", row).groups()
    assert line.startswith(f"ndcg_at_10 {mean} {interval}, ")  # the table's own numbers
    mean = evaluation.mean
    assert line.endswith(
        f", recall_at_5 {mean['recall_at_5']:.4f}, mrr {mean['mrr']:.4f}, abstain/correct_rate 0.5000, "
        "latency p50 8.5 ms, 12 s"
    )  # no context metrics here (no chunks): left out, not shown as missing
    abstaining = summary_line(evaluation, "abstain/correct_rate", {}, 3.0)
    assert abstaining.startswith("abstain/correct_rate 0.5000, recall_at_5 ") and abstaining.endswith(", 3 s")


@pytest.fixture
def console_handlers():
    """A console and a log file on the root logger, as Hydra makes them for a job; the logging
    state set_verbosity changes is put back afterwards."""
    from transformers.utils import logging as transformers_logging  # here: collecting needs no transformers

    root = logging.getLogger()
    named = {name: logging.getLogger(name).level for name in ("sweep", "hydra", SUMMARY)}
    level, bars = root.level, transformers_logging.is_progress_bar_enabled()
    console, log_file = logging.StreamHandler(io.StringIO()), logging.FileHandler("/dev/null")
    root.addHandler(console)
    root.addHandler(log_file)
    yield console, log_file
    root.removeHandler(console)
    root.removeHandler(log_file)
    log_file.close()
    root.setLevel(level)
    for name, old in named.items():
        logging.getLogger(name).setLevel(old)
    (transformers_logging.enable_progress_bar if bars else transformers_logging.disable_progress_bar)()


def test_the_tables_split_by_source_once_a_question_is_generated(evaluation):
    printed = io.StringIO()
    print_evaluation(evaluation, Console(file=printed, width=200))
    assert "Per question type" in printed.getvalue() and "Per question source" not in printed.getvalue()
    golden = evaluation.golden
    mixed = GoldenSet(
        tuple(replace(q, source="synthetic") if q.id in ("q1", "q2", "u1") else q for q in golden), source="g"
    )
    printed = io.StringIO()
    print_evaluation(score(mixed, evaluation.run), Console(file=printed, width=200))
    table = printed.getvalue().split("Per question source")[1]
    assert "human" in table and "synthetic" in table


def test_each_verbosity_sets_loggers_console_and_bars(console_handlers):
    from transformers.utils import logging as transformers_logging

    console, log_file = console_handlers
    set_verbosity("quiet")
    assert logging.getLogger().level == logging.WARNING  # sentence-transformers shows no "Batches" bars
    assert logging.getLogger("sweep").level == logging.WARNING and logging.getLogger(SUMMARY).level == logging.INFO
    assert not transformers_logging.is_progress_bar_enabled()  # no "Loading weights" bars
    assert progress_bar(range(3)).disable is True
    assert [type(f) for f in console.filters] == [ConsoleFilter] and isinstance(console.formatter, ConsoleFormatter)
    assert log_file.filters == [] and not isinstance(log_file.formatter, ConsoleFormatter)  # the log keeps it all
    set_verbosity("normal")  # a second job of the sweep: still one filter
    assert logging.getLogger("sweep").level == logging.INFO and logging.getLogger("hydra").level == logging.INFO
    assert len(console.filters) == 1 and not console.filters[0].libraries
    set_verbosity("verbose")
    assert logging.getLogger().level == logging.INFO and transformers_logging.is_progress_bar_enabled()
    assert console.filters[0].libraries
    with pytest.raises(InputError, match=r"^verbosity='loud': must be one of quiet, normal, verbose$"):
        set_verbosity("loud")


@pytest.mark.slow  # a process of its own, where transformers is not imported yet
def test_bars_are_set_before_transformers_is_imported_and_it_follows():
    code = (
        "import sys; from sweep.reporting.logs import set_verbosity; set_verbosity('normal'); "
        "print('transformers' in sys.modules); from transformers.utils import logging; "
        "print(logging.is_progress_bar_enabled()); set_verbosity('verbose'); print(logging.is_progress_bar_enabled())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False", "True"]  # not imported for it; no bars, then bars


@pytest.mark.parametrize("libraries", [False, True])
def test_a_warning_reaches_the_console_once_and_a_librarys_lines_only_from_warning_up(libraries):
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ConsoleFilter(libraries=libraries))
    handler.setFormatter(ConsoleFormatter("%(message)s"))
    ours, library = logging.getLogger(f"sweep.test_console.{libraries}"), logging.getLogger(f"lib.{libraries}")
    for logger in (ours, library):
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)  # as bm25s sets its own
        logger.propagate = False
    try:
        for run in (1, 2, 3):
            ours.warning(
                "%d of 128 questions are below the floor (%s)", 120 + run, libraries, extra={"once": f"t{libraries}"}
            )
            ours.warning("the same text in every run (%s)", libraries)
            ours.info("run %d: its summary", run)
            ours.error("run %d failed", run)
        library.debug("Building index from IDs objects")
        library.info("Loading SentenceTransformer model")
        library.warning("a library's warning (%s)", libraries)
    finally:
        for logger in (ours, library):
            logger.removeHandler(handler)
    chatter = ["Building index from IDs objects", "Loading SentenceTransformer model"] if libraries else []
    assert stream.getvalue().splitlines() == [
        f"warning: 121 of 128 questions are below the floor ({libraries})",
        f"warning: the same text in every run ({libraries})",
        "run 1: its summary", "error: run 1 failed",
        "run 2: its summary", "error: run 2 failed",
        "run 3: its summary", "error: run 3 failed",
        *chatter,
        f"warning: a library's warning ({libraries})",
    ]  # fmt: skip


SHARED = (
    "golden.path=/data/a/rather/long/path/to/the/golden/set/golden.jsonl corpus.path=/data/corpus.jsonl cache_dir=cache"
)


def finished(run_id: str, overrides: str, values: np.ndarray, **metrics: float) -> TrialRecord:
    """A finished configuration of a sweep, with its ndcg_at_10 per question (and `metrics`)."""
    qids = [f"q{i}" for i in range(len(values))]
    per_query = pd.DataFrame({"qid": qids, "question": qids, "type": "how-to", "ndcg_at_10": values})
    return TrialRecord(
        run_id, {}, tuple(overrides.split()), metrics={"latency/search_ms_p50": 3.0, **metrics},
        tables={"per_query": per_query}, run_id=run_id, status="FINISHED",
    )  # fmt: skip


def printed_leaderboard(runs: list[TrialRecord], width: int = 120) -> list[str]:
    printed = io.StringIO()
    print_leaderboard(build("ndcg_at_10", runs), Console(file=printed, width=width))
    return printed.getvalue().splitlines()


def rows_of(lines: list[str], start: str) -> list[list[str]]:
    """The table rows whose config starts with `start`, as their cells (the table has no vertical rules:
    cells are two spaces or more apart)."""
    return [re.split(r"\s{2,}", line.strip()) for line in lines if line.startswith(f" {start}")]


def test_the_leaderboard_names_the_shared_overrides_once_and_each_row_by_what_varies():
    rng = np.random.default_rng(3)
    base = rng.uniform(0.2, 0.9, 40)
    runs = [
        finished(f"r{i}", f"model={model} chunk={chunk} {SHARED}", np.clip(base + shift, 0, 1))
        for i, (model, chunk, shift) in enumerate(
            [("bm25", 256, 0.0), ("bm25", 512, 0.02), ("tfidf", 256, -0.1), ("tfidf", 512, -0.05)]
        )
    ]
    lines = printed_leaderboard(runs)
    assert lines[0] == f"Every configuration has: {SHARED}"
    rows = rows_of(lines, "model=")
    assert [row[0] for row in rows] == [
        "model=bm25 chunk=512",
        "model=bm25 chunk=256",
        "model=tfidf chunk=512",
        "model=tfidf chunk=256",
    ]  # one line each: nothing wraps at 120 columns
    assert "\n".join(lines).count("golden.path") == 1 and max(map(len, lines[1:-1])) <= 120
    assert "status" not in "\n".join(lines) and "truncated" not in "\n".join(lines)  # all finished; no model cuts


def test_each_configurations_truncated_share_is_a_column_and_those_over_10_percent_are_named():
    base = np.random.default_rng(4).uniform(0.2, 0.9, 40)
    shares = {256: 0.5339, 512: 0.824, 128: 0.004, 64: 0.0}
    runs = [
        finished(f"r{chunk}", f"chunk={chunk} index=flat", np.clip(base - chunk / 5000, 0, 1), **{TRUNCATED: share})
        for chunk, share in shares.items()
    ]
    lines = printed_leaderboard(runs)
    assert [(row[0], row[-1]) for row in rows_of(lines, "chunk=")] == [
        ("chunk=64", "0%"),
        ("chunk=128", "<1%"),
        ("chunk=256", "53%"),
        ("chunk=512", "82%"),
    ]  # the last column, best first; named by what varies
    assert lines[-1] == (
        "warning: in 2 of 4 configurations more than 10% of chunks are longer than the model's token limit and "
        "truncated when embedded (their end is never searched, so the scores measure the truncation as well as the "
        "setting): chunk=256 53%, chunk=512 82%; see docs/commands.md#warnings"
    )
    runs[0] = replace(runs[0], metrics={**runs[0].metrics, TRUNCATED: 0.1})  # chunk=256: 10% is not over 10%
    assert printed_leaderboard(runs)[-1].startswith("warning: in 1 of 4 configurations more than 10% of chunks")
    assert printed_leaderboard(runs)[-1].endswith("setting): chunk=512 82%; see docs/commands.md#warnings")


def test_the_status_column_appears_when_a_configuration_did_not_finish():
    base = np.random.default_rng(5).uniform(0.2, 0.9, 40)
    runs = [finished("r1", "chunk=256", base), finished("r2", "chunk=512", base - 0.01)]
    runs.append(replace(finished("r3", "chunk=1024", base), status="FAILED", tables={}, metrics={}))
    lines = printed_leaderboard(runs)
    assert [(row[0], row[-1]) for row in rows_of(lines, "chunk=")] == [
        ("chunk=256", "FINISHED"),
        ("chunk=512", "FINISHED"),
        ("chunk=1024", "FAILED"),
    ]


def test_the_worst_questions_are_those_below_the_median(evaluation):
    printed = io.StringIO()
    print_evaluation(evaluation, Console(file=printed, width=200), per_type=False)
    text = printed.getvalue()
    assert "Worst questions by ndcg_at_10 (below the median, 0.6309)" in text
    rows = [line.split("│")[1:3] for line in text.splitlines() if re.match(r"│ q\d ", line)]
    assert [(qid.strip(), value.strip()) for qid, value in rows] == [
        ("q3", "0.4307"),
        ("q7", "0.4307"),
        ("q2", "0.5000"),
        ("q6", "0.5000"),
    ]  # not q1, at the median, nor the perfect ones
    assert "noise0:?, noise1:?, noise2:?, d3:1" in text and ":0" not in text  # unjudged, not judged not relevant


@pytest.mark.parametrize(
    ("suggested", "printed"), [(0.12345678901234567, "0.1234"), (0.57, "0.5700"), (-0.25, "-0.2500")]
)
def test_the_suggested_threshold_prints_at_4_decimals_rounded_down(suggested, printed):
    at = {ABSTAIN_CORRECT: 0.5, ABSTAIN_FALSE: 0.125, "recall_at_5": 0.8}
    out = io.StringIO()
    print_calibration(Calibration("recall_at_5", pd.DataFrame(), suggested, 0.6875, at), Console(file=out, width=80))
    assert out.getvalue() == (
        f"Abstention: suggested abstain.min_score={printed} (balanced accuracy 0.688): unanswerable abstaining "
        "50.0%, answerable abstaining 12.5%, recall_at_5 0.8000\n"
    )


@pytest.mark.slow  # the README's sweep: MiniLM embeds the bundled corpus at two chunk sizes
def test_the_readmes_sweep_shows_each_chunk_sizes_truncation_in_a_leaderboard_of_120_columns(tmp_path):
    result = sweep(tmp_path, KB, "-m", "chunk=256,512", "index=flat,hnsw")  # printed 140 columns wide
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    board = lines[next(i for i, line in enumerate(lines) if line.startswith("Leaderboard by ")) :]
    board = board[: next(i for i, line in enumerate(board) if line.startswith("with 128 answerable questions"))]
    rows = rows_of(board, "chunk=")
    assert sorted((row[0], row[-1]) for row in rows) == [
        ("chunk=256 index=flat", "53%"),
        ("chunk=256 index=hnsw", "53%"),
        ("chunk=512 index=flat", "82%"),
        ("chunk=512 index=hnsw", "82%"),
    ]  # each configuration's share of chunks longer than MiniLM's 256 tokens, one line per row
    assert max(map(len, board)) <= 120
    [warning] = [line for line in lines if line.startswith("warning: in 4 of 4 configurations more than 10%")]
    assert warning.endswith(": " + ", ".join(f"{row[0]} {row[-1]}" for row in rows) + "; see docs/commands.md#warnings")
