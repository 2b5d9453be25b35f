"""A sweep's report as one self-contained HTML page (`report.html` on the parent run).

The page holds, for the sweep's objective:

1. the leaderboard: each configuration's mean with its 95% bootstrap interval, the difference to
   the leader and its Holm-corrected paired p-value, the tied-with-best mark, the number of
   questions, the cost columns that were logged; failed runs last; the minimum detectable effect;
2. a quality-versus-latency plot (static SVG): one point per finished configuration with its
   interval as an error bar, the Pareto front (higher quality at lower latency) drawn through;
3. a configuration x question-type heatmap of the objective;
4. the questions with the lowest objective averaged over the configurations, with each value;
5. the config keys whose values differ between the configurations.

Everything is inline (CSS, SVG) and nothing is fetched, so the page works offline and inside
MLflow's artifact viewer; it has no script at all. All user text is HTML-escaped. Statistics show
4 decimals, costs 2 (milliseconds, seconds) or a binary unit (bytes); a missing value shows "-".
The same results always give the same page (nothing depends on time or randomness).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from sweep.evaluation.leaderboard import COSTS, SweepResults

LATENCY = "latency/search_ms_p50"
WORST_QUESTIONS = 10
TEXT_LIMIT = 300  # characters of a question shown; a megabyte question would swamp the page
LABEL_LIMIT = 40  # characters of a configuration's label next to its point in the plot
COST_HEADERS = {
    "latency/search_ms_p50": "latency p50 (ms)",
    "latency/search_ms_p95": "latency p95 (ms)",
    "index/bytes": "index size",
    "time/embed_s": "embedding (s)",
}

# Sequential colour scale of the heatmaps, light (low) to dark blue (high).
LOW_COLOUR = (247, 251, 255)
HIGH_COLOUR = (33, 102, 172)

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       margin: 1.5rem 2rem; color: #1d1d1f; background: #fff; line-height: 1.4; }
h1 { font-size: 1.5rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.15rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; }
p.summary, p.note, p.mde, nav { color: #555; font-size: 0.9rem; }
nav a { margin-right: 1rem; color: #2166ac; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.5rem; vertical-align: top; }
th { background: #f4f4f6; text-align: left; font-weight: 600; }
th.num { text-align: right; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
div.wide { overflow-x: auto; }
td.text { max-width: 32rem; overflow-wrap: anywhere; }
#leaderboard td.config { min-width: 10rem; }
tr.failed td { color: #999; background: #fafafa; }
tr.leader td { background: #fdf3f2; }
tr.tied td { background: #fef8ef; }
span.ci { color: #777; }
span.mark { font-weight: 600; padding: 0 0.3rem; border-radius: 3px; white-space: nowrap; }
span.mark.leader { color: #fff; background: #c0392b; }
span.mark.tie { color: #7a4100; background: #fbd9a8; }
td.heat { text-align: right; font-variant-numeric: tabular-nums; min-width: 4rem; }
svg text { font-family: inherit; font-size: 11px; fill: #333; }
svg .axis path { stroke: #888; }
svg line.grid { stroke: #e8e8e8; }
svg text.point-label { paint-order: stroke; stroke: #fff; stroke-width: 4px; stroke-linejoin: round; }
svg .interval { stroke: #666; stroke-width: 1.2; }
svg .pareto-front { fill: none; stroke: #2c3e50; stroke-width: 1.5; stroke-dasharray: 5 4; }
svg circle.point, svg circle.swatch { stroke: #fff; stroke-width: 1; }
svg circle.leader { fill: #c0392b; }
svg circle.tied { fill: #e67e22; }
svg circle.other { fill: #5b7a99; }
svg circle.on-front { stroke: #2c3e50; stroke-width: 2.5; }
"""


