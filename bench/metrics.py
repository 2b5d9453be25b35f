"""Benchmark: golden-sweep's metrics against ranx and pytrec_eval, as issues 12 and 22 ask.

    python bench/metrics.py                    # 10,000 queries x 100 and x 1,000 results
    python bench/metrics.py --quick            # 1,000 queries, a smoke run
    python bench/metrics.py --whole-process    # only a. below (issue 22's figure), in about a minute

In one process, on the same synthetic qrels and runs (numpy seed 0) and the same ten measures on
every side (METRICS: precision, recall, nDCG and MAP at 10 and 100, MRR and MAP), it measures
  a. 10,000 x 100, whole process: `python -m sweep.evaluate QRELS RUN --json` against a script that
     parses the same TREC files with pytrec_eval and prints the means as JSON, each started anew
     every time (interpreter start and imports included), both writing to a pipe the benchmark
     reads; target (issue 22): ours <= 0.45 x theirs (median of the turns), i.e. >= 2.2x. Each
     turn is printed, with each process's CPU time (user + system), which other load on the
     machine changes less than wall time. golden-sweep's modules are byte-compiled first, as an
     installed package's are (PYTHONDONTWRITEBYTECODE, where set, would otherwise have every
     start compile them again); one untimed start of each side comes first;
  b. 10,000 x 100 and c. 10,000 x 1,000, in process: `score(golden, run)` and its means against
     `ranx.evaluate(qrels, run)`, both on objects built beforehand, ranx warm (numba's JIT done
     first); target: >= 5x;
and, beside these, pytrec_eval's `.evaluate(run)` and means in process (evaluator built
beforehand) and the whole process on 10,000 x 1,000. The two sides of each comparison take turns
--reps times, so that load from other processes falls on both alike; the tables give medians,
the fastest time in brackets, and the ratio of the medians.
Results are compared with ours per query (means for the whole-process runs); where ranx differs,
the differing queries are re-scored with ties broken as trec_eval breaks them.
"""

from __future__ import annotations

import argparse
import compileall
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pandas as pd
import pytrec_eval
import ranx
from _common import machine, print_table, taking_turns, timed
from numba.core.errors import NumbaTypeSafetyWarning

import sweep
from sweep.evaluation import Evaluation, score
from sweep.formats.golden import GoldenSet, Question
from sweep.formats.runs import Run

# (ours, pytrec_eval, ranx) names of the same measure
METRICS = [
    ("precision_at_10", "P_10", "precision@10"),
    ("precision_at_100", "P_100", "precision@100"),
    ("recall_at_10", "recall_10", "recall@10"),
    ("recall_at_100", "recall_100", "recall@100"),
    ("mrr", "recip_rank", "mrr"),
    ("ndcg_at_10", "ndcg_cut_10", "ndcg@10"),
    ("ndcg_at_100", "ndcg_cut_100", "ndcg@100"),
    ("map_at_10", "map_cut_10", "map@10"),
    ("map_at_100", "map_cut_100", "map@100"),
    ("map", "map", "map"),
]
OURS = [m[0] for m in METRICS]
TREC = [m[1] for m in METRICS]
RANX = [m[2] for m in METRICS]
TOLERANCE = 1e-6
WHOLE_PROCESS_TARGET = 0.45  # ours / theirs, whole process on 10,000 x 100 (issue 22)
HEADER = ["measurement", "ours (s)", "theirs (s)", "theirs / ours", "target", "met"]

JUDGED = 20  # judged documents per query
POOL = 100_003  # document pool (prime, so a stride walk visits distinct documents)

PYTREC_SCRIPT = """\
import json, sys
import pytrec_eval

measures = sys.argv[3].split(",")
with open(sys.argv[1]) as f:
    qrels = pytrec_eval.parse_qrel(f)
with open(sys.argv[2]) as f:
    run = pytrec_eval.parse_run(f)
per_query = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
json.dump({m: sum(q[m] for q in per_query.values()) / len(per_query) for m in measures}, sys.stdout)
"""


# ---------------------------------------------------------------- data


