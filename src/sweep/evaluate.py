"""`python -m sweep.evaluate QRELS RUN`: score any system's results against a golden set.

QRELS: a golden set (JSONL, YAML, BEIR folder) or TREC qrels. RUN: a TREC run
(`qid Q0 docid rank score tag`) or JSONL (`{"id": qid, "results": [[docid, score], ...]}`).
Bad input prints one line naming the file, line and problem, and exits with code 2.

With `--json`, TREC qrels and a TREC run (what other tools hand a scorer) are read in columns
by pyarrow and scored by the numpy core, without pandas, so the process starts quickly. Other
formats, files the column reader does not take cleanly (`Run.read` and `load_golden` then read
them, or name the bad line) and the readable report go through pandas: `load_golden`, `Run`, `score`.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sweep.errors import InputError, exit_2_on_bad_input
from sweep.evaluation.measures import (
    DEFAULT_METRICS,
    RankedJudgments,
    abstention_rates,
    answerable_means,
    metric_values,
    select_metrics,
    type_means,
    valid_names,
    warn_unknown_queries,
)
from sweep.formats.records import (
    GRADE,
    MAX_GRADE,
    TREC_QRELS_COLUMNS,
    UNTYPED,
    Strings,
    first_line,
    index_in,
    read_columns,
    read_trec_run_columns,
    repeats_within,
    sniff,
    trec_order,
    warn_if_unbalanced,
)

if TYPE_CHECKING:
    from sweep.evaluation import Evaluation


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("qrels", help="golden set (.jsonl, .yaml, BEIR folder) or TREC qrels")
    parser.add_argument("run", help="TREC run file or JSONL results")
    parser.add_argument(
        "--metrics",
        help=f"comma-separated metric names (default: {','.join(DEFAULT_METRICS)} and abstention rates). "
        f"Valid: {valid_names()}, abstain/correct_rate, abstain/false_rate",
    )
    parser.add_argument(
        "--relevance-level", type=int, default=1, metavar="N", help="minimum grade that counts as relevant (default 1)"
    )
    parser.add_argument(
        "--gain", choices=["linear", "exponential"], default="linear", help="nDCG gain: grade (trec_eval) or 2^grade-1"
    )
    parser.add_argument("--split", default="test", help="qrels split of a BEIR folder (default test)")
    parser.add_argument("--per-query", action="store_true", help="also report every question")
    parser.add_argument("--per-type", action="store_true", help="JSON: add type/<type>/<metric> means")
    parser.add_argument("--worst", type=int, default=5, metavar="N", help="worst questions to show (default 5)")
    parser.add_argument("--json", action="store_true", help='print {"mean": ..., "per_query": ...}')
    return parser


@dataclass(frozen=True)
class Scores:
    """Every question's results, in golden order: what the JSON output reports."""

    qids: list[str]
    types: np.ndarray
    answerable: np.ndarray
    abstained: np.ndarray  # 1.0 for an empty result
    values: dict[str, np.ndarray]  # rank metric -> value per question, NaN for unanswerable questions
    abstain_metrics: tuple[str, ...]

    @classmethod
    def of(cls, evaluation: Evaluation) -> Scores:
        frame = evaluation.per_query
        return cls(
            frame.index.tolist(),
            frame["type"].to_numpy(),
            frame["answerable"].to_numpy(),
            frame["abstained"].to_numpy(),
            {name: frame[name].to_numpy() for name in evaluation.metrics},
            evaluation.abstain_metrics,
        )


def to_json(scores: Scores, per_query: bool, per_type: bool) -> dict:
    """{"mean": ..., "per_query": ...}: means as `Evaluation.mean` has them, type means as its `type_means`."""
    mean = answerable_means(scores.values, scores.answerable)
    mean |= abstention_rates(scores.abstained, scores.answerable, scores.abstain_metrics)
    if per_type:
        mean |= type_means(scores.types, scores.answerable, scores.abstained, scores.values, scores.abstain_metrics)
    out: dict = {"mean": _finite(mean)}
    if per_query:
        names = list(scores.values)
        rows = zip(*(scores.values[name].tolist() for name in names)) if names else repeat(())
        out["per_query"] = {
            qid: _finite(dict(zip(names, row)) if answerable else {"abstain/correct": abstained})
            for qid, answerable, abstained, row in zip(
                scores.qids, scores.answerable.tolist(), scores.abstained.tolist(), rows
            )
        }
    return out


