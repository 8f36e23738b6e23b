"""The pretraining recipe a record names: what a comparison of pretrained models must hold fixed
or set apart (RoBERTa, Liu et al. 2019, §4: masking, the sentence-pair task, input format and
length, batch, schedule).

``recipe_of`` reads it from a run's resolved config: the objective (``conf/objective``, as the
model preset names it, ``bench/run/execute.py normalize``), the task's lengths and packing, the
batch, steps, peak learning rate and warmup. Its ``text`` is what the pretrain and GLUE boards show
in their ``recipe`` column: "mlm_nsp: NSP, static x10, 128 tok (pairs), batch 256, 1M steps, lr
1e-4, warmup 1%". A fine-tuning record carries the recipe of the pretraining behind its
checkpoint (``pretraining.recipe``, ``bench/run/provenance.py``).
"""

from __future__ import annotations

from collections.abc import Mapping


def _masking(objective: Mapping) -> str:
    """Static or dynamic, and the unit masked (tokens, whole words, n-grams, spans)."""
    if "static" not in objective:  # objectives without a masking step (causal LM, PLM)
        return ""
    when = f"static x{objective.get('dupe_factor', 1)}" if objective["static"] else "dynamic"
    if objective.get("geometric_p") is not None:
        unit = f"spans Geo({objective['geometric_p']:g})"
    elif (objective.get("max_ngram") or 1) > 1:
        unit = f"n-grams <={objective['max_ngram']}"
    elif objective.get("whole_word"):
        unit = "whole words"
    else:
        unit = "tokens"
    return f"{when} {unit}"


def _lengths(task: Mapping) -> str:
    """"128", or the schedule: "128 (90%) -> 512 (10%)"."""
    schedule = task.get("length_schedule")
    if schedule:
        return " -> ".join(f"{length} ({share:.0%})" for share, length in schedule)
    return str(task.get("max_length"))


def _format(objective: Mapping, task: Mapping) -> str:
    """How examples are cut: sentence pairs, FULL-SENTENCES across documents, or within one."""
    if objective.get("nsp") or objective.get("sop"):
        return "pairs"
    packing = task.get("packing") or {}
    if not packing.get("enabled"):
        return "one block per example"
    return "full-sentences" if packing.get("cross_documents") else "doc-sentences"


def _length(steps: object, epochs: object) -> str:
    """"1M steps", "10,000 steps"; a run bounded by epochs alone (max_steps -1): "10 epochs"."""
    if isinstance(steps, int) and steps >= 0:
        return f"{steps / 1e6:g}M steps" if steps >= 1_000_000 else f"{steps:,} steps"
    return f"{epochs} epochs" if isinstance(epochs, int) and epochs >= 0 else "unbounded"


def recipe_of(config: Mapping) -> dict:
    """The recipe of a pretraining run's resolved config (module docstring)."""
    objective = config.get("objective") or {}
    task, optim = config.get("task") or {}, config.get("optim") or {}
    trainer = config.get("trainer") or {}
    pair = "NSP" if objective.get("nsp") else "SOP" if objective.get("sop") else None
    recipe = {
        "objective": objective.get("name"),
        "pair_task": pair,
        "masking": _masking(objective) or None,
        "lengths": _lengths(task),
        "format": _format(objective, task),
        "batch_size": task.get("batch_size"),
        "steps": trainer.get("max_steps"),
        "epochs": trainer.get("max_epochs"),
        "lr": optim.get("lr"),
        "warmup_ratio": optim.get("warmup_ratio"),
    }
    parts = [pair, recipe["masking"], f"{recipe['lengths']} tok ({recipe['format']})",
             f"batch {recipe['batch_size']}", _length(recipe["steps"], recipe["epochs"]),
             f"lr {recipe['lr']:g}" if isinstance(recipe["lr"], int | float) else None,
             f"warmup {recipe['warmup_ratio']:.0%}"
             if isinstance(recipe["warmup_ratio"], int | float) else None]
    recipe["text"] = f"{recipe['objective']}: " + ", ".join(p for p in parts if p)
    return recipe
