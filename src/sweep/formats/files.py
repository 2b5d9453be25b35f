"""Files written safely: atomic replacement (a crash leaves the old file or the new one, both
complete) and the one exclusive lock every writer shares (`flock`, released when its holder ends,
even by kill -9)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path


@contextlib.contextmanager
def exclusive_lock(path: str | Path, required: bool = True) -> Iterator[bool]:
    """Hold an exclusive `flock` on `path` (a file, created if missing, or a folder: locking a
    folder leaves nothing behind) until the block ends; the kernel releases it however the holder
    ends, even by kill -9. Yields whether the lock is held. `required=False`: where no lock can be
    taken (a read-only folder, a filesystem without locks) the block runs unlocked instead of
    raising (the caller's worst case must then be work done twice, never damage)."""
    path = Path(path)
    try:
        if path.is_dir():
            descriptor = os.open(path, os.O_RDONLY)
        else:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
            os.utime(descriptor)  # in use: a cleaner that removes old lock files leaves it alone
    except OSError:
        if required:
            raise
        yield False
        return
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        except OSError:
            if required:
                raise
            yield False
            return
        yield True
    finally:
        os.close(descriptor)  # and with it the lock


def write_text_atomically(path: str | Path, text: str, backup: bool = False) -> None:
    """Replace `path` with `text` so that a crash or kill at any moment leaves the old file or the
    new one, each complete: write a temporary file in the same folder, fsync it, rename it over
    `path`, fsync the folder (the rename itself is then on disk). The file keeps its permissions
    (a new one gets the umask's). `backup`: the previous file is kept as `path.bak` (a hard link,
    renamed into place: the backup, too, is always complete)."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as handle:
            if path.exists():
                os.fchmod(handle.fileno(), stat.S_IMODE(path.stat().st_mode))
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if backup and path.exists():
            _keep_backup(path)
        os.replace(temporary, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    _fsync_folder(path.parent)


def _keep_backup(path: Path) -> None:
    backup = path.with_name(f"{path.name}.bak")
    staged = path.with_name(f".{backup.name}.{uuid.uuid4().hex}.tmp")
    try:
        os.link(path, staged)
    except OSError:  # a filesystem without hard links: copy it
        shutil.copyfile(path, staged)
        with open(staged, "rb") as handle:
            os.fsync(handle.fileno())
    os.replace(staged, backup)


def _fsync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
