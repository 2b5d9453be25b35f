"""A run's golden set kept: the golden file it was scored on stored with it, and the set it was edited from (lineage).

`sweep.tracking.records` logs the golden set of a trial as a dataset input; here is what comes with
it. The files the questions were read from are stored among the run's artifacts as they were
(`golden/<file name>`; `golden_files` says which for a BEIR or chunking-benchmark folder), with
their sha256 as a tag, so that `python -m sweep.golden diff run:<id> NEW` reads the set a run was
scored on (`sweep.tracking.reading.golden_copy`) even after the file was edited. The run is tagged
with the path the set was read from; the latest earlier run of the experiment scored on a set at
that path with another digest is its parent (`golden_parent`): its digest and run are tags, and its
dataset is a second dataset input of the run (context `golden.parent`), so MLflow's UI shows both.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import mlflow

from sweep.errors import InputError
from sweep.formats.corpus import Corpus
from sweep.formats.golden import GoldenSet, load_golden
from sweep.formats.golden_readers import CHUNKING_EVAL_QUESTIONS
from sweep.formats.provenance import REVIEWED
from sweep.tracking.digests import GOLDEN_DIGEST, golden_digest
from sweep.tracking.reading import GOLDEN_COPY, golden_input

log = logging.getLogger(__name__)
GOLDEN_PATH = "data.golden"  # what the golden set was read from (absolute): its lineage follows the path
GOLDEN_FILE_DIGEST = "data.golden_file_sha256"  # of the stored copy (`golden/`)
GOLDEN_PARENT_DIGEST = "data.golden_parent_digest"  # the golden set this one was edited from
GOLDEN_PARENT_RUN = "data.golden_parent_run"  # a run scored on that one
PARENT_CONTEXT = "golden.parent"  # the context of the parent golden set's dataset input


def keep_golden_set(
    golden: GoldenSet, corpus: Corpus, experiment_id: str, digest: str
) -> tuple[dict[str, str], list[Any]]:
    """What the active run keeps of `golden` (digest `digest`), scored with `corpus`: its files
    stored (`store_golden_file`), and the tags (the path it was read from, the copy's sha256, the
    parent's digest and run) with the parent's dataset input (`golden_parent`) for the caller to
    log with the run's own (`sweep.tracking.records`). No tags for a set not read from a file."""
    from mlflow.entities import DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    stored = store_golden_file(golden, corpus)
    if stored is None:
        return {}, []
    tags = {GOLDEN_PATH: stored[0], GOLDEN_FILE_DIGEST: stored[1]}
    parent = golden_parent(experiment_id, stored[0], digest)
    if parent is None:
        return tags, []
    tags |= {GOLDEN_PARENT_DIGEST: parent[0], GOLDEN_PARENT_RUN: parent[1]}
    used = golden_input(parent[1])
    return tags, [] if used is None else [
        DatasetInput(used.dataset, [InputTag(MLFLOW_DATASET_CONTEXT, PARENT_CONTEXT)])
    ]


def golden_files(golden: GoldenSet) -> tuple[Path, dict[str, Path]] | None:
    """What `load_golden` read `golden` from (a file or a folder) and the files its questions came
    from, by where a run stores each among its artifacts: a golden file (JSON Lines, YAML, TREC
    qrels) as `golden/<file name>`; a BEIR folder as `golden/<folder>/queries.jsonl` and
    `golden/<folder>/qrels/<split>.tsv` (not its corpus.jsonl: the corpus is not the golden set);
    Chroma's chunking benchmark as `golden/<folder>/questions_df.csv`. None for a set that was not
    read from a file."""
    source = Path(golden.source).absolute()
    if not source.is_file():
        return None
    folder = source.parent
    if source.name == CHUNKING_EVAL_QUESTIONS:
        return folder, {f"{GOLDEN_COPY}/{folder.name}/{source.name}": source}
    queries = folder.parent / "queries.jsonl"
    if folder.name == "qrels" and queries.is_file():  # read_beir's source: <folder>/qrels/<split>.tsv
        beir = folder.parent
        stored = {"queries.jsonl": queries, f"qrels/{source.name}": source}
        return beir, {f"{GOLDEN_COPY}/{beir.name}/{path}": file for path, file in stored.items()}
    return source, {f"{GOLDEN_COPY}/{source.name}": source}


def store_golden_file(golden: GoldenSet, corpus: Corpus) -> tuple[str, str] | None:
    """The golden files of `golden` (`golden_files`) copied, the copy checked to read back (with
    `corpus`) to the golden set the active run was scored on (a file edited while the run ran is
    not stored: one warning), and logged; (the path the set was read from, the copy's sha256), or
    None where nothing was stored. The sha256 is the file's (what `sha256sum` prints), or for a
    folder's files, that of their paths and sha256s, a line each."""
    found = golden_files(golden)
    if found is None:
        return None
    read_from, files = found
    with tempfile.TemporaryDirectory() as folder:
        copies = {path: Path(folder, path) for path in sorted(files)}
        for path, copy in copies.items():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(files[path], copy)
        try:
            copy = Path(folder, GOLDEN_COPY, read_from.name)
            stored = load_golden(copy, corpus, split=Path(golden.source).stem, warn=False)
            same = _same_questions(stored, golden) or golden_digest(stored) == golden_digest(golden)
        except InputError:
            same = False
        if not same:
            log.warning(
                "%s changed while the run ran: the run does not store it, as it is not the golden set it was scored on",
                read_from,
            )
            return None
        mlflow.log_artifacts(str(Path(folder, GOLDEN_COPY)), GOLDEN_COPY)
        hashes = {path: hashlib.sha256(copy.read_bytes()).hexdigest() for path, copy in copies.items()}
    if len(hashes) == 1:
        return str(read_from), next(iter(hashes.values()))
    lines = "".join(f"{path.removeprefix(GOLDEN_COPY + '/')}\n{sha}\n" for path, sha in hashes.items())
    return str(read_from), hashlib.sha256(lines.encode()).hexdigest()


def _same_questions(a: GoldenSet, b: GoldenSet) -> bool:
    """Whether `a` and `b` hold the same questions, whatever their review status (a run may score
    the pending ones as reviewed, `golden.status=all`; one that sets them aside has the same digest)."""
    return len(a) == len(b) and all(replace(p, status=REVIEWED) == replace(q, status=REVIEWED) for p, q in zip(a, b))


def golden_parent(experiment_id: str, path: str, digest: str) -> tuple[str, str] | None:
    """The golden set that the one at `path` with `digest` was edited from, as (its digest, the run
    scored on it): the latest run of the experiment scored on a golden set at the same `path`, when
    its digest is another; when it is the same (the set has not changed since), that run's own
    parent. None for the first set at `path` (and for a path holding both kinds of quote, which
    MLflow's search cannot name)."""
    quote = "'" if "'" not in path else '"'
    if quote in path:
        return None
    latest = mlflow.MlflowClient().search_runs(
        [experiment_id],
        f"tags.`{GOLDEN_PATH}` = {quote}{path}{quote}",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if not latest:
        return None
    tags = latest[0].data.tags
    if tags.get(GOLDEN_DIGEST) != digest:
        return tags.get(GOLDEN_DIGEST, ""), latest[0].info.run_id
    if GOLDEN_PARENT_DIGEST in tags and GOLDEN_PARENT_RUN in tags:
        return tags[GOLDEN_PARENT_DIGEST], tags[GOLDEN_PARENT_RUN]
    return None
