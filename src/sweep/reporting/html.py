"""A sweep's report as one self-contained HTML page (`report.html` on the parent run).

The page opens with what the sweep was: its run id, the golden set (file, digest, questions), the
git commit and the date it started. Then, for the sweep's objective:

1. the leaderboard: each configuration's mean with its 95% bootstrap interval, the difference from
   the leader with its own paired 95% interval and its Holm-corrected paired p-value, the verdict
   (best, tied, worse), the number of questions, the cost columns that were logged ("cached" for
   a stage whose result came from a cache: `CACHED_BY`); failed runs last; the minimum detectable
   effect;
2. the objective against each numeric setting the sweep varied, the others held at the leader's,
   a hybrid's members alone as reference lines (`sweep.reporting.curves`);
3. a quality-versus-latency plot (matplotlib's SVG, `sweep.reporting.svg`): one point per
   finished configuration with its interval as an error bar, the Pareto front drawn through, each
   point's tooltip naming it and its numbers;
4. a configuration x question-type heat map of the objective, with each type's number of
   questions, and the worst questions (`sweep.reporting.question_sections`);
5. the config keys whose values differ between the configurations (`sweep.reporting.configs`).

A configuration is labelled by the overrides that vary (`sweep.reporting.configs`); the page names
the shared ones once. Everything is inline (CSS, SVG) and nothing is fetched, so the page works
offline and inside MLflow's artifact viewer; it has no script and no link at all (the viewer shows
it in a sandboxed frame of a blob: URL, where even a link to a section of the page does nothing),
only the plots' references to their own parts (`xlink:href="#..."`, `url(#...)`), which draw there.
At the viewer's width in a wide window (about 860 px) nothing on the page is wider than the frame;
in its narrow frame (586 px at a 1024 px window) the leaderboard's rows stack their cells, each
under its column's name, rather than be cut. In every plot the leader is drawn above the rest.
Text has at least WCAG AA contrast (4.5:1) on its background, heat cells' included. All user text
is HTML-escaped. Statistics show 4 decimals, costs 2 (milliseconds, seconds) or a binary unit
(bytes); a missing value shows "-". The same results always give the same page (nothing depends on
the time it is drawn or on randomness).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import numpy as np
import pandas as pd

from sweep.evaluation.leaderboard import SweepResults
from sweep.evaluation.registry import BY_NAME, COSTS, LATENCY
from sweep.reporting.configs import config_labels, leaderboard_configs, settings_that_differ, shared_overrides
from sweep.reporting.curves import curves_section
from sweep.reporting.formatting import cost, is_missing, is_true, number, share
from sweep.reporting.html_parts import esc, label_html, table
from sweep.reporting.question_sections import heatmap_section, worst_section
from sweep.reporting.svg import Point, pareto_svg

# a cost -> the stat that says which share of that stage came from a cache (1: none of it was computed)
CACHED_BY = {"time/embed_s": "embed/cache_hit"}
STACK_BELOW = 720  # px: a narrower page shows each leaderboard row as its cells stacked, each named ...
COLUMN_PX = 72  # ... and so does one narrower than its columns take, this much each (costs add columns)

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       margin: 1rem; color: #1d1d1f; background: #fff; line-height: 1.4; }
h1 { font-size: 1.4rem; margin-bottom: 0.2rem; overflow-wrap: anywhere; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; }
p.summary, p.note, p.mde, figcaption { color: #4d4d4d; font-size: 0.9rem; }
code { font-size: 0.85rem; overflow-wrap: anywhere; }
dl#provenance { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 0.1rem 0.8rem;
                font-size: 0.9rem; margin: 0.5rem 0; }
dl#provenance dt { font-weight: 600; }
dl#provenance dd { margin: 0; min-width: 0; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.35rem; vertical-align: top; }
th { background: #f4f4f6; text-align: left; font-weight: 600; }
th.num { text-align: right; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
div.wide { overflow-x: auto; max-width: 100%; }
td.question { min-width: min(14rem, 35vw); max-width: 32rem; overflow-wrap: anywhere; }
td.question span.type { color: #4d4d4d; white-space: nowrap; }
#worst th span.config { font-weight: normal; overflow-wrap: anywhere; }
td.question details { margin-top: 0.3rem; font-size: 0.8rem; }
ol.every { margin: 0.2rem 0 0 1.2rem; padding: 0; }
ol.every span.value { padding: 0 0.2rem; font-variant-numeric: tabular-nums; }
td.verdict { white-space: nowrap; }
tr.unscored td { color: #5c5c5c; background: #fafafa; }
tr.leader td { background: #fdf3f2; }
tr.tied td { background: #fef8ef; }
span.ci { color: #5c5c5c; font-size: 0.8rem; white-space: normal; }
span.count { color: #4d4d4d; font-weight: normal; font-size: 0.75rem; }
span.mark { font-weight: 600; padding: 0 0.3rem; border-radius: 3px; white-space: nowrap; }
span.mark.leader { color: #fff; background: #c0392b; }
span.mark.tie { color: #7a4100; background: #fbd9a8; }
span.mark.worse { color: #fff; background: #4f6479; }
td.heat { text-align: right; font-variant-numeric: tabular-nums; min-width: 3.5rem; }
svg { max-width: 100%; height: auto; }
figure.curve { margin: 1rem 0; }
@media (max-width: STACK_BELOWpx) {
  table.stacked thead { display: none; }
  table.stacked, table.stacked tbody { display: block; }
  table.stacked tr { display: flex; flex-wrap: wrap; border: 1px solid #ddd; margin-bottom: 0.4rem; }
  table.stacked td { display: block; box-sizing: border-box; border: none; flex: 1 0 6.5rem; text-align: left; }
  table.stacked td:first-child { flex: 0 0 auto; }
  table.stacked td:first-child::before { content: none; }
  table.stacked td.config { flex: 1 0 80%; font-weight: 600; }
  table.stacked td::before { content: attr(data-label); display: block; font-size: 0.75rem; color: #4d4d4d;
                              font-weight: normal; white-space: normal; }
}
"""


