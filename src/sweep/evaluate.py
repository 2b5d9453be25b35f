"""`python -m sweep.evaluate QRELS RUN`: score any system's results against a golden set.

QRELS: a golden set (JSONL, YAML, BEIR folder) or TREC qrels. RUN: a TREC run
(`qid Q0 docid rank score tag`) or JSONL (`{"id": qid, "results": [[docid, score], ...]}`).
Bad input prints one line naming the file, line and problem, and exits with code 2.

With `--json`, TREC qrels and a TREC run (what other tools hand a scorer) are read in columns
(`sweep.formats.trec`) and scored (`sweep.evaluation.trec_columns.score_columns`) without pandas,
so the process starts quickly. Other formats and the readable report go through pandas
(`load_golden`, `Run`, `score`), which score with the same `score_columns`. This module parses
the arguments, calls those, and prints.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from collections.abc import Sequence
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING

PR_SET_THP_DISABLE = 41  # linux/prctl.h


def without_huge_pages() -> None:
    """No transparent huge pages for this process (Linux; elsewhere, or on a kernel before 3.15,
    nothing changes). pyarrow's allocator and numpy ask for them; where the kernel compacts memory
    to find each one, the command's system time swung from 0.1 s to 0.8 s, and a command that reads
    its files once gains nothing from them (figures: docs/benchmarks.md, the whole process)."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)


if __name__ == "__main__":  # the command (an import of its functions changes nothing)
    # numpy's OpenBLAS starts a thread per core when numpy is imported, and they spin for a while:
    # some 60 ms of CPU in a command that multiplies no matrix. A setting of the user's stands.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    without_huge_pages()  # before numpy and pyarrow allocate

from sweep.errors import InputError, exit_2_on_bad_input  # noqa: E402 (numpy comes with these)
from sweep.evaluation.measures import warn_unknown_queries  # noqa: E402
from sweep.evaluation.registry import DEFAULT_METRICS, valid_names  # noqa: E402
from sweep.evaluation.trec_columns import Judgments, Scores, score_columns  # noqa: E402
from sweep.formats.lines import warn_if_unbalanced  # noqa: E402
from sweep.formats.trec import TREC_QRELS_COLUMNS, Qrels, TrecRun, is_trec_file, read_qrels, read_run  # noqa: E402

if TYPE_CHECKING:
    from sweep.evaluation import Evaluation
    from sweep.formats.golden_set import GoldenSet
    from sweep.formats.runs import Run

log = logging.getLogger(__name__)


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
    parser.add_argument(
        "--condensed",
        action="store_true",
        help="score each ranking without its unjudged documents (trec_eval -J); abstention and judged_at_k "
        "still see the ranking as retrieved",
    )
    parser.add_argument("--split", default="test", help="qrels split of a BEIR folder (default test)")
    parser.add_argument("--per-query", action="store_true", help="also report every question")
    parser.add_argument("--per-type", action="store_true", help="JSON: add type/<type>/<metric> means")
    parser.add_argument("--worst", type=int, default=5, metavar="N", help="worst questions to show (default 5)")
    parser.add_argument("--json", action="store_true", help='print {"mean": ..., "per_query": ...}')
    return parser


def to_json(scores: Scores, per_query: bool, per_type: bool) -> dict:
    """{"mean": ..., "per_query": ...}: means as `Evaluation.mean` has them, type means as its `type_means`."""
    out: dict = {"mean": _finite(scores.means(per_type))}
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


def read_trec(qrels_path: Path, run_path: Path) -> tuple[Qrels, TrecRun] | None:
    """TREC qrels and a TREC run in columns, the two read at once (pyarrow parses outside the GIL,
    so the qrels take no time of their own); None where either is another format (or cannot be
    read), for `load_golden` and `Run.read` to read or to name the problem. A bad line is an
    InputError, the qrels' first, as `evaluate` reports it."""
    if not (is_trec_file(qrels_path, len(TREC_QRELS_COLUMNS)) and is_trec_file(run_path)):
        return None
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        reading_run = pool.submit(read_run, run_path)
        qrels = read_qrels(qrels_path)
        run = reading_run.result()
    return qrels, run


def score_trec(qrels: Qrels, run: TrecRun, args: argparse.Namespace) -> Scores:
    """What `evaluate` gives for the same TREC files, with the warnings `load_golden` and `score` give."""
    golden = Judgments.of_qrels(qrels)
    qrels_name, run_name = str(Path(args.qrels)), str(Path(args.run))
    warn_if_unbalanced(qrels_name, len(golden.ids), int((~golden.answerable).sum()))
    scores = score_columns(
        golden, run, args.metrics, relevance_level=args.relevance_level, gain=args.gain, condensed=args.condensed
    )
    warn_unknown_queries(run_name, qrels_name, scores.unknown_queries)
    return scores


# ---------------------------------------------------------------- any input, through pandas


def evaluate(args: argparse.Namespace) -> Evaluation:
    """Any input, through pandas (imported here: TREC files scored with --json need none of it)."""
    from sweep.evaluation import score
    from sweep.formats.golden import load_golden
    from sweep.formats.runs import Run

    try:
        golden = load_golden(args.qrels, split=args.split)
        run = Run.read(args.run)
    except OSError as error:  # a file that exists but cannot be read
        raise InputError(str(error)) from None
    warn_if_split(golden, run, args.run)
    return score(
        golden, run, args.metrics, relevance_level=args.relevance_level, gain=args.gain, condensed=args.condensed
    )


def warn_if_split(golden: GoldenSet, run: Run, run_path: str) -> None:
    """One warning when relevant documents whose ids hold whitespace are none of them in a TREC
    run: another tool's run that wrote them unencoded has had each split in two fields (as
    trec_eval would split it too)."""
    from sweep.formats.columns import trec_id
    from sweep.formats.lines import NOT_IN_IDS, sniff

    spaced = sorted({doc for q in golden for doc in q.relevant if NOT_IN_IDS.search(doc)})
    if not spaced or sniff(Path(run_path)) != "columns" or set(spaced) & set(run.frame["docid"].cat.categories):
        return
    log.warning(
        "%s: %d relevant document %s whitespace (%r) and the run retrieves none of them: a TREC run carries such "
        "an id percent-encoded (%r), as run.trec does; written as is, its fields are split",
        run_path, len(spaced), "id holds" if len(spaced) == 1 else "ids hold", spaced[0], trec_id(spaced[0]),
    )  # fmt: skip


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
        trec = read_trec(Path(args.qrels), Path(args.run))
    except OSError as error:
        raise InputError(str(error)) from None
    scores = score_trec(*trec, args) if trec is not None else evaluate(args).scores
    json.dump(to_json(scores, args.per_query, args.per_type), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    code = main()
    # Nothing of ours needs cleaning up, and tearing down numpy's and pyarrow's modules and the
    # arrays of a large run took 50-80 ms, a tenth of the whole command: leave it to the OS.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
