"""Corpus: the documents retrieval searches, each with id, title, text and optional metadata.

Reads JSON Lines (`{"id", "title", "text", "metadata"}`) and BEIR's `corpus.jsonl` (`_id`).
The digest is a content hash of every document, so caches and MLflow tags change exactly when
the corpus does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from sweep.errors import InputError, where
from sweep.records import FirstSeen, check_keys, identifier, json_lines

SCALARS = (str, int, float, bool)
DOCUMENT_KEYS = ("id", "_id", "title", "text", "metadata")  # _id: BEIR's name for the id


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def content(self) -> str:
        """What gets embedded and indexed: the title, then the text."""
        return f"{self.title}\n\n{self.text}" if self.title else self.text


@dataclass(frozen=True)
class Corpus:
    documents: tuple[Document, ...]
    source: str = "<memory>"

    def __post_init__(self) -> None:
        if not self.documents:
            raise InputError(f"{self.source}: the corpus has no documents")

    def __len__(self) -> int:
        return len(self.documents)

    def __iter__(self) -> Iterator[Document]:
        return iter(self.documents)

    @cached_property
    def by_id(self) -> dict[str, Document]:
        return {doc.id: doc for doc in self.documents}

    @cached_property
    def digest(self) -> str:
        """sha256 over every document's id, title, text and metadata, in corpus order."""
        sha = hashlib.sha256()
        for doc in self.documents:
            record = [doc.id, doc.title, doc.text, dict(sorted(doc.metadata.items()))]
            sha.update(json.dumps(record, ensure_ascii=False).encode())
            sha.update(b"\n")
        return sha.hexdigest()

    @cached_property
    def metadata_fields(self) -> frozenset[str]:
        return frozenset(key for doc in self.documents for key in doc.metadata)


def load_corpus(path: str | Path) -> Corpus:
    """Read a corpus from JSON Lines; every problem names the file and line."""
    path = Path(path)
    if path.is_dir():
        path = path / "corpus.jsonl"
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    documents: list[Document] = []
    seen = FirstSeen()
    for number, record in json_lines(path):
        document = _parse_document(record, where(path, number))
        seen.add(document.id, path, number, "document id")
        documents.append(document)
    if not documents:
        raise InputError(f"{path}: empty corpus (no documents)")
    return Corpus(tuple(documents), source=str(path))


def _parse_document(record: Any, at: str) -> Document:
    if not isinstance(record, dict):
        raise InputError(f"{at}: expected a JSON object with 'id' and 'text'")
    doc_id = identifier(record.get("id", record.get("_id")), at, "document id")
    check_keys(record, DOCUMENT_KEYS, at, f"document {doc_id!r}")
    if record.get("metadata", {}) is None or record.get("title", "") is None:
        raise InputError(f"{at}: document {doc_id!r} has a null 'title' or 'metadata' (leave the key out instead)")
    text, title = record.get("text"), record.get("title", "")
    if not isinstance(text, str):
        raise InputError(f"{at}: document {doc_id!r} has no 'text' string")
    if not isinstance(title, str):
        raise InputError(f"{at}: document {doc_id!r} has a 'title' that is not a string")
    metadata = record.get("metadata", {})
    if not isinstance(metadata, dict):
        raise InputError(f"{at}: document {doc_id!r} has 'metadata' that is not an object")
    for key, value in metadata.items():
        if not isinstance(value, SCALARS):
            raise InputError(
                f"{at}: document {doc_id!r}: metadata {key!r} is {type(value).__name__}; expected a scalar"
            )
    if not (text.strip() or title.strip()):
        raise InputError(f"{at}: document {doc_id!r} is empty (no title, no text)")
    return Document(id=str(doc_id), text=text, title=title, metadata=metadata)
