"""LanceDB as the index: the chunk vectors in a LanceDB table, searched by one of LanceDB's indexes.

    python -m sweep index=lancedb index.index_type=IVF_PQ index.nprobes=4
    python -m sweep index=lancedb index.prefilter=false filter=pre

One table per run: `_chunk` (the chunk's position), `_vector`, and a column per metadata field of
the chunks' documents (numbers as float64, strings, booleans; a field whose documents give it
values of several types holds their JSON text). The vector index is LanceDB's own
(`index_type`: IVF_FLAT, IVF_SQ, IVF_PQ, IVF_HNSW_FLAT, IVF_HNSW_SQ, IVF_HNSW_PQ) on the dot
product, with its knobs: `num_partitions` and `nprobes` (IVF), `num_sub_vectors` (PQ), `m`,
`ef_construction` and `ef` (HNSW), `refine_factor` (re-score that many times k candidates on the
full vectors). Under `filter=pre` the question's filter becomes a SQL `where` that LanceDB
applies before the vector search (`prefilter=true`) or to its results (`prefilter=false`, which
can return fewer hits than asked: `filter/short_result_rate`); a search restricted by chunk ids
alone (a hybrid's member) filters on `_chunk`. LanceDB plans its own filtered search, so
`filter.exact_below` does not apply. LanceDB trains IVF on a random sample: two builds may differ.

The table lives in `uri` (a LanceDB database folder) or, when null, in a temporary folder removed
at the end; it is dropped when the run ends, also when it fails or is interrupted, unless
`keep=true` (`sweep.retrieval.vector_index.Cleanup`). A `uri` folder that cannot be made or
written (/proc, a read-only file system, a file where the folder belongs) is one line when the
index is made, before anything is embedded.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa

from sweep.errors import InputError, folder_problem
from sweep.retrieval.vector_index import (
    Cleanup,
    Scalar,
    VectorIndex,
    Where,
    engine_package,
    folder_bytes,
    padded,
    stored_value,
)
from sweep.settings import NonEmpty, OneOf, Range, checked

log = logging.getLogger(__name__)
INDEX_TYPES = {  # the name LanceDB's docs use -> its configuration class in lancedb.index
    "IVF_FLAT": "IvfFlat",
    "IVF_SQ": "IvfSq",
    "IVF_PQ": "IvfPq",
    "IVF_HNSW_FLAT": "HnswFlat",
    "IVF_HNSW_SQ": "HnswSq",
    "IVF_HNSW_PQ": "HnswPq",
}
CHUNK, VECTOR = "_chunk", "_vector"  # our columns; a metadata field may not take these names
COLUMN_TYPES = {bool: pa.bool_(), float: pa.float64(), str: pa.string()}


def sql_name(field: str) -> str:
    return "`" + field.replace("`", "``") + "`"


def sql_literal(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return "'" + value.replace("'", "''") + "'"


Column = tuple[Callable[[Scalar], Scalar], pa.DataType]  # how a field's values are written, and its type


def metadata_columns(metadata: Sequence[Mapping[str, Any]]) -> dict[str, Column]:
    """Each metadata field's column: the stored value where all documents give the field values of
    one type, their JSON text where they mix types."""
    kinds: dict[str, set[type]] = {}
    for chunk in metadata:
        for field, value in chunk.items():
            kinds.setdefault(field, set()).add(type(stored_value(value)))
    taken = sorted(kinds.keys() & {CHUNK, VECTOR})
    if taken:
        raise InputError(f"index=lancedb: a metadata field named {taken[0]!r} clashes with the table's own column")
    return {
        field: (stored_value, COLUMN_TYPES[next(iter(types))]) if len(types) == 1 else (as_json, pa.string())
        for field, types in kinds.items()
    }


def as_json(value: Scalar) -> str:
    return json.dumps(stored_value(value))


def lancedb_where(where: Where, columns: Mapping[str, Column]) -> str:
    """`field -> values` as a SQL condition on the table's columns, every field required."""
    conditions = []
    for field, values in where.items():
        if field not in columns:  # no chunk has the field: nothing matches
            return "false"
        encode = columns[field][0]
        conditions.append(f"{sql_name(field)} IN ({', '.join(sql_literal(encode(value)) for value in values)})")
    return " AND ".join(conditions)


