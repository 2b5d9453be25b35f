"""What a run prints: its summary line (the objective with its interval and the few numbers read
first), then readable tables: headline metrics with intervals, per-type means, worst questions,
the abstention calibration's suggestion, and a sweep's leaderboard with the configurations whose
model truncated many of their chunks named under it."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table

from sweep.evaluation import Evaluation
from sweep.evaluation.abstention import Calibration
from sweep.evaluation.context import CONTEXT_N, PER_CUTOFF, PRECISION_OMEGA
from sweep.evaluation.leaderboard import SweepResults
from sweep.evaluation.registry import ABSTAIN_CORRECT, ABSTAIN_FALSE, BY_NAME, COSTS, LATENCY, TRUNCATED
from sweep.evaluation.significance import RESAMPLES, bootstrap_ci
from sweep.formats.golden import doc_grades
from sweep.reporting.configs import config_labels, leaderboard_configs, shared_overrides
from sweep.reporting.formatting import cost_in_column, is_missing, is_true, number, threshold
from sweep.text import shortened


def default_console() -> Console:
    """The terminal's width on a terminal; 140 columns in a file or pipe, where rich would use 80."""
    return Console() if sys.stdout.isatty() else Console(width=140)


CELL_LIMIT = 300  # characters a table cell shows; the artifacts keep the whole text
SUMMARY = ("recall_at_5", "mrr", "context/recall_at_5", ABSTAIN_CORRECT)  # after the objective, where computed
TRUNCATION_WARNS = 0.10  # the share of truncated chunks over which a sweep's end names a configuration


def _fmt(value: object) -> str:
    return number(value) if isinstance(value, float) else _cell(str(value))


def _cell(text: str) -> str:
    """At most CELL_LIMIT characters: laying out a megabyte question would stall the console."""
    return shortened(text, CELL_LIMIT)


def summary_line(evaluation: Evaluation, objective: str, stats: Mapping[str, float], seconds: float) -> str:
    """One line, the first a run prints: the objective's mean with its 95% bootstrap interval (the
    overall table's and the leaderboard's: the same resamples), the `SUMMARY` metrics the
    evaluation has, the latency p50 and the run's seconds."""
    mean = evaluation.mean
    head = f"{objective} {number(mean.get(objective))}"
    if objective in evaluation.answerable.columns:  # rank and context metrics; an abstention rate has no interval
        interval = bootstrap_ci(evaluation.answerable[[objective]], n_resamples=RESAMPLES).loc[objective]
        head += f" [{number(interval['low'])}, {number(interval['high'])}]"
    parts = [head, *(f"{name} {number(mean[name])}" for name in SUMMARY if name in mean and name != objective)]
    if LATENCY in stats:
        parts.append(f"latency p50 {stats[LATENCY]:.1f} ms")
    return ", ".join([*parts, f"{seconds:.0f} s"])


def overall_table(evaluation: Evaluation, title: str = "Overall", n_resamples: int = RESAMPLES) -> Table:
    answerable = evaluation.answerable
    intervals = bootstrap_ci(answerable[list(evaluation.metrics)], n_resamples=n_resamples)
    frame = evaluation.per_query
    table = Table(
        title=f"{title}: {int(frame['answerable'].sum())} answerable, {int((~frame['answerable']).sum())} unanswerable",
        title_justify="left",
    )
    table.add_column("metric", no_wrap=True)
    table.add_column("mean", justify="right")
    table.add_column("95% CI", justify="right")
    for name, row in intervals.iterrows():
        table.add_row(name, _fmt(row["mean"]), f"[{_fmt(row['low'])}, {_fmt(row['high'])}]")
    for name, value in evaluation.abstention.items():
        table.add_row(name, _fmt(value), "")
    return table


def frame_table(frame: pd.DataFrame, title: str, index_name: str | None = None) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column(index_name or frame.index.name or "")
    for column in frame.columns:
        table.add_column(str(column), justify="right")
    for key, row in zip(frame.index, frame.itertuples(index=False)):  # itertuples keeps each column's type
        table.add_row(_cell(str(key)), *(_fmt(v) for v in row))
    return table


def columns_as_rows(frame: pd.DataFrame, title: str) -> Table:
    """One row per column of `frame` (e.g. metrics) and one column per index value (e.g. types)."""
    table = Table(title=title, title_justify="left")
    table.add_column("metric", no_wrap=True)
    for key in frame.index:
        table.add_column(str(key), justify="right")
    for column in frame.columns:
        table.add_row(str(column), *(_fmt(v) for v in frame[column].tolist()))
    return table


