"""`python -m sweep.judge`: an LLM judge for pooled candidates, its agreement with people, and whether the sweep's decision survives it.

    python -m sweep.judge grade QUEUE --golden GOLDEN --base-url URL --model NAME [--api-key-env VAR]
                                [--max-cost-usd X] [--prompt FILE] [--calibration N] [--seed S]
                                --output JUDGMENTS
    python -m sweep.judge agree GOLDEN JUDGMENTS [--json]
    python -m sweep.judge audit SWEEP --judgments JUDGMENTS [--golden GOLDEN] [--json]

`grade` asks any OpenAI-compatible chat model for a 0-3 grade of every (question, document) pair
of a `sweep.pool` queue (UMBRELA's prompt by default) and writes one JSON line per pair
(`sweep.formats.judgments`); it never writes the golden file. `agree` measures the judge against
people's grades on the pairs both graded; `audit` scores every run of a sweep again from its stored
ranking with people's grades and with the holes filled by the judge, and says whether the
leaderboard, the best configuration, the tied set and each pair's `sweep.check` verdict survive.
Bad input is one `error:` line and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from sweep.arguments import add_chat_options, chat_client, check_chat_options, positive_int
from sweep.errors import InputError, exit_2_on_bad_input
from sweep.formats.corpus import load_corpus
from sweep.formats.golden import load_golden
from sweep.formats.judgments import JudgeGrade, write_judgments
from sweep.labelling.grading import DEFAULT_PASSAGE_TOKENS, calibration_pairs, grade_pairs, load_template, pool_pairs
from sweep.labelling.queue import load_queue, queue_corpus


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep.judge", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    _add_grade(commands.add_parser("grade", help="grade a pool's (question, document) pairs with an LLM"))
    _add_agree(commands.add_parser("agree", help="the judge's agreement with people's grades"))
    _add_audit(commands.add_parser("audit", help="does a sweep's decision survive the judge's grades?"))
    return parser


# ---------------------------------------------------------------- grade


def _add_grade(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", metavar="QUEUE", help="a labelling queue written by python -m sweep.pool")
    parser.add_argument("--golden", required=True, help="the golden set the pool was built from")
    parser.add_argument("--corpus", help="the corpus (default: the one the queue names)")
    add_chat_options(parser, "judge")
    parser.add_argument("--prompt", help="a prompt file with {query} and {passage} (default: UMBRELA's)")
    parser.add_argument(
        "--calibration", type=int, default=0, metavar="N", help="also grade N pairs people graded, drawn uniformly"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="the calibration draw's and the model's seed (default %(default)s)"
    )
    parser.add_argument(
        "--max-passage-tokens",
        type=positive_int,
        default=DEFAULT_PASSAGE_TOKENS,
        help="documents longer than this are cut there, and the judgment says so (default %(default)s)",
    )
    parser.add_argument("--output", required=True, metavar="JUDGMENTS", help="the judgments file to write (.jsonl)")


def _grade(args: argparse.Namespace) -> int:
    output = Path(args.output)
    if not output.parent.is_dir():
        raise InputError(f"--output {output}: no such folder {output.parent}")
    if output.resolve() in {Path(args.golden).resolve(), Path(args.queue).resolve()}:
        raise InputError(f"--output {output}: is the golden set or the queue; the judge never writes those")
    if args.calibration < 0:
        raise InputError(f"--calibration {args.calibration}: must be >= 0")
    check_chat_options(args)
    template = load_template(args.prompt)
    source, ids = (args.corpus, "path") if args.corpus else queue_corpus(Path(args.queue))
    corpus = load_corpus(source, ids=ids)
    golden = load_golden(args.golden, corpus, warn=False)
    pairs = pool_pairs(load_queue(Path(args.queue), corpus), golden)
    pooled = {(pair.qid, pair.doc) for pair in pairs}
    pairs += [p for p in calibration_pairs(golden, args.calibration, args.seed) if (p.qid, p.doc) not in pooled]
    chat = chat_client(args)
    grades = grade_pairs(pairs, golden, corpus, chat, template, args.max_passage_tokens)
    try:
        write_judgments(output, grades)
    except OSError as error:
        raise InputError(f"--output {output}: cannot write it ({error.strerror}); nothing was written") from None
    print("\n".join(_graded_lines(grades, chat.stats("judge"), template.source)))
    print(f"wrote {output}; compare with people: python -m sweep.judge agree {args.golden} {output}")
    return 0


def _graded_lines(grades: Sequence[JudgeGrade], stats: dict[str, float], prompt: str) -> list[str]:
    """What the judge did: pairs and grades, missing and cut ones, requests, tokens and cost."""
    counts = Counter(g.grade for g in grades if g.grade is not None)
    missing = [g for g in grades if g.grade is None]
    calibration = sum(g.calibration for g in grades)
    lines = [
        f"graded {len(grades) - len(missing)} of {len(grades)} pairs ({calibration} for calibration) with "
        f"{grades[0].by if grades else 'no model'} (prompt: {prompt}): "
        + ", ".join(f"grade {grade}: {counts[grade]}" for grade in sorted(counts)),
        f"requests {stats['judge/requests']:.0f} sent, {stats['judge/cached']:.0f} from the cache; tokens "
        f"{stats['judge/prompt_tokens']:.0f} in, {stats['judge/completion_tokens']:.0f} out"
        + (f"; cost ${stats['cost/judge_usd']:.4f}" if "cost/judge_usd" in stats else ""),
    ]
    if missing:
        first = missing[0]
        lines.append(
            f"warning: {len(missing)} answers had no final score after a second ask and are recorded without a "
            f"grade, e.g. question {first.qid!r}, document {first.doc!r}: {' '.join((first.raw or '').split())[:80]!r}"
        )
    cut = [g for g in grades if g.cut_at_tokens is not None]
    if cut:
        lines.append(f"note: {len(cut)} documents were cut at {cut[0].cut_at_tokens} tokens (--max-passage-tokens)")
    return lines


# ---------------------------------------------------------------- agree


def _add_agree(parser: argparse.ArgumentParser) -> None:
    from sweep.evaluation.significance import SEED

    parser.add_argument("golden", metavar="GOLDEN", help="the golden file: people's grades")
    parser.add_argument("judgments", metavar="JUDGMENTS", help="the judge's file (python -m sweep.judge grade)")
    parser.add_argument("--seed", type=int, default=SEED, help="the bootstrap's seed (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of lines")


def _agree(args: argparse.Namespace) -> int:
    # imported here, as in `_audit`: `grade` needs neither scipy's statistics nor the reports
    import json

    from sweep.evaluation.agreement import judge_agreement
    from sweep.formats.golden import load_golden
    from sweep.formats.judgments import load_judgments, person_grades
    from sweep.reporting.judge_report import agreement_json, agreement_lines

    judged = load_judgments(args.judgments)
    people = person_grades(load_golden(args.golden, warn=False))
    agreement = judge_agreement(people, judged, seed=args.seed)
    if args.json:
        print(json.dumps({"golden": args.golden, "judgments": args.judgments} | agreement_json(agreement), indent=2))
        return 0
    print(f"{args.judgments}: the judge against people's grades in {args.golden}")
    print("\n".join(agreement_lines(agreement)))
    return 0


# ---------------------------------------------------------------- audit


def _add_audit(parser: argparse.ArgumentParser) -> None:
    from sweep.evaluation.significance import SEED
    from sweep.tracking.reading import LATEST
    from sweep.tracking.store import DEFAULT_EXPERIMENT

    parser.add_argument("sweep", metavar="SWEEP", help=f"the sweep's parent run id (`{LATEST}`: the last one)")
    parser.add_argument("--judgments", required=True, help="the judge's file (python -m sweep.judge grade)")
    parser.add_argument("--golden", help="people's grades (default: the golden file the sweep was scored on)")
    parser.add_argument(
        "--experiment", default=DEFAULT_EXPERIMENT, help=f"where `{LATEST}` looks (default %(default)r)"
    )
    parser.add_argument("--seed", type=int, default=SEED, help="the resampling's seed (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of lines")


def _audit(args: argparse.Namespace) -> int:
    # imported here: `grade` needs neither MLflow nor the scorer (MLflow alone takes seconds to import)
    import json
    import math

    from sweep.labelling.audit import GRADES, audit_sweep, log_audit
    from sweep.reporting.judge_report import agreement_json, agreement_lines, audit_json, audit_lines

    audit = audit_sweep(args.sweep, args.judgments, args.golden, args.experiment, seed=args.seed)
    logged = log_audit(audit)
    if args.json:
        found = {"sweep": audit.sweep_id, "golden": audit.golden, "judgments": audit.judgments}
        found["golden_the_sweep_scored_on"] = audit.same_golden
        found |= {"agreement": agreement_json(audit.judge), "filled_judgments": audit.filled}
        found |= audit_json(audit.boards, audit.against_people, GRADES)
        found["metrics"] = {key: value if math.isfinite(value) else None for key, value in audit.metrics().items()}
        print(json.dumps(found, indent=2))
        return 0
    print(f"sweep {audit.sweep_id}: scored again from its runs' stored rankings; golden {audit.golden}")
    if audit.same_golden is False:
        print(
            f"warning: {audit.golden} is not the golden set the sweep was scored on (its digest differs): "
            "'people' is the sweep scored again on the set as it is now, not the sweep's own leaderboard"
        )
    print(f"the judge ({audit.judgments}) filled {audit.filled} holes of the golden set")
    print("\n".join(audit_lines(audit.boards, audit.against_people, GRADES)))
    print("the judge against people's grades:")
    print("\n".join(f"  {line}" for line in agreement_lines(audit.judge)))
    print(f"logged judge/* metrics and {', '.join(logged)} to the sweep's parent run {audit.sweep_id}")
    return 0


COMMANDS = {"grade": _grade, "agree": _agree, "audit": _audit}


@exit_2_on_bad_input
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
