"""The quality-versus-latency plot of a sweep's report as static SVG: points with their intervals,
the Pareto front through them, labels that do not overlap, and a legend. Latency is on a log scale
when the slowest configuration takes more than `LOG_FROM` times as long as the fastest (a dense
model beside lexical ones), where a linear axis would pile the fast ones on one point.

Pure text: no script, nothing fetched; the page (`sweep.reporting.html`) holds the styles.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sweep.reporting.formatting import number
from sweep.text import shortened

LABEL_LIMIT = 40  # characters of a configuration's label next to its point in the plot


def esc(value: object) -> str:
    return html.escape(str(value))


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


def log_ticks(low: float, high: float) -> list[float]:
    """1, 2 and 5 times powers of ten (powers of ten alone across more than 3 decades), from the
    largest at or below `low` (> 0) to the smallest at or above `high`."""
    multiples = (1,) if math.log10(high / low) > 3 else (1, 2, 5)
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    candidates = [round(m * 10.0**power, 12) for power in decades for m in multiples]
    first = max(c for c in candidates if c <= low)
    last = min(c for c in candidates if c >= high)
    return [c for c in candidates if first <= c <= last]


def tick_text(value: float, ticks: Sequence[float]) -> str:
    step = ticks[1] - ticks[0]
    decimals = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{value:.{decimals}f}"


@dataclass(frozen=True)
class Axis:
    """Where a value falls between the first and last tick (0 to 1), linearly or on a log scale."""

    ticks: list[float]
    log: bool = False

    def share(self, value: float) -> float:
        scale = math.log10 if self.log else float
        return (scale(value) - scale(self.ticks[0])) / (scale(self.ticks[-1]) - scale(self.ticks[0]))

    def text(self, tick: float) -> str:
        return f"{tick:g}" if self.log else tick_text(tick, self.ticks)


LOG_FROM = 10  # the latency axis is logarithmic when max / min latency exceeds this


def latency_axis(latencies: Sequence[float]) -> Axis:
    low, high = min(latencies), max(latencies)
    if low > 0 and high / low > LOG_FROM:
        return Axis(log_ticks(low / 1.2, high * 1.2), log=True)
    span = high - low
    return Axis(nice_ticks(max(0.0, low - 0.08 * span), high + 0.08 * span))


WIDTH, HEIGHT = 800, 440
LEFT, RIGHT, TOP, BOTTOM = 64, 180, 20, 50  # margins; the legend goes in the right one


def pareto_svg(points: Sequence[Point], objective: str) -> str:
    x_axis = latency_axis([p.latency for p in points])
    span_y = max(p.high for p in points) - min(p.low for p in points)
    y_axis = Axis(nice_ticks(min(p.low for p in points) - 0.05 * span_y, max(p.high for p in points) + 0.05 * span_y))
    plot_right, plot_bottom = WIDTH - RIGHT, HEIGHT - BOTTOM

    def x_of(value: float) -> float:
        return LEFT + x_axis.share(value) * (plot_right - LEFT)

    def y_of(value: float) -> float:
        return plot_bottom - y_axis.share(value) * (plot_bottom - TOP)

    parts = [
        f'<svg id="pareto" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{esc(objective)} versus search latency">'
    ]
    parts.append('<g class="axis">')
    for tick in x_axis.ticks:
        x = x_of(tick)
        parts.append(f'<line class="grid" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{plot_bottom}"/>')
        parts.append(f'<text x="{x:.1f}" y="{plot_bottom + 16}" text-anchor="middle">{x_axis.text(tick)}</text>')
    for tick in y_axis.ticks:
        y = y_of(tick)
        parts.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{plot_right}" y2="{y:.1f}"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{y_axis.text(tick)}</text>')
    parts.append(f'<path d="M{LEFT},{TOP} V{plot_bottom} H{plot_right}" fill="none"/>')
    parts.append(
        f'<text x="{(LEFT + plot_right) / 2:.1f}" y="{HEIGHT - 12}" text-anchor="middle">'
        f"search latency p50 (ms{', log scale' if x_axis.log else ''})</text>"
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
        width = len(label) * 6.2
        # below right of the point (the front leaves every point of it up and to the right), or below
        # left where that would run into the legend
        label_x = x + 9 if x + 9 + width <= plot_right + 10 else max(2.0, x - 9 - width)
        label_y = label_position(label_x, y + 15, width, placed)
        placed.append((label_x, label_x + width, label_y))
        classes = f"point {p.role}" + (" on-front" if p.on_front else "")
        tip = (
            f"{p.label}: {objective} {number(p.mean)} [{number(p.low)}, {number(p.high)}], latency p50 {number(p.latency, 2)} ms"
            + (", on the Pareto front" if p.on_front else "")
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
