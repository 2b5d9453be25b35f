"""The report's sections on questions: the objective per question type, and the worst questions.

The per-type heat map has a row per configuration and a column per question type, headed by the
number of answerable questions of that type: a mean over one question is not one over forty.

The worst questions (lowest objective averaged over the configurations) are rows; the columns are
the question with its type, that mean, and the value in the leader, the runner-up and the last-ranked
configuration, so the table is as wide with 20 configurations as with 3. Each question's values in
every configuration are one click away, in a `<details>` under its text.
"""

from __future__ import annotations

from collections.abc import Mapping

from sweep.evaluation.leaderboard import SweepResults
from sweep.reporting.formatting import number
from sweep.reporting.html_parts import esc, heat_style, label_html, scale_of, table
from sweep.text import shortened

WORST_QUESTIONS = 10
TEXT_LIMIT = 300  # characters of a question shown; a megabyte question would swamp the page


def type_counts(results: SweepResults) -> dict[str, int]:
    """Question type -> its answerable questions (a value of the objective in some configuration)."""
    answerable = results.per_query.notna().any(axis=1)
    types = results.questions["type"].reindex(answerable[answerable].index)
    return {str(t): int(n) for t, n in types.value_counts().items()}


def heatmap_section(results: SweepResults, labels: Mapping[str, str]) -> str:
    per_type = results.per_type
    if per_type.empty:
        return '<p class="note">No per-type values: no scored configuration, or no question types.</p>\n'
    order = [r for r in results.leaderboard.index if r in per_type.index]
    per_type = per_type.loc[order]
    low, high = scale_of(per_type)
    counts = type_counts(results)
    head = "<th>config</th>" + "".join(
        f'<th class="num" data-count="{counts.get(str(t), 0)}">{esc(t)}'
        f'<br><span class="count">{counts.get(str(t), 0)} q</span></th>'
        for t in per_type.columns
    )
    rows = []
    for run_id, values in per_type.iterrows():
        cells = "".join(
            f'<td class="heat" data-type="{esc(t)}" style="{heat_style(v, low, high)}">{number(v)}</td>'
            for t, v in values.items()
        )
        rows.append(
            f'<tr data-run-id="{esc(run_id)}"><td class="config">{label_html(labels[run_id])}</td>{cells}</tr>\n'
        )
    return (
        table("heatmap", head, rows)
        + f'<p class="note">Mean {esc(results.objective)} per question type; under each type, its number of '
        f"answerable questions (q). Colour from the lowest ({number(low)}) to the highest ({number(high)}) value "
        f"in the table.</p>\n"
    )


def shown_configurations(runs: list[str]) -> dict[str, str]:
    """The leader, the runner-up and the last of `runs` (best first), each once: run id -> the word
    its column's heading has beside its rank ("best", "", "last")."""
    roles = {runs[0]: "best"}
    if len(runs) > 1:
        roles.setdefault(runs[1], "")
    if len(runs) > 2:
        roles.setdefault(runs[-1], "last")
    return roles


def worst_section(results: SweepResults, labels: Mapping[str, str]) -> str:
    worst = results.worst(WORST_QUESTIONS)
    if worst.empty:
        return '<p class="note">No per-question values.</p>\n'
    runs = [r for r in results.per_query.columns if r in worst.columns]
    shown = shown_configurations(runs)
    low, high = scale_of(worst[runs])
    head = "<th>question (type)</th><th class=num>mean</th>"
    head += "".join(
        f'<th class="num" data-run-id="{esc(r)}">{f"#{runs.index(r) + 1} {role}".strip()}<br>'
        f'<span class="config">{label_html(labels[r])}</span></th>'
        for r, role in shown.items()
    )
    rows = []
    for qid, row in worst.iterrows():
        values = "".join(
            f'<td class="heat" style="{heat_style(row[r], low, high)}">{number(row[r])}</td>' for r in shown
        )
        every = "".join(
            f'<li data-run-id="{esc(r)}">#{rank} {label_html(labels[r])}: '
            f'<span class="value" style="{heat_style(row[r], low, high)}">{number(row[r])}</span></li>'
            for rank, r in enumerate(runs, start=1)
        )
        details = (
            f'<details><summary>all {len(runs)} configurations</summary><ol class="every">{every}</ol></details>'
            if len(runs) > len(shown)
            else ""
        )
        rows.append(
            f'<tr data-qid="{esc(qid)}"><td class="question" title="{esc(qid)}">'
            f'<span class="text">{esc(shortened(str(row["question"]), TEXT_LIMIT))}</span> '
            f'<span class="type">({esc(row["type"])})</span>{details}</td>'
            f'<td class="num">{number(row["mean"])}</td>{values}</tr>\n'
        )
    compared = "each configuration" if len(runs) == len(shown) else "the best, the runner-up and the last one"
    return (
        table("worst", head, rows)
        + f'<p class="note">The {len(worst)} questions with the lowest {esc(results.objective)} averaged over the '
        f"{len(runs)} configurations, and the value in {compared}"
        + ("; under each question, all of them." if len(runs) > len(shown) else ".")
        + "</p>\n"
    )
