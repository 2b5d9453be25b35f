"""How `python -m sweep.judge agree` and `audit` write what they found: lines for people, and JSON.

κ and τ show 3 decimals, means 4; an undefined κ is "undefined" with its reason (null in JSON).
A verdict names the configuration that is significantly worse, or says neither is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from sweep.evaluation.agreement import NEITHER, BoardAgreement, JudgeAgreement
from sweep.evaluation.leaderboard import SweepResults
from sweep.reporting.comparison_report import json_number
from sweep.reporting.configs import config_labels
from sweep.reporting.formatting import MISSING, number


def _kappa(value: float, reason: str) -> str:
    return f"undefined: {reason}" if reason else number(value, 3)


def agreement_lines(agreement: JudgeAgreement) -> list[str]:
    """The judge against people: both κ, the bias, the confusion matrix and the counts."""
    a = agreement
    interval = (
        f" [{number(a.kappa_low, 3)}, {number(a.kappa_high, 3)}] (95% bootstrap over {a.questions} questions)"
        if not a.kappa_reason
        else ""
    )
    lines = [
        f"pairs graded by both people and the judge: {a.pairs}, of {a.questions} questions "
        f"({a.calibration} of them calibration pairs)",
        f"Cohen's κ (relevant: grade >= 1): {_kappa(a.kappa, a.kappa_reason)}{interval}",
        f"quadratic-weighted κ (grades): {_kappa(a.weighted_kappa, a.weighted_reason)}",
        f"bias: the judge grades {number(a.bias, 3, signed=True)} on average against people",
        "confusion (rows: people's grade, columns: the judge's):",
    ]
    width = max(5, *(len(str(v)) + 1 for v in a.confusion.to_numpy().ravel()))
    lines.append("      " + "".join(f"{g:>{width}}" for g in a.confusion.columns))
    lines += [f"  {g:>3} " + "".join(f"{v:>{width}}" for v in row) for g, row in a.confusion.iterrows()]
    lines.append(
        f"not compared: {a.no_grade} pairs the judge's answer held no grade for, "
        f"{a.judge_only} pairs the judge graded and people never did"
    )
    return lines


def agreement_json(agreement: JudgeAgreement) -> dict[str, Any]:
    a = agreement
    return {
        "kappa": json_number(a.kappa),
        "kappa_interval": [json_number(a.kappa_low), json_number(a.kappa_high)],
        "kappa_reason": a.kappa_reason or None,
        "weighted_kappa": json_number(a.weighted_kappa),
        "weighted_kappa_reason": a.weighted_reason or None,
        "weights": "quadratic, on the grade scale",
        "bias": json_number(a.bias),
        "confusion": {
            "people": [int(g) for g in a.confusion.index],
            "judge": [int(g) for g in a.confusion.columns],
            "counts": a.confusion.to_numpy().tolist(),
        },
        "pairs": a.pairs,
        "questions": a.questions,
        "no_grade": a.no_grade,
        "judge_only": a.judge_only,
        "calibration": a.calibration,
        "bootstrap": {"resamples": a.resamples, "seed": a.seed, "over": "questions", "method": "percentile"},
    }


# ---------------------------------------------------------------- audit


def side_by_side(boards: Mapping[str, SweepResults]) -> pd.DataFrame:
    """One row per configuration (the first leaderboard's order): its label, then per leaderboard
    its mean, rank (1: best) and whether it is tied with the best."""
    first = next(iter(boards.values())).leaderboard
    table = pd.DataFrame({"run_id": first.index, "config": first["config"].to_numpy()}).set_index("run_id")
    for name, board in boards.items():
        ranked = board.leaderboard["mean"].dropna()
        table[f"{name}_mean"] = board.leaderboard["mean"].astype(float)
        table[f"{name}_rank"] = pd.Series(range(1, len(ranked) + 1), index=ranked.index, dtype="Int64")
        table[f"{name}_tied"] = board.leaderboard["tied_with_best"].astype(bool)
    return table.reset_index()


def _verdict(value: str, labels: Mapping[str, str]) -> str:
    return "neither worse" if value == NEITHER else f"{labels[value]} worse"


def board_lines(name: str, against: BoardAgreement, labels: Mapping[str, str]) -> list[str]:
    """One leaderboard against people's: τ, the best, the tied set, the verdicts that flipped."""
    best = labels.get(against.best[1], MISSING)
    lines = [
        f"{name} vs people: Kendall's τ {number(against.tau, 3, missing='undefined')}; best: "
        + (f"the same ({best})" if against.same_best else f"{best}, not {labels.get(against.best[0], MISSING)}")
        + f"; tied set: {'the same' if against.same_tied else 'changed'}"
        + f"; sweep.check verdicts flipped: {len(against.flips)} of {len(against.verdicts)} pairs"
    ]
    if not against.same_tied:
        lines.append(
            f"  tied with the best: people {sorted(labels[r] for r in against.tied[0])}, "
            f"{name} {sorted(labels[r] for r in against.tied[1])}"
        )
    lines += [
        f"  {labels[v.a]} vs {labels[v.b]}: people {_verdict(v.before, labels)}, {name} {_verdict(v.after, labels)}"
        for v in against.flips
    ]
    return lines


def audit_lines(
    boards: Mapping[str, SweepResults], against_people: Mapping[str, BoardAgreement], descriptions: Mapping[str, str]
) -> list[str]:
    """The leaderboards side by side (`descriptions`: what each one's grades are), then each
    against people's."""
    table = side_by_side(boards)
    labels = config_labels(dict(zip(table["run_id"], table["config"].astype(str))))  # what varies only
    table["config"] = table["run_id"].map(labels)
    objective = next(iter(boards.values())).objective
    lines = [f"{objective} under: " + "; ".join(f"{name}: {what}" for name, what in descriptions.items())]
    width = max(len("config"), *(len(label) for label in labels.values()))
    lines.append(f"{'config':<{width}}" + "".join(f"  {name:<17}" for name in boards))
    for _, row in table.iterrows():
        cells = "".join(
            f"  {number(row[f'{name}_mean']):>6} #{_rank(row[f'{name}_rank']):<2} "
            + ("tied" if row[f"{name}_tied"] else "    ")
            for name in boards
        )
        lines.append(f"{row['config']:<{width}}{cells}".rstrip())
    for name, against in against_people.items():
        lines += board_lines(name, against, labels)
    return lines


def _rank(value: Any) -> str:
    return MISSING if pd.isna(value) else str(int(value))


def audit_json(
    boards: Mapping[str, SweepResults], against_people: Mapping[str, BoardAgreement], descriptions: Mapping[str, str]
) -> dict[str, Any]:
    table = side_by_side(boards)
    return {
        "objective": next(iter(boards.values())).objective,
        "grades": dict(descriptions),
        "leaderboards": [
            {key: json_number(value) if key not in ("run_id", "config") else value for key, value in row.items()}
            for row in table.to_dict(orient="records")
        ],
        "against_people": {
            name: {
                "tau": json_number(against.tau),
                "same_best": against.same_best,
                "best": list(against.best),
                "same_tied": against.same_tied,
                "tied": [sorted(group) for group in against.tied],
                "verdicts": [
                    {"a": v.a, "b": v.b, "people": v.before, name: v.after, "flipped": v.flipped}
                    for v in against.verdicts
                ],
                "verdict_flips": len(against.flips),
            }
            for name, against in against_people.items()
        },
    }
