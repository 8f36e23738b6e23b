"""The one way plmbench writes a file that others read: all of it or none of it.

``atomic_write`` writes to a temporary file beside the target (the same filesystem, so
``os.replace`` is an atomic rename, POSIX ``rename(2)``): a reader, or a run killed mid-write,
sees the old file or the new one, never half of one, and nothing is left behind on failure.
The temporary file is created as ``open()`` creates files (mode 0666 under the user's umask),
not ``tempfile``'s private 0600, so records, boards and predictions can be read by whoever may
read the results directory. Records, boards, prediction files, the data mirror and the FAISS
indexes all go through it.
"""

import contextlib
import os
import uuid
from collections.abc import Callable
from pathlib import Path

from datamodules.errors import PlmbenchError

#: what a failed write suggests unless the caller names a better fix
DEFAULT_FIX = "free disk space or choose a writable location"


def atomic_write(path: str | Path, content: str | bytes | Callable[[Path], object], *,
                 encoding: str = "utf-8", sync: bool = False, fix: str = DEFAULT_FIX) -> Path:
    """Write ``content`` to ``path`` atomically; ``path``.

    ``content`` is text (written with ``encoding``, newlines as given), bytes, or a function
    that writes the file at the path it is given (a library's own writer: Parquet, FAISS).
    ``sync`` flushes the data to disk before the rename (records: a power cut leaves the old
    record or the new one). Parent directories are created. An ``OSError`` (a full disk, a
    read-only directory) is a ``PlmbenchError`` naming ``path`` and ``fix``.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if callable(content):
            content(tmp)
        else:
            data = content.encode(encoding) if isinstance(content, str) else content
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                if sync:
                    handle.flush()
                    os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise PlmbenchError(f"cannot write {path} ({err.strerror or err}): {fix}") from None
        raise
    return path


def staging_dir(target: str | Path) -> Path:
    """A new empty directory beside ``target`` to build a whole directory in before renaming it
    to ``target`` (a checkpoint export, a cached vocabulary); made as ``mkdir`` makes them (0777
    under the user's umask), not ``tempfile.mkdtemp``'s private 0700."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.partial")
    staging.mkdir(0o777)
    return staging
