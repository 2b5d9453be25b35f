"""A sweep's report as one self-contained HTML page (`report.html` on the parent run).

The page holds, for the sweep's objective:

1. the leaderboard: each configuration's mean with its 95% bootstrap interval, the difference to
   the leader and its Holm-corrected paired p-value, the tied-with-best mark, the number of
   questions, the cost columns that were logged; failed runs last; the minimum detectable effect;
2. a quality-versus-latency plot (matplotlib's SVG, `sweep.reporting.svg`): one point per
   finished configuration with its interval as an error bar, the Pareto front (higher quality at
   lower latency) drawn through, each point's tooltip naming it and its numbers;
3. a configuration x question-type heatmap of the objective;
4. the questions with the lowest objective averaged over the configurations, with each value;
5. the config keys whose values differ between the configurations (`sweep.reporting.configs`).

A configuration is labelled by the overrides that vary (`sweep.reporting.configs`); the page names
the shared ones once. Everything is inline (CSS, SVG) and nothing is fetched, so the page works
offline and inside MLflow's artifact viewer; it has no script and no link at all (the viewer shows
it in a sandboxed frame of a blob: URL, where even a link to a section of the page does nothing),
only the plot's references to its own parts (`xlink:href="#..."`, `url(#...)`), which draw there.
The leaderboard fits the viewer's width (about 860 px) without scrolling sideways; text has at
least WCAG AA contrast (4.5:1) on its background, heat cells' included. All user text is
HTML-escaped. Statistics show 4 decimals, costs 2 (milliseconds, seconds) or a binary unit
(bytes); a missing value shows "-". The same results always give the same page (nothing depends
on time or randomness).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from sweep.evaluation.leaderboard import SweepResults
from sweep.evaluation.registry import BY_NAME, COSTS, LATENCY
from sweep.reporting.configs import config_labels, settings_that_differ, shared_overrides
from sweep.reporting.formatting import cost, is_missing, number
from sweep.reporting.svg import Point, pareto_marked, pareto_svg
from sweep.text import shortened

WORST_QUESTIONS = 10
TEXT_LIMIT = 300  # characters of a question shown; a megabyte question would swamp the page

# Sequential colour scale of the heatmaps, light (low) to dark blue (high); each cell's text is
# black or white, whichever contrasts more with its background (at least 4.58:1 on any colour).
LOW_COLOUR = (247, 251, 255)
HIGH_COLOUR = (33, 102, 172)
BLACK, WHITE = (0, 0, 0), (255, 255, 255)
MISSING_CELL = "background-color:#eeeeee;color:#4d4d4d"  # 7.3:1

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       margin: 1rem; color: #1d1d1f; background: #fff; line-height: 1.4; }
h1 { font-size: 1.4rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; }
p.summary, p.note, p.mde { color: #4d4d4d; font-size: 0.9rem; }
code { font-size: 0.85rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.35rem; vertical-align: top; }
th { background: #f4f4f6; text-align: left; font-weight: 600; }
th.num { text-align: right; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
div.wide { overflow-x: auto; }
td.question { max-width: 32rem; overflow-wrap: anywhere; }
td.verdict { white-space: nowrap; }
tr.unscored td { color: #5c5c5c; background: #fafafa; }
tr.leader td { background: #fdf3f2; }
tr.tied td { background: #fef8ef; }
span.ci { color: #5c5c5c; font-size: 0.8rem; }
span.mark { font-weight: 600; padding: 0 0.3rem; border-radius: 3px; white-space: nowrap; }
span.mark.leader { color: #fff; background: #c0392b; }
span.mark.tie { color: #7a4100; background: #fbd9a8; }
span.mark.worse { color: #fff; background: #4f6479; }
td.heat { text-align: right; font-variant-numeric: tabular-nums; min-width: 3.5rem; }
svg#pareto { max-width: 100%; height: auto; }
"""


def render(results: SweepResults, title: str) -> str:
    """The whole page for `results`, titled `title`."""
    configs = {run_id: str(config) for run_id, config in results.leaderboard["config"].items()}
    labels = config_labels(configs)
    scored = int(results.leaderboard["mean"].notna().sum())
    summary = (
        f"Objective <b>{esc(results.objective)}</b>: {len(results.leaderboard)} configurations, {scored} scored; "
        f"{results.n_questions} answerable questions. Intervals are 95% bootstrap intervals over questions; "
        f"p is a paired randomization test against the leader, Holm-corrected across the sweep; a configuration "
        f"is tied with the best when that p is at least {results.alpha}, and worse when it is below."
    )
    shared = shared_overrides(configs)
    if shared:
        summary += (
            f" Configurations are named by the overrides that vary; every one also has "
            f"<code>{label_html(' '.join(shared))}</code>."
        )
    sections = (
        ("leaderboard-section", "Leaderboard", leaderboard_section(results, labels)),
        ("pareto-section", "Quality versus latency", pareto_section(results, labels)),
        ("heatmap-section", "Per question type", heatmap_section(results, labels)),
        ("worst-section", "Worst questions", worst_section(results, labels)),
        ("differing-section", "Config keys that differ", differing_section(results, configs, labels)),
    )
    body = "".join(
        f'<section id="{anchor}">\n<h2>{heading}</h2>\n{content}</section>\n' for anchor, heading, content in sections
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f'<h1>{esc(title)}</h1>\n<p class="summary">{summary}</p>\n{body}</body>\n</html>\n'
    )


