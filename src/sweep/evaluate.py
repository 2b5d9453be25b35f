"""`python -m sweep.evaluate QRELS RUN`: score any system's results against a golden set.

QRELS: a golden set (JSONL, YAML, BEIR folder) or TREC qrels. RUN: a TREC run
(`qid Q0 docid rank score tag`) or JSONL (`{"id": qid, "results": [[docid, score], ...]}`).
Bad input prints one line naming the file, line and problem, and exits with code 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Sequence

from sweep.errors import InputError, exit_2_on_bad_input
from sweep.golden import load_golden
from sweep.metrics import DEFAULT_METRICS, Evaluation, score, valid_names
from sweep.runs import Run


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


def to_json(evaluation: Evaluation, per_query: bool, per_type: bool) -> dict:
    mean = evaluation.mean | (evaluation.type_means() if per_type else {})
    out: dict = {"mean": _finite(mean)}
    if per_query:
        out["per_query"] = {}
        for qid, row in evaluation.per_query.iterrows():
            if row["answerable"]:
                values = {name: row[name] for name in evaluation.metrics}
            else:
                values = {"abstain/correct": row["abstained"]}
            out["per_query"][qid] = _finite(values)
    return out


def _finite(values: dict) -> dict:
    """JSON has no NaN: undefined values (e.g. a rate over zero questions) become null."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in values.items()}


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
    try:
        golden = load_golden(args.qrels, split=args.split)
        run = Run.read(args.run)
    except OSError as error:  # a file that exists but cannot be read
        raise InputError(str(error)) from None
    evaluation = score(golden, run, args.metrics, relevance_level=args.relevance_level, gain=args.gain)
    if args.json:
        json.dump(to_json(evaluation, args.per_query, args.per_type), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        from sweep.report import print_evaluation  # rich and scipy only for the readable report

        print_evaluation(evaluation, per_query=args.per_query, worst=args.worst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