def make_data(n_queries: int, depth: int, seed: int = 0) -> tuple[dict, dict]:
    """qrels {qid: {doc: grade}} and run {qid: {doc: score}} with exactly `depth` results per query.

    Query q's documents are the walk (a + j*b) mod POOL, j = 0, 1, ...: steps 0..19 are judged
    (grades 0..3, at least one >= 1); the run holds steps s..s+depth-1 for a random s in 0..10, so
    some judged documents are never retrieved. Judged documents score higher on average; scores are
    rounded to 3 decimals, so ties occur."""
    rng = np.random.default_rng(seed)
    names = np.array([f"d{i:07d}" for i in range(POOL)], dtype=object)
    qids = [f"q{i:05d}" for i in range(n_queries)]
    start = rng.integers(0, POOL, n_queries)[:, None]
    stride = rng.integers(1, POOL, n_queries)[:, None]

    grades = rng.choice(4, size=(n_queries, JUDGED), p=[0.5, 0.25, 0.15, 0.1])
    some = rng.integers(0, JUDGED, n_queries)
    grades[np.arange(n_queries), some] = np.maximum(grades[np.arange(n_queries), some], 1)
    judged = names[(start + np.arange(JUDGED) * stride) % POOL]
    qrels = {q: dict(zip(docs, g)) for q, docs, g in zip(qids, judged.tolist(), grades.tolist())}

    steps = rng.integers(0, 11, n_queries)[:, None] + np.arange(depth)
    boost = np.zeros((n_queries, depth))
    in_judged = steps < JUDGED
    boost[in_judged] = 0.8 * np.take_along_axis(grades, np.minimum(steps, JUDGED - 1), axis=1)[in_judged]
    scores = np.round(rng.normal(size=(n_queries, depth)) + boost, 3)
    retrieved = names[(start + steps * stride) % POOL]
    run = {q: dict(zip(docs, s)) for q, docs, s in zip(qids, retrieved.tolist(), scores.tolist())}
    return qrels, run


def write_trec(qrels: dict, run: dict, folder: Path) -> tuple[Path, Path]:
    qrels_path, run_path = folder / "qrels.txt", folder / "run.txt"
    qrels_path.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items()), encoding="utf-8"
    )
    with run_path.open("w", encoding="utf-8") as out:
        for q, docs in run.items():
            ranked = sorted(docs.items(), key=lambda item: -item[1])
            out.write("".join(f"{q} Q0 {d} {r} {s!r} bench\n" for r, (d, s) in enumerate(ranked, start=1)))
    return qrels_path, run_path


# ---------------------------------------------------------------- the three libraries
# Each timed call returns what that library's user gets: the means (and per-query values).


def ours_objects(qrels: dict, run: dict) -> tuple[GoldenSet, Run]:
    """A golden set with its tables built (they are cached on it, as ranx.Qrels holds its own), and a run."""
    golden = GoldenSet(tuple(Question(q, "", docs) for q, docs in qrels.items()))
    _ = golden.judgments, golden.questions_frame
    return golden, Run.from_dict(run)


def ours_evaluate(golden: GoldenSet, run: Run) -> Evaluation:
    evaluation = score(golden, run, OURS)
    _ = evaluation.mean  # computed (and cached) inside the timing
    return evaluation


def pytrec_evaluate(evaluator: pytrec_eval.RelevanceEvaluator, run: dict) -> tuple[dict, dict[str, float]]:
    """Per-query values and their means (pytrec_eval leaves averaging to its caller)."""
    per_query = evaluator.evaluate(run)
    means = {name: sum(q[name] for q in per_query.values()) / len(per_query) for name in TREC}
    return per_query, means


def warm_up_ranx() -> None:
    """Compile (or load from numba's cache) every kernel the timed calls use."""
    qrels, run = make_data(20, 120, seed=1)
    ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), RANX)


# ---------------------------------------------------------------- timing and reporting


@dataclass(frozen=True)
class Duel:
    """Wall times of ours and theirs, taken in turns; `target`: the ratio theirs / ours to reach."""

    label: str
    ours: list[float]
    theirs: list[float]
    target: float | None = None

    @property
    def ratio(self) -> float:
        return statistics.median(self.theirs) / statistics.median(self.ours)

    def row(self) -> list[str]:
        def seconds(times: list[float]) -> str:
            return f"{statistics.median(times):.3f} ({min(times):.3f})"

        target = "—" if self.target is None else f">= {self.target:.1f}x"
        met = "—" if self.target is None else ("yes" if self.ratio >= self.target else "NO")
        return [self.label, seconds(self.ours), seconds(self.theirs), f"{self.ratio:.1f}x", target, met]


def duel(label: str, ours: Callable, theirs: Callable, reps: int, target: float | None = None) -> tuple[Duel, Any, Any]:
    """(the Duel, our last result, their last result)."""
    (our_times, our_result), (their_times, their_result) = taking_turns(reps, ours, theirs)
    return Duel(label, our_times, their_times, target), our_result, their_result