# --- page parts ----------------------------------------------------------------------------------


def esc(value: object) -> str:
    return html.escape(str(value))


def is_true(value: object) -> bool:
    """A tied_with_best cell: True/False (1.0/0.0 once read back from JSON), or NaN for a run that
    was not ranked, which must not count (NaN is truthy)."""
    return not is_missing(value) and bool(value)


def table(table_id: str, head: str, rows: Sequence[str]) -> str:
    """A table in a box that scrolls sideways when it is wider than the page (many configurations)."""
    return (
        f'<div class="wide"><table id="{table_id}">\n<thead><tr>{head}</tr></thead>\n'
        f"<tbody>\n{''.join(rows)}</tbody>\n</table></div>\n"
    )


def label_html(label: str) -> str:
    """A configuration's label, escaped, that may wrap between overrides and after a / or a comma
    (a path, a list) but never inside a word."""
    return esc(label).replace("/", "/<wbr>").replace(",", ",<wbr>")


def luminance(colour: tuple[int, int, int]) -> float:
    """WCAG 2's relative luminance of an sRGB colour."""
    linear = [c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in colour]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """WCAG 2's contrast ratio of two colours, from 1 to 21."""
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def heat_style(value: object, low: float, high: float) -> str:
    """Inline background for `value` on the scale low..high, and the text colour that reads best on it."""
    if is_missing(value):
        return MISSING_CELL
    share = 0.5 if high <= low else min(max((float(value) - low) / (high - low), 0.0), 1.0)
    background = tuple(round(a + (b - a) * share) for a, b in zip(LOW_COLOUR, HIGH_COLOUR))
    text = max((BLACK, WHITE), key=lambda colour: contrast(colour, background))
    return f"background-color:{hex_colour(background)};color:{hex_colour(text)}"


def hex_colour(colour: Sequence[int]) -> str:
    return "#" + "".join(f"{c:02x}" for c in colour)


def scale_of(frame: pd.DataFrame) -> tuple[float, float]:
    values = frame.to_numpy(dtype=float).ravel()
    values = values[np.isfinite(values)]
    return (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)


# --- 1. leaderboard -----------------------------------------------------------------------------

MARKS = {
    "leader": '<span class="mark leader" title="the highest mean">best</span>',
    "tied": '<span class="mark tie" title="not significantly worse than the best">= tied</span>',
    "worse": '<span class="mark worse" title="significantly worse than the best (p (Holm) below alpha)">worse</span>',
}


def leaderboard_section(results: SweepResults, labels: Mapping[str, str]) -> str:
    board = results.leaderboard
    costs = [c for c in COSTS if c in board.columns]
    headers = ["#", "config", f"{results.objective} (95% CI)", "delta vs best", "p (Holm)", "verdict", "n"]
    headers += [BY_NAME[c].label for c in costs]
    numeric = {"#", "delta vs best", "p (Holm)", "n", *(BY_NAME[c].label for c in costs)}
    head = "".join(f"<th{' class=num' if h in numeric else ''}>{esc(h)}</th>" for h in headers)
    rows, rank = [], 0
    for run_id, row in board.iterrows():
        scored = not is_missing(row["mean"])
        rank += scored
        if not scored:
            kind = "unscored"
        else:
            kind = "leader" if rank == 1 else "tied" if is_true(row["tied_with_best"]) else "worse"
        verdict = MARKS[kind] if scored else esc(row["status"] if row["status"] != "FINISHED" else "no value")
        interval = f'<br><span class="ci">[{number(row["ci_low"])}, {number(row["ci_high"])}]</span>' if scored else ""
        cells = [
            f'<td class="num">{rank if scored else "-"}</td>',
            f'<td class="config" title="run {esc(run_id)}">{label_html(labels[run_id])}</td>',
            f'<td class="num"><span class="mean">{number(row["mean"])}</span>{interval}</td>',
            f'<td class="num">{number(row["delta"])}</td>',
            f'<td class="num">{number(row["p_holm"])}</td>',
            f'<td class="verdict">{verdict}</td>',
            f'<td class="num">{number(row["n"], 0)}</td>',
            *(f'<td class="num">{cost(c, row[c])}</td>' for c in costs),
        ]
        rows.append(f'<tr data-run-id="{esc(run_id)}" class="{kind}">{"".join(cells)}</tr>\n')
    return table("leaderboard", head, rows) + f'<p class="mde">{esc(results.mde_line())}</p>\n'


# --- 2. quality versus latency ------------------------------------------------------------------