def worst_table(worst: pd.DataFrame, metric: str, median: float | None = None) -> Table:
    """`Evaluation.worst`'s questions; the title names the median they are below, when given."""
    below = f" (below the median, {number(median)})" if median is not None else ""
    table = Table(title=f"Worst questions by {metric}{below}", title_justify="left")
    for column in ("qid", metric, "type", "question", "relevant", "retrieved (doc:grade, ?: unjudged)"):
        table.add_column(column, overflow="fold")
    for qid, row in worst.iterrows():
        table.add_row(
            _cell(str(qid)),
            _fmt(row[metric]),
            _cell(row["type"]),
            _cell(row["question"]),
            _cell(doc_grades(row["relevant"])),
            _cell(doc_grades(row["retrieved"])) or "(nothing)",
        )
    return table


def context_tables(evaluation: Evaluation, worst: int = 5) -> list[Table]:
    """Context metrics per k, per question type at the largest k, and the questions whose
    chunks missed the most evidence (with the text they missed)."""
    context = evaluation.context
    if context is None or not len(context.frame):
        return []
    mean = evaluation.mean
    per_k = pd.DataFrame(
        {name: [mean[f"context/{name}_at_{k}"] for k in context.cutoffs] for name in PER_CUTOFF},
        index=pd.Index(context.cutoffs, name="k"),
    )
    tables = [
        frame_table(
            per_k,
            f"Context: the top k chunks of {int(mean[CONTEXT_N])} questions with evidence "
            f"(precision_omega {number(mean[PRECISION_OMEGA])}: the ceiling this chunking allows)",
        )
    ]
    largest = context.cutoffs[-1]
    columns = [CONTEXT_N, *(f"context/{name}_at_{largest}" for name in PER_CUTOFF), PRECISION_OMEGA]
    by_type = evaluation.by("type")[columns].rename(columns=lambda c: c.removeprefix("context/")).astype({"n": int})
    tables.append(frame_table(by_type[by_type["n"] > 0], f"Context per question type, k={largest}", "type"))
    if worst:
        metric = context.recall_at_largest
        table = Table(title=f"Worst questions by {metric}", title_justify="left")
        for column in ("qid", metric, "type", "question", "missing evidence"):
            table.add_column(column, overflow="fold")
        for qid, row in evaluation.worst_context(worst).iterrows():
            table.add_row(
                _cell(str(qid)),
                _fmt(row[metric]),
                _cell(row["type"]),
                _cell(row["question"]),
                _cell(row["missing"]) or "(none)",
            )
        tables.append(table)
    return tables


def print_evaluation(
    evaluation: Evaluation,
    console: Console | None = None,
    per_type: bool = True,
    per_query: bool = False,
    worst: int = 5,
) -> None:
    console = console or default_console()
    console.print(overall_table(evaluation))
    if per_type:
        # by source too once the questions come from more than one (people's, generated ones)
        for column in ("type", "source") if evaluation.source_means() else ("type",):
            groups = evaluation.by(column).drop(columns=[*evaluation.context_metrics, CONTEXT_N], errors="ignore")
            console.print(columns_as_rows(groups, f"Per question {column}"))
    if per_query:
        columns = ["type", "n_retrieved", "top_score", *evaluation.metrics]
        console.print(frame_table(evaluation.per_query[columns], "Per question", "qid"))
    if worst and evaluation.metrics:
        metric = evaluation.headline
        median = evaluation.answerable[metric].median()
        worst_questions = evaluation.worst(worst, metric)
        if len(worst_questions):
            console.print(worst_table(worst_questions, metric, median))
        elif not is_missing(median):
            console.print(f"Worst questions by {metric}: none below the median ({number(median)})")
    for table in context_tables(evaluation, worst):
        console.print(table)


def print_calibration(calibration: Calibration, console: Console | None = None) -> None:
    """One line: the suggested threshold (4 decimals, rounded down: every question the threshold
    answers still is) and what it gives."""
    at = calibration.at_suggested
    (console or default_console()).print(
        f"Abstention: suggested abstain.min_score={threshold(calibration.suggested)} (balanced accuracy "
        f"{calibration.balanced_accuracy:.3f}): unanswerable abstaining {at.get(ABSTAIN_CORRECT, float('nan')):.1%}, "
        f"answerable abstaining {at.get(ABSTAIN_FALSE, float('nan')):.1%}, {calibration.metric} {number(at[calibration.metric])}",
        soft_wrap=True,
    )


def shared_line(results: SweepResults) -> str:
    """The overrides every configuration of the sweep has, in one line; "" when none are shared
    (or the sweep has one configuration, whose row shows them all)."""
    shared = shared_overrides(leaderboard_configs(results))
    return f"Every configuration has: {' '.join(shared)}" if shared else ""


