"""The corpus in memory: documents with id, title, text and metadata, and a digest of them all.

The digest is a content hash of every document, so caches and MLflow tags change exactly when
the corpus does. `sweep.formats.corpus.load_corpus` reads a corpus from a file or folder.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from sweep.errors import InputError

SCALARS = (str, int, float, bool)  # what a metadata value may be


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    # False for documents read from a folder: their title is already in the text (a heading),
    # and offsets into `content` must be offsets into the file's text
    prepend_title: bool = True

    @property
    def content(self) -> str:
        """What gets embedded and indexed: the title, a blank line, then the text; the text alone
        when there is no title or `prepend_title` is False."""
        return f"{self.title}\n\n{self.text}" if self.title and self.prepend_title else self.text

    @property
    def content_digest(self) -> str:
        """sha256 of `content` (16 hex digits): what a judgment records of the text it graded, so
        that an edit of the document since shows (`sweep.formats.provenance`)."""
        return hashlib.sha256(self.content.encode("utf-8")).hexdigest()[:16]


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
        """sha256 over every document's id, title, content (what is embedded, so `prepend_title`
        counts) and metadata, in corpus order."""
        sha = hashlib.sha256()
        for doc in self.documents:
            record = [doc.id, doc.title, doc.content, dict(sorted(doc.metadata.items()))]
            sha.update(json.dumps(record, ensure_ascii=False).encode())
            sha.update(b"\n")
        return sha.hexdigest()

    @cached_property
    def metadata_fields(self) -> frozenset[str]:
        return frozenset(key for doc in self.documents for key in doc.metadata)