def render(results: SweepResults, title: str) -> str:
    """The whole page for `results`, titled `title`."""
    labels = config_labels(results.leaderboard)
    finished = int(results.leaderboard["mean"].notna().sum())
    summary = (
        f"Objective <b>{esc(results.objective)}</b>: {len(results.leaderboard)} configurations, {finished} scored; "
        f"{results.n_questions} answerable questions. Intervals are 95% bootstrap intervals over questions; "
        f"p is a paired randomization test against the leader, Holm-corrected across the sweep; a configuration "
        f"is tied with the best when that p is at least {results.alpha}."
    )
    sections = (
        ("leaderboard-section", "Leaderboard", leaderboard_section(results, labels)),
        ("pareto-section", "Quality versus latency", pareto_section(results, labels)),
        ("heatmap-section", "Per question type", heatmap_section(results, labels)),
        ("worst-section", "Worst questions", worst_section(results, labels)),
        ("differing-section", "Config keys that differ", differing_section(results, labels)),
    )
    nav = "".join(f'<a href="#{anchor}">{heading}</a>' for anchor, heading, _ in sections)
    body = "".join(
        f'<section id="{anchor}">\n<h2>{heading}</h2>\n{content}</section>\n' for anchor, heading, content in sections
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f'<h1>{esc(title)}</h1>\n<p class="summary">{summary}</p>\n<nav>{nav}</nav>\n{body}</body>\n</html>\n'
    )


# --- formatting ---------------------------------------------------------------------------------


def esc(value: object) -> str:
    return html.escape(str(value))


def is_missing(value: object) -> bool:
    try:
        return value is None or not math.isfinite(float(value))
    except (TypeError, ValueError):
        return True


def number(value: object, digits: int = 4) -> str:
    return "-" if is_missing(value) else f"{float(value):.{digits}f}"


def size(value: object) -> str:
    """Bytes in a binary unit (KiB = 1024 B)."""
    if is_missing(value):
        return "-"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(amount) < 1024:
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} TiB"


def cost(column: str, value: object) -> str:
    return size(value) if column == "index/bytes" else number(value, 2)


def shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


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


def config_labels(leaderboard: pd.DataFrame) -> dict[str, str]:
    """Run id -> its overrides label; the run id where the label is empty (a sweep of one default run)."""
    return {run_id: str(config) or str(run_id) for run_id, config in leaderboard["config"].items()}


def heat_style(value: object, low: float, high: float) -> str:
    """Inline background (and a readable text colour) for `value` on the scale low..high."""
    if is_missing(value):
        return "background-color:#eeeeee;color:#888888"
    share = 0.5 if high <= low else min(max((float(value) - low) / (high - low), 0.0), 1.0)
    red, green, blue = (round(a + (b - a) * share) for a, b in zip(LOW_COLOUR, HIGH_COLOUR))
    text = "#ffffff" if share > 0.55 else "#1d1d1f"
    return f"background-color:#{red:02x}{green:02x}{blue:02x};color:{text}"


def scale_of(frame: pd.DataFrame) -> tuple[float, float]:
    values = frame.to_numpy(dtype=float).ravel()
    values = values[np.isfinite(values)]
    return (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)


# --- 1. leaderboard -----------------------------------------------------------------------------


def leaderboard_section(results: SweepResults, labels: Mapping[str, str]) -> str:
    board = results.leaderboard
    costs = [c for c in COSTS if c in board.columns]
    headers = ["rank", "config", "status", f"{results.objective} [95% CI]", "delta vs leader", "p (Holm)"]
    headers += ["tied with best", "n", *(COST_HEADERS[c] for c in costs)]
    numeric = {"rank", "delta vs leader", "p (Holm)", "n", *(COST_HEADERS[c] for c in costs)}
    head = "".join(f"<th{' class=num' if h in numeric else ''}>{esc(h)}</th>" for h in headers)
    rows, rank = [], 0
    for run_id, row in board.iterrows():
        scored = not is_missing(row["mean"])
        rank += scored
        leader = scored and rank == 1
        tied = scored and not leader and is_true(row["tied_with_best"])
        if leader:
            mark, kind = '<span class="mark leader" title="the highest mean">best</span>', "leader"
        elif tied:
            mark, kind = '<span class="mark tie" title="not significantly worse than the best">= tied</span>', "tied"
        else:
            mark, kind = "", "" if scored else "failed"
        interval = f' <span class="ci">[{number(row["ci_low"])}, {number(row["ci_high"])}]</span>' if scored else ""
        cells = [
            f'<td class="num">{rank if scored else "-"}</td>',
            f'<td class="text config" title="run {esc(run_id)}">{esc(labels[run_id])}</td>',
            f'<td class="status">{esc(row["status"])}</td>',
            f'<td class="num"><span class="mean">{number(row["mean"])}</span>{interval}</td>',
            f'<td class="num">{number(row["delta"])}</td>',
            f'<td class="num">{number(row["p_holm"])}</td>',
            f'<td class="tie-cell">{mark}</td>',
            f'<td class="num">{number(row["n"], 0)}</td>',
            *(f'<td class="num">{cost(c, row[c])}</td>' for c in costs),
        ]
        rows.append(f'<tr data-run-id="{esc(run_id)}" class="{kind}">{"".join(cells)}</tr>\n')
    return table("leaderboard", head, rows) + f'<p class="mde">{esc(results.mde_line())}</p>\n'


