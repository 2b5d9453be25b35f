"""`python -m sweep.pool`: a labelling queue of the documents several runs retrieved that nobody judged.

    python -m sweep.pool (--sweep PARENT_RUN_ID|latest | RUN_ID ...) [--depth 10] [--golden PATH]
                         [--corpus PATH] [--experiment NAME] --output QUEUE.jsonl

For each question of the golden set, the union of the runs' top `--depth` documents less every
document the golden set already judges (`sweep.labelling.pooling`), written atomically as a queue
(`sweep.labelling.queue`) that `python -m sweep.label GOLDEN --pool QUEUE` serves for grading.
`--sweep` pools the finished children of a sweep (its parent run's id, or `latest`: the sweep
started last in `--experiment`); others are named on stderr. The golden file and the corpus
default to the ones the runs were scored on. Bad input, and an `--output` that cannot be written
(a full disk, a read-only folder), is one `error:` line and exit code 2, and nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from sweep.arguments import positive_int
from sweep.errors import InputError, exit_2_on_bad_input
from sweep.labelling.pooling import build_pool, runs_to_pool
from sweep.tracking.reading import LATEST, LoggedRun
from sweep.tracking.store import DEFAULT_EXPERIMENT

DEFAULT_DEPTH = 10


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep.pool", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="*", metavar="RUN_ID", help="runs to pool (finished evaluations)")
    parser.add_argument(
        "--sweep", metavar="PARENT_RUN_ID", help=f"pool the finished children of this sweep (`{LATEST}`: the last one)"
    )
    parser.add_argument(
        "--experiment", default=DEFAULT_EXPERIMENT, help="where `--sweep latest` looks (default %(default)r)"
    )
    parser.add_argument(
        "--depth", type=positive_int, default=DEFAULT_DEPTH, help="top documents per run (default %(default)s)"
    )
    parser.add_argument("--golden", help="the golden file (default: the one the runs were scored on)")
    parser.add_argument("--corpus", help="the corpus (default: the one the runs searched, tag data.corpus)")
    parser.add_argument("--output", required=True, metavar="QUEUE.jsonl", help="the labelling queue to write")
    return parser


def _skipping(child: LoggedRun) -> None:
    print(f"note: skipping {child.run_id} ({child.overrides}): {child.status}", file=sys.stderr)


@exit_2_on_bad_input
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if (args.sweep is None) == (not args.runs):
        raise InputError("give either --sweep PARENT_RUN_ID or one or more RUN_IDs")
    output = Path(args.output)
    if not output.parent.is_dir():
        raise InputError(f"--output {output}: no such folder {output.parent}")
    if output.is_dir():
        raise InputError(f"--output {output}: is a folder; give the queue file to write")
    runs = runs_to_pool(args.sweep, args.runs, args.experiment, _skipping)
    pool = build_pool(runs, args.depth, args.golden, args.corpus)
    for source in (pool.golden.source, pool.corpus.source):
        if output.resolve() == Path(source).resolve():
            raise InputError(f"--output {output}: is the golden set or the corpus; write the queue elsewhere")
    try:
        pool.write(output)  # atomically: a failed write leaves no file, nor a temporary one
    except OSError as error:  # a full disk, a read-only folder
        raise InputError(f"--output {output}: cannot write it ({error.strerror}); nothing was written") from None
    print("\n".join(pool.summary()))
    print(f"wrote {output}; label it: python -m sweep.label {pool.golden.source} --pool {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
