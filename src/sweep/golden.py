"""`python -m sweep.golden diff OLD NEW` and `check GOLDEN --corpus PATH`: what changed between two versions of a golden set, and where one no longer fits its corpus.

    python -m sweep.golden diff OLD NEW [--json]
    python -m sweep.golden check GOLDEN --corpus PATH [--json] [--corpus-ids path|stem]

OLD, NEW and GOLDEN are golden sets in any format `load_golden` reads, or `run:<id>`: the golden
file the MLflow run `<id>` was scored on, as the run stored it (in the store MLFLOW_TRACKING_URI
names, default sqlite:///mlflow.db). Each is read without a corpus, evidence as written.

`diff` prints a line of counts, then one line per change (`sweep.formats.golden_diff`): questions
added, removed and reworded, grades changed, evidence added, removed and moved, and a question's
type, filters, source, status, tags and metadata changed; it exits 0. `check` reports every
judged document the corpus no longer has, every evidence excerpt or span no longer found in its
document, and every document whose text changed since it was graded (`sweep.formats.drift`); it
exits 1 when it found any, 0 when none. Bad input is one `error:` line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from sweep.errors import InputError, exit_2_on_bad_input
from sweep.formats.corpus import ID_SCHEMES, load_corpus
from sweep.formats.drift import find_drift
from sweep.formats.golden import GoldenSet, load_golden
from sweep.formats.golden_diff import diff_golden

RUN = "run:"  # OLD, NEW or GOLDEN naming the golden file a run was scored on
EXIT_DRIFT = 1


def read_golden(name: str) -> GoldenSet:
    """The golden set `name` names, read without a corpus: a file or folder, or `run:<id>`, the
    copy that run stored (named `run:<id>` in what is printed)."""
    if not name.startswith(RUN):
        return load_golden(name, warn=False)
    from sweep.tracking.reading import golden_copy, logged_run  # MLflow only for a run

    with golden_copy(logged_run(name.removeprefix(RUN))) as path:
        qrels = sorted(path.glob("qrels/*.tsv")) if path.is_dir() else []  # a BEIR folder: its one split
        golden = load_golden(path, split=qrels[0].stem if qrels else "test", warn=False)
    return GoldenSet(golden.questions, source=name)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep.golden", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    diff = commands.add_parser("diff", help="what changed from OLD to NEW")
    diff.add_argument("old", metavar="OLD", help=f"a golden file, or {RUN}<run id>")
    diff.add_argument("new", metavar="NEW", help=f"a golden file, or {RUN}<run id>")
    diff.add_argument("--json", action="store_true", help="print JSON")
    check = commands.add_parser("check", help="where GOLDEN no longer fits the corpus (drift)")
    check.add_argument("golden", metavar="GOLDEN", help=f"a golden file, or {RUN}<run id>")
    check.add_argument("--corpus", required=True, help="the corpus: JSON Lines, a BEIR folder or a folder of documents")
    check.add_argument(
        "--corpus-ids", choices=ID_SCHEMES, default="path", help="a folder's document ids (default %(default)s)"
    )
    check.add_argument("--json", action="store_true", help="print JSON")
    return parser


@exit_2_on_bad_input
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "diff":
        found = diff_golden(read_golden(args.old), read_golden(args.new))
    else:
        if not Path(args.corpus).exists():
            raise InputError(f"--corpus {args.corpus}: no such file or folder")
        found = find_drift(read_golden(args.golden), load_corpus(args.corpus, ids=args.corpus_ids))
    if args.json:
        json.dump(found.record(), sys.stdout, indent=1, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print("\n".join(found.lines()))
    return EXIT_DRIFT if args.command == "check" and found.problems else 0


if __name__ == "__main__":
    sys.exit(main())
