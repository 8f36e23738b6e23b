"""Fine-tuning methods: how a run trains a pretrained net on its task, orthogonal to the
architecture and the task (the ``finetune`` config group, ``conf/finetune/*.yaml``, each naming
its class by ``_target_``).

- ``full`` (``FinetuneMethod``): every weight trains (Devlin et al. 2019, §4), today's behaviour;
- ``frozen`` (``frozen.py``): the encoder does not train; its chosen layers feed the task head
  (the feature-based approach, Devlin et al. 2019, §5.3, Table 7);
- ``adapters`` (``adapters.py``): bottleneck adapters in every layer, only they, the layer norms
  and the head train (Houlsby et al. 2019);
- ``ulmfit`` (``ulmfit.py``): gradual unfreezing, discriminative learning rates and the slanted
  triangular schedule (Howard & Ruder 2018, §3.2).

A method acts twice on a run: ``prepare`` changes the net before the task family builds its
modules around it (adapters go in, layer features come out), ``apply`` decides what trains once
the LightningModule exists (``requires_grad``, callbacks in ``PlmModule.finetune_callbacks``).
The record counts what trained (``trained_parameters``).
"""

from collections.abc import Mapping

from torch import nn

from datamodules.errors import PlmbenchError
from lit_models.archs import Baseline, get_model
from lit_models.core.module import PlmModule


class FinetuneMethod:
    """``full``: every weight of the net and the head trains. ``name``: the config's."""

    def __init__(self, name: str = "full") -> None:
        self.name = name

    #: whether the net keeps the architecture's weights only, so ``save_model`` exports it
    exportable: bool = True

    def check(self, family, cfg: Mapping) -> None:
        """Refuse, in one line, what this method cannot do: only ``full`` pretrains, and a net
        with weights of the method's own (adapters, a scalar mix) has no transformers layout."""
        task, arch = cfg["task"], cfg["model"]["arch"]
        if isinstance(get_model(arch), Baseline) and self.name != "full":
            raise PlmbenchError(f"model.arch={arch} is no pretrained Transformer for "
                                f"finetune={self.name}; run it with finetune=full (a BiLSTM over "
                                "a frozen encoder's layers: model.inputs.encoder=hf:<dir>)")
        if family.pretrains and self.name != "full":
            raise PlmbenchError(f"task {task['name']} pretrains, and finetune={self.name} "
                                "applies to fine-tuning a pretrained net; run it with "
                                "finetune=full")
        if cfg.get("save_model") and not self.exportable:
            raise PlmbenchError(f"finetune={self.name} adds weights transformers' classes have "
                                "no place for; run without save_model=true")

    def prepare(self, net: nn.Module) -> None:
        """Change ``net`` before the family builds its modules around it."""

    def apply(self, module: PlmModule, net: nn.Module) -> None:
        """Decide what trains in ``module`` (which holds ``net``)."""

    @staticmethod
    def trained_parameters(module: nn.Module) -> int:
        """The parameters that train (at the run's end, for a method that unfreezes gradually);
        a parameter shared by several layers counts once."""
        return sum(p.numel() for p in module.parameters() if p.requires_grad)


def freeze_except(net: nn.Module, trained: tuple[type, ...]) -> None:
    """No gradient for ``net``'s weights but those of its ``trained`` modules."""
    net.requires_grad_(False)
    for submodule in net.modules():
        if isinstance(submodule, trained):
            submodule.requires_grad_(True)