def pareto_section(results: SweepResults, labels: Mapping[str, str]) -> str:
    board = results.leaderboard
    scored = board[board["mean"].notna()]
    latency = scored[LATENCY] if LATENCY in scored.columns else pd.Series(np.nan, index=scored.index)
    points = []
    for rank, (run_id, row) in enumerate(scored.iterrows(), start=1):
        if is_missing(latency[run_id]):
            continue
        role = "leader" if rank == 1 else "tied" if is_true(row["tied_with_best"]) else "other"
        low, high = (row["ci_low"], row["ci_high"]) if not is_missing(row["ci_low"]) else (row["mean"], row["mean"])
        points.append(Point(run_id, labels[run_id], rank, row["mean"], low, high, float(latency[run_id]), role))
    points = pareto_marked(points)
    unplaced = [labels[r] for r in scored.index if is_missing(latency[r])]
    notes = []
    if unplaced:
        notes.append(f"No {LATENCY} logged for {', '.join(esc(u) for u in unplaced)}: not placed.")
    if len(scored) < len(board):
        notes.append(
            f"{len(board) - len(scored)} configuration(s) without a score (failed or not evaluated): not placed."
        )
    note = "".join(f'<p class="note">{n}</p>\n' for n in notes)
    if not points:
        return f'<p class="note">Nothing to plot: no scored configuration has {LATENCY}.</p>\n{note}'
    caption = (
        f'<p class="note">Each point is a configuration: {esc(results.objective)} (mean, 95% interval as the bar) '
        f"against its median search latency. Dashed line and dark ring: the Pareto front, the configurations no "
        f"other one beats on both quality and latency. Red: the leader; orange: tied with it; blue: the others.</p>\n"
    )
    return pareto_svg(points, results.objective) + caption + note


# --- 3. per question type -----------------------------------------------------------------------


def heatmap_section(results: SweepResults, labels: Mapping[str, str]) -> str:
    per_type = results.per_type
    if per_type.empty:
        return '<p class="note">No per-type values: no scored configuration, or no question types.</p>\n'
    order = [r for r in results.leaderboard.index if r in per_type.index]
    per_type = per_type.loc[order]
    low, high = scale_of(per_type)
    head = "<th>config</th>" + "".join(f'<th class="num">{esc(t)}</th>' for t in per_type.columns)
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
        + f'<p class="note">Mean {esc(results.objective)} per question type; colour from the lowest '
        f"({number(low)}) to the highest ({number(high)}) value in the table.</p>\n"
    )


# --- 4. worst questions -------------------------------------------------------------------------


def worst_section(results: SweepResults, labels: Mapping[str, str]) -> str:
    worst = results.worst(WORST_QUESTIONS)
    if worst.empty:
        return '<p class="note">No per-question values.</p>\n'
    runs = [r for r in results.per_query.columns if r in worst.columns]
    low, high = scale_of(worst[runs])
    head = "<th>question</th><th>type</th><th class=num>mean</th>"
    head += "".join(f'<th class="num" title="run {esc(r)}">{label_html(labels[r])}</th>' for r in runs)
    rows = []
    for qid, row in worst.iterrows():
        values = "".join(
            f'<td class="heat" style="{heat_style(row[r], low, high)}">{number(row[r])}</td>' for r in runs
        )
        rows.append(
            f'<tr data-qid="{esc(qid)}"><td class="text question" title="{esc(qid)}">'
            f"{esc(shortened(str(row['question']), TEXT_LIMIT))}</td>"
            f'<td>{esc(row["type"])}</td><td class="num">{number(row["mean"])}</td>{values}</tr>\n'
        )
    return (
        table("worst", head, rows)
        + f'<p class="note">The {len(worst)} questions with the lowest {esc(results.objective)} averaged over the '
        f"configurations, and the value in each.</p>\n"
    )


# --- 5. config keys that differ -----------------------------------------------------------------


def differing_section(results: SweepResults, configs: Mapping[str, str], labels: Mapping[str, str]) -> str:
    differing = settings_that_differ(results.differing, configs)
    left_out = (
        '<p class="note">Left out: settings an option brings with it (BM25\'s <code>model.k1</code> beside '
        "<code>model=bm25</code>), copies of another setting (<code>chunking.size</code> is <code>chunk</code>), "
        "class paths and unset values; each run's MLflow params hold every value.</p>\n"
    )
    if differing.shape[1] == 0:
        return '<p class="note">No config value differs between the configurations.</p>\n' + left_out
    head = "<th>config</th>" + "".join(f"<th>{esc(k)}</th>" for k in differing.columns)
    rows = []
    for run_id in (r for r in results.leaderboard.index if r in differing.index):
        cells = "".join(f"<td>{'-' if pd.isna(v) else esc(v)}</td>" for v in differing.loc[run_id])
        rows.append(
            f'<tr data-run-id="{esc(run_id)}"><td class="config">{label_html(labels[run_id])}</td>{cells}</tr>\n'
        )
    return table("differing", head, rows) + left_out
