"""What tells the points of a sweep apart, in the words of their configs.

Records of one label but different protocols (a learning-rate sweep, the BERT paper's grid) are
different rows of a board, and best-on-dev selection picks one of them per task. Both name a
point by the values that differ between the points, read from the records' own configs
(``optim.lr=3e-05, task.batch_size=16``), never by a hash: the settings of a record are its
config as the protocol hash sees it (``bench.config_identity.canonical_config``: no seed,
paths, label or task identity, but the task keys its command line changed), flattened to
dotted keys; a task key one point's command line set reads, for the others, from their
resolved configs (``resolved``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Hashable, Mapping

from bench.config_identity import canonical_config, task_keys_of
from bench.record import Record

#: what a key a point lacks shows as
UNSET = "unset"


def _flat(value: object, prefix: str, into: dict[str, str]) -> dict[str, str]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _flat(item, f"{prefix}.{key}" if prefix else str(key), into)
    else:
        into[prefix] = value if isinstance(value, str) else json.dumps(value)
    return into


def settings(record: Record) -> dict[str, str]:
    """The record's training settings, flat (``optim.lr`` -> ``3e-05``); {} without a config."""
    if not record.config:
        return {}
    keys = task_keys_of(record.variant)
    return _flat(canonical_config(record.config, ignore_task=True, task_keys=keys), "", {})


def resolved(settings_of: Mapping[Hashable, dict[str, str]],
             configs: Mapping[Hashable, Mapping]) -> None:
    """Fill each point's task keys that another point's command line set (``task.x``) from its
    own resolved config: a point that got ``max_train_samples`` 2000 from its experiment, not
    from its command line, shows 2000, not ``unset``; ``UNSET`` stays for a key its config
    lacks too."""
    keys = {key for point in settings_of.values() for key in point if key.startswith("task.")}
    for name, point in settings_of.items():
        task = (configs.get(name) or {}).get("task")
        for key in keys - point.keys():
            value = _at(task, key.split(".")[1:])
            if value is not None:
                _flat(value, key, point)


def _at(value: object, path: list[str]) -> object:
    for part in path:
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def differing(settings_of: Mapping[Hashable, Mapping[str, str]]
              ) -> dict[Hashable, dict[str, str]]:
    """For each point, its values of the keys on which the points differ, sorted by key."""
    keys = sorted({key for r in settings_of.values() for key in r
                   if len({other.get(key, UNSET) for other in settings_of.values()}) > 1})
    return {point: {key: r.get(key, UNSET) for key in keys} for point, r in settings_of.items()}


def point_text(values: Mapping[str, str]) -> str:
    """``optim.lr=3e-05, task.batch_size=16``."""
    return ", ".join(f"{key}={value}" for key, value in values.items())


#: the longest settings text a row name carries after its label; a longer one is cut and
#: ends in a hash of the row's protocol, so it stays unique
MAX_POINT = 40


def _short_value(value: str) -> str:
    """A path's last component (``ckpt:<results_dir>/glue/rte/x/seed0`` -> ``seed0``'s run, as
    ``x/seed0``), any other value as it is."""
    if "/" not in value:
        return value
    parts = [part for part in value.split("/") if part]
    return "/".join(parts[-2:]) if parts else value


def _shown_keys(keys: list[str]) -> dict[str, str]:
    """Each dotted key as its shortest suffix that no other of ``keys`` ends in (``optim.lr``
    -> ``lr``)."""
    shown = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            suffix = ".".join(parts[-n:])
            if not any(other != key and (other == suffix or other.endswith("." + suffix))
                       for other in keys):
                break
        shown[key] = suffix
    return shown


def _telling_keys(values: Mapping[Hashable, Mapping[str, str]]) -> list[str]:
    """The fewest keys (greedily) whose values tell the points apart: each step takes the key
    that splits them into the most groups, the shorter on a tie; settings a person types (a
    learning rate, a size) before paths (a checkpoint), which only tell apart what they leave."""
    def is_path(key: str) -> bool:
        return any("/" in point.get(key, "") for point in values.values())

    keys = sorted({key for point in values.values() for key in point},
                  key=lambda k: (is_path(k), len(k), k))
    chosen: list[str] = []

    def groups(with_keys: list[str]) -> int:
        return len({tuple(p.get(k, UNSET) for k in with_keys) for p in values.values()})

    for paths in (False, True):
        pool = [k for k in keys if is_path(k) == paths]
        while pool and groups(chosen) < len(values):
            best = max(pool, key=lambda k: groups([*chosen, k]))  # the first of equals
            if groups([*chosen, best]) == groups(chosen):
                break
            chosen.append(best)
            pool.remove(best)
    return sorted(chosen, key=keys.index)


def row_points(keys: list[tuple[str, str]], settings_of: Mapping[tuple[str, str], Mapping]
               ) -> dict[tuple[str, str], dict[str, str]]:
    """Each (label, protocol)'s settings that differ from the other rows of its label (all of
    them: what its short name abbreviates); {} for a label of one row."""
    by_label = defaultdict(list)
    for label, protocol in keys:
        by_label[label].append(protocol)
    points = {}
    for label, found in by_label.items():
        values = differing({p: settings_of.get((label, p), {}) for p in found}) \
            if len(found) > 1 else {found[0]: {}}
        points.update({(label, p): values[p] for p in found})
    return points


def row_names(keys: list[tuple[str, str]], settings_of: Mapping[tuple[str, str], Mapping]
               ) -> dict[tuple[str, str], str]:
    """Each (label, protocol)'s row name, short and stable: the label, followed, where a label
    has several protocols (a sweep), by the fewest settings that tell its points apart, keys by
    their last component (``minilm-l6 lr=0.0001``), paths by their last two; a short protocol
    hash where the configs show no difference (records of another code version) or the text
    would run past ``MAX_POINT`` characters. ``row_points`` gives each row's settings whole."""
    points = row_points(keys, settings_of)
    by_label = defaultdict(list)
    for label, protocol in keys:
        by_label[label].append(protocol)
    names = {}
    for label, found in by_label.items():
        if len(found) == 1:
            names[label, found[0]] = label
            continue
        values = {p: points[label, p] for p in found}
        chosen = _telling_keys(values)
        shown = _shown_keys(chosen)
        for protocol in found:
            text = " ".join(f"{shown[k]}={_short_value(values[protocol].get(k, UNSET))}"
                            for k in chosen)
            if len(text) > MAX_POINT:
                text = f"{text[:MAX_POINT - 1]}… [{protocol[:6]}]"
            names[label, protocol] = f"{label} {text}" if text else f"{label} [{protocol[:6]}]"
        shown_names = [names[label, p] for p in found]
        for protocol in found:  # still alike: the hash tells them apart
            if shown_names.count(names[label, protocol]) > 1:
                names[label, protocol] += f" [{protocol[:6]}]"
    return names


def full_name(label: str, point: Mapping[str, str]) -> str:
    """A row's name as boards wrote it before short names: every differing setting, which
    ``plmbench significance`` still accepts."""
    return f"{label} ({point_text(point)})" if point else label
