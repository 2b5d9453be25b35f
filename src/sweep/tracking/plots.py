"""A trial's plots as PNG artifacts of its run: recall@k, the headline metric per type, abstention.

matplotlib is imported when the first plot is drawn, on its file-only backend: runs have no display.
"""

from __future__ import annotations

import math
from typing import Any

import mlflow
import pandas as pd

from sweep.evaluation import Evaluation
from sweep.evaluation.abstention import Calibration


def _pyplot() -> Any:
    """pyplot on the file-only backend: runs have no display."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot


def log_plots(evaluation: Evaluation) -> None:
    """recall@k over k, and the headline metric per question type, as PNG artifacts."""
    plt = _pyplot()
    recalls = sorted((int(m.rsplit("_", 1)[1]), v) for m, v in evaluation.mean.items() if m.startswith("recall_at_"))
    if recalls:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ks = [k for k, _ in recalls]
        ax.plot(ks, [v for _, v in recalls], marker="o")
        ax.set(xscale="log", xlabel="k", ylabel="recall@k", ylim=(0, 1.02), title="Recall@k (answerable questions)")
        # a tick at each k measured, labelled as it is written: no powers of ten, no minor ticks
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        mlflow.log_figure(fig, "plots/recall_at_k.png")
        plt.close(fig)
    metric = evaluation.headline
    by_type = evaluation.by("type")[metric].dropna()
    if len(by_type):
        fig, ax = plt.subplots(figsize=(5, 0.4 * len(by_type) + 1.2))
        ax.barh(by_type.index.astype(str), by_type.to_numpy())
        ax.set(xlim=(0, 1), xlabel=metric, title=f"{metric} per question type")
        fig.tight_layout()
        mlflow.log_figure(fig, f"plots/{metric}_per_type.png")
        plt.close(fig)


def log_calibration_plot(calibration: Calibration, curve: pd.DataFrame) -> None:
    """`plots/abstention_calibration.png`: the four rates over the threshold, the suggested one marked."""
    plt = _pyplot()
    lines = {
        "correct_rate": "unanswerable that abstain",
        "false_rate": "answerable that abstain",
        calibration.metric: f"{calibration.metric} kept",
        "balanced_accuracy": "balanced accuracy",
    }
    fig, ax = plt.subplots(figsize=(6, 4))
    for column, label in lines.items():
        # each value holds from just above the previous observed score up to its own threshold
        ax.plot(curve["threshold"], curve[column], drawstyle="steps-pre", marker=".", label=label)
    if math.isfinite(calibration.suggested):
        ax.axvline(calibration.suggested, color="grey", linestyle="--", label=f"suggested {calibration.suggested:.3g}")
    ax.set(
        xlabel="minimum top score (threshold)",
        ylabel="share of questions / mean",
        ylim=(-0.02, 1.02),
        title="Abstention threshold calibration",
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.12, top=0.93)  # fixed labels: no layout pass needed
    mlflow.log_figure(fig, "plots/abstention_calibration.png")
    plt.close(fig)
