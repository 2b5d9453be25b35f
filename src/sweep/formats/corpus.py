"""Reading a corpus, the documents retrieval searches, from a file or folder (`load_corpus`).

Each document has an id, title, text and optional metadata. `load_corpus` reads three kinds of input:
- a JSON Lines file (`{"id", "title", "text", "metadata"}`);
- a BEIR folder: a directory holding `corpus.jsonl` (ids in `_id`);
- a folder of documents: any other directory; its `.md`, `.markdown`, `.txt`, `.html`, `.htm`
  and `.pdf` files, one document each (rules in `load_folder`).
A JSON Lines document is embedded as its title, a blank line, then its text; a document from a
folder is embedded as its text alone, so that character offsets into `Document.content` are
offsets into the file's text (`sweep.formats.folder`). The corpus itself, `Corpus` and `Document`
(`sweep.formats.documents`), is importable from here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sweep.errors import InputError, where
from sweep.formats.documents import SCALARS as SCALARS
from sweep.formats.documents import Corpus as Corpus
from sweep.formats.documents import Document as Document
from sweep.formats.folder import DEFAULT_FOLDER_KEYS, check_folder_keys, check_ids
from sweep.formats.folder import ID_SCHEMES as ID_SCHEMES
from sweep.formats.folder import load_folder as load_folder
from sweep.formats.lines import FirstSeen, check_keys, identifier, json_lines, regular_file

DOCUMENT_KEYS = ("id", "_id", "title", "text", "metadata")  # _id: BEIR's name for the id


def load_corpus(path: str | Path, *, ids: str = "path", folder_keys: Sequence[str] = DEFAULT_FOLDER_KEYS) -> Corpus:
    """Read a corpus from a JSON Lines file, a BEIR folder (`path/corpus.jsonl`) or a folder of
    documents (any other directory: see `load_folder`, which alone uses `ids` and `folder_keys`;
    they are checked whatever `path` is). Every problem in JSON Lines names the file and line."""
    path = Path(path)
    ids, folder_keys = check_ids(ids), check_folder_keys(folder_keys)
    if path.is_dir():
        if not (path / "corpus.jsonl").exists():
            return load_folder(path, ids=ids, folder_keys=folder_keys)
        path = path / "corpus.jsonl"
    regular_file(path, "corpus")
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