# --- 2. quality versus latency ------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    run_id: str
    label: str
    rank: int
    mean: float
    low: float
    high: float
    latency: float
    role: str  # leader, tied, other
    on_front: bool = False


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


def pareto_marked(points: Sequence[Point]) -> list[Point]:
    """`points` with `on_front` set where no other point has at least the quality at no more
    latency, and is strictly better on one of them."""

    def dominated(p: Point) -> bool:
        return any(
            q.mean >= p.mean and q.latency <= p.latency and (q.mean > p.mean or q.latency < p.latency) for q in points
        )

    return [replace(p, on_front=not dominated(p)) for p in points]


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) that cover low..high."""
    if high <= low:
        pad = abs(low) * 0.1 or 1.0
        low, high = low - pad, high + pad
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first, last = math.floor(low / step), math.ceil(high / step)
    return [round(i * step, 12) for i in range(first, last + 1)]


def tick_text(value: float, ticks: Sequence[float]) -> str:
    step = ticks[1] - ticks[0]
    decimals = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{value:.{decimals}f}"


WIDTH, HEIGHT = 900, 460
LEFT, RIGHT, TOP, BOTTOM = 70, 260, 20, 50  # margins; labels and the legend go in the right one


def pareto_svg(points: Sequence[Point], objective: str) -> str:
    span_x = max(p.latency for p in points) - min(p.latency for p in points)
    span_y = max(p.high for p in points) - min(p.low for p in points)
    x_ticks = nice_ticks(
        max(0.0, min(p.latency for p in points) - 0.08 * span_x), max(p.latency for p in points) + 0.08 * span_x
    )
    y_ticks = nice_ticks(min(p.low for p in points) - 0.05 * span_y, max(p.high for p in points) + 0.05 * span_y)
    plot_right, plot_bottom = WIDTH - RIGHT, HEIGHT - BOTTOM

    def x_of(value: float) -> float:
        return LEFT + (value - x_ticks[0]) / (x_ticks[-1] - x_ticks[0]) * (plot_right - LEFT)

    def y_of(value: float) -> float:
        return plot_bottom - (value - y_ticks[0]) / (y_ticks[-1] - y_ticks[0]) * (plot_bottom - TOP)

    parts = [
        f'<svg id="pareto" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{esc(objective)} versus search latency">'
    ]
    parts.append('<g class="axis">')
    for tick in x_ticks:
        x = x_of(tick)
        parts.append(f'<line class="grid" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{plot_bottom}"/>')
        parts.append(f'<text x="{x:.1f}" y="{plot_bottom + 16}" text-anchor="middle">{tick_text(tick, x_ticks)}</text>')
    for tick in y_ticks:
        y = y_of(tick)
        parts.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{plot_right}" y2="{y:.1f}"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick_text(tick, y_ticks)}</text>')
    parts.append(f'<path d="M{LEFT},{TOP} V{plot_bottom} H{plot_right}" fill="none"/>')
    parts.append(
        f'<text x="{(LEFT + plot_right) / 2:.1f}" y="{HEIGHT - 12}" text-anchor="middle">search latency p50 (ms)</text>'
    )
    parts.append(
        f'<text transform="translate(16,{(TOP + plot_bottom) / 2:.1f}) rotate(-90)" text-anchor="middle">'
        f"{esc(objective)}</text></g>"
    )
    front = sorted((p for p in points if p.on_front), key=lambda p: (p.latency, -p.mean))
    if len(front) > 1:
        path = " ".join(f"{x_of(p.latency):.1f},{y_of(p.mean):.1f}" for p in front)
        parts.append(f'<polyline class="pareto-front" points="{path}"/>')
    placed: list[tuple[float, float, float]] = []  # label boxes (x from, x to, baseline y) already drawn
    for p in points:
        x, y = x_of(p.latency), y_of(p.mean)
        label = f"#{p.rank} {shortened(p.label, LABEL_LIMIT)}"
        # below right of the point: the front leaves every point of it up and to the right
        label_x, label_y = x + 9, label_position(x + 9, y + 15, len(label) * 6.2, placed)
        placed.append((label_x, label_x + len(label) * 6.2, label_y))
        classes = f"point {p.role}" + (" on-front" if p.on_front else "")
        tip = f"{p.label}: {objective} {p.mean:.4f} [{p.low:.4f}, {p.high:.4f}], latency p50 {p.latency:.2f} ms" + (
            ", on the Pareto front" if p.on_front else ""
        )
        parts.append(
            f'<g class="configuration" data-run-id="{esc(p.run_id)}"><title>{esc(tip)}</title>'
            f'<line class="interval" x1="{x:.1f}" y1="{y_of(p.low):.1f}" x2="{x:.1f}" y2="{y_of(p.high):.1f}"/>'
            f'<line class="interval" x1="{x - 4:.1f}" y1="{y_of(p.low):.1f}" x2="{x + 4:.1f}" y2="{y_of(p.low):.1f}"/>'
            f'<line class="interval" x1="{x - 4:.1f}" y1="{y_of(p.high):.1f}" x2="{x + 4:.1f}" y2="{y_of(p.high):.1f}"/>'
            f'<circle class="{classes}" data-config="{esc(p.label)}" data-run-id="{esc(p.run_id)}" '
            f'cx="{x:.1f}" cy="{y:.1f}" r="{7 if p.role == "leader" else 5.5}"/>'
            f'<text class="point-label" x="{label_x:.1f}" y="{label_y:.1f}">{esc(label)}</text></g>'
        )
    parts.append(legend(plot_right + 20, TOP + 10))
    parts.append("</svg>\n")
    return "".join(parts)


def label_position(x: float, y: float, width: float, placed: Sequence[tuple[float, float, float]]) -> float:
    """A baseline near `y` where a label from x to x + width overlaps none already placed: close
    configurations (ties, by design) would otherwise print their labels over each other."""
    for shift in (0, 13, -13, 26, -26, 39, -39, 52, -52):
        candidate = y + shift
        if not any(x < right and left < x + width and abs(candidate - base) < 12 for left, right, base in placed):
            return candidate
    return y


def legend(x: float, y: float) -> str:
    entries = (
        ('class="point leader"', "leader (best mean)"),
        ('class="point tied"', "tied with the leader"),
        ('class="point other"', "significantly worse"),
        ('class="point other on-front"', "on the Pareto front"),
    )
    rows = [f'<g class="legend" transform="translate({x},{y})">']
    for i, (attributes, text) in enumerate(entries):
        # legend swatches are circles too, but not class "point" (which marks configurations)
        rows.append(
            f'<circle {attributes.replace("point", "swatch")} cx="6" cy="{i * 20}" r="5.5"/>'
            f'<text x="18" y="{i * 20 + 4}">{text}</text>'
        )
    rows.append(f'<line class="pareto-front" x1="0" y1="{len(entries) * 20}" x2="12" y2="{len(entries) * 20}"/>')
    rows.append(f'<text x="18" y="{len(entries) * 20 + 4}">Pareto front</text></g>')
    return "".join(rows)


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
        rows.append(f'<tr data-run-id="{esc(run_id)}"><td class="text config">{esc(labels[run_id])}</td>{cells}</tr>\n')
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
    head += "".join(f'<th class="num" title="run {esc(r)}">{esc(labels.get(r, r))}</th>' for r in runs)
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


def differing_section(results: SweepResults, labels: Mapping[str, str]) -> str:
    differing = results.differing
    if differing.shape[1] == 0:
        return '<p class="note">Every configuration has the same config values.</p>\n'
    order = [r for r in results.leaderboard.index if r in differing.index]
    order += [r for r in differing.index if r not in order]
    head = "<th>config</th>" + "".join(f"<th>{esc(k)}</th>" for k in differing.columns)
    rows = []
    for run_id in order:
        cells = "".join(f"<td>{'-' if is_missing_value(v) else esc(v)}</td>" for v in differing.loc[run_id])
        rows.append(
            f'<tr data-run-id="{esc(run_id)}"><td class="text config">{esc(labels.get(run_id, run_id))}</td>{cells}</tr>\n'
        )
    return table("differing", head, rows)


def is_missing_value(value: object) -> bool:
    """A key the run lacks (NaN or None); any other value, numeric or text, is shown."""
    return value is None or (isinstance(value, float) and math.isnan(value))
