"""Head importance and pruning of a fine-tuned classifier (``task=analysis/head_pruning``).

Michel et al. 2019, "Are Sixteen Heads Really Better than One?", §4: the importance of every
head on held-out examples (``task.importance``: by default training rows the fine-tuned run did
not train on, never the examples that score the curve, which would choose the heads to keep on
the test of that choice), then the pruning curve (remove the least important share
of heads, recompute, ...; ``lit_models/families/head_importance.py``), each step scored with
the task's own metrics. The model at the step that keeps ``task.keep`` of the heads is then pruned
for real (its heads removed from the weights, ``lit_models/nets/pruning.py``), scored again,
measured (parameters, size on disk, CPU latency: ``lit_models/measure/footprint.py``) against the
unpruned one, and exported with ``save_model=true`` (transformers 4's ``pruned_heads`` config;
``init_from=ckpt:`` of the run loads the smaller net). The record's ``analysis`` holds the
curve; ``head_pruning.html`` in the run directory plots the score against the share of heads
kept and maps each step's importance per layer and head.

The task is the fine-tuned run's own (``task.target``, resolved by the run from the record of
``init_from=ckpt:<run dir>``, or named), evaluated on its eval splits; the first split and the
task's first metric make the curve.
"""

import copy
import logging
from collections.abc import Mapping
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from datamodules.errors import PlmbenchError
from datamodules.files import atomic_write_text
from datamodules.init_from import InitFrom
from lit_models.archs import Model
from lit_models.core import svg
from lit_models.families.classify import LitClassifier
from lit_models.families.compression import TargetFamily, measured
from lit_models.families.head_importance import (
    PruningStep,
    head_importance,
    masked_heads,
    pruning_curve,
    removed_heads,
)
from lit_models.interop.hf import has_task_head

log = logging.getLogger("plmbench")
PAGE = "head_pruning.html"


def example_losses(module: LitClassifier):
    """Each example's loss: cross-entropy, or squared error for regression (STS-B)."""
    def losses(batch: Mapping) -> torch.Tensor:
        scores, labels = module(batch).float(), batch["labels"]
        if module.num_labels == 1:
            return (scores - labels.float()) ** 2
        return F.cross_entropy(scores, labels, reduction="none")
    return losses


class HeadPruning(TargetFamily):
    kinds = ("encoder", "decoder")

    def build(self, cfg, model: Model, init_from: InitFrom):
        task = cfg["task"]
        if init_from.scratch or not has_task_head(init_from.directory(), "classifier"):
            raise PlmbenchError(f"task {task['name']} prunes a fine-tuned classifier: set "
                                "init_from=ckpt:<run dir> of a classification run saved with "
                                "save_model=true (or hf:<dir> of a *ForSequenceClassification "
                                "checkpoint, with task.target=<its task>)")
        keep, step = task["keep"], task["step"]
        if keep is not None and not 0 < keep <= 1:
            raise PlmbenchError(f"task.keep={keep}: the share of heads the pruned model keeps is "
                                "in (0, 1], or null for the curve alone")
        if not 0 < step <= 1:
            raise PlmbenchError(f"task.step={step}: the share of all heads removed at each step "
                                "is in (0, 1] (Michel et al. 2019: 0.1)")
        module, dm = super().build(cfg, model, init_from)
        if not isinstance(module, LitClassifier):
            raise PlmbenchError(f"task {task['name']} prunes sequence classifiers; "
                                f"{self.target['name']} is no classification task")
        self.importance_rows = importance_rows(task)
        self.findings = None
        return module, dm

    def predict(self, trainer, module, dm, run_dir: Path, cfg) -> dict[str, str]:
        task = cfg["task"]
        split, metric = dm.eval_split_names[0], self.target["metrics"][0]

        def evaluate(mask: torch.Tensor | None) -> dict:
            with masked_heads(module.encoder, mask):
                trainer.validate(module, datamodule=dm, verbose=False)
            return {name: dict(values) for name, values in module.last_metrics.items()}

        device = trainer.strategy.root_device
        split_of, start, count = self.importance_rows
        held_out = dm.held_out(split_of, start, count)
        if len(held_out) == 0:
            raise PlmbenchError(f"task.importance: split {split_of} has no rows from row {start} "
                                "on; lower task.importance.skip or name another split")
        # every process computes the same importance over all of them (the mask must agree)
        importance_batches = DataLoader(held_out, batch_size=dm.eval_batch_size,
                                        collate_fn=dm.collate_fn)

        def importance(mask: torch.Tensor) -> torch.Tensor:
            module.to(device).eval()
            return head_importance(module.encoder, example_losses(module), importance_batches,
                                   mask, device)

        layers = len(module.encoder.head_layers())
        shape = (layers, module.encoder.config.num_attention_heads)
        steps = pruning_curve(evaluate, importance, shape, task["step"],
                              task["normalize_by_layer"])
        # a copy: an evaluation fills module.last_metrics[split] in place, and the final one
        # (of the pruned model) would otherwise overwrite the curve's unpruned point
        module.last_metrics = copy.deepcopy(steps[0].metrics)
        unpruned = measured(module, dm, task, self.target)
        kept = self.pruned_model(module, steps, task["keep"], shape)
        # the model the record scores (the pruned one, else the unpruned one) evaluated once more:
        # its metrics and its predictions file (``evaluation_outputs``) agree
        evaluate(None)
        module.last_metrics = {**module.last_metrics,
                               "compression": measured(module, dm, task, self.target)}
        self.findings = {
            "metric": metric, "split": split, "step": task["step"],
            "heads": shape[0] * shape[1], "layers": shape[0],
            "importance": {"split": split_of, "rows": [start, start + len(held_out)]},
            "curve": [{"heads_kept": s.heads_kept, "share_kept": s.heads_kept / steps[0].heads_kept,
                       "score": s.metrics[split][metric], "metrics": s.metrics,
                       "removed": s.removed,
                       "importance": None if s.importance is None else s.importance.tolist()}
                      for s in steps],
            "pruned": None if kept is None else {
                "heads_kept": kept.heads_kept, "removed": removed_heads(kept.mask),
                "masked_metrics": kept.metrics, "unpruned": unpruned},
            "page": PAGE,
        }
        atomic_write_text(run_dir / PAGE, pruning_page(steps, metric, split, kept, cfg,
                                                        self.findings["importance"]))
        return {}

    @staticmethod
    def pruned_model(module: LitClassifier, steps: list[PruningStep], keep: float | None,
                     shape: tuple[int, int]) -> PruningStep | None:
        """Remove from ``module``'s weights the heads of the step that keeps ``keep`` of them
        (the fewest heads at least that share); None without ``keep``, or where the layers share
        their heads (ALBERT), which is logged."""
        if keep is None:
            return None
        total = shape[0] * shape[1]
        chosen = min((s for s in steps if s.heads_kept >= keep * total),
                     key=lambda s: s.heads_kept)
        try:
            module.encoder.prune_heads(removed_heads(chosen.mask))
        except ValueError as err:
            log.warning("the pruned model is not built: %s", err)
            return None
        return chosen

    def analysis(self, module):
        return self.findings

    def export(self, module, model, run_dir, cfg) -> None:
        if cfg["save_model"] and self.findings and self.findings["pruned"]:
            self.inner.export(module, model, run_dir, {**cfg, "task": self.target})


