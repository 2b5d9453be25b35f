"""A trial's plots, drawn from its record: recall@k, the headline metric per type, abstention.

`trial_figures` returns matplotlib figures by artifact path; `sweep.tracking.records.save_record`
stores them as PNGs beside the record. matplotlib is imported when the first plot is drawn, on its
file-only backend: runs have no display.
"""

from __future__ import annotations

import math
from typing import Any

from sweep.evaluation.record import TrialRecord
from sweep.evaluation.registry import HEADLINE


def _pyplot() -> Any:
    """pyplot on the file-only backend: runs have no display."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot


def trial_figures(record: TrialRecord, headline: str = HEADLINE) -> dict[str, Any]:
    """Artifact path -> figure: recall@k over k, `headline` per question type, and the abstention
    calibration when the record has a curve. The caller closes them (`close_figures`)."""
    figures = {}
    recalls = sorted(
        (int(name.rsplit("_", 1)[1]), value)
        for name, value in record.metrics.items()
        if name.startswith("recall_at_") and name.rsplit("_", 1)[1].isdigit()
    )
    if recalls:
        figures["plots/recall_at_k.png"] = _recall_at_k(recalls)
    per_type = record.tables.get("per_type")
    if per_type is not None and headline in per_type:
        by_type = per_type.set_index("type")[headline].dropna()
        if len(by_type):
            figures[f"plots/{headline}_per_type.png"] = _per_type(by_type, headline)
    curve = record.tables.get("abstention_curve")
    if curve is not None and len(curve) and record.calibrated_on:
        suggested = record.metrics.get("abstain/suggested_min_score", math.nan)
        figures["plots/abstention_calibration.png"] = _calibration(curve, record.calibrated_on, suggested)
    return figures


def close_figures(figures: dict[str, Any]) -> None:
    plt = _pyplot()
    for figure in figures.values():
        plt.close(figure)


def _recall_at_k(recalls: list[tuple[int, float]]) -> Any:
    fig, ax = _pyplot().subplots(figsize=(5, 3.5))
    ks = [k for k, _ in recalls]
    ax.plot(ks, [v for _, v in recalls], marker="o")
    ax.set(xscale="log", xlabel="k", ylabel="recall@k", ylim=(0, 1.02), title="Recall@k (answerable questions)")
    # a tick at each k measured, labelled as it is written: no powers of ten, no minor ticks
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.minorticks_off()
    ax.grid(alpha=0.3)
    return fig


def _per_type(by_type: Any, metric: str) -> Any:
    fig, ax = _pyplot().subplots(figsize=(5, 0.4 * len(by_type) + 1.2))
    ax.barh(by_type.index.astype(str), by_type.to_numpy())
    ax.set(xlim=(0, 1), xlabel=metric, title=f"{metric} per question type")
    fig.tight_layout()
    return fig


def _calibration(curve: Any, metric: str, suggested: float) -> Any:
    """The four rates over the threshold, the suggested one marked."""
    lines = {
        "correct_rate": "unanswerable that abstain",
        "false_rate": "answerable that abstain",
        metric: f"{metric} kept",
        "balanced_accuracy": "balanced accuracy",
    }
    fig, ax = _pyplot().subplots(figsize=(6, 4))
    for column, label in lines.items():
        # each value holds from just above the previous observed score up to its own threshold
        ax.plot(curve["threshold"], curve[column], drawstyle="steps-pre", marker=".", label=label)
    if math.isfinite(suggested):
        ax.axvline(suggested, color="grey", linestyle="--", label=f"suggested {suggested:.3g}")
    ax.set(
        xlabel="minimum top score (threshold)",
        ylabel="share of questions / mean",
        ylim=(-0.02, 1.02),
        title="Abstention threshold calibration",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.12, top=0.93)  # fixed labels: no layout pass needed
    return fig