def compare_means(case: str, ours: dict[str, float], theirs: dict[str, float], name: str) -> str:
    diffs = {m: theirs[m] - ours[m] for m in OURS}
    off = {m: d for m, d in diffs.items() if abs(d) > TOLERANCE}
    if not off:
        return f"{case}: {name} means agree"
    return f"{case}: {name} means DIFFER: " + ", ".join(f"{m} {d:+.1e}" for m, d in off.items())


def differing(ours: pd.DataFrame, theirs: pd.DataFrame) -> pd.Index:
    """Queries on which any metric differs by more than TOLERANCE."""
    diff = (theirs.reindex(index=ours.index, columns=OURS) - ours[OURS]).abs()
    return diff.index[(diff > TOLERANCE).any(axis=1)]


def compare_queries(case: str, ours: pd.DataFrame, theirs: pd.DataFrame, name: str) -> str:
    bad = differing(ours, theirs)
    if bad.empty:
        return f"{case}: {name} agrees on every query and metric"
    means = theirs[OURS].mean() - ours[OURS].mean()
    return f"{case}: {name} differs on {len(bad)} of {len(ours)} queries; mean diffs: " + ", ".join(
        f"{m} {d:+.1e}" for m, d in means.items() if abs(d) > TOLERANCE
    )


def ranx_without_ties(qrels: dict, frame: pd.DataFrame, queries: pd.Index) -> pd.DataFrame:
    """ranx's per-query values for `queries` with scores replaced by -rank in trec_eval's order
    (score descending, then doc id descending), so that ranx has no ties to break its own way."""
    frame = frame[frame["qid"].astype(object).isin(queries)]
    rank = frame.groupby("qid", observed=True, sort=False).cumcount()
    run: dict[str, dict[str, float]] = {}
    for qid, doc, r in zip(frame["qid"].astype(object), frame["docid"].astype(object), rank):
        run.setdefault(qid, {})[doc] = -float(r)
    ranx_run = ranx.Run(run)
    ranx.evaluate(ranx.Qrels({q: qrels[q] for q in run}), ranx_run, RANX)
    return pd.DataFrame({ours: ranx_run.scores[name] for ours, _, name in METRICS})


def in_process(qrels: dict, run: dict, label: str, reps: int) -> tuple[Duel, Duel, list[str]]:
    """(ours against warm ranx, ours against pytrec_eval, agreement notes), objects built beforehand."""
    golden, our_run = ours_objects(qrels, run)
    ranx_qrels, ranx_run = ranx.Qrels(qrels), ranx.Run(run)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(TREC))

    def ours() -> Evaluation:
        return ours_evaluate(golden, our_run)

    vs_ranx, evaluation, _ = duel(
        f"{label}, in process: score() vs warm ranx.evaluate()",
        ours,
        lambda: ranx.evaluate(ranx_qrels, ranx_run, RANX),
        reps,
        target=5.0,
    )
    vs_trec, _, (trec_per_query, _) = duel(
        f"{label}, in process: score() vs pytrec_eval .evaluate()", ours, lambda: pytrec_evaluate(evaluator, run), reps
    )
    ours_per_query = evaluation.per_query
    trec_per_query = pd.DataFrame.from_dict(trec_per_query, orient="index").rename(columns=dict(zip(TREC, OURS)))
    ranx_per_query = pd.DataFrame({ours: ranx_run.scores[name] for ours, _, name in METRICS})
    notes = [
        compare_queries(label, ours_per_query, trec_per_query, "pytrec_eval"),
        compare_queries(label, ours_per_query, ranx_per_query, "ranx"),
    ]
    bad = differing(ours_per_query, ranx_per_query)
    if len(bad):
        still = differing(ours_per_query.loc[bad], ranx_without_ties(qrels, our_run.frame, bad))
        notes[-1] += (
            f"\n    with ties broken as trec_eval does (scores -> -rank), ranx still differs on {len(still)} of them"
        )
    return vs_ranx, vs_trec, notes


@dataclass(frozen=True)
class Started:
    """A command's JSON output and the CPU time (user + system) its process took."""

    output: dict
    cpu: float


def start(cmd: list[str]) -> Started:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Started(json.loads(done.stdout), cpu)


