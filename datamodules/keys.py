"""Keys a user wrote that nothing reads: one error naming each and the nearest valid key.

A misspelled key in a YAML or an override (``text_fileds``, ``model.hiden_size``) would otherwise
be ignored, and the run would train something else than asked. Every place that reads a mapping
a user wrote (task YAMLs, model presets and overrides, the run config's sections, board YAMLs)
checks its keys here against what it reads. The nearest key is difflib's closest match (Ratcliff
and Obershelp's gestalt similarity, ratio >= 0.6), as Python's own "did you mean" hints.
"""

import difflib
from collections.abc import Iterable

from datamodules.errors import PlmbenchError

#: how many known keys an error lists when none is near the unknown one
SHOWN = 12


def nearest(key: str, known: Iterable[str]) -> str | None:
    """The known key closest to ``key``, or None when none is close."""
    matches = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return matches[0] if matches else None


def unknown_key_message(keys: Iterable[str], known: Iterable[str], prefix: str = "") -> str:
    """"unknown key model.hiden_size (did you mean model.hidden_size?)", for each key."""
    known = sorted(set(known))
    parts = []
    for key in sorted(keys):
        near = nearest(key, known)
        if near is not None:
            hint = f"did you mean {prefix}{near}?"
        else:
            listed = ", ".join(known[:SHOWN]) + (", ..." if len(known) > SHOWN else "")
            hint = f"known: {listed}"
        parts.append(f"{prefix}{key} ({hint})")
    return f"unknown key{'s' if len(parts) > 1 else ''} " + "; ".join(parts)


def check_keys(given: Iterable[str], known: Iterable[str], where: str, prefix: str = "") -> None:
    """Raise one PlmbenchError line, ``where: unknown key ...``, when ``given`` holds a key that
    is not ``known``; ``prefix`` (``model.``) is how the keys are written on a command line."""
    known = set(known)
    unknown = [key for key in given if key not in known]
    if unknown:
        raise PlmbenchError(f"{where}: {unknown_key_message(unknown, known, prefix)}; "
                            "correct or remove it")
