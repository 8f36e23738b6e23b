"""A fine-tuned checkpoint's classes in the task's order.

A Hugging Face classifier numbers its classes as its ``config.json``'s ``id2label`` says: an MNLI
model may be contradiction / neutral / entailment where plmbench's task is entailment / neutral /
contradiction. Predicting with row i of its head as our class i would swap entailment and
contradiction, so the head's output rows are reordered into the task's order when it is loaded:
every prediction, metric and further fine-tuning step then speaks the task's labels.

Names are matched case-, space-, hyphen- and underscore-insensitively ("ENTAILMENT",
"not entailment" and "not_entailment" are one name). transformers' generic names (``LABEL_0``,
``LABEL_1`` ...: a checkpoint saved without names) say nothing about which class is which, so such
a head is refused unless ``task.checkpoint_labels`` names the checkpoint's classes in its id order
with the task's names; the same setting maps a checkpoint whose names differ from the task's, and
``task.checkpoint_labels=new`` trains a new head instead.
"""

import json
import re
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from datamodules.errors import PlmbenchError

#: transformers' names for classes it was given no names for
GENERIC = re.compile(r"^label_?\d+$", re.IGNORECASE)
#: ``task.checkpoint_labels`` value that leaves the checkpoint's head out
NEW_HEAD = "new"


def normalized(name: str) -> str:
    """A label name as names are compared: lower case, without spaces, hyphens, underscores."""
    return re.sub(r"[\s_\-]+", "", str(name).lower())


def checkpoint_labels(directory: str | Path) -> list[str]:
    """config.json's ``id2label`` of a checkpoint, in id order; a checkpoint saved without
    names (transformers 5 writes ``id2label: null``) has ``num_labels`` unnamed classes,
    ``LABEL_<i>`` (empty when it says neither)."""
    config = json.loads((Path(directory) / "config.json").read_text())
    id2label = config.get("id2label") or {}
    count = len(id2label) if id2label else config.get("num_labels")
    count = count if isinstance(count, int) and not isinstance(count, bool) else 0
    return [str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}"))) for i in range(count)]


def label_order(theirs: Sequence[str], ours: Sequence[str], where: str,
                given: Sequence[str] | None = None) -> list[int]:
    """``order`` such that the checkpoint's class ``order[i]`` is our class ``i``.

    ``theirs``: the checkpoint's names in id order; ``given``: the user's names for them
    (``task.checkpoint_labels``), which take their place; ``where`` names the checkpoint in the
    one-line refusal when the names cannot be matched."""
    names = list(given) if given is not None else list(theirs)
    setting = f"set task.checkpoint_labels to the task's names in the checkpoint's id order " \
              f"(from {list(ours)})"
    if given is None and not names:
        raise PlmbenchError(
            f"{where}: the checkpoint's classes are unnamed (its config.json has no id2label), "
            f"so which is which is unknown; {setting}, or task.checkpoint_labels={NEW_HEAD} for "
            "a new head")
    if given is None and len(names) != len(ours):
        raise PlmbenchError(f"{where}: the checkpoint's head has {len(names)} classes, the task "
                            f"{len(ours)} ({list(ours)}); task.checkpoint_labels={NEW_HEAD} "
                            "trains a new head")
    if len(names) != len(ours):
        raise PlmbenchError(f"{where}: task.checkpoint_labels names {len(names)} classes, the "
                            f"checkpoint's head has {len(ours)}; {setting}")
    if given is None and all(GENERIC.match(name) for name in names):
        raise PlmbenchError(
            f"{where}: the checkpoint's classes are unnamed ({', '.join(names)}), so which is "
            f"which is unknown; {setting}, or task.checkpoint_labels={NEW_HEAD} for a new head")
    index = {normalized(name): i for i, name in enumerate(names)}
    order = [index.get(normalized(name)) for name in ours]
    if None in order or len(index) != len(names):
        raise PlmbenchError(
            f"{where}: the checkpoint's classes {names} are not the task's {list(ours)}; "
            f"{setting} if they are the same classes, or task.checkpoint_labels={NEW_HEAD} for "
            "a new head")
    return order


def reorder_rows(linear: nn.Linear, order: Sequence[int]) -> None:
    """Row i of ``linear`` (weight and bias) becomes its row ``order[i]``."""
    index = torch.tensor(list(order))
    with torch.no_grad():
        linear.weight.copy_(linear.weight[index].clone())
        if linear.bias is not None:
            linear.bias.copy_(linear.bias[index].clone())