def leaderboard_table(results: SweepResults) -> Table:
    """The sweep's configurations, best first, each named by the overrides that vary within the
    sweep (`config_labels`: the shared ones are `shared_line`, printed once above): the
    objective's mean with its 95% interval, the difference to the leader and its Holm-corrected
    p-value, whether it is tied with the leader, the costs where logged (the truncated share of
    chunks among them), and the status where some run did not finish. Narrow: no outer border,
    two-line headers, so that a grid such as the README's fits 120 columns; its title is
    `leaderboard_title`, a line of its own (a title rich wraps to the table's width)."""
    board = results.leaderboard
    labels = config_labels(leaderboard_configs(results))
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, collapse_padding=True)
    costs = [c for c in COSTS if c in board.columns]
    unfinished = bool((board["status"] != "FINISHED").any())
    table.add_column("config", overflow="fold")
    for header in (results.objective, "95% CI", "delta", "p\n(Holm)", "tied", *(BY_NAME[c].header for c in costs)):
        table.add_column(header, justify="right", no_wrap=True)
    if unfinished:
        table.add_column("status")
    for run_id, row in board.to_dict("index").items():
        scored = not is_missing(row["mean"])
        table.add_row(
            _cell(labels[run_id]),
            _fmt(row["mean"]),
            f"{number(row['ci_low'])}-{number(row['ci_high'])}" if scored else "-",
            _fmt(row["delta"]),
            _fmt(row["p_holm"]),
            ("yes" if row["tied_with_best"] else "no") if scored else "-",
            *(cost_in_column(c, row[c]) + _slower(c, row) for c in costs),
            *([str(row["status"])] if unfinished else []),
        )
    return table


def _slower(name: str, row: Mapping[str, object]) -> str:
    """The latency p50's mark: "*" where the configuration is significantly slower than the fastest."""
    marked = name == LATENCY and is_true(row.get("slower"))
    return "*" if marked else ""


def latency_line(results: SweepResults) -> str:
    """Under the leaderboard: which configurations are significantly slower than the fastest (the
    paired test over the questions timed together, Holm-corrected), or that none is; "" when no
    configuration's questions were timed."""
    board = results.leaderboard
    if "slower" not in board.columns or board["latency_ratio"].isna().all():
        return ""
    test = f"paired test over the questions timed together, Holm-corrected, alpha {results.alpha}"
    slower = board.index[board["slower"].map(is_true)]
    if not len(slower):
        return (
            f"Latency: no configuration is significantly slower than the fastest ({test}): their p50s differ by noise"
        )
    labels = config_labels(leaderboard_configs(results))
    named = ", ".join(f"{labels[r]} (x{board.at[r, 'latency_ratio']:.2f})" for r in slower)
    return f"* significantly slower than the fastest ({test}): {named}; the other differences are noise"


def leaderboard_title(results: SweepResults) -> str:
    return (
        f"Leaderboard by {results.objective} (tied: no difference from the best in the paired test, "
        f"Holm-corrected, alpha {results.alpha})"
    )


def truncation_line(results: SweepResults) -> str:
    """A warning naming, with its share, every configuration of the sweep whose model truncated
    more than TRUNCATION_WARNS of its chunks (their scores measure the truncation too); "" when none
    did."""
    board = results.leaderboard
    if TRUNCATED not in board.columns:
        return ""
    over = board[TRUNCATED][board[TRUNCATED] > TRUNCATION_WARNS]
    if not len(over):
        return ""
    labels = config_labels(leaderboard_configs(results))
    named = ", ".join(f"{labels[run_id]} {cost_in_column(TRUNCATED, share)}" for run_id, share in over.items())
    return (
        f"warning: in {len(over)} of {len(board)} configurations more than {TRUNCATION_WARNS:.0%} of chunks are "
        "longer than the model's token limit and truncated when embedded (their end is never searched, so the "
        f"scores measure the truncation as well as the setting): {named}; see docs/commands.md#warnings"
    )


def print_leaderboard(results: SweepResults, console: Console | None = None) -> None:
    """The overrides every configuration shares (once), the leaderboard table and, under it, the
    smallest difference the golden set can detect and the configurations that truncate many chunks."""
    console = console or default_console()
    if shared := shared_line(results):
        console.print(shared, soft_wrap=True)
    console.print(leaderboard_title(results), soft_wrap=True)
    console.print(leaderboard_table(results))
    console.print(results.mde_line(), soft_wrap=True)
    if latency := latency_line(results):
        console.print(latency, soft_wrap=True)
    if truncated := truncation_line(results):
        console.print(truncated, soft_wrap=True)


def print_lines(lines: Sequence[str], console: Console | None = None) -> None:
    """Lines that must stay whole (commands, addresses), whatever the width."""
    for line in lines:
        (console or default_console()).print(line, soft_wrap=True)
