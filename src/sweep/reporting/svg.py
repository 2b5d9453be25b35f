"""The quality-versus-latency plot of a sweep's report, drawn by matplotlib as SVG to inline in the page.

One point per configuration with its interval as an error bar, the Pareto front through them, a
label beside each point that overlaps no other label, point or interval where there is room, and a
legend; the leader is drawn above everything else. Latency is on a log scale when the slowest
configuration takes more than `LOG_FROM` times as long as the fastest (a dense model beside
lexical ones), where a linear axis would pile the fast ones on one point. Each point's group
carries its run id (`data-run-id`) and a `<title>`, the tooltip that names the configuration and
its numbers. `inline_svg` makes any of the report's figures an element of the page (the
objective-versus-setting curves of `sweep.reporting.curves` too), in the same style (`styled`).

Text stays text (`svg.fonttype` "none"): a fraction of the size of glyph outlines, readable by a
screen reader and found by the browser's search. It is measured in DejaVu Sans, which the page
asks for and which is wider than the sans-serif fonts a browser falls back to without it (Arial,
Helvetica, Segoe UI), so labels placed apart here stay apart there. The same
points give the same bytes: no date, a fixed hash salt for matplotlib's ids. matplotlib is imported
when the first plot is drawn: the commands that import the page but draw nothing start faster.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sweep.reporting.formatting import number
from sweep.text import shortened

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.text import Annotation
    from matplotlib.transforms import Bbox

LABEL_LIMIT = 40  # characters of a configuration's label next to its point in the plot
LOG_FROM = 10  # the latency axis is logarithmic when max / min latency exceeds this

COLOURS = {"leader": "#c0392b", "tied": "#e67e22", "other": "#5b7a99"}
ROLES = {"leader": "leader (best mean)", "tied": "tied with the leader", "other": "significantly worse"}
FRONT_COLOUR = "#2c3e50"
FRONT_LINE = {"color": FRONT_COLOUR, "linestyle": (0, (5, 4)), "linewidth": 1.5}  # dashed
TEXT_COLOUR = "#333333"  # 12.6:1 on white
STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "golden-sweep",  # ids (clip paths, markers) from the content, not from a random salt
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "font.size": 9,
}
METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}  # no <metadata>: no date, no URL


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

    def tooltip(self, objective: str) -> str:
        return (
            f"#{self.rank} {self.label}: {objective} {number(self.mean)} [{number(self.low)}, {number(self.high)}], "
            f"latency p50 {number(self.latency, 2)} ms; {ROLES[self.role]}"
            + (", on the Pareto front" if self.on_front else "")
        )


def pareto_svg(points: Sequence[Point], objective: str) -> str:
    """The plot as an `<svg id="pareto">` element for an HTML page (`inline_svg`): each point's
    group with its run id and tooltip, each label's with the tooltip."""
    groups = {}
    for i, point in enumerate(points):
        groups[f"configuration-{i}"] = ({"data-run-id": point.run_id}, point.tooltip(objective))
        groups[f"configuration-{i}-label"] = ({}, point.tooltip(objective))
    with styled():
        figure = pareto_figure(points, objective)
    return inline_svg(figure, "pareto", f"{objective} versus search latency", groups)


def styled() -> AbstractContextManager[object]:
    """matplotlib's settings for the report's plots (`STYLE`), while a figure is made and saved:
    its text is measured in the font and size the page shows."""
    import matplotlib

    return matplotlib.rc_context(STYLE)


def inline_svg(
    figure: Figure, element_id: str, description: str, groups: Mapping[str, tuple[Mapping[str, str], str]]
) -> str:
    """`figure` as an `<svg id=element_id>` element for an HTML page: no XML prolog, no namespace
    URLs, `description` as its accessible name; the group of each artist whose gid is a key of
    `groups` (attributes, tooltip) gets the attributes and the tooltip as its `<title>`."""
    with styled():
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata=METADATA)
    width, height = (f"{inches * 72:g}" for inches in figure.get_size_inches())
    svg = buffer.getvalue()
    # matplotlib's root element names its namespaces by URL, which a page inside HTML does without
    root = (
        f'<svg id="{element_id}" width="{width}pt" height="{height}pt" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{html.escape(description)}">'
    )
    svg = root + svg[svg.index(">", svg.index("<svg")) + 1 :]

    def with_tooltip(match: re.Match[str]) -> str:
        if match[1] not in groups:
            return match[0]
        attributes, tooltip = groups[match[1]]
        data = "".join(f' {name}="{html.escape(value)}"' for name, value in attributes.items())
        return f"{match[0][:-1]}{data}><title>{html.escape(tooltip)}</title>"

    return re.sub(r'<g id="([^"]+)">', with_tooltip, svg)


