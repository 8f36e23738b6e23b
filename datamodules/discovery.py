"""Registries found rather than listed: the modules of a package's folder, and the plugins
installed distributions name under an entry-point group (the packaging spec's entry points,
``importlib.metadata``). The architecture, metric and perf-workload registries fill themselves
from both, so adding one is its own file (or, from outside plmbench, its own distribution with an
``entry_points.txt``), never a line in a hand-kept import list.

A plugin's distribution declares, e.g. in its ``pyproject.toml``::

    [project.entry-points."plmbench.archs"]
    toy = "toy_plmbench.arch"        # a module with an ``ARCH``, or the ``Arch`` itself

Lives at the bottom layer (it imports nothing of ours), so every registry may use it.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points
from types import ModuleType


def folder_modules(package: str, suffix: str = "") -> list[ModuleType]:
    """Every module in ``package``'s folder whose name ends in ``suffix`` (none starting with
    "_"), imported, in name order, so a registry fills in the same order on every machine."""
    path = importlib.import_module(package).__path__
    names = sorted(info.name for info in pkgutil.iter_modules(path)
                   if not info.name.startswith("_") and info.name.endswith(suffix))
    return [importlib.import_module(f"{package}.{name}") for name in names]


def plugins(group: str) -> list[object]:
    """What the entry points of ``group`` of the installed distributions name, loaded, in
    entry-point name order (a module registers what it defines as it is imported)."""
    return [point.load() for point in sorted(entry_points(group=group), key=lambda p: p.name)]
