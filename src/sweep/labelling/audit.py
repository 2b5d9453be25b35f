"""Does a sweep's decision survive the judge? Its runs scored again from their stored rankings under other grades.

Every finished child of a sweep is scored again from its `run.trec` (no retrieval, no model) under

  people   people's grades, an unjudged document not relevant, scored as the sweep scored it
           (condensed where it ran with `golden.condensed=true`), so this leaderboard is the
           sweep's own, to the last per-question value;
  judge    people's grades with the holes filled by the judge's (`with_judge_grades`), scored so too;
  condensed  people's grades with every unjudged document left out of the rankings (trec_eval -J),

and each leaderboard is built as the sweep built its own (`leaderboard.build`, the sweep's
objective). The judge's and the condensed leaderboards are set against people's
(`agreement.board_agreement`: Kendall's τ, the best, the tied set, each pair's `sweep.check`
verdict), and the judge against people's grades on the pairs both graded
(`agreement.judge_agreement`). `log_audit` writes the figures to the sweep's parent run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sweep.errors import InputError
from sweep.evaluation.agreement import BoardAgreement, JudgeAgreement, board_agreement, judge_agreement
from sweep.evaluation.leaderboard import SweepResults, build
from sweep.evaluation.record import TrialRecord
from sweep.evaluation.registry import HEADLINE
from sweep.evaluation.rescoring import rescored
from sweep.evaluation.significance import SEED
from sweep.formats.golden import GoldenSet
from sweep.formats.judgments import JudgeGrade, load_judgments, person_grades, with_judge_grades
from sweep.labelling.pooling import golden_path
from sweep.reporting.judge_report import side_by_side
from sweep.tracking.audits import log_judge_audit
from sweep.tracking.digests import file_order_digest, golden_as_scored, golden_digest, golden_digests, scored_corpus
from sweep.tracking.reading import LoggedRun, logged_run, sweep_children, sweep_id
from sweep.tracking.records import load_record
from sweep.tracking.store import DEFAULT_EXPERIMENT, connect

PEOPLE, JUDGE, CONDENSED = "people", "judge", "condensed"
GRADES = {
    PEOPLE: "people's grades, unjudged = not relevant (as the sweep scored)",
    JUDGE: "people's grades, holes filled by the judge",
    CONDENSED: "people's grades, unjudged documents left out (condensed lists)",
}


@dataclass(frozen=True)
class Audit:
    """A sweep's leaderboards under each of `GRADES` and what the judge changed (module doc)."""

    sweep_id: str
    objective: str
    golden: str  # the golden file people's grades were read from
    judgments: str  # the judge's file
    judge: JudgeAgreement  # the judge against people's grades
    boards: dict[str, SweepResults]  # GRADES' keys -> the leaderboard under those grades
    against_people: dict[str, BoardAgreement]  # JUDGE, CONDENSED -> its leaderboard against people's
    filled: int  # judge's grades that filled a hole of the golden set
    same_golden: bool | None  # whether `golden` is the set the sweep was scored on (None: its corpus is gone)

    def metrics(self) -> dict[str, float]:
        """What the parent run logs (`judge/*`); a NaN stays out of MLflow (`loggable`)."""
        judged = self.against_people[JUDGE]
        return {
            "judge/kappa": self.judge.kappa,
            "judge/weighted_kappa": self.judge.weighted_kappa,
            "judge/tau": judged.tau,
            "judge/same_best": float(judged.same_best),
            "judge/same_tied": float(judged.same_tied),
            "judge/verdict_flips": float(len(judged.flips)),
            "judge/filled_judgments": float(self.filled),
            **({"judge/condensed_tau": self.against_people[CONDENSED].tau} if CONDENSED in self.against_people else {}),
        }


def sweep_runs(sweep: str, experiment: str = DEFAULT_EXPERIMENT) -> tuple[LoggedRun, list[LoggedRun]]:
    """The sweep's parent run (`latest`: the one started last in `experiment`) and its children,
    earliest first; a sweep without a finished child is one line."""
    connect(create=False)
    parent = logged_run(sweep_id(sweep, experiment))
    if not parent.is_sweep:
        raise InputError(f"{parent.run_id}: not a sweep's parent run (no sweep.parent tag); give the sweep's id")
    children = sweep_children(parent.run_id)
    if not any(child.status == "FINISHED" for child in children):
        raise InputError(f"sweep {parent.run_id} has no finished run to audit")
    return parent, children


def boards_under(
    objective: str, records: Sequence[TrialRecord], grades: Mapping[str, tuple[GoldenSet, bool | None]], seed: int
) -> tuple[dict[str, list[TrialRecord]], dict[str, SweepResults]]:
    """Per name of `grades` (name -> golden set, condensed or not or as scored): the records, the finished ones
    scored again, and the leaderboard `build` makes of them."""
    scored = {
        name: [rescored(r, golden, condensed) if r.is_finished else r for r in records]
        for name, (golden, condensed) in grades.items()
    }
    return scored, {name: build(objective, group, seed=seed) for name, group in scored.items()}


def filled_holes(golden: GoldenSet, filled: GoldenSet) -> int:
    """How many judgments `with_judge_grades` added."""
    return sum(len(q.relevant) for q in filled) - sum(len(q.relevant) for q in golden)


def audit_sweep(
    sweep: str,
    judgments: str | Path,
    golden: str | Path | None = None,
    experiment: str = DEFAULT_EXPERIMENT,
    seed: int = SEED,
) -> Audit:
    """The audit of `sweep` (a parent run id or `latest`) with the judge's `judgments`; `golden`
    defaults to the golden file the sweep's runs were scored on, read as it is now."""
    graded: list[JudgeGrade] = load_judgments(judgments)
    parent, children = sweep_runs(sweep, experiment)
    finished = [child for child in children if child.status == "FINISHED"]
    path = golden_path(finished, None if golden is None else str(golden))
    people, same_golden = people_grades(path, finished[0])
    filled = with_judge_grades(people, graded)
    records = [load_record(child, results=child.status == "FINISHED") for child in children]
    objective = parent.tags.get("sweep.objective", HEADLINE)
    grades = {PEOPLE: (people, None), JUDGE: (filled, None), CONDENSED: (people, True)}
    scored, boards = boards_under(objective, records, grades, seed)
    return Audit(
        sweep_id=parent.run_id,
        objective=objective,
        golden=str(path),
        judgments=str(judgments),
        judge=judge_agreement(person_grades(people), graded, seed=seed),
        boards=boards,
        against_people={
            name: board_agreement(boards[PEOPLE], boards[name], scored[PEOPLE], scored[name])
            for name in (JUDGE, CONDENSED)
        },
        filled=filled_holes(people, filled),
        same_golden=same_golden,
    )


def people_grades(path: Path, run: LoggedRun) -> tuple[GoldenSet, bool | None]:
    """The golden set at `path` read as `run` read its own (`golden_as_scored`: split, pending
    questions under `golden.status=all`), and whether it is the one `run` was scored on (its digest,
    taken with the run's corpus; None where that corpus is gone or has changed)."""
    try:
        corpus = scored_corpus(run)
    except InputError:
        return golden_as_scored(path, None, run), None
    people = golden_as_scored(path, corpus, run)
    return people, bool(golden_digests(run.tags) & {golden_digest(people), file_order_digest(people)})


def log_audit(audit: Audit) -> list[str]:
    """The audit's `judge/*` metrics and its leaderboards side by side (`tables/judge_audit.json`)
    on the sweep's parent run; the artifact paths."""
    return log_judge_audit(audit.sweep_id, audit.metrics(), {"tables/judge_audit.json": side_by_side(audit.boards)})
