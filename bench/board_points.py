"""What tells the points of a sweep apart, in the words of their configs.

Records of one label but different protocols (a learning-rate sweep, the BERT paper's grid) are
different rows of a board, and best-on-dev selection picks one of them per task. Both name a
point by the values that differ between the points, read from the records' own configs
(``optim.lr=3e-05, task.batch_size=16``), never by a hash: the settings of a record are its
config as the protocol hash sees it (``bench.records.canonical_config``: no seed, paths, label or
task identity, but the task keys its command line changed), flattened to dotted keys.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Hashable, Mapping

from bench.records import canonical_config, task_keys_of

#: what a key a point lacks shows as
UNSET = "unset"


def _flat(value: object, prefix: str, into: dict[str, str]) -> dict[str, str]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _flat(item, f"{prefix}.{key}" if prefix else str(key), into)
    else:
        into[prefix] = value if isinstance(value, str) else json.dumps(value)
    return into


def settings(record: Mapping) -> dict[str, str]:
    """The record's training settings, flat (``optim.lr`` -> ``3e-05``); {} without a config."""
    config = record.get("config")
    if not isinstance(config, Mapping):
        return {}
    keys = task_keys_of(record.get("variant") or [])
    return _flat(canonical_config(config, ignore_task=True, task_keys=keys), "", {})


def differing(settings_of: Mapping[Hashable, Mapping[str, str]]
              ) -> dict[Hashable, dict[str, str]]:
    """For each point, its values of the keys on which the points differ, sorted by key."""
    keys = sorted({key for r in settings_of.values() for key in r
                   if len({other.get(key, UNSET) for other in settings_of.values()}) > 1})
    return {point: {key: r.get(key, UNSET) for key in keys} for point, r in settings_of.items()}


def point_text(values: Mapping[str, str]) -> str:
    """``optim.lr=3e-05, task.batch_size=16``."""
    return ", ".join(f"{key}={value}" for key, value in values.items())


def row_names(keys: list[tuple[str, str]], settings_of: Mapping[tuple[str, str], Mapping]
               ) -> dict[tuple[str, str], str]:
    """Each (label, protocol)'s row name: the label, followed, where a label has several
    protocols (a sweep), by the config values that tell its points apart; a short protocol hash
    only where the configs show no difference (records of another code version, say)."""
    by_label = defaultdict(list)
    for label, protocol in keys:
        by_label[label].append(protocol)
    names = {}
    for label, found in by_label.items():
        if len(found) == 1:
            names[label, found[0]] = label
            continue
        values = differing({p: settings_of.get((label, p), {}) for p in found})
        for protocol in found:
            text = point_text(values[protocol])
            names[label, protocol] = f"{label} ({text})" if text else f"{label} [{protocol[:6]}]"
        shown = [names[label, p] for p in found]
        for protocol in found:  # still alike: the hash tells them apart
            if shown.count(names[label, protocol]) > 1:
                names[label, protocol] += f" [{protocol[:6]}]"
    return names
