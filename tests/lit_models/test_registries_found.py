"""Registries are found, not listed (datamodules/discovery.py): a toy architecture in a package of
its own, named by its distribution's entry points, becomes a model plmbench can build with no
edit to the registry; the modules of a folder are found by name, in name order."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from datamodules.discovery import folder_modules
from lit_models.archs import ARCH_GROUP, ARCHS, find_archs, get_model, models_of_kinds


def write_package(root: Path, name: str, files: dict[str, str]) -> None:
    (root / name).mkdir(parents=True)
    for file, text in {"__init__.py": "", **files}.items():
        (root / name / file).write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    """``tmp_path`` on sys.path; the modules imported from it are forgotten after the test."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if str(tmp_path) in (getattr(sys.modules[name], "__file__", None) or ""):
            del sys.modules[name]


def test_a_plugins_architecture_is_registered_from_its_entry_points(on_path):
    write_package(on_path, "toy_plmbench", {"arch.py": """
        from dataclasses import replace

        from lit_models.archs import bert

        # a toy: BERT's net and layout under a name of its own
        ARCH = replace(bert.ARCH, name="toy-plugin")
        """})
    info = on_path / "toy_plmbench-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plmbench\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ARCH_GROUP}]\ntoy = toy_plmbench.arch\n")
    assert "toy-plugin" not in ARCHS
    try:
        assert find_archs() == ["toy-plugin"]  # the built-in ones are registered already
        toy = get_model("toy-plugin")
        assert toy.name == "toy-plugin" and toy.encoder is ARCHS["bert"].encoder
        assert "toy-plugin" in models_of_kinds((toy.kind,))
        assert find_archs() == []  # found once
    finally:
        ARCHS.pop("toy-plugin", None)


def test_the_modules_of_a_folder_are_found_by_name_in_order(on_path):
    write_package(on_path, "toy_registry", {
        "b_perf.py": "ORDER = 'b'\n", "a_perf.py": "ORDER = 'a'\n", "c.py": "ORDER = 'c'\n",
        "_private_perf.py": "raise ImportError('a private module is never imported')\n"})
    assert [m.ORDER for m in folder_modules("toy_registry", suffix="_perf")] == ["a", "b"]
    assert [m.ORDER for m in folder_modules("toy_registry")] == ["a", "b", "c"]


def test_every_architecture_file_of_the_folder_is_registered():
    """A module of lit_models/archs that defines an ``ARCH`` is in the registry, listed nowhere."""
    folder = Path(__file__).resolve().parents[2] / "lit_models" / "archs"
    defining = sorted(path.stem for path in folder.glob("*.py") if "\nARCH = " in path.read_text())
    assert len(defining) == len(ARCHS)
    for stem in defining:
        arch = importlib.import_module(f"lit_models.archs.{stem}").ARCH
        assert ARCHS[arch.name] is arch