def pareto_figure(points: Sequence[Point], objective: str) -> Figure:
    """The plot as a matplotlib figure: the point of `points[i]` is artist `configuration-i`, its
    label `configuration-i-label`, the front `pareto-front`."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    # 72 dpi: a display pixel is a point of the SVG, so labels are placed in the SVG's own units
    figure = Figure(figsize=(8, 4.4), dpi=72)
    figure.subplots_adjust(left=0.09, right=0.76, bottom=0.12, top=0.97)  # fixed: labels are placed after layout
    axes = figure.add_subplot()
    latencies = [p.latency for p in points]
    log = min(latencies) > 0 and max(latencies) / min(latencies) > LOG_FROM
    if log:
        axes.set_xscale("log")
        # 1, 2 and 5 times powers of ten, written as numbers (not 10^k); across more than 3 decades,
        # powers of ten alone
        wide = max(latencies) / min(latencies) > 1000
        axes.xaxis.set_major_locator(LogLocator(subs=(1.0,) if wide else (1.0, 2.0, 5.0)))
        axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axes.xaxis.set_minor_locator(NullLocator())
    else:
        axes.ticklabel_format(axis="x", useOffset=False)
    axes.margins(x=0.08, y=0.1)
    axes.grid(color="#e8e8e8", linewidth=0.8)
    axes.set_axisbelow(True)
    axes.set_xlabel(f"search latency p50 (ms{', log scale' if log else ''})")
    axes.set_ylabel(objective)
    front = sorted((p for p in points if p.on_front), key=lambda p: (p.latency, -p.mean))
    if len(front) > 1:
        axes.plot([p.latency for p in front], [p.mean for p in front], gid="pareto-front", zorder=2, **FRONT_LINE)
    for i, p in enumerate(points):
        axes.errorbar(
            p.latency, p.mean, yerr=[[p.mean - p.low], [p.high - p.mean]], fmt="none", ecolor="#666666", capsize=4
        )
        axes.plot(
            p.latency,
            p.mean,
            gid=f"configuration-{i}",
            clip_on=False,
            zorder=on_top(p.role),
            **marker(p.role, p.on_front),
        )
    labels = [
        axes.annotate(
            f"#{p.rank} {shortened(p.label, LABEL_LIMIT)}",
            (p.latency, p.mean),
            xytext=OFFSETS[0],
            textcoords="offset points",
            color=TEXT_COLOUR,
            verticalalignment="center",
            parse_math=False,  # a label with $ in it is a label, not TeX
            bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
            gid=f"configuration-{i}-label",
            zorder=4,
        )
        for i, p in enumerate(points)
    ]
    axes.autoscale_view()  # the limits the labels are placed against, before they are placed
    place_labels(axes, points, labels)
    axes.legend(handles=legend_handles(), loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return figure


def marker(role: str, on_front: bool) -> dict[str, object]:
    """Line2D properties of a point: its role's colour, larger for the leader, a dark ring on the front."""
    return {
        "marker": "o",
        "linestyle": "none",
        "markersize": 10 if role == "leader" else 8,
        "markerfacecolor": COLOURS[role],
        "markeredgecolor": FRONT_COLOUR if on_front else "white",
        "markeredgewidth": 2 if on_front else 1,
    }


def on_top(role: str) -> int:
    """A point's z-order: the leader above every other point, label and line, never hidden under them."""
    return 5 if role == "leader" else 3


def legend_handles() -> list[Line2D]:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], label=text, **marker(role, False)) for role, text in ROLES.items()]
    handles.append(Line2D([], [], label="on the Pareto front", **marker("other", True)))
    handles.append(Line2D([], [], label="Pareto front", **FRONT_LINE))
    return handles


# Where a label goes, in points from its point, tried in order: below right (on the front every
# point has the others up and to the right of it), below left, above right, above left, then a
# line further down and up each time (a line is 13 points, a label 10), as far as the axes go; a
# label is centred on its y.
BESIDE, LINE = 9, 13
OFFSETS = [(side * BESIDE, sign * (BESIDE + LINE * line)) for line in range(20) for sign in (-1, 1) for side in (1, -1)]
CLEARANCE = 5  # points a label keeps from a point and from its interval's line and caps


def place_labels(axes: Axes, points: Sequence[Point], labels: Sequence[Annotation]) -> None:
    """Each label, in order, at the first offset where it stays inside the axes and overlaps no label
    placed before it, nor any point or interval; else at the first offset inside the axes that
    overlaps no label (a point or interval under it); else below right. Close configurations
    (ties, by design) would otherwise print their labels over each other. A label moved a line or
    more away from its point gets a thin line to it."""
    from matplotlib.transforms import Bbox

    to_display = axes.transData.transform
    obstacles = []
    for p in points:
        (x, low), (_, high) = to_display([(p.latency, p.low), (p.latency, p.high)])
        obstacles.append(Bbox.from_extents(x - CLEARANCE, low - CLEARANCE, x + CLEARANCE, high + CLEARANCE))
    inside = axes.get_window_extent()
    placed: list[Bbox] = []
    for label in labels:
        clear_of_labels = None
        for offset in OFFSETS:
            box = moved(label, offset)
            if not fully_inside(box, inside) or any(box.overlaps(other) for other in placed):
                continue
            clear_of_labels = clear_of_labels or offset
            if not any(box.overlaps(obstacle) for obstacle in obstacles):
                break
        else:
            offset = clear_of_labels or OFFSETS[0]
            box = moved(label, offset)
        placed.append(box)
        if abs(offset[1]) > BESIDE:
            # an annotation without text is matplotlib's way to draw a line between a point and an offset
            axes.annotate(
                "",
                label.xy,
                xytext=offset,
                textcoords="offset points",
                arrowprops={"arrowstyle": "-", "color": "#888888", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 5},
                zorder=1,
            )


def moved(label: Annotation, offset: tuple[float, float]) -> Bbox:
    """Puts `label` at `offset` points from its point, on the side the offset points to, and returns
    the box its text covers (display units), with a point of margin."""
    label.xyann = offset
    label.set_horizontalalignment("left" if offset[0] > 0 else "right")
    return label.get_window_extent().padded(1)


def fully_inside(box: Bbox, area: Bbox) -> bool:
    return area.x0 <= box.x0 and box.x1 <= area.x1 and area.y0 <= box.y0 and box.y1 <= area.y1