def _finite(values: dict) -> dict:
    """JSON has no NaN: undefined values (e.g. a rate over zero questions) become null."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in values.items()}


# ---------------------------------------------------------------- TREC files without pandas


@dataclass(frozen=True)
class Qrels:
    """One row per judgment."""

    qid: Strings
    docid: Strings
    grade: np.ndarray


@dataclass(frozen=True)
class TrecRun:
    """Rows in trec_eval's order: each query's together, score descending, then docid descending."""

    qid: Strings
    docid: Strings
    score: np.ndarray


def is_columns_file(path: Path) -> bool:
    """Whether `path` is a file of whitespace-separated fields (by its extension and first line),
    as TREC qrels and runs are: the cheap test before `read_qrels` or `read_trec_run` parses it."""
    return path.is_file() and sniff(path) == "columns"


def may_be_trec_run(path: Path) -> bool:
    """False where `read_trec_run` surely returns None (a JSONL or YAML file, not a file): the fast
    path is not taken, so its qrels need not be parsed. A first line that cannot be read is left
    to `read_trec_run` to report, after the qrels, as it always was."""
    try:
        return is_columns_file(path)
    except (InputError, OSError):
        return True


def read_qrels(path: Path) -> Qrels | None:
    """TREC qrels (`qid iteration docid grade`) as `load_golden` reads them; None for another
    format or anything it would refuse or read otherwise (a bad line, a grade out of range, a
    document judged twice for a query)."""
    if not is_columns_file(path) or len(first_line(path).split()) != len(TREC_QRELS_COLUMNS):
        return None
    columns = read_columns(path, TREC_QRELS_COLUMNS, dict.fromkeys(TREC_QRELS_COLUMNS, "string"))
    if columns is None:
        return None
    grades = columns["grade"].values  # the distinct grades: a handful
    if not all(GRADE.fullmatch(grade) and abs(int(grade)) <= MAX_GRADE for grade in grades):
        return None
    qid, docid = columns["qid"], columns["docid"]
    if repeats_within(qid.codes, docid.codes, len(docid.distinct)):
        return None
    return Qrels(qid, docid, np.array([int(grade) for grade in grades], np.int64)[columns["grade"].codes])


def read_trec_run(path: Path) -> TrecRun | None:
    """A TREC run as `Run.read` reads it; None for another format, a file the column reader does
    not take, or a document listed twice for a query (`Run.read` warns and keeps the first)."""
    if not is_columns_file(path):
        return None
    columns = read_trec_run_columns(path)
    if columns is None:
        return None
    qid, docid, score = columns["qid"], columns["docid"], columns["score"]
    order = trec_order(qid.codes, score, docid.ranks)
    if order is not None:
        qid, docid, score = qid.take(order), docid.take(order), score[order]
    if repeats_within(qid.codes, docid.codes, len(docid.distinct)):
        return None
    return TrecRun(qid, docid, score)


def score_trec(qrels: Qrels, run: TrecRun, args: argparse.Namespace) -> Scores:
    """What `score` gives for the same files, computed by the numpy core."""
    golden_order = qrels.qid.sorted_codes()  # a TREC qrels golden set is in qid order
    n_questions = len(golden_order)
    row_of = np.empty(n_questions, np.int64)
    row_of[golden_order] = np.arange(n_questions)
    judged_query = row_of[qrels.qid.codes]
    answerable = np.zeros(n_questions, bool)
    answerable[judged_query[qrels.grade >= 1]] = True
    warn_if_unbalanced(Path(args.qrels), n_questions, int((~answerable).sum()))

    rank_metrics, abstain_metrics = select_metrics(args.metrics, has_unanswerable=not answerable.all())
    in_qrels = index_in(run.qid.distinct, qrels.qid.distinct)  # per distinct run query: its qrels code or -1
    unknown = [qid for qid, code in zip(run.qid.values, in_qrels.tolist()) if code < 0]
    warn_unknown_queries(str(Path(args.run)), str(Path(args.qrels)), unknown)
    ranked = RankedJudgments.join(
        n_questions,
        np.where(in_qrels >= 0, row_of[in_qrels], -1),
        run.qid.codes,
        run.docid.codes,
        run.score,
        judged_query,
        index_in(qrels.docid.distinct, run.docid.distinct)[qrels.docid.codes],
        qrels.grade,
        args.relevance_level,
        args.gain,
    )
    return Scores(
        [qrels.qid.values[code] for code in golden_order.tolist()],
        np.full(n_questions, UNTYPED),
        answerable,
        (ranked.n_retrieved == 0).astype(float),
        metric_values(ranked, rank_metrics, answerable),
        abstain_metrics,
    )


# ---------------------------------------------------------------- any input, through pandas


def evaluate(args: argparse.Namespace) -> Evaluation:
    """Any input, through pandas (imported here: the fast path needs none of it)."""
    from sweep.evaluation import score
    from sweep.formats.golden import load_golden
    from sweep.formats.runs import Run

    try:
        golden = load_golden(args.qrels, split=args.split)
        run = Run.read(args.run)
    except OSError as error:  # a file that exists but cannot be read
        raise InputError(str(error)) from None
    return score(golden, run, args.metrics, relevance_level=args.relevance_level, gain=args.gain)


class _OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


@exit_2_on_bad_input
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    if args.worst < 0:
        raise InputError(f"--worst {args.worst}: must be >= 0")
    if not args.json:
        from sweep.reporting.console import print_evaluation  # rich and scipy only for the readable report

        print_evaluation(evaluate(args), per_query=args.per_query, worst=args.worst)
        return 0
    try:
        qrels = read_qrels(Path(args.qrels)) if may_be_trec_run(Path(args.run)) else None
        run = read_trec_run(Path(args.run)) if qrels is not None else None
    except OSError as error:
        raise InputError(str(error)) from None
    scores = score_trec(qrels, run, args) if run is not None else Scores.of(evaluate(args))
    json.dump(to_json(scores, args.per_query, args.per_type), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
