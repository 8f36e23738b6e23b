"""``finetune=ulmfit``: Howard & Ruder 2018, "Universal Language Model Fine-tuning for Text
Classification", §3.2-3.3, on a Transformer.

- Discriminative fine-tuning (§3.2, eq. 2): each layer its own learning rate, eta^{l-1} =
  eta^l / 2.6, the head at the task's rate. That is ``optim.layerwise_lr_decay`` = 1 / 2.6
  (``lit_models/core/optim.py``: embeddings are layer 0, the head and pooler layer L + 1), set by
  ``conf/finetune/ulmfit.yaml``.
- Slanted triangular learning rates (§3.2, eq. 3): ``optim.schedule: slanted_triangular``, cut_frac
  0.1 (``optim.warmup_ratio``), set by the same file, and ratio 32 (``finetune.stlr_ratio``).
- Gradual unfreezing (§3.3): first only the last layer group trains (the head), then at each stage
  the next lower group unfreezes, down to the embeddings. A stage is an epoch, as in the paper, or
  ``unfreeze_every`` steps (a run of a few hundred steps is one epoch of a small task). Under
  DDP the groups not yet unfrozen get no gradient:
  ``trainer.strategy=ddp_find_unused_parameters_true``.
"""

import lightning as L
from torch import nn

from datamodules.errors import PlmbenchError
from lit_models.core.finetune import FinetuneMethod
from lit_models.core.optim import layer_depth


class GradualUnfreezing(L.Callback):
    """At stage s (epoch s, or step // ``every``) the groups of depth >= L + 1 - s train."""

    def __init__(self, module: nn.Module, num_layers: int, every: int | None) -> None:
        self.num_layers, self.every = num_layers, every
        self.depths = {name: layer_depth(name, num_layers)
                       for name, _ in module.named_parameters()}
        self.stage: int | None = None

    def stage_at(self, epoch: int, step: int) -> int:
        return epoch if self.every is None else step // self.every

    def lowest_trained_depth(self, stage: int) -> int:
        return max(0, self.num_layers + 1 - stage)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        stage = self.stage_at(trainer.current_epoch, trainer.global_step)
        if stage == self.stage:
            return
        self.stage = stage
        lowest = self.lowest_trained_depth(stage)
        for name, param in pl_module.named_parameters():
            param.requires_grad_(self.depths[name] >= lowest)


class ULMFiT(FinetuneMethod):
    def __init__(self, name: str = "ulmfit", unfreeze_every: int | None = None,
                 stlr_ratio: float = 32.0) -> None:
        super().__init__(name)
        if unfreeze_every is not None and unfreeze_every < 1:
            raise PlmbenchError(f"finetune.unfreeze_every={unfreeze_every}: give a number of "
                                "steps >= 1, or null to unfreeze a group per epoch")
        if stlr_ratio < 1:
            raise PlmbenchError(f"finetune.stlr_ratio={stlr_ratio}: the lowest rate is the "
                                "maximum / ratio; give a ratio >= 1 (the paper's 32)")
        self.unfreeze_every, self.stlr_ratio = unfreeze_every, stlr_ratio

    def apply(self, module, net) -> None:
        module.optim_cfg["stlr_ratio"] = self.stlr_ratio  # read by optim.py's schedule
        module.finetune_callbacks.append(
            GradualUnfreezing(module, module.num_layers, self.unfreeze_every))
