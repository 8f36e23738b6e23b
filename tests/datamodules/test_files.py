"""``datamodules.files``, the one writer of records, boards, predictions, mirrors and indexes:
the file appears whole or not at all, with the mode the user's umask gives an ordinary file, and
a place that cannot be written is one line naming it."""

import os
import stat
from pathlib import Path

import pytest

from bench.record import write_record
from datamodules.errors import PlmbenchError
from datamodules.files import atomic_path, atomic_write, atomic_write_text, staging_dir


@pytest.fixture
def umask():
    """Set a umask for one test, and put the previous one back."""
    previous = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_files_and_directories_get_the_users_umask(tmp_path, umask, mask):
    umask(mask)
    assert mode(atomic_write_text(tmp_path / "board.md", "| a |\n")) == 0o666 & ~mask
    assert mode(write_record(tmp_path / "run", {"status": "ok"})) == 0o666 & ~mask
    with atomic_write(tmp_path / "blob", "wb") as handle:
        handle.write(b"\x00\x01")
    assert mode(tmp_path / "blob") == 0o666 & ~mask
    assert mode(staging_dir(tmp_path / "export")) == 0o777 & ~mask


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = atomic_write_text(tmp_path / "index.faiss", "old\n")
    with pytest.raises(RuntimeError, match="killed mid-write"), atomic_path(target) as partial:
        partial.write_text("half of it")  # a library's own writer, then a crash
        raise RuntimeError("killed mid-write")
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == [target.name]


def test_an_unwritable_place_is_one_line_naming_the_path_and_the_fix(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory\n")
    with pytest.raises(PlmbenchError) as error:
        atomic_write_text(blocked / "board.md", "x", fix="pass --out a writable path")
    assert str(error.value).startswith(f"cannot write {blocked / 'board.md'} (")
    assert str(error.value).endswith("): pass --out a writable path")
    assert blocked.read_text() == "not a directory\n"
    with pytest.raises(OSError):  # without a fix the caller decides
        atomic_write_text(blocked / "board.md", "x")
