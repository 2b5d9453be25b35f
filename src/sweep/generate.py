"""`python -m sweep.generate`: questions generated from a corpus by an LLM, filtered the way retrieval needs them, written as a golden file pending review.

    python -m sweep.generate --corpus PATH --questions N --base-url URL --model NAME [--api-key-env VAR]
                             [--max-cost-usd X] [--price-per-mtok P] [--output-price-per-mtok P]
                             [--unanswerable SHARE] [--judge-model NAME] [--seed S] [--prompt FILE]
                             [--top-k 20] [--cache-dir DIR] --output GENERATED

Samples passages of the corpus (seeded, spread over documents and over the values of a metadata
key, `--spread-by department`: a folder corpus's top folders), asks any OpenAI-compatible chat
model for a question and a verbatim quote of its evidence from each, and keeps a question only if
its evidence is in the passage, it does not copy the evidence, it is no near-duplicate of an
earlier one and BM25 finds its document in the top `--top-k` (`sweep.labelling.generation`,
`sweep.labelling.generation_filters`). `--unanswerable 0.15` asks that share for questions on the
corpus's topics that it does not answer; `--judge-model` has the judge grade BM25's top 10 of each.
GENERATED is a golden file (JSON Lines) of `source: synthetic`, `status: pending` questions,
which are not scored until a person reviews them (`python -m sweep.label`); the drops per reason
are printed and written beside it, in GENERATED's name with `.summary.json` for `.jsonl`.
Bad input is one `error:` line and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from sweep.arguments import add_chat_options, chat_client, check_chat_options, positive_int
from sweep.errors import InputError, exit_2_on_bad_input
from sweep.formats.corpus import load_corpus
from sweep.formats.files import write_text_atomically
from sweep.formats.golden import GoldenSet, save_golden
from sweep.labelling.generation import SPREAD_BY, Generated, generate_questions, judge_unanswered, load_prompt
from sweep.labelling.generation_filters import DUPLICATE_COSINE, JUDGED_TOP, MAX_EVIDENCE_SHARE, ROUND_TRIP_K
from sweep.labelling.grading import load_template

PREFIX = "generate"  # of the request and token counts (`generate/requests`, ...)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sweep.generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="the corpus: a JSON Lines file, a BEIR folder or a folder")
    parser.add_argument("--questions", required=True, type=positive_int, metavar="N", help="questions to ask for")
    add_chat_options(parser, "generate")
    parser.add_argument(
        "--unanswerable", type=float, default=0.0, metavar="SHARE", help="the share asked to be unanswerable (0 to 1)"
    )
    parser.add_argument("--judge-model", help="grade BM25's top 10 of each unanswerable question with this model")
    parser.add_argument("--seed", type=int, default=0, help="the sampling's and the model's seed (default 0)")
    parser.add_argument("--spread-by", default=SPREAD_BY, help="the metadata key whose values passages are spread over")
    parser.add_argument("--prompt", help="a generation prompt with {title} and {passage} (default: the packaged one)")
    parser.add_argument("--unanswerable-prompt", help="an unanswerable-question prompt with {topics}")
    parser.add_argument(
        "--top-k", type=positive_int, default=ROUND_TRIP_K, help="BM25 must find the source in this top (default 20)"
    )
    parser.add_argument("--output", required=True, metavar="GENERATED", help="the golden file to write (.jsonl)")
    return parser


def summary_path(output: Path) -> Path:
    """Where the drop counts go: beside the output, `generated.jsonl` → `generated.summary.json`."""
    return output.with_suffix(".summary.json")


def _checked(args: argparse.Namespace) -> Path:
    output = Path(args.output)
    if not output.parent.is_dir():
        raise InputError(f"--output {output}: no such folder {output.parent}")
    if output.suffix.lower() != ".jsonl":
        raise InputError(f"--output {output}: a golden file is written as JSON Lines (.jsonl)")
    if output.resolve() == Path(args.corpus).resolve():
        raise InputError(f"--output {output}: is the corpus")
    if not 0 <= args.unanswerable <= 1:
        raise InputError(f"--unanswerable {args.unanswerable}: a share, from 0 to 1")
    check_chat_options(args)
    return output


@exit_2_on_bad_input
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    output = _checked(args)
    prompt = load_prompt(args.prompt, "generate", ("title", "passage"), "--prompt")
    unanswerable_prompt = load_prompt(
        args.unanswerable_prompt, "generate_unanswerable", ("topics",), "--unanswerable-prompt"
    )
    corpus = load_corpus(args.corpus)
    chat = chat_client(args, json_answers=True)
    generated = generate_questions(
        corpus,
        chat,
        args.questions,
        unanswerable=args.unanswerable,
        seed=args.seed,
        spread_by=args.spread_by,
        prompt=prompt,
        unanswerable_prompt=unanswerable_prompt,
        top_k=args.top_k,
    )
    stats = chat.stats(PREFIX)
    if args.judge_model:
        spent = stats.get(f"cost/{PREFIX}_usd", 0.0)  # one cap over both: the judge may spend what is left
        judge = chat_client(
            args, args.judge_model, max_cost_usd=None if args.max_cost_usd is None else args.max_cost_usd - spent
        )
        judge_unanswered(generated, corpus, judge, load_template(None))
        stats |= judge.stats("judge")
    lines = _lines(generated, stats, args, f"llm:{args.model}@{prompt.hash}")
    print("\n".join(lines))
    summary = _summary(generated, stats, args, prompt.hash, unanswerable_prompt.hash)
    try:
        write_text_atomically(summary_path(output), json.dumps(summary, indent=2) + "\n")
    except OSError as error:
        raise InputError(f"{summary_path(output)}: cannot write it ({error.strerror})") from None
    if not generated.questions:
        raise InputError(f"no question was kept of {generated.asked} asked; {output} was not written")
    save_golden(GoldenSet(tuple(generated.questions), source=str(output)), output, corpus)
    print(
        f"wrote {output} ({len(generated.questions)} questions, status pending) and {summary_path(output)}; "
        f"review them: python -m sweep.label {output} --corpus {args.corpus}"
    )
    return 0


def _lines(generated: Generated, stats: dict[str, float], args: argparse.Namespace, by: str) -> list[str]:
    """What the generation did: asked and kept, the drops per reason, the judge's look, requests, tokens and cost."""
    dropped = generated.drop_counts()
    lines = [
        f"asked {generated.asked} questions ({generated.asked_unanswerable} unanswerable) of {by}, kept "
        f"{len(generated.questions)} ({generated.kept_unanswerable} unanswerable), dropped {sum(dropped.values())}: "
        + ", ".join(f"{reason} {count}" for reason, count in dropped.items()),
        f"filters: evidence verbatim in its passage; at most {MAX_EVIDENCE_SHARE:g} of the evidence's words in the "
        f"question; MiniLM cosine with an earlier question at most {DUPLICATE_COSINE:g}; BM25 finds the source "
        f"document in its top {args.top_k}",
    ]
    if generated.judged:
        marked = sum(verdict["all_0"] for verdict in generated.judged)
        found = [verdict for verdict in generated.judged if not verdict["all_0"]]
        line = f"judge {args.judge_model}: graded BM25's top {JUDGED_TOP} of {len(generated.judged)} unanswerable "
        line += f"questions: all 0 for {marked} (marked judge.all_0 in their metadata)"
        if found:
            graded = sum(any(grade for grade in verdict["top"].values()) for verdict in found)
            line += f"; {graded} have a document graded relevant, {len(found) - graded} an answer without a grade or no document"
        lines.append(line)
    for prefix in (PREFIX, "judge"):
        if f"{prefix}/requests" in stats:
            lines.append(
                f"{prefix} requests {stats[f'{prefix}/requests']:.0f} sent, {stats[f'{prefix}/cached']:.0f} from the "
                f"cache; tokens {stats[f'{prefix}/prompt_tokens']:.0f} in, {stats[f'{prefix}/completion_tokens']:.0f} out"
                + (f"; cost ${stats[f'cost/{prefix}_usd']:.4f}" if f"cost/{prefix}_usd" in stats else "")
            )
    return lines


def _summary(
    generated: Generated, stats: dict[str, float], args: argparse.Namespace, prompt_hash: str, unanswerable_hash: str
) -> dict:
    """The summary file beside the output: what was asked of whom, the thresholds, kept, dropped, requests."""
    return {
        "corpus": args.corpus,
        "model": args.model,
        "prompt": {"source": args.prompt or "generate", "hash": prompt_hash},
        "unanswerable_prompt": {
            "source": args.unanswerable_prompt or "generate_unanswerable",
            "hash": unanswerable_hash,
        },
        "seed": args.seed,
        "spread_by": args.spread_by,
        "thresholds": {
            "max_evidence_share": MAX_EVIDENCE_SHARE,
            "duplicate_cosine": DUPLICATE_COSINE,
            "top_k": args.top_k,
        },
        "asked": generated.asked,
        "asked_unanswerable": generated.asked_unanswerable,
        "kept": len(generated.questions),
        "kept_unanswerable": generated.kept_unanswerable,
        "dropped": generated.drop_counts(),
        "judge": {"model": args.judge_model, "judged": generated.judged} if args.judge_model else None,
        "requests": stats,
    }


if __name__ == "__main__":
    sys.exit(main())
