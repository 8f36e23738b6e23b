"""A fine-tuned model measured as it is or compressed after training (``task=compression/measure``,
``task=compression/quantize``): the rows of the ``compression`` board, beside the pruned
(``analysis/head_pruning``) and distilled (``compression/distill``) models.

Post-training dynamic quantization (torch's own ``torch.ao.quantization.quantize_dynamic``, as
Zafrir et al. 2019 and transformers' quantization notebook apply it to BERT): every Linear's
weights are stored as int8 (one scale per tensor), its activations quantized on the fly at each
call; the int8 kernels run on the CPU only. The model is then scored on the fine-tuned task's
eval splits (``task.target``: the task of the ``init_from`` run, as the other analyses read it)
and measured (``lit_models/measure/footprint.py``): parameters, size on disk, CPU latency.

Every compression record holds ``metrics.compression``: ``score`` (the target task's first metric
on its first eval split, times ``task.score_scale``: 100 for metrics on 0..1, as GLUE reports
them; 1 for SQuAD's EM/F1, already on 0..100), ``parameters``, ``size_mb``, ``latency_ms`` (per
example) and the CPU ``threads`` latency was measured on.
"""

from collections.abc import Mapping

import torch
from torch import nn
from torch.ao.quantization import quantize_dynamic
from torch.utils.data import DataLoader

from datamodules.base import PlmDataModule
from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from lit_models.archs import Model
from lit_models.core.family import TaskFamily, target_family, target_task
from lit_models.measure.footprint import footprint

#: task.method -> what is done to the fine-tuned model before it is measured
METHODS = ("none", "dynamic_int8")


def needs_fine_tuned(task: Mapping) -> PlmbenchError:
    return PlmbenchError(f"task {task['name']} measures a fine-tuned model: set init_from="
                         "ckpt:<run dir> of a run saved with save_model=true (or hf:<dir>, with "
                         "task.target=<its task>)")


def latency_batches(dm: PlmDataModule, latency: Mapping) -> list[Mapping]:
    """The first ``latency.batches`` batches of ``latency.batch_size`` examples of the first
    eval split."""
    loader = DataLoader(dm.eval_data[0], batch_size=latency["batch_size"],
                        collate_fn=dm.collate_fn)
    batches = []
    for batch in loader:
        if len(batches) == latency["batches"]:
            break
        batches.append(batch)
    return batches


def measured(module: nn.Module, dm: PlmDataModule, task: Mapping, target: Mapping) -> dict:
    """``metrics.compression`` of ``module`` after its last evaluation (``module.last_metrics``):
    the scaled score and its footprint (``module`` ends on the CPU)."""
    split = dm.eval_split_names[0]
    metrics = module.last_metrics.get(split)
    if not metrics:
        raise PlmbenchError(f"task {task['name']}: the evaluation of {target['name']} gave no "
                            f"metrics on {split}; check its eval splits")
    name = task.get("score_metric") or (target.get("metrics") or list(metrics))[0]
    if name not in metrics:
        raise PlmbenchError(f"task.score_metric={name} is none of {target['name']}'s metrics "
                            f"{sorted(metrics)}")
    latency = task["latency"]
    return {"score": metrics[name] * task["score_scale"],
            **footprint(module, module, latency_batches(dm, latency), latency["repeats"])}


class TargetFamily(TaskFamily):
    """A family that works on a fine-tuned run's model and task: the target task's family builds
    the modules (no training split), this one evaluates and measures. Encoders and decoders: an
    encoder-decoder's text-to-text tasks generate their answers, which ``measured`` does not
    time."""

    kinds = ("encoder", "decoder")

    def vocabulary_corpus(self, task):
        raise needs_fine_tuned(task)

    def build(self, cfg, model: Model, init_from: InitFrom):
        if init_from.scratch:
            raise needs_fine_tuned(cfg["task"])
        self.target = target_task(cfg["task"])
        self.inner = target_family(self.target, model.arch)
        return self.inner.build({**cfg, "task": self.target, "save_model": False}, model,
                                init_from)

    def evaluation_outputs(self, module, run_dir, cfg) -> dict[str, str]:
        """The target family's files of the last evaluation (a classifier's predictions beside
        their gold labels: what significance tests and the boards' constant floor read)."""
        return self.inner.evaluation_outputs(module, run_dir, {**cfg, "task": self.target})


class Compression(TargetFamily):
    """The fine-tuned model as it is (``method: none``: the board's reference row) or
    dynamically quantized to int8 (``method: dynamic_int8``), scored and measured."""

    def build(self, cfg, model: Model, init_from: InitFrom):
        method = cfg["task"]["method"]
        if method not in METHODS:
            raise PlmbenchError(f"task.method={method}: use one of {', '.join(METHODS)}")
        if method == "dynamic_int8" and cfg["trainer"]["accelerator"] not in ("cpu", "auto"):
            raise PlmbenchError("dynamic int8 quantization runs on the CPU only: run "
                                "task=compression/quantize with trainer=cpu")
        return super().build(cfg, model, init_from)

    def predict(self, trainer, module, dm, run_dir, cfg) -> dict[str, str]:
        task = cfg["task"]
        if task["method"] == "dynamic_int8":
            module.cpu()
            quantize_dynamic(module, {nn.Linear}, dtype=torch.qint8, inplace=True)
        trainer.validate(module, datamodule=dm, verbose=False)
        module.last_metrics["compression"] = measured(module, dm, task, self.target)
        return module.predictions

    def export(self, module, model, run_dir, cfg) -> None:
        """Nothing: the model is the fine-tuned run's (an int8 model has no transformers
        layout)."""