def render(results: SweepResults, title: str, sweep_run_id: str = "", started_ms: int | None = None) -> str:
    """The whole page for `results`, titled `title`: the sweep's run `sweep_run_id`, started at
    `started_ms` (milliseconds since the epoch, as MLflow keeps a run's start)."""
    configs = leaderboard_configs(results)
    labels = config_labels(configs)
    scored = int(results.leaderboard["mean"].notna().sum())
    summary = (
        f"Objective <b>{esc(results.objective)}</b>: {len(results.leaderboard)} configurations, {scored} scored; "
        f"{results.n_questions} answerable questions. Intervals are 95% bootstrap intervals over questions: a "
        f"configuration's own, and under its difference from the leader the paired one (the questions' spread "
        f"cancels out, so two configurations' own intervals can overlap while their difference is clear); p is a "
        f"paired randomization test against the leader, Holm-corrected across the sweep; a configuration is tied "
        f"with the best when that p is at least {results.alpha}, and worse when it is below."
    )
    shared = shared_overrides(configs)
    if shared:
        summary += (
            f" Configurations are named by the overrides that vary; every one also has "
            f"<code>{label_html(' '.join(shared))}</code>."
        )
    sections = (
        ("leaderboard-section", "Leaderboard", leaderboard_section(results, labels)),
        ("curves-section", f"{results.objective} by setting", curves_section(results, configs, labels)),
        ("pareto-section", "Quality versus latency", pareto_section(results, labels)),
        ("heatmap-section", "Per question type", heatmap_section(results, labels)),
        ("worst-section", "Worst questions", worst_section(results, labels)),
        ("differing-section", "Config keys that differ", differing_section(results, configs, labels)),
    )
    body = "".join(
        f'<section id="{anchor}">\n<h2>{esc(heading)}</h2>\n{content}</section>\n'
        for anchor, heading, content in sections
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{style(results)}</style>\n</head>\n<body>\n"
        f"<h1>{esc(title)}</h1>\n{provenance(results, sweep_run_id, started_ms)}"
        f'<p class="summary">{summary}</p>\n{body}</body>\n</html>\n'
    )


def style(results: SweepResults) -> str:
    """The page's CSS, the leaderboard stacking its cells below `STACK_BELOW` px or below the width
    its columns need (`COLUMN_PX` each), whichever is wider: a sweep with more costs stacks sooner."""
    columns = len(leaderboard_headers(results)[0])
    return STYLE.replace("STACK_BELOW", str(max(STACK_BELOW, COLUMN_PX * columns)))


