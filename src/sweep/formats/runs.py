"""Runs: what a retrieval system returned for each query, in rank order.

Every run is in trec_eval's order, the one tie rule: score descending, then document id
descending (`strcmp`'s byte order; the rank column of a file is ignored), whether read from a
file (a TREC run, read by `sweep.formats.trec`, or JSON Lines, read here) or built from a
retriever's results (`from_ranked`), so that the ranking scored in memory is the ranking
trec_eval, pytrec_eval and `python -m sweep.evaluate` read back from the file `to_trec` writes,
whose scores are written at full precision (`repr`: the same float read back, so no tie is made or
broken on the way). A document appears at most once per query. Ids follow the one rule of
`sweep.formats.lines` (any non-blank string; Unicode NFC) where they are read; a TREC file carries
them percent-encoded (`to_trec`, by `sweep.formats.trec.trec_id`: `HR%20Policies/Leave.md`) and
its reader decodes them, so that reading it back gives the same ids, spaces included.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from pathlib import Path

import numpy as np
import pandas as pd

from sweep.errors import InputError, where
from sweep.formats.columns import Strings, repeated_rows, string_array, trec_order
from sweep.formats.lines import FirstSeen, check_keys, identifier, json_lines, nfc, regular_file, sniff
from sweep.formats.trec import TrecRun, read_run, trec_id, warn_repeated


@dataclass(frozen=True)
class Run:
    """`frame` has columns qid and docid (categorical) and score; each query's rows are
    contiguous and in rank order."""

    frame: pd.DataFrame
    name: str = "run"

    # ------------------------------------------------------------ construction

    @classmethod
    def from_ranked(cls, rankings: Mapping[str, Sequence[tuple[str, float]]], name: str = "run") -> Run:
        """Results given best first (a retriever's); a repeated document keeps its first
        position; then in trec_eval's order (`from_scored`): a tie is ranked by document id,
        never by the order the results came in."""
        qids = [qid for qid, hits in rankings.items() for _ in hits]
        docs = [doc for hits in rankings.values() for doc, _ in hits]
        scores = [float(score) for hits in rankings.values() for _, score in hits]
        return cls.from_scored(_drop_repeats(_frame(qids, docs, scores), name), name)

    @classmethod
    def from_scored(cls, frame: pd.DataFrame, name: str = "run") -> Run:
        """Order each query's documents as trec_eval does: score descending, then doc id descending."""
        frame = _categorical(frame)
        doc_codes = frame["docid"].cat.codes.to_numpy(np.int64)  # categories are sorted, so codes order ids
        moves = trec_order(
            frame["qid"].cat.codes.to_numpy(np.int64), frame["score"].to_numpy(), lambda rows: doc_codes[rows]
        )
        if moves is not None:
            order = np.arange(len(frame))
            order[moves[0]] = moves[1]
            frame = frame.iloc[order].reset_index(drop=True)
        return cls(_drop_repeats(frame, name), name)

    @classmethod
    def from_dict(cls, run: Mapping[str, Mapping[str, float]], name: str = "run") -> Run:
        """{qid: {docid: score}}, the shape pytrec_eval and ranx take; ordered as trec_eval orders it."""
        qids = list(run)
        sizes = np.fromiter((len(docs) for docs in run.values()), np.int64, len(qids))
        docs = np.fromiter(chain.from_iterable(run.values()), object, int(sizes.sum()))
        scores = np.fromiter(chain.from_iterable(hits.values() for hits in run.values()), float, len(docs))
        doc_codes, doc_ids = pd.factorize(docs, sort=True)
        qid_order = np.argsort(np.array(qids, dtype=object))
        qid_codes = np.repeat(np.argsort(qid_order), sizes)
        frame = pd.DataFrame(
            {
                "qid": _in_nfc(pd.Categorical.from_codes(qid_codes, pd.Index(qids, dtype="str")[qid_order])),
                "docid": _in_nfc(pd.Categorical.from_codes(doc_codes, pd.Index(doc_ids, dtype="str"))),
                "score": scores,
            }
        )
        return cls.from_scored(frame, name)

    @classmethod
    def read(cls, path: str | Path) -> Run:
        """A TREC run (`qid Q0 docid rank score tag`) or JSONL (`{"id": qid, "results": [[docid, score], ...]}`)."""
        path = regular_file(Path(path), "run file")
        kind = sniff(path)
        if kind == "yaml":
            raise InputError(f"{path}: a run is a TREC run file or JSON Lines, not YAML")
        frame = _read_jsonl(path) if kind == "jsonl" else _frame_of(read_run(path))
        return cls.from_scored(frame, name=str(path))

    # ------------------------------------------------------------ views

    @cached_property
    def columns(self) -> TrecRun:
        """The run in columns, as the scorer reads it (`sweep.evaluation.trec_columns`)."""
        qid, docid = (
            Strings(self.frame[name].cat.codes.to_numpy(np.int32), string_array(self.frame[name].cat.categories))
            for name in ("qid", "docid")
        )
        return TrecRun(qid, docid, self.frame["score"].to_numpy(float))

    @cached_property
    def qids(self) -> pd.Index:
        """Queries with at least one result, in the run's order."""
        return pd.Index(self.frame["qid"].unique().astype(object), dtype=object)

    def rankings(self, limit: int | None = None) -> dict[str, list[tuple[str, float]]]:
        """qid -> [(docid, score), ...] in rank order, at most `limit` per query."""
        frame = self.frame if limit is None else self.frame.groupby("qid", observed=True, sort=False).head(limit)
        out: dict[str, list[tuple[str, float]]] = {}
        for qid, doc, score in zip(frame["qid"].astype(object), frame["docid"].astype(object), frame["score"]):
            out.setdefault(qid, []).append((doc, float(score)))
        return out

    def restrict(self, qids: pd.Index) -> Run:
        keep = self.frame["qid"].astype(object).isin(qids)
        return Run(self.frame[keep].reset_index(drop=True), self.name)

    def to_trec(self, path: str | Path, tag: str = "golden-sweep") -> None:
        """The run as a TREC run file, its ids percent-encoded (`sweep.formats.trec.trec_id`: a space
        as `%20`, `%` as `%25`), as `read` and `python -m sweep.evaluate` decode them; an empty id
        is an error."""
        frame = self.frame
        for column, what in (("qid", "query id"), ("docid", "document id")):
            if (frame[column].cat.categories == "").any():
                raise InputError(f"{path}: an empty {what} cannot be written to a TREC file")
            encoded = [trec_id(value) for value in frame[column].cat.categories]  # each id once
            frame = frame.assign(**{column: frame[column].cat.rename_categories(encoded)})
        if frame.empty:  # every question abstained: an empty run file, as trec_eval reads it
            Path(path).write_text("", encoding="utf-8")
            return
        rank = frame.groupby("qid", observed=True, sort=False).cumcount() + 1
        lines = (
            frame["qid"].astype(str)
            + " Q0 "
            + frame["docid"].astype(str)
            + " "
            + rank.astype(str)
            + " "
            + frame["score"].map(repr)
            + f" {tag}\n"
        )
        Path(path).write_text("".join(lines), encoding="utf-8")


def _frame(qids: Iterable[str], docs: Iterable[str], scores: Iterable[float]) -> pd.DataFrame:
    frame = pd.DataFrame({"qid": list(qids), "docid": list(docs), "score": np.asarray(list(scores), dtype=float)})
    return _categorical(frame)


def _categorical(frame: pd.DataFrame) -> pd.DataFrame:
    """qid and docid as categoricals with sorted categories (codes then order ids as strings);
    ids given as plain columns (not categoricals, which a reader made) are put in Unicode NFC."""
    out = pd.DataFrame(index=frame.index)
    for column in ("qid", "docid"):
        values = frame[column]
        if not isinstance(values.dtype, pd.CategoricalDtype):
            values = pd.Series(_in_nfc(pd.Categorical(values.astype(str))), index=frame.index)  # sorted categories
        elif not values.cat.categories.is_monotonic_increasing:
            values = values.cat.reorder_categories(values.cat.categories.sort_values())
        out[column] = values
    out["score"] = frame["score"].astype(float)
    return out


def _in_nfc(values: pd.Categorical) -> pd.Categorical:
    """`values` with its categories (each id once) in Unicode NFC, sorted; ids that differ only in
    their form made one."""
    categories = values.categories
    normal = np.array([nfc(value) for value in categories], dtype=object)
    if np.array_equal(normal, np.asarray(categories, dtype=object)):
        return values
    merged, codes = np.unique(normal, return_inverse=True)  # sorted, as the categories were
    return pd.Categorical.from_codes(codes[values.codes], pd.Index(merged, dtype="str"))


def _drop_repeats(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """Keep each (query, document) once, at its first (best) position; warn once."""
    qid, docid = frame["qid"], frame["docid"]
    repeated = repeated_rows(qid.cat.codes.to_numpy(), docid.cat.codes.to_numpy(), len(docid.cat.categories))
    if repeated is None:
        return frame
    first = int(np.argmax(repeated))
    warn_repeated(name, qid.iloc[first], docid.iloc[first], int(repeated.sum()))
    return frame[~repeated].reset_index(drop=True)


def _frame_of(run: TrecRun) -> pd.DataFrame:
    """A TREC run's columns as a frame of qid and docid (categorical) and score."""
    return pd.DataFrame(
        {
            name: pd.Categorical.from_codes(strings.codes, strings.values)
            for name, strings in (("qid", run.qid), ("docid", run.docid))
        }
        | {"score": run.score}
    )


def _read_jsonl(path: Path) -> pd.DataFrame:
    qids, docs, scores = [], [], []
    seen = FirstSeen()
    for number, record in json_lines(path):
        at = where(path, number)
        if isinstance(record, dict):
            check_keys(record, ("id", "results"), at, "a result line")
        if not isinstance(record, dict) or "id" not in record or not isinstance(record.get("results"), list):
            raise InputError(f'{at}: expected {{"id": qid, "results": [[docid, score], ...]}}')
        qid = identifier(record["id"], at, "query id")
        seen.add(qid, path, number, "query id", str(record["id"]))
        for hit in record["results"]:
            if not (isinstance(hit, (list, tuple)) and len(hit) == 2 and isinstance(hit[0], (str, int))):
                raise InputError(f"{at}: query {qid!r}: result {hit!r} is not a [docid, score] pair")
            identifier(hit[0], at, f"query {qid!r}: document id")
            score = hit[1]
            if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
                raise InputError(f"{at}: query {qid!r}: score {score!r} of {hit[0]!r} is not a finite number")
            qids.append(qid)
            docs.append(str(hit[0]))
            scores.append(float(score))
    if not seen:
        raise InputError(f"{path}: empty file")
    return _frame(qids, docs, scores)
