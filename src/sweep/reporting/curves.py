"""The report's objective-versus-setting curves: how the objective moves with each numeric setting a sweep varied.

A setting is plotted when it is one of the settings that differ (`sweep.reporting.configs`: a
weight, `chunk`, `index.ef_search`, `model.embedder.truncate_dim`), its value is a finite number
in every scored configuration that has it, and at least two values of it are found among the
configurations that have every other differing setting at the leader's value: the others held, so
the curve is the setting's own effect, through the leader. A grid always has such a line; a random
search may not (the section names the settings it left out, and why).

Each point is a configuration: its mean with the 95% interval as an error bar, coloured as in the
quality-versus-latency plot (leader, tied, worse), joined in the setting's order; the leader is
drawn above everything. A composite retriever's members (a hybrid's: `member/<name>/<objective>`)
are drawn alone, dashed: a flat reference line where a member's own score does not move with the
setting (a fusion weight), else through its value at each point. The x axis is logarithmic when
every value is positive and the largest is more than `LOG_FROM` times the smallest (chunk sizes,
ef_search), with the values themselves as ticks up to `TICKS_UP_TO` of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sweep.evaluation.leaderboard import SweepResults
from sweep.reporting.configs import settings_that_differ
from sweep.reporting.formatting import is_true, number
from sweep.reporting.html_parts import esc, label_html
from sweep.reporting.svg import LOG_FROM, ROLES, TEXT_COLOUR, inline_svg, marker, on_top, styled

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TICKS_UP_TO = 12  # distinct values written as the axis's ticks; more: matplotlib's own
MEMBER_COLOURS = ("#1b7837", "#762a83", "#8c510a", "#01665e")  # dark enough for lines on white; cycled
LINE_COLOUR = "#999999"


@dataclass(frozen=True)
class CurvePoint:
    run_id: str
    label: str
    value: float  # the setting's
    mean: float
    low: float
    high: float
    role: str  # leader, tied, other

    def tooltip(self, objective: str) -> str:
        return (
            f"{self.label}: {objective} {number(self.mean)} [{number(self.low)}, {number(self.high)}]; "
            f"{ROLES[self.role]}"
        )


@dataclass(frozen=True)
class Curve:
    setting: str
    points: list[CurvePoint]  # in the setting's order
    held: dict[str, str] = field(default_factory=dict)  # the other differing settings, at the leader's values
    members: dict[str, list[float]] = field(default_factory=dict)  # member -> its own objective at each point


def numeric(values: pd.Series) -> pd.Series | None:
    """`values` (strings, NaN where unset) as floats, NaN kept; None when one that is set is not a
    finite number."""
    try:
        floats = values.dropna().astype(float)
    except (TypeError, ValueError):
        return None
    return floats.reindex(values.index) if np.isfinite(floats).all() else None


def curves(
    results: SweepResults, configs: Mapping[str, str], labels: Mapping[str, str]
) -> tuple[list[Curve], list[str]]:
    """The curve of each numeric setting (the module's doc), and the numeric settings left out:
    fewer than two of their values with the others held at the leader's."""
    board = results.leaderboard
    scored = [r for r in board.index if not pd.isna(board.at[r, "mean"])]
    if len(scored) < 2:
        return [], []
    settings = settings_that_differ(results.differing, configs).reindex(scored)
    leader = scored[0]
    found, left_out = [], []
    for setting in settings.columns:
        values = numeric(settings[setting])
        if values is None or values.nunique() < 2:
            continue
        others = settings.drop(columns=setting)
        held = [r for r in scored if others.loc[r].equals(others.loc[leader])]  # NaN equals NaN here
        on_line = values[held].dropna().sort_values(kind="stable")
        if on_line.nunique() < 2:
            left_out.append(setting)
            continue
        held_at = {k: str(v) for k, v in others.loc[leader].items() if not pd.isna(v)}
        found.append(curve_of(results, labels, setting, on_line, held_at))
    return found, left_out


def curve_of(
    results: SweepResults, labels: Mapping[str, str], setting: str, on_line: pd.Series, held: dict[str, str]
) -> Curve:
    """The curve of `setting` through the runs of `on_line` (run id -> the setting's value, in order)."""
    board = results.leaderboard
    leader = board.index[0]
    points = []
    for run_id, value in on_line.items():
        row = board.loc[run_id]
        role = "leader" if run_id == leader else "tied" if is_true(row["tied_with_best"]) else "other"
        low, high = (row["mean"], row["mean"]) if pd.isna(row["ci_low"]) else (row["ci_low"], row["ci_high"])
        points.append(CurvePoint(run_id, labels[run_id], float(value), row["mean"], low, high, role))
    prefix, suffix = "member/", f"/{results.objective}"
    members = {
        column[len(prefix) : -len(suffix)]: [float(board.at[p.run_id, column]) for p in points]
        for column in board.columns
        if column.startswith(prefix) and column.endswith(suffix)
    }
    members = {name: values for name, values in members.items() if np.isfinite(values).any()}
    return Curve(setting, points, held, members)


def is_flat(values: Sequence[float]) -> bool:
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    return bool(finite.size) and float(np.ptp(finite)) < 1e-12


def curve_figure(curve: Curve, objective: str, gid: str) -> Figure:
    """The curve as a matplotlib figure: point j is artist `<gid>-point-<j>`, member m's line `<gid>-member-<m>`."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    figure = Figure(figsize=(8, 3.6), dpi=72)
    figure.subplots_adjust(left=0.09, right=0.74, bottom=0.15, top=0.96)
    axes = figure.add_subplot()
    xs = [p.value for p in curve.points]
    log = min(xs) > 0 and max(xs) / min(xs) > LOG_FROM
    if log:
        axes.set_xscale("log")
    distinct = sorted(set(xs))
    if len(distinct) <= TICKS_UP_TO:
        axes.xaxis.set_major_locator(FixedLocator(distinct))
        axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axes.xaxis.set_minor_locator(NullLocator())
    axes.margins(x=0.05, y=0.12)
    axes.grid(color="#e8e8e8", linewidth=0.8)
    axes.set_axisbelow(True)
    axes.set_xlabel(curve.setting + (" (log scale)" if log else ""))
    axes.set_ylabel(objective)
    axes.plot(xs, [p.mean for p in curve.points], color=LINE_COLOUR, linewidth=1.2, zorder=2)
    for i, (name, values) in enumerate(curve.members.items()):
        style = {"color": MEMBER_COLOURS[i % len(MEMBER_COLOURS)], "linestyle": (0, (5, 3)), "linewidth": 1.6}
        if is_flat(values):
            level = float(np.nanmean(values))
            axes.axhline(level, gid=f"{gid}-member-{i}", label=f"{name} alone", zorder=1, **style)
        else:
            axes.plot(xs, values, gid=f"{gid}-member-{i}", label=f"{name} alone", marker="x", zorder=1, **style)
    for j, p in enumerate(curve.points):
        axes.errorbar(p.value, p.mean, yerr=[[p.mean - p.low], [p.high - p.mean]], fmt="none", ecolor="#666666")
        axes.plot(
            p.value, p.mean, gid=f"{gid}-point-{j}", clip_on=False, zorder=on_top(p.role), **marker(p.role, False)
        )
    handles = [Line2D([], [], label=ROLES[role], **marker(role, False)) for role in ROLES]
    handles += axes.get_legend_handles_labels()[0]
    legend = axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    for text in legend.get_texts():
        text.set_color(TEXT_COLOUR)
    return figure


def curve_svg(curve: Curve, objective: str, element_id: str) -> str:
    """The curve as an `<svg>` element: each point's group with its run id, value and tooltip, each
    member's line with its name and tooltip."""
    groups: dict[str, tuple[dict[str, str], str]] = {
        f"{element_id}-point-{j}": (
            {"data-run-id": p.run_id, "data-value": f"{p.value:g}", "data-role": p.role},
            p.tooltip(objective),
        )
        for j, p in enumerate(curve.points)
    }
    for i, (name, values) in enumerate(curve.members.items()):
        finite = [v for v in values if math.isfinite(v)]
        said = number(finite[0]) if is_flat(values) else f"{number(min(finite))} to {number(max(finite))}"
        groups[f"{element_id}-member-{i}"] = ({"data-member": name}, f"{name} alone: {objective} {said}")
    with styled():
        figure = curve_figure(curve, objective, element_id)
    return inline_svg(figure, element_id, f"{objective} versus {curve.setting}", groups)


def curves_section(results: SweepResults, configs: Mapping[str, str], labels: Mapping[str, str]) -> str:
    found, left_out = curves(results, configs, labels)
    notes = []
    if left_out:
        notes.append(
            f"Not plotted: {', '.join(f'<code>{esc(s)}</code>' for s in left_out)}: fewer than two of "
            "its values among the configurations with every other setting at the leader's."
        )
    if not found:
        notes.insert(0, "No numeric setting varies with the others held at the leader's values.")
        return "".join(f'<p class="note">{n}</p>\n' for n in notes)
    parts = []
    for i, curve in enumerate(found):
        held = " ".join(f"{k}={v}" for k, v in curve.held.items())
        members = ", ".join(esc(name) for name in curve.members)
        parts.append(
            f'<figure class="curve" data-setting="{esc(curve.setting)}">\n'
            f"{curve_svg(curve, results.objective, f'curve-{i}')}\n"
            f"<figcaption>{esc(results.objective)} (mean, 95% interval as the bar) against "
            f"<code>{esc(curve.setting)}</code>, {len(curve.points)} configurations"
            + (f", every other setting as the leader has it: <code>{label_html(held)}</code>" if held else "")
            + (f". Dashed: each member alone ({members})." if members else ".")
            + "</figcaption>\n</figure>\n"
        )
    return "".join(parts) + "".join(f'<p class="note">{n}</p>\n' for n in notes)
