"""The golden file as the labelling app's store: versioned questions, atomic saves, stale writes refused.

The file on disk is the one source of truth. Every change reads it, applies the change to one
question, checks the whole set exactly as `sweep.formats.golden.load_golden` reads it against the
corpus, and saves it atomically with `sweep.formats.golden.save_golden` (temporary file, fsync,
rename, fsync of the folder; the previous version kept as GOLDEN.bak), under a lock that threads
and other processes share (`sweep.formats.files.exclusive_lock`), before the browser hears
"saved". A crash or kill -9 at any moment leaves a complete golden file, old or new, that the
loader reads.

Two tabs: every question carries a version (a hash of its saved record). A change names the
version it was made on; when the saved question has changed since (another tab, another app),
the change is refused (`StaleWrite`) and nothing is written. Changes to different questions
never conflict.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sweep.errors import InputError
from sweep.formats.corpus import Corpus
from sweep.formats.files import exclusive_lock
from sweep.formats.golden import GoldenSet, Question, load_golden, question_record, save_golden
from sweep.formats.lines import JSON_LINES_SUFFIXES, identifier
from sweep.labelling.addresses import check_addressable
from sweep.labelling.changes import Change


class StaleWrite(Exception):
    """The question changed since the version a change was made on."""

    def __init__(self, current: Question) -> None:
        super().__init__(f"question {current.id!r} was changed elsewhere")
        self.current = current


class UnknownQuestion(KeyError):
    """No question with this id in the golden file (deleted in another tab?)."""


def version(question: Question) -> str:
    """A hash of the question's record as saved: changes whenever the question does."""
    record = json.dumps(question_record(question), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(record.encode()).hexdigest()[:16]


class GoldenFile:
    """The golden set on disk: read fresh for every request, changed one question at a time
    under a lock (`exclusive`), checked and saved atomically (module doc)."""

    def __init__(self, path: Path, corpus: Corpus) -> None:
        self.path, self.corpus = path, corpus
        self._threads = threading.Lock()

    def read(self) -> GoldenSet:
        """As saved (excerpts not resolved); an empty set while the file does not exist yet."""
        if not self.path.exists():
            return GoldenSet((), source=str(self.path))
        return load_golden(self.path, warn=False)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Threads of this app, and other processes that lock the same way, one at a time; the
        folder is locked (flock) rather than a lock file, so nothing is left behind."""
        with self._threads:
            with exclusive_lock(self.path.parent):
                yield

    def remove_stale_temporaries(self) -> None:
        """Temporary files a killed save left behind (never the golden file or its backup)."""
        with self.exclusive():
            for stale in self.path.parent.glob(f".{self.path.name}.*.tmp"):
                stale.unlink(missing_ok=True)

    def _save(self, questions: Sequence[Question]) -> GoldenSet:
        """Save `questions`; the set saved (as `read` would give it back, excerpts not resolved)."""
        golden = GoldenSet(tuple(questions), source=str(self.path))
        save_golden(golden, self.path, self.corpus)
        return golden

    def _current(self, qid: str, expected: Any) -> tuple[GoldenSet, Question]:
        """The saved set and its question `qid`, if it is still at version `expected` (call under `exclusive`)."""
        golden = self.read()
        current = golden.by_id.get(qid)
        if current is None:
            raise UnknownQuestion(qid)
        if expected != version(current):
            raise StaleWrite(current)
        return golden, current

    def change(self, qid: str, expected: Any, change: Change) -> tuple[Question, list[str], GoldenSet]:
        """The changed question, notes for the user, and the set saved."""
        with self.exclusive():
            golden, current = self._current(qid, expected)
            changed, notes = change(current)
            return changed, notes, self._save([changed if q.id == qid else q for q in golden])

    def add(self, qid: Any, fields: Mapping[str, Any]) -> tuple[Question, GoldenSet]:
        """The new question and the set saved."""
        with self.exclusive():
            golden = self.read()
            if qid in (None, ""):
                qid = next(f"q{n:03d}" for n in range(1, len(golden) + 2) if f"q{n:03d}" not in golden.by_id)
            qid = identifier(qid, "new question", "id").strip()
            check_addressable(qid, "new question")
            if qid in golden.by_id:
                raise InputError(f"question id {qid!r} is taken: choose another (or leave it empty)")
            question = Question(id=qid, relevant={}, **fields)
            return question, self._save([*golden, question])

    def delete(self, qid: str, expected: Any) -> GoldenSet:
        """The set saved."""
        with self.exclusive():
            golden, _ = self._current(qid, expected)
            if len(golden) == 1:
                raise InputError("the last question cannot be deleted: a golden set needs at least one")
            return self._save([q for q in golden if q.id != qid])


def open_golden(path: Path, corpus: Corpus) -> GoldenFile:
    """The golden file, checked in full against the corpus (and every question id for the app's addresses,
    `sweep.labelling.addresses`) before anything is served."""
    if path.suffix.lower() not in JSON_LINES_SUFFIXES:
        raise InputError(f"{path}: sweep.label edits a JSON Lines golden set (.jsonl); convert it first")
    if not path.parent.is_dir():
        raise InputError(f"{path}: no such folder {path.parent}")
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give the golden file (.jsonl)")
    if path.exists():
        for question in load_golden(path, corpus, warn=False):
            check_addressable(question.id, str(path))
    golden_file = GoldenFile(path, corpus)
    golden_file.remove_stale_temporaries()
    return golden_file