def importance_rows(task: Mapping) -> tuple[str, int, int]:
    """(split, first row, rows) head importance is computed on (``task.importance``): by default
    the target's training split after the rows its fine-tuned run trained on (its
    ``max_train_samples``); never a split the run scores. One line where that cannot be told."""
    target, chosen = task["target"], task["importance"]
    train = target["splits"]["train"]
    split = chosen["split"] or train
    scored = list(task["splits"]["eval"])
    if split is None or split in scored:
        raise PlmbenchError(
            f"task.importance.split={split}: head importance is computed on examples other than "
            f"those that score the pruned model ({', '.join(scored)}); name a split the run does "
            f"not score (e.g. the target's training split)")
    skip = chosen["skip"]
    if skip is None and split == train:
        skip = target.get("max_train_samples")
        if skip is None:
            raise PlmbenchError(
                f"task.importance: the fine-tuned run trained on all of {target['name']}'s "
                f"{train} split, so none of its rows is held out; set task.importance.skip=<the "
                "rows it trained on> (0 for rows it may have seen) or task.importance.split=<a "
                "split it neither trained on nor is scored on>")
    if not isinstance(chosen["samples"], int) or chosen["samples"] < 1:
        raise PlmbenchError(f"task.importance.samples={chosen['samples']}: the number of "
                            "held-out examples head importance is averaged over, at least 1")
    return split, skip or 0, chosen["samples"]


def pruning_page(steps: list[PruningStep], metric: str, split: str, kept: PruningStep | None,
                 cfg: Mapping, importance: Mapping) -> str:
    """The curve (score against the share of heads kept) and each step's importance map."""
    total = steps[0].heads_kept
    curve = svg.Series(f"{split} {metric}", [(s.heads_kept / total, s.metrics[split][metric],
                                              f"{s.heads_kept}") for s in steps], line=True)
    figures = [svg.plot(f"{cfg['task']['target']['name']}: {split} {metric} against the share "
                        "of heads kept (Michel et al. 2019, Figure 3)", "curve", [curve],
                        "share of heads kept", metric, label_points=False)]
    for s in steps[1:]:
        rows = [f"layer {i}" for i in range(s.importance.shape[0])]
        columns = [f"head {j}" for j in range(s.importance.shape[1])]
        figures.append(svg.heatmap(
            f"importance at {s.heads_kept + len(s.removed)} heads kept (normalised per layer; "
            f"removed next: {', '.join(f'{i}.{j}' for i, j in s.removed)})",
            f"importance-{s.heads_kept + len(s.removed)}", s.importance.tolist(), rows, columns,
            "layer", "head"))
    first, end = importance["rows"]
    note = (f"model {cfg['model']['name']} from {cfg['init_from']}; importance = E|dL/d xi_h| "
            f"on rows {first} to {end - 1} of {importance['split']} (scored on {split}); a share "
            f"{cfg['task']['step']} of the heads removed at each step")
    if kept is not None:
        note += f"; the exported model keeps {kept.heads_kept} of {total} heads"
    return svg.page("Head importance and pruning", ['<div class="plots">', *figures, "</div>"],
                    note)
