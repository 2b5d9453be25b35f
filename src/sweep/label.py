"""`python -m sweep.label GOLDEN --corpus CORPUS [--pool QUEUE] [--judgments FILE] [--port N] [--labeller NAME]`: a local web app to grow a golden set.

Serves http://127.0.0.1:PORT/ (this machine only; `--port 0` picks a free port) with Flask
(`sweep.labelling.app`): add and edit questions (text, type, filters), mark a question
unanswerable, grade documents 0 / 1 / 2 (buttons, or keys), see each pooled candidate's text with
the chunk a run retrieved highlighted, search the corpus for a document the pool missed, select
text in a document to record it as evidence, and watch the progress. `--pool` is a queue written
by `sweep.pool`; without `--corpus` the queue's corpus is used. GOLDEN is a JSON Lines file; it
is created with the first question. Every grade given or changed records who gave it
(`--labeller`, by default the user name this runs as) and when, in UTC. `--judgments`: a file
`python -m sweep.judge grade` wrote; each ungraded candidate the judge graded shows its grade as a
suggestion, which one key (`a`) accepts as the person's grade; nothing of it is written otherwise. Every change is saved atomically before the page hears
"saved", and a change made on a question another tab has changed since is refused
(`sweep.labelling.golden_file`); what each change means in the file: `sweep.labelling.changes`.

Bad input at the start (a malformed golden file, an id the corpus does not have, a malformed
queue or judgments file, a port in use) is one `error:` line and exit code 2, and nothing is written.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from sweep.errors import InputError, exit_2_on_bad_input
from sweep.formats.corpus import Corpus, load_corpus
from sweep.formats.judgments import load_judgments
from sweep.formats.provenance import LLM
from sweep.labelling.app import create_app, server
from sweep.labelling.golden_file import open_golden
from sweep.labelling.queue import Queue, load_queue, queue_corpus
from sweep.labelling.views import Judgments

DEFAULT_PORT = 8765


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep.label", description=__doc__.split("\n\n")[0])
    parser.add_argument("golden", metavar="GOLDEN", help="the golden set (.jsonl); created with the first question")
    parser.add_argument("--corpus", help="the corpus (default: the one the --pool queue names)")
    parser.add_argument(
        "--corpus-ids",
        choices=("path", "stem"),
        help="a folder corpus's document ids (default: the --pool queue's, else path)",
    )
    parser.add_argument("--pool", metavar="QUEUE", help="a labelling queue written by python -m sweep.pool")
    parser.add_argument(
        "--judgments",
        metavar="FILE",
        help="the judge's grades (python -m sweep.judge grade), shown as suggestions to accept or not",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="port on 127.0.0.1 (default %(default)s; 0: any)"
    )
    parser.add_argument(
        "--labeller", metavar="NAME", help="who grades: recorded with each grade (default: your user name)"
    )
    return parser


def labeller(name: str | None) -> str:
    """The person grading: `name`, else the user name this process runs as."""
    if name is None:
        try:
            name = getpass.getuser()
        except (KeyError, OSError):  # no login name and no passwd entry (a bare container)
            raise InputError("no user name to record with the grades: give --labeller NAME") from None
    if not name.strip() or name.startswith(LLM):
        raise InputError(f"--labeller {name!r}: expected a person's name, recorded as 'by' with each grade")
    return name.strip()


def judge_suggestions(path: Path, corpus: Corpus) -> Judgments:
    """The judgments file's grades by (question, document); a document the corpus does not have
    is an InputError (the judge graded another corpus's pool)."""
    judgments = {}
    for judged in load_judgments(path):
        if judged.doc not in corpus.by_id:
            raise InputError(
                f"{path}: question {judged.qid!r}: document {judged.doc!r} is not in the corpus {corpus.source} "
                "(judgments of another corpus's pool?)"
            )
        judgments[judged.pair] = judged
    return judgments


@exit_2_on_bad_input
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port {args.port}: expected 0 to 65535")
    person = labeller(args.labeller)
    pool = Path(args.pool) if args.pool else None
    if pool is not None and not pool.is_file():
        raise InputError(f"--pool {pool}: no such file")
    if args.corpus is None and pool is None:
        raise InputError("give the corpus with --corpus (or a --pool queue, which names it)")
    source, ids = (args.corpus, "path") if args.corpus else queue_corpus(pool)
    corpus = load_corpus(source, ids=args.corpus_ids or ids)
    golden_file = open_golden(Path(args.golden), corpus)
    queue = load_queue(pool, corpus) if pool is not None else Queue()
    judgments = judge_suggestions(Path(args.judgments), corpus) if args.judgments else None
    serving = server(create_app(golden_file, queue, person, judgments), args.port)
    suggesting = f", the judge's grades of {len(judgments)} pairs as suggestions" if judgments is not None else ""
    print(
        f"Labelling {golden_file.path} as {person}{suggesting} at http://127.0.0.1:{serving.server_address[1]}/ "
        "(every change is saved at once; Ctrl+C stops)",
        flush=True,
    )
    try:
        serving.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