def provenance(results: SweepResults, sweep_run_id: str, started_ms: int | None) -> str:
    """What the sweep was: its run, the golden set it was scored on, the commit it ran, when it started."""
    unknown = "-"

    def codes(values: tuple[str, ...]) -> str:
        return ", ".join(f"<code>{label_html(v)}</code>" for v in values) or unknown

    questions = len(results.questions)
    golden = (
        f"{codes(results.golden_paths)}, digest {codes(results.golden_digests)}: {questions} questions scored, "
        f"{results.n_questions} answerable"
    )
    started = (
        datetime.fromtimestamp(started_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC") if started_ms else unknown
    )
    fields = {
        "sweep-run": ("sweep run", f"<code>{esc(sweep_run_id)}</code>" if sweep_run_id else unknown),
        "golden": ("golden set", golden),
        "commit": ("commit", codes(results.commits)),
        "started": ("started", started),
    }
    items = "".join(f'<dt>{name}</dt><dd id="{key}">{value}</dd>\n' for key, (name, value) in fields.items())
    return f'<dl id="provenance">\n{items}</dl>\n'


# --- 1. leaderboard -----------------------------------------------------------------------------

MARKS = {
    "leader": '<span class="mark leader" title="the highest mean">best</span>',
    "tied": '<span class="mark tie" title="not significantly worse than the best">= tied</span>',
    "worse": '<span class="mark worse" title="significantly worse than the best (p (Holm) below alpha)">worse</span>',
}
SLOWER = (
    '<span class="mark worse slower" title="significantly slower than the fastest (paired test over the questions '
    'timed together, Holm-corrected)">slower</span>'
)


def leaderboard_headers(results: SweepResults) -> tuple[list[str], list[str]]:
    """The leaderboard's column headers, and the costs among them (the registry's, where logged)."""
    costs = [c for c in COSTS if c in results.leaderboard.columns]
    headers = ["#", "config", f"{results.objective} (95% CI)", "delta vs best (95% CI)", "p (Holm)", "verdict", "n"]
    return headers + [BY_NAME[c].label for c in costs], costs


def leaderboard_section(results: SweepResults, labels: Mapping[str, str]) -> str:
    board = results.leaderboard
    headers, costs = leaderboard_headers(results)
    text_columns = {"config", "verdict"}
    head = "".join(f"<th{'' if h in text_columns else ' class=num'}>{esc(h)}</th>" for h in headers)
    rows, rank = [], 0
    for run_id, row in board.iterrows():
        scored = not is_missing(row["mean"])
        rank += scored
        if not scored:
            kind = "unscored"
        else:
            kind = "leader" if rank == 1 else "tied" if is_true(row["tied_with_best"]) else "worse"
        verdict = MARKS[kind] if scored else esc(row["status"] if row["status"] != "FINISHED" else "no value")
        cells = [
            ("num", rank if scored else "-"),
            ("config", label_html(labels[run_id])),
            ("num", f'<span class="mean">{number(row["mean"])}</span>{interval(row, "ci_low", "ci_high", scored)}'),
            ("num", f"{number(row['delta'])}{interval(row, 'delta_low', 'delta_high', kind != 'leader')}"),
            ("num", number(row["p_holm"])),
            ("verdict", verdict),
            ("num", number(row["n"], 0)),
            *(("num", cost_cell(c, row)) for c in costs),
        ]
        tds = "".join(
            f'<td class="{css}" data-label="{esc(header)}"{title(css, run_id)}>{content}</td>'
            for header, (css, content) in zip(headers, cells)
        )
        rows.append(f'<tr data-run-id="{esc(run_id)}" class="{kind}">{tds}</tr>\n')
    return table("leaderboard", head, rows, "stacked") + f'<p class="mde">{esc(results.mde_line())}</p>\n'


def interval(row: pd.Series, low: str, high: str, shown: bool) -> str:
    """A 95% interval under its value, where there is one to show."""
    if not shown or low not in row.index or is_missing(row[low]):
        return ""
    return f'<br><span class="ci">[{number(row[low])}, {number(row[high])}]</span>'


def title(css: str, run_id: str) -> str:
    return f' title="run {esc(run_id)}"' if css == "config" else ""


def cost_cell(name: str, row: pd.Series) -> str:
    """A cost as the registry declares its unit; "cached" where none of that stage was computed (its
    `CACHED_BY` share is 1), with the share where part of it was."""
    cached = row.get(CACHED_BY.get(name, ""), np.nan)
    if not is_missing(cached) and cached >= 1:
        return f'<span class="cached" title="{esc(CACHED_BY[name])} = 1: read from the cache">cached</span>'
    value = cost(name, row[name])
    value = f"{value} ({share(cached)} cached)" if not is_missing(cached) and cached > 0 else value
    return value + latency_marks(row) if name == LATENCY else value


def latency_marks(row: pd.Series) -> str:
    """Under the latency p50: its 95% interval, and the mark where it is significantly slower than
    the fastest (`sweep.evaluation.latency`)."""
    slower = SLOWER if is_true(row.get("slower")) else ""
    return interval(row, "latency_low", "latency_high", True) + (f"<br>{slower}" if slower else "")


# --- 3. quality versus latency ------------------------------------------------------------------


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
        front = is_true(row.get("on_front"))  # counting significant latency differences only
        points.append(Point(run_id, labels[run_id], rank, row["mean"], low, high, float(latency[run_id]), role, front))
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
        f"other one beats on quality without being significantly slower; a latency difference counts only where "
        f"a paired test over the questions timed together finds it (Holm-corrected), so of configurations as fast "
        f"as each other only the best is on it. Red: the leader; orange: tied with it; blue: the others.</p>\n"
    )
    return pareto_svg(points, results.objective) + caption + note


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