@checked("index")
@dataclass
class LanceDBIndex(VectorIndex):
    index_type: Annotated[str, OneOf(tuple(INDEX_TYPES))] = "IVF_HNSW_SQ"
    num_partitions: Annotated[int | None, Range(1)] = None  # IVF lists; null = LanceDB's choice (about sqrt(rows))
    num_sub_vectors: Annotated[int | None, Range(1)] = None  # PQ: must divide the dimension; null = dimension / 16
    m: Annotated[int, Range(2)] = 20  # HNSW: links per node
    ef_construction: Annotated[int, Range(1)] = 300  # HNSW: candidates while building
    nprobes: Annotated[int, Range(1)] = 20  # IVF lists searched per query
    ef: Annotated[int | None, Range(1)] = None  # HNSW: candidates per search; null = LanceDB's 1.5 x k
    refine_factor: Annotated[int | None, Range(1)] = None  # re-score refine_factor x k candidates exactly
    prefilter: bool = True  # filter before the vector search (false: filter its results)
    uri: Annotated[str | None, NonEmpty()] = None  # a LanceDB database folder; null = a temporary one
    keep: bool = False  # leave the table (named in the log) in `uri`

    def __post_init__(self) -> None:
        if self.keep and self.uri is None:
            raise InputError(
                "index.keep=true: a temporary folder is removed whatever it holds; give index.uri=<folder> to keep the table"
            )
        scheme = urlsplit(self.uri).scheme if self.uri is not None else None
        if scheme in ("", "file"):  # a folder here, not object storage (s3://, gs://) or LanceDB Cloud (db://)
            problem = folder_problem(self.uri.removeprefix("file://"))
            if problem is not None:
                raise InputError(
                    f"index.uri={self.uri}: LanceDB cannot keep its database there ({problem}); "
                    "give index.uri=<a writable folder>, or leave it null for a temporary one"
                )
        self._cleanup: Cleanup | None = None

    def _build(self, vectors: np.ndarray, metadata: Sequence[Mapping[str, Any]]) -> None:
        lancedb = engine_package("lancedb", "index=lancedb")
        self._columns = metadata_columns(metadata)
        config = self._index_config(vectors.shape[1])
        self._cleanup = cleanup = Cleanup(self)
        uri = self.uri or tempfile.mkdtemp(prefix="golden-sweep-lancedb-")
        if self.uri is None:
            cleanup.add(partial(shutil.rmtree, uri, ignore_errors=True), f"the folder {uri}")
        database = lancedb.connect(uri)
        name = f"golden_sweep_{uuid.uuid4().hex[:12]}"
        if self.uri is not None and not self.keep:
            cleanup.add(partial(drop_table, database, name), f"the LanceDB table {name} in {uri}")
        columns = {
            CHUNK: pa.array(np.arange(len(vectors)), pa.int64()),
            VECTOR: pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1]),
        }
        for field, (encode, column_type) in self._columns.items():
            columns[field] = pa.array(
                [encode(chunk[field]) if field in chunk else None for chunk in metadata], column_type
            )
        table = database.create_table(name, pa.table(columns))
        table.create_index(VECTOR, config=config)
        if self.keep:
            log.info("index=lancedb: the table %s is kept in %s", name, uri)
        self._table, self._table_folder = table, Path(uri) / f"{name}.lance"

    def _index_config(self, dim: int) -> Any:
        """LanceDB's configuration object for `index_type`, given the knobs it takes."""
        from lancedb import index

        kind = getattr(index, INDEX_TYPES[self.index_type])
        if "PQ" in self.index_type and self.num_sub_vectors is not None and dim % self.num_sub_vectors:
            raise InputError(f"index.num_sub_vectors={self.num_sub_vectors}: must divide the vectors' {dim} dimensions")
        knobs = {
            "distance_type": "dot",
            "num_partitions": self.num_partitions,
            "num_sub_vectors": self.num_sub_vectors,
            "m": self.m,
            "ef_construction": self.ef_construction,
        }
        return kind(**{key: value for key, value in knobs.items() if key in {f.name for f in fields(kind)}})

    def _search(
        self, queries: np.ndarray, k: int, allowed: np.ndarray | None, exact: bool, where: Where | None
    ) -> tuple[np.ndarray, np.ndarray]:
        if where:
            condition = lancedb_where(where, self._columns)
        elif allowed is not None:
            condition = f"{CHUNK} IN ({', '.join(map(str, allowed.tolist()))})"
        else:
            condition = None
        rows = []
        for query in queries:
            search = self._table.search(query, vector_column_name=VECTOR).distance_type("dot").limit(k)
            search = search.nprobes(self.nprobes).select([CHUNK, "_distance"])
            if self.ef is not None:
                search = search.ef(self.ef)
            if self.refine_factor is not None:
                search = search.refine_factor(self.refine_factor)
            if condition is not None:
                search = search.where(condition, prefilter=self.prefilter)
            found = search.to_arrow()
            # LanceDB's dot distance is 1 - the inner product
            rows.append((1 - found["_distance"].to_numpy(), found[CHUNK].to_numpy()))
        return padded(rows, k)

    @property
    def nbytes(self) -> int | None:
        return folder_bytes(self._table_folder) if self._table_folder.exists() else None

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()


def drop_table(database: Any, name: str) -> None:
    if name in database.list_tables().tables:  # not made when the run stopped before
        database.drop_table(name)
