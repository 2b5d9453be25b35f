"""How a comparison of two runs is written: Markdown and JSON (`sweep.compare`), verdict lines (`sweep.check`).

Statistics show 4 decimals, deltas and interval bounds signed; a missing value is "–" in Markdown
and null in JSON. A question's text is one line, at most `CELL_LIMIT` characters (the JSON keeps it
whole).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from sweep.evaluation.comparison import COLUMNS, Comparison, Gate, regressed
from sweep.evaluation.registry import lower_is_better
from sweep.reporting.formatting import number
from sweep.text import shortened, single_line

CELL_LIMIT = 200  # characters of a question a Markdown cell or a check line shows
DASH = "–"  # a missing value in Markdown


# ---------------------------------------------------------------- JSON


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    c = comparison
    return {
        "run_a": _describe(c.a),
        "run_b": _describe(c.b),
        "golden_digest": c.a.golden_digest,
        "n_questions": c.n_questions,
        **({} if c.shared is None else {"golden_digest_b": c.b.golden_digest, "shared": _shared(c)}),
        "test": {
            "delta": "b - a, over the questions both runs scored with a finite value",
            "interval": "95% paired bootstrap (percentile)",
            "p_value": "two-sided paired randomization (sign-flip) test",
            "p_holm": "p_value, Holm-corrected over the metrics of the same table",
            "resamples": c.resamples,
            "seed": c.seed,
        },
        "headline": c.headline,
        "flip_at": c.flip_at,
        "metrics": _records(c.metrics),
        "per_type": {qtype: _records(table) for qtype, table in c.per_type.items()},
        "flipped": c.flipped,
    }


def _shared(c: Comparison) -> dict[str, Any]:
    return {"questions": c.shared.questions, "of_a": c.shared.of_a, "of_b": c.shared.of_b, "what": c.shared.sentence()}


def _describe(run: Any) -> dict[str, Any]:
    return {"run_id": run.run_id, "name": run.name, "overrides": run.command_line}


def _records(table: pd.DataFrame) -> dict[str, dict[str, Any]]:
    return {metric: {c: json_number(row[c]) for c in COLUMNS} for metric, row in table.iterrows()}


def json_number(value: Any) -> Any:
    """JSON's numbers, exact: counts as integers, NaN (and pandas' NA) as null, booleans as such."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    value = float(value)
    return value if math.isfinite(value) else None


# ---------------------------------------------------------------- Markdown


