"""Files that appear whole or not at all: every file plmbench writes (records, boards, prediction
files, exports, mirrored Parquet, FAISS indexes) is written beside its target and renamed onto it
(``os.replace``, atomic on one filesystem), so a reader never sees half a file and a failure
leaves the previous version untouched. The file gets the permissions a plain ``open`` would give
under the user's umask (a temp file is created private, 0600)."""

import contextlib
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from datamodules.errors import PlmbenchError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A fresh path beside ``path`` for a writer that takes a file name (``faiss.write_index``,
    ``Dataset.to_parquet``); renamed onto ``path`` when the block ends without an error, removed
    when it raises. The parent directory is created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    partial = Path(name)
    try:
        yield partial
        partial.chmod(0o666 & ~_umask())
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8",
                 newline: str | None = None) -> Iterator[IO]:
    """``open(path, mode)`` for writing, atomically: the handle writes a temp file that is
    flushed to disk and renamed onto ``path`` when the block ends without an error."""
    binary = "b" in mode
    with atomic_path(path) as partial, open(
            partial, mode, encoding=None if binary else encoding,
            newline=None if binary else newline) as handle:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())


def atomic_write_text(path: str | Path, text: str, fix: str | None = None) -> Path:
    """Write ``text`` to ``path`` atomically (UTF-8); returns ``path``. With ``fix``, an
    ``OSError`` (a full disk, a read-only directory) is one PlmbenchError line naming ``path``
    and the fix."""
    try:
        with atomic_write(path) as handle:
            handle.write(text)
    except OSError as err:
        if fix is None:
            raise
        raise PlmbenchError(f"cannot write {path} ({err.strerror or err}): {fix}") from None
    return Path(path)


def staging_dir(target: str | Path) -> Path:
    """A new empty directory beside ``target`` to build a whole directory in before renaming it
    to ``target`` (a checkpoint export, a cached vocabulary); made as ``mkdir`` makes them (0777
    under the user's umask), not ``tempfile.mkdtemp``'s private 0700."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.partial")
    staging.mkdir(0o777)
    return staging
