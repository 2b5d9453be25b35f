"""`sweep.best` chooses within one golden set (issue 49, item 3): a metric's values on different
golden sets are not comparable (a subset's may beat the whole set's), so without `--golden` it
ranks the runs scored on the golden set of the latest run, with `--golden` (a file, a folder or a
digest) that one's, and says in one line how many runs it left out; `--among tied` likewise. Real
SQLite stores in tmp_path, logged in process as trials log."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import mlflow
import pytest

from helpers.data import golden_of
from helpers.logged import BROKEN, FACTOID, golden, log_run, rankings
from helpers.store_folders import copied_store, tracking_in
from helpers.stores import copy_blank_store
from sweep import best
from sweep.best import find_best
from sweep.formats.golden import save_golden
from sweep.tracking.digests import GOLDEN_DIGEST, golden_digest

LATENCY = "latency/search_ms_p50"


def subset_of(full):
    """The first 10 factoid questions of `full`: every one answered at rank 1 scores 1.0."""
    return golden_of({q.id: q.relevant for q in full if q.id in FACTOID[:10]}, {q.id: q.type for q in full})


@pytest.fixture(scope="module")
def logged(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A store with runs on two golden sets, logged once: `subset` (10 questions, nDCG@10 1.0,
    logged first) and, on the whole set (42 questions), `good`, `twin` (the same rankings,
    faster) and `worse` (8 questions' relevant document third), logged after."""
    folder = tmp_path_factory.mktemp("two-golden-sets")
    copy_blank_store(folder)
    full = golden()
    subset = subset_of(full)
    with pytest.MonkeyPatch.context() as patch:
        tracking_in(folder, patch)
        ids = {"subset": log_run("subset", subset, rankings(subset), costs={LATENCY: 0.5})}
        time.sleep(0.01)  # MLflow's start times are milliseconds: the whole set's runs start later
        for name, results, latency in (
            ("good", rankings(full), 5.0),
            ("twin", rankings(full), 2.0),
            ("worse", rankings(full, BROKEN), 1.0),
        ):
            ids[name] = log_run(name, full, results, costs={LATENCY: latency})
    mlflow.set_tracking_uri(None)
    save_golden(full, folder / "full.jsonl")
    save_golden(subset, folder / "subset.jsonl")
    return folder, ids | {"full_digest": golden_digest(full), "subset_digest": golden_digest(subset)}


@pytest.fixture
def store(logged, tmp_path, monkeypatch) -> SimpleNamespace:
    template, ids = logged
    yield SimpleNamespace(folder=copied_store(template, tmp_path / "store", monkeypatch), **ids)
    mlflow.set_tracking_uri(None)


def test_best_ranks_only_the_runs_on_the_latest_runs_golden_set_and_says_so(store, capsys):
    """Before: the subset's 1.0 won over the whole set's, exit 0, no word of it."""
    winner = find_best("ndcg_at_10")
    assert winner.run_id == store.good and winner.value == 1.0  # equal means: the earlier of good and twin
    assert winner.note == (
        "1 run scored on another golden set left out (the best is of the 3 on the latest run's golden set, "
        f"{GOLDEN_DIGEST} {store.full_digest}); --golden chooses"
    )
    assert best.main(["--metric", "ndcg_at_10"]) == 0
    out, err = capsys.readouterr()
    assert err == f"note: {winner.note}\n"
    assert out.startswith(f"run {store.good}: ndcg_at_10 = 1.0000, the highest ndcg_at_10\n")


@pytest.mark.parametrize("how", ["digest", "file", "digest in capitals"])
def test_golden_chooses_the_golden_set_by_file_or_digest(store, capsys, how):
    given = {
        "digest": store.subset_digest,
        "digest in capitals": store.subset_digest.upper(),
        "file": str(store.folder / "subset.jsonl"),
    }[how]
    assert best.main(["--metric", "ndcg_at_10", "--golden", given]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"run {store.subset}: ndcg_at_10 = 1.0000")
    assert err == (
        "note: 3 runs scored on other golden sets left out (the best is of the 1 on the golden set of --golden, "
        f"{GOLDEN_DIGEST} {store.subset_digest})\n"
    )
    assert find_best("ndcg_at_10", golden=str(store.folder / "full.jsonl")).run_id == store.good


def test_among_tied_chooses_within_one_golden_set_too(store, capsys):
    """Before: `subset` (fastest of all) was left out silently, or taken in with --golden's set."""
    tied = find_best("ndcg_at_10", among="tied", prefer=LATENCY)
    assert tied.run_id == store.twin and "2 of 3 runs tied with the best" in tied.why
    assert tied.note.startswith("1 run scored on another golden set left out (the best is of the 3 on")
    assert best.main(["--among", "tied", "--prefer", LATENCY, "--golden", store.subset_digest]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"run {store.subset}: ndcg_at_10 = 1.0000, the lowest {LATENCY} (0.5) of 1 of 1 runs")
    assert err.startswith("note: 3 runs scored on other golden sets left out")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            "0123456789abcdef0123456789abcdef",
            "--golden 0123456789abcdef0123456789abcdef: none of the 4 finished runs with the metric was scored on this "
            "golden set (data.golden_digest 0123456789abcdef0123456789abcdef); the latest, run {worse}, was scored on "
            "{full_digest}",
        ),
        (
            "nosuch.jsonl",
            "--golden nosuch.jsonl: no such file or folder, nor a digest (8 or 32 hexadecimal digits, as the runs' "
            "data.golden_digest tags hold it)",
        ),
        ("", "--golden '': give a golden file or folder, or a data.golden_digest"),
    ],
)
def test_a_golden_set_no_run_was_scored_on_is_one_line_and_exit_2(store, capsys, given, message):
    with pytest.raises(SystemExit) as exit:
        best.main(["--golden", given])
    assert exit.value.code == 2
    assert capsys.readouterr().err == f"error: {message.format(worse=store.worse, full_digest=store.full_digest)}\n"


def test_golden_without_a_choice_left_says_what_it_left_out_but_not_what_chooses(store, capsys):
    assert best.main(["--golden", store.full_digest]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"run {store.good}: ndcg_at_10 = 1.0000")
    assert err == (
        "note: 1 run scored on another golden set left out (the best is of the 3 on the golden set of --golden, "
        f"{GOLDEN_DIGEST} {store.full_digest})\n"
    )