def comparison_markdown(comparison: Comparison) -> str:
    c = comparison
    lines = [
        f"## Comparison: B `{c.b.run_id}` against A `{c.a.run_id}`",
        "",
        f"- A: `{c.a.run_id}` {_md(c.a.label)}",
        f"- B: `{c.b.run_id}` {_md(c.b.label)}",
        f"- golden set `{c.a.golden_digest}`: {c.n_questions} questions in both runs"
        if c.shared is None
        else f"- golden sets `{c.a.golden_digest}` (A) and `{c.b.golden_digest}` (B): {c.shared.sentence()}",
        "- delta = B − A over the questions both runs scored (n); 95% CI: paired bootstrap; "
        f"p: two-sided paired randomization test ({c.resamples} resamples, seed {c.seed}); "
        "p (Holm): corrected over the metrics of the table; W/T/L: questions where B is better / "
        "equal / worse; `*`: p < 0.05",
        "",
        "| metric | A | B | delta | 95% CI | p | p (Holm) | W/T/L | n |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for metric, row in c.metrics.iterrows():
        lines.append(f"| {metric} | {_row(row)} |")
    lines += ["", f"### Per question type: {c.headline}", ""]
    typed = [(qtype, t.loc[c.headline]) for qtype, t in c.per_type.items() if c.headline in t.index]
    if typed:
        lines += ["| type | A | B | delta | 95% CI | p | p (Holm) | W/T/L | n |", "|---|" + "--:|" * 8]
        lines += [f"| {_md(qtype)} | {_row(row)} |" for qtype, row in typed]
    else:
        lines.append(f"No question type has {c.headline} in both runs.")
    good = "≤" if lower_is_better(c.headline) else "≥"
    lines += ["", f"### Questions that flipped: {c.headline} {good} {c.flip_at:g} in one run only", ""]
    if c.flipped:
        lines += [
            "| change | qid | type | question | A | B | first relevant rank A → B |",
            "|---|---|---|---|--:|--:|--:|",
        ]
        for flip in c.flipped:
            ranks = f"{_rank(flip['rank_a'])} → {_rank(flip['rank_b'])}"
            lines.append(
                f"| {flip['change']} | {_md(flip['qid'])} | {_md(flip['type'])} | {_md(flip['question'])} "
                f"| {_num(flip['a'])} | {_num(flip['b'])} | {ranks} |"
            )
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"


def _num(value: float | None, signed: bool = False) -> str:
    return number(value, signed=signed, missing=DASH)


def _row(row: pd.Series) -> str:
    star = "*" if row["p_value"] < 0.05 else ""
    return " | ".join(
        [
            _num(row["a"]),
            _num(row["b"]),
            _num(row["delta"], signed=True),
            f"[{_num(row['ci_low'], True)}, {_num(row['ci_high'], True)}]",
            f"{_num(row['p_value'])}{star}",
            _num(row["p_holm"]),
            f"{int(row['wins'])}/{int(row['ties'])}/{int(row['losses'])}",
            str(int(row["n"])),
        ]
    )


def _rank(rank: int | None) -> str:
    return "none" if rank is None else str(rank)


def _md(text: Any) -> str:
    """A Markdown table cell: one line, pipes escaped, at most CELL_LIMIT characters."""
    return shortened(single_line(text).replace("|", "\\|"), CELL_LIMIT, count=False)


# ---------------------------------------------------------------- sweep.check's lines


def gate_lines(result: Gate, shown: int) -> list[str]:
    """What `sweep.check` prints for one (baseline, candidate) pair."""
    c, metric = result.comparison, result.metric
    lines = [
        f"baseline  {c.a.run_id} {c.a.label}",
        f"candidate {c.b.run_id} {c.b.label}",
        *([] if c.shared is None else [c.shared.sentence()]),
    ]
    if result.overall is None:
        return [*lines, f"{metric}: no question has a value in both runs: nothing to check"]
    overall = result.overall
    lines.append(f"{metric} over {int(overall['n'])} questions: {verdict(result, overall, overall['p_value'])}")
    for qtype, (row, p) in result.types.items():
        where = f"{int(row['n'])} questions, p Holm-corrected over {len(result.types)} types"
        lines.append(f"  type {qtype} ({where}): {verdict(result, row, p)}")
    if not result.regressed:
        return lines
    scope = "" if result.failed else f" ({', '.join(result.failed_types)})"
    lines.append(f"regressed questions{scope}: {len(result.losses)} worse on {metric} in the candidate, worst first")
    lines += [question_line(loss) for loss in result.losses[:shown]]
    if len(result.losses) > shown:
        lines.append(f"  … and {len(result.losses) - shown} more (python -m sweep.compare {c.a.run_id} {c.b.run_id})")
    return lines


def verdict(result: Gate, row: pd.Series, p: float) -> str:
    values = (
        f"{number(row['a'])} -> {number(row['b'])}, delta {number(row['delta'], signed=True)} "
        f"(95% CI {number(row['ci_low'], signed=True)} to {number(row['ci_high'], signed=True)}), p {number(p)}, "
        f"{int(row['wins'])} better / {int(row['ties'])} same / {int(row['losses'])} worse of {int(row['n'])}"
    )
    if regressed(row, result.metric, result.max_drop, result.alpha, p):
        return f"{values}: REGRESSED (worse by more than {result.max_drop:g}, p < {result.alpha:g})"
    return f"{values}: ok"


def question_line(loss: dict[str, Any]) -> str:
    ranks = ""
    if loss["rank_a"] is not None or loss["rank_b"] is not None:
        ranks = f", first relevant rank {loss['rank_a'] or 'none'} -> {loss['rank_b'] or 'none'}"
    text = shortened(single_line(loss["question"]), CELL_LIMIT, count=False)
    return f"  {loss['qid']} [{loss['type']}] {number(loss['a'])} -> {number(loss['b'])}{ranks}: {text}"
