"""A fine-tuning method for tests: ``full``, plus the gradients of the run's first optimizer step
saved (by the global rank 0, after DDP's all-reduce and any accumulation, before clipping) to
``path``: ``finetune._target_=tests.bench.run.first_step.FirstGradients +finetune.path=<file>``."""

from pathlib import Path

import lightning as L
import torch

from lit_models.core.finetune import FinetuneMethod


class SaveFirstGradients(L.Callback):
    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        if trainer.global_step == 0 and trainer.is_global_zero:
            torch.save({name: p.grad.detach().clone() for name, p in pl_module.named_parameters()
                        if p.grad is not None}, self.path)


class FirstGradients(FinetuneMethod):
    def __init__(self, name: str = "full", path: str = "") -> None:
        super().__init__(name)
        self.path = path

    def apply(self, module, net) -> None:
        module.finetune_callbacks.append(SaveFirstGradients(self.path))
