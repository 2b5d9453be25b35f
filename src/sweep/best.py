"""The winning configuration, pulled back from MLflow.

    from sweep import best_config
    cfg = best_config("ndcg_at_10")              # an OmegaConf DictConfig
    cfg = best_config("ndcg_at_10", among="tied", prefer="latency/search_ms_p50")

    python -m sweep.best --metric ndcg_at_10 [--sweep PARENT_RUN_ID|latest] [--output best.yaml]
    python -m sweep.best --metric ndcg_at_10 --among tied --prefer latency/search_ms_p50
    python -m sweep.best --metric ndcg_at_10 --golden golden.jsonl   # or --golden <data.golden_digest>

One golden set: a metric's values on different golden sets are not comparable (a 20-question subset's
may beat the whole set's), so the candidates are the runs scored on the golden set of the latest
of them (by start time), or on the one `golden` names (a golden file or folder, or a digest as the
runs' `data.golden_digest` tags hold it: `sweep.tracking.digests`); one line says how many runs
that left out (`BestRun.note`, on stderr).

`among="tied"` takes the cheapest (lowest `prefer`) of the runs the golden set cannot tell apart
from the best one (a Holm-corrected paired test over the questions: `sweep.evaluation.leaderboard`), rather
than a maximum that may be noise. A latency (`--prefer latency/search_ms_p50`) of runs with timed
questions (`tables/latency.json`; a sweep times its runs together) counts only where a paired test
over those questions finds a difference: of the runs not significantly slower than the fastest, the
best-ranked, and the line says so when that is a tie by latency (`sweep.evaluation.latency`).

`sweep`: a sweep's parent run id, or `latest` (the sweep started last in the experiment:
`sweep.tracking.reading.sweep_id`, as every command that takes a sweep).

The chosen run is a `BestRun`; its config has today's `_target_` paths, also for a run logged
before the subpackages (`sweep.tracking.legacy`), and the files and folders it reads (golden.path,
golden.corpus, cache_dir, a local model's folder, ...) as absolute paths (`absolute_paths`), so
that it can be run again, from any folder. Reading MLflow needs neither Hydra nor FAISS, so
neither is imported here.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from sweep.errors import InputError, exit_2_on_bad_input
from sweep.evaluation.leaderboard import cheapest_tied
from sweep.evaluation.registry import CHEAPEST_BY
from sweep.tracking.digests import (
    GOLDEN_DIGEST,
    LEGACY_ROWS,
    check_legacy_size,
    file_order_digest,
    golden_dataset,
    golden_digest,
    golden_digests,
    is_legacy,
    same_golden_set,
)
from sweep.tracking.latencies import timed_records
from sweep.tracking.legacy import current_targets
from sweep.tracking.reading import (
    LATEST,
    METRIC_NAME,
    WORKING_FOLDER,
    LoggedRun,
    RunSearch,
    finished_runs,
    require_artifacts,
    sweep_id,
)
from sweep.tracking.records import load_record
from sweep.tracking.store import DEFAULT_EXPERIMENT, PARENT_TAG, RUN_ID, connect, existing_experiment_id

AMONG = ("best", "tied")  # the single best value, or the cheapest of those tied with it
DIGEST = re.compile(r"[0-9a-f]{8}|[0-9a-f]{32}")  # a golden digest: MLflow's (runs logged long ago) or ours
PATH_KEYS = ("path", "corpus", "folder", "cache_dir")  # settings whose values are files or folders a trial reads
LOCAL_OR_NAMED = ("model", "tokenizer")  # a local model's folder or a model's name: absolute where the folder exists
NOT_PATHS = ("filter", "where")  # the questions' filters: their keys are the documents' metadata fields


@dataclass(frozen=True)
class BestRun:
    """The run `find_best` chose, and how to run its configuration again."""

    run_id: str
    value: float  # its value of the metric it was chosen by
    config: DictConfig  # the resolved config, today's `_target_`s: runs as it is with sweep.experiment.trial.run_trial
    overrides: list[str]  # the command line that produced it
    choices: dict[str, str]  # each config group's option (`{"index": "hnsw", ...}`)
    why: str  # how it was chosen, in one line
    note: str = ""  # how many runs on other golden sets were left out, in one line; "" when none

    @property
    def command(self) -> str:
        return shlex.join(["python", "-m", "sweep", *self.overrides])


def find_best(
    metric: str = "ndcg_at_10",
    experiment: str | None = None,
    sweep: str | None = None,
    maximize: bool = True,
    among: str = "best",
    prefer: str | None = None,
    golden: str | None = None,
) -> BestRun:
    """The finished run with the best `metric` (only the children of parent run `sweep`, if given;
    the earliest on ties; `latest`: the sweep started last) among those scored on one golden set: the latest run's, or `golden`'s (a
    golden file or folder, or a digest: `one_golden_set`). `among="tied"`: of those runs tied with
    that one (`sweep.evaluation.leaderboard.cheapest_tied`: Holm-corrected paired test over the
    questions), the one with the lowest `prefer` (a cost, e.g. `latency/search_ms_p50`; default
    `CHEAPEST_BY`; only with `among="tied"`); `experiment`: default `DEFAULT_EXPERIMENT`. Reading
    creates nothing: no store is an error."""
    experiment = experiment or DEFAULT_EXPERIMENT
    if prefer is not None and not METRIC_NAME.fullmatch(prefer):
        raise InputError(f"--prefer {prefer!r}: not a metric name (letters, digits and _ - . / : space)")
    if among not in AMONG:
        raise InputError(f"--among {among!r}: one of {', '.join(AMONG)}")
    if prefer is not None and among != "tied":
        raise InputError(f"--prefer {prefer}: it chooses among the runs tied with the best; add --among tied")
    if among == "tied" and not maximize:
        raise InputError("--among tied ranks higher-is-better metrics; it cannot be combined with --minimize")
    if sweep is not None and sweep != LATEST and not RUN_ID.fullmatch(sweep):
        raise InputError(f"--sweep {sweep!r}: not an MLflow run id (32 hexadecimal digits), nor {LATEST!r}")
    if golden is not None and not golden.strip():
        raise InputError("--golden '': give a golden file or folder, or a data.golden_digest")
    connect(create=False)
    if sweep is not None:
        try:
            sweep = sweep_id(sweep, experiment)
        except InputError as error:
            raise InputError(f"--sweep {LATEST}: {error}") from None
    search = RunSearch(existing_experiment_id(experiment), metric, maximize, ((PARENT_TAG, sweep),) if sweep else ())
    found = finished_runs(search, best_only=False)
    if not found:
        where = f"sweep {sweep}" if sweep else f"experiment {experiment!r}"
        raise InputError(f"no finished run in {where} has the metric {metric!r}")
    candidates, which = one_golden_set(found, golden)
    # the earliest on ties (`candidates` are earliest first); a value that is not a number never wins
    best = min(candidates, key=lambda run: _rank_key(run.metrics.get(metric, math.nan), maximize))
    why = f"the {'highest' if maximize else 'lowest'} {metric}"
    require_artifacts(best)
    chosen = best.run_id
    if among == "tied":
        records = timed_records(candidates)  # with their timed questions: a latency counts where a test finds it
        check_legacy_size(
            best.golden_digest or "", max((len(r.per_query) for r in records if r.per_query is not None), default=0)
        )
        cheapest, why = cheapest_tied(metric, records, prefer or CHEAPEST_BY)
        chosen = cheapest.run_id
    record = load_record(best if chosen == best.run_id else chosen, per_query=False, config=True)
    return BestRun(
        record.run_id,
        record.metrics[metric],
        OmegaConf.create(absolute_paths(current_targets(record.config), run_folder(record.config, record.tags))),
        list(record.overrides),
        record.choices,
        why,
        left_out_note(len(found) - len(candidates), len(candidates), which, golden is None),
    )


def run_folder(config: Mapping[str, Any], tags: Mapping[str, str]) -> Path | None:
    """The folder a run ran in, which its config's relative paths are relative to: its
    `WORKING_FOLDER` tag; for a run logged before that tag, the folder its `data.corpus` tag (the
    corpus's absolute path) adds to a relative `golden.corpus`; None where neither tells."""
    if tags.get(WORKING_FOLDER):
        return Path(tags[WORKING_FOLDER])
    golden = config.get("golden")
    corpus = golden.get("corpus") if isinstance(golden, Mapping) else None
    logged = tags.get("data.corpus")
    if not isinstance(corpus, str) or not corpus or not logged or Path(corpus).is_absolute():
        return None
    relative, absolute = Path(corpus).parts, Path(logged).parts
    if not Path(logged).is_absolute() or len(absolute) <= len(relative) or absolute[-len(relative) :] != relative:
        return None
    return Path(*absolute[: -len(relative)])


def absolute_paths(config: Any, folder: Path | None) -> Any:
    """`config` (a resolved config: dicts, lists and values) with each relative path it reads
    (`PATH_KEYS`; `LOCAL_OR_NAMED` where `folder` holds it, not a model's name) made absolute
    against `folder`, the folder the run ran in (`run_folder`); as it is where that is unknown.
    The questions' filters (`NOT_PATHS`) are left alone."""
    if folder is None:
        return config
    if isinstance(config, list):
        return [absolute_paths(item, folder) for item in config]
    if not isinstance(config, Mapping):
        return config
    made = {}
    for key, value in config.items():
        if key in NOT_PATHS:
            made[key] = value
        elif isinstance(value, str) and value and not os.path.isabs(os.path.expanduser(value)) and "://" not in value:
            local = key in LOCAL_OR_NAMED and (folder / value).exists()
            made[key] = str(folder / value) if key in PATH_KEYS or local else value
        else:
            made[key] = absolute_paths(value, folder)
    return made


def _rank_key(value: float, maximize: bool) -> float:
    """Smaller is better: the value, or its negative where higher is better; NaN last."""
    if math.isnan(value):
        return math.inf
    return -value if maximize else value


def one_golden_set(runs: Sequence[LoggedRun], golden: str | None) -> tuple[list[LoggedRun], str]:
    """Those of `runs` (earliest first) scored on one golden set, and which one, in words: the
    golden set of the latest run (by start time) without `golden`; else that of `golden`, a golden
    file or folder (its digests, as a trial takes them: `golden_file_digests`) or a digest (8 or 32
    hexadecimal digits, as the runs' `data.golden_digest` tags hold it). Runs of one golden set are
    found by their digests (`sweep.tracking.digests.same_golden_set`: an old run's and a new one's
    of the same file are paired)."""
    if golden is None:
        latest = max(reversed(runs), key=lambda run: run.start_time)  # on equal times, the later listed
        digest = f"{GOLDEN_DIGEST} {latest.golden_digest}" if latest.golden_digest else f"no {GOLDEN_DIGEST}"
        return same_golden_set(runs, golden_digests(latest.tags)), f"the latest run's golden set, {digest}"
    given = golden.strip()
    if DIGEST.fullmatch(given.lower()) and not Path(given).exists():
        digests = {given.lower()}
    else:
        digests = golden_file_digests(Path(given), runs)
    chosen = same_golden_set(runs, digests)
    if not chosen:
        latest = max(reversed(runs), key=lambda run: run.start_time)
        raise InputError(
            f"--golden {golden}: none of the {len(runs)} finished runs with the metric was scored on this golden set "
            f"({GOLDEN_DIGEST} {' or '.join(sorted(digests))}); the latest, run {latest.run_id}, was scored on "
            f"{latest.golden_digest or 'an unknown one'}"
        )
    return chosen, f"the golden set of --golden, {GOLDEN_DIGEST} {chosen[-1].golden_digest}"


def golden_file_digests(path: Path, runs: Sequence[LoggedRun]) -> set[str]:
    """The digests a trial tags a run scored on the golden file or folder `path` with (as it reads
    now): order-free and in file order, and MLflow's where `runs` carry such a digest. Evidence
    quoted as text is resolved against the corpus the latest of `runs` was scored on (its
    `data.corpus` tag), as the trial did; a BEIR folder is read with that run's `golden.split`."""
    from sweep.formats.corpus import load_corpus  # here: choosing without --golden reads no file
    from sweep.formats.golden import load_golden

    if not path.exists():
        raise InputError(
            f"--golden {path}: no such file or folder, nor a digest (8 or 32 hexadecimal digits, as the runs' "
            f"{GOLDEN_DIGEST} tags hold it)"
        )
    latest = max(reversed(runs), key=lambda run: run.start_time)
    split = latest.params.get("golden.split", "test")
    try:
        golden = load_golden(path, split=split, warn=False)
        if any(question.evidence for question in golden):
            source = latest.tags.get("data.corpus")
            if not source or not Path(source).exists():
                raise InputError(
                    f"its questions quote evidence, which is resolved against a corpus, and the corpus of the latest "
                    f"run ({source or 'none logged'}) is not here; give the golden set's {GOLDEN_DIGEST} instead"
                )
            corpus = load_corpus(source, ids=latest.params.get("golden.corpus_ids", "path"))
            golden = load_golden(path, corpus, split=split, warn=False)
    except InputError as error:
        raise InputError(f"--golden {path}: {error}") from None
    digests = {golden_digest(golden), file_order_digest(golden)}
    if len(golden) <= LEGACY_ROWS and any(is_legacy(run.golden_digest or "") for run in runs):
        digests.add(golden_dataset(golden).digest)
    return digests


def left_out_note(left_out: int, kept: int, which: str, by_latest: bool) -> str:
    """One line: how many runs scored on other golden sets were left out, and what chooses."""
    if not left_out:
        return ""
    runs = "1 run scored on another golden set" if left_out == 1 else f"{left_out} runs scored on other golden sets"
    chooses = "; --golden chooses" if by_latest else ""
    return f"{runs} left out (the best is of the {kept} on {which}){chooses}"


def best_config(
    metric: str = "ndcg_at_10",
    experiment: str | None = None,
    sweep: str | None = None,
    maximize: bool = True,
    among: str = "best",
    prefer: str | None = None,
    golden: str | None = None,
) -> DictConfig:
    """The winning run's fully resolved config (`find_best`), its paths absolute: `run_trial` runs
    it from any folder."""
    return find_best(metric, experiment, sweep, maximize, among, prefer, golden).config


@exit_2_on_bad_input
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sweep.best", description="Print the winning configuration.")
    parser.add_argument("--metric", default="ndcg_at_10")
    parser.add_argument("--experiment", default=None, help=f"default {DEFAULT_EXPERIMENT!r}")
    parser.add_argument(
        "--sweep", default=None, metavar="PARENT_RUN_ID", help=f"only that sweep's runs (`{LATEST}`: the last one)"
    )
    parser.add_argument("--minimize", action="store_true", help="lower is better (e.g. latency/search_ms_p50)")
    parser.add_argument(
        "--among", default="best", choices=AMONG, help="tied: the cheapest of the runs tied with the best"
    )
    parser.add_argument("--prefer", default=None, help=f"with --among tied, lowest wins (default {CHEAPEST_BY})")
    parser.add_argument(
        "--golden",
        default=None,
        metavar="PATH_OR_DIGEST",
        help="only runs scored on this golden set (a golden file or folder, or its data.golden_digest); "
        "default: the golden set of the latest run",
    )
    parser.add_argument("--output", default=None, help="write the resolved config to this YAML file")
    args = parser.parse_args(argv)
    if args.output and Path(args.output).is_dir():
        raise InputError(
            f"--output {args.output}: is a folder; give a file name, e.g. {Path(args.output) / 'best.yaml'}"
        )
    winner = find_best(
        args.metric, args.experiment, args.sweep, not args.minimize, args.among, args.prefer, args.golden
    )
    if winner.note:
        print(f"note: {winner.note}", file=sys.stderr)
    print(f"run {winner.run_id}: {args.metric} = {winner.value:.4f}, {winner.why}")
    print(f"reproduce: {winner.command}")
    if args.output:
        try:
            OmegaConf.save(winner.config, args.output)
        except OSError as error:
            raise InputError(f"--output {args.output}: cannot write it ({error.strerror})") from None
        print(f"config written to {args.output}")
    else:
        print(OmegaConf.to_yaml(winner.config), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