def whole_process(
    qrels: dict, run: dict, label: str, reps: int, folder: Path, target: float | None
) -> tuple[Duel, str, list[list[str]]]:
    """(the Duel, the agreement note, the turns: one row each, then their medians)."""
    qrels_path, run_path = write_trec(qrels, run, folder)
    script = folder / "pytrec_eval_script.py"
    script.write_text(PYTREC_SCRIPT, encoding="utf-8")
    ours_cmd = [
        sys.executable,
        "-m",
        "sweep.evaluate",
        str(qrels_path),
        str(run_path),
        "--json",
        "--metrics",
        ",".join(OURS),
    ]
    trec_cmd = [sys.executable, str(script), str(qrels_path), str(run_path), ",".join(TREC)]
    start(ours_cmd), start(trec_cmd)  # untimed: the files and libraries in the page cache for both
    turns = [(timed(lambda: start(ours_cmd)), timed(lambda: start(trec_cmd))) for _ in range(reps)]
    ours = [(wall, started.cpu) for (wall, started), _ in turns]
    theirs = [(wall, started.cpu) for _, (wall, started) in turns]
    rows = [
        [str(i), f"{o:.3f}", f"{t:.3f}", f"{o / t:.2f}", f"{oc:.2f}", f"{tc:.2f}"]
        for i, ((o, oc), (t, tc)) in enumerate(zip(ours, theirs), start=1)
    ]
    medians = [statistics.median(column) for column in (*zip(*ours), *zip(*theirs))]
    our_wall, our_cpu, their_wall, their_cpu = medians
    rows.append(
        [
            "median",
            f"{our_wall:.3f}",
            f"{their_wall:.3f}",
            f"**{our_wall / their_wall:.2f}**",
            f"{our_cpu:.2f}",
            f"{their_cpu:.2f}",
        ]
    )
    duel = Duel(
        f"{label}, whole process: python -m sweep.evaluate --json vs pytrec_eval script",
        [wall for wall, _ in ours],
        [wall for wall, _ in theirs],
        target,
    )
    ours_out, trec_out = turns[-1][0][1].output, turns[-1][1][1].output
    trec_means = {ours: trec_out[name] for ours, name, _ in METRICS}
    return duel, compare_means(f"{label} (files)", ours_out["mean"], trec_means, "pytrec_eval"), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 queries instead of 10,000")
    parser.add_argument("--reps", type=int, default=5, help="turns per comparison; medians count (default 5)")
    parser.add_argument("--whole-process", action="store_true", help="only a. (10,000 x 100, whole process)")
    args = parser.parse_args()
    n_queries = 1_000 if args.quick else 10_000

    print(
        machine(["numpy", "pandas", "ranx", "numba", "pytrec-eval-terrier"], {"numba (ranx)": numba.get_num_threads()})
    )
    print(f"{n_queries:,} queries, {JUDGED} judged each (grades 0-3), {args.reps} turns; metrics: {', '.join(OURS)}")
    warnings.simplefilter("ignore", NumbaTypeSafetyWarning)  # ranx's uint64 -> int64 casts
    compileall.compile_dir(Path(sweep.__file__).parent, quiet=1)
    if not args.whole_process:
        warm_up_ranx()

    done, also, notes = [], [], []
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        for depth in (100,) if args.whole_process else (100, 1_000):
            label = f"{n_queries:,} x {depth:,}"
            qrels, run = make_data(n_queries, depth)
            target = 1 / WHOLE_PROCESS_TARGET if depth == 100 else None
            files, check, rows = whole_process(qrels, run, label, args.reps, Path(tmp), target)
            print_table(
                f"{label}, whole process, turn by turn (seconds; CPU: user + system)",
                [
                    "turn",
                    "ours",
                    "pytrec_eval",
                    "ours / theirs" + (f" (target <= {WHOLE_PROCESS_TARGET})" if target else ""),
                    "ours CPU",
                    "theirs CPU",
                ],
                rows,
            )
            if args.whole_process:
                done.append(files)
                notes.append(check)
                continue
            vs_ranx, vs_trec, checks = in_process(qrels, run, label, args.reps)
            (done if depth == 100 else also).append(files)
            done.append(vs_ranx)
            also.append(vs_trec)
            notes += [check, *checks]
            del qrels, run
            gc.collect()

    title = "{} (seconds: median of {} turns, fastest in brackets; ratio of the medians, > 1: ours is faster)"
    print_table(title.format('Issues 12 and 22, "Done when"', args.reps), HEADER, [duel.row() for duel in done])
    if also:
        print_table(title.format("Also measured", args.reps), HEADER, [duel.row() for duel in also])
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f} (at the start: above)")
    print(f"\nAgreement with ours (tolerance {TOLERANCE:g}):")
    print("\n".join(f"  {note}" for note in notes))


if __name__ == "__main__":
    main()
